//! The CAPI-core stand-in against kube-sim, with the test itself playing a
//! trivial infrastructure provider (no controller, no Proxmox): the rendered
//! multi-instance template turns into owned, labelled, cloned objects; the
//! control plane spreads over failure domains one machine at a time; workers
//! wait for the control plane; MachineDeployments scale; deletion follows
//! CAPI's order.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capmox_e2e::crds::{
    Cluster, KubeadmConfig, KubeadmControlPlane, Machine, MachineDeployment, MachineSet,
};
use capmox_e2e::scenario::{self, Progress, wait_until};
use capmox_e2e::standin::workload::WorkloadNodes;
use capmox_e2e::standin::{StandIn, StandInOptions};
use capmox_e2e::{clusterctl, setup};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, NodeSpec, Secret};
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams,
};
use kube::core::GroupVersionKind;
use serde_json::json;
use tokio::task::JoinHandle;

const NS: &str = "capi";
const WAIT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(20);

fn template() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../templates/cluster-template-multi-instance.yaml");
    std::fs::read_to_string(path).unwrap()
}

fn vars() -> BTreeMap<String, String> {
    let mut v: BTreeMap<String, String> = [
        ("CLUSTER_NAME", "wl1"),
        ("NAMESPACE", NS),
        ("KUBERNETES_VERSION", "v1.33.4"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.99.0.5"),
        ("WORKER_MACHINE_COUNT", "1"),
        (
            "SSH_AUTHORIZED_KEYS",
            "[\"ssh-ed25519 AAAAC3Nza test@e2e\"]",
        ),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
    .collect();
    for (i, net) in [(1, "10"), (2, "20"), (3, "30")] {
        v.insert(
            format!("PROXMOX_{i}_URL"),
            format!("https://127.0.0.1:{}", 18000 + i),
        );
        v.insert(format!("PROXMOX_{i}_TOKEN"), "capmox@pve!capi".into());
        v.insert(format!("PROXMOX_{i}_SECRET"), "not-a-real-secret".into());
        v.insert(
            format!("PROXMOX_{i}_NODE_IP_RANGES"),
            format!("[10.{net}.0.100-10.{net}.0.200]"),
        );
        v.insert(format!("PROXMOX_{i}_GATEWAY"), format!("10.{net}.0.1"));
    }
    v
}

fn pxm_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1alpha3",
        "ProxmoxMachine",
    ))
}

fn pxc_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "infrastructure.cluster.x-k8s.io",
        "v1alpha3",
        "ProxmoxCluster",
    ))
}

/// A trivial infrastructure provider: the cluster is provisioned with three
/// failure domains; a machine is "provisioned" once its owner Machine is its
/// controller and has bootstrap data, in the Machine's failure domain; its
/// kubelet registers at once. ProxmoxMachines named in `hold` are left alone.
fn fake_provider(client: kube::Client, nodes: Arc<WorkloadNodes>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let pxc: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &pxc_resource());
        let pxm: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &pxm_resource());
        let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
        loop {
            if let Ok(Some(c)) = pxc.get_opt("wl1").await
                && c.data.pointer("/status/initialization/provisioned") != Some(&json!(true))
            {
                let status = json!({"status": {
                    "initialization": {"provisioned": true},
                    "failureDomains": [
                        {"name": "dc-c", "controlPlane": true},
                        {"name": "dc-a", "controlPlane": true},
                        {"name": "dc-b", "controlPlane": true}
                    ]
                }});
                let _ = pxc
                    .patch_status("wl1", &PatchParams::default(), &Patch::Merge(&status))
                    .await;
            }
            for m in pxm
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                if m.data.pointer("/spec/providerID").is_some()
                    || m.metadata.deletion_timestamp.is_some()
                {
                    continue;
                }
                let Some(owner) = m
                    .owner_references()
                    .iter()
                    .find(|o| o.kind == "Machine" && o.controller == Some(true))
                    .cloned()
                else {
                    continue;
                };
                let Ok(machine) = machines.get(&owner.name).await else {
                    continue;
                };
                if machine.spec.bootstrap.data_secret_name.is_none() {
                    continue;
                }
                let pid = format!("proxmox://{}", m.uid().unwrap());
                let fd = machine
                    .spec
                    .failure_domain
                    .clone()
                    .unwrap_or_else(|| "dc-a".into());
                let _ = pxm
                    .patch(
                        &m.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"spec": {"providerID": pid}})),
                    )
                    .await;
                let status = json!({"status": {
                    "initialization": {"provisioned": true},
                    "failureDomain": fd,
                    "addresses": [{"type": "InternalIP", "address": "10.10.0.100"}]
                }});
                let _ = pxm
                    .patch_status(
                        &m.name_any(),
                        &PatchParams::default(),
                        &Patch::Merge(&status),
                    )
                    .await;
                let node = Node {
                    metadata: ObjectMeta {
                        name: Some(m.name_any()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(NodeSpec {
                        provider_id: Some(pid),
                        ..NodeSpec::default()
                    }),
                    status: None,
                };
                let _ = nodes.create(node).await;
            }
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    })
}

