//! `status/current` and the power operations (docs/proxmox-semantics.md §16): start,
//! stop, shutdown, reboot, reset, suspend, resume. Each runs as a task that
//! takes the VM's flock (10 s), checks the VM, waits its duration and then
//! changes the state. HA-managed VMs get `hastart`/`hastop` tasks that finish
//! at once; the state changes `timings.ha_delay` later.

use std::time::Instant;

use serde_json::json;

use super::{check_skiplock, task_spec, uptime, vm_missing, vm_on};
use crate::guest;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::locks::LockMode;
use crate::state::vm::RunState;
use crate::state::{Cluster, ClusterState};
use crate::worker::{self, TaskCtx, TaskOk};

/// `GET /nodes/{node}/qemu/{vmid}/status/current`.
pub(crate) fn current(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let running = vm.running();
    let maxmem = vm.memory_mib() << 20;
    let mut v = json!({
        "vmid": vmid,
        "status": if running { "running" } else { "stopped" },
        "qmpstatus": match &vm.run { Some(r) if r.paused => "paused", Some(_) => "running", None => "stopped" },
        "uptime": uptime(ctx, vm),
        "cpus": vm.cpus(),
        "cpu": if running { 0.02 } else { 0.0 },
        "maxmem": maxmem,
        "mem": if running { maxmem / 10 * 3 } else { 0 },
        "maxdisk": vm.maxdisk(),
        "disk": 0,
        "netin": 0,
        "netout": 0,
        "diskread": 0,
        "diskwrite": 0,
        "ha": match st.ha.get(&vmid) {
            Some(h) => json!({"managed": 1, "state": h.state}),
            None => json!({"managed": 0}),
        },
    });
    if let Some(n) = vm.name() {
        v["name"] = json!(n);
    }
    if let Some(r) = &vm.run {
        v["pid"] = json!(r.pid);
        v["running-machine"] = json!("pc-i440fx-10.0+pve0");
        v["running-qemu"] = json!("10.0.2");
    }
    if vm.agent_enabled() {
        v["agent"] = json!(1);
    }
    if let Some(l) = vm.lock() {
        v["lock"] = json!(l);
    }
    if let Some(t) = vm.conf.get("tags") {
        v["tags"] = json!(t);
    }
    if vm.is_template() {
        v["template"] = json!(1);
    }
    Ok(Reply::data(v))
}

