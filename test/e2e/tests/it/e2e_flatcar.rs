//! The flatcar flavor (docs/flatcar.md): rendered with variables and
//! applied against three datacenters that each hold an Ubuntu and a Flatcar
//! template. Every machine is cloned from the Flatcar template, gets
//! Ignition bootstrap data from the kubeadm stand-in (`format: ignition`),
//! and its seed ISO carries that config, enriched; the simulated guest boots
//! with Ignition (the sentinel says success only then), takes its address
//! from the config's networkd unit, and its kubelet registers with the
//! `COREOS_CUSTOM_PROVIDER_ID` of the config's `/etc/proxmox-env`. Then the
//! Cluster is deleted and nothing is left behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmox_e2e::crds::Machine;
use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::leaks;
use capmox_e2e::observe::MachineRow;
use capmox_e2e::standin::node::env_value;
use kube::ResourceExt;
use kube::api::Api;
use pve_sim::SimConfig;
use serde_json::Value;

const CLUSTER: &str = "fc1";

/// The built-in three datacenters, each with a Flatcar template (tags
/// `capmox;flatcar`, a serial console the Ubuntu one lacks) beside the
/// Ubuntu one.
fn datacenters() -> SimConfig {
    let mut sim = SimConfig::builtin_default();
    for c in &mut sim.clusters {
        capmox_e2e::vm_templates::add_flatcar(c);
    }
    sim
}

fn all_provisioned(rows: &[MachineRow], cp: usize, workers: usize, need_node: bool) -> bool {
    rows.iter().filter(|r| r.control_plane).count() == cp
        && rows.iter().filter(|r| !r.control_plane).count() == workers
        && rows
            .iter()
            .all(|r| r.up(need_node) && (!need_node || r.phase == "Running"))
}

#[tokio::test]
async fn flatcar_flavor_boots_with_ignition_then_delete_leaves_nothing() {
    let mut opts = EnvOptions::new("flatcar");
    opts.sim = Some(datacenters());
    let mut env = Env::start(opts).await.unwrap();
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "1".into());
    // The datacenters' default template stays the Ubuntu one; the machine
    // templates of the flavor select the Flatcar one.
    vars.insert("TEMPLATE_TAGS".into(), "[capmox, ubuntu-24.04]".into());
    env.apply_template("flatcar", env::FLATCAR_TEMPLATE, &vars)
        .await
        .unwrap();
    let need_node = env.nodes_join();
    let rows = env
        .wait_machines(
            "1 control-plane + 3 Flatcar worker machines running",
            env.waits.sim(3.0 * 400.0),
            |r| all_provisioned(r, 1, 3, need_node),
        )
        .await
        .unwrap();

    let ns = env.namespace.clone();
    let machines: Api<Machine> = Api::namespaced(env.client.clone(), &ns);
    let seeds = env.seeds();
    let nodes = env.nodes();
    for r in &rows {
        let dc = r.instance.as_deref().unwrap();
        let sim = env.pve.cluster(dc).unwrap();
        let vm = sim.vm(r.vmid.unwrap()).unwrap();
        // Cloned from the Flatcar template, booted with Ignition.
        assert_eq!(
            vm.config.get("serial0").map(String::as_str),
            Some("socket"),
            "{}: not cloned from the Flatcar template: {:?}",
            r.name,
            vm.config
        );
        assert_eq!(
            vm.guest_boot.as_deref(),
            Some("ignition 2.3.0"),
            "{}",
            r.name
        );
        let m = machines.get(&r.name).await.unwrap();
        let Some(nodes) = &nodes else { continue };
        let seed = seeds
            .get(&r.name)
            .unwrap_or_else(|| panic!("no seed recorded for {}", r.name));
        // user-data: the stand-in's Ignition config naming the machine,
        // enriched with the machine's identity and network.
        let config: Value = serde_json::from_str(&seed.seed.user_data).unwrap();
        assert_eq!(config["ignition"]["version"], "2.3.0", "{}", r.name);
        let marker = pve_sim::boot::ignition_file(&seed.seed.user_data, "/etc/capmox-e2e/machine");
        assert_eq!(marker, Some(format!("{ns}/{}\n", r.name)));
        let env_file =
            pve_sim::boot::ignition_file(&seed.seed.user_data, "/etc/proxmox-env").unwrap();
        assert_eq!(
            env_value(&env_file, "COREOS_CUSTOM_ZONE").as_deref(),
            Some(dc)
        );
        assert_eq!(
            env_value(&env_file, "COREOS_CUSTOM_HOSTNAME").as_deref(),
            Some(r.name.as_str())
        );
        let provider_id = env_value(&env_file, "COREOS_CUSTOM_PROVIDER_ID").unwrap();
        assert_eq!(
            m.spec.provider_id.as_deref(),
            Some(provider_id.as_str()),
            "{}",
            r.name
        );
        // The address the guest reports is the claimed one of its
        // networkd unit (a Flatcar guest without a unit would get a lease).
        let ipv4 = env_value(&env_file, "COREOS_CUSTOM_PRIVATE_IPV4").unwrap();
        let unit = config["networkd"]["units"][0]["contents"].as_str().unwrap();
        assert!(unit.contains(&format!("Address={ipv4}/24")), "{unit}");
        let reported: Vec<&String> = vm.guest_addresses.values().flatten().collect();
        assert!(
            reported.iter().any(|a| **a == format!("{ipv4}/24")),
            "{}: {reported:?}",
            r.name
        );
        let node = nodes
            .find_by_provider_id(&provider_id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(node.name_any(), r.name);
    }

    // Delete the Cluster: every VM, ISO, claim, address and object goes.
    leaks::delete_cluster_and_wait(&mut env, CLUSTER)
        .await
        .unwrap();
    let (left, expected) = leaks::secrets_left(&env.client, &ns, "fc1", &["dc-a", "dc-b", "dc-c"])
        .await
        .unwrap();
    assert_eq!(left, expected);
    if let Some(nodes) = &nodes {
        assert!(nodes.list().await.unwrap().is_empty());
    }
    env.shutdown().await;
}
