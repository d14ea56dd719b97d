//! The guest agent's addresses (`GET …/agent/network-get-interfaces`),
//! matched to the VM's NICs by MAC.
//!
//! The first ask goes near the expected boot time (learned per Proxmox
//! cluster); earlier, the agent is reported as booting without a call.

use pve_client::AgentCause;

use crate::machine::context::Run;
use crate::machine::decide::{AgentFact, Facts, Observed, Operation, VmFact};
use crate::machine::vm::addresses;
use crate::pve::PveError;
use crate::reasons::Reason;

/// Asks the guest agent for the VM's addresses.
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
    let memo = run.rt().memo(&run.me.uid);
    // The reconcile that reads the bootstrap check's result reuses the
    // addresses read right before the check was started.
    if let Some(c) = &memo.bootstrap
        && Some(c.vmid) == facts.vmid
        && c.exec.is_some()
        && let Some(devs) = &c.addresses
    {
        return Observed::Agent(AgentFact::Addresses(devs.clone()));
    }
    let expected = run.rt().timer.expected(&inst.identity, Operation::Boot);
    if let Some(at) = memo.started_at
        && at.elapsed() < expected.mul_f64(0.9)
    {
        return Observed::Agent(AgentFact::NotYet("booting".into()));
    }
    match inst.api.agent_network_interfaces(&view.node, vmid).await {
        Ok(ifaces) => {
            let nics = view
                .config
                .as_ref()
                .map(|c| c.nets.clone())
                .unwrap_or_default();
            let devs = addresses::from_agent(&ifaces, &nics);
            if let (Some(at), false) = (memo.started_at, devs.is_empty()) {
                run.rt()
                    .timer
                    .observe(&inst.identity, Operation::Boot, at.elapsed());
            }
            Observed::Agent(AgentFact::Addresses(devs))
        }
        Err(PveError::AgentUnavailable {
            cause: AgentCause::VmNotRunning,
            ..
        }) => {
            run.status.vm_status = Some("stopped".into());
            Observed::Agent(AgentFact::VmStopped)
        }
        Err(PveError::AgentUnavailable { message, .. }) => {
            Observed::Agent(AgentFact::NotYet(message))
        }
        Err(PveError::NotFound { .. }) => super::vm::moved(run),
        Err(e) => Observed::Agent(AgentFact::NotYet(e.to_string())),
    }
}
