//! ClusterClass end to end: the `topology` flavor (a Cluster over three
//! simulated datacenters, rendered with the ClusterClass clusterctl adds) is
//! made by the stand-in's topology controller into a ProxmoxCluster, a
//! KubeadmControlPlane spread one per datacenter and one MachineDeployment
//! per datacenter; a changed variable (the workers' memory) replaces every
//! worker, and a changed control-plane variable (its memory) makes the
//! KubeadmControlPlane replace its three machines one at a time, surge
//! first, spread by failure domain throughout, never below three ready —
//! with no `TopologyReconciled=False` and nothing leaked; deleting the
//! Cluster leaves nothing but the ClusterClass and its templates. Both
//! rollouts print their wall time and Proxmox calls per replaced machine.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capmox_e2e::bench::measure;
use capmox_e2e::clusterctl;
use capmox_e2e::crds::{Cluster, IPAddress, Machine};
use capmox_e2e::env::{Env, EnvOptions};
use capmox_e2e::leaks;
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use capmox_e2e::standin::meta::CONTROL_PLANE_LABEL;
use capmox_e2e::standin::topology::TOPOLOGY_RECONCILED;
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher::Event;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

const CLUSTER: &str = "wl1";
const TEMPLATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../templates");

fn documents(env: &Env) -> Vec<Value> {
    let vars = env.multi_instance_vars(CLUSTER);
    let flavor =
        std::fs::read_to_string(format!("{TEMPLATES}/cluster-template-topology.yaml")).unwrap();
    let text = clusterctl::generate_cluster(
        &flavor,
        |name| std::fs::read_to_string(format!("{TEMPLATES}/clusterclass-{name}.yaml")).ok(),
        &vars,
    )
    .unwrap();
    scenario::parse_documents("topology", &text).unwrap()
}

fn workers(rows: &[MachineRow]) -> Vec<&MachineRow> {
    rows.iter().filter(|r| !r.control_plane).collect()
}

fn settled(rows: &[MachineRow], need_node: bool) -> bool {
    rows.iter().filter(|r| r.control_plane).count() == 3
        && workers(rows).len() == 3
        && rows
            .iter()
            .all(|r| !r.deleting && r.up(need_node) && (!need_node || r.phase == "Running"))
}

/// Names of our kinds' objects of the scenario namespace.
async fn names(client: &kube::Client, ns: &str, kind: &str) -> BTreeSet<String> {
    scenario::list(client, ns, "infrastructure.cluster.x-k8s.io/v1alpha3", kind)
        .await
        .unwrap()
        .into_iter()
        .map(|o| o.metadata.name.unwrap_or_default())
        .collect()
}

/// Memory (MiB) of the VM of each of `rows`, by machine name.
fn memory(env: &Env, rows: &[&MachineRow]) -> BTreeMap<String, String> {
    rows.iter()
        .map(|r| {
            let vm = env
                .pve
                .cluster(r.instance.as_deref().unwrap())
                .unwrap()
                .vm(r.vmid.unwrap())
                .unwrap();
            (
                r.name.clone(),
                vm.config.get("memory").cloned().unwrap_or_default(),
            )
        })
        .collect()
}

fn control_plane(rows: &[MachineRow]) -> Vec<&MachineRow> {
    rows.iter().filter(|r| r.control_plane).collect()
}

fn names_of(rows: &[&MachineRow]) -> BTreeSet<String> {
    rows.iter().map(|r| r.name.clone()).collect()
}

/// Proxmox calls so far: every client as pve-sim counted them (the
/// controller and the kubelet stand-in's guest-agent probes), and the
/// controller's own (its `capmox_pve_requests_total`).
async fn calls(env: &Env, metrics: &str) -> (f64, f64) {
    let sim: u64 = env.pve.clusters().iter().map(|c| c.calls().total).sum();
    let controller: f64 = measure::scrape(metrics)
        .await
        .unwrap()
        .pve_requests
        .values()
        .sum();
    (sim as f64, controller)
}

