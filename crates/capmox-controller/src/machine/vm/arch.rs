//! What a VM of each architecture can be, and what it gets
//! (docs/vm-shapes.md, "Architecture").
//!
//! Rules (`arch`, `bios`, `machine`, `efidisk0` of
//! `/nodes/{node}/qemu/{vmid}/config`; [`pve_client::options::Arch`]):
//! - The VM's architecture is the template's `arch` ▸ the instance's
//!   `arch` ▸ `x86_64` (Proxmox's default is the node's own architecture;
//!   a template without `arch` on an aarch64 cluster is why the instance can
//!   say it). A template whose `arch` differs from its instance's is
//!   refused. `arch` itself is never written (Proxmox lets only `root@pam`
//!   set it): the clone keeps the template's.
//! - Before the clone, the machine's shape is checked against the
//!   architecture, the field named: `bootstrapMedia.cdromBus: ide` has no
//!   bus on aarch64; a CPU model built for one architecture
//!   (`x86-64-v3`, `EPYC-Rome`, …) does not run on the other (`host`,
//!   `max` and `custom-<name>` do); the template's `machine` type must be
//!   one of the architecture's (`virt` on aarch64; `pc`/`q35` on x86_64).
//! - An aarch64 VM boots OVMF (UEFI) only, on the `virt` machine type, and
//!   OVMF keeps its variables on an EFI disk: the config write sets
//!   `bios: ovmf` and `machine: virt` when the clone lacks them, and adds
//!   `efidisk0` on the boot disk's storage when it has none.

use pve_client::options::{Arch, Disk, DiskSlot, Firmware, MachineType, cpu_model_kind};

use super::media;
use super::vmconfig::Desired;
use crate::pve::VmConfig;

/// Why a machine cannot be made on its architecture.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArchError {
    /// The template's `arch` differs from the instance's `arch`.
    #[error(
        "spec.settings.instances[{instance}].arch is {instance_arch} but template {template} has arch {template_arch}: make them agree"
    )]
    Conflict {
        /// The instance name.
        instance: String,
        /// The instance's `arch`.
        instance_arch: Arch,
        /// The template VMID.
        template: u32,
        /// The template's `arch`.
        template_arch: Arch,
    },
    /// A field of the machine (or its instance default) the architecture
    /// cannot have.
    #[error("{field}: {why}")]
    Field {
        /// The field (`bootstrapMedia.cdromBus`, `cpu.type`).
        field: &'static str,
        /// Why, with the value and the architecture.
        why: String,
    },
    /// The template's `machine` type is not one of the architecture's.
    #[error(
        "template {template} has machine type {machine}, which a VM of architecture {arch} cannot use: pick a template built for {arch}"
    )]
    MachineType {
        /// The template VMID.
        template: u32,
        /// Its `machine`.
        machine: String,
        /// The architecture.
        arch: Arch,
    },
}

/// The architecture of a VM whose config says `config` in an instance
/// whose `arch` is `instance`, without the conflict check (made before the
/// clone by [`check`]): the config's ▸ the instance's ▸ `x86_64`.
pub fn effective(config: Option<Arch>, instance: Option<Arch>) -> Arch {
    config.or(instance).unwrap_or(Arch::X86_64)
}

/// The architecture of a VM whose config (the template's, or the clone's)
/// says `config`, in an instance whose `arch` is `instance`.
///
/// # Errors
/// [`ArchError::Conflict`] when both are set and differ.
pub fn vm_arch(
    config: Option<Arch>,
    instance: Option<Arch>,
    instance_name: &str,
    template: u32,
) -> Result<Arch, ArchError> {
    match (config, instance) {
        (Some(t), Some(i)) if t != i => Err(ArchError::Conflict {
            instance: instance_name.to_string(),
            instance_arch: i,
            template,
            template_arch: t,
        }),
        _ => Ok(effective(config, instance)),
    }
}

