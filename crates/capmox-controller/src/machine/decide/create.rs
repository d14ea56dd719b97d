//! Creation: from the preconditions to a provisioned machine.

use super::operation::Operation;
use crate::api::machine::DeviceAddresses;
use crate::machine::vm::{addresses, disks, vmconfig};
use crate::reasons::Reason;

use super::facts::{
    AgentFact, BootstrapData, BootstrapFact, ClaimsFact, ClientFact, ClusterFact, Facts, Owner,
    Power, VmFact, VmView,
};
use super::operation::StepKind;
use super::step::{Observe, Step, Until, wait};
use super::{checked_vmid, provisioned, task};

pub(super) fn decide(f: &Facts) -> Step {
    if let Some(s) = preconditions(f) {
        return s;
    }
    if f.instance.is_none() {
        return Step::ChooseInstance;
    }
    if let Some(e) = &f.placement
        && !f.provisioned
    {
        let reason = Reason::InstanceNotSelected(e.clone());
        let until = if reason.terminal() {
            Until::Change
        } else {
            Until::Backoff
        };
        return wait(reason, until);
    }
    match &f.client {
        None => return Step::Observe(Observe::Client),
        Some(ClientFact::Broken(reason)) => {
            let until = if reason.terminal() {
                Until::Change
            } else {
                Until::Backoff
            };
            return wait(reason.clone(), until);
        }
        Some(ClientFact::Ready) => {}
    }
    if let Some(s) = task::decide(f) {
        return s;
    }
    if f.provisioned {
        return provisioned::decide(f);
    }
    // Claims before the clone: the IPAM provider works while the clone runs.
    match &f.claims {
        None => return Step::Observe(Observe::Claims),
        Some(ClaimsFact::Missing) => return Step::EnsureClaims,
        Some(ClaimsFact::NoPool(why)) => {
            return wait(Reason::WaitingForIpAddresses(why.clone()), Until::Change);
        }
        _ => {}
    }
    let vmid = match checked_vmid(f) {
        None => {
            return if f.plan.is_none() {
                Step::Plan
            } else {
                Step::ReserveVmid
            };
        }
        Some(Err(reason)) if f.vm_id().is_none() => return wait(reason, Until::Change),
        Some(r) => r,
    };
    let vm = match &f.vm {
        None => return Step::Observe(Observe::Vm),
        Some(vm) => vm,
    };
    match vm {
        VmFact::Unreachable(reason) => wait(reason.clone(), Until::Backoff),
        VmFact::Busy(msg) => wait(Reason::Cloning(msg.clone()), Until::Task(Operation::Clone)),
        VmFact::Legacy(view) => super::adopt(f.vmid.unwrap_or_default(), view),
        VmFact::Template(what) => wait(
            Reason::InvalidVmid {
                vmid: f.vmid.unwrap_or_default(),
                found: what.clone(),
            },
            Until::Change,
        ),
        VmFact::Foreign(owner) => {
            // A VMID the controller reserved, taken by someone else before
            // our clone made a VM there (or our clone into it was refused
            // because it exists): we lost the race for it, and reserve
            // another. A VMID a user wrote is never replaced: what is there
            // is reported, and nothing is touched.
            let lost_race = f
                .gate(StepKind::Clone)
                .is_some_and(|g| g.class == "already_exists")
                || f.vmid_reserved;
            if lost_race {
                // The ISO recorded for this VMID goes first: nothing of a
                // given-up VMID is left behind.
                match &f.media_recorded {
                    Some(m) => Step::DeleteMedia(m.clone()),
                    None => Step::ReplaceVmid,
                }
            } else {
                wait(
                    Reason::InvalidVmid {
                        vmid: f.vmid.unwrap_or_default(),
                        found: format!("the VM there is not this machine's ({owner})"),
                    },
                    Until::Change,
                )
            }
        }
        VmFact::Absent => match vmid {
            Err(reason) => wait(reason, Until::Change),
            Ok(_) if f.plan.is_none() => Step::Plan,
            Ok(_) => match (super::pool::before_clone(f), &f.in_line) {
                (Some(s), _) => s,
                (None, Some(l)) => wait(
                    Reason::WaitingForCloneSlot {
                        template: l.template,
                        instance: f.instance.clone().unwrap_or_default(),
                        running: l.running,
                        ahead: l.ahead,
                    },
                    Until::Slot,
                ),
                (None, None) => Step::Clone,
            },
        },
        VmFact::Ours(view) => with_vm(f, view),
    }
}

