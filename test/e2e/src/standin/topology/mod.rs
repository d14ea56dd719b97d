//! CAPI's topology controller (ClusterClass, managed topologies), for our
//! objects. For a Cluster with `spec.topology`:
//!
//! - Reads its ClusterClass and the class's templates, resolves the
//!   variables (the Cluster's values, else the schema defaults) and patches
//!   each template for its role ([`desired`]).
//! - Records `spec.infrastructureRef` and `spec.controlPlaneRef` on the
//!   Cluster (`<cluster>-<random>`) before it creates those objects, then
//!   server-side applies (field manager `capi-topology`) the InfraCluster
//!   (spec = the patched template's `spec.template.spec`), the
//!   KubeadmControlPlane (the template's spec plus `version`, `replicas` and
//!   the control plane's InfraMachine template) and one MachineDeployment
//!   per `spec.topology.workers.machineDeployments[]`, labelled
//!   `topology.cluster.x-k8s.io/owned` and (MachineDeployments)
//!   `topology.cluster.x-k8s.io/deployment-name`.
//! - Every object is first applied as a **dry run** carrying the annotation
//!   `topology.cluster.x-k8s.io/dry-run`; only when the dry run changes the
//!   spec or labels is it applied for real. For templates (InfraMachine and
//!   bootstrap templates, immutable for our webhook except in exactly this
//!   dry run) a change is never applied in place: a new template
//!   `<base>-<random>` is created and the control plane or MachineDeployment
//!   pointed at it, which rolls its machines (CAPI's template rotation).
//! - Templates it made that no KubeadmControlPlane, MachineDeployment or
//!   MachineSet of the Cluster references any more are deleted (CAPI:
//!   `DeleteTemplateIfUnused` when the MachineSet goes); MachineDeployments
//!   no longer in the topology are deleted.
//! - Condition `TopologyReconciled` on the Cluster: `True` /
//!   `ReconcileSucceeded`, or `False` with the reason and the message of the
//!   failure (a missing variable, a failed patch, a refusal by a webhook).
//!
//! Simpler than CAPI: patches are inline JSON patches only (no external
//! patches / runtime extensions, no `enabledIf`); `valueFrom.template`
//! understands `{{ .path }}` only; variable values are defaulted from their
//! schemas but not validated against them (our webhooks validate the
//! resulting objects); MachineDeployments are named `<cluster>-<topology
//! name>` (CAPI: a naming template, default with a random suffix); no
//! version upgrade sequencing (control plane first, then workers), no
//! MachinePools, health checks, lifecycle hooks or `clusterctl alpha
//! topology plan`; the ClusterClass is re-read on the resync period, not
//! watched.

