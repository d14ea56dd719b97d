//! CAPI's MachineSet controller, for our objects.
//!
//! - Scale up: per missing replica, a Machine named `<set>-<5 random>` with
//!   the template's labels + `cluster.x-k8s.io/set-name` +
//!   `cluster.x-k8s.io/cluster-name`, its bootstrap config cloned from the
//!   KubeadmConfigTemplate and its InfraMachine cloned from the
//!   ProxmoxMachineTemplate (`GenerateTemplate`: same name as the Machine,
//!   cloned-from annotations, MachineSet as non-controller owner), the
//!   template's `failureDomain` (one per MachineDeployment — no spreading); a
//!   failed Machine create deletes the two orphans. Replicas are created
//!   (and on scale-down deleted) 16 at a time; their names are drawn from
//!   the seeded generator in order first, so a seed gives the same names.
//!   Preflight `ControlPlaneIsStable`: no new Machine until the control
//!   plane is initialised.
//! - Scale down: deleting Machines first, then `cluster.x-k8s.io/delete-machine`
//!   annotated ones, then unhealthy ones (no Node), then by `spec.deletion.order`
//!   (`Random` — a hash of the UID, as CAPI —, `Newest`, `Oldest`).
//! - Deletion: its Machines are deleted and waited for, then the finalizer goes.
//! - Status: `replicas`, `readyReplicas` and `availableReplicas` (Machines
//!   with a Node), `upToDateReplicas`, `selector`.
//!
//! Simpler than CAPI: no adoption of orphan Machines, no `machineNaming`
//! template, no in-place updates, no other preflight checks, no
//! `minReadySeconds`.

use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ListParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use super::clone::{self, CloneRequest};
use super::meta::{
    self, CLUSTER_NAME_LABEL, DELETE_MACHINE_ANNOTATION, MACHINESET_FINALIZER, SET_NAME_LABEL,
    is_deleting,
};
use super::names::fnv1a;
use super::{Ctx, error_policy, ticker};
use crate::crds::Cluster;
use crate::crds::machine::{Bootstrap, Machine, MachineSpec};
use crate::crds::machineset::{MachineSet, ReplicaStatus};
use crate::crds::meta::ContractRef;
use crate::error::Result;

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    let controller = Controller::new(ctx.scoped::<MachineSet>(), wc.clone());
    let store = controller.store();
    let seen = ctx.clone();
    let children = ctx.clone();
    controller
        // `owns`, and each Machine kept for the reconciles' reads.
        .watches(ctx.scoped::<Machine>(), wc.clone(), move |m| {
            let owner = m
                .metadata
                .owner_references
                .as_deref()
                .unwrap_or(&[])
                .iter()
                .find(|o| o.controller == Some(true) && o.kind == "MachineSet")
                .map(|o| {
                    let r = ObjectRef::<MachineSet>::new(&o.name);
                    match m.namespace() {
                        Some(ns) => r.within(&ns),
                        None => r,
                    }
                });
            children.seen.set_machines.observe(m);
            owner
        })
        .watches(ctx.scoped::<Cluster>(), wc, move |c| {
            let ns = c.namespace();
            let name = c.name_any();
            let refs = store
                .state()
                .into_iter()
                .filter(|ms| ms.namespace() == ns && ms.spec.cluster_name == name)
                .map(|ms| ObjectRef::from_obj(&*ms))
                .collect::<Vec<_>>();
            seen.seen.clusters.observe(c);
            refs
        })
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

