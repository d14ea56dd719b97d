//! Whether the bootstrap finished: through the guest agent, `cat` of the
//! sentinel file (`POST …/agent/exec`), and one read of the result
//! (`GET …/agent/exec-status`) at the expected end of the `exec` — in the
//! same reconcile when that is within `MachineOptions::agent_exec_inline_wait`,
//! else on a requeue. The guest agent forgets a finished process after one
//! read (docs/proxmox-semantics.md §17), so a finished result is read
//! exactly once.
//!
//! The first check goes near the bootstrap's learned duration after the
//! addresses appeared; after a check that does not say `success` the next
//! follows at the bounded cadence of
//! [`crate::machine::runtime::timing::bootstrap_recheck`]. After
//! `MachineOptions::bootstrap_patience` the message says so; the machine is
//! never failed for it (a MachineHealthCheck decides). The check in flight
//! lives in memory: after a restart it is started again.

use std::time::Duration;

use tokio::time::Instant;

use crate::clients::{Identity, Instance};
use crate::cloudinit::format::{SENTINEL, SENTINEL_SUCCESS, sentinel_says_success};
use crate::machine::context::Run;
use crate::machine::decide::{AgentFact, BootstrapFact, Facts, Observed, Operation, VmFact};
use crate::machine::runtime::memo::BootstrapCheck;
use crate::machine::runtime::timing::{bootstrap_recheck, next_poll};
use crate::pve::{ExecStatus, NodeName, PveError, VmId};
use crate::reasons::Reason;

/// Starts the sentinel check, or reads the result of the one started before.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Ok(inst) = run.instance().cloned() else {
        return Observed::Vm(VmFact::Unreachable(Reason::InstanceUnreachable {
            instance: facts.instance.clone().unwrap_or_default(),
            detail: "no client".into(),
        }));
    };
    let mut check = match run.rt().memo(&run.me.uid).bootstrap.clone() {
        Some(c) if c.vmid == vmid.get() => c,
        _ => BootstrapCheck::new(vmid.get()),
    };
    let addresses = match &facts.agent {
        Some(AgentFact::Addresses(devs)) => Some(devs.clone()),
        _ => None,
    };
    let out = step(run, &inst, &view.node, vmid, &mut check, addresses).await;
    run.rt()
        .update_memo(&run.me.uid, |m| m.bootstrap = Some(check));
    out
}

async fn step(
    run: &mut Run<'_>,
    inst: &Instance,
    node: &NodeName,
    vmid: VmId,
    check: &mut BootstrapCheck,
    addresses: Option<Vec<crate::api::machine::DeviceAddresses>>,
) -> Observed {
    if check.done {
        return Observed::Bootstrap(BootstrapFact::Done);
    }
    let rt = run.rt();
    let exec_expected = rt.timer.expected(&inst.identity, Operation::AgentExec);
    let floor = rt.poll_floor();
    let bounds = (
        rt.scaled(rt.options.bootstrap_recheck_min),
        rt.scaled(rt.options.bootstrap_recheck_max),
    );
    if check.exec.is_none() {
        if check.next_at.is_none() && check.failed == 0 {
            // The first check lands near the learned end of the bootstrap.
            let expected = rt.timer.expected(&inst.identity, Operation::Bootstrap);
            check.next_at =
                Some(check.since + expected.saturating_sub(exec_expected).min(bounds.1));
        }
        let now = Instant::now();
        if let Some(next) = check.next_at
            && now < next
        {
            return pending(run, check, (next - now).max(floor));
        }
        match inst.api.agent_exec(node, vmid, &["cat", SENTINEL]).await {
            Ok(pid) => {
                check.exec = Some((pid, Instant::now()));
                check.next_at = None;
                check.addresses = addresses;
                tracing::debug!(pid, "bootstrap sentinel check started");
            }
            Err(e) => return error(run, &inst.identity, check, e, bounds),
        }
        // `cat` ends at once: wait for it in line (bounded), so one
        // reconcile starts and reads a check and a restart in between
        // cannot lose its result; a slower guest is read on a requeue.
        let first = next_poll(exec_expected, Duration::ZERO, 0, floor);
        let inline = rt.scaled(rt.options.agent_exec_inline_wait);
        if first > inline {
            return pending(run, check, first);
        }
        tokio::time::sleep(first).await;
    }
    let Some((pid, at)) = check.exec else {
        return pending(run, check, floor);
    };
    let elapsed = at.elapsed();
    if elapsed < exec_expected.mul_f64(0.9) {
        return pending(run, check, next_poll(exec_expected, elapsed, 0, floor));
    }
    match inst.api.agent_exec_status(node, vmid, pid).await {
        Ok(st) if !st.exited => pending(run, check, next_poll(exec_expected, elapsed, 1, floor)),
        Ok(st) => {
            check.exec = None;
            check.addresses = None;
            let out = st.out_data.as_deref().unwrap_or_default();
            if st.exitcode == Some(0) && sentinel_says_success(out) {
                check.done = true;
                rt.timer
                    .observe(&inst.identity, Operation::Bootstrap, check.since.elapsed());
                tracing::info!(pid, "bootstrap finished (the sentinel says success)");
                return Observed::Bootstrap(BootstrapFact::Done);
            }
            let found = describe_exec(&st);
            tracing::debug!(pid, %found, "bootstrap not finished yet");
            failed(
                run,
                &inst.identity,
                check,
                format!("{SENTINEL} does not say {SENTINEL_SUCCESS} yet ({found})"),
                bounds,
            )
        }
        Err(e) => error(run, &inst.identity, check, e, bounds),
    }
}

