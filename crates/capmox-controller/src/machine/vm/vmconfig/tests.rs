//! The config write, case by case.
use std::collections::BTreeMap;

use serde_json::Value;

use pve_client::options::{DiskBus, DiskSlot};

use super::*;
use crate::api::machine::{
    AdditionalVolume, Checks, DiskSize as SpecDisk, Disks, NetworkDevice, NetworkSpec,
};
use crate::api::machine::{CpuSpec, ProxmoxMachineSpec};
use crate::machine::vm::marker::Marker;
use crate::pve::{ConfigUpdate, VmConfig};

const IDE_SATA: &[DiskBus] = &[DiskBus::Ide, DiskBus::Sata];

const UID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f";

fn marker() -> Marker {
    Marker::new("wl1", "m1", UID)
}

/// A fresh clone of the built-in template: as Proxmox returns it.
fn clone_config() -> VmConfig {
    let map: BTreeMap<String, Value> = [
        ("name", "m1"),
        (
            "description",
            "capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
        ),
        ("memory", "2048"),
        ("cores", "2"),
        ("sockets", "1"),
        ("agent", "1"),
        ("bios", "ovmf"),
        ("efidisk0", "ceph:vm-131-disk-1,efitype=4m,size=528K"),
        ("scsi0", "ceph:vm-131-disk-0,size=20G"),
        ("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0"),
        ("tags", "capmox;ubuntu-24.04"),
        ("smbios1", "uuid=0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"),
        ("digest", "0123456789abcdef0123456789abcdef01234567"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
    .collect();
    VmConfig::from_map(map).unwrap()
}

/// Applies an update to a config the way Proxmox would (test oracle:
/// set keys verbatim, drop deletions).
fn apply(c: &VmConfig, u: &ConfigUpdate) -> VmConfig {
    let mut map = c.raw.clone();
    for (k, v) in u.changes() {
        let v = match (k.as_str(), v.as_str()) {
            // Proxmox allocates the volume and records its size.
            ("scsi1", "ceph:50,discard=on,iothread=1,ssd=1") => {
                "ceph:vm-131-disk-2,discard=on,iothread=1,size=50G,ssd=1".to_string()
            }
            _ => v.clone(),
        };
        map.insert(k.clone(), Value::String(v));
    }
    for k in u.deletions() {
        map.remove(k);
    }
    map.insert("digest".into(), Value::String("fedcba".into()));
    VmConfig::from_map(map).unwrap()
}

fn full_spec() -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        num_sockets: Some(2),
        num_cores: Some(4),
        memory_mib: Some(8192),
        tags: vec!["k8s-wl1".into()],
        on_boot: Some(true),
        startup: Some("order=2,up=30".into()),
        boot_order: Some("order=scsi0;net0".into()),
        network: Some(NetworkSpec {
            network_devices: vec![
                NetworkDevice {
                    name: "net0".into(),
                    vlan: Some(112),
                    mtu: Some(1),
                    ..NetworkDevice::default()
                },
                NetworkDevice {
                    name: "net1".into(),
                    bridge: Some("vmbr1".into()),
                    ..NetworkDevice::default()
                },
            ],
        }),
        disks: Some(Disks {
            boot_volume: Some(SpecDisk {
                disk: "scsi0".into(),
                size_gb: 40,
            }),
            additional_volumes: vec![AdditionalVolume {
                disk: "scsi1".into(),
                size_gb: 50,
                discard: Some(true),
                ssd: Some(true),
                iothread: Some(true),
                ..AdditionalVolume::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    }
}

#[test]
fn one_write_with_everything_then_nothing() {
    let c = clone_config();
    let d = desired(
        &full_spec(),
        "m1",
        &marker(),
        InstanceDefaults {
            bridge: Some("vmbr9"),
            cpu: None,
            media: None,
            arch: None,
            pci_mappings: None,
        },
    )
    .unwrap();
    let iso = "cephfs:iso/capmox-131-3f2a9c1e.iso";
    let slot = iso_slot(&c, iso, IDE_SATA).unwrap();
    assert_eq!(slot.to_string(), "ide0");
    let u = update(&d, &c, &marker(), Some((slot, iso))).unwrap();
    let got: BTreeMap<&str, &str> = u
        .changes()
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let want: BTreeMap<&str, &str> = [
        ("sockets", "2"),
        ("cores", "4"),
        ("memory", "8192"),
        // The existing MAC is kept; spec bridge absent → instance bridge for net0.
        (
            "net0",
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr9,mtu=1,tag=112",
        ),
        // A NIC the template lacks gets a stable generated MAC (FNV-1a
        // of the UID and index 1, computed by hand: 02:16:20:6C:85:85).
        ("net1", "virtio=02:16:20:6C:85:85,bridge=vmbr1"),
        (
            "tags",
            "capmox;ubuntu-24.04;k8s-wl1;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
        ),
        ("onboot", "1"),
        ("startup", "order=2,up=30"),
        ("boot", "order=scsi0;net0"),
        ("scsi1", "ceph:50,discard=on,iothread=1,ssd=1"),
        ("ide0", "cephfs:iso/capmox-131-3f2a9c1e.iso,media=cdrom"),
        ("digest", "0123456789abcdef0123456789abcdef01234567"),
    ]
    .into_iter()
    .filter(|(k, _)| *k != "digest")
    .collect();
    assert_eq!(got, want);
    assert!(u.deletions().is_empty());
    // EFI disk, smbios1, scsi0 untouched.
    for k in [
        "efidisk0",
        "smbios1",
        "scsi0",
        "name",
        "description",
        "agent",
    ] {
        assert!(!u.changes().contains_key(k), "{k} must not be written");
    }
    // Re-running against the result changes nothing — also against the
    // memo's own view of the result.
    let memo = apply_update(&c, &u);
    let again = update(
        &d,
        &memo,
        &marker(),
        Some((iso_slot(&memo, iso, IDE_SATA).unwrap(), iso)),
    )
    .unwrap();
    assert!(again.is_empty(), "{:?}", again.changes());
    assert_eq!(
        memo.disks[&DiskSlot::parse("scsi1").unwrap()].size,
        Some(pve_client::options::DiskSize::from_gib(50))
    );
    assert_eq!(
        nic_macs(&d, &memo, &marker())
            .unwrap()
            .iter()
            .map(|(i, m)| (*i, m.to_string()))
            .collect::<Vec<_>>(),
        vec![
            (0, "BC:24:11:AA:BB:CC".to_string()),
            (1, "02:16:20:6C:85:85".to_string())
        ]
    );
    let after = apply(&c, &u);
    let again = update(
        &d,
        &after,
        &marker(),
        Some((iso_slot(&after, iso, IDE_SATA).unwrap(), iso)),
    )
    .unwrap();
    assert!(again.is_empty(), "{:?}", again.changes());
}

#[test]
fn spec_mac_and_foreign_marker_tags() {
    let mut c = clone_config();
    let mut map = c.raw.clone();
    map.insert(
        "tags".into(),
        Value::String("capmox;capmox-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee".into()),
    );
    c = VmConfig::from_map(map).unwrap();
    let spec = ProxmoxMachineSpec {
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net0".into(),
                mac_address: Some("02:00:00:00:00:01".into()),
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    let d = desired(&spec, "m1", &marker(), InstanceDefaults::default()).unwrap();
    let u = update(&d, &c, &marker(), None).unwrap();
    assert_eq!(u.changes()["net0"], "virtio=02:00:00:00:00:01,bridge=vmbr0");
    // The other machine's marker (inherited from the template) is dropped.
    assert_eq!(
        u.changes()["tags"],
        "capmox;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
    );
}

#[test]
fn agent_and_description_are_ensured() {
    let mut map = clone_config().raw;
    map.remove("agent");
    map.insert("description".into(), Value::String("hand-made".into()));
    let c = VmConfig::from_map(map).unwrap();
    let mut spec = ProxmoxMachineSpec::default();
    let d = desired(&spec, "m1", &marker(), InstanceDefaults::default()).unwrap();
    let u = update(&d, &c, &marker(), None).unwrap();
    assert_eq!(u.changes()["agent"], "1");
    assert_eq!(
        u.changes()["description"],
        "capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
    );
    spec.checks = Some(Checks {
        skip_qemu_guest_agent: Some(true),
        skip_cloud_init_status: None,
    });
    let d = desired(&spec, "m1", &marker(), InstanceDefaults::default()).unwrap();
    assert!(
        !update(&d, &c, &marker(), None)
            .unwrap()
            .changes()
            .contains_key("agent")
    );
}

#[test]
fn nic_without_bridge_is_refused() {
    let spec = ProxmoxMachineSpec {
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net2".into(),
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    let d = desired(&spec, "m1", &marker(), InstanceDefaults::default()).unwrap();
    assert_eq!(
        update(&d, &clone_config(), &marker(), None)
            .unwrap_err()
            .to_string(),
        "net2 has no bridge: set networkDevices[].bridge (or the instance's network.bridge)"
    );
}

#[test]
fn iso_slots_and_eject() {
    let mut map = clone_config().raw;
    map.insert(
        "ide0".into(),
        Value::String("local:iso/other.iso,media=cdrom".into()),
    );
    map.insert("ide1".into(), Value::String("none,media=cdrom".into()));
    map.insert(
        "ide2".into(),
        Value::String("ceph:vm-131-cloudinit,media=cdrom".into()),
    );
    let c = VmConfig::from_map(map.clone()).unwrap();
    // ide0 holds another ISO, ide1 is an empty drive: reuse it.
    assert_eq!(
        iso_slot(&c, "cephfs:iso/x.iso", IDE_SATA)
            .unwrap()
            .to_string(),
        "ide1"
    );
    map.insert(
        "ide1".into(),
        Value::String("cephfs:iso/x.iso,media=cdrom".into()),
    );
    let c = VmConfig::from_map(map).unwrap();
    assert_eq!(
        iso_slot(&c, "cephfs:iso/x.iso", IDE_SATA)
            .unwrap()
            .to_string(),
        "ide1"
    );
    // SCSI (aarch64's default, or asked for): scsi0 is the boot disk.
    assert_eq!(
        iso_slot(&c, "cephfs:iso/z.iso", &[DiskBus::Scsi])
            .unwrap()
            .to_string(),
        "scsi1"
    );
    let e = eject(&c, "cephfs:iso/x.iso").unwrap();
    assert_eq!(e.changes()["ide1"], "none,media=cdrom");
    assert!(eject(&c, "cephfs:iso/y.iso").is_none());
    assert_eq!(
        boot_slot(
            &desired(
                &ProxmoxMachineSpec::default(),
                "m1",
                &marker(),
                InstanceDefaults::default()
            )
            .unwrap(),
            &c
        )
        .unwrap()
        .to_string(),
        "scsi0"
    );
}

#[test]
fn cpu_from_machine_then_instance_else_the_templates() {
    let mut c = clone_config();
    c = apply(
        &c,
        &ConfigUpdate::new().set("cpu", "kvm64,flags=+pcid,hidden=1"),
    );
    // Neither machine nor instance sets it: the template's stays.
    let d = desired(
        &ProxmoxMachineSpec::default(),
        "m1",
        &marker(),
        InstanceDefaults::default(),
    )
    .unwrap();
    assert!(
        !update(&d, &c, &marker(), None)
            .unwrap()
            .changes()
            .contains_key("cpu")
    );
    // The instance's model, the machine's flags; `hidden` stays.
    let inst = CpuSpec {
        type_: Some("x86-64-v2-AES".into()),
        flags: vec!["+md-clear".into()],
    };
    let spec = ProxmoxMachineSpec {
        cpu: Some(CpuSpec {
            type_: None,
            flags: vec!["+aes".into(), "-pcid".into()],
        }),
        ..ProxmoxMachineSpec::default()
    };
    let defaults = InstanceDefaults {
        bridge: None,
        cpu: Some(&inst),
        media: None,
        arch: None,
        pci_mappings: None,
    };
    let d = desired(&spec, "m1", &marker(), defaults).unwrap();
    let u = update(&d, &c, &marker(), None).unwrap();
    assert_eq!(
        u.changes().get("cpu").map(String::as_str),
        Some("x86-64-v2-AES,flags=+aes;-pcid,hidden=1")
    );
    let after = apply(&c, &u);
    assert!(
        !update(&d, &after, &marker(), None)
            .unwrap()
            .changes()
            .contains_key("cpu")
    );
}

/// The templates render `cpu: {}`, `bootstrapMedia: {}` and
/// `pciDevices: []` for clusterctl variables that are not set
/// (docs/templates.md): each must mean "not set", so the instance's
/// defaults apply and otherwise the template VM's values stay.
#[test]
fn empty_shape_values_from_the_templates_are_unset() {
    let spec: ProxmoxMachineSpec = serde_json::from_value(serde_json::json!({
        "cpu": {}, "bootstrapMedia": {}, "pciDevices": []
    }))
    .unwrap();
    // Without instance defaults: no cpu and no hostpci written over the
    // template's, no storage or bus chosen.
    let mut c = clone_config();
    c = apply(
        &c,
        &ConfigUpdate::new()
            .set("cpu", "kvm64,flags=+pcid")
            .set("hostpci0", "mapping=gpu"),
    );
    let d = desired(&spec, "m1", &marker(), InstanceDefaults::default()).unwrap();
    assert_eq!(d.cpu, None);
    assert!(d.hostpci.is_empty());
    assert_eq!((d.media_storage.clone(), d.cdrom_bus), (None, None));
    let u = update(&d, &c, &marker(), None).unwrap();
    assert!(
        !u.changes()
            .keys()
            .chain(u.deletions())
            .any(|k| k == "cpu" || k.starts_with("hostpci")),
        "{u:?}"
    );
    // With instance defaults: the instance's values, as if the machine
    // said nothing.
    let inst_cpu = CpuSpec {
        type_: Some("host".into()),
        flags: vec!["+aes".into()],
    };
    let inst_media = crate::api::machine::BootstrapMediaSpec {
        storage: Some("nfs-iso".into()),
        cdrom_bus: Some(crate::api::machine::CdromBus::Sata),
    };
    let defaults = InstanceDefaults {
        cpu: Some(&inst_cpu),
        media: Some(&inst_media),
        ..InstanceDefaults::default()
    };
    let d = desired(&spec, "m1", &marker(), defaults).unwrap();
    let cpu = d.cpu.clone().unwrap();
    assert_eq!(cpu.model.as_deref(), Some("host"));
    assert_eq!(
        cpu.flags
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["+aes"]
    );
    assert_eq!(d.media_storage.as_deref(), Some("nfs-iso"));
    assert_eq!(d.cdrom_bus, Some(crate::api::machine::CdromBus::Sata));
}

#[test]
fn pci_devices_by_mapping_with_instance_renames() {
    use crate::api::machine::PciDeviceSpec;
    let spec = ProxmoxMachineSpec {
        pci_devices: vec![
            PciDeviceSpec {
                mapping: "gpu".into(),
                pcie: Some(true),
                rombar: Some(false),
                primary_gpu: Some(true),
                mdev: None,
            },
            PciDeviceSpec {
                mapping: "vgpu".into(),
                mdev: Some("nvidia-63".into()),
                ..PciDeviceSpec::default()
            },
        ],
        ..ProxmoxMachineSpec::default()
    };
    let renames: BTreeMap<String, String> = [("gpu".into(), "nvidia-a100".into())].into();
    let defaults = InstanceDefaults {
        bridge: Some("vmbr0"),
        pci_mappings: Some(&renames),
        ..InstanceDefaults::default()
    };
    let d = desired(&spec, "m1", &marker(), defaults).unwrap();
    let c = clone_config();
    let u = update(&d, &c, &marker(), None).unwrap();
    let ch = u.changes();
    assert_eq!(
        ch.get("hostpci0").map(String::as_str),
        Some("mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1")
    );
    assert_eq!(
        ch.get("hostpci1").map(String::as_str),
        Some("mapping=vgpu,mdev=nvidia-63")
    );
    // Written once: a VM that has them gets no change.
    let mut have = clone_config();
    for (k, v) in [
        (0, "mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1"),
        (1, "mapping=vgpu,mdev=nvidia-63"),
    ] {
        have.hostpcis
            .insert(k, pve_client::options::HostPci::parse(v).unwrap());
    }
    let u = update(&d, &have, &marker(), None).unwrap();
    assert!(!u.changes().contains_key("hostpci0") && !u.changes().contains_key("hostpci1"));
    // A machine without pciDevices leaves the template's hostpci alone.
    let plain = desired(&ProxmoxMachineSpec::default(), "m1", &marker(), defaults).unwrap();
    assert!(plain.hostpci.is_empty());
    assert!(
        !update(&plain, &have, &marker(), None)
            .unwrap()
            .changes()
            .keys()
            .any(|k| k.starts_with("hostpci"))
    );
}
