//! Proxmox HA of the VM (docs/field-cases.md B33): make it an HA resource
//! after provisioning, remove it first in deletion. The resource is
//! recorded in `status.haResource` before it is created, and deleted by
//! that record.
//!
//! On PVE 9 the VM is added to the node-affinity rule the spec names: the
//! whole `resources` list is written back with the `digest` read with the
//! rule (a concurrent change fails and is retried), keeping only entries
//! that are still HA resources (a rule may not list others). Removing it
//! deletes the resource with `purge=0`, after writing the rule without it,
//! so a rule the operator made is never deleted with its last resource.

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, HaTarget, Observed, StepKind, ha};
use crate::pve::{HaResourceRequest, HaSid, HaState, PveError, SharedApi, VmId};
use crate::reasons::Reason;

const RULE_KIND: &str = "node-affinity";

/// Records `status.haResource`, creates the HA resource (requested state
/// `started`, in the group on PVE 8) unless it exists, and on PVE 9 adds
/// it to the rule.
///
/// # Errors
/// [`crate::error::Error::Kube`] of the record write.
pub async fn register(
    run: &mut Run<'_>,
    facts: &Facts,
    target: HaTarget,
) -> Result<Observed, crate::error::Error> {
    let Some(vmid) = facts.vm_id() else {
        return Ok(failed(run, "precondition", "the VM is not known".into()));
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => return Ok(failed(run, "precondition", e.to_string())),
    };
    let sid = HaSid::vm(vmid);
    // Record before create.
    if run.status.ha_resource.is_none() {
        run.record_status(serde_json::json!({ "status": { "haResource": sid.to_string() } }))
            .await?;
        run.status.ha_resource = Some(sid.to_string());
    }
    let exists = match inst.api.ha_resource(sid).await {
        Ok(r) => r.is_some(),
        Err(e) => return Ok(pve_failed(run, &e, vmid)),
    };
    if !exists {
        let request = HaResourceRequest {
            sid,
            state: HaState::Started,
            group: match &target {
                HaTarget::Group(g) => Some(g.clone()),
                HaTarget::Rule(_) => None,
            },
            comment: Some(format!(
                "capmox: ProxmoxMachine {}/{}",
                run.me.ns, run.me.name
            )),
        };
        match inst.api.create_ha_resource(&request).await {
            Ok(()) => {}
            // Made by an earlier attempt whose answer was lost.
            Err(PveError::Conflict {
                kind: pve_client::ConflictKind::AlreadyExists,
                ..
            }) => {}
            Err(e) => return Ok(pve_failed(run, &e, vmid)),
        }
    }
    if let HaTarget::Rule(rule) = &target
        && let Err(e) = add_to_rule(&inst.api, rule, sid).await
    {
        return Ok(match e {
            RuleError::Missing => failed_with(
                run,
                "ha_rule_missing",
                Reason::HaConfigurationInvalid(format!(
                    "HA rule {rule} does not exist in instance {}; create it (a node-affinity rule) or name another in ha.rule",
                    inst.name
                )),
            ),
            RuleError::Pve(e) => pve_failed(run, &e, vmid),
        });
    }
    run.event(
        EventKind::Normal,
        Reason::HaRegistered(format!("VM {vmid} is an HA resource ({target})")),
    );
    Ok(Observed::HaRegistered)
}

enum RuleError {
    Missing,
    Pve(PveError),
}

async fn add_to_rule(
    api: &SharedApi,
    rule: &crate::pve::ConfigId,
    sid: HaSid,
) -> Result<(), RuleError> {
    let Some(r) = api.ha_rule(rule).await.map_err(RuleError::Pve)? else {
        return Err(RuleError::Missing);
    };
    if r.lists(sid) {
        return Ok(());
    }
    let existing: Vec<String> = api
        .ha_resources()
        .await
        .map_err(RuleError::Pve)?
        .into_iter()
        .map(|h| h.sid)
        .collect();
    let mut list: Vec<String> = r
        .resources()
        .into_iter()
        .filter(|s| existing.contains(s))
        .collect();
    list.push(sid.to_string());
    api.set_ha_rule_resources(rule, RULE_KIND, &list, r.digest.as_deref())
        .await
        .map_err(RuleError::Pve)
}

/// Removes the recorded HA resource (on PVE 9 first from the rule naming
/// it, when others remain there), then the record. A resource already
/// gone is success.
///
/// # Errors
/// [`crate::error::Error::Kube`] of the record write.
pub async fn unregister(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, crate::error::Error> {
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => return Ok(failed_unregister(run, e.to_string())),
    };
    let recorded = run
        .machine
        .status
        .as_ref()
        .and_then(|s| s.ha_resource.clone())
        .or_else(|| run.status.ha_resource.clone());
    let Some(sid) = recorded.and_then(|s| s.parse::<HaSid>().ok()) else {
        return cleared(run).await;
    };
    let pve9 = facts.pve_major.is_some_and(|m| m >= 9);
    if pve9
        && let Some(settings) = &facts.ha_wanted
        && let Ok(HaTarget::Rule(rule)) = ha::target(settings, 9)
    {
        match inst.api.ha_rule(&rule).await {
            Ok(Some(r)) if r.lists(sid) && r.resources().len() > 1 => {
                let rest: Vec<String> = r
                    .resources()
                    .into_iter()
                    .filter(|s| *s != sid.to_string())
                    .collect();
                if let Err(e) = inst
                    .api
                    .set_ha_rule_resources(&rule, RULE_KIND, &rest, r.digest.as_deref())
                    .await
                {
                    return Ok(failed_unregister(
                        run,
                        format!("removing {sid} from HA rule {rule}: {e}"),
                    ));
                }
            }
            Ok(_) => {}
            Err(e) => {
                return Ok(failed_unregister(
                    run,
                    format!("reading HA rule {rule}: {e}"),
                ));
            }
        }
    }
    match inst
        .api
        .delete_ha_resource(sid, pve9.then_some(false))
        .await
    {
        Ok(()) | Err(PveError::NotFound { .. }) => {}
        Err(e) => {
            let reason = Reason::DeletionFailed(format!("removing HA resource {sid}: {e}"));
            return Ok(super::pve_failed(run, StepKind::UnregisterHa, &e, reason));
        }
    }
    run.event(
        EventKind::Normal,
        Reason::Deleting(format!("HA resource {sid} removed")),
    );
    cleared(run).await
}

async fn cleared(run: &mut Run<'_>) -> Result<Observed, crate::error::Error> {
    run.status.ha_resource = None;
    run.record_status(serde_json::json!({ "status": { "haResource": null } }))
        .await?;
    Ok(Observed::HaUnregistered)
}

fn failed_unregister(run: &Run<'_>, text: String) -> Observed {
    super::failed(
        run,
        StepKind::UnregisterHa,
        "precondition",
        Reason::DeletionFailed(text),
    )
}

fn failed(run: &Run<'_>, class: &'static str, text: String) -> Observed {
    failed_with(run, class, Reason::HaRegistrationFailed(text))
}

fn failed_with(run: &Run<'_>, class: &'static str, reason: Reason) -> Observed {
    super::failed(run, StepKind::RegisterHa, class, reason)
}

fn pve_failed(run: &Run<'_>, e: &PveError, vmid: VmId) -> Observed {
    let reason = Reason::HaRegistrationFailed(format!("making VM {vmid} an HA resource: {e}"));
    super::pve_failed(run, StepKind::RegisterHa, e, reason)
}
