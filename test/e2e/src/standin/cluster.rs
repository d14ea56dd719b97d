//! CAPI's Cluster controller, for our objects.
//!
//! - Sets an owner reference (`controller: false`, `blockOwnerDeletion`) and
//!   the `cluster.x-k8s.io/cluster-name` label on the InfraCluster and the
//!   control-plane object (`ensureOwnerRefAndLabel`).
//! - Once the InfraCluster reports `status.initialization.provisioned`:
//!   `status.initialization.infrastructureProvisioned`, the endpoint copied to
//!   `spec.controlPlaneEndpoint` when the Cluster has none, and on every
//!   reconcile the InfraCluster's `status.failureDomains` copied, sorted by
//!   name, `controlPlane` absent → `false`.
//! - `status.initialization.controlPlaneInitialized` from the control plane;
//!   `InfrastructureReady` mirrors the InfraCluster's `Ready` condition.
//! - Deletion: MachineDeployments, standalone MachineSets and worker Machines
//!   first (waited for), then the control plane (waited for), then the
//!   InfraCluster last (waited for), then the finalizer goes.
//!
//! Simpler than CAPI: no MachinePools, no
//! `RemoteConnectionProbe`, conditions limited to the two above (the
//! topology controller, [`super::topology`], adds `TopologyReconciled`).

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use serde_json::{Value, json};