/// Everything that must hold before the machine is placed.
fn preconditions(f: &Facts) -> Option<Step> {
    let Owner::Present { bootstrap } = &f.owner else {
        return Some(wait(Reason::WaitingForOwner, Until::Change));
    };
    match f.cluster {
        ClusterFact::Missing => return Some(wait(Reason::WaitingForCluster, Until::Change)),
        ClusterFact::NoInfraCluster => {
            return Some(wait(Reason::WaitingForProxmoxCluster, Until::Change));
        }
        ClusterFact::Present { .. } => {}
    }
    if !f.has_finalizer {
        return Some(Step::AddFinalizer);
    }
    if let Some(problems) = &f.spec_problems {
        return Some(wait(Reason::InvalidSpec(problems.clone()), Until::Change));
    }
    if f.provisioned {
        return None;
    }
    if let ClusterFact::Present {
        infra_provisioned: false,
    } = f.cluster
        && f.vmid.is_none()
    {
        return Some(wait(Reason::WaitingForClusterInfrastructure, Until::Change));
    }
    // Before any Proxmox call: a VM that cannot get its bootstrap is never
    // created.
    match bootstrap {
        BootstrapData::Missing(why) => Some(wait(
            Reason::WaitingForBootstrapData(why.clone()),
            Until::Change,
        )),
        BootstrapData::Unsupported(e) => Some(wait(
            Reason::UnsupportedBootstrapFormat(e.clone()),
            Until::Change,
        )),
        BootstrapData::Invalid(why) => Some(wait(
            Reason::InvalidBootstrapData(why.clone()),
            Until::Change,
        )),
        BootstrapData::Ready => None,
    }
}

