//! Taking over a machine the Go provider (CAPMOX) made: its VM sits at
//! `spec.virtualMachineID`, carries no capmox marker, is named after the
//! machine, and its SMBIOS UUID is in `spec.providerID` — what CAPMOX
//! leaves (docs/migrating-from-capmox.md). The controller adopts it with
//! one config write: no clone, no destroy, no power change. Afterwards the
//! machine is ours in every way, deletion included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use support::*;

/// The calls that would make, destroy or power a VM.
const FORBIDDEN: &[(&str, &str)] = &[
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reset"),
];

fn forbidden_calls(w: &World) -> Vec<(&'static str, &'static str, u64)> {
    let calls = w.pve("dc-a").calls();
    FORBIDDEN
        .iter()
        .map(|(m, p)| (*m, *p, calls.count(m, p)))
        .filter(|(_, _, n)| *n > 0)
        .collect()
}

/// The VM CAPMOX left for machine `name` at `vmid` on `node`: running,
/// template tags and its address tag, no marker. Returns its SMBIOS UUID.
fn capmox_vm(w: &World, name: &str, vmid: u32, node: &str) -> String {
    let sim = w.pve("dc-a");
    sim.create_vm(
        pve_sim::VmConfig {
            vmid,
            name: name.into(),
            node: node.into(),
            tags: Some("ubuntu-24.04;ip_net0_10.10.0.40".into()),
            memory_mib: 4096,
            cores: 2,
            storage: "local-lvm".into(),
            disk_gib: 20,
            disk_key: "scsi0".into(),
            efidisk: false,
            tpm: false,
            agent: true,
            bridge: "vmbr0".into(),
            vlan: None,
            cloudinit_storage: None,
            running: true,
            ha: false,
            extra: Default::default(),
        },
        false,
    )
    .unwrap();
    let smbios = sim.vm(vmid).unwrap().config["smbios1"].clone();
    smbios.strip_prefix("uuid=").unwrap().to_string()
}

#[tokio::test]
async fn a_capmox_machine_is_adopted_without_clone_destroy_or_power_change() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let uuid = capmox_vm(&w, "m1", 100, "pve-a2");
    let spec = ProxmoxMachineSpec {
        instance: Some("dc-a".into()),
        virtual_machine_id: Some(100),
        provider_id: Some(format!("proxmox://{uuid}")),
        ..ProxmoxMachineSpec::default()
    };
    let m = w.machine("wl1", "m1", spec).await;
    // CAPMOX's `status.ready: true`, as the conversion maps it.
    w.machines()
        .patch_status(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "status": { "initialization": { "provisioned": true }, "proxmoxNode": "pve-a2" }
            })),
        )
        .await
        .unwrap();
    w.pve("dc-a").reset_calls();
    let tag = format!("capmox-{}", m.uid().unwrap());
    w.drive("m1", 60, |_| {
        w.pve("dc-a").vm(100).is_some_and(|v| v.tags.contains(&tag))
    })
    .await;
    // Settle: the machine is ours and provisioned, and stays so.
    for _ in 0..10 {
        w.reconcile("m1").await;
    }
    assert_eq!(forbidden_calls(&w), [], "the takeover touched the VM");
    let vm = w.pve("dc-a").vm(100).unwrap();
    assert_eq!(vm.status, "running");
    assert!(
        vm.tags.contains(&"ip_net0_10.10.0.40".to_string()),
        "{:?}",
        vm.tags
    );
    assert_eq!(w.vms("dc-a").len(), 1, "the adopted VM only, no clone");
    let m = w.get("m1").await.unwrap();
    assert!(provisioned(Some(&m)));
    assert_eq!(m.spec.provider_id, Some(format!("proxmox://{uuid}")));
    assert_eq!(vm_reason(Some(&m)), "Provisioned");
    // CAPMOX's addresses are left as they are: no new claim is made.
    let claims = w
        .claims()
        .list(&kube::api::ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        claims.is_empty(),
        "{:?}",
        claims.iter().map(ResourceExt::name_any).collect::<Vec<_>>()
    );

    // From now on it is ours: deletion destroys it.
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(100).is_none());
}

#[tokio::test]
async fn a_vm_whose_uuid_is_not_the_providerid_is_not_adopted() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    capmox_vm(&w, "m1", 100, "pve-a2");
    let spec = ProxmoxMachineSpec {
        instance: Some("dc-a".into()),
        virtual_machine_id: Some(100),
        provider_id: Some("proxmox://11111111-2222-4333-8444-555555555555".into()),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w
        .drive("m1", 60, |m| vm_reason(m) == "InvalidVMID")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(message.contains("carries no capmox marker"), "{message}");
    let vm = w.pve("dc-a").vm(100).unwrap();
    assert!(
        !vm.tags.iter().any(|t| t.starts_with("capmox-")),
        "{:?}",
        vm.tags
    );
    assert_eq!(forbidden_calls(&w), []);
}
