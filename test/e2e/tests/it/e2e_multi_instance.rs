//! Scenarios 1 and 6: the multi-instance template rendered with variables
//! and applied; three control-plane machines land one per datacenter and
//! one worker per MachineDeployment in its datacenter; the VMs have exactly
//! what was asked; the seed ISO carries the bootstrap data and the claimed
//! address and is removed after provisioning; `status.instances` counts
//! right. Then the Cluster is deleted and nothing is left behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use capmox_e2e::clusterctl;
use capmox_e2e::crds::{Cluster, IPAddress, Machine};
use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::leaks;
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

const CLUSTER: &str = "wl1";

/// Splits a Proxmox property string (`virtio=BC:..,bridge=vmbr0,tag=42` or
/// `ceph:vm-1000-disk-0,size=40G`) into keys and values; a leading value
/// without `=` is stored under `""`.
fn props(s: &str) -> BTreeMap<String, String> {
    s.split(',')
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => (String::new(), kv.to_string()),
        })
        .collect()
}

fn expected_subnet(instance: &str) -> &'static str {
    match instance {
        "dc-a" => "10.10.0.",
        "dc-b" => "10.20.0.",
        "dc-c" => "10.30.0.",
        other => panic!("unexpected instance {other}"),
    }
}

/// The rendered template with a second NIC (VLAN 42, DHCP) and a data disk
/// added to the worker machine template.
fn documents(env: &Env) -> Vec<Value> {
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_NUM_SOCKETS".into(), "2".into());
    vars.insert("CONTROL_PLANE_NUM_CORES".into(), "2".into());
    vars.insert("CONTROL_PLANE_MEMORY_MIB".into(), "4096".into());
    vars.insert("CONTROL_PLANE_BOOT_VOLUME_SIZE".into(), "40".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "1".into());
    vars.insert("MACHINE_TAGS".into(), "[kubernetes, e2e]".into());
    let text = clusterctl::render(env::MULTI_INSTANCE_TEMPLATE, &vars).unwrap();
    let mut docs = scenario::parse_documents("multi-instance", &text).unwrap();
    for d in &mut docs {
        if d["kind"] == "ProxmoxMachineTemplate" && d["metadata"]["name"] == "wl1-worker" {
            let spec = &mut d["spec"]["template"]["spec"];
            spec["network"]["networkDevices"] = json!([
                {"name": "net0", "model": "virtio"},
                {"name": "net1", "model": "virtio", "bridge": "vmbr0", "vlan": 42, "dhcp4": true}
            ]);
            spec["disks"]["additionalVolumes"] =
                json!([{"disk": "scsi1", "sizeGb": 10, "storage": "ceph"}]);
        }
    }
    docs
}

fn all_provisioned(rows: &[MachineRow], cp: usize, workers: usize, need_node: bool) -> bool {
    rows.iter().filter(|r| r.control_plane).count() == cp
        && rows.iter().filter(|r| !r.control_plane).count() == workers
        && rows
            .iter()
            .all(|r| r.up(need_node) && (!need_node || r.phase == "Running"))
}

