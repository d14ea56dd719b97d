//! PCI devices by resource mapping against pve-sim (docs/vm-shapes.md "PCI
//! devices"): a mapping with one device on each of two nodes gives two
//! machines a device each, on different nodes; a third waits with
//! `PciDevicesExhausted` and nothing cloned, and is placed when a device
//! frees up; a mapping the instance does not have is named. pve-sim refuses
//! a start without a free device, so a double allocation would fail here.

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::vm_shape::PciDeviceSpec;
use pve_sim::config::PciMappingConfig;
use support::*;

fn gpu(mapping: &str) -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        pci_devices: vec![PciDeviceSpec {
            mapping: mapping.into(),
            pcie: None,
            rombar: Some(false),
            primary_gpu: None,
            mdev: None,
        }],
        ..ProxmoxMachineSpec::default()
    }
}

fn clones(w: &World) -> u64 {
    w.pve("dc-a")
        .calls()
        .count("POST", "/nodes/{node}/qemu/{vmid}/clone")
}

#[tokio::test]
async fn one_device_per_vm_the_third_waits_until_one_is_free() {
    let mut sim = fast_sim();
    sim.cluster_mut("dc-a").unwrap().pci_mappings = vec![PciMappingConfig {
        id: "nvidia-a100".into(),
        description: None,
        map: vec![
            "node=pve-a1,path=0000:01:00.0,id=10de:20b0".into(),
            "node=pve-a3,path=0000:41:00.0;0000:41:00.1,id=10de:20b0".into(),
        ],
        mdev: false,
    }];
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    let mut dc_a = instance("dc-a", 10);
    dc_a.pci_mappings = [("gpu".to_string(), "nvidia-a100".to_string())].into();
    w.cluster("wl1", multi(vec![dc_a])).await;

    let mut nodes = Vec::new();
    for name in ["m-gpu-1", "m-gpu-2"] {
        w.machine("wl1", name, gpu("gpu")).await;
        let m = w.provision(name).await;
        let vmid = m.spec.virtual_machine_id.unwrap();
        let vm = w.pve("dc-a").vm(vmid).unwrap();
        assert_eq!(
            vm.config.get("hostpci0").map(String::as_str),
            Some("mapping=nvidia-a100,rombar=0"),
            "the instance's mapping id: {:?}",
            vm.config
        );
        assert_eq!(vm.status, "running");
        nodes.push(vm.node.clone());
    }
    nodes.sort();
    assert_eq!(nodes, ["pve-a1", "pve-a3"], "one device on each node");

    let before = clones(&w);
    w.machine("wl1", "m-gpu-3", gpu("gpu")).await;
    let m = w
        .drive("m-gpu-3", 100, |m| vm_reason(m) == "PciDevicesExhausted")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(message.contains("nvidia-a100"), "{message}");
    assert_eq!(clones(&w), before, "nothing cloned while no device is free");
    assert_eq!(m.spec.virtual_machine_id, None, "no VMID reserved");

    let first = w.get("m-gpu-1").await.unwrap();
    let freed = first.status.unwrap().proxmox_node.unwrap();
    w.delete_and_drive("m-gpu-1").await;
    let m = w.provision("m-gpu-3").await;
    let vm = w
        .pve("dc-a")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    assert_eq!(vm.node, freed, "placed where the device was freed");
    assert_eq!(vm.status, "running");

    for name in ["m-gpu-2", "m-gpu-3"] {
        w.delete_and_drive(name).await;
    }
    assert!(w.vms("dc-a").is_empty());
}

#[tokio::test]
async fn a_mapping_the_instance_does_not_have_is_named_and_nothing_is_cloned() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m-nomap", gpu("tesla-t4")).await;
    let m = w
        .drive("m-nomap", 100, |m| vm_reason(m) == "PciMappingNotFound")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(message.contains("tesla-t4"), "{message}");
    assert_eq!(clones(&w), 0);
    w.delete_and_drive("m-nomap").await;
    assert!(w.vms("dc-a").is_empty());
}
