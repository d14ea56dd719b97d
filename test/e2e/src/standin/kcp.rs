//! The KubeadmControlPlane controller, for our objects.
//!
//! - Waits for its Cluster (owner reference), the Cluster's infrastructure
//!   (`status.initialization.infrastructureProvisioned`) and a valid
//!   `spec.controlPlaneEndpoint`.
//! - Scale up, **one Machine at a time**, only while every existing
//!   control-plane Machine has a Node (KCP's "control plane is stable"
//!   preflight): the new Machine goes to the failure domain with
//!   `controlPlane: true` that has the fewest control-plane Machines (ties by
//!   name; CAPI's `PickFewest`), or none when there is no such domain.
//!   Labels `cluster.x-k8s.io/control-plane` and `control-plane-name`; its
//!   InfraMachine is cloned from `machineTemplate.spec.infrastructureRef`, its
//!   KubeadmConfig from `kubeadmConfigSpec` (init configuration for the first
//!   Machine, join configuration for the others).
//! - Scale down, one at a time: a Machine whose failure domain is no longer
//!   eligible first, else the oldest in the domain with the most Machines
//!   (`PickMost`).
//! - `status.initialization.controlPlaneInitialized` once a control-plane
//!   Machine has a Node (the first API server answers); it never flips back.
//! - Deletion: waits until the cluster's worker Machines are gone, then
//!   deletes its Machines and waits for them, then drops the finalizer.
//!
//! Simpler than KCP: no etcd or certificate management, no rollouts or
//! upgrades, no remediation; health = "has a Node".

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::clone::{self, CloneRequest};
use super::meta::{
    self, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, CONTROL_PLANE_NAME_LABEL, KCP_FINALIZER,
    is_deleting, owner_of,
};
use super::{Ctx, error_policy, ticker};
use crate::crds::bootstrap::{KubeadmConfig, KubeadmConfigSpec};
use crate::crds::controlplane::{
    ControlPlaneInitialization, KubeadmControlPlane, KubeadmControlPlaneStatus,
};
use crate::crds::machine::{Bootstrap, Machine, MachineSpec};
use crate::crds::meta::{ContractRef, FailureDomain};
use crate::crds::{BOOTSTRAP_GROUP, CLUSTER_GROUP, Cluster};
use crate::error::Result;

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    Controller::new(ctx.scoped::<KubeadmControlPlane>(), wc.clone())
        .owns(ctx.scoped::<Machine>(), wc.clone())
        .watches(ctx.scoped::<Cluster>(), wc, |c| {
            let ns = c.namespace();
            c.spec.control_plane_ref.as_ref().map(|r| {
                let o = ObjectRef::<KubeadmControlPlane>::new(&r.name);
                match ns {
                    Some(ns) => o.within(&ns),
                    None => o,
                }
            })
        })
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// `PickFewest`: the eligible (`controlPlane: true`) failure domain with the
/// fewest of `machines`, ties by name; `None` without eligible domains.
pub fn pick_fewest(fds: &[FailureDomain], machines: &[&Machine]) -> Option<String> {
    fds.iter()
        .filter(|f| f.control_plane == Some(true))
        .map(|f| {
            let n = machines
                .iter()
                .filter(|m| m.failure_domain() == Some(f.name.as_str()))
                .count();
            (n, f.name.clone())
        })
        .min()
        .map(|(_, name)| name)
}

/// The Machine to remove on scale-down: the oldest in a failure domain that
/// is no longer eligible, else the oldest in the eligible domain with the
/// most Machines (ties by domain name).
pub fn pick_scale_down(fds: &[FailureDomain], machines: &[&Machine]) -> Option<String> {
    let eligible: Vec<&str> = fds
        .iter()
        .filter(|f| f.control_plane == Some(true))
        .map(|f| f.name.as_str())
        .collect();
    let oldest = |list: Vec<&&Machine>| -> Option<String> {
        list.into_iter()
            .min_by_key(|m| {
                (
                    m.metadata.creation_timestamp.as_ref().map(|t| t.0),
                    m.name_any(),
                )
            })
            .map(|m| m.name_any())
    };
    let outside: Vec<&&Machine> = machines
        .iter()
        .filter(|m| {
            !eligible.is_empty() && m.failure_domain().is_none_or(|fd| !eligible.contains(&fd))
        })
        .collect();
    if !outside.is_empty() {
        return oldest(outside);
    }
    let mut by_fd: BTreeMap<Option<&str>, Vec<&&Machine>> = BTreeMap::new();
    for m in machines {
        by_fd.entry(m.failure_domain()).or_default().push(m);
    }
    let (_, list) = by_fd
        .into_iter()
        .max_by(|(a_fd, a), (b_fd, b)| a.len().cmp(&b.len()).then_with(|| b_fd.cmp(a_fd)))?;
    oldest(list)
}

