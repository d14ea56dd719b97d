//! Destroy the VM (`DELETE /nodes/{node}/qemu/{vmid}` with `purge` and
//! `destroy-unreferenced-disks`): in deletion, and to remove a partial VM
//! of ours that a failed clone left behind. A VM that is not ours never
//! gets here (`decide`).

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, Power, StepKind, VmFact};
use crate::machine::observe::vm::moved;
use crate::pve::{DeleteOptions, PveError};
use crate::reasons::Reason;

/// Destroys the VM; `step` says why (deletion or a partial clone).
pub async fn destroy(run: &mut Run<'_>, facts: &Facts, step: StepKind) -> Observed {
    let partial = step == StepKind::RemovePartial;
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let fail_reason = |text: String| {
        if partial {
            Reason::CloneFailed(text)
        } else {
            Reason::DeletionFailed(text)
        }
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => return super::failed(run, step, "precondition", fail_reason(e.to_string())),
    };
    let opts = DeleteOptions {
        purge: true,
        destroy_unreferenced_disks: true,
    };
    match inst.api.delete_vm(&view.node, vmid, opts).await {
        Ok(upid) => {
            let reason = if partial {
                Reason::RemovingPartialVm(format!(
                    "removing the partial VM {vmid} left by a failed clone"
                ))
            } else {
                Reason::Deleting(format!(
                    "destroying VM {vmid} on {} (purge, unreferenced disks)",
                    view.node
                ))
            };
            run.event(EventKind::Normal, reason);
            run.rt().update_memo(&run.me.uid, |m| m.vm = None);
            super::task::started(run, &upid, Operation::Destroy, facts.vmid, None, None)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        // The listing lagged: the VM runs (docs/field-cases.md B21). Said by
        // Proxmox, so it is the VM's live power state.
        Err(
            e @ PveError::Conflict {
                kind: pve_client::ConflictKind::VmRunning,
                ..
            },
        ) => {
            let reason = fail_reason(format!("destroy of VM {vmid}: {e}"));
            Observed::All(vec![
                super::pve_failed(run, step, &e, reason),
                Observed::Power(Power::Running),
            ])
        }
        Err(e) => {
            let reason = fail_reason(format!("destroy of VM {vmid}: {e}"));
            super::pve_failed(run, step, &e, reason)
        }
    }
}
