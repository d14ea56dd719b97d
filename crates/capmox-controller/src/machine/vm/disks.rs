//! Disk growth: never destroy data to converge (a disk only grows; a smaller
//! request is refused, docs/field-cases.md B08).
//!
//! The boot volume (`disks.bootVolume`) and existing additional volumes are
//! grown to their requested size with an **absolute** size
//! (`PUT …/resize size=40G`, never `+8G`: a relative resize repeated after a
//! timeout would grow twice; docs/field-cases.md B08). A smaller request is an error,
//! an equal one does nothing. EFI disks, TPM state and cloud-init drives are
//! never resized (docs/field-cases.md B10): they are separate config keys
//! (`efidisk0`, `tpmstate0`) or CD-ROMs, and a spec naming a CD-ROM slot is
//! refused. Additional volumes that do not exist yet are created by the
//! config write ([`super::vmconfig`]), not here.

use pve_client::options::{DiskSize, DiskSlot};

use crate::api::machine::Disks;
use crate::pve::VmConfig;

/// One resize call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resize {
    /// The slot.
    pub slot: DiskSlot,
    /// The absolute new size.
    pub size: DiskSize,
}

/// Why the disks cannot be brought to the spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiskError {
    /// The spec names a slot that is not a disk slot.
    #[error("{0} is not a disk slot")]
    BadSlot(String),
    /// The boot volume slot does not exist in the VM.
    #[error("disk {slot} not present in the VM (the template has no such disk)")]
    Missing {
        /// The slot.
        slot: String,
    },
    /// The slot holds a CD-ROM or the cloud-init drive.
    #[error("{slot} is a CD-ROM or cloud-init drive and cannot be resized")]
    NotADisk {
        /// The slot.
        slot: String,
    },
    /// The request is smaller than the disk.
    #[error("cannot shrink {slot} from {current} to {requested}")]
    Shrink {
        /// The slot.
        slot: String,
        /// Current size (`32GiB`).
        current: String,
        /// Requested size (`20GiB`).
        requested: String,
    },
}

fn gib_text(size: DiskSize) -> String {
    let s = size.to_string();
    match s.strip_suffix(['K', 'M', 'G', 'T']) {
        Some(_) => format!("{s}iB"),
        None => format!("{s} bytes"),
    }
}

