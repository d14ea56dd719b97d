//! ProxmoxMachine lifecycle against pve-sim and kube-sim: clone → configure
//! → disks → IPs → bootstrap ISO → start → addresses → provisioned, and the
//! deletion back to nothing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::machine::{DiskSize, Disks};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use support::*;

fn spec() -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        num_cores: Some(2),
        memory_mib: Some(4096),
        disks: Some(Disks {
            boot_volume: Some(DiskSize {
                disk: "scsi0".into(),
                size_gb: 30,
            }),
            additional_volumes: vec![],
        }),
        ..ProxmoxMachineSpec::default()
    }
}

/// The calls read the instance's listing and no task: the ends of the
/// tasks awaited came from the listing.
fn assert_task_ends_from_the_listing(calls: &pve_sim::CallLog) {
    assert!(
        calls.count("GET", "/cluster/resources") > 0,
        "{:?}",
        calls.by_endpoint
    );
    assert_eq!(
        calls.count("GET", "/nodes/{node}/tasks")
            + calls.count("GET", "/nodes/{node}/tasks/{upid}/status"),
        0,
        "{:?}",
        calls.by_endpoint
    );
}

#[tokio::test]
async fn provisions_then_deletes_one_machine() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let created = w.machine("wl1", "wl1-md-0-abcde", spec()).await;
    let uid = created.uid().unwrap();

    let m = w.provision("wl1-md-0-abcde").await;
    assert_eq!(m.spec.instance.as_deref(), Some("dc-a"));
    // Lowest free VMID of the whole space (the template is 9000).
    assert_eq!(m.spec.virtual_machine_id, Some(100));
    let vm = w.pve("dc-a").vm(100).expect("VM 100 exists");
    assert_eq!(vm.name.as_deref(), Some("wl1-md-0-abcde"));
    assert_eq!(vm.status, "running");
    assert!(vm.tags.contains(&format!("capmox-{uid}")), "{:?}", vm.tags);
    assert!(
        vm.tags.contains(&"ubuntu-24.04".to_string()),
        "template tags kept: {:?}",
        vm.tags
    );
    assert_eq!(
        vm.config.get("description").map(String::as_str),
        Some(format!("capmox: default/wl1-md-0-abcde uid={uid}").as_str())
    );
    assert_eq!(vm.config.get("memory").map(String::as_str), Some("4096"));
    assert_eq!(vm.config.get("cores").map(String::as_str), Some("2"));
    let scsi0 = vm.config.get("scsi0").unwrap();
    assert!(scsi0.contains("size=30G"), "boot disk grown: {scsi0}");
    assert!(
        vm.config.get("efidisk0").unwrap().contains("size=528K"),
        "EFI disk untouched"
    );
    // The ISO was ejected and deleted (B20).
    assert!(
        !vm.config.values().any(|v| v.contains("capmox-100-")),
        "{:?}",
        vm.config
    );
    assert!(w.isos("dc-a").is_empty(), "{:?}", w.isos("dc-a"));
    // The guest applied our network config: the claimed address on eth0.
    let claim = w.claims().get("wl1-md-0-abcde-net0-ipv4").await.unwrap();
    let addr = w
        .addresses()
        .get(&claim.status.unwrap().address_ref.unwrap().name)
        .await
        .unwrap();
    assert_eq!(addr.spec.address, "10.10.0.20");
    assert!(
        vm.guest_addresses
            .values()
            .flatten()
            .any(|a| a == "10.10.0.20/24"),
        "{:?}",
        vm.guest_addresses
    );

    let st = m.status.clone().unwrap();
    let uuid = vm
        .config
        .get("smbios1")
        .and_then(|s| s.split(',').find_map(|kv| kv.strip_prefix("uuid=")))
        .unwrap()
        .to_string();
    assert_eq!(m.spec.provider_id, Some(format!("proxmox://{uuid}")));
    assert_eq!(st.failure_domain.as_deref(), Some("dc-a"));
    assert_eq!(st.proxmox_node.as_deref(), Some(vm.node.as_str()));
    let addrs: Vec<(String, String)> = st
        .addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        addrs,
        vec![
            ("InternalIP".to_string(), "10.10.0.20".to_string()),
            ("Hostname".to_string(), "wl1-md-0-abcde".to_string()),
        ]
    );
    assert_eq!(st.task_ref, None, "the ISO deletion task was awaited");
    // The record went in the write that proves the ISO deleted.
    assert_eq!(st.bootstrap_media, None);
    assert_eq!(st.bootstrap_media_deleted, Some(true));
    assert_eq!(condition(&m, "Ready").map(|c| c.0), Some("True".into()));
    assert_eq!(
        condition(&m, "IPAddressesClaimed").map(|c| c.1),
        Some("Claimed".into())
    );
    assert_eq!(
        condition(&m, "InstanceSelected").map(|c| c.0),
        Some("True".into())
    );
    assert!(
        m.finalizers()
            .iter()
            .any(|f| f == "proxmoxmachine.infrastructure.cluster.x-k8s.io")
    );

    // A reconcile of a provisioned machine changes nothing on Proxmox.
    w.pve("dc-a").reset_calls();
    w.reconcile("wl1-md-0-abcde").await.unwrap().unwrap();
    let calls = w.pve("dc-a").calls();
    let writes: u64 = calls
        .by_endpoint
        .iter()
        .filter(|(k, _)| !k.starts_with("GET "))
        .map(|(_, v)| *v)
        .sum();
    assert_eq!(writes, 0, "{:?}", calls.by_endpoint);

    // The deletion, in two parts: up to the shutdown request, then to the end.
    w.machines()
        .delete("wl1-md-0-abcde", &DeleteParams::default())
        .await
        .unwrap();
    let sim = w.pve("dc-a");
    const SHUTDOWN: (&str, &str) = ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown");
    w.drive("wl1-md-0-abcde", 200, |_| {
        sim.calls().count(SHUTDOWN.0, SHUTDOWN.1) > 0
    })
    .await;
    sim.reset_calls();
    w.drive("wl1-md-0-abcde", 200, |m| m.is_none()).await;
    assert!(w.pve("dc-a").vm(100).is_none(), "VM destroyed");
    // The shutdown's end (the VM listed as stopped) and the destroy's (the
    // VM left the listing) came from the instance's listing, not from a
    // task read (docs/proxmox-semantics.md §9, §10).
    let after = sim.calls();
    assert_eq!(
        after.count("DELETE", "/nodes/{node}/qemu/{vmid}"),
        1,
        "{:?}",
        after.by_endpoint
    );
    assert_task_ends_from_the_listing(&after);
    // The status proved the ISO deleted: no sweep of the ISO storages.
    assert_eq!(
        after.count("GET", "/nodes/{node}/storage/{storage}/content"),
        0,
        "{:?}",
        after.by_endpoint
    );
    assert!(
        w.claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(w.isos("dc-a").is_empty());
    assert_eq!(
        w.runtime().vmids.holder(
            &capmox_controller::clients::Identity::new("cluster:dc-a"),
            100
        ),
        None,
        "VMID released"
    );
}

