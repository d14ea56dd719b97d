//! `pciDevices` (machine) and `pciMappings` (instance): PCI devices passed
//! through by Proxmox resource mapping (`hostpci[n]: mapping=<id>` of
//! `/nodes/{node}/qemu/{vmid}/config`; docs/vm-shapes.md "PCI devices").
//! Mapping ids are Proxmox configuration ids (`pve-configid`, the `id` of
//! `/cluster/mapping/pci`), checked by
//! [`pve_client::options::is_config_id`]; the device options as
//! [`pve_client::options::HostPci::validate`] checks them.

use std::collections::{BTreeMap, BTreeSet};

use pve_client::options::{HostPci, MAX_HOSTPCI_INDEX, is_config_id};

use super::FieldError;
use crate::api::machine::PciDeviceSpec;

/// How many devices a VM can have (`hostpci0`..`hostpci15`).
pub const MAX_PCI_DEVICES: usize = MAX_HOSTPCI_INDEX as usize + 1;

const ID_RULE: &str = "is not a Proxmox mapping id: it must start with a letter and contain only letters, digits, '-' and '_'";

/// Problems of `pciDevices` at `path` (`spec.pciDevices`): more than
/// [`MAX_PCI_DEVICES`] entries, a mapping that is not a mapping id, a
/// mapping listed twice, an `mdev` type Proxmox refuses, more than one
/// `primaryGpu`.
pub(crate) fn check_pci_devices(path: &str, devices: &[PciDeviceSpec], errs: &mut Vec<FieldError>) {
    if devices.len() > MAX_PCI_DEVICES {
        errs.push(FieldError::new(
            path,
            format!(
                "{} devices, but a VM has at most {MAX_PCI_DEVICES} (hostpci0..hostpci{MAX_HOSTPCI_INDEX})",
                devices.len()
            ),
        ));
    }
    let mut seen = BTreeSet::new();
    let mut primary = None;
    for (i, d) in devices.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if !is_config_id(&d.mapping) {
            errs.push(FieldError::new(
                format!("{at}.mapping"),
                format!("{:?} {ID_RULE}", d.mapping),
            ));
        } else if !seen.insert(d.mapping.as_str()) {
            errs.push(FieldError::new(
                format!("{at}.mapping"),
                format!(
                    "mapping {:?} is listed twice: list each mapping once",
                    d.mapping
                ),
            ));
        }
        if let Some(t) = &d.mdev {
            let mut probe = HostPci::mapped("m");
            probe.mdev = Some(t.clone());
            if let Err(e) = probe.validate() {
                errs.push(FieldError::new(
                    format!("{at}.mdev"),
                    format!("{t:?}: {}", e.reason),
                ));
            }
        }
        if d.primary_gpu == Some(true) {
            if let Some(first) = primary {
                errs.push(FieldError::new(
                    format!("{at}.primaryGpu"),
                    format!("{path}[{first}] is already the primary GPU: a VM has one"),
                ));
            } else {
                primary = Some(i);
            }
        }
    }
}

/// Problems of an instance's `pciMappings` at `path`: keys and values that
/// are not mapping ids.
pub(crate) fn check_pci_mappings(
    path: &str,
    renames: &BTreeMap<String, String>,
    errs: &mut Vec<FieldError>,
) {
    for (from, to) in renames {
        for (what, id) in [("key", from), ("value", to)] {
            if !is_config_id(id) {
                errs.push(FieldError::new(
                    format!("{path}.{from}"),
                    format!("{what} {id:?} {ID_RULE}"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(m: &str) -> PciDeviceSpec {
        PciDeviceSpec {
            mapping: m.into(),
            ..PciDeviceSpec::default()
        }
    }

    fn check(devices: &[PciDeviceSpec]) -> Vec<(String, String)> {
        let mut errs = Vec::new();
        check_pci_devices("spec.pciDevices", devices, &mut errs);
        errs.into_iter().map(|e| (e.path, e.message)).collect()
    }

    #[test]
    fn devices() {
        let gpu = PciDeviceSpec {
            mapping: "nvidia-a100".into(),
            pcie: Some(true),
            rombar: Some(false),
            primary_gpu: Some(true),
            mdev: None,
        };
        let vgpu = PciDeviceSpec {
            mdev: Some("nvidia-63".into()),
            ..dev("grid_1")
        };
        assert!(check(&[gpu.clone(), vgpu.clone()]).is_empty());
        assert!(check(&[]).is_empty());
        // (devices, the one path refused, a word of its message)
        let cases: Vec<(Vec<PciDeviceSpec>, &str, &str)> = vec![
            (vec![dev("")], "spec.pciDevices[0].mapping", "mapping id"),
            (
                vec![dev("1gpu")],
                "spec.pciDevices[0].mapping",
                "start with a letter",
            ),
            (
                vec![dev("gpu a")],
                "spec.pciDevices[0].mapping",
                "mapping id",
            ),
            (
                vec![dev("gpu"), dev("nic"), dev("gpu")],
                "spec.pciDevices[2].mapping",
                "twice",
            ),
            (
                vec![PciDeviceSpec {
                    mdev: Some("a/b".into()),
                    ..dev("gpu")
                }],
                "spec.pciDevices[0].mdev",
                "must not",
            ),
            (
                vec![
                    gpu.clone(),
                    PciDeviceSpec {
                        mapping: "b".into(),
                        ..gpu
                    },
                ],
                "spec.pciDevices[1].primaryGpu",
                "spec.pciDevices[0]",
            ),
            (
                (0..17).map(|i| dev(&format!("m{i}"))).collect(),
                "spec.pciDevices",
                "at most 16",
            ),
        ];
        for (devices, path, word) in cases {
            let errs = check(&devices);
            assert_eq!(errs.len(), 1, "{errs:?}");
            assert_eq!(errs[0].0, path);
            assert!(errs[0].1.contains(word), "{}", errs[0].1);
        }
        assert!(check(&(0..16).map(|i| dev(&format!("m{i}"))).collect::<Vec<_>>()).is_empty());
    }

    #[test]
    fn renames() {
        let mut errs = Vec::new();
        let r: BTreeMap<String, String> = [
            ("gpu".into(), "nvidia-a100".into()),
            ("nic".into(), "9x".into()),
        ]
        .into();
        check_pci_mappings("spec.settings.instances[0].pciMappings", &r, &mut errs);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec.settings.instances[0].pciMappings.nic");
        assert!(errs[0].message.starts_with("value \"9x\""));
    }
}
