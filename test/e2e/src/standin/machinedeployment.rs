//! CAPI's MachineDeployment controller, for our objects.
//!
//! - The Cluster owns the deployment (non-controller owner reference) and it
//!   carries the `cluster.x-k8s.io/cluster-name` label.
//! - One MachineSet per template, named `<deployment>-<hash>` and labelled
//!   `machine-template-hash=<hash>` (also in its selector and template), plus
//!   `cluster.x-k8s.io/deployment-name`; its replicas follow the deployment's.
//!   The template's `failureDomain` travels unchanged: every replica lands in
//!   that one failure domain (CAPI does not spread MachineDeployments).
//! - Status: the sums of its MachineSets; `phase` `ScalingUp` / `ScalingDown`
//!   / `Running`.
//! - Deletion: its MachineSets are deleted and waited for, then the finalizer goes.
//!
//! Simpler than CAPI: a template change replaces the old MachineSets at once
//! (deleted, not scaled down step by step: no `maxSurge`/`maxUnavailable`),
//! no revision history, no rollout `after`, no remediation settings.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::meta::{
    self, CLUSTER_NAME_LABEL, DEPLOYMENT_NAME_LABEL, MACHINEDEPLOYMENT_FINALIZER,
    TEMPLATE_HASH_LABEL, is_deleting, owner_of,
};
use super::names::{fnv1a, hash_label};
use super::{Ctx, error_policy, ticker};
use crate::crds::machineset::{MachineDeployment, MachineSet, MachineSetSpec, ReplicaStatus};
use crate::crds::{CLUSTER_GROUP, Cluster};
use crate::error::Result;

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    Controller::new(ctx.scoped::<MachineDeployment>(), wc.clone())
        .owns(ctx.scoped::<MachineSet>(), wc)
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// The template hash label value of a deployment (stable for equal templates).
pub fn template_hash(md: &MachineDeployment) -> String {
    let bytes = serde_json::to_vec(&md.spec.template).unwrap_or_default();
    hash_label(fnv1a(&bytes))
}

/// The MachineSet a deployment wants for its current template.
pub fn desired_machine_set(md: &MachineDeployment) -> MachineSet {
    let hash = template_hash(md);
    let md_name = md.name_any();
    let mut template = md.spec.template.clone();
    template
        .metadata
        .labels
        .insert(DEPLOYMENT_NAME_LABEL.into(), md_name.clone());
    template
        .metadata
        .labels
        .insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
    let mut selector = md.spec.selector.clone();
    let mut match_labels = selector.match_labels.clone().unwrap_or_default();
    match_labels.insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
    selector.match_labels = Some(match_labels);
    let mut labels = md.spec.template.metadata.labels.clone();
    labels.insert(DEPLOYMENT_NAME_LABEL.into(), md_name.clone());
    labels.insert(CLUSTER_NAME_LABEL.into(), md.spec.cluster_name.clone());
    labels.insert(TEMPLATE_HASH_LABEL.into(), hash.clone());
    let mut ms = MachineSet::new(
        &format!("{md_name}-{}", &hash[..5]),
        MachineSetSpec {
            cluster_name: md.spec.cluster_name.clone(),
            replicas: Some(md.spec.replicas.unwrap_or(1)),
            selector,
            template,
            deletion: md.spec.deletion.clone(),
        },
    );
    ms.metadata.namespace = md.namespace();
    ms.metadata.labels = Some(labels);
    ms.metadata.owner_references = Some(vec![meta::owner_ref(
        &MachineDeployment::api_version(&()),
        "MachineDeployment",
        &md.metadata,
        true,
        true,
    )]);
    ms
}

async fn reconcile(obj: Arc<MachineDeployment>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<MachineDeployment> = ctx.api(&ns);
    let Some(md) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let ms_api: Api<MachineSet> = ctx.api(&ns);
    let uid = md.metadata.uid.clone().unwrap_or_default();
    let owned: Vec<MachineSet> = ms_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|ms| meta::is_owned_by(&ms.metadata, &uid))
        .collect();
    if is_deleting(&md.metadata) {
        for ms in owned.iter().filter(|ms| !is_deleting(&ms.metadata)) {
            meta::delete_ignoring_missing(&ms_api, &ms.name_any()).await?;
        }
        if !owned.is_empty() {
            return Ok(ctx.poll());
        }
        meta::remove_finalizer(&api, &md.metadata, MACHINEDEPLOYMENT_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let cluster = ctx
        .api::<Cluster>(&ns)
        .get_opt(&md.spec.cluster_name)
        .await?;
    if ensure_label_and_owner(&api, &md, cluster.as_ref()).await? {
        return Ok(ctx.poll());
    }
    if meta::add_finalizer(&api, &md.metadata, MACHINEDEPLOYMENT_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    if md.spec.paused == Some(true) || cluster.as_ref().is_some_and(Cluster::is_paused) {
        return Ok(ctx.idle());
    }
    let desired = desired_machine_set(&md);
    let hash = template_hash(&md);
    let want = md.spec.replicas.unwrap_or(1);
    match owned
        .iter()
        .find(|ms| meta::label(&ms.metadata, TEMPLATE_HASH_LABEL) == Some(hash.as_str()))
    {
        None => match ms_api.create(&PostParams::default(), &desired).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        },
        Some(ms) if ms.spec.replicas != Some(want) || ms.spec.deletion != md.spec.deletion => {
            let body = json!({"spec": {"replicas": want, "deletion": md.spec.deletion}});
            ms_api
                .patch(
                    &ms.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&body),
                )
                .await?;
        }
        Some(_) => {}
    }
    for old in owned.iter().filter(|ms| {
        meta::label(&ms.metadata, TEMPLATE_HASH_LABEL) != Some(hash.as_str())
            && !is_deleting(&ms.metadata)
    }) {
        meta::delete_ignoring_missing(&ms_api, &old.name_any()).await?;
    }
    let sum = |f: fn(&ReplicaStatus) -> Option<i32>| -> i32 {
        owned
            .iter()
            .filter_map(|ms| ms.status.as_ref().and_then(f))
            .sum()
    };
    let replicas = sum(|s| s.replicas);
    let ready = sum(|s| s.ready_replicas);
    let up_to_date: i32 = owned
        .iter()
        .filter(|ms| meta::label(&ms.metadata, TEMPLATE_HASH_LABEL) == Some(hash.as_str()))
        .filter_map(|ms| ms.status.as_ref().and_then(|s| s.replicas))
        .sum();
    let current = md.status.clone().unwrap_or_default();
    let phase = match replicas.cmp(&want) {
        std::cmp::Ordering::Less => "ScalingUp",
        std::cmp::Ordering::Greater => "ScalingDown",
        std::cmp::Ordering::Equal => "Running",
    };
    let status = ReplicaStatus {
        replicas: Some(replicas),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        up_to_date_replicas: Some(up_to_date),
        selector: Some(meta::selector_string(
            &md.spec.selector.match_labels.clone().unwrap_or_default(),
        )),
        phase: Some(phase.into()),
        conditions: current.conditions.clone(),
        observed_generation: md.metadata.generation,
    };
    if status != current {
        meta::patch_status(&api, &md.name_any(), serde_json::to_value(&status)?).await?;
    }
    Ok(if phase == "Running" && ready == want {
        ctx.idle()
    } else {
        ctx.poll()
    })
}