#[tokio::test]
async fn bootstrap_iso_carries_user_meta_and_network_data() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m-iso", ProxmoxMachineSpec::default())
        .await;
    // Stop right after the ISO is attached, before the guest reports addresses.
    let m = w
        .drive("m-iso", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.bootstrap_data_provided)
                == Some(true)
        })
        .await
        .unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let uid = m.uid().unwrap();
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    let (slot, iso) = vm
        .config
        .iter()
        .find(|(_, v)| v.contains(&format!("capmox-{vmid}-{uid}.iso")))
        .expect("ISO attached");
    assert_eq!(slot, "ide0");
    assert_eq!(
        iso,
        &format!("cephfs:iso/capmox-{vmid}-{uid}.iso,media=cdrom")
    );
    let bytes = w
        .pve("dc-a")
        .iso_bytes(&vm.node, &format!("cephfs:iso/capmox-{vmid}-{uid}.iso"))
        .unwrap();
    let seed = pve_sim::iso::read_nocloud(&bytes).unwrap();
    assert_eq!(seed.volume_label, "cidata");
    assert_eq!(seed.user_data, USER_DATA);
    let uuid = vm
        .config
        .get("smbios1")
        .and_then(|s| s.split(',').find_map(|kv| kv.strip_prefix("uuid=")))
        .unwrap()
        .to_string();
    assert_eq!(
        seed.meta_data,
        format!("instance-id: {uuid}\nlocal-hostname: m-iso\n")
    );
    let mac = vm
        .config
        .get("net0")
        .and_then(|n| n.split(',').next())
        .and_then(|h| h.strip_prefix("virtio="))
        .unwrap()
        .to_ascii_lowercase();
    let net: serde_json::Value =
        serde_saphyr::from_str(seed.network_config.as_deref().unwrap()).unwrap();
    assert_eq!(net["version"], 2);
    let eth0 = &net["ethernets"]["eth0"];
    assert_eq!(eth0["match"]["macaddress"], mac.as_str());
    assert_eq!(eth0["set-name"], "eth0");
    assert_eq!(eth0["addresses"][0], "10.10.0.20/24");
    assert_eq!(eth0["routes"][0]["to"], "0.0.0.0/0");
    assert_eq!(eth0["routes"][0]["via"], "10.10.0.1");
    assert_eq!(eth0["nameservers"]["addresses"][0], "10.10.0.53");
    assert_eq!(eth0["dhcp4"], false);

    let m = w.provision("m-iso").await;
    assert!(w.isos("dc-a").is_empty(), "deleted once provisioned");
    assert_eq!(m.status.unwrap().bootstrap_data_provided, Some(true));
}