/// Checks, before the clone, that what `desired` asks fits a VM of
/// `template`'s architecture; returns that architecture.
///
/// # Errors
/// [`ArchError`] naming the first field that does not fit.
pub fn check(
    desired: &Desired,
    template: &VmConfig,
    template_vmid: u32,
    instance_name: &str,
) -> Result<Arch, ArchError> {
    let arch = vm_arch(template.arch, desired.arch, instance_name, template_vmid)?;
    media::cdrom_buses(desired.cdrom_bus, arch).map_err(|why| ArchError::Field {
        field: "bootstrapMedia.cdromBus",
        why,
    })?;
    if let Some(model) = desired.cpu.as_ref().and_then(|c| c.model.as_deref())
        && let Ok(kind) = cpu_model_kind(model)
        && !kind.fits(arch)
    {
        return Err(ArchError::Field {
            field: "cpu.type",
            why: format!(
                "CPU model {model} is for {} and does not run on a VM of architecture {arch}; use host, max or a custom-<name> model",
                kind.arch()
                    .map(Arch::as_str)
                    .unwrap_or("another architecture")
            ),
        });
    }
    if let Some(m) = &template.machine
        && !arch.allows_machine(m)
    {
        return Err(ArchError::MachineType {
            template: template_vmid,
            machine: m.to_string(),
            arch,
        });
    }
    Ok(arch)
}

/// What the firmware keys of a VM of architecture `arch` must become.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FirmwareChange {
    /// `bios` to write.
    pub bios: Option<Firmware>,
    /// `machine` to write.
    pub machine: Option<MachineType>,
    /// `efidisk0` to allocate (`<storage>:1`).
    pub efidisk: Option<Disk>,
}

impl FirmwareChange {
    /// Nothing to write.
    pub fn is_empty(&self) -> bool {
        self.bios.is_none() && self.machine.is_none() && self.efidisk.is_none()
    }
}