/// The KubeadmConfig spec for a new control-plane Machine: the first one
/// initialises (`initConfiguration` + `clusterConfiguration`), the others join
/// (`joinConfiguration` with `controlPlane: {}`).
pub fn config_spec(kcp: &KubeadmControlPlane, first: bool) -> KubeadmConfigSpec {
    let mut fields = kcp.spec.kubeadm_config_spec.0.clone();
    if first {
        fields.remove("joinConfiguration");
    } else {
        fields.remove("initConfiguration");
        fields.remove("clusterConfiguration");
        let join = fields
            .entry("joinConfiguration")
            .or_insert_with(|| json!({}));
        if let Value::Object(j) = join {
            j.insert("controlPlane".into(), json!({}));
        }
    }
    KubeadmConfigSpec { fields }
}

async fn reconcile(obj: Arc<KubeadmControlPlane>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<KubeadmControlPlane> = ctx.api(&ns);
    let Some(kcp) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let machines = control_plane_machines(&ctx, &kcp).await?;
    let cluster_name = owner_of(&kcp.metadata, CLUSTER_GROUP, "Cluster").map(|o| o.name.clone());
    if is_deleting(&kcp.metadata) {
        if let Some(cluster) = &cluster_name {
            let workers = ctx
                .api::<Machine>(&ns)
                .list(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}")))
                .await?
                .items
                .into_iter()
                .filter(|m| meta::label(&m.metadata, CONTROL_PLANE_LABEL).is_none())
                .count();
            if workers > 0 {
                return Ok(ctx.poll());
            }
        }
        for m in machines.iter().filter(|m| !is_deleting(&m.metadata)) {
            meta::delete_ignoring_missing(&ctx.api::<Machine>(&ns), &m.name_any()).await?;
        }
        if !machines.is_empty() {
            return Ok(ctx.poll());
        }
        meta::remove_finalizer(&api, &kcp.metadata, KCP_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let Some(cluster_name) = cluster_name else {
        return Ok(ctx.poll());
    };
    if meta::add_finalizer(&api, &kcp.metadata, KCP_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    let Some(cluster) = ctx.api::<Cluster>(&ns).get_opt(&cluster_name).await? else {
        return Ok(ctx.poll());
    };
    if cluster.is_paused() || meta::has_paused_annotation(&kcp.metadata) {
        return Ok(ctx.idle());
    }
    let endpoint_ok = cluster
        .spec
        .control_plane_endpoint
        .as_ref()
        .is_some_and(crate::crds::ApiEndpoint::is_valid);
    let active: Vec<&Machine> = machines
        .iter()
        .filter(|m| !is_deleting(&m.metadata))
        .collect();
    let with_node = active.iter().filter(|m| m.node_name().is_some()).count();
    let initialized = kcp.initialized() || with_node > 0;
    let want = usize::try_from(kcp.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let settling = machines.len() != active.len();
    if cluster.infrastructure_provisioned() && endpoint_ok && !settling {
        if active.len() < want && with_node == active.len() {
            let fd = pick_fewest(cluster.failure_domains(), &active);
            create_machine(
                &ctx,
                &kcp,
                &cluster_name,
                fd,
                active.is_empty() && !initialized,
            )
            .await?;
        } else if active.len() > want
            && let Some(victim) = pick_scale_down(cluster.failure_domains(), &active)
        {
            meta::delete_ignoring_missing(&ctx.api::<Machine>(&ns), &victim).await?;
        }
    }
    let count = i32::try_from(active.len()).unwrap_or(i32::MAX);
    let ready = i32::try_from(with_node).unwrap_or(i32::MAX);
    let current = kcp.status.clone().unwrap_or_default();
    let status = KubeadmControlPlaneStatus {
        initialization: Some(ControlPlaneInitialization {
            control_plane_initialized: Some(initialized),
        }),
        replicas: Some(count),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        up_to_date_replicas: Some(count),
        selector: Some(format!(
            "{CLUSTER_NAME_LABEL}={cluster_name},{CONTROL_PLANE_LABEL}"
        )),
        version: Some(kcp.spec.version.clone()),
        conditions: current.conditions.clone(),
        observed_generation: kcp.metadata.generation,
    };
    if status != current {
        meta::patch_status(&api, &kcp.name_any(), serde_json::to_value(&status)?).await?;
    }
    Ok(if active.len() == want && with_node == want {
        ctx.idle()
    } else {
        ctx.poll()
    })
}

/// The control-plane Machines of this KubeadmControlPlane, by name.
async fn control_plane_machines(ctx: &Ctx, kcp: &KubeadmControlPlane) -> Result<Vec<Machine>> {
    let ns = kcp.namespace().unwrap_or_default();
    let uid = kcp.metadata.uid.clone().unwrap_or_default();
    let lp =
        ListParams::default().labels(&format!("{CONTROL_PLANE_NAME_LABEL}={}", kcp.name_any()));
    let mut out: Vec<Machine> = ctx
        .api::<Machine>(&ns)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|m| meta::is_owned_by(&m.metadata, &uid))
        .collect();
    out.sort_by_key(|m| m.name_any());
    Ok(out)
}

async fn create_machine(
    ctx: &Ctx,
    kcp: &KubeadmControlPlane,
    cluster_name: &str,
    failure_domain: Option<String>,
    first: bool,
) -> Result<()> {
    let ns = kcp.namespace().unwrap_or_default();
    let name = ctx.names.generate(&kcp.name_any());
    let template = &kcp.spec.machine_template;
    let mut labels = template.metadata.labels.clone();
    labels.insert(CLUSTER_NAME_LABEL.into(), cluster_name.into());
    labels.insert(CONTROL_PLANE_LABEL.into(), String::new());
    labels.insert(CONTROL_PLANE_NAME_LABEL.into(), kcp.name_any());
    let annotations = template.metadata.annotations.clone();
    let owner = meta::owner_ref(
        &KubeadmControlPlane::api_version(&()),
        "KubeadmControlPlane",
        &kcp.metadata,
        false,
        true,
    );
    let infra_ref = clone::clone_from_template(
        ctx,
        &CloneRequest {
            namespace: &ns,
            template: &template.spec.infrastructure_ref,
            name: &name,
            cluster_name,
            labels: labels.clone(),
            annotations: annotations.clone(),
            owner: owner.clone(),
        },
    )
    .await?;
    let meta_of = |owner| ObjectMeta {
        name: Some(name.clone()),
        namespace: Some(ns.clone()),
        labels: Some(labels.clone()),
        annotations: (!annotations.is_empty()).then(|| annotations.clone()),
        owner_references: Some(vec![owner]),
        ..ObjectMeta::default()
    };
    let config = KubeadmConfig {
        metadata: meta_of(owner),
        spec: config_spec(kcp, first),
        status: None,
    };
    let configs: Api<KubeadmConfig> = ctx.api(&ns);
    if let Err(e) = configs.create(&PostParams::default(), &config).await {
        delete_infra(ctx, &ns, &infra_ref).await;
        return Err(e.into());
    }
    let machine = Machine {
        metadata: meta_of(meta::owner_ref(
            &KubeadmControlPlane::api_version(&()),
            "KubeadmControlPlane",
            &kcp.metadata,
            true,
            true,
        )),
        spec: MachineSpec {
            cluster_name: cluster_name.into(),
            bootstrap: Bootstrap {
                config_ref: Some(ContractRef {
                    api_group: BOOTSTRAP_GROUP.into(),
                    kind: "KubeadmConfig".into(),
                    name: name.clone(),
                }),
                data_secret_name: None,
            },
            infrastructure_ref: infra_ref.clone(),
            version: Some(kcp.spec.version.clone()),
            provider_id: None,
            failure_domain: failure_domain.clone(),
        },
        status: None,
    };
    if let Err(e) = ctx
        .api::<Machine>(&ns)
        .create(&PostParams::default(), &machine)
        .await
    {
        delete_infra(ctx, &ns, &infra_ref).await;
        if let Err(e) = meta::delete_ignoring_missing(&configs, &name).await {
            tracing::warn!(%name, error = %e, "orphan KubeadmConfig not deleted");
        }
        return Err(e.into());
    }
    tracing::info!(kcp = %kcp.name_any(), machine = %name, failure_domain = ?failure_domain, "created control-plane machine");
    Ok(())
}

async fn delete_infra(ctx: &Ctx, ns: &str, r: &ContractRef) {
    let result = match clone::api_for(ctx, ns, r).await {
        Ok(api) => meta::delete_ignoring_missing(&api, &r.name).await,
        Err(e) => Err(e),
    };
    if let Err(e) = result {
        tracing::warn!(name = %r.name, error = %e, "orphan InfraMachine not deleted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn fd(name: &str, cp: bool) -> FailureDomain {
        FailureDomain {
            name: name.into(),
            control_plane: Some(cp),
            attributes: BTreeMap::new(),
        }
    }

    fn m(name: &str, fd: Option<&str>, created: i64) -> Machine {
        let mut m = Machine::new(
            name,
            MachineSpec {
                failure_domain: fd.map(str::to_string),
                ..MachineSpec::default()
            },
        );
        m.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        m
    }

    #[test]
    fn fewest_first_over_control_plane_domains_only() {
        let fds = [
            fd("dc-a", true),
            fd("dc-b", true),
            fd("dc-c", true),
            fd("dc-w", false),
        ];
        assert_eq!(pick_fewest(&fds, &[]).as_deref(), Some("dc-a"));
        let a = m("a", Some("dc-a"), 1);
        let b = m("b", Some("dc-b"), 2);
        assert_eq!(pick_fewest(&fds, &[&a]).as_deref(), Some("dc-b"));
        assert_eq!(pick_fewest(&fds, &[&a, &b]).as_deref(), Some("dc-c"));
        // dc-b gone from the list (credentials broken): the others are used.
        let fds2 = [fd("dc-a", true), fd("dc-c", true)];
        let c = m("c", Some("dc-c"), 3);
        assert_eq!(pick_fewest(&fds2, &[&a, &b, &c]).as_deref(), Some("dc-a"));
        assert_eq!(pick_fewest(&[fd("dc-w", false)], &[]), None);
    }

    #[test]
    fn scale_down_prefers_vanished_domains_then_most_populated() {
        let fds = [fd("dc-a", true), fd("dc-c", true)];
        let a1 = m("a1", Some("dc-a"), 5);
        let a2 = m("a2", Some("dc-a"), 1);
        let b1 = m("b1", Some("dc-b"), 9);
        let c1 = m("c1", Some("dc-c"), 2);
        assert_eq!(
            pick_scale_down(&fds, &[&a1, &a2, &b1, &c1]).as_deref(),
            Some("b1")
        );
        assert_eq!(
            pick_scale_down(&fds, &[&a1, &a2, &c1]).as_deref(),
            Some("a2")
        );
        assert_eq!(pick_scale_down(&fds, &[]), None);
    }

    #[test]
    fn first_machine_inits_others_join() {
        let mut kcp = KubeadmControlPlane::new("cp", Default::default());
        kcp.spec.kubeadm_config_spec.0 = serde_json::from_value(json!({
            "format": "cloud-config",
            "initConfiguration": {"nodeRegistration": {}},
            "clusterConfiguration": {"apiServer": {}},
            "joinConfiguration": {"nodeRegistration": {}}
        }))
        .unwrap();
        let init = config_spec(&kcp, true);
        assert_eq!(
            Value::Object(init.fields),
            json!({"format": "cloud-config", "initConfiguration": {"nodeRegistration": {}},
                   "clusterConfiguration": {"apiServer": {}}})
        );
        let join = config_spec(&kcp, false);
        assert_eq!(
            Value::Object(join.fields),
            json!({"format": "cloud-config", "joinConfiguration": {"nodeRegistration": {}, "controlPlane": {}}})
        );
    }
}