async fn reconcile(obj: Arc<MachineSet>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<MachineSet> = ctx.api(&ns);
    // The MachineSet as the watch last delivered it (writes from a stale copy
    // fail with 409; a newer version triggers another reconcile). Its
    // Machines as the watch delivered them, LISTed when that copy asks for
    // a create or delete (a copy missing a just-created Machine would
    // create a duplicate), when a deleted set's copy shows none left (the
    // finalizer goes only after a LIST agrees), and once per resync.
    let ms: &MachineSet = &obj;
    let uid = ms.metadata.uid.clone().unwrap_or_default();
    let want = usize::try_from(ms.spec.replicas.unwrap_or(1).max(0)).unwrap_or(0);
    let mut machines = Vec::new();
    let mut fresh = false;
    if ctx.seen.set_machines.listed_within(&uid, ctx.opts.resync) {
        machines = ctx.seen.set_machines.of_owner(&ns, &uid);
        fresh = if is_deleting(&ms.metadata) {
            !machines.is_empty()
        } else {
            let active = machines
                .iter()
                .filter(|m| !is_deleting(&m.metadata))
                .count();
            active == want
        };
    }
    if !fresh {
        machines = owned_machines(&ctx, ms).await?;
        ctx.seen.set_machines.listed(&ns, &uid, &machines);
    }
    if is_deleting(&ms.metadata) {
        let victims: Vec<String> = machines
            .iter()
            .filter(|m| !is_deleting(&m.metadata))
            .map(|m| m.name_any())
            .collect();
        delete_machines(&ctx, &ns, victims).await?;
        if !machines.is_empty() {
            return Ok(ctx.poll());
        }
        meta::remove_finalizer(&api, &ms.metadata, MACHINESET_FINALIZER).await?;
        return Ok(Action::await_change());
    }
    let cluster_name = ms.spec.cluster_name.as_str();
    let labelled = meta::update_metadata(&api, &ms.metadata, |md| {
        (meta::label(md, CLUSTER_NAME_LABEL) != Some(cluster_name))
            .then(|| json!({"labels": {CLUSTER_NAME_LABEL: cluster_name}}))
    })
    .await?;
    if labelled {
        return Ok(ctx.poll());
    }
    if meta::add_finalizer(&api, &ms.metadata, MACHINESET_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    let cluster = match ctx.seen.clusters.get_typed(&ns, &ms.spec.cluster_name) {
        Some(c) => Some((*c).clone()),
        None => {
            ctx.api::<Cluster>(&ns)
                .get_opt(&ms.spec.cluster_name)
                .await?
        }
    };
    if cluster.as_ref().is_some_and(Cluster::is_paused) || meta::has_paused_annotation(&ms.metadata)
    {
        return Ok(ctx.idle());
    }
    let active: Vec<&Machine> = machines
        .iter()
        .map(|m| &**m)
        .filter(|m| !is_deleting(&m.metadata))
        .collect();
    let mut waiting = false;
    if active.len() < want {
        let stable = cluster
            .as_ref()
            .is_some_and(|c| c.spec.control_plane_ref.is_none() || c.control_plane_initialized());
        if stable {
            // Names first, in order, so a seed gives the same names however
            // the creations interleave.
            let names: Vec<String> = (active.len()..want)
                .map(|_| ctx.names.generate(&ms.name_any()))
                .collect();
            first_error(
                futures::stream::iter(names)
                    .map(|name| create_machine(&ctx, ms, name))
                    .buffer_unordered(WRITE_CONCURRENCY)
                    .collect()
                    .await,
            )?;
        } else {
            waiting = true;
        }
    } else if active.len() > want {
        let order = ms
            .spec
            .deletion
            .as_ref()
            .and_then(|d| d.order.clone())
            .unwrap_or_else(|| "Random".into());
        let victims = delete_order(&active, &order)
            .into_iter()
            .take(active.len() - want)
            .collect();
        delete_machines(&ctx, &ns, victims).await?;
    }
    let current = ms.status.clone().unwrap_or_default();
    let ready = i32::try_from(active.iter().filter(|m| m.node_name().is_some()).count())
        .unwrap_or(i32::MAX);
    let count = i32::try_from(active.len()).unwrap_or(i32::MAX);
    let mut desired = ReplicaStatus {
        replicas: Some(count),
        ready_replicas: Some(ready),
        available_replicas: Some(ready),
        up_to_date_replicas: Some(count),
        selector: Some(meta::selector_string(
            &ms.spec.selector.match_labels.clone().unwrap_or_default(),
        )),
        phase: None,
        conditions: current.conditions.clone(),
        observed_generation: ms.metadata.generation,
    };
    meta::set_condition(
        &mut desired.conditions,
        "MachinesCreated",
        !waiting,
        if waiting {
            "PreflightCheckFailed"
        } else {
            "Created"
        },
        if waiting {
            "ControlPlaneIsStable: waiting for the control plane to be initialized"
        } else {
            ""
        },
    );
    if desired != current {
        meta::patch_status(&api, &ms.name_any(), serde_json::to_value(&desired)?).await?;
    }
    // Nothing to poll for: Machine changes (owned) and Cluster changes
    // trigger a reconcile.
    Ok(ctx.idle())
}

/// How many Machines (with their bootstrap configs and InfraMachines) one
/// reconcile creates or deletes at a time.
const WRITE_CONCURRENCY: usize = 16;

/// The first error of `results`, after all of them ran.
fn first_error(results: Vec<Result<()>>) -> Result<()> {
    results.into_iter().collect()
}

/// Deletes the named Machines, [`WRITE_CONCURRENCY`] at a time.
/// Deletes the named Machines and records what each DELETE answered in the
/// watched children (deleting, or gone), so the next pass does not delete
/// them again from a copy the watch has not refreshed yet.
async fn delete_machines(ctx: &Ctx, ns: &str, names: Vec<String>) -> Result<()> {
    let api = ctx.api::<Machine>(ns);
    first_error(
        futures::stream::iter(names)
            .map(|name| {
                let api = api.clone();
                async move {
                    match api.delete(&name, &Default::default()).await {
                        // Left: held by finalizers; right: removed at once.
                        Ok(answer) => match answer.left() {
                            Some(deleting) => ctx.seen.set_machines.observe(deleting),
                            None => ctx.seen.set_machines.forget(ns, &name),
                        },
                        Err(kube::Error::Api(s)) if s.code == 404 => {
                            ctx.seen.set_machines.forget(ns, &name);
                        }
                        Err(e) => return Err(e.into()),
                    }
                    Ok(())
                }
            })
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await,
    )
}

/// The Machines this set owns (owner reference with its UID), sorted by name.
async fn owned_machines(ctx: &Ctx, ms: &MachineSet) -> Result<Vec<Arc<Machine>>> {
    let ns = ms.namespace().unwrap_or_default();
    let uid = ms.metadata.uid.clone().unwrap_or_default();
    let mut lp = ListParams::default();
    if let Some(labels) = &ms.spec.selector.match_labels
        && !labels.is_empty()
    {
        lp = lp.labels(&meta::selector_string(labels));
    }
    let mut out: Vec<Arc<Machine>> = ctx
        .api::<Machine>(&ns)
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|m| meta::is_owned_by(&m.metadata, &uid))
        .map(Arc::new)
        .collect();
    out.sort_by_key(|m| m.name_any());
    Ok(out)
}