/// The firmware keys to write so `config` (a VM of `arch`) can boot: on
/// aarch64 `bios: ovmf`, `machine: virt` and an EFI disk on the storage of
/// the boot disk (`boot_disk`, else the first disk that is not a CD-ROM);
/// nothing on x86_64.
///
/// # Errors
/// A message when an EFI disk is needed and the VM has no disk whose
/// storage it could go on.
pub fn firmware(
    arch: Arch,
    config: &VmConfig,
    boot_disk: Option<DiskSlot>,
) -> Result<FirmwareChange, String> {
    let mut change = FirmwareChange::default();
    if let Some(fw) = arch.required_firmware()
        && config.bios != Some(fw)
    {
        change.bios = Some(fw);
    }
    if let Some(m) = arch.default_machine()
        && !config
            .machine
            .as_ref()
            .is_some_and(|have| arch.allows_machine(have))
    {
        change.machine = Some(m);
    }
    if arch.required_firmware() == Some(Firmware::Ovmf) && config.efidisk0.is_none() {
        let boot = boot_disk
            .and_then(|s| config.disks.get(&s))
            .or_else(|| config.disks.values().find(|d| !d.is_cdrom()));
        let Some(storage) = boot.and_then(|d| d.storage()) else {
            return Err(format!(
                "a VM of architecture {arch} needs an EFI disk (efidisk0) and this one has no disk to put it beside"
            ));
        };
        change.efidisk = Some(Disk::new_volume(storage, 1));
    }
    Ok(change)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine::CdromBus;
    use crate::machine::vm::vmconfig::DesiredCpu;
    use std::collections::BTreeMap;

    fn config(pairs: &[(&str, &str)]) -> VmConfig {
        let map: BTreeMap<String, serde_json::Value> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::String(v.to_string())))
            .collect();
        VmConfig::from_map(map).unwrap()
    }

    fn desired() -> Desired {
        let marker = crate::machine::vm::marker::Marker::new("wl1", "m1", "uid-1");
        crate::machine::vm::vmconfig::desired(
            &crate::api::machine::ProxmoxMachineSpec::default(),
            "m1",
            &marker,
            crate::machine::vm::vmconfig::InstanceDefaults::default(),
        )
        .unwrap()
    }

    #[test]
    fn the_template_names_it_else_the_instance_else_x86() {
        assert_eq!(vm_arch(None, None, "a", 9000).unwrap(), Arch::X86_64);
        assert_eq!(
            vm_arch(None, Some(Arch::Aarch64), "a", 9000).unwrap(),
            Arch::Aarch64
        );
        assert_eq!(
            vm_arch(Some(Arch::Aarch64), None, "a", 9000).unwrap(),
            Arch::Aarch64
        );
        let e = vm_arch(Some(Arch::X86_64), Some(Arch::Aarch64), "dc-b", 9000).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("spec.settings.instances[dc-b].arch is aarch64"),
            "{e}"
        );
    }

    #[test]
    fn shapes_an_aarch64_vm_cannot_have_are_refused_with_the_field() {
        let arm = config(&[("arch", "aarch64"), ("scsi0", "local-lvm:base-9000-disk-0")]);
        let mut d = desired();
        assert_eq!(check(&d, &arm, 9000, "a").unwrap(), Arch::Aarch64);
        d.cdrom_bus = Some(CdromBus::Ide);
        assert!(matches!(
            check(&d, &arm, 9000, "a"),
            Err(ArchError::Field {
                field: "bootstrapMedia.cdromBus",
                ..
            })
        ));
        d.cdrom_bus = Some(CdromBus::Scsi);
        for (model, ok) in [
            ("x86-64-v3", false),
            ("EPYC-Rome", false),
            ("host", true),
            ("max", true),
            ("custom-neoverse", true),
        ] {
            d.cpu = Some(DesiredCpu {
                model: Some(model.into()),
                flags: None,
            });
            let r = check(&d, &arm, 9000, "a");
            assert_eq!(r.is_ok(), ok, "{model}: {r:?}");
            if !ok {
                assert!(matches!(
                    r,
                    Err(ArchError::Field {
                        field: "cpu.type",
                        ..
                    })
                ));
            }
        }
        // The same CPU model is fine on x86_64.
        d.cpu = Some(DesiredCpu {
            model: Some("x86-64-v3".into()),
            flags: None,
        });
        assert_eq!(check(&d, &config(&[]), 9000, "a").unwrap(), Arch::X86_64);
        // A q35 template on an aarch64 instance.
        d.cpu = None;
        d.arch = Some(Arch::Aarch64);
        let q35 = config(&[("machine", "q35")]);
        assert!(matches!(
            check(&d, &q35, 9000, "a"),
            Err(ArchError::MachineType { template: 9000, .. })
        ));
        // And virt on x86_64.
        d.arch = None;
        assert!(check(&d, &config(&[("machine", "virt")]), 9000, "a").is_err());
    }

    #[test]
    fn aarch64_gets_ovmf_virt_and_an_efi_disk_beside_its_boot_disk() {
        let bare = config(&[
            ("ide2", "local:iso/x.iso,media=cdrom"),
            ("scsi0", "ceph:vm-101-disk-0,size=20G"),
            ("virtio1", "local-lvm:vm-101-disk-1"),
        ]);
        let c = firmware(Arch::Aarch64, &bare, None).unwrap();
        assert_eq!(c.bios, Some(Firmware::Ovmf));
        assert_eq!(
            c.machine.as_ref().map(ToString::to_string).as_deref(),
            Some("virt")
        );
        assert_eq!(c.efidisk.unwrap().to_string(), "ceph:1");
        let c = firmware(
            Arch::Aarch64,
            &bare,
            Some(DiskSlot::parse("virtio1").unwrap()),
        )
        .unwrap();
        assert_eq!(c.efidisk.unwrap().to_string(), "local-lvm:1");
        let ready = config(&[
            ("bios", "ovmf"),
            ("machine", "virt-9.0"),
            ("efidisk0", "ceph:vm-101-disk-2,size=64M"),
            ("scsi0", "ceph:vm-101-disk-0"),
        ]);
        assert!(firmware(Arch::Aarch64, &ready, None).unwrap().is_empty());
        assert!(firmware(Arch::X86_64, &bare, None).unwrap().is_empty());
        assert!(firmware(Arch::Aarch64, &config(&[]), None).is_err());
    }
}
