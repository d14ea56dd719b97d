//! The VMID: reserved in this process and written to
//! `spec.virtualMachineID` (with the `resourceVersion` precondition) before
//! the clone is issued, so no crash can produce a second VM
//! (docs/field-cases.md B01).
//!
//! A reservation avoids the VMIDs live in the Proxmox cluster, those of
//! this cluster's machines in the same Proxmox cluster that may not have a
//! VM yet, and those other machines of this process hold. VMIDs of other
//! Proxmox clusters do not matter (docs/field-cases.md B03).

use std::collections::BTreeMap;

use crate::error::Error;
use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, StepKind, VmFact};
use crate::machine::plan::scheduler::CLONE_TARGET_ANNOTATION;
use crate::machine::plan::vmid::RESERVED_ANNOTATION;
use crate::reasons::Reason;

/// Reserves a VMID and writes it.
///
/// # Errors
/// [`Error::Kube`] of the spec write (the reservation is released first).
pub async fn reserve(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let inst = run.instance()?.clone();
    let snap = match run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), None)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            return Ok(super::pve_failed(
                run,
                StepKind::ReserveVmid,
                &e,
                Reason::InstanceUnreachable {
                    instance: inst.name.clone(),
                    detail: e.to_string(),
                },
            ));
        }
    };
    let mut taken = snap.live_vmids();
    let cluster = run.me.cluster.clone().unwrap_or_default();
    let mut same: BTreeMap<String, bool> = BTreeMap::new();
    for m in run.ctx.stores.cluster_machines(&run.me.ns, &cluster) {
        if m.metadata.uid.as_deref() == Some(run.me.uid.as_str()) {
            continue;
        }
        let m = crate::machine::observe::duplicates::latest_known(run, m);
        let (Some(v), Some(i)) = (m.spec.virtual_machine_id, m.spec.instance.clone()) else {
            continue;
        };
        if !same.contains_key(&i) {
            let shares = i == inst.name
                || match &run.world.proxmox_cluster {
                    Some(pc) => run
                        .ctx
                        .shared
                        .clients
                        .get(&run.ctx.shared.kube, pc, &i)
                        .await
                        .is_ok_and(|o| o.identity == inst.identity),
                    None => false,
                };
            same.insert(i.clone(), shares);
        }
        if same.get(&i).copied().unwrap_or(false) {
            taken.insert(v);
        }
    }
    let (start, end) = facts.vmid_range;
    let range = crate::api::VmIdRange { start, end };
    let v = match run
        .rt()
        .vmids
        .reserve(&inst.identity, range, &taken, &run.me.uid)
    {
        Ok(v) => v,
        Err(e) => {
            return Ok(super::failed(
                run,
                StepKind::ReserveVmid,
                "vmid",
                Reason::Vmid(e),
            ));
        }
    };
    // The planned node goes with the VMID (one write instead of two): the
    // clone step must find it recorded before it asks Proxmox
    // (`steps::clone`), and rewrites it only after a re-plan.
    let mut annotations = serde_json::Map::new();
    annotations.insert(RESERVED_ANNOTATION.into(), v.to_string().into());
    if let Some(plan) = &facts.plan {
        annotations.insert(CLONE_TARGET_ANNOTATION.into(), plan.node.as_str().into());
    }
    let body = serde_json::json!({
        "metadata": { "annotations": annotations },
        "spec": { "virtualMachineID": v },
    });
    if let Err(e) = run.merge_patch(body).await {
        run.rt().vmids.release(&inst.identity, v, &run.me.uid);
        return Err(e);
    }
    Ok(Observed::VmidReserved(v))
}

/// Gives up the VMID: a VM that is not ours took it before our clone. The
/// VM is left alone; `spec.virtualMachineID` is cleared, and the next
/// reservation avoids the VMID (it is live).
///
/// # Errors
/// [`Error::Kube`] of the spec write.
pub async fn replace(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let old = facts.vmid.unwrap_or_default();
    let owner = match &facts.vm {
        Some(VmFact::Foreign(o)) => o.clone(),
        _ => "unknown".into(),
    };
    run.merge_patch(serde_json::json!({
        "metadata": { "annotations": { RESERVED_ANNOTATION: null } },
        "spec": { "virtualMachineID": null },
    }))
    .await?;
    if let Ok(inst) = run.instance().cloned() {
        run.rt().vmids.release(&inst.identity, old, &run.me.uid);
        run.rt().resources.invalidate(&inst.identity);
    }
    run.rt().retries.clear(&run.me.uid);
    run.rt().update_memo(&run.me.uid, |m| {
        m.vm = None;
        m.task = None;
    });
    run.status.task_ref = None;
    run.status.proxmox_node = None;
    run.event(EventKind::Warning, Reason::VmidTaken { vmid: old, owner });
    Ok(Observed::VmidReplaced)
}
