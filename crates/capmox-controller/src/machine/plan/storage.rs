//! Which storages a new VM needs on the node it is cloned to
//! (docs/field-cases.md B37): the scheduler's storage filter
//! ([`super::scheduler`]) keeps only the nodes where each of them is enabled
//! and active.
//!
//! - **Clone target**: a full clone with `spec.storage` puts every disk of
//!   the template there; otherwise (a full clone without `storage`, or a
//!   linked clone) each disk stays on its template disk's storage, and so
//!   do the EFI disk, the TPM state and a cloud-init drive
//!   (`POST /nodes/{node}/qemu/{vmid}/clone`, docs/proxmox-semantics.md §8).
//! - **Additional volumes**: their `storage`, else the boot disk's storage
//!   after the clone (as the config write allocates them,
//!   `machine/vm/vmconfig/update.rs`).
//! - **ISO storage**: a storage with content `iso` on the node, for the
//!   bootstrap ISO (`machine/steps/media.rs` picks one there).

use std::collections::BTreeMap;

use crate::api::machine::ProxmoxMachineSpec;
use crate::pve::VmConfig;

/// One storage the VM needs, and what for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Need {
    /// Storage id.
    pub storage: String,
    /// What needs it, for messages (`template 9000 scsi0`,
    /// `spec.storage (clone target)`, `disks.additionalVolumes[0] (scsi1)`),
    /// joined with `, ` when several things need one storage.
    pub needed_by: String,
}

/// What the VM needs on its node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageNeeds {
    /// Named storages, sorted by id, each once.
    pub named: Vec<Need>,
    /// A storage with content `iso` (the bootstrap ISO).
    pub iso: bool,
}

impl StorageNeeds {
    /// Whether nothing is needed.
    pub fn is_empty(&self) -> bool {
        self.named.is_empty() && !self.iso
    }
}

/// The storages a machine with `spec`, cloned from the template `tpl_vmid`
/// whose config is `template`, needs on its node. Pure.
pub fn needs(spec: &ProxmoxMachineSpec, tpl_vmid: u32, template: &VmConfig) -> StorageNeeds {
    let mut by_storage: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut add = |storage: &str, what: String| {
        by_storage
            .entry(storage.to_string())
            .or_default()
            .push(what);
    };
    let full = spec.full.unwrap_or(true);
    let target = spec.storage.as_deref().filter(|_| full);
    let mut template_disks: Vec<(String, &str)> = template
        .disks
        .iter()
        .filter(|(_, d)| !d.is_cdrom() || d.is_cloudinit())
        .filter_map(|(slot, d)| Some((slot.to_string(), d.storage()?)))
        .collect();
    for (key, d) in [
        ("efidisk0", &template.efidisk0),
        ("tpmstate0", &template.tpmstate0),
    ] {
        if let Some(s) = d.as_ref().and_then(|d| d.storage()) {
            template_disks.push((key.to_string(), s));
        }
    }
    match target {
        Some(t) if !template_disks.is_empty() => add(t, "spec.storage (clone target)".into()),
        _ => {
            for (slot, s) in &template_disks {
                add(s, format!("template {tpl_vmid} {slot}"));
            }
        }
    }
    let boot = boot_storage(spec, template).map(|s| target.unwrap_or(s).to_string());
    if let Some(disks) = &spec.disks {
        for (i, v) in disks.additional_volumes.iter().enumerate() {
            if let Some(s) = v.storage.as_deref().or(boot.as_deref()) {
                add(s, format!("disks.additionalVolumes[{i}] ({})", v.disk));
            }
        }
    }
    StorageNeeds {
        named: by_storage
            .into_iter()
            .map(|(storage, what)| Need {
                storage,
                needed_by: what.join(", "),
            })
            .collect(),
        iso: true,
    }
}

/// The template's boot disk storage: `disks.bootVolume.disk` if the
/// template has it, else its first disk of `scsi0`, `virtio0`, `sata0`,
/// `ide0` that is not a CD-ROM.
fn boot_storage<'a>(spec: &ProxmoxMachineSpec, template: &'a VmConfig) -> Option<&'a str> {
    let named = spec
        .disks
        .as_ref()
        .and_then(|d| d.boot_volume.as_ref())
        .map(|b| b.disk.as_str());
    named
        .into_iter()
        .chain(["scsi0", "virtio0", "sata0", "ide0"])
        .find_map(|slot| {
            template
                .disks
                .iter()
                .find(|(s, d)| s.to_string() == slot && !d.is_cdrom())
                .and_then(|(_, d)| d.storage())
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine::{AdditionalVolume, DiskSize, Disks};

    fn template() -> VmConfig {
        let map = [
            ("scsi0", "local-lvm:base-9000-disk-0,size=20G"),
            ("efidisk0", "ceph:base-9000-disk-1,size=528K"),
            ("ide2", "local-lvm:vm-9000-cloudinit,media=cdrom"),
            ("ide0", "cephfs:iso/ubuntu.iso,media=cdrom"),
            ("template", "1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
        .collect();
        VmConfig::from_map(map).unwrap()
    }

    fn named(n: &StorageNeeds) -> Vec<(&str, &str)> {
        n.named
            .iter()
            .map(|n| (n.storage.as_str(), n.needed_by.as_str()))
            .collect()
    }

    #[test]
    fn template_disks_stay_on_their_storages_without_a_target() {
        let n = needs(&ProxmoxMachineSpec::default(), 9000, &template());
        assert_eq!(
            named(&n),
            [
                ("ceph", "template 9000 efidisk0"),
                ("local-lvm", "template 9000 ide2, template 9000 scsi0"),
            ],
            "an ISO CD-ROM is not copied; the cloud-init drive is"
        );
        assert!(n.iso);
    }

    #[test]
    fn a_full_clone_target_takes_every_disk_and_volumes_follow_the_boot_disk() {
        let spec = ProxmoxMachineSpec {
            storage: Some("fast-a".into()),
            disks: Some(Disks {
                boot_volume: Some(DiskSize {
                    disk: "scsi0".into(),
                    size_gb: 40,
                }),
                additional_volumes: vec![
                    AdditionalVolume {
                        disk: "scsi1".into(),
                        size_gb: 10,
                        ..AdditionalVolume::default()
                    },
                    AdditionalVolume {
                        disk: "scsi2".into(),
                        size_gb: 10,
                        storage: Some("ceph".into()),
                        ..AdditionalVolume::default()
                    },
                ],
            }),
            ..ProxmoxMachineSpec::default()
        };
        assert_eq!(
            named(&needs(&spec, 9000, &template())),
            [
                ("ceph", "disks.additionalVolumes[1] (scsi2)"),
                (
                    "fast-a",
                    "spec.storage (clone target), disks.additionalVolumes[0] (scsi1)"
                ),
            ]
        );
        // A linked clone ignores spec.storage (Proxmox refuses it; validation
        // says so): the disks stay on the template's storages.
        let linked = ProxmoxMachineSpec {
            full: Some(false),
            ..spec
        };
        let n = needs(&linked, 9000, &template());
        assert_eq!(n.named[1].storage, "local-lvm");
        assert!(
            n.named[1]
                .needed_by
                .contains("disks.additionalVolumes[0] (scsi1)")
        );
    }
}