async fn machines(client: &kube::Client) -> Vec<Machine> {
    Api::<Machine>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
}

fn is_cp(m: &Machine) -> bool {
    m.labels().contains_key("cluster.x-k8s.io/control-plane")
}

async fn wait_running(
    client: &kube::Client,
    what: &str,
    want_cp: usize,
    want_workers: BTreeMap<&str, usize>,
) {
    wait_until(what, WAIT, POLL, || {
        let client = client.clone();
        let want_workers = want_workers.clone();
        async move {
            let all = machines(&client).await;
            let running: Vec<&Machine> = all.iter().filter(|m| m.phase() == "Running").collect();
            let cp = running.iter().filter(|m| is_cp(m)).count();
            let mut workers: BTreeMap<&str, usize> = BTreeMap::new();
            for m in running.iter().filter(|m| !is_cp(m)) {
                *workers.entry(m.failure_domain().unwrap_or("")).or_default() += 1;
            }
            let want_workers: BTreeMap<&str, usize> =
                want_workers.into_iter().filter(|(_, n)| *n > 0).collect();
            let seen = format!(
                "{} machines ({} running): cp {cp}, workers {workers:?}",
                all.len(),
                running.len()
            );
            Ok(
                if cp == want_cp && workers == want_workers && all.len() == running.len() {
                    Progress::Done(())
                } else {
                    Progress::Pending(seen)
                },
            )
        }
    })
    .await
    .unwrap();
}

/// The flow against the CAPI CRDs of `crate::capi_crds` (the stand-in's own
/// in `make test`, the real ones in the conformance suite): every object
/// the stand-in writes passes their schemas.
#[tokio::test]
async fn template_to_running_machines_scaling_and_deletion_order() {
    flow(crate::capi_crds()).await;
}