#[tokio::test]
async fn data_disk_second_nic_and_vm_options_in_one_write() {
    use capmox_controller::api::machine::{AdditionalVolume, NetworkDevice, NetworkSpec};
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let spec = ProxmoxMachineSpec {
        num_sockets: Some(2),
        num_cores: Some(2),
        on_boot: Some(true),
        tags: vec!["k8s-wl1".into()],
        disks: Some(Disks {
            boot_volume: None,
            additional_volumes: vec![AdditionalVolume {
                disk: "scsi1".into(),
                size_gb: 10,
                discard: Some(true),
                ..AdditionalVolume::default()
            }],
        }),
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net1".into(),
                bridge: Some("vmbr0".into()),
                vlan: Some(20),
                dhcp4: Some(true),
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    let created = w.machine("wl1", "m-opts", spec).await;
    let m = w
        .drive("m-opts", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.bootstrap_data_provided)
                == Some(true)
        })
        .await
        .unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    assert_eq!(vm.config.get("sockets").map(String::as_str), Some("2"));
    assert_eq!(vm.config.get("onboot").map(String::as_str), Some("1"));
    assert!(vm.tags.contains(&"k8s-wl1".to_string()), "{:?}", vm.tags);
    let scsi1 = vm.config.get("scsi1").expect("data disk created");
    assert!(
        scsi1.starts_with("ceph:vm-"),
        "on the boot disk's storage: {scsi1}"
    );
    assert!(
        scsi1.contains("discard=on") && scsi1.contains("size=10G"),
        "{scsi1}"
    );
    // The second NIC got a stable generated MAC that the ISO matches.
    let net1 = vm.config.get("net1").unwrap();
    assert!(net1.starts_with("virtio=02:"), "{net1}");
    assert!(net1.contains("tag=20"), "{net1}");
    let mac1 = net1
        .split(',')
        .next()
        .unwrap()
        .trim_start_matches("virtio=")
        .to_ascii_lowercase();
    let uid = created.uid().unwrap();
    let bytes = w
        .pve("dc-a")
        .iso_bytes(&vm.node, &format!("cephfs:iso/capmox-{vmid}-{uid}.iso"))
        .unwrap();
    let seed = pve_sim::iso::read_nocloud(&bytes).unwrap();
    let net: serde_json::Value =
        serde_saphyr::from_str(seed.network_config.as_deref().unwrap()).unwrap();
    assert_eq!(
        net["ethernets"]["eth1"]["match"]["macaddress"],
        mac1.as_str()
    );
    assert_eq!(net["ethernets"]["eth1"]["dhcp4"], true);
    // Exactly one config write with everything, plus the eject later.
    let calls = w.pve("dc-a").calls();
    assert_eq!(
        calls.count("POST", "/nodes/{node}/qemu/{vmid}/config"),
        1,
        "{:?}",
        calls.by_endpoint
    );
    w.provision("m-opts").await;
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("PUT", "/nodes/{node}/qemu/{vmid}/config"),
        1,
        "only the eject"
    );
}

