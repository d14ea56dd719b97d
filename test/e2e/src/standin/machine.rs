//! CAPI's Machine controller, for our objects.
//!
//! - Label `cluster.x-k8s.io/cluster-name`; a Machine without a controller is
//!   adopted by its Cluster (non-controller owner reference).
//! - Bootstrap: the config (a KubeadmConfig) gets the Machine as controller
//!   owner and the label; once it reports `dataSecretCreated`, its
//!   `status.dataSecretName` is copied to `spec.bootstrap.dataSecretName`.
//! - Infrastructure: the InfraMachine gets the Machine as **controller**
//!   owner (the MachineSet/KubeadmControlPlane "on-create" owner references
//!   are removed) and the label; once it reports
//!   `status.initialization.provisioned` **and** a non-empty `spec.providerID`,
//!   the providerID is copied to `spec.providerID` and `status.addresses` and
//!   `status.failureDomain` to the Machine (docs/capi-contract.md fact 9).
//! - Node: `status.nodeRef` = the workload Node whose `spec.providerID`
//!   equals the Machine's byte for byte.
//! - Deletion, in CAPI's order: the InfraMachine is deleted and **waited
//!   for until it is gone**, then the bootstrap config and its data Secret,
//!   then the Node; then the finalizer goes.
//!
//! Simpler than CAPI: no drain, no volume-detach wait, no deletion hooks,
//! no MachineHealthCheck, no in-place updates; phases and the conditions
//! `BootstrapConfigReady`, `InfrastructureReady`, `NodeReady` only.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, ResourceExt};
use serde_json::json;

