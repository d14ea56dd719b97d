//! Guest agent endpoints (docs/proxmox-semantics.md §17). Every call first checks, in
//! Proxmox's order: `agent` key present (`No QEMU guest agent configured`),
//! VM running (`VM <id> is not running`), agent answering
//! (`QEMU guest agent is not running` until the VM has been up for
//! `timings.boot`, or while `agent` is disabled, or when a test forced it).
//!
//! `exec` does not run anything: the command is recorded and finishes after
//! `timings.agent_exec` with exit code 0 and empty output, except reading
//! `/run/cluster-api/bootstrap-success.complete`, which prints `success`
//! (the CAPI bootstrap sentinel) unless the guest could not use its
//! bootstrap data ([`crate::boot::GuestBoot::Failed`]: no such file). `exec-status` reports a finished process
//! once, as QGA does.

use serde_json::{Value, json};

use super::vm_on;
use crate::boot::GuestBoot;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::state::vm::{AgentState, GuestIface, Vm};

/// The CAPI bootstrap sentinel file.
const SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";

fn ready(ctx: &Ctx, vm: &Vm) -> Result<Vec<GuestIface>, ApiError> {
    if !vm.agent_configured() {
        return Err(ApiError::internal("No QEMU guest agent configured"));
    }
    let Some(run) = &vm.run else {
        return Err(ApiError::internal(format!("VM {} is not running", vm.vmid)));
    };
    let answering = match vm.agent {
        AgentState::NotRunning => false,
        AgentState::Running => true,
        AgentState::Auto => {
            vm.agent_enabled()
                && !run.paused
                && run.since.elapsed() >= ctx.cluster.clock.real(ctx.cluster.cfg.timings.boot)
        }
    };
    if !answering {
        return Err(ApiError::internal("QEMU guest agent is not running"));
    }
    Ok(run.ifaces.clone())
}

fn with_vm<T>(ctx: &Ctx, f: impl FnOnce(&Vm) -> Result<T, ApiError>) -> Result<T, ApiError> {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    f(vm)
}

fn stats() -> Value {
    json!({
        "rx-bytes": 0, "rx-dropped": 0, "rx-errs": 0, "rx-packets": 0,
        "tx-bytes": 0, "tx-dropped": 0, "tx-errs": 0, "tx-packets": 0
    })
}

/// `GET …/agent/network-get-interfaces`: `lo` plus one entry per NIC with
/// its MAC (lower-case) and addresses (static, DHCP lease, `fe80::` link-local).
pub(crate) fn network(ctx: &Ctx) -> ApiResult {
    let ifaces = with_vm(ctx, |vm| ready(ctx, vm))?;
    let mut result = vec![json!({
        "name": "lo",
        "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128}
        ],
        "statistics": stats(),
    })];
    for i in ifaces {
        let addrs: Vec<Value> = i
            .addrs
            .iter()
            .map(|(ip, prefix)| {
                json!({
                    "ip-address": ip.to_string(),
                    "ip-address-type": if ip.is_ipv4() { "ipv4" } else { "ipv6" },
                    "prefix": prefix,
                })
            })
            .collect();
        result.push(json!({
            "name": i.name,
            "hardware-address": i.mac,
            "ip-addresses": addrs,
            "statistics": stats(),
        }));
    }
    Ok(Reply::data(json!({ "result": result })))
}

/// `POST …/agent/ping`.
pub(crate) fn ping(ctx: &Ctx) -> ApiResult {
    with_vm(ctx, |vm| ready(ctx, vm))?;
    Ok(Reply::data(json!({"result": {}})))
}

/// `GET …/agent/get-osinfo`.
pub(crate) fn osinfo(ctx: &Ctx) -> ApiResult {
    with_vm(ctx, |vm| ready(ctx, vm))?;
    Ok(Reply::data(json!({"result": {
        "id": "ubuntu",
        "name": "Ubuntu",
        "pretty-name": "Ubuntu 24.04.1 LTS",
        "version": "24.04.1 LTS (Noble Numbat)",
        "version-id": "24.04",
        "kernel-release": "6.8.0-45-generic",
        "kernel-version": "#45-Ubuntu SMP PREEMPT_DYNAMIC",
        "machine": "x86_64"
    }})))
}

/// `POST …/agent/exec` (`command` = program and arguments): `{pid}`.
pub(crate) fn exec(ctx: &Ctx) -> ApiResult {
    let vmid = ctx.vmid()?;
    with_vm(ctx, |vm| ready(ctx, vm))?;
    let command = ctx.params.list("command");
    if command.is_empty() {
        return Err(ApiError::param(
            "command",
            "property is missing and it is not optional",
        ));
    }
    let mut st = ctx.cluster.lock();
    st.next_exec_pid += 1;
    let pid = st.next_exec_pid;
    st.exec.insert(
        (vmid, pid),
        crate::state::ExecState {
            started: std::time::Instant::now(),
            command,
        },
    );
    Ok(Reply::data(json!({"pid": pid})))
}

/// `GET …/agent/exec-status?pid=N`.
pub(crate) fn exec_status(ctx: &Ctx) -> ApiResult {
    let vmid = ctx.vmid()?;
    let pid = ctx
        .params
        .u32("pid")?
        .ok_or_else(|| ApiError::param("pid", "property is missing and it is not optional"))?;
    with_vm(ctx, |vm| ready(ctx, vm))?;
    let mut st = ctx.cluster.lock();
    let Some(e) = st.exec.get(&(vmid, pid)).cloned() else {
        return Err(ApiError::internal("Agent error: Invalid parameter 'pid'"));
    };
    if e.started.elapsed() < ctx.cluster.clock.real(ctx.cluster.cfg.timings.agent_exec) {
        return Ok(Reply::data(json!({"exited": 0})));
    }
    st.exec.remove(&(vmid, pid));
    let sentinel = e.command.iter().any(|a| a.contains(SENTINEL));
    let failed_boot = st
        .vms
        .get(&vmid)
        .and_then(|v| v.run.as_ref())
        .is_some_and(|r| matches!(r.boot, GuestBoot::Failed(_)));
    if sentinel && failed_boot {
        return Ok(Reply::data(json!({
            "exited": 1,
            "exitcode": 1,
            "err-data": format!("cat: {SENTINEL}: No such file or directory\n"),
        })));
    }
    let out = if sentinel { "success" } else { "" };
    Ok(Reply::data(
        json!({"exited": 1, "exitcode": 0, "out-data": out}),
    ))
}