/// The resizes needed to bring the VM's disks to the spec, in slot order.
/// Empty when everything has its size already (so a re-run changes nothing).
///
/// # Errors
/// [`DiskError`] for a missing boot disk, a CD-ROM slot, or a shrink.
pub fn plan(spec: Option<&Disks>, observed: &VmConfig) -> Result<Vec<Resize>, DiskError> {
    let Some(disks) = spec else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    let mut check = |slot_name: &str, size_gb: u32, required: bool| -> Result<(), DiskError> {
        let slot =
            DiskSlot::parse(slot_name).map_err(|_| DiskError::BadSlot(slot_name.to_string()))?;
        let Some(disk) = observed.disks.get(&slot) else {
            if required {
                return Err(DiskError::Missing {
                    slot: slot_name.to_string(),
                });
            }
            return Ok(());
        };
        if disk.is_cdrom() || disk.is_cloudinit() {
            return Err(DiskError::NotADisk {
                slot: slot_name.to_string(),
            });
        }
        let want = DiskSize::from_gib(u64::from(size_gb));
        match disk.size {
            Some(cur) if cur > want => Err(DiskError::Shrink {
                slot: slot_name.to_string(),
                current: gib_text(cur),
                requested: gib_text(want),
            }),
            Some(cur) if cur == want => Ok(()),
            _ => {
                out.push(Resize { slot, size: want });
                Ok(())
            }
        }
    };
    if let Some(b) = &disks.boot_volume {
        check(&b.disk, b.size_gb, true)?;
    }
    for v in &disks.additional_volumes {
        check(&v.disk, v.size_gb, false)?;
    }
    out.sort_by_key(|r| r.slot);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;
    use crate::api::machine::{AdditionalVolume, DiskSize as SpecDisk};

    /// Field case B10's template: EFI, TPM and a 20G boot disk, plus a
    /// cloud-init drive on ide2.
    fn config(scsi0: &str) -> VmConfig {
        let map: BTreeMap<String, Value> = [
            ("bios", "ovmf"),
            (
                "efidisk0",
                "shared-rbd:vm-131-disk-1,efitype=4m,pre-enrolled-keys=1,size=528K",
            ),
            ("tpmstate0", "shared-rbd:vm-131-disk-2,size=4M,version=v2.0"),
            ("scsi0", scsi0),
            ("ide2", "local-lvm:vm-131-cloudinit,media=cdrom"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
        VmConfig::from_map(map).unwrap()
    }

    fn boot(disk: &str, gb: u32) -> Disks {
        Disks {
            boot_volume: Some(SpecDisk {
                disk: disk.into(),
                size_gb: gb,
            }),
            additional_volumes: Vec::new(),
        }
    }

    #[test]
    fn b08_grow_equal_shrink() {
        let c = config("shared-rbd:vm-131-disk-0,size=32G");
        assert_eq!(
            plan(Some(&boot("scsi0", 40)), &c).unwrap(),
            vec![Resize {
                slot: DiskSlot::parse("scsi0").unwrap(),
                size: DiskSize::from_gib(40)
            }]
        );
        // The size sent is absolute.
        assert_eq!(DiskSize::from_gib(40).to_string(), "40G");
        assert_eq!(plan(Some(&boot("scsi0", 32)), &c).unwrap(), vec![]);
        assert_eq!(
            plan(Some(&boot("scsi0", 20)), &c).unwrap_err().to_string(),
            "cannot shrink scsi0 from 32GiB to 20GiB"
        );
        assert_eq!(
            plan(Some(&boot("scsi1", 20)), &c).unwrap_err().to_string(),
            "disk scsi1 not present in the VM (the template has no such disk)"
        );
    }

    #[test]
    fn b10_efi_tpm_and_cloudinit_are_never_resized() {
        let c = config("shared-rbd:vm-131-disk-0,size=20G");
        // Only scsi0 is touched; 528K and 4M sizes parse.
        assert_eq!(
            c.efidisk0.as_ref().unwrap().size,
            Some(DiskSize::from_bytes(528 * 1024))
        );
        assert_eq!(
            c.tpmstate0.as_ref().unwrap().size,
            Some(DiskSize::from_mib(4))
        );
        let p = plan(Some(&boot("scsi0", 40)), &c).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].slot.to_string(), "scsi0");
        assert_eq!(
            plan(Some(&boot("ide2", 40)), &c).unwrap_err(),
            DiskError::NotADisk {
                slot: "ide2".into()
            }
        );
    }

    #[test]
    fn additional_volumes_grow_once_they_exist() {
        let mut c = config("shared-rbd:vm-131-disk-0,size=20G");
        let disks = Disks {
            boot_volume: None,
            additional_volumes: vec![AdditionalVolume {
                disk: "scsi1".into(),
                size_gb: 50,
                ..AdditionalVolume::default()
            }],
        };
        // Not there yet: the config write creates it at 50G; nothing to resize.
        assert_eq!(plan(Some(&disks), &c).unwrap(), vec![]);
        let mut map = c.raw.clone();
        map.insert(
            "scsi1".into(),
            Value::String("local-lvm:vm-131-disk-3,size=10G".into()),
        );
        c = VmConfig::from_map(map).unwrap();
        assert_eq!(
            plan(Some(&disks), &c).unwrap(),
            vec![Resize {
                slot: DiskSlot::parse("scsi1").unwrap(),
                size: DiskSize::from_gib(50)
            }]
        );
        assert_eq!(plan(None, &c).unwrap(), vec![]);
    }
}