/// Creates Machine `name` with its bootstrap config and InfraMachine.
async fn create_machine(ctx: &Ctx, ms: &MachineSet, name: String) -> Result<()> {
    let ns = ms.namespace().unwrap_or_default();
    let template = &ms.spec.template;
    let mut labels = template.metadata.labels.clone();
    labels.insert(SET_NAME_LABEL.into(), ms.name_any());
    labels.insert(CLUSTER_NAME_LABEL.into(), ms.spec.cluster_name.clone());
    let annotations = template.metadata.annotations.clone();
    let owner = meta::owner_ref(
        &MachineSet::api_version(&()),
        "MachineSet",
        &ms.metadata,
        false,
        true,
    );
    let cloned = CloneRequest {
        namespace: &ns,
        template: &template.spec.infrastructure_ref,
        name: &name,
        cluster_name: &ms.spec.cluster_name,
        labels: labels.clone(),
        annotations: annotations.clone(),
        owner,
    };
    let config_ref = match &template.spec.bootstrap.config_ref {
        Some(t) => Some(
            clone::clone_from_template(
                ctx,
                &CloneRequest {
                    template: t,
                    ..cloned.clone()
                },
            )
            .await?,
        ),
        None => None,
    };
    let infra_ref = match clone::clone_from_template(ctx, &cloned).await {
        Ok(r) => r,
        Err(e) => {
            delete_orphan(ctx, &ns, config_ref.as_ref()).await;
            return Err(e);
        }
    };
    let machine = Machine {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(labels),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![meta::owner_ref(
                &MachineSet::api_version(&()),
                "MachineSet",
                &ms.metadata,
                true,
                true,
            )]),
            ..kube::api::ObjectMeta::default()
        },
        spec: MachineSpec {
            cluster_name: ms.spec.cluster_name.clone(),
            bootstrap: Bootstrap {
                config_ref: config_ref.clone(),
                data_secret_name: template.spec.bootstrap.data_secret_name.clone(),
            },
            infrastructure_ref: infra_ref.clone(),
            version: template.spec.version.clone(),
            provider_id: None,
            failure_domain: template
                .spec
                .failure_domain
                .clone()
                .filter(|f| !f.is_empty()),
        },
        status: None,
    };
    if let Err(e) = ctx
        .api::<Machine>(&ns)
        .create(&PostParams::default(), &machine)
        .await
    {
        delete_orphan(ctx, &ns, config_ref.as_ref()).await;
        delete_orphan(ctx, &ns, Some(&infra_ref)).await;
        return Err(e.into());
    }
    tracing::info!(machineset = %ms.name_any(), machine = %name, "created machine");
    Ok(())
}

