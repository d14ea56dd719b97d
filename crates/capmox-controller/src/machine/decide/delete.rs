//! Deletion: the VM, then every bootstrap ISO volume, then the IP claims,
//! then the finalizer. Nothing is forgotten: a failed step is retried until
//! it succeeds or what it removes is proven gone (docs/field-cases.md B18, B20).

use crate::reasons::Reason;

use super::facts::{ClientFact, Facts, Power, VmFact};
use super::operation::StepKind;
use super::step::{Observe, Step, Until, wait};
use super::task;

pub(super) fn decide(f: &Facts) -> Step {
    if !f.has_finalizer {
        return Step::Done;
    }
    // Without an instance, and without a VMID or a recorded ISO, nothing
    // was ever made in Proxmox.
    let touched_proxmox =
        f.instance.is_some() && (f.vm_id().is_some() || f.media_recorded.is_some());
    if touched_proxmox {
        match &f.client {
            None => return Step::Observe(Observe::Client),
            Some(ClientFact::Broken(reason)) => {
                return wait(
                    Reason::DeletionFailed(format!(
                        "cannot delete VM {} in instance {}: {}",
                        f.vmid.unwrap_or_default(),
                        f.instance.as_deref().unwrap_or_default(),
                        reason.message()
                    )),
                    Until::Backoff,
                );
            }
            Some(ClientFact::Ready) => {}
        }
        if let Some(s) = task::decide(f) {
            return s;
        }
        if let Some(s) = super::ha::deleting(f) {
            return s;
        }
        if f.vm_id().is_some()
            && let Some(s) = vm(f)
        {
            return s;
        }
        if let Some(m) = &f.media_recorded {
            return Step::DeleteMedia(m.clone());
        }
        // An ISO recorded by nothing (a machine of an older version, or
        // taken over) still ends clean: sweep the instance's ISO storages
        // for this machine's UID. Not when the status proves every
        // recorded ISO deleted: each upload is recorded first.
        if !f.media_deleted {
            match &f.media_found {
                None => return Step::Observe(Observe::Media),
                Some(found) => {
                    if let Some(m) = found.first() {
                        return Step::DeleteMedia(m.clone());
                    }
                }
            }
        }
    }
    // Claims are released only after the VM is gone (docs/field-cases.md B18).
    match f.claim_objects {
        None => Step::Observe(Observe::ClaimObjects),
        Some(c) if c.total == 0 => Step::RemoveFinalizer,
        Some(c) if c.deleting >= c.total => wait(
            Reason::Deleting(format!(
                "waiting for {} IP address claim(s) to be released by the IPAM provider",
                c.total
            )),
            Until::Change,
        ),
        Some(_) => Step::ReleaseClaims,
    }
}

/// The step the VM still needs, `None` when it is gone (or was never ours).
fn vm(f: &Facts) -> Option<Step> {
    let vmid = f.vmid.unwrap_or_default();
    let vm = match &f.vm {
        None => return Some(Step::Observe(Observe::Vm)),
        Some(vm) => vm,
    };
    let view = match vm {
        VmFact::Busy(msg) => {
            return Some(wait(Reason::Deleting(msg.clone()), Until::Soon));
        }
        VmFact::Unreachable(reason) => {
            return Some(wait(
                Reason::DeletionFailed(format!(
                    "cannot delete VM {vmid} in instance {}: {}",
                    f.instance.as_deref().unwrap_or_default(),
                    reason.message()
                )),
                Until::Backoff,
            ));
        }
        // Never ours, or gone: nothing to destroy.
        VmFact::Absent | VmFact::Foreign(_) | VmFact::Template(_) => return None,
        // Ours once marked: adopted first, then destroyed like ours.
        VmFact::Legacy(view) => return Some(super::adopt(vmid, view)),
        VmFact::Ours(view) => view,
    };
    if let Some(lock) = &view.lock {
        return Some(wait(
            Reason::Deleting(format!(
                "VM {vmid} is locked ({lock}); waiting before deleting it"
            )),
            Until::Soon,
        ));
    }
    // A listing that says "stopped" may lag: the destroy then answers that
    // the VM runs (docs/field-cases.md B21), which the destroy step reports as the
    // VM's live power state.
    if view.power == Power::Unknown {
        return Some(Step::Observe(Observe::Power));
    }
    let power = view.power;
    if power == Power::Running
        && let Some(s) = super::ha::stopping(f, view)
    {
        return Some(s);
    }
    Some(match power {
        // A graceful shutdown that failed is not repeated: stop hard.
        Power::Running if f.gate(StepKind::Shutdown).is_some() => Step::Stop,
        Power::Running => Step::Shutdown,
        Power::Stopped | Power::Unknown => Step::Destroy,
    })
}