/// Waits until each datacenter holds exactly the VMs of `rows`' machines
/// (so no VMID is held by a VM of a replaced machine), no seed ISO is left,
/// there is one IPAddress per machine and `templates`
/// ProxmoxMachineTemplates exist (the replaced ones deleted).
async fn wait_released(env: &mut Env, rows: &[MachineRow], templates: usize) {
    let ns = env.namespace.clone();
    let sims = env.pve.clusters().to_vec();
    let want: BTreeMap<String, BTreeSet<u32>> = ["dc-a", "dc-b", "dc-c"]
        .iter()
        .map(|dc| {
            let ids = rows
                .iter()
                .filter(|r| r.instance.as_deref() == Some(*dc))
                .map(|r| r.vmid.unwrap())
                .collect();
            ((*dc).to_string(), ids)
        })
        .collect();
    let machines = rows.len();
    env.wait_for("old VMs, ISOs, addresses and templates released", env.waits.sim(200.0), |client| {
        let ns = ns.clone();
        let vms: BTreeMap<String, BTreeSet<u32>> = sims
            .iter()
            .map(|c| (c.name().to_string(), observe::vms(c).iter().map(|v| v.vmid).collect()))
            .collect();
        let isos: usize = sims.iter().map(|c| observe::isos(c).len()).sum();
        let want = want.clone();
        async move {
            let addrs = Api::<IPAddress>::namespaced(client.clone(), &ns)
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let found = names(&client, &ns, "ProxmoxMachineTemplate").await.len();
            Ok(if vms == want && isos == 0 && addrs == machines && found == templates {
                Progress::Done(())
            } else {
                Progress::Pending(format!(
                    "VMs {vms:?} (want {want:?}), ISOs {isos}, addresses {addrs} (want {machines}), templates {found} (want {templates})"
                ))
            })
        }
    })
    .await
    .unwrap();
}

/// The control-plane Machines as a watch delivers them, checked after
/// every event: no datacenter with more than two, at most one with two,
/// and (`min_ready`) at least three not being deleted with a Node.
#[derive(Debug, Default)]
struct CpWatch {
    /// name → (failure domain, deleting, has a Node).
    machines: BTreeMap<String, (String, bool, bool)>,
    relist: Option<BTreeMap<String, (String, bool, bool)>>,
    /// Most control-plane Machines at once.
    most: usize,
    /// Fewest ready ones (not deleting, with a Node).
    min_ready: Option<usize>,
    /// Each distinct spread, in order: `dc-a 2 dc-b 1 dc-c 1`.
    spreads: Vec<String>,
    violations: Vec<String>,
}

impl CpWatch {
    fn row(m: &Machine) -> (String, bool, bool) {
        (
            m.failure_domain().unwrap_or("-").to_string(),
            m.metadata.deletion_timestamp.is_some(),
            m.node_name().is_some(),
        )
    }

    fn event(&mut self, ev: Event<Machine>) {
        match ev {
            Event::Apply(m) => {
                self.machines.insert(m.name_any(), Self::row(&m));
            }
            Event::Delete(m) => {
                self.machines.remove(&m.name_any());
            }
            Event::Init => {
                // A relist begins: nothing is known until InitDone.
                self.relist = Some(BTreeMap::new());
                return;
            }
            Event::InitApply(m) => {
                self.relist
                    .get_or_insert_default()
                    .insert(m.name_any(), Self::row(&m));
                return;
            }
            Event::InitDone => self.machines = self.relist.take().unwrap_or_default(),
        }
        self.check();
    }

    fn check(&mut self) {
        let mut per_dc: BTreeMap<&str, usize> = BTreeMap::new();
        for (fd, _, _) in self.machines.values() {
            *per_dc.entry(fd).or_default() += 1;
        }
        let ready = self
            .machines
            .values()
            .filter(|(_, deleting, node)| !deleting && *node)
            .count();
        let spread = per_dc
            .iter()
            .map(|(dc, n)| format!("{dc} {n}"))
            .collect::<Vec<_>>()
            .join(" ");
        let state = format!("{spread}, ready {ready}: {:?}", self.machines);
        if per_dc.values().any(|n| *n > 2) || per_dc.values().filter(|n| **n == 2).count() > 1 {
            self.violations.push(format!("spread {state}"));
        }
        if ready < 3 {
            self.violations.push(format!("fewer than 3 ready: {state}"));
        }
        self.most = self.most.max(self.machines.len());
        self.min_ready = Some(self.min_ready.map_or(ready, |r| r.min(ready)));
        if self.spreads.last() != Some(&spread) {
            self.spreads.push(spread);
        }
    }
}