#[tokio::test]
async fn startup_needs_sys_modify_and_says_so() {
    // qemu-server checks Sys.Modify on / for `startup` (it changes host
    // behaviour); the provider's token does not have it in the built-in sim.
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let spec = ProxmoxMachineSpec {
        startup: Some("order=3,up=20".into()),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w
        .drive("m1", 100, |m| vm_reason(m) == "ConfigureFailed")
        .await
        .unwrap();
    let msg = condition(&m, "VirtualMachineProvisioned").unwrap().2;
    assert!(
        msg.contains("Permission check failed (/, Sys.Modify)"),
        "{msg}"
    );
    let vm = w
        .pve("dc-a")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    assert_eq!(vm.status, "stopped", "not started half-configured");
}

/// A start's end is read from the instance's listing (the VM listed as
/// running, where it was listed stopped when the start was issued), not
/// from its node's task list.
#[tokio::test]
async fn a_starts_end_is_read_from_the_listing() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "wl1-md-0-start", spec()).await;
    let sim = w.pve("dc-a");
    const START: &str = "/nodes/{node}/qemu/{vmid}/status/start";
    w.drive("wl1-md-0-start", 200, |_| {
        sim.calls().count("POST", START) > 0
    })
    .await;
    sim.reset_calls();
    let m = w
        .drive("wl1-md-0-start", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .is_some_and(|s| s.task_ref.is_none())
        })
        .await
        .unwrap();
    assert_eq!(
        m.status.and_then(|s| s.vm_status).as_deref(),
        Some("running")
    );
    assert_task_ends_from_the_listing(&sim.calls());
}

/// A listing that still shows the VM stopped from before its start (power
/// states there lag; docs/proxmox-semantics.md §9) does not end its
/// shutdown: the shutdown's end is read from the node's task list, and the
/// destroy is issued once, after the VM stopped.
#[tokio::test]
async fn a_lagging_listing_does_not_end_the_shutdown() {
    // At 1 ms per simulated second, the listing lags 1,000 s. The machine
    // waits 2,000 s between its clone and its start and is deleted as soon
    // as it runs: during the whole shutdown (60 s), the listing still shows
    // the VM as its clone left it (stopped).
    const SCALE: f64 = 0.001;
    let w = world_with(WorldOptions {
        sim: fast_sim().with_time_scale(SCALE).with_timings(|t| {
            t.shutdown = 60.0;
            t.resources_lag = 1_000.0;
        }),
        time_scale: SCALE,
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "wl1-md-0-lag", spec()).await;
    let sim = w.pve("dc-a");
    const CONFIG: &str = "/nodes/{node}/qemu/{vmid}/config";
    const START: &str = "/nodes/{node}/qemu/{vmid}/status/start";
    w.drive("wl1-md-0-lag", 200, |_| {
        sim.calls().count("POST", CONFIG) + sim.calls().count("PUT", CONFIG) > 0
    })
    .await;
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    w.drive("wl1-md-0-lag", 200, |m| {
        sim.calls().count("POST", START) > 0
            && m.and_then(|m| m.status.as_ref())
                .is_some_and(|s| s.task_ref.is_none())
    })
    .await;
    assert_eq!(sim.vm(100).unwrap().status, "running");
    sim.reset_calls();
    w.machines()
        .delete("wl1-md-0-lag", &DeleteParams::default())
        .await
        .unwrap();
    w.drive("wl1-md-0-lag", 400, |m| m.is_none()).await;
    let calls = sim.calls();
    assert_eq!(
        calls.count("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
        1,
        "{:?}",
        calls.by_endpoint
    );
    assert_eq!(
        calls.count("DELETE", "/nodes/{node}/qemu/{vmid}"),
        1,
        "a destroy refused because the VM still ran: {:?}",
        calls.by_endpoint
    );
    assert!(
        calls.count("GET", "/nodes/{node}/tasks") > 0,
        "the shutdown's end came from the task list: {:?}",
        calls.by_endpoint
    );
}
