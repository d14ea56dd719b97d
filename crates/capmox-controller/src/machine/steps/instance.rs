//! Choose the instance (Proxmox cluster) and write it to `spec.instance`
//! (set once; it survives `clusterctl move` and restores).
//!
//! The rules are [`crate::machine::plan::placement`]'s: a pin ▸ the owner
//! Machine's failure domain ▸ the mode's policy (the instance with the
//! fewest of this cluster's machines, free memory breaking ties). Choices
//! of one CAPI cluster are made one at a time, so concurrent machines see
//! each other's choice.

use std::collections::BTreeMap;

use tracing::info;

use crate::error::Error;
use crate::events::EventKind;
use crate::instances::{self, EffectiveInstance};
use crate::machine::context::Run;
use crate::machine::decide::{Observed, StepKind};
use crate::machine::observe::duplicates::latest_known;
use crate::machine::observe::kube::placement_input;
use crate::machine::plan::{placement, scheduler};
use crate::reasons::Reason;

/// Chooses the instance and writes it.
///
/// # Errors
/// [`Error::Kube`] of the spec write (409 on a concurrent change).
pub async fn choose(run: &mut Run<'_>) -> Result<Observed, Error> {
    let Some(pc) = run.world.proxmox_cluster.clone() else {
        return Ok(super::failed(
            run,
            StepKind::ChooseInstance,
            "precondition",
            Reason::WaitingForProxmoxCluster,
        ));
    };
    let lock = run.rt().instance_lock(&run.me.cluster_key());
    let _guard = lock.lock().await;
    let cluster = run.me.cluster.clone().unwrap_or_default();
    let mut counts = BTreeMap::new();
    for m in run.ctx.stores.cluster_machines(&run.me.ns, &cluster) {
        if m.metadata.uid.as_deref() == Some(run.me.uid.as_str()) {
            continue;
        }
        let m = latest_known(run, m);
        if let Some(i) = &m.spec.instance {
            *counts.entry(i.clone()).or_insert(0u32) += 1;
        }
    }
    let Some(mut input) = placement_input(run.machine, &run.world, counts) else {
        return Ok(super::failed(
            run,
            StepKind::ChooseInstance,
            "precondition",
            Reason::WaitingForProxmoxCluster,
        ));
    };
    // Free memory only breaks ties: read it only for tied instances.
    for name in placement::tied(&input) {
        if let Some(e) = instances::effective_instance(&pc.spec, &name)
            && let Some(f) = free_memory(run, &pc, &e).await
            && let Some(i) = input.instances.iter_mut().find(|i| i.name == name)
        {
            i.free_memory = Some(f);
        }
    }
    let choice = match placement::choose(&input) {
        Ok(c) => c,
        Err(e) => {
            return Ok(super::failed(
                run,
                StepKind::ChooseInstance,
                "placement",
                Reason::InstanceNotSelected(e),
            ));
        }
    };
    run.merge_patch(serde_json::json!({ "spec": { "instance": choice.instance } }))
        .await?;
    let why = choice.reason;
    info!(instance = %choice.instance, why = ?why, "instance chosen");
    run.world.instance = instances::effective_instance(&pc.spec, &choice.instance);
    let range = crate::machine::plan::vmid::effective_range(
        run.machine.spec.vm_id_range,
        run.world.instance.as_ref().and_then(|e| e.spec.vm_id_range),
    );
    run.event(
        EventKind::Normal,
        Reason::InstanceSelected {
            instance: choice.instance.clone(),
            why,
        },
    );
    Ok(Observed::InstanceChosen {
        instance: choice.instance,
        vmid_range: (range.start, range.end),
        pool: run
            .world
            .instance
            .as_ref()
            .and_then(|e| e.spec.pool.clone()),
    })
}

/// Free memory over an instance's allowed online nodes (the tie breaker),
/// **bytes**; `None` when the instance cannot be asked.
async fn free_memory(
    run: &Run<'_>,
    pc: &crate::api::ProxmoxCluster,
    e: &EffectiveInstance,
) -> Option<i128> {
    let shared = &run.ctx.shared;
    let inst = shared.clients.get(&shared.kube, pc, e.name()).await.ok()?;
    let snap = run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), None)
        .await
        .ok()?;
    let adj = e.scheduler_hints.memory_adjustment.unwrap_or(100).max(1);
    let nodes: Vec<_> = snap
        .nodes()
        .into_iter()
        .filter(|n| n.online && (e.spec.nodes.is_empty() || e.spec.nodes.contains(&n.name)))
        .collect();
    let listed: std::collections::BTreeSet<u32> = snap
        .loads()
        .iter()
        .filter(|l| l.maxmem.is_some())
        .map(|l| l.vmid)
        .collect();
    let pending = run.rt().inflight.pending(&inst.identity, &listed);
    let m = scheduler::memory_by_node(&nodes, &snap.loads(), &pending, adj);
    Some(m.values().map(|n| n.free).sum())
}