#[tokio::test]
async fn topology_spreads_rolls_a_variable_change_and_deletes_cleanly() {
    let opts = EnvOptions::new("topology");
    let time_scale = opts.time_scale;
    let mut env = Env::start(opts).await.unwrap();
    let ns = env.namespace.clone();
    for doc in documents(&env) {
        scenario::apply_value(&env.client, &ns, doc).await.unwrap();
    }
    // Every TopologyReconciled=False the Cluster ever shows.
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = failures.clone();
    let clusters: Api<Cluster> = Api::namespaced(env.client.clone(), &ns);
    let watch = tokio::spawn(
        watcher(clusters.clone(), watcher::Config::default())
            .applied_objects()
            .for_each(move |c| {
                if let Ok(c) = c {
                    for cond in c.status.iter().flat_map(|s| &s.conditions) {
                        if cond.type_ == TOPOLOGY_RECONCILED && cond.status == "False" {
                            seen.lock().unwrap().push(cond.message.clone());
                        }
                    }
                }
                async {}
            }),
    );

    // (a) Three control-plane machines, one per datacenter; a worker per
    // MachineDeployment in its datacenter.
    let need_node = env.nodes_join();
    let rows = env
        .wait_machines(
            "3 control-plane + 3 worker machines of the topology",
            env.waits.sim(9.0 * 400.0),
            |r| settled(r, need_node),
        )
        .await
        .unwrap();
    let cp: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.control_plane)
        .map(|r| r.instance.as_deref().unwrap())
        .collect();
    assert_eq!(cp, BTreeSet::from(["dc-a", "dc-b", "dc-c"]));
    for r in &rows {
        assert_eq!(r.instance, r.failure_domain, "{r:?}");
        if !r.control_plane {
            let dc = r.instance.as_deref().unwrap();
            assert!(r.name.starts_with(&format!("{CLUSTER}-md-{dc}-")), "{r:?}");
        }
    }
    let cluster = clusters.get(CLUSTER).await.unwrap();
    let reconciled = cluster
        .status
        .iter()
        .flat_map(|s| &s.conditions)
        .find(|c| c.type_ == TOPOLOGY_RECONCILED)
        .expect("TopologyReconciled set");
    assert_eq!(reconciled.status, "True", "{reconciled:?}");
    let before = memory(&env, &workers(&rows));
    assert!(before.values().all(|m| m == "8192"), "{before:?}");
    let cp_before = memory(&env, &control_plane(&rows));
    assert!(cp_before.values().all(|m| m == "4096"), "{cp_before:?}");
    // The class's two templates, the control plane's and one per deployment.
    let templates_before = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    assert_eq!(templates_before.len(), 2 + 1 + 3, "{templates_before:?}");
    let metrics = measure::metrics_address(&env.controller_log(), Duration::from_secs(60))
        .await
        .unwrap();

    // (b) One variable changes the workers' template: every worker replaced.
    let mut variables = cluster.spec.topology.as_ref().unwrap().variables.clone();
    let worker = variables
        .iter_mut()
        .find(|v| v.name == "workerMachine")
        .unwrap();
    worker.value.0["memoryMiB"] = json!(16384);
    let (sim_before, controller_before) = calls(&env, &metrics).await;
    let started = Instant::now();
    let patch = json!({"spec": {"topology": {"variables": variables}}});
    clusters
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let old: BTreeSet<String> = before.keys().cloned().collect();
    let old_cp = names_of(&control_plane(&rows));
    let rows = env
        .wait_machines(
            "every worker replaced by one from the new template",
            env.waits.sim(9.0 * 400.0),
            |r| settled(r, need_node) && workers(r).iter().all(|w| !old.contains(&w.name)),
        )
        .await
        .unwrap();
    let rollout = started.elapsed();
    let after = memory(&env, &workers(&rows));
    assert!(after.values().all(|m| m == "16384"), "{after:?}");
    for r in workers(&rows) {
        assert_eq!(r.instance, r.failure_domain, "{r:?}");
    }
    assert_eq!(
        names_of(&control_plane(&rows)),
        old_cp,
        "a worker variable does not touch the control plane"
    );

    // Nothing leaked: per datacenter exactly its two machines' VMs, no ISO,
    // one address per machine; the old templates are gone.
    wait_released(&mut env, &rows, 6).await;
    let templates_after = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    assert_eq!(
        templates_after.intersection(&templates_before).count(),
        3,
        "the class's two and the control plane's stay, the workers' three are new: {templates_after:?}"
    );
    let (sim_after, controller_after) = calls(&env, &metrics).await;
    eprintln!(
        "topology rollout (workers): 3 workers replaced in {:.1} s (time scale {time_scale}); Proxmox calls per replaced machine: {:.1} by the controller, {:.1} in all (pve-sim, with the kubelet stand-in's agent probes)",
        rollout.as_secs_f64(),
        (controller_after - controller_before) / 3.0,
        (sim_after - sim_before) / 3.0,
    );

    // (b2) A control-plane variable: the control plane's template is
    // rotated and the KubeadmControlPlane replaces its three machines, one
    // at a time, a new one first. Against a real management cluster no
    // kubelet joins, and KCP waits for Nodes before it deletes anything.
    if need_node {
        rollout_control_plane(&mut env, &clusters, &rows, &metrics, time_scale).await;
    } else {
        eprintln!(
            "topology rollout (control plane): not run — no Node joins against a real management cluster, and KCP replaces nothing without Nodes"
        );
    }

    // (c) Delete the Cluster: everything of it goes, the ClusterClass and
    // its templates (the user's) stay.
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    let bound = env.waits.sim(3.0 * 200.0);
    leaks::wait_nothing_left(
        &mut env,
        "the whole cluster deleted",
        bound,
        leaks::TOPOLOGY_KINDS,
    )
    .await
    .unwrap();
    assert_eq!(
        names(&env.client, &ns, "ProxmoxMachineTemplate").await,
        BTreeSet::from([
            "capmox-control-plane".to_string(),
            "capmox-worker".to_string()
        ])
    );
    assert_eq!(
        names(&env.client, &ns, "ProxmoxClusterTemplate")
            .await
            .len(),
        1
    );
    watch.abort();
    let failures = failures.lock().unwrap().clone();
    assert!(
        failures.is_empty(),
        "TopologyReconciled=False seen: {failures:?}"
    );
    env.shutdown().await;
}

