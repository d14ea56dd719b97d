//! Grow a disk to its requested size (`PUT /nodes/{node}/qemu/{vmid}/resize`
//! with an absolute size: a repeated request never grows twice;
//! docs/field-cases.md B08). Disks only grow ([`crate::machine::vm::disks`]).

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, StepKind, VmFact};
use crate::machine::observe::vm::{moved, remember};
use crate::machine::vm::disks::Resize;
use crate::pve::{DiskSize, PveError};
use crate::reasons::Reason;

/// Grows one disk.
pub async fn resize(run: &mut Run<'_>, facts: &Facts, r: Resize) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Resize,
                "precondition",
                Reason::ResizeFailed(e.to_string()),
            );
        }
    };
    let note = format!("growing {} of VM {vmid} to {}", r.slot, r.size);
    let after = view.config.clone().map(|mut c| {
        if let Some(d) = std::sync::Arc::make_mut(&mut c).disks.get_mut(&r.slot) {
            d.size = Some(DiskSize::from_bytes(r.size.bytes()));
        }
        c
    });
    match inst.api.resize_disk(&view.node, vmid, r.slot, r.size).await {
        Ok(task) => {
            remember(run, vmid, &view.node, after.clone(), None);
            run.event(EventKind::Normal, Reason::Resizing(note));
            let mut out = Vec::new();
            if let Some(a) = after {
                out.push(Observed::Resized(a));
            }
            if let Some(upid) = task {
                out.push(super::task::started(
                    run,
                    &upid,
                    Operation::Resize,
                    facts.vmid,
                    None,
                    None,
                ));
            }
            Observed::All(out)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => {
            let reason = Reason::ResizeFailed(format!("resize of {} of VM {vmid}: {e}", r.slot));
            super::pve_failed(run, StepKind::Resize, &e, reason)
        }
    }
}