use super::clone::{self, flag, text};
use super::cluster::mirror_ready;
use super::meta::{self, CLUSTER_NAME_LABEL, MACHINE_FINALIZER, is_deleting, owner_of};
use super::{Ctx, error_policy, ticker};
use crate::crds::machine::Machine;
use crate::crds::meta::{ContractRef, MachineAddress, NameRef};
use crate::crds::{BOOTSTRAP_GROUP, CLUSTER_GROUP, CONTROL_PLANE_GROUP, Cluster, KubeadmConfig};
use crate::error::Result;

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>, infra: Vec<ApiResource>) {
    let wc = watcher::Config::default();
    fn machine_ref(meta: &kube::api::ObjectMeta) -> ObjectRef<Machine> {
        let name = owner_of(meta, CLUSTER_GROUP, "Machine")
            .map(|o| o.name.clone())
            .or_else(|| meta.name.clone())
            .unwrap_or_default();
        let r = ObjectRef::<Machine>::new(&name);
        match &meta.namespace {
            Some(ns) => r.within(ns),
            None => r,
        }
    }
    let cfg_ar = ApiResource::erase::<KubeadmConfig>(&());
    let dynamic_api = |ar: &ApiResource| -> Api<DynamicObject> {
        match &ctx.opts.namespace {
            Some(ns) => Api::namespaced_with(ctx.client.clone(), ns, ar),
            None => Api::all_with(ctx.client.clone(), ar),
        }
    };
    let seen = ctx.clone();
    let controller = Controller::new(ctx.scoped::<Machine>(), wc.clone());
    // A Node written wakes the Machine with its providerID, not every
    // Machine: waking all on each of 1,000 Node registrations and removals
    // was the benchmark process's largest cost at 1,000 machines.
    let machines = controller.store();
    let node_wakes = ctx.nodes.changes().flat_map(move |provider_id| {
        futures::stream::iter(machines_of_node(&machines.state(), provider_id.as_deref()))
    });
    let mut controller = controller
        .watches(ctx.scoped::<Cluster>(), wc.clone(), move |c| {
            seen.seen.clusters.observe(c);
            None::<ObjectRef<Machine>>
        })
        .reconcile_all_on(ticker(ctx.opts.resync))
        .reconcile_on(node_wakes);
    for ar in std::iter::once(cfg_ar).chain(infra) {
        let api = dynamic_api(&ar);
        let seen = ctx.clone();
        let kind = ar.clone();
        controller = controller.watches_with(api, ar, wc.clone(), move |o: DynamicObject| {
            let r = machine_ref(&o.metadata);
            seen.seen.objects.observe_dynamic(&kind, o);
            Some(r)
        });
    }
    controller
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// The Machines a Node with `spec.providerID` `provider_id` concerns: the
/// one with the same providerID (none yet when the Node registers first: its
/// providerID's arrival wakes it then); every Machine when `None` (which
/// Node changed is not known).
fn machines_of_node(
    machines: &[Arc<Machine>],
    provider_id: Option<&str>,
) -> Vec<ObjectRef<Machine>> {
    machines
        .iter()
        .filter(|m| provider_id.is_none() || m.spec.provider_id.as_deref() == provider_id)
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

async fn reconcile(obj: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<Machine> = ctx.api(&ns);
    // The Machine as the API server holds it. The watch's copy lags behind
    // when the stand-in is busy (in objects-1000 by ~15,000 writes), and every
    // reconcile of a stale copy rewrote what was already written: its status,
    // a finalizer (409), a phase; those writes made the watch lag more. A GET
    // costs less than the writes it saves.
    let Some(fresh) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let m: &Machine = &fresh;
    if is_deleting(&m.metadata) {
        return reconcile_delete(&ctx, &api, m).await;
    }
    let cluster = match ctx.seen.clusters.get_typed(&ns, &m.spec.cluster_name) {
        Some(c) => Some((*c).clone()),
        None => {
            ctx.api::<Cluster>(&ns)
                .get_opt(&m.spec.cluster_name)
                .await?
        }
    };
    if ensure_label_and_adoption(&api, m, cluster.as_ref()).await? {
        return Ok(ctx.poll());
    }
    if meta::add_finalizer(&api, &m.metadata, MACHINE_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    if cluster.as_ref().is_some_and(Cluster::is_paused) || meta::has_paused_annotation(&m.metadata)
    {
        return Ok(ctx.idle());
    }
    let current = m.status.clone().unwrap_or_default();
    let mut desired = current.clone();
    let mut init = desired.initialization.clone().unwrap_or_default();
    let mut spec_patch = serde_json::Map::new();

    // Bootstrap.
    if let Some(cfg_ref) = &m.spec.bootstrap.config_ref {
        match clone::get_seen(&ctx, &ns, cfg_ref).await? {
            Some(cfg) => {
                ensure_controller(&ctx, &ns, cfg_ref, &cfg, m).await?;
                mirror_ready(&mut desired.conditions, &cfg, "BootstrapConfigReady");
                if flag(&cfg, "/status/initialization/dataSecretCreated")
                    && let Some(secret) = text(&cfg, "/status/dataSecretName")
                {
                    if m.spec.bootstrap.data_secret_name.as_deref() != Some(secret) {
                        spec_patch.insert("bootstrap".into(), json!({"dataSecretName": secret}));
                    }
                    init.bootstrap_data_secret_created = Some(true);
                }
            }
            None => {
                meta::set_condition(
                    &mut desired.conditions,
                    "BootstrapConfigReady",
                    false,
                    "BootstrapConfigDoesNotExist",
                    &format!("{} {} does not exist", cfg_ref.kind, cfg_ref.name),
                );
            }
        }
    } else if m.spec.bootstrap.data_secret_name.is_some() {
        init.bootstrap_data_secret_created = Some(true);
    }

    // Infrastructure.
    let infra_ref = &m.spec.infrastructure_ref;
    let mut provider_id = m.spec.provider_id.clone();
    match clone::get_seen(&ctx, &ns, infra_ref).await? {
        Some(infra) => {
            ensure_controller(&ctx, &ns, infra_ref, &infra, m).await?;
            mirror_ready(&mut desired.conditions, &infra, "InfrastructureReady");
            let pid = text(&infra, "/spec/providerID");
            if flag(&infra, "/status/initialization/provisioned")
                && let Some(pid) = pid
            {
                if m.spec.provider_id.as_deref() != Some(pid) {
                    spec_patch.insert("providerID".into(), json!(pid));
                    provider_id = Some(pid.to_string());
                }
                desired.addresses = infra
                    .data
                    .pointer("/status/addresses")
                    .and_then(|a| serde_json::from_value::<Vec<MachineAddress>>(a.clone()).ok())
                    .unwrap_or_default();
                desired.failure_domain = text(&infra, "/status/failureDomain").map(str::to_string);
                init.infrastructure_provisioned = Some(true);
            }
        }
        None => {
            let reason = if init.infrastructure_provisioned == Some(true) {
                "InfrastructureDeleted"
            } else {
                "InfrastructureDoesNotExist"
            };
            meta::set_condition(
                &mut desired.conditions,
                "InfrastructureReady",
                false,
                reason,
                &format!("{} {} does not exist", infra_ref.kind, infra_ref.name),
            );
        }
    }
    if !spec_patch.is_empty() {
        api.patch(
            &m.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": spec_patch})),
        )
        .await?;
    }

    // Node.
    if let Some(pid) = provider_id.as_deref().filter(|p| !p.is_empty())
        && let Some(node) = ctx.nodes.find_by_provider_id(pid).await?
    {
        desired.node_ref = Some(NameRef {
            name: node.name_any(),
        });
    }
    let has_node = desired.node_ref.is_some();
    meta::set_condition(
        &mut desired.conditions,
        "NodeReady",
        has_node,
        if has_node {
            "NodeReady"
        } else {
            "WaitingForNode"
        },
        "",
    );
    let provisioned = init.infrastructure_provisioned == Some(true);
    let bootstrapped = init.bootstrap_data_secret_created == Some(true);
    desired.phase = Some(phase(has_node, provisioned, bootstrapped).to_string());
    desired.initialization = Some(init);
    desired.observed_generation = m.metadata.generation;
    if desired != current {
        meta::patch_status(&api, &m.name_any(), serde_json::to_value(&desired)?).await?;
    }
    // Waiting for a Node needs no polling: Node registrations
    // (`WorkloadNodes::changes`), InfraMachine and bootstrap config changes
    // all trigger a reconcile.
    Ok(ctx.idle())
}

/// CAPI's machine phase for a Machine that is not being deleted.
pub fn phase(has_node: bool, infra_provisioned: bool, bootstrapped: bool) -> &'static str {
    if has_node {
        "Running"
    } else if infra_provisioned {
        "Provisioned"
    } else if bootstrapped {
        "Provisioning"
    } else {
        "Pending"
    }
}

/// Label the Machine with its Cluster and let the Cluster adopt an orphan.
/// Returns whether it wrote.
async fn ensure_label_and_adoption(
    api: &Api<Machine>,
    m: &Machine,
    cluster: Option<&Cluster>,
) -> Result<bool> {
    let cluster_name = m.spec.cluster_name.as_str();
    meta::update_metadata(api, &m.metadata, |md| {
        let has_label = meta::label(md, CLUSTER_NAME_LABEL) == Some(cluster_name);
        let refs = md.owner_references.clone().unwrap_or_default();
        let orphan = !refs.iter().any(|o| o.controller == Some(true))
            && owner_of(md, CLUSTER_GROUP, "Cluster").is_none();
        let adopt = orphan.then_some(cluster).flatten();
        if has_label && adopt.is_none() {
            return None;
        }
        Some(meta::cluster_label_fields(
            md,
            cluster_name,
            adopt.map(|c| &c.metadata),
        ))
    })
    .await
}

/// Makes the Machine the controller of `obj` (removing the MachineSet and
/// KubeadmControlPlane owner references set at creation) and labels it.
async fn ensure_controller(
    ctx: &Ctx,
    ns: &str,
    r: &ContractRef,
    obj: &DynamicObject,
    m: &Machine,
) -> Result<()> {
    let uid = m.metadata.uid.clone().unwrap_or_default();
    let cluster_name = m.spec.cluster_name.as_str();
    let change = |md: &kube::api::ObjectMeta| {
        let refs = md.owner_references.clone().unwrap_or_default();
        let is_controller = refs
            .iter()
            .any(|o| o.uid == uid && o.controller == Some(true));
        let stale = refs.iter().any(is_creator);
        let has_label = meta::label(md, CLUSTER_NAME_LABEL) == Some(cluster_name);
        if is_controller && !stale && has_label {
            return None;
        }
        let mut refs: Vec<_> = refs
            .into_iter()
            .filter(|o| o.uid != uid && !is_creator(o))
            .collect();
        refs.push(meta::owner_ref(
            "cluster.x-k8s.io/v1beta2",
            "Machine",
            &m.metadata,
            true,
            true,
        ));
        Some(json!({"ownerReferences": refs, "labels": {CLUSTER_NAME_LABEL: cluster_name}}))
    };
    let api = clone::api_for(ctx, ns, r).await?;
    meta::update_metadata(&api, &obj.metadata, change).await?;
    Ok(())
}

/// The owner references MachineSet and KubeadmControlPlane set on the objects
/// they create, which the Machine replaces.
fn is_creator(o: &k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference) -> bool {
    let group = super::kinds::group_of(&o.api_version);
    (group == CLUSTER_GROUP && o.kind == "MachineSet")
        || (group == CONTROL_PLANE_GROUP && o.kind == "KubeadmControlPlane")
}

async fn reconcile_delete(ctx: &Ctx, api: &Api<Machine>, m: &Machine) -> Result<Action> {
    let ns = m.namespace().unwrap_or_default();
    // The status write changes the resourceVersion: later writes of this
    // pass (the finalizer) start from the Machine it returned.
    let patched;
    let m = if m.phase() != "Deleting" {
        patched = meta::patch_status(api, &m.name_any(), json!({"phase": "Deleting"})).await?;
        &patched
    } else {
        m
    };
    // 1. The InfraMachine, waited for until it is gone. The wait is the
    //    watch's: its deletion event wakes this Machine (`run` maps every
    //    InfraMachine and bootstrap config event to its owner Machine), as
    //    CAPI's Machine controller waits. Polling every `retry` here was
    //    half of the benchmark process's CPU in the scale-down of 1,000
    //    machines: two GETs per deleting Machine every 0.5 s.
    let infra_ref = &m.spec.infrastructure_ref;
    if let Some(infra) = clone::get(ctx, &ns, infra_ref).await? {
        if !is_deleting(&infra.metadata) {
            let dapi = clone::api_for(ctx, &ns, infra_ref).await?;
            meta::delete_ignoring_missing(&dapi, &infra_ref.name).await?;
        }
        return Ok(ctx.idle());
    }
    // 2. The bootstrap config and its data Secret.
    if let Some(cfg_ref) = &m.spec.bootstrap.config_ref
        && cfg_ref.api_group == BOOTSTRAP_GROUP
        && let Some(cfg) = clone::get(ctx, &ns, cfg_ref).await?
    {
        if !is_deleting(&cfg.metadata) {
            let dapi = clone::api_for(ctx, &ns, cfg_ref).await?;
            meta::delete_ignoring_missing(&dapi, &cfg_ref.name).await?;
        }
        return Ok(ctx.idle());
    }
    if m.spec.bootstrap.config_ref.is_some()
        && let Some(secret) = &m.spec.bootstrap.data_secret_name
    {
        meta::delete_ignoring_missing(&ctx.api::<Secret>(&ns), secret).await?;
    }
    // 3. The Node.
    if let Some(node) = m.node_name() {
        ctx.nodes.delete(node).await?;
    }
    meta::remove_finalizer(api, &m.metadata, MACHINE_FINALIZER).await?;
    Ok(Action::await_change())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::machine::{MachineInitialization, MachineStatus};

    #[test]
    fn a_node_wakes_the_machine_with_its_provider_id() {
        let machine = |name: &str, provider_id: Option<&str>| {
            let mut m = Machine::new(name, crate::crds::machine::MachineSpec::default());
            m.metadata.namespace = Some("ns".into());
            m.spec.provider_id = provider_id.map(str::to_string);
            Arc::new(m)
        };
        let all = [
            machine("a", Some("proxmox://dc-a/101")),
            machine("b", Some("proxmox://dc-a/102")),
            machine("c", None),
        ];
        let names = |refs: Vec<ObjectRef<Machine>>| -> Vec<String> {
            refs.into_iter().map(|r| r.name).collect()
        };
        assert_eq!(
            names(machines_of_node(&all, Some("proxmox://dc-a/102"))),
            ["b"]
        );
        assert!(machines_of_node(&all, Some("proxmox://dc-a/10")).is_empty());
        assert_eq!(names(machines_of_node(&all, None)), ["a", "b", "c"]);
    }

    #[test]
    fn phases() {
        assert_eq!(phase(false, false, false), "Pending");
        assert_eq!(phase(false, false, true), "Provisioning");
        assert_eq!(phase(false, true, true), "Provisioned");
        assert_eq!(phase(true, true, true), "Running");
    }

    #[test]
    fn creators_are_machineset_and_kcp_only() {
        let r = |api: &str, kind: &str| {
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: api.into(),
                kind: kind.into(),
                name: "x".into(),
                uid: "u".into(),
                controller: None,
                block_owner_deletion: None,
            }
        };
        assert!(is_creator(&r("cluster.x-k8s.io/v1beta2", "MachineSet")));
        assert!(is_creator(&r(
            "controlplane.cluster.x-k8s.io/v1beta2",
            "KubeadmControlPlane"
        )));
        assert!(!is_creator(&r("cluster.x-k8s.io/v1beta2", "Machine")));
        assert!(!is_creator(&r("cluster.x-k8s.io/v1beta2", "Cluster")));
    }

    #[test]
    fn status_serialises_v1beta2_names() {
        let s = MachineStatus {
            initialization: Some(MachineInitialization {
                bootstrap_data_secret_created: Some(true),
                infrastructure_provisioned: Some(true),
            }),
            node_ref: Some(NameRef { name: "n".into() }),
            failure_domain: Some("dc-a".into()),
            ..MachineStatus::default()
        };
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "initialization": {"bootstrapDataSecretCreated": true, "infrastructureProvisioned": true},
                "nodeRef": {"name": "n"},
                "failureDomain": "dc-a"
            })
        );
    }
}