pub mod desired;
pub mod patch;
pub mod variables;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{DynamicObject, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::kinds::group_of;
use super::meta::{self, CLUSTER_NAME_LABEL, is_deleting};
use super::{Ctx, error_policy, ticker};
use crate::crds::Cluster;
use crate::crds::clusterclass::{ClusterClassSpec, TemplateRef, Topology};
use crate::crds::{ClusterClass, MachineDeployment, MachineSet};
use crate::error::{E2eError, Result};
use desired::{ClassTemplates, Desired};

/// Label on every object the topology controller manages (empty value).
pub const OWNED_LABEL: &str = "topology.cluster.x-k8s.io/owned";
/// Label naming a MachineDeployment's entry in `spec.topology.workers`.
pub const DEPLOYMENT_TOPOLOGY_LABEL: &str = "topology.cluster.x-k8s.io/deployment-name";
/// Annotation on the objects of the topology controller's dry-run applies.
pub const DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";
/// The field manager of its server-side applies.
pub const FIELD_MANAGER: &str = "capi-topology";
/// The Cluster condition it owns.
pub const TOPOLOGY_RECONCILED: &str = "TopologyReconciled";

/// Why a topology cannot be reconciled (the message of
/// `TopologyReconciled=False`).
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    /// `spec.topology.classRef` names no ClusterClass.
    #[error("ClusterClass {0} not found")]
    ClassNotFound(String),
    /// A template the ClusterClass references does not exist.
    #[error("{kind} {name} (referenced by the ClusterClass) not found")]
    TemplateNotFound {
        /// Its kind.
        kind: String,
        /// Its name.
        name: String,
    },
    /// A required variable has neither a value nor a default.
    #[error("spec.topology.variables: variable {0:?} is required by the ClusterClass")]
    MissingVariable(String),
    /// A value for a variable the class does not define.
    #[error("spec.topology.variables: {0:?} is not a variable of the ClusterClass")]
    UnknownVariable(String),
    /// A MachineDeployment of a class the ClusterClass lacks.
    #[error(
        "spec.topology.workers.machineDeployments[{index}].class: {class:?} is not a MachineDeployment class of the ClusterClass"
    )]
    UnknownClass {
        /// Position in the topology.
        index: usize,
        /// The class asked for.
        class: String,
    },
    /// Two MachineDeployments with the same name.
    #[error("spec.topology.workers.machineDeployments: name {0:?} appears twice")]
    DuplicateMachineDeployment(String),
    /// A patch could not be applied.
    #[error("patch {patch:?}: {message}")]
    Patch {
        /// The patch's name.
        patch: String,
        /// What failed.
        message: String,
    },
    /// A `valueFrom.template` could not be rendered.
    #[error("template: {0}")]
    Template(String),
}

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    Controller::new(ctx.scoped::<Cluster>(), wc)
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(obj: Arc<Cluster>, ctx: Arc<Ctx>) -> Result<Action> {
    let Some(topology) = obj.spec.topology.clone() else {
        return Ok(Action::await_change());
    };
    if is_deleting(&obj.metadata) || obj.is_paused() {
        return Ok(ctx.idle());
    }
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<Cluster> = ctx.api(&ns);
    let (ok, reason, message) = match reconcile_topology(&ctx, &obj, &topology).await {
        Ok(true) => (true, "ReconcileSucceeded", String::new()),
        Ok(false) => return Ok(ctx.poll()),
        Err(e @ E2eError::Topology(_)) => (false, "ClusterClassOrVariablesInvalid", e.to_string()),
        // A refusal (webhook, schema): not a transient failure.
        Err(E2eError::Kube(kube::Error::Api(s))) if s.code != 409 && s.code < 500 => {
            (false, "ReconcileFailed", s.message)
        }
        Err(e) => return Err(e),
    };
    let mut conditions = obj
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    if meta::set_condition(&mut conditions, TOPOLOGY_RECONCILED, ok, reason, &message) {
        meta::patch_status(&api, &obj.name_any(), json!({"conditions": conditions})).await?;
    }
    Ok(if ok { ctx.idle() } else { ctx.retry() })
}