use super::clone::{self, flag};
use super::meta::{
    self, CLUSTER_FINALIZER, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, is_deleting, owner_of,
};
use super::{Ctx, error_policy, ticker};
use crate::crds::cluster::{ApiEndpoint, Cluster, ClusterStatus};
use crate::crds::meta::{ContractRef, FailureDomain};
use crate::crds::{CLUSTER_GROUP, Machine, MachineDeployment, MachineSet};
use crate::error::Result;

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>, infra: Vec<ApiResource>) {
    let wc = watcher::Config::default();
    let by_cluster_name = |name: &str, ns: Option<String>| {
        let r = ObjectRef::<Cluster>::new(name);
        match ns {
            Some(ns) => r.within(&ns),
            None => r,
        }
    };
    let controller = Controller::new(ctx.scoped::<Cluster>(), wc.clone());
    // Machines and MachineSets matter only to a deletion (the order of
    // `reconcile_delete`): their changes wake a Cluster only while it is
    // being deleted (or not yet seen).
    let store = controller.store();
    let deleting = move |r: ObjectRef<Cluster>| {
        store
            .get(&r)
            .is_none_or(|c| is_deleting(&c.metadata))
            .then_some(r)
    };
    let deleting_too = deleting.clone();
    // Machines through a reflector: a deletion counts its workers from the
    // store instead of LISTing every Machine on each Machine change (1,000
    // Machines being deleted cost a million objects served).
    let (machine_store, machine_writer) = reflector::store::<Machine>();
    let _ = ctx.seen.all_machines.set(machine_store);
    let machines = reflector::reflector(
        machine_writer,
        watcher(ctx.scoped::<Machine>(), wc.clone()).default_backoff(),
    )
    .touched_objects();
    let mut controller = controller
        .owns(ctx.scoped::<MachineDeployment>(), wc.clone())
        .watches_stream(machines, move |m: Machine| {
            deleting(by_cluster_name(&m.spec.cluster_name, m.namespace()))
        })
        .watches(ctx.scoped::<MachineSet>(), wc.clone(), move |m| {
            deleting_too(by_cluster_name(&m.spec.cluster_name, m.namespace()))
        })
        .watches(
            ctx.scoped::<crate::crds::KubeadmControlPlane>(),
            wc.clone(),
            move |kcp| {
                owner_of(&kcp.metadata, CLUSTER_GROUP, "Cluster")
                    .map(|o| by_cluster_name(&o.name, kcp.namespace()))
            },
        )
        .reconcile_all_on(ticker(ctx.opts.resync));
    for ar in infra {
        let api: Api<DynamicObject> = match &ctx.opts.namespace {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, &ar),
            None => Api::all_with(ctx.client.clone(), &ar),
        };
        controller = controller.watches_with(api, ar, wc.clone(), move |o: DynamicObject| {
            owner_of(&o.metadata, CLUSTER_GROUP, "Cluster")
                .map(|c| by_cluster_name(&c.name, o.namespace()))
        });
    }
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(obj: Arc<Cluster>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<Cluster> = ctx.api(&ns);
    // The Cluster as the watch last delivered it (a metadata write from a
    // stale copy fails with 409; a newer version triggers another reconcile).
    let cluster: &Cluster = &obj;
    if is_deleting(&cluster.metadata) {
        return reconcile_delete(&ctx, &api, cluster).await;
    }
    if meta::add_finalizer(&api, &cluster.metadata, CLUSTER_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    if cluster.is_paused() {
        return Ok(ctx.idle());
    }
    let current = cluster.status.clone().unwrap_or_default();
    let mut desired = current.clone();
    let mut init = desired.initialization.clone().unwrap_or_default();
    let mut endpoint_missing = !cluster
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(ApiEndpoint::is_valid);
    let mut infra_exists = false;

    if let Some(infra_ref) = &cluster.spec.infrastructure_ref {
        if let Some(infra) = clone::get(&ctx, &ns, infra_ref).await? {
            infra_exists = true;
            ensure_owner_and_label(&ctx, &ns, infra_ref, &infra, cluster).await?;
            mirror_ready(&mut desired.conditions, &infra, "InfrastructureReady");
            if flag(&infra, "/status/initialization/provisioned") {
                init.infrastructure_provisioned = Some(true);
                if endpoint_missing && let Some(ep) = infra_endpoint(&infra) {
                    let body = json!({"spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}}});
                    api.patch(
                        &cluster.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&body),
                    )
                    .await?;
                    endpoint_missing = false;
                }
                desired.failure_domains = failure_domains(&infra);
            }
        } else {
            meta::set_condition(
                &mut desired.conditions,
                "InfrastructureReady",
                false,
                "InfrastructureDoesNotExist",
                &format!("{} {} does not exist", infra_ref.kind, infra_ref.name),
            );
        }
    }
    if let Some(cp_ref) = &cluster.spec.control_plane_ref
        && let Some(cp) = clone::get(&ctx, &ns, cp_ref).await?
    {
        ensure_owner_and_label(&ctx, &ns, cp_ref, &cp, cluster).await?;
        if flag(&cp, "/status/initialization/controlPlaneInitialized") {
            init.control_plane_initialized = Some(true);
        }
        let initialized = init.control_plane_initialized == Some(true);
        meta::set_condition(
            &mut desired.conditions,
            "ControlPlaneInitialized",
            initialized,
            if initialized {
                "Initialized"
            } else {
                "NotInitialized"
            },
            "",
        );
    }
    let provisioned = init.infrastructure_provisioned == Some(true);
    desired.initialization = Some(init);
    desired.phase = Some(
        if provisioned && !endpoint_missing {
            "Provisioned"
        } else if infra_exists {
            "Provisioning"
        } else {
            "Pending"
        }
        .to_string(),
    );
    desired.observed_generation = cluster.metadata.generation;
    write_status(&api, &cluster.name_any(), &current, &desired).await?;
    Ok(ctx.idle())
}

/// Writes `desired` when it differs from `current` (an emptied failure-domain
/// list is removed, as the real CRD allows no empty list).
async fn write_status(
    api: &Api<Cluster>,
    name: &str,
    current: &ClusterStatus,
    desired: &ClusterStatus,
) -> Result<()> {
    if current == desired {
        return Ok(());
    }
    let mut body = serde_json::to_value(desired)?;
    if desired.failure_domains.is_empty()
        && let Value::Object(m) = &mut body
    {
        m.insert("failureDomains".into(), Value::Null);
    }
    meta::patch_status(api, name, body).await?;
    Ok(())
}

/// `spec.controlPlaneEndpoint` of the InfraCluster, when valid.
fn infra_endpoint(infra: &DynamicObject) -> Option<ApiEndpoint> {
    let ep = infra.data.pointer("/spec/controlPlaneEndpoint")?;
    let ep = ApiEndpoint {
        host: ep.get("host")?.as_str()?.to_string(),
        port: i32::try_from(ep.get("port")?.as_i64()?).ok()?,
    };
    ep.is_valid().then_some(ep)
}

/// The InfraCluster's failure domains (v1beta2 list), sorted by name,
/// `controlPlane` made explicit.
pub fn failure_domains(infra: &DynamicObject) -> Vec<FailureDomain> {
    let mut out: Vec<FailureDomain> = infra
        .data
        .pointer("/status/failureDomains")
        .and_then(|v| serde_json::from_value::<Vec<FailureDomain>>(v.clone()).ok())
        .unwrap_or_default();
    for fd in &mut out {
        fd.control_plane = Some(fd.control_plane.unwrap_or(false));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Copies the `Ready` condition of `source` into `target` as `type_`.
pub fn mirror_ready(
    target: &mut Vec<crate::crds::meta::Condition>,
    source: &DynamicObject,
    type_: &str,
) {
    let ready = source
        .data
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|list| {
            list.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    let (status, reason, message) = match ready {
        Some(c) => (
            c.get("status").and_then(Value::as_str) == Some("True"),
            c.get("reason").and_then(Value::as_str).unwrap_or("Unknown"),
            c.get("message").and_then(Value::as_str).unwrap_or(""),
        ),
        None => (
            false,
            "NoReadyCondition",
            "the object reports no Ready condition yet",
        ),
    };
    let reason = if reason.is_empty() { "Unknown" } else { reason };
    meta::set_condition(target, type_, status, reason, message);
}

/// CAPI's `ensureOwnerRefAndLabel`: a Cluster owner reference (`controller:
/// false`, `blockOwnerDeletion: true`) and the cluster-name label.
async fn ensure_owner_and_label(
    ctx: &Ctx,
    ns: &str,
    r: &ContractRef,
    obj: &DynamicObject,
    cluster: &Cluster,
) -> Result<()> {
    let uid = cluster.metadata.uid.clone().unwrap_or_default();
    let cluster_name = cluster.name_any();
    let change = |md: &kube::api::ObjectMeta| {
        let has_owner = meta::is_owned_by(md, &uid);
        let has_label = meta::label(md, CLUSTER_NAME_LABEL) == Some(cluster_name.as_str());
        if has_owner && has_label {
            return None;
        }
        let owner = (!has_owner).then_some(&cluster.metadata);
        Some(meta::cluster_label_fields(md, &cluster_name, owner))
    };
    let api = clone::api_for(ctx, ns, r).await?;
    meta::update_metadata(&api, &obj.metadata, change).await?;
    Ok(())
}

async fn reconcile_delete(ctx: &Ctx, api: &Api<Cluster>, cluster: &Cluster) -> Result<Action> {
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    if cluster.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Deleting") {
        meta::patch_status(api, &name, json!({"phase": "Deleting"})).await?;
    }
    // 1. Descendants: MachineDeployments, MachineSets not owned by one, and
    //    worker Machines not owned by a MachineSet (control-plane Machines are
    //    the control plane's to delete).
    let lp = ListParams::default();
    let mds: Vec<MachineDeployment> = ctx
        .api::<MachineDeployment>(&ns)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|m| m.spec.cluster_name == name)
        .collect();
    let mss: Vec<MachineSet> = ctx
        .api::<MachineSet>(&ns)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|m| m.spec.cluster_name == name)
        .collect();
    let mut workers = worker_machines(ctx, &ns, &name, false).await?;
    if mds.is_empty() && mss.is_empty() && workers.is_empty() {
        // The store says none is left: what the API server says decides.
        workers = worker_machines(ctx, &ns, &name, true).await?;
    }
    let pending = mds.len() + mss.len() + workers.len();
    for md in mds.iter().filter(|o| !is_deleting(&o.metadata)) {
        meta::delete_ignoring_missing(&ctx.api::<MachineDeployment>(&ns), &md.name_any()).await?;
    }
    for ms in mss.iter().filter(|o| {
        !is_deleting(&o.metadata)
            && owner_of(&o.metadata, CLUSTER_GROUP, "MachineDeployment").is_none()
    }) {
        meta::delete_ignoring_missing(&ctx.api::<MachineSet>(&ns), &ms.name_any()).await?;
    }
    for m in workers.iter().filter(|o| {
        !is_deleting(&o.metadata) && owner_of(&o.metadata, CLUSTER_GROUP, "MachineSet").is_none()
    }) {
        meta::delete_ignoring_missing(&ctx.api::<Machine>(&ns), &m.name_any()).await?;
    }
    if pending > 0 {
        return Ok(ctx.poll());
    }
    // 2. The control plane, then 3. the InfraCluster, each waited for.
    for r in [
        &cluster.spec.control_plane_ref,
        &cluster.spec.infrastructure_ref,
    ]
    .into_iter()
    .flatten()
    {
        if let Some(obj) = clone::get(ctx, &ns, r).await? {
            if !is_deleting(&obj.metadata) {
                let dapi = clone::api_for(ctx, &ns, r).await?;
                meta::delete_ignoring_missing(&dapi, &r.name).await?;
            }
            return Ok(ctx.poll());
        }
    }
    meta::remove_finalizer(api, &cluster.metadata, CLUSTER_FINALIZER).await?;
    Ok(Action::await_change())
}

/// The worker Machines (no control-plane label) of Cluster `name` in `ns`:
/// from the Machine store once it holds its initial list, else (or when
/// `list`) with a LIST.
async fn worker_machines(ctx: &Ctx, ns: &str, name: &str, list: bool) -> Result<Vec<Arc<Machine>>> {
    let worker = |m: &Machine| {
        m.spec.cluster_name == name && meta::label(&m.metadata, CONTROL_PLANE_LABEL).is_none()
    };
    if !list
        && let Some(store) = ctx.seen.all_machines.get()
        && store.wait_until_ready().await.is_ok()
    {
        return Ok(store
            .state()
            .into_iter()
            .filter(|m| m.namespace().as_deref() == Some(ns) && worker(m))
            .collect());
    }
    Ok(ctx
        .api::<Machine>(ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|m| worker(m))
        .map(Arc::new)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::cluster::ClusterInitialization;

    #[test]
    fn failure_domains_sorted_and_control_plane_explicit() {
        let infra: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
            "kind": "ProxmoxCluster",
            "metadata": {"name": "c"},
            "status": {"failureDomains": [
                {"name": "dc-c", "controlPlane": true},
                {"name": "dc-a", "attributes": {"pveVersion": "9.1.9"}},
                {"name": "dc-b", "controlPlane": false}
            ]}
        }))
        .unwrap();
        let fds = failure_domains(&infra);
        assert_eq!(
            serde_json::to_value(&fds).unwrap(),
            json!([
                {"name": "dc-a", "controlPlane": false, "attributes": {"pveVersion": "9.1.9"}},
                {"name": "dc-b", "controlPlane": false},
                {"name": "dc-c", "controlPlane": true}
            ])
        );
    }

    #[test]
    fn endpoint_only_when_valid() {
        let with = |ep: Value| -> DynamicObject {
            serde_json::from_value(json!({
                "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "c"},
                "spec": {"controlPlaneEndpoint": ep}
            }))
            .unwrap()
        };
        assert_eq!(
            infra_endpoint(&with(json!({"host": "10.10.0.5", "port": 6443}))),
            Some(ApiEndpoint {
                host: "10.10.0.5".into(),
                port: 6443
            })
        );
        assert_eq!(infra_endpoint(&with(json!({"host": "10.10.0.5"}))), None);
        assert_eq!(
            infra_endpoint(&with(json!({"host": "", "port": 6443}))),
            None
        );
    }

    #[test]
    fn ready_condition_mirrored() {
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "x/v1", "kind": "X", "metadata": {"name": "c"},
            "status": {"conditions": [
                {"type": "Paused", "status": "False", "reason": "NotPaused", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "InstancesUnavailable", "message": "dc-b: 401", "lastTransitionTime": "2026-01-01T00:00:00Z"}
            ]}
        }))
        .unwrap();
        let mut list = Vec::new();
        mirror_ready(&mut list, &obj, "InfrastructureReady");
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].type_, "InfrastructureReady");
        assert_eq!(list[0].status, "False");
        assert_eq!(list[0].reason, "InstancesUnavailable");
        assert_eq!(list[0].message, "dc-b: 401");
    }

    #[test]
    fn initialization_default_is_empty() {
        assert_eq!(
            serde_json::to_value(ClusterInitialization::default()).unwrap(),
            json!({})
        );
    }
}
