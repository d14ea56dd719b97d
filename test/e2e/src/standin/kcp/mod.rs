//! The KubeadmControlPlane controller, for our objects.
//!
//! - Waits for its Cluster (owner reference), the Cluster's infrastructure
//!   (`status.initialization.infrastructureProvisioned`) and a valid
//!   `spec.controlPlaneEndpoint`.
//! - Observes its control-plane Machines, each **up to date** when its
//!   InfraMachine was cloned from `machineTemplate.spec.infrastructureRef`
//!   (the `cluster.x-k8s.io/cloned-from-name` and `-groupkind` annotations)
//!   and its `spec.version` is `spec.version` — and lets [`decide::next`]
//!   choose one action, which it performs:
//!   - **Rollout** (a changed infrastructure template or version, e.g. the
//!     topology controller's template rotation): scale up first — while
//!     fewer than `replicas + maxSurge` (`spec.rollout.strategy.rollingUpdate`,
//!     default 1) Machines exist, a new Machine in the `controlPlane` failure
//!     domain with the fewest up-to-date Machines (ties: fewest Machines,
//!     then name; CAPI's `PickFewest`); once it has a Node, the oldest
//!     outdated Machine of the domain with the most outdated Machines (ties:
//!     most Machines, then name; `PickMost`), one outside the domains first.
//!   - **Scale up / down** to `spec.replicas` by the same two rules.
//!   - Nothing while a control-plane Machine is being deleted or one (other
//!     than the one to delete) has no Node (CAPI's preflight checks): one
//!     Machine at a time, and a new Machine is up before an old one goes.
//! - A new Machine: labels `cluster.x-k8s.io/control-plane` and
//!   `control-plane-name`; its InfraMachine is cloned from
//!   `machineTemplate.spec.infrastructureRef`, its KubeadmConfig from
//!   `kubeadmConfigSpec` (init configuration for the first Machine, join
//!   configuration for the others).
//! - `status.initialization.controlPlaneInitialized` once a control-plane
//!   Machine has a Node (the first API server answers); it never flips back.
//!   `status.upToDateReplicas` counts the up-to-date Machines.
//! - Deletion: waits until the cluster's worker Machines are gone, then
//!   deletes its Machines and waits for them, then drops the finalizer.
//!
//! Simpler than KCP: no etcd (membership, leadership hand-over before a
//! deletion) or certificate management, no remediation, no in-place updates,
//! no `rollout.before`/`after`, no delete annotation; health = "has a Node";
//! up to date = infrastructure template and version only (a changed
//! `kubeadmConfigSpec` or `machineTemplate.metadata` does not roll out);
//! failure-domain ties broken by name (CAPI: map order, i.e. random).

pub mod decide;

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
    self, CLONED_FROM_GROUPKIND, CLONED_FROM_NAME, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL,
    CONTROL_PLANE_NAME_LABEL, KCP_FINALIZER, is_deleting, owner_of,
};
use super::{Ctx, error_policy, ticker};
use crate::crds::bootstrap::{KubeadmConfig, KubeadmConfigSpec};
use crate::crds::controlplane::{
    ControlPlaneInitialization, KubeadmControlPlane, KubeadmControlPlaneStatus,
};
use crate::crds::machine::{Bootstrap, Machine, MachineSpec};
use crate::crds::meta::ContractRef;
use crate::crds::{BOOTSTRAP_GROUP, CLUSTER_GROUP, Cluster};
use crate::error::Result;
use decide::{CpMachine, Next};

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
    let observed = observe(&ctx, &kcp, &machines).await?;
    let with_node = observed
        .iter()
        .filter(|m| m.has_node && !m.deleting)
        .count();
    let initialized = kcp.initialized() || with_node > 0;
    let want = usize::try_from(kcp.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let next = decide::next(&decide::Situation {
        failure_domains: cluster.failure_domains(),
        machines: &observed,
        replicas: want,
        max_surge: kcp.max_surge(),
        initialized,
        cluster_ready: cluster.infrastructure_provisioned() && endpoint_ok,
    });
    match &next {
        Next::Create {
            failure_domain,
            init,
            rollout,
        } => {
            create_machine(&ctx, &kcp, &cluster_name, failure_domain.clone(), *init).await?;
            if *rollout {
                tracing::info!(kcp = %kcp.name_any(), failure_domain = ?failure_domain, "rollout: scaled up");
            }
        }
        Next::Delete { machine, rollout } => {
            meta::delete_ignoring_missing(&ctx.api::<Machine>(&ns), machine).await?;
            tracing::info!(kcp = %kcp.name_any(), %machine, rollout, "deleting control-plane machine");
        }
        Next::Wait(w) => tracing::debug!(kcp = %kcp.name_any(), wait = ?w, "waiting"),
        Next::Steady => {}
    }
    let active = observed.iter().filter(|m| !m.deleting);
    let count = i32::try_from(active.clone().count()).unwrap_or(i32::MAX);
    let ready = i32::try_from(with_node).unwrap_or(i32::MAX);
    let up_to_date = i32::try_from(active.filter(|m| m.up_to_date).count()).unwrap_or(i32::MAX);
    let current = kcp.status.clone().unwrap_or_default();
    let status = KubeadmControlPlaneStatus {
        initialization: Some(ControlPlaneInitialization {
            control_plane_initialized: Some(initialized),
        }),
        replicas: Some(count),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        up_to_date_replicas: Some(up_to_date),
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
    Ok(if next == Next::Steady && with_node == want {
        ctx.idle()
    } else {
        ctx.poll()
    })
}

/// `machines` as [`decide`] sees them. Up to date: the InfraMachine's
/// cloned-from annotations name the current `machineTemplate.spec.
/// infrastructureRef` and `spec.version` matches; an InfraMachine that is
/// missing or lacks the annotations counts as up to date (CAPI
/// `matchesInfraMachine`). InfraMachines are read from what the Machine
/// controller's watches delivered, else fetched.
async fn observe(
    ctx: &Ctx,
    kcp: &KubeadmControlPlane,
    machines: &[Machine],
) -> Result<Vec<CpMachine>> {
    let ns = kcp.namespace().unwrap_or_default();
    let template = &kcp.spec.machine_template.spec.infrastructure_ref;
    let template_gk = format!("{}.{}", template.kind, template.api_group);
    let mut out = Vec::with_capacity(machines.len());
    for m in machines {
        let r = &m.spec.infrastructure_ref;
        let infra = match ctx.seen.objects.get(&r.api_group, &r.kind, &ns, &r.name) {
            Some(o) => Some(o),
            None => clone::get(ctx, &ns, r).await?.map(Arc::new),
        };
        let annotation = |key: &str| {
            infra
                .as_ref()
                .and_then(|o| o.metadata.annotations.as_ref())
                .and_then(|a| a.get(key))
                .cloned()
        };
        let infra_current = match (
            annotation(CLONED_FROM_NAME),
            annotation(CLONED_FROM_GROUPKIND),
        ) {
            (Some(name), Some(gk)) => name == template.name && gk == template_gk,
            _ => true,
        };
        let version_current = m
            .spec
            .version
            .as_ref()
            .is_none_or(|v| *v == kcp.spec.version);
        out.push(CpMachine {
            name: m.name_any(),
            failure_domain: m.failure_domain().map(str::to_string),
            created: m.metadata.creation_timestamp.as_ref().map(|t| t.0),
            deleting: is_deleting(&m.metadata),
            has_node: m.node_name().is_some(),
            up_to_date: infra_current && version_current,
        });
    }
    Ok(out)
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