/// One pass; `Ok(false)` when it wrote the Cluster's references and must
/// come back.
async fn reconcile_topology(ctx: &Ctx, cluster: &Cluster, topology: &Topology) -> Result<bool> {
    let ns = cluster.namespace().unwrap_or_default();
    let name = cluster.name_any();
    let class_ns = topology.class_ref.namespace.clone().unwrap_or(ns.clone());
    let class = ctx
        .api::<ClusterClass>(&class_ns)
        .get_opt(&topology.class_ref.name)
        .await?
        .ok_or_else(|| TopologyError::ClassNotFound(topology.class_ref.name.clone()))?;
    let templates = fetch_templates(ctx, &class_ns, &class.spec).await?;
    let want = desired::desired(&name, &ns, topology, &class.spec, &templates)?;

    // Record the names before creating the objects.
    let infra_tref = &class.spec.infrastructure.template_ref;
    let infra_kind = super::clone::cloned_kind(&infra_tref.kind)?.to_string();
    let cp_tref = &class.spec.control_plane.template_ref;
    let cp_kind = super::clone::cloned_kind(&cp_tref.kind)?.to_string();
    let (Some(infra_ref), Some(cp_ref)) = (
        cluster.spec.infrastructure_ref.clone(),
        cluster.spec.control_plane_ref.clone(),
    ) else {
        let refs = json!({"spec": {
            "infrastructureRef": cluster.spec.infrastructure_ref.clone().map_or_else(
                || json!({"apiGroup": group_of(&infra_tref.api_version), "kind": infra_kind, "name": ctx.names.generate(&name)}),
                |r| json!(r)),
            "controlPlaneRef": cluster.spec.control_plane_ref.clone().map_or_else(
                || json!({"apiGroup": group_of(&cp_tref.api_version), "kind": cp_kind, "name": ctx.names.generate(&name)}),
                |r| json!(r)),
        }});
        ctx.api::<Cluster>(&ns)
            .patch(&name, &PatchParams::default(), &Patch::Merge(&refs))
            .await?;
        return Ok(false);
    };
    let owned = |extra: &[(&str, &str)]| {
        let mut labels = BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_string(), name.clone()),
            (OWNED_LABEL.to_string(), String::new()),
        ]);
        labels.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
        );
        labels
    };

    // The InfraCluster.
    let (infra_api, infra_version) =
        dyn_api(ctx, &ns, &infra_ref.api_group, &infra_ref.kind).await?;
    apply_if_changed(
        &infra_api,
        object(
            &infra_version,
            &infra_ref.kind,
            &infra_ref.name,
            &owned(&[]),
            None,
            want.infrastructure_spec(),
        ),
    )
    .await?;

    // The control plane and its InfraMachine template.
    let (cp_api, cp_version) = dyn_api(ctx, &ns, &cp_ref.api_group, &cp_ref.kind).await?;
    let current_cp = cp_api.get_opt(&cp_ref.name).await?;
    let mut referenced = BTreeSet::new();
    let machine_template = match &want.control_plane_machine {
        Some(t) => {
            let current = current_cp
                .as_ref()
                .and_then(|o| text(o, "/spec/machineTemplate/spec/infrastructureRef/name"));
            let tname = ensure_template(
                ctx,
                &ns,
                cluster,
                current,
                t,
                &format!("{name}-control-plane"),
                &owned(&[]),
            )
            .await?;
            referenced.insert(tname.clone());
            Some((group_of(&api_version(t)).to_string(), kind(t), tname))
        }
        None => None,
    };
    let cp_spec = want.control_plane_spec(
        topology,
        machine_template
            .as_ref()
            .map(|(g, k, n)| (g.as_str(), k.as_str(), n.as_str())),
    );
    apply_if_changed(
        &cp_api,
        object(
            &cp_version,
            &cp_ref.kind,
            &cp_ref.name,
            &owned(&[]),
            None,
            cp_spec,
        ),
    )
    .await?;

    // The MachineDeployments.
    let md_api: Api<MachineDeployment> = ctx.api(&ns);
    let (md_dyn, md_version) =
        dyn_api(ctx, &ns, crate::crds::CLUSTER_GROUP, "MachineDeployment").await?;
    let mut wanted_mds = BTreeSet::new();
    for md in &want.machine_deployments {
        let md_name = machine_deployment_name(&name, &md.topology_name);
        wanted_mds.insert(md_name.clone());
        let current = md_api.get_opt(&md_name).await?;
        let labels = owned(&[(DEPLOYMENT_TOPOLOGY_LABEL, md.topology_name.as_str())]);
        let cur_bootstrap = current.as_ref().and_then(|m| {
            m.spec
                .template
                .spec
                .bootstrap
                .config_ref
                .as_ref()
                .map(|r| r.name.clone())
        });
        let cur_infra = current
            .as_ref()
            .map(|m| m.spec.template.spec.infrastructure_ref.name.clone());
        let bootstrap = ensure_template(
            ctx,
            &ns,
            cluster,
            cur_bootstrap.as_deref(),
            &md.bootstrap,
            &md_name,
            &labels,
        )
        .await?;
        let infra = ensure_template(
            ctx,
            &ns,
            cluster,
            cur_infra.as_deref(),
            &md.infrastructure,
            &md_name,
            &labels,
        )
        .await?;
        referenced.insert(bootstrap.clone());
        referenced.insert(infra.clone());
        let selector = BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_string(), name.clone()),
            (
                DEPLOYMENT_TOPOLOGY_LABEL.to_string(),
                md.topology_name.clone(),
            ),
        ]);
        let mut spec = json!({
            "clusterName": name,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {
                    "clusterName": name,
                    "version": topology.version,
                    "bootstrap": {"configRef": {
                        "apiGroup": group_of(&api_version(&md.bootstrap)),
                        "kind": kind(&md.bootstrap), "name": bootstrap}},
                    "infrastructureRef": {
                        "apiGroup": group_of(&api_version(&md.infrastructure)),
                        "kind": kind(&md.infrastructure), "name": infra},
                }
            }
        });
        if let Some(r) = md.replicas {
            spec["replicas"] = json!(r);
        }
        if let Some(fd) = &md.failure_domain {
            spec["template"]["spec"]["failureDomain"] = json!(fd);
        }
        apply_if_changed(
            &md_dyn,
            object(
                &md_version,
                "MachineDeployment",
                &md_name,
                &labels,
                None,
                spec,
            ),
        )
        .await?;
    }
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={name},{OWNED_LABEL}"));
    for old in md_api.list(&lp).await?.items {
        if !wanted_mds.contains(&old.name_any()) && !is_deleting(&old.metadata) {
            meta::delete_ignoring_missing(&md_api, &old.name_any()).await?;
        }
    }
    delete_unused_templates(ctx, &ns, &name, &want, referenced, &lp).await?;
    Ok(true)
}

