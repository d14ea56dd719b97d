//! The decision core: a pure function from what a reconcile knows
//! ([`Facts`]) to the one next [`Step`].
//!
//! The reconcile loop (`machine::reconcile`) asks [`decide`], runs the step
//! it answers (an observation or an action), folds what the step observed
//! into the facts ([`Facts::apply`]) and asks again, until the answer is
//! [`Step::Wait`] or [`Step::Done`]. Nothing else chooses what happens
//! next: the code that acts never re-decides, and never invents a fact.
//!
//! Invariants (checked by the property tests in `tests/proptests.rs`):
//! - **No second VM.** A clone is chosen only when the VM at the recorded
//!   VMID was observed absent; the VMID is written to spec before the clone
//!   ([`Step::ReserveVmid`] comes first), so a crash between any two steps
//!   never leads to a second clone.
//! - **Never touch what is not ours.** A VM without this machine's marker,
//!   or a template, is never configured, started, stopped or destroyed; a
//!   recorded VMID that cannot be ours stops the machine with a terminal
//!   [`Reason::InvalidVmid`] instead of being read as "absent".
//! - **Never mutate a locked VM.**
//! - **Nothing left behind.** Deletion removes the finalizer only after the
//!   VM is gone, every bootstrap ISO volume (the recorded one and any the
//!   sweep finds) is gone, and every IP address claim is gone.
//! - **Failures back off.** A step that failed waits for its retry gate;
//!   only its success (or a spec change) resets it.
//!
//! Creation, in order: preconditions (owner Machine, Cluster, pause,
//! finalizer, valid spec, cluster infrastructure provisioned, bootstrap
//! data) → instance → IP claims → plan (node, template) → VMID (written
//! first) → the resource pool exists ([`pool`]) → clone → the VM is a
//! member of its pool → bootstrap ISO (recorded, uploaded) → one config write →
//! grow disks → start → addresses → bootstrap finished → provision
//! (providerID, addresses, `provisioned`) → eject and delete the ISO → the
//! HA resource, when the machine asks for HA ([`ha`]).
//! After provisioning the VM is watched: gone, not ours or stopped is
//! reported, never repaired by recreating (CAPI replaces machines).
//!
//! Deletion: the recorded HA resource → shutdown (stop if that failed;
//! through HA, waited for until the VM really stopped) → destroy → delete the recorded
//! ISO → sweep the instance's ISO storages for this machine's UID → release
//! the IP claims → drop the finalizer.

pub mod facts;
pub mod ha;
pub mod observed;
pub mod operation;
pub mod step;

mod create;
mod delete;
mod pool;
mod provisioned;
mod task;

#[cfg(test)]
#[path = "tests/fixtures.rs"]
pub(crate) mod fixtures;
#[cfg(test)]
#[path = "tests/ha.rs"]
mod ha_tests;
#[cfg(test)]
#[path = "tests/pool.rs"]
mod pool_tests;
#[cfg(test)]
#[path = "tests/proptests.rs"]
mod proptests;
#[cfg(test)]
#[path = "tests/unit.rs"]
mod tests;

use std::time::Duration;

pub use facts::*;
pub use ha::HaTarget;
pub use observed::*;
pub use operation::{Operation, StepKind};
pub use step::*;

use crate::reasons::Reason;

/// The next step.
pub fn decide(f: &Facts) -> Step {
    if f.paused {
        return wait(Reason::Paused, Until::Change);
    }
    let step = if f.deleting {
        delete::decide(f)
    } else {
        create::decide(f)
    };
    gated(f, step)
}

/// `step`, unless it failed before and its retry is not due yet: then the
/// wait for it (a terminal failure waits for a change).
fn gated(f: &Facts, step: Step) -> Step {
    let Some(kind) = step.kind() else {
        return step;
    };
    match f.gate(kind) {
        Some(g) if g.reason.terminal() => wait(g.reason.clone(), Until::Change),
        Some(g) if g.fresh || g.remaining > Duration::ZERO => Step::Wait(Wait {
            reason: g.reason.clone(),
            until: Until::Retry(g.remaining),
            retry: Some(Retry {
                attempts: g.attempts,
                at: g.due_at,
            }),
        }),
        _ => step,
    }
}

/// Adopt the VM CAPMOX made for this machine (write our marker), once it is
/// not locked: a locked VM is never mutated.
fn adopt(vmid: u32, view: &VmView) -> Step {
    match &view.lock {
        Some(lock) => wait(
            Reason::VirtualMachineLocked(format!(
                "VM {vmid} is locked ({lock}); it is adopted when it is not"
            )),
            Until::Soon,
        ),
        None => Step::Adopt,
    }
}

/// The VMID the machine records, checked against Proxmox's range and the
/// machine's own range: `Err` names what is wrong.
fn checked_vmid(f: &Facts) -> Option<Result<u32, Reason>> {
    let v = f.vmid?;
    let (start, end) = f.vmid_range;
    Some(if f.vm_id().is_none() {
        Err(Reason::InvalidVmid {
            vmid: v,
            found: "it is outside Proxmox's VMID range 100-999999999".into(),
        })
    } else if v < start || v > end {
        Err(Reason::InvalidVmid {
            vmid: v,
            found: format!("it is outside the machine's VMID range {start}-{end}"),
        })
    } else {
        Ok(v)
    })
}
