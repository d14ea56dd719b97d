//! A provisioned machine: clean up the bootstrap ISO, then watch the VM.
//!
//! Machines are not repaired by recreating their VM: CAPI replaces a
//! machine (a MachineHealthCheck acts on `Ready=False`). So a VM that is
//! gone, carries another owner's marker, or was stopped outside the
//! provider is reported, and left as it is.
//!
//! A stopped VM is **not** started again after provisioning: the operator
//! (or Proxmox HA, or a maintenance) may have stopped it on purpose, and a
//! provider that fights an operator's power action is a surprise. `Ready`
//! turns `False` with `VirtualMachineStopped`, which a MachineHealthCheck
//! can remediate; starting the VM in Proxmox makes the machine `Ready`
//! again. Before provisioning completes the VM is started (see `create`).

use crate::reasons::Reason;

use super::facts::{Facts, Power, VmFact};
use super::step::{Observe, Step, Until, wait};

pub(super) fn decide(f: &Facts) -> Step {
    let vmid = f.vmid.unwrap_or_default();
    let instance = f.instance.as_deref().unwrap_or_default();
    let vm = match &f.vm {
        None => return Step::Observe(Observe::Vm),
        Some(vm) => vm,
    };
    let view = match vm {
        VmFact::Unreachable(reason) => return wait(reason.clone(), Until::Backoff),
        VmFact::Busy(msg) => {
            return wait(Reason::VirtualMachineLocked(msg.clone()), Until::Soon);
        }
        VmFact::Absent => {
            // The recorded ISO outlives its VM: delete it first.
            if let Some(m) = &f.media_recorded {
                return Step::DeleteMedia(m.clone());
            }
            return wait(
                Reason::VirtualMachineNotFound(format!(
                    "VM {vmid} is gone from instance {instance}; machines are not recreated (CAPI replaces them)"
                )),
                Until::Steady,
            );
        }
        VmFact::Foreign(owner) | VmFact::Template(owner) => {
            return wait(
                Reason::VirtualMachineNotOurs(format!(
                    "VM {vmid} now carries another owner's marker ({owner}); it is left alone"
                )),
                Until::Steady,
            );
        }
        VmFact::Legacy(view) => return super::adopt(vmid, view),
        VmFact::Ours(view) => view,
    };
    if let Some(m) = &f.media_recorded {
        if view.lock.is_some() {
            return wait(
                Reason::CleaningUpBootstrapData(format!(
                    "VM {vmid} is locked; the bootstrap ISO is ejected when it is not"
                )),
                Until::Soon,
            );
        }
        let Some(config) = &view.config else {
            return Step::Observe(Observe::Config);
        };
        if f.media_attached(config) {
            return Step::Eject;
        }
        return Step::DeleteMedia(m.clone());
    }
    match view.power {
        Power::Stopped => wait(
            Reason::VirtualMachineStopped(format!(
                "VM {vmid} on {} was stopped outside the provider; it is not started again. Start it in Proxmox, or let a MachineHealthCheck replace the machine",
                view.node
            )),
            Until::Steady,
        ),
        Power::Running | Power::Unknown => super::ha::provisioned(f, view).unwrap_or(Step::Done),
    }
}