/// Our VM exists and the machine is not provisioned yet.
fn with_vm(f: &Facts, view: &VmView) -> Step {
    // A clone that failed and left a VM of ours behind: remove it before
    // the next attempt (Proxmox normally removes it itself).
    if f.gate(StepKind::Clone)
        .is_some_and(|g| g.class != "already_exists")
        && view.lock.is_none()
    {
        return Step::RemovePartial;
    }
    if let Some(lock) = &view.lock {
        let text = format!("VM {} is locked ({lock})", f.vmid.unwrap_or_default());
        return if *lock == pve_client::VmLock::Clone {
            wait(Reason::Cloning(text), Until::Task(Operation::Clone))
        } else {
            wait(Reason::VirtualMachineLocked(text), Until::Soon)
        };
    }
    let Some(config) = &view.config else {
        return Step::Observe(Observe::Config);
    };
    let desired = match &f.desired {
        Ok(d) => d,
        Err(e) => return wait(Reason::InvalidSpec(e.clone()), Until::Change),
    };
    let claimed = match &f.claims {
        Some(ClaimsFact::Bound(c)) => c.clone(),
        Some(ClaimsFact::NotNeeded) => Vec::new(),
        Some(ClaimsFact::Pending {
            pools,
            exhausted,
            message,
        }) => {
            let text = if message.is_empty() {
                format!("waiting for IP addresses from {pools}")
            } else {
                format!("waiting for IP addresses from {pools}: {message}")
            };
            let reason = if *exhausted {
                Reason::IpAddressPoolExhausted(text)
            } else {
                Reason::WaitingForIpAddresses(text)
            };
            return wait(reason, Until::Change);
        }
        _ => return Step::Observe(Observe::Claims),
    };
    if view.power == Power::Unknown {
        // Deciding whether to start (or to write the ISO) needs the power
        // state. A listing that lags and says "stopped" for a running VM
        // costs at most a start that ends "already running" (success).
        return Step::Observe(Observe::Power);
    }
    let running = view.power == Power::Running;
    let attached = f.media_attached(config);
    // The ISO matters only until the first boot: a started VM read it.
    if !running && !attached {
        if let Some(s) = super::pool::after_clone(f) {
            return s;
        }
        match &f.duplicates {
            None => return Step::Observe(Observe::Duplicates),
            Some(Some(msg)) => {
                return wait(Reason::DuplicateIpAddress(msg.clone()), Until::Change);
            }
            Some(None) => {}
        }
        if !f.media_uploaded {
            // An ISO recorded but not uploaded by this process may be a
            // stale or partial one (a crash, or an earlier VM at this VMID):
            // it is deleted before a fresh upload for this VM.
            if let Some(m) = &f.media_recorded {
                return Step::DeleteMedia(m.clone());
            }
            return Step::UploadMedia;
        }
    }
    let pending = match vmconfig::update(desired, config, &f.marker, None) {
        Ok(u) => !u.is_empty(),
        Err(e) => return wait(Reason::InvalidSpec(e.to_string()), Until::Change),
    };
    if (!running && !attached) || pending {
        return Step::Configure;
    }
    match disks::plan(f.disks.as_ref(), config) {
        Ok(r) if !r.is_empty() => return Step::Resize(r[0]),
        Ok(_) => {}
        Err(e) => return wait(Reason::ResizeFailed(e.to_string()), Until::Change),
    }
    if !running {
        return Step::Start;
    }
    let pairs: Vec<_> = claimed.iter().map(|c| (c.net.clone(), c.address)).collect();
    if f.skip_agent {
        let devs = addresses::from_claims(&pairs);
        if devs.is_empty() {
            return wait(
                Reason::WaitingForAddresses(
                    "checks.skipQemuGuestAgent is set but the machine has no static address to report"
                        .into(),
                ),
                Until::Change,
            );
        }
        return provision(f, devs);
    }
    // docs/field-cases.md B31: without the agent privilege of the instance's
    // version the agent is not asked (no 403 loop); addresses all from IPAM
    // still provision the machine.
    if let Some(missing) = f.blocked("agentRead") {
        let devs = addresses::from_claims(&pairs);
        if !devs.is_empty() {
            return Step::Provision(devs);
        }
        return wait(
            Reason::MissingPrivileges(format!(
                "the guest agent's addresses cannot be read: the token of instance {} lacks {missing}",
                f.instance.as_deref().unwrap_or_default()
            )),
            Until::Change,
        );
    }
    match &f.agent {
        None => Step::Observe(Observe::Agent),
        // The agent said the VM is not running: the power state was set
        // live from that; the next decision starts it again.
        Some(AgentFact::VmStopped) => Step::Start,
        Some(AgentFact::NotYet(msg)) => wait(
            Reason::WaitingForAddresses(format!(
                "waiting for the guest agent to report addresses: {msg}"
            )),
            Until::Boot,
        ),
        Some(AgentFact::Addresses(devs)) => {
            if !addresses::complete(devs, &pairs) {
                return wait(
                    Reason::WaitingForAddresses(
                        "the guest agent does not report every claimed address yet".into(),
                    ),
                    Until::Boot,
                );
            }
            if !f.check_bootstrap {
                return provision(f, devs.clone());
            }
            if let Some(missing) = f.blocked("agentExec") {
                return wait(
                    Reason::MissingPrivileges(format!(
                        "the bootstrap cannot be confirmed through the guest agent: the token of instance {} lacks {missing} (or set checks.skipCloudInitStatus)",
                        f.instance.as_deref().unwrap_or_default()
                    )),
                    Until::Change,
                );
            }
            match &f.bootstrap {
                None => Step::Observe(Observe::Bootstrap),
                Some(BootstrapFact::Done) => provision(f, devs.clone()),
                Some(BootstrapFact::Pending(msg, after)) => wait(
                    Reason::WaitingForBootstrap(msg.clone()),
                    Until::After(*after),
                ),
                Some(BootstrapFact::Blocked(msg)) => {
                    wait(Reason::WaitingForBootstrap(msg.clone()), Until::Backoff)
                }
            }
        }
    }
}

/// Provision with `devs`, unless the providerID our VM would get is recorded
/// by another machine (docs/field-cases.md B36: a VM copied with its SMBIOS
/// UUID): then it is not published twice, and the machine waits for a
/// change. A recorded providerID is kept as it is, so nothing is looked up.
fn provision(f: &Facts, devs: Vec<DeviceAddresses>) -> Step {
    if f.provider_id.is_some() {
        return Step::Provision(devs);
    }
    match &f.provider_id_holder {
        None => Step::Observe(Observe::ProviderIdHolder),
        Some(Some(holder)) => wait(
            Reason::ProviderIdInUse {
                vmid: f.vmid.unwrap_or_default(),
                holder: holder.clone(),
            },
            Until::Change,
        ),
        Some(None) => Step::Provision(devs),
    }
}