/// Phase (b2): `controlPlaneMachine.memoryMiB` 4096 → 6144. Every
/// control-plane machine is replaced by one with the new memory, one per
/// datacenter at the end; throughout, no datacenter holds more than two
/// control-plane machines, at most one holds two, and at least three are
/// ready (the watch in [`CpWatch`]); the workers stay; nothing leaks.
async fn rollout_control_plane(
    env: &mut Env,
    clusters: &Api<Cluster>,
    rows: &[MachineRow],
    metrics: &str,
    time_scale: f64,
) {
    let ns = env.namespace.clone();
    let old_cp = names_of(&control_plane(rows));
    let old_workers = names_of(&workers(rows));
    let templates_before = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    let cp_watch = Arc::new(Mutex::new(CpWatch::default()));
    let w = cp_watch.clone();
    let machines: Api<Machine> = Api::namespaced(env.client.clone(), &ns);
    let watch = tokio::spawn(
        watcher(
            machines,
            watcher::Config::default().labels(CONTROL_PLANE_LABEL),
        )
        .for_each(move |ev| {
            if let Ok(ev) = ev {
                w.lock().unwrap().event(ev);
            }
            async {}
        }),
    );
    // The watch has listed the three before anything changes.
    let w = cp_watch.clone();
    env.wait_for(
        "the control-plane watch listed",
        env.waits.sim(10.0),
        move |_| {
            let n = w.lock().unwrap().machines.len();
            async move {
                Ok(if n == 3 {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{n} listed"))
                })
            }
        },
    )
    .await
    .unwrap();

    let cluster = clusters.get(CLUSTER).await.unwrap();
    let mut variables = cluster.spec.topology.as_ref().unwrap().variables.clone();
    let cp = variables
        .iter_mut()
        .find(|v| v.name == "controlPlaneMachine")
        .unwrap();
    cp.value.0["memoryMiB"] = json!(6144);
    let (sim_before, controller_before) = calls(env, metrics).await;
    let started = Instant::now();
    let patch = json!({"spec": {"topology": {"variables": variables}}});
    clusters
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let rows = env
        .wait_machines(
            "every control-plane machine replaced by one from the new template",
            env.waits.sim(9.0 * 400.0),
            |r| settled(r, true) && control_plane(r).iter().all(|m| !old_cp.contains(&m.name)),
        )
        .await
        .unwrap();
    let rollout = started.elapsed();
    let spread: BTreeSet<&str> = control_plane(&rows)
        .iter()
        .map(|r| r.instance.as_deref().unwrap())
        .collect();
    assert_eq!(spread, BTreeSet::from(["dc-a", "dc-b", "dc-c"]));
    for r in control_plane(&rows) {
        assert_eq!(r.instance, r.failure_domain, "{r:?}");
    }
    let after = memory(env, &control_plane(&rows));
    assert!(after.values().all(|m| m == "6144"), "{after:?}");
    assert_eq!(
        names_of(&workers(&rows)),
        old_workers,
        "a control-plane variable does not touch the workers"
    );
    wait_released(env, &rows, 6).await;
    let templates_after = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    assert_eq!(
        templates_after.intersection(&templates_before).count(),
        5,
        "only the control plane's template is new: {templates_after:?}"
    );
    let (sim_after, controller_after) = calls(env, metrics).await;
    watch.abort();
    let seen = std::mem::take(&mut *cp_watch.lock().unwrap());
    assert!(seen.violations.is_empty(), "{:#?}", seen.violations);
    assert_eq!(seen.most, 4, "one machine of surge: {:?}", seen.spreads);
    assert_eq!(seen.min_ready, Some(3), "{:?}", seen.spreads);
    eprintln!(
        "topology rollout (control plane): 3 control-plane machines replaced in {:.1} s (time scale {time_scale}); Proxmox calls per replaced machine: {:.1} by the controller, {:.1} in all (pve-sim, with the kubelet stand-in's agent probes); machines per datacenter as the watch saw them: {}",
        rollout.as_secs_f64(),
        (controller_after - controller_before) / 3.0,
        (sim_after - sim_before) / 3.0,
        seen.spreads.join(" → "),
    );
}