async fn flow(
    capi_crds: Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
) {
    let sim = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    let client = sim.client().await.unwrap();
    setup::install_crds(&client, &capi_crds, WAIT)
        .await
        .unwrap();
    setup::install_crds(&client, &setup::provider_crds().unwrap(), WAIT)
        .await
        .unwrap();
    setup::ensure_namespace(&client, NS).await.unwrap();
    let nodes = Arc::new(WorkloadNodes::new(client.clone()));
    let standin = StandIn::start(
        client.clone(),
        nodes.clone(),
        StandInOptions {
            namespace: Some(NS.into()),
            resync: Duration::from_millis(300),
            retry: Duration::from_millis(20),
            ..StandInOptions::default()
        },
    )
    .await
    .unwrap();
    let provider = fake_provider(client.clone(), nodes.clone());

    let rendered = clusterctl::render(&template(), &vars()).unwrap();
    scenario::apply_yaml(&client, NS, "multi-instance template", &rendered)
        .await
        .unwrap();

    // Three control-plane machines, one per failure domain; one worker per
    // MachineDeployment in its own failure domain.
    wait_running(
        &client,
        "3 cp + 3 workers running",
        3,
        [("dc-a", 1), ("dc-b", 1), ("dc-c", 1)].into(),
    )
    .await;
    let all = machines(&client).await;
    let cp_fds: BTreeSet<String> = all
        .iter()
        .filter(|m| is_cp(m))
        .map(|m| m.spec.failure_domain.clone().unwrap())
        .collect();
    assert_eq!(cp_fds, ["dc-a", "dc-b", "dc-c"].map(String::from).into());

    // The Cluster: owner of the ProxmoxCluster (not controller), endpoint
    // copied, failure domains sorted, phase.
    let cluster = Api::<Cluster>::namespaced(client.clone(), NS)
        .get("wl1")
        .await
        .unwrap();
    let ep = cluster.spec.control_plane_endpoint.clone().unwrap();
    assert_eq!((ep.host.as_str(), ep.port), ("10.99.0.5", 6443));
    let fds: Vec<&str> = cluster
        .failure_domains()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(fds, ["dc-a", "dc-b", "dc-c"]);
    assert!(cluster.infrastructure_provisioned());
    assert!(cluster.control_plane_initialized());
    assert_eq!(
        cluster.status.as_ref().unwrap().phase.as_deref(),
        Some("Provisioned")
    );
    let pxc = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &pxc_resource())
        .get("wl1")
        .await
        .unwrap();
    let owner = pxc
        .owner_references()
        .iter()
        .find(|o| o.kind == "Cluster")
        .unwrap();
    assert_eq!(
        (
            owner.name.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("wl1", Some(false), Some(true))
    );
    assert_eq!(
        pxc.labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("wl1")
    );

    // A worker: its ProxmoxMachine is a clone of the worker template, owned
    // by the Machine as controller (the MachineSet reference is gone).
    let worker = all
        .iter()
        .find(|m| !is_cp(m) && m.failure_domain() == Some("dc-b"))
        .unwrap();
    let pxm = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &pxm_resource())
        .get(&worker.name_any())
        .await
        .unwrap();
    assert_eq!(
        pxm.annotations()
            .get("cluster.x-k8s.io/cloned-from-name")
            .map(String::as_str),
        Some("wl1-worker")
    );
    assert_eq!(
        pxm.annotations()
            .get("cluster.x-k8s.io/cloned-from-groupkind")
            .map(String::as_str),
        Some("ProxmoxMachineTemplate.infrastructure.cluster.x-k8s.io")
    );
    assert_eq!(
        pxm.labels()
            .get("cluster.x-k8s.io/deployment-name")
            .map(String::as_str),
        Some("wl1-md-dc-b")
    );
    let kinds: Vec<(String, Option<bool>)> = pxm
        .owner_references()
        .iter()
        .map(|o| (o.kind.clone(), o.controller))
        .collect();
    assert_eq!(kinds, [("Machine".to_string(), Some(true))]);
    assert_eq!(pxm.data["spec"]["numCores"], 4);
    assert_eq!(pxm.data["spec"]["memoryMiB"], 8192);
    assert_eq!(
        worker.spec.provider_id.as_deref(),
        Some(format!("proxmox://{}", pxm.uid().unwrap()).as_str())
    );
    assert_eq!(
        worker.status.as_ref().unwrap().failure_domain.as_deref(),
        Some("dc-b")
    );
    assert_eq!(worker.node_name(), Some(worker.name_any().as_str()));

    // Bootstrap data: `<machine>-bootstrap`, cloud-config naming the machine,
    // labelled, owned by the KubeadmConfig.
    let secret_name = worker.spec.bootstrap.data_secret_name.clone().unwrap();
    assert_eq!(secret_name, format!("{}-bootstrap", worker.name_any()));
    let secret = Api::<Secret>::namespaced(client.clone(), NS)
        .get(&secret_name)
        .await
        .unwrap();
    let data = secret.data.clone().unwrap();
    let ByteString(value) = &data["value"];
    let value = String::from_utf8(value.clone()).unwrap();
    assert!(value.starts_with("#cloud-config\n"));
    assert!(
        value.contains(&format!("{NS}/{}", worker.name_any())),
        "{value}"
    );
    assert!(value.contains("ssh-ed25519 AAAAC3Nza test@e2e"), "{value}");
    assert_eq!(data["format"], ByteString(b"cloud-config".to_vec()));
    assert_eq!(secret.owner_references()[0].kind, "KubeadmConfig");
    assert_eq!(
        secret
            .labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("wl1")
    );
    // Control-plane data came first: every worker's Secret is younger than the
    // first control-plane machine's Node... observable as: the first
    // control-plane KubeadmConfig initialises, the others join.
    let configs = Api::<KubeadmConfig>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let cp_configs: Vec<&KubeadmConfig> = configs
        .iter()
        .filter(|c| c.labels().contains_key("cluster.x-k8s.io/control-plane"))
        .collect();
    assert_eq!(cp_configs.len(), 3);
    assert_eq!(
        cp_configs
            .iter()
            .filter(|c| c.spec.fields.contains_key("initConfiguration"))
            .count(),
        1
    );
    assert_eq!(
        cp_configs
            .iter()
            .filter(|c| c.spec.fields.contains_key("joinConfiguration"))
            .count(),
        2
    );

    // Scale dc-a's workers to 3, then to 1.
    let mds: Api<MachineDeployment> = Api::namespaced(client.clone(), NS);
    let scale = |n: i32| json!({"spec": {"replicas": n}});
    mds.patch(
        "wl1-md-dc-a",
        &PatchParams::default(),
        &Patch::Merge(&scale(3)),
    )
    .await
    .unwrap();
    wait_running(
        &client,
        "dc-a scaled to 3",
        3,
        [("dc-a", 3), ("dc-b", 1), ("dc-c", 1)].into(),
    )
    .await;
    let md = mds.get("wl1-md-dc-a").await.unwrap();
    wait_until("md status 3 ready", WAIT, POLL, || {
        let mds = mds.clone();
        async move {
            let s = mds.get("wl1-md-dc-a").await?.status.unwrap_or_default();
            Ok(
                if s.ready_replicas == Some(3) && s.phase.as_deref() == Some("Running") {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{s:?}"))
                },
            )
        }
    })
    .await
    .unwrap();
    assert_eq!(md.spec.replicas, Some(3));
    mds.patch(
        "wl1-md-dc-a",
        &PatchParams::default(),
        &Patch::Merge(&scale(1)),
    )
    .await
    .unwrap();
    wait_running(
        &client,
        "dc-a scaled to 1",
        3,
        [("dc-a", 1), ("dc-b", 1), ("dc-c", 1)].into(),
    )
    .await;
    // One MachineSet per deployment.
    let sets = Api::<MachineSet>::namespaced(client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(sets.len(), 3);

    // Deletion order: the InfraMachine goes first and is waited for.
    let victim = machines(&client)
        .await
        .into_iter()
        .find(|m| !is_cp(m) && m.failure_domain() == Some("dc-c"))
        .unwrap();
    let name = victim.name_any();
    let pxm_api = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &pxm_resource());
    pxm_api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": ["e2e.test/hold"]}})),
        )
        .await
        .unwrap();
    mds.patch(
        "wl1-md-dc-c",
        &PatchParams::default(),
        &Patch::Merge(&scale(0)),
    )
    .await
    .unwrap();
    let machines_api: Api<Machine> = Api::namespaced(client.clone(), NS);
    wait_until("infra machine marked for deletion", WAIT, POLL, || {
        let pxm_api = pxm_api.clone();
        let name = name.clone();
        async move {
            let p = pxm_api.get(&name).await?;
            Ok(if p.metadata.deletion_timestamp.is_some() {
                Progress::Done(())
            } else {
                Progress::Pending("no deletionTimestamp".into())
            })
        }
    })
    .await
    .unwrap();
    // While the InfraMachine exists, the Machine, its bootstrap config and its Node stay.
    let held = machines_api.get(&name).await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    assert_eq!(held.phase(), "Deleting");
    assert!(
        Api::<KubeadmConfig>::namespaced(client.clone(), NS)
            .get_opt(&name)
            .await
            .unwrap()
            .is_some()
    );
    assert!(nodes.get(&name).await.unwrap().is_some());
    pxm_api
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    wait_until("machine, config, secret and node gone", WAIT, POLL, || {
        let client = client.clone();
        let nodes = nodes.clone();
        let name = name.clone();
        async move {
            let m = Api::<Machine>::namespaced(client.clone(), NS)
                .get_opt(&name)
                .await?
                .is_some();
            let c = Api::<KubeadmConfig>::namespaced(client.clone(), NS)
                .get_opt(&name)
                .await?
                .is_some();
            let s = Api::<Secret>::namespaced(client.clone(), NS)
                .get_opt(&format!("{name}-bootstrap"))
                .await?
                .is_some();
            let n = nodes.get(&name).await?.is_some();
            Ok(if !(m || c || s || n) {
                Progress::Done(())
            } else {
                Progress::Pending(format!("machine {m}, config {c}, secret {s}, node {n}"))
            })
        }
    })
    .await
    .unwrap();

    // Deleting the Cluster removes everything, the InfraCluster last.
    Api::<Cluster>::namespaced(client.clone(), NS)
        .delete("wl1", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("everything deleted", WAIT, POLL, || {
        let client = client.clone();
        async move {
            let m = machines(&client).await.len();
            let md = Api::<MachineDeployment>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let kcp = Api::<KubeadmControlPlane>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let pxc = Api::<DynamicObject>::namespaced_with(client.clone(), NS, &pxc_resource())
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let cl = Api::<Cluster>::namespaced(client.clone(), NS)
                .list(&ListParams::default())
                .await?
                .items
                .len();
            let seen =
                format!("machines {m}, mds {md}, kcp {kcp}, proxmoxclusters {pxc}, clusters {cl}");
            Ok(if m + md + kcp + pxc + cl == 0 {
                Progress::Done(())
            } else {
                Progress::Pending(seen)
            })
        }
    })
    .await
    .unwrap();
    assert!(nodes.list().await.unwrap().is_empty());
    provider.abort();
    standin.shutdown().await;
}