async fn delete_orphan(ctx: &Ctx, ns: &str, r: Option<&ContractRef>) {
    let Some(r) = r else { return };
    match clone::api_for(ctx, ns, r).await {
        Ok(api) => {
            if let Err(e) = meta::delete_ignoring_missing(&api, &r.name).await {
                tracing::warn!(name = %r.name, error = %e, "orphan not deleted");
            }
        }
        Err(e) => tracing::warn!(name = %r.name, error = %e, "orphan not deleted"),
    }
}

/// Names of the Machines in the order they are deleted on scale-down: by
/// CAPI's priority (delete annotation, then no Node), ties by `order`
/// (`Random`: FNV hash of the UID; `Newest`; `Oldest`), then by name.
pub fn delete_order(machines: &[&Machine], order: &str) -> Vec<String> {
    let mut keyed: Vec<(u8, i128, String)> = machines
        .iter()
        .map(|m| {
            let priority = if m
                .metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.contains_key(DELETE_MACHINE_ANNOTATION))
            {
                0
            } else if m.node_name().is_none() {
                1
            } else {
                2
            };
            let created = m
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or(0, |t| i128::from(t.0.as_second()));
            let tie = match order {
                "Newest" => -created,
                "Oldest" => created,
                _ => i128::from(fnv1a(m.metadata.uid.as_deref().unwrap_or("").as_bytes())),
            };
            (priority, tie, m.name_any())
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, _, n)| n).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::machine::MachineStatus;
    use crate::crds::meta::NameRef;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;
    use std::collections::BTreeMap;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    fn machine(name: &str, created: i64, node: bool, annotated: bool) -> Machine {
        let mut m = Machine::new(name, MachineSpec::default());
        m.metadata.uid = Some(format!("uid-{name}"));
        m.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        if annotated {
            m.metadata.annotations = Some(labels(&[(DELETE_MACHINE_ANNOTATION, "")]));
        }
        if node {
            m.status = Some(MachineStatus {
                node_ref: Some(NameRef { name: name.into() }),
                ..MachineStatus::default()
            });
        }
        m
    }

    #[test]
    fn scale_down_priority_then_policy() {
        let a = machine("a", 100, true, false);
        let b = machine("b", 200, true, false);
        let c = machine("c", 300, false, false);
        let d = machine("d", 50, true, true);
        let all = [&a, &b, &c, &d];
        assert_eq!(delete_order(&all, "Newest"), ["d", "c", "b", "a"]);
        assert_eq!(delete_order(&all, "Oldest"), ["d", "c", "a", "b"]);
        let random = delete_order(&all, "Random");
        assert_eq!(&random[..2], ["d", "c"]);
        // Random is a stable function of the UIDs.
        let ha = fnv1a(b"uid-a");
        let hb = fnv1a(b"uid-b");
        let want: Vec<&str> = if ha < hb {
            vec!["a", "b"]
        } else {
            vec!["b", "a"]
        };
        assert_eq!(&random[2..], want.as_slice());
    }
}
