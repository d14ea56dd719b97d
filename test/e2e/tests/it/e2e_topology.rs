//! ClusterClass end to end: the `topology` flavor (a Cluster over three
//! simulated datacenters, rendered with the ClusterClass clusterctl adds) is
//! made by the stand-in's topology controller into a ProxmoxCluster, a
//! KubeadmControlPlane spread one per datacenter and one MachineDeployment
//! per datacenter; a changed variable (the workers' memory) replaces every
//! worker with no `TopologyReconciled=False` and nothing leaked; deleting the
//! Cluster leaves nothing but the ClusterClass and its templates.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use capmox_e2e::clusterctl;
use capmox_e2e::crds::{Cluster, IPAddress};
use capmox_e2e::env::{Env, EnvOptions};
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use capmox_e2e::standin::topology::TOPOLOGY_RECONCILED;
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
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

/// Memory (MiB) of each worker's VM, by machine name.
fn worker_memory(env: &Env, rows: &[MachineRow]) -> BTreeMap<String, String> {
    workers(rows)
        .into_iter()
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
    let before = worker_memory(&env, &rows);
    assert!(before.values().all(|m| m == "8192"), "{before:?}");
    // The class's two templates, the control plane's and one per deployment.
    let templates_before = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    assert_eq!(templates_before.len(), 2 + 1 + 3, "{templates_before:?}");

    // (b) One variable changes the workers' template: every worker replaced.
    let mut variables = cluster.spec.topology.as_ref().unwrap().variables.clone();
    let worker = variables
        .iter_mut()
        .find(|v| v.name == "workerMachine")
        .unwrap();
    worker.value.0["memoryMiB"] = json!(16384);
    let calls_before: u64 = env.pve.clusters().iter().map(|c| c.calls().total).sum();
    let started = Instant::now();
    let patch = json!({"spec": {"topology": {"variables": variables}}});
    clusters
        .patch(CLUSTER, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let old: BTreeSet<String> = before.keys().cloned().collect();
    let old_cp: BTreeSet<String> = rows
        .iter()
        .filter(|r| r.control_plane)
        .map(|r| r.name.clone())
        .collect();
    let rows = env
        .wait_machines(
            "every worker replaced by one from the new template",
            env.waits.sim(9.0 * 400.0),
            |r| settled(r, need_node) && workers(r).iter().all(|w| !old.contains(&w.name)),
        )
        .await
        .unwrap();
    let rollout = started.elapsed();
    let after = worker_memory(&env, &rows);
    assert!(after.values().all(|m| m == "16384"), "{after:?}");
    for r in workers(&rows) {
        assert_eq!(r.instance, r.failure_domain, "{r:?}");
    }
    let cp_now: BTreeSet<String> = rows
        .iter()
        .filter(|r| r.control_plane)
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        cp_now, old_cp,
        "a worker variable does not touch the control plane"
    );

    // Nothing leaked: per datacenter exactly its two machines' VMs, no ISO,
    // one address per machine; the old templates are gone.
    let clients = env.client.clone();
    let ns2 = ns.clone();
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
    env.wait_for("old VMs, ISOs, addresses and templates released", env.waits.sim(200.0), |_| {
        let client = clients.clone();
        let ns = ns2.clone();
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
            let templates = names(&client, &ns, "ProxmoxMachineTemplate").await.len();
            Ok(if vms == want && isos == 0 && addrs == 6 && templates == 6 {
                Progress::Done(())
            } else {
                Progress::Pending(format!(
                    "VMs {vms:?} (want {want:?}), ISOs {isos}, addresses {addrs}, templates {templates}"
                ))
            })
        }
    })
    .await
    .unwrap();
    let templates_after = names(&env.client, &ns, "ProxmoxMachineTemplate").await;
    assert_eq!(
        templates_after.intersection(&templates_before).count(),
        3,
        "the class's two and the control plane's stay, the workers' three are new: {templates_after:?}"
    );
    let calls: u64 = env
        .pve
        .clusters()
        .iter()
        .map(|c| c.calls().total)
        .sum::<u64>()
        - calls_before;
    eprintln!(
        "topology rollout: 3 workers replaced in {:.1} s (time scale {}), {} Proxmox calls, {:.1} per replaced machine",
        rollout.as_secs_f64(),
        time_scale,
        calls,
        calls as f64 / 3.0
    );

    // (c) Delete the Cluster: everything of it goes, the ClusterClass and
    // its templates (the user's) stay.
    clusters
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    let sims = env.pve.clusters().to_vec();
    let ns3 = ns.clone();
    env.wait_for(
        "the whole cluster deleted",
        env.waits.sim(3.0 * 200.0),
        |client| {
            let ns = ns3.clone();
            let vms: usize = sims.iter().map(|c| observe::vms(c).len()).sum();
            let isos: usize = sims.iter().map(|c| observe::isos(c).len()).sum();
            async move {
                let mut left = BTreeMap::new();
                for (api_version, kind) in [
                    ("cluster.x-k8s.io/v1beta2", "Cluster"),
                    ("cluster.x-k8s.io/v1beta2", "Machine"),
                    ("cluster.x-k8s.io/v1beta2", "MachineSet"),
                    ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
                    (
                        "controlplane.cluster.x-k8s.io/v1beta2",
                        "KubeadmControlPlane",
                    ),
                    ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig"),
                    ("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxCluster"),
                    ("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxMachine"),
                    ("ipam.cluster.x-k8s.io/v1beta2", "IPAddressClaim"),
                    ("ipam.cluster.x-k8s.io/v1beta2", "IPAddress"),
                    ("ipam.cluster.x-k8s.io/v1alpha2", "InClusterIPPool"),
                ] {
                    let n = scenario::list(&client, &ns, api_version, kind).await?.len();
                    if n > 0 {
                        left.insert(kind.to_string(), n);
                    }
                }
                for (api_version, kind) in [
                    (
                        "infrastructure.cluster.x-k8s.io/v1alpha3",
                        "ProxmoxMachineTemplate",
                    ),
                    (
                        "bootstrap.cluster.x-k8s.io/v1beta2",
                        "KubeadmConfigTemplate",
                    ),
                ] {
                    let mine = scenario::list(&client, &ns, api_version, kind)
                        .await?
                        .iter()
                        .filter(|o| {
                            o.metadata
                                .labels
                                .as_ref()
                                .is_some_and(|l| l.contains_key("cluster.x-k8s.io/cluster-name"))
                        })
                        .count();
                    if mine > 0 {
                        left.insert(kind.to_string(), mine);
                    }
                }
                Ok(if left.is_empty() && vms == 0 && isos == 0 {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("objects {left:?}, VMs {vms}, ISOs {isos}"))
                })
            }
        },
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