/// `<cluster>-<topology name>`; past 63 characters (it is a label value on
/// the Machines) cut to 57 plus `-` and five characters of its hash.
pub fn machine_deployment_name(cluster: &str, topology_name: &str) -> String {
    let full = format!("{cluster}-{topology_name}");
    if full.len() <= 63 {
        return full;
    }
    let hash = super::names::hash_label(super::names::fnv1a(full.as_bytes()));
    format!("{}-{}", &full[..57].trim_end_matches('-'), &hash[..5])
}

/// The class's templates, fetched.
async fn fetch_templates(ctx: &Ctx, ns: &str, class: &ClusterClassSpec) -> Result<ClassTemplates> {
    let mut workers = BTreeMap::new();
    for md in class.workers.iter().flat_map(|w| &w.machine_deployments) {
        workers.insert(
            md.class.clone(),
            (
                fetch(ctx, ns, &md.bootstrap.template_ref).await?,
                fetch(ctx, ns, &md.infrastructure.template_ref).await?,
            ),
        );
    }
    let control_plane_machine = match &class.control_plane.machine_infrastructure {
        Some(m) => Some(fetch(ctx, ns, &m.template_ref).await?),
        None => None,
    };
    Ok(ClassTemplates {
        infrastructure: fetch(ctx, ns, &class.infrastructure.template_ref).await?,
        control_plane: fetch(ctx, ns, &class.control_plane.template_ref).await?,
        control_plane_machine,
        workers,
    })
}

async fn fetch(ctx: &Ctx, ns: &str, r: &TemplateRef) -> Result<Value> {
    let api = ctx.kinds.api(ns, group_of(&r.api_version), &r.kind).await?;
    let obj = api
        .get_opt(&r.name)
        .await?
        .ok_or_else(|| TopologyError::TemplateNotFound {
            kind: r.kind.clone(),
            name: r.name.clone(),
        })?;
    Ok(serde_json::to_value(obj)?)
}

fn api_version(obj: &Value) -> String {
    obj["apiVersion"].as_str().unwrap_or_default().to_string()
}

fn kind(obj: &Value) -> String {
    obj["kind"].as_str().unwrap_or_default().to_string()
}

fn text<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a str> {
    super::clone::text(obj, pointer)
}

/// The dynamic API of `group`/`kind` in `ns` and the `apiVersion` it serves.
async fn dyn_api(
    ctx: &Ctx,
    ns: &str,
    group: &str,
    kind: &str,
) -> Result<(Api<DynamicObject>, String)> {
    let ar = ctx.kinds.resolve(group, kind).await?;
    Ok((
        Api::namespaced_with(ctx.client.clone(), ns, &ar),
        ar.api_version.clone(),
    ))
}

/// An object to apply: `metadata` with `labels` (and `annotations`), `spec`.
fn object(
    api_version: &str,
    kind: &str,
    name: &str,
    labels: &BTreeMap<String, String>,
    owner: Option<Value>,
    spec: Value,
) -> Value {
    let mut o = json!({
        "apiVersion": api_version, "kind": kind,
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    });
    if let Some(owner) = owner {
        o["metadata"]["ownerReferences"] = json!([owner]);
    }
    o
}