/// Marks a VM running now: computes the guest's interfaces from its seed
/// ISO / cloud-init options / DHCP, remembers the cloud-init values used.
pub(crate) fn mark_running(cluster: &Cluster, st: &mut ClusterState, vmid: u32) -> Option<String> {
    let vm = st.vms.get(&vmid)?.clone();
    let started = guest::start_guest(st, &cluster.cfg.bridges, &vm);
    let (pid, _) = st.next_pid(&vm.node);
    let lag = cluster.lag();
    let vm = st.vms.get_mut(&vmid)?;
    vm.run = Some(RunState {
        since: Instant::now(),
        paused: false,
        pid,
        ifaces: started.ifaces,
        boot: started.boot,
        seed: started.seed,
    });
    vm.cloudinit_applied = vm
        .conf
        .iter()
        .filter(|(k, _)| crate::state::vm::is_cloudinit_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    vm.record_status(lag);
    started.note
}

/// Marks a VM stopped.
pub(crate) fn mark_stopped(cluster: &Cluster, st: &mut ClusterState, vmid: u32) {
    let lag = cluster.lag();
    if let Some(vm) = st.vms.get_mut(&vmid) {
        vm.run = None;
        vm.pci_held.clear();
        vm.record_status(lag);
    }
}

/// Whether power requests of `vmid` go to the HA manager: it is an HA
/// resource whose state is not `ignored` (an ignored resource behaves as if
/// it were not managed).
pub(crate) fn ha_managed(ctx: &Ctx, vmid: u32) -> bool {
    ctx.cluster
        .lock()
        .ha
        .get(&vmid)
        .is_some_and(|h| h.state != "ignored")
}

fn ha_task(ctx: &Ctx, node: &str, vmid: u32, start: bool) -> ApiResult {
    let spec = task_spec(
        ctx,
        node,
        if start { "hastart" } else { "hastop" },
        vmid,
        0.0,
    );
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        t.log(format!(
            "Requesting HA {} for VM {vmid}",
            if start { "start" } else { "stop" }
        ));
        let state = if start { "started" } else { "stopped" };
        {
            let mut st = t.cluster.lock();
            if let Some(h) = st.ha.get_mut(&vmid) {
                h.state = state.to_string();
            }
            st.ha_serial += 1;
        }
        crate::ha_manager::request_state(&t.cluster, vmid);
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

async fn lock_vm(t: &TaskCtx, vmid: u32) -> Result<crate::locks::FlockGuard, String> {
    let timeout = t
        .cluster
        .clock
        .real(t.cluster.cfg.timings.lock_timeout_default);
    t.cluster
        .flocks
        .acquire(&t.node, vmid, LockMode::Exclusive, timeout)
        .await
}

/// `POST …/status/start` (`qmstart`): fails in the task for a missing VM, a
/// template, a lock (except `suspended`), or a running VM; applies pending
/// changes; the agent answers `timings.boot` after the task ends.
pub(crate) fn start(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = check_skiplock(ctx)?;
    for p in [
        "stateuri",
        "migratedfrom",
        "migration_type",
        "migration_network",
        "targetstorage",
        "force-cpu",
        "nets-host-mtu",
    ] {
        if ctx.params.has(p) && !ctx.who.is_root() {
            return Err(ApiError::param(p, "Only root may use this option."));
        }
    }
    if ha_managed(ctx, vmid) {
        return ha_task(ctx, &node, vmid, true);
    }
    let secs = ctx.cluster.cfg.timings.start;
    let spec = task_spec(ctx, &node, "qmstart", vmid, secs);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let _g = lock_vm(&t, vmid).await?;
        {
            let mut st = t.cluster.lock();
            let vm = st
                .vms
                .get(&vmid)
                .filter(|v| v.node == t.node)
                .ok_or_else(|| vm_missing(&t.node, vmid))?;
            if vm.is_template() {
                return Err("you can't start a vm if it's a template".into());
            }
            if !skiplock && vm.lock() != Some("suspended") {
                vm.check_lock()?;
            }
            if vm.running() {
                return Err(format!("VM {vmid} already running"));
            }
            let node = t.node.clone();
            let node_arch = st
                .nodes
                .get(&node)
                .map(|n| n.cfg.arch.clone())
                .unwrap_or_default();
            let mut effective = vm.conf.clone();
            effective.extend(vm.pending.clone());
            for k in vm.pending_delete.keys() {
                effective.remove(k);
            }
            if let Some(why) = crate::hardware::start_refusal(&effective, &node_arch) {
                return Err(why);
            }
            crate::pci::reserve(&mut st, &t.cluster.cfg.pci_mappings, vmid, &effective)?;
            if let Some(mut vm) = st.vms.get(&vmid).cloned()
                && (!vm.pending.is_empty() || !vm.pending_delete.is_empty())
            {
                super::config::apply_pending(&mut st, &node, &mut vm);
                st.vms.insert(vmid, vm);
            }
        }
        t.sleep(secs).await;
        let note = {
            let mut st = t.cluster.lock();
            if st.vms.get(&vmid).is_none_or(|v| v.node != t.node) {
                return Err(vm_missing(&t.node, vmid));
            }
            if let Some(vm) = st.vms.get_mut(&vmid)
                && vm.lock() == Some("suspended")
            {
                vm.conf.remove("lock");
            }
            mark_running(&t.cluster, &mut st, vmid)
        };
        if let Some(n) = note {
            t.log(format!("cloud-init seed not used: {n}"));
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

/// `POST …/status/stop` (`qmstop`) and `…/status/shutdown` (`qmshutdown`):
/// no-op success on a stopped VM; a paused VM cannot be shut down.
pub(crate) fn stop(ctx: &Ctx, shutdown: bool) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = check_skiplock(ctx)?;
    for p in ["keepActive", "migratedfrom"] {
        let used = ctx.params.bool(p).ok().flatten().unwrap_or(false)
            || (p == "migratedfrom" && ctx.params.has(p));
        if used && !ctx.who.is_root() {
            return Err(ApiError::param(p, "Only root may use this option."));
        }
    }
    if ha_managed(ctx, vmid) {
        return ha_task(ctx, &node, vmid, false);
    }
    let t = &ctx.cluster.cfg.timings;
    let secs = if shutdown { t.shutdown } else { t.stop };
    let kind = if shutdown { "qmshutdown" } else { "qmstop" };
    let spec = task_spec(ctx, &node, kind, vmid, secs);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let _g = lock_vm(&t, vmid).await?;
        {
            let st = t.cluster.lock();
            let vm = st
                .vms
                .get(&vmid)
                .filter(|v| v.node == t.node)
                .ok_or_else(|| vm_missing(&t.node, vmid))?;
            if !skiplock {
                vm.check_lock()?;
            }
            match &vm.run {
                None => return Ok(TaskOk::default()),
                Some(r) if r.paused && shutdown => {
                    return Err(format!("VM {vmid} is paused - cannot shutdown"));
                }
                Some(_) => {}
            }
        }
        t.sleep(secs).await;
        let mut st = t.cluster.lock();
        mark_stopped(&t.cluster, &mut st, vmid);
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

/// `POST …/status/reboot` (`qmreboot`, applies pending changes) and
/// `…/status/reset` (`qmreset`): synchronous `VM <id> not running` if stopped.
pub(crate) fn reboot(ctx: &Ctx, apply_pending: bool) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = if apply_pending {
        false
    } else {
        check_skiplock(ctx)?
    };
    {
        let st = ctx.cluster.lock();
        let vm = vm_on(&st, &node, vmid)?;
        if !vm.running() {
            return Err(ApiError::internal(format!("VM {vmid} not running")));
        }
    }
    let t = &ctx.cluster.cfg.timings;
    let secs = if apply_pending { t.reboot } else { t.reset };
    let kind = if apply_pending { "qmreboot" } else { "qmreset" };
    let spec = task_spec(ctx, &node, kind, vmid, secs);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let _g = lock_vm(&t, vmid).await?;
        {
            let st = t.cluster.lock();
            let vm = st
                .vms
                .get(&vmid)
                .filter(|v| v.node == t.node)
                .ok_or_else(|| vm_missing(&t.node, vmid))?;
            if !skiplock {
                vm.check_lock()?;
            }
            if !vm.running() {
                return Err(format!("VM {vmid} not running"));
            }
        }
        t.sleep(secs).await;
        let mut st = t.cluster.lock();
        let node = t.node.clone();
        if apply_pending && let Some(mut vm) = st.vms.get(&vmid).cloned() {
            super::config::apply_pending(&mut st, &node, &mut vm);
            st.vms.insert(vmid, vm);
        }
        if st.vms.get(&vmid).is_some_and(|v| v.running()) {
            mark_running(&t.cluster, &mut st, vmid);
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

/// `POST …/status/suspend` (`qmsuspend`) and `…/status/resume` (`qmresume`).
pub(crate) fn suspend(ctx: &Ctx, pause: bool) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = check_skiplock(ctx)?;
    if pause && ctx.params.bool("todisk")?.unwrap_or(false) {
        return Err(ApiError::internal(
            "suspend to disk is not supported by the simulator",
        ));
    }
    {
        let st = ctx.cluster.lock();
        let vm = vm_on(&st, &node, vmid)?;
        if !vm.running() {
            return Err(ApiError::internal(format!("VM {vmid} not running")));
        }
    }
    let secs = ctx.cluster.cfg.timings.reset;
    let spec = task_spec(
        ctx,
        &node,
        if pause { "qmsuspend" } else { "qmresume" },
        vmid,
        secs,
    );
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let _g = lock_vm(&t, vmid).await?;
        t.sleep(secs).await;
        let mut st = t.cluster.lock();
        let vm = st
            .vms
            .get_mut(&vmid)
            .filter(|v| v.node == t.node)
            .ok_or_else(|| vm_missing(&t.node, vmid))?;
        if !skiplock {
            vm.check_lock()?;
        }
        match vm.run.as_mut() {
            Some(r) => r.paused = pause,
            None => return Err(format!("VM {vmid} not running")),
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}
