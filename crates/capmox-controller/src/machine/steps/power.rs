//! Power: start the VM (provisioning), shut it down gracefully and stop it
//! hard (deletion). Each is a task whose end says whether it worked.

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, Power, StepKind, VmFact};
use crate::machine::observe::vm::moved;
use crate::pve::{PveError, ShutdownOptions, StartOptions, StopOptions};
use crate::reasons::Reason;

/// Starts the VM (`POST …/status/start`).
pub async fn start(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Start,
                "precondition",
                Reason::PowerOnFailed(e.to_string()),
            );
        }
    };
    match inst
        .api
        .start_vm(&view.node, vmid, StartOptions::default())
        .await
    {
        Ok(upid) => {
            let note = format!("starting VM {vmid} on {}", view.node);
            run.event(EventKind::Normal, Reason::PoweringOn(note));
            super::task::started(run, &upid, Operation::Start, facts.vmid, None, None)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => {
            let reason = Reason::PowerOnFailed(format!("start of VM {vmid}: {e}"));
            super::pve_failed(run, StepKind::Start, &e, reason)
        }
    }
}

/// Shuts the VM down (`POST …/status/shutdown`, forced after the timeout).
pub async fn shutdown(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Shutdown,
                "precondition",
                Reason::DeletionFailed(e.to_string()),
            );
        }
    };
    let opts = ShutdownOptions {
        timeout_secs: Some(run.rt().options.shutdown_timeout_secs),
        force_stop: true,
    };
    match inst.api.shutdown_vm(&view.node, vmid, opts).await {
        Ok(upid) => {
            let note = format!(
                "shutting down VM {vmid} on {} (forced after {}s)",
                view.node,
                opts.timeout_secs.unwrap_or(0)
            );
            run.event(EventKind::Normal, Reason::Deleting(note));
            super::task::started(run, &upid, Operation::Shutdown, facts.vmid, None, None)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(PveError::Conflict {
            kind: pve_client::ConflictKind::NotRunning,
            ..
        }) => Observed::Power(Power::Stopped),
        Err(e) => {
            let reason = Reason::DeletionFailed(format!("shutdown of VM {vmid}: {e}"));
            super::pve_failed(run, StepKind::Shutdown, &e, reason)
        }
    }
}

/// Stops the VM hard (`POST …/status/stop`, overruling a running shutdown).
pub async fn stop(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Stop,
                "precondition",
                Reason::DeletionFailed(e.to_string()),
            );
        }
    };
    let opts = StopOptions {
        timeout_secs: None,
        overrule_shutdown: true,
    };
    match inst.api.stop_vm(&view.node, vmid, opts).await {
        Ok(upid) => {
            let note = format!("stopping VM {vmid} on {}", view.node);
            run.event(EventKind::Normal, Reason::Deleting(note));
            super::task::started(run, &upid, Operation::Stop, facts.vmid, None, None)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(PveError::Conflict {
            kind: pve_client::ConflictKind::NotRunning,
            ..
        }) => Observed::Power(Power::Stopped),
        Err(e) => {
            let reason = Reason::DeletionFailed(format!("stop of VM {vmid}: {e}"));
            super::pve_failed(run, StepKind::Stop, &e, reason)
        }
    }
}
