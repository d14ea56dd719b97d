//! The VM's HA resource (`GET /cluster/ha/resources/{sid}`) and, on PVE 9,
//! whether the node-affinity rule the machine names lists it
//! (`GET /cluster/ha/rules/{rule}`).

use crate::machine::context::Run;
use crate::machine::decide::{Facts, HaFact, HaTarget, Observed, ha};
use crate::pve::{HaSid, PveError};
use crate::reasons::Reason;

/// Reads the HA resource of the machine's VM.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(vmid), Ok(inst)) = (facts.vm_id(), run.instance().cloned()) else {
        return Observed::Ha(HaFact::Unusable(unreachable(facts, "no client")));
    };
    let unusable =
        |e: &PveError| Observed::Ha(HaFact::Unusable(unreachable(facts, &e.to_string())));
    let sid = HaSid::vm(vmid);
    let resource = match inst.api.ha_resource(sid).await {
        Ok(r) => r,
        Err(e) => return unusable(&e),
    };
    let Some(resource) = resource else {
        return Observed::Ha(HaFact::Absent);
    };
    let target = match (&facts.ha_wanted, facts.pve_major) {
        (Some(s), Some(major)) => ha::target(s, major).ok(),
        _ => None,
    };
    let listed = match &target {
        Some(HaTarget::Rule(rule)) => match inst.api.ha_rule(rule).await {
            Ok(Some(r)) => r.lists(sid),
            Ok(None) => {
                return Observed::Ha(HaFact::Unusable(Reason::HaConfigurationInvalid(format!(
                    "HA rule {rule} does not exist in instance {}; create it (a node-affinity rule) or name another in ha.rule",
                    inst.name
                ))));
            }
            Err(e) => return unusable(&e),
        },
        Some(HaTarget::Group(_)) | None => true,
    };
    Observed::Ha(HaFact::Present {
        state: resource.state(),
        listed,
    })
}

fn unreachable(facts: &Facts, detail: &str) -> Reason {
    Reason::InstanceUnreachable {
        instance: facts.instance.clone().unwrap_or_default(),
        detail: detail.to_string(),
    }
}