/// Label with the Cluster's name and add the Cluster as (non-controller)
/// owner. Returns whether it wrote.
async fn ensure_label_and_owner(
    api: &Api<MachineDeployment>,
    md: &MachineDeployment,
    cluster: Option<&Cluster>,
) -> Result<bool> {
    let cluster_name = md.spec.cluster_name.as_str();
    meta::update_metadata(api, &md.metadata, |m| {
        let has_label = meta::label(m, CLUSTER_NAME_LABEL) == Some(cluster_name);
        let needs_owner = cluster.is_some() && owner_of(m, CLUSTER_GROUP, "Cluster").is_none();
        if has_label && !needs_owner {
            return None;
        }
        let owner = cluster.filter(|_| needs_owner).map(|c| &c.metadata);
        Some(meta::cluster_label_fields(m, cluster_name, owner))
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::machine::MachineSpec;
    use crate::crds::machineset::{MachineDeploymentSpec, MachineTemplateSpec};
    use crate::crds::meta::{ContractRef, ObjectMetaTemplate};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;

    fn md(failure_domain: &str) -> MachineDeployment {
        let mut md = MachineDeployment::new(
            "wl1-md-dc-a",
            MachineDeploymentSpec {
                cluster_name: "wl1".into(),
                replicas: Some(2),
                selector: LabelSelector {
                    match_labels: Some(
                        [(DEPLOYMENT_NAME_LABEL.to_string(), "wl1-md-dc-a".to_string())].into(),
                    ),
                    match_expressions: None,
                },
                template: MachineTemplateSpec {
                    metadata: ObjectMetaTemplate {
                        labels: [(DEPLOYMENT_NAME_LABEL.to_string(), "wl1-md-dc-a".to_string())]
                            .into(),
                        annotations: Default::default(),
                    },
                    spec: MachineSpec {
                        cluster_name: "wl1".into(),
                        failure_domain: Some(failure_domain.into()),
                        infrastructure_ref: ContractRef {
                            api_group: "infrastructure.cluster.x-k8s.io".into(),
                            kind: "ProxmoxMachineTemplate".into(),
                            name: "wl1-worker".into(),
                        },
                        ..MachineSpec::default()
                    },
                },
                ..MachineDeploymentSpec::default()
            },
        );
        md.metadata.namespace = Some("ns".into());
        md.metadata.uid = Some("md-uid".into());
        md
    }

    #[test]
    fn machine_set_carries_hash_deployment_and_failure_domain() {
        let d = md("dc-a");
        let hash = template_hash(&d);
        let ms = desired_machine_set(&d);
        assert_eq!(
            ms.metadata.name.as_deref(),
            Some(format!("wl1-md-dc-a-{}", &hash[..5]).as_str())
        );
        assert_eq!(ms.spec.replicas, Some(2));
        assert_eq!(
            ms.spec.template.spec.failure_domain.as_deref(),
            Some("dc-a")
        );
        let sel = ms.spec.selector.match_labels.clone().unwrap();
        assert_eq!(sel.get(TEMPLATE_HASH_LABEL), Some(&hash));
        assert_eq!(
            sel.get(DEPLOYMENT_NAME_LABEL).map(String::as_str),
            Some("wl1-md-dc-a")
        );
        // The template's labels satisfy the selector.
        for (k, v) in &sel {
            assert_eq!(ms.spec.template.metadata.labels.get(k), Some(v), "{k}");
        }
        let owner = &ms.metadata.owner_references.clone().unwrap()[0];
        assert_eq!(owner.kind, "MachineDeployment");
        assert_eq!(owner.uid, "md-uid");
        assert_eq!(owner.controller, Some(true));
        // Another template gets another MachineSet; the same one the same.
        assert_ne!(template_hash(&md("dc-b")), hash);
        assert_eq!(template_hash(&md("dc-a")), hash);
    }
}