/// Whether applying `body` would change the object: true when it does not
/// exist, else a server-side apply **dry run** of `body` carrying
/// [`DRY_RUN_ANNOTATION`] is compared with the stored object (spec and labels).
async fn dry_run_changes(api: &Api<DynamicObject>, body: &Value) -> Result<bool> {
    let name = body["metadata"]["name"].as_str().unwrap_or_default();
    let Some(current) = api.get_opt(name).await? else {
        return Ok(true);
    };
    let mut dry = body.clone();
    dry["metadata"]["annotations"] = json!({DRY_RUN_ANNOTATION: ""});
    let pp = PatchParams::apply(FIELD_MANAGER).force().dry_run();
    let would = api.patch(name, &pp, &Patch::Apply(&dry)).await?;
    Ok(would.data.get("spec") != current.data.get("spec")
        || would.metadata.labels != current.metadata.labels)
}

/// Server-side applies `body` when [`dry_run_changes`] says it changes
/// something. Returns whether it wrote.
async fn apply_if_changed(api: &Api<DynamicObject>, body: Value) -> Result<bool> {
    if !dry_run_changes(api, &body).await? {
        return Ok(false);
    }
    let name = body["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &pp, &Patch::Apply(&body)).await?;
    Ok(true)
}

/// The name of a template with `desired`'s spec: `current` when a dry-run
/// apply of that spec onto it changes nothing; else a new template
/// `<base>-<random>`, created and owned by the Cluster (templates are
/// immutable: a change is a new template, which rolls the machines).
async fn ensure_template(
    ctx: &Ctx,
    ns: &str,
    cluster: &Cluster,
    current: Option<&str>,
    desired: &Value,
    base: &str,
    labels: &BTreeMap<String, String>,
) -> Result<String> {
    let (api, av) = dyn_api(ctx, ns, group_of(&api_version(desired)), &kind(desired)).await?;
    let k = kind(desired);
    let spec = desired.get("spec").cloned().unwrap_or_else(|| json!({}));
    let owner = serde_json::to_value(meta::owner_ref(
        &Cluster::api_version(&()),
        "Cluster",
        &cluster.metadata,
        false,
        true,
    ))?;
    if let Some(cur) = current {
        let body = object(&av, &k, cur, labels, Some(owner.clone()), spec.clone());
        if !dry_run_changes(&api, &body).await? {
            return Ok(cur.to_string());
        }
    }
    let new = ctx.names.generate(base);
    let body = object(&av, &k, &new, labels, Some(owner), spec);
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&new, &pp, &Patch::Apply(&body)).await?;
    Ok(new)
}

/// Deletes the templates this controller made for Cluster `name` (labels
/// `lp`) of the kinds `want` uses that are not in `referenced` and not
/// referenced by any of the Cluster's MachineSets.
async fn delete_unused_templates(
    ctx: &Ctx,
    ns: &str,
    name: &str,
    want: &Desired,
    mut referenced: BTreeSet<String>,
    lp: &ListParams,
) -> Result<()> {
    let sets = ctx
        .api::<MachineSet>(ns)
        .list(&ListParams::default())
        .await?
        .items;
    for ms in sets.iter().filter(|m| m.spec.cluster_name == name) {
        referenced.insert(ms.spec.template.spec.infrastructure_ref.name.clone());
        if let Some(r) = &ms.spec.template.spec.bootstrap.config_ref {
            referenced.insert(r.name.clone());
        }
    }
    let mut kinds = BTreeSet::new();
    for t in want.control_plane_machine.iter().chain(
        want.machine_deployments
            .iter()
            .flat_map(|m| [&m.bootstrap, &m.infrastructure]),
    ) {
        kinds.insert((group_of(&api_version(t)).to_string(), kind(t)));
    }
    for (group, k) in kinds {
        let (api, _) = dyn_api(ctx, ns, &group, &k).await?;
        for t in api.list(lp).await?.items {
            if !referenced.contains(&t.name_any()) && !is_deleting(&t.metadata) {
                meta::delete_ignoring_missing(&api, &t.name_any()).await?;
            }
        }
    }
    Ok(())
}