/// A check did not say `success`: remember what it found, schedule the next.
fn failed(
    run: &Run<'_>,
    identity: &Identity,
    check: &mut BootstrapCheck,
    found: String,
    (min, max): (Duration, Duration),
) -> Observed {
    check.failed = check.failed.saturating_add(1);
    check.last = Some(found);
    let wait = bootstrap_recheck(
        run.rt().timer.expected(identity, Operation::Bootstrap),
        check.since.elapsed(),
        check.failed,
        min,
        max,
    );
    check.next_at = Some(Instant::now() + wait);
    pending(run, check, wait)
}

fn error(
    run: &mut Run<'_>,
    identity: &Identity,
    check: &mut BootstrapCheck,
    e: PveError,
    bounds: (Duration, Duration),
) -> Observed {
    check.exec = None;
    check.addresses = None;
    match e {
        PveError::NotFound { .. } => super::vm::moved(run),
        PveError::PermissionDenied { message, .. } => {
            Observed::Bootstrap(BootstrapFact::Blocked(format!(
                "cannot check whether the bootstrap finished: the guest agent's exec was refused ({message}); the token needs VM.GuestAgent.Unrestricted (PVE 9) or VM.Monitor (PVE 8) on the VM, or set checks.skipCloudInitStatus"
            )))
        }
        PveError::AgentUnavailable { message, .. } | PveError::Conflict { message, .. } => failed(
            run,
            identity,
            check,
            format!("the guest agent did not run the check: {message}"),
            bounds,
        ),
        e => failed(
            run,
            identity,
            check,
            format!("the check failed: {e}"),
            bounds,
        ),
    }
}

/// Still waiting: the condition message (stable between checks) and when
/// to look again.
fn pending(run: &Run<'_>, check: &BootstrapCheck, poll: Duration) -> Observed {
    let base = match &check.last {
        Some(found) => format!("waiting for the bootstrap to finish: {found}"),
        None => format!(
            "waiting for the bootstrap to finish (checking {SENTINEL} through the guest agent)"
        ),
    };
    let patience = run.rt().scaled(run.rt().options.bootstrap_patience);
    let message = if check.since.elapsed() >= patience {
        format!(
            "no bootstrap success after more than {}: {base}; look at cloud-init in the guest (/var/log/cloud-init-output.log). The machine is not marked failed: a MachineHealthCheck decides",
            human(patience)
        )
    } else {
        base
    };
    Observed::Bootstrap(BootstrapFact::Pending(message, poll))
}

/// What a finished check found, for the condition: exit code or signal,
/// then the first line of stderr or what stdout said (at most 200
/// characters each).
pub fn describe_exec(st: &ExecStatus) -> String {
    let first = |s: &str| -> String {
        let line = s
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        line.chars().take(200).collect()
    };
    let mut out = match (st.exitcode, st.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "no exit code".to_string(),
    };
    let err = first(st.err_data.as_deref().unwrap_or_default());
    let said = first(st.out_data.as_deref().unwrap_or_default());
    if !err.is_empty() {
        out.push_str(&format!(": {err}"));
    } else if !said.is_empty() {
        out.push_str(&format!(", it reads {said:?}"));
    }
    out
}

/// A duration for messages: `10m`, `1m30s`, `45s`, `250ms`.
pub fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (m, s) = (secs / 60, secs % 60);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_results_in_words() {
        let missing = ExecStatus {
            exited: true,
            exitcode: Some(1),
            err_data: Some(
                "cat: /run/cluster-api/bootstrap-success.complete: No such file or directory\n"
                    .into(),
            ),
            ..ExecStatus::default()
        };
        assert_eq!(
            describe_exec(&missing),
            "exit code 1: cat: /run/cluster-api/bootstrap-success.complete: No such file or directory"
        );
        let other = ExecStatus {
            exited: true,
            exitcode: Some(0),
            out_data: Some("failure\n".into()),
            ..ExecStatus::default()
        };
        assert_eq!(describe_exec(&other), "exit code 0, it reads \"failure\"");
        let killed = ExecStatus {
            exited: true,
            signal: Some(9),
            ..ExecStatus::default()
        };
        assert_eq!(describe_exec(&killed), "killed by signal 9");
    }

    #[test]
    fn durations_in_messages() {
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_secs(3)), "3s");
        assert_eq!(human(Duration::from_millis(250)), "250ms");
    }
}