#[tokio::test]
async fn multi_instance_spread_then_delete_leaves_nothing() {
    let mut env = Env::start(EnvOptions::new("multi")).await.unwrap();
    for doc in documents(&env) {
        scenario::apply_value(&env.client, &env.namespace, doc)
            .await
            .unwrap();
    }
    let need_node = env.nodes_join();
    let timeout = env.waits.sim(3.0 * 400.0);
    let rows = env
        .wait_machines(
            "3 control-plane + 3 worker machines running",
            timeout,
            |r| all_provisioned(r, 3, 3, need_node),
        )
        .await
        .unwrap();

    // Placement: control plane one per datacenter; each worker in its
    // MachineDeployment's datacenter; instance == failure domain.
    let cp_instances: BTreeSet<&str> = rows
        .iter()
        .filter(|r| r.control_plane)
        .map(|r| r.instance.as_deref().unwrap())
        .collect();
    assert_eq!(cp_instances, BTreeSet::from(["dc-a", "dc-b", "dc-c"]));
    for r in &rows {
        assert_eq!(r.instance, r.failure_domain, "{r:?}");
        if !r.control_plane {
            let md_dc = r.name.strip_prefix("wl1-md-").unwrap();
            assert!(md_dc.starts_with(r.instance.as_deref().unwrap()), "{r:?}");
        }
    }

    // The VMs in each simulated datacenter: exactly the machines placed there.
    let ns = env.namespace.clone();
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &ns);
    let machines: Api<Machine> = Api::namespaced(env.client.clone(), &ns);
    let addresses = Api::<IPAddress>::namespaced(env.client.clone(), &ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    // Seeds and Nodes come from the simulated kubelets (simulated backend).
    let seeds = env.seeds();
    let nodes = env.nodes();
    for dc in ["dc-a", "dc-b", "dc-c"] {
        let sim = env.pve.cluster(dc).unwrap();
        let vms = observe::vms(sim);
        let mine: Vec<&MachineRow> = rows
            .iter()
            .filter(|r| r.instance.as_deref() == Some(dc))
            .collect();
        assert_eq!(
            mine.len(),
            2,
            "{dc}: one control-plane machine and one worker"
        );
        let vmids: BTreeSet<u32> = vms.iter().map(|v| v.vmid).collect();
        let want: BTreeSet<u32> = mine.iter().map(|r| r.vmid.unwrap()).collect();
        assert_eq!(vmids, want, "{dc}: VMs are exactly the machines' VMIDs");
        for r in mine {
            let vm = sim.vm(r.vmid.unwrap()).unwrap();
            assert_eq!(vm.status, "running", "{}", r.name);
            let c = &vm.config;
            let (sockets, cores, memory, boot_gb) = if r.control_plane {
                ("2", "2", "4096", "40G")
            } else {
                ("1", "4", "8192", "60G")
            };
            assert_eq!(
                c.get("sockets").map(String::as_str),
                Some(sockets),
                "{} {c:?}",
                r.name
            );
            assert_eq!(
                c.get("cores").map(String::as_str),
                Some(cores),
                "{} {c:?}",
                r.name
            );
            assert_eq!(
                c.get("memory").map(String::as_str),
                Some(memory),
                "{} {c:?}",
                r.name
            );
            assert_eq!(
                props(&c["scsi0"]).get("size").map(String::as_str),
                Some(boot_gb),
                "{} {c:?}",
                r.name
            );
            let net0 = props(&c["net0"]);
            assert!(net0.contains_key("virtio"), "{} net0 {net0:?}", r.name);
            assert_eq!(net0.get("bridge").map(String::as_str), Some("vmbr0"));
            assert!(!net0.contains_key("tag"), "{} net0 has no VLAN", r.name);
            if r.control_plane {
                assert!(!c.contains_key("net1"), "{}", r.name);
                assert!(!c.contains_key("scsi1"), "{}", r.name);
            } else {
                let net1 = props(&c["net1"]);
                assert_eq!(
                    net1.get("tag").map(String::as_str),
                    Some("42"),
                    "{} net1 {net1:?}",
                    r.name
                );
                assert_eq!(net1.get("bridge").map(String::as_str), Some("vmbr0"));
                let scsi1 = props(&c["scsi1"]);
                assert_eq!(
                    scsi1.get("size").map(String::as_str),
                    Some("10G"),
                    "{} scsi1 {scsi1:?}",
                    r.name
                );
                assert!(scsi1[""].starts_with("ceph:"), "{} scsi1 {scsi1:?}", r.name);
            }
            for tag in ["kubernetes", "e2e"] {
                assert!(
                    vm.tags.iter().any(|t| t == tag),
                    "{} tags {:?}",
                    r.name,
                    vm.tags
                );
            }

            // The seed ISO the VM booted with: user-data is the bootstrap
            // Secret's value, network-config holds the claimed address.
            let m = machines.get(&r.name).await.unwrap();
            let secret = secrets
                .get(m.spec.bootstrap.data_secret_name.as_deref().unwrap())
                .await
                .unwrap();
            let ByteString(value) = secret.data.as_ref().unwrap()["value"].clone();
            let claimed: Vec<&IPAddress> = addresses
                .iter()
                .filter(|a| a.name_any().starts_with(&format!("{}-net0", r.name)))
                .collect();
            assert_eq!(claimed.len(), 1, "{}: one claimed address for net0", r.name);
            let addr = &claimed[0].spec.address;
            assert!(
                addr.starts_with(expected_subnet(dc)),
                "{} got {addr}",
                r.name
            );
            let machine_addrs: Vec<String> = m
                .status
                .as_ref()
                .unwrap()
                .addresses
                .iter()
                .map(|a| a.address.clone())
                .collect();
            assert!(
                machine_addrs.contains(addr),
                "{}: {machine_addrs:?}",
                r.name
            );
            let Some(nodes) = &nodes else { continue };
            let seed = seeds
                .get(&r.name)
                .unwrap_or_else(|| panic!("no seed recorded for {}", r.name));
            assert_eq!(seed.instance, dc);
            assert_eq!(seed.vmid, r.vmid.unwrap());
            assert_eq!(
                seed.seed.user_data.as_bytes(),
                value.as_slice(),
                "{}",
                r.name
            );
            assert!(seed.seed.user_data.contains(&format!("{ns}/{}", r.name)));
            let nc = seed.seed.network_config.clone().unwrap_or_default();
            assert!(
                nc.contains(&format!("{addr}/24")),
                "{}: network-config lacks {addr}/24:\n{nc}",
                r.name
            );

            // The Node: providerID = proxmox://<instance-id of the seed>,
            // byte for byte the Machine's.
            let instance_id = capmox_e2e::standin::node::instance_id(&seed.seed.meta_data).unwrap();
            let pid = format!("proxmox://{instance_id}");
            assert_eq!(
                m.spec.provider_id.as_deref(),
                Some(pid.as_str()),
                "{}",
                r.name
            );
            let node = nodes.find_by_provider_id(&pid).await.unwrap().unwrap();
            assert_eq!(node.name_any(), r.name);
            assert_eq!(r.node.as_deref(), Some(r.name.as_str()));
        }
    }

    // The seed ISOs are removed once the machines are provisioned.
    let clusters = env.pve.clusters().to_vec();
    env.wait_for("every seed ISO removed", env.waits.sim(60.0), |_| {
        let counts: BTreeMap<String, usize> = clusters
            .iter()
            .map(|c| (c.name().to_string(), observe::isos(c).len()))
            .collect();
        async move {
            Ok(if counts.values().all(|n| *n == 0) {
                Progress::Done(())
            } else {
                Progress::Pending(format!("ISOs: {counts:?}"))
            })
        }
    })
    .await
    .unwrap();

    // ProxmoxCluster.status.instances counts two machines per datacenter;
    // every instance is a failure domain.
    let ns2 = ns.clone();
    env.wait_for("status.instances counts", env.waits.sim(120.0), |client| {
        let ns = ns2.clone();
        async move {
            let pxc = scenario::proxmox_cluster(&client, &ns, CLUSTER)
                .await?
                .unwrap();
            let counts = scenario::instance_counts(&pxc.data);
            let want: BTreeMap<String, (bool, u64)> = ["dc-a", "dc-b", "dc-c"]
                .iter()
                .map(|d| ((*d).to_string(), (true, 2)))
                .collect();
            Ok(if counts == want {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{counts:?}"))
            })
        }
    })
    .await
    .unwrap();
    let cluster = Api::<Cluster>::namespaced(env.client.clone(), &ns)
        .get(CLUSTER)
        .await
        .unwrap();
    let fds: Vec<&str> = cluster
        .failure_domains()
        .iter()
        .map(|f| f.name.as_str())
        .collect();
    assert_eq!(fds, ["dc-a", "dc-b", "dc-c"]);

    // Scenario 6: delete the Cluster; every VM, ISO, claim, address and pool
    // goes, every finalizer is released.
    leaks::delete_cluster_and_wait(&mut env, CLUSTER)
        .await
        .unwrap();
    // Bootstrap Secrets went with their configs; the credentials Secrets (the
    // user's) stay.
    let (left, expected) = leaks::secrets_left(&env.client, &ns, "wl1", &["dc-a", "dc-b", "dc-c"])
        .await
        .unwrap();
    assert_eq!(left, expected);
    if let Some(nodes) = &nodes {
        assert!(nodes.list().await.unwrap().is_empty());
    }
    env.shutdown().await;
}
