//! Which nodes can give a new VM the PCI devices it asks for
//! (`spec.pciDevices`, docs/vm-shapes.md "PCI devices").
//!
//! Devices are named by Proxmox resource mapping (`GET
//! /cluster/mapping/pci`): a mapping has devices on some nodes
//! ([`crate::pve::PciMapping::devices_per_node`]), and a VM with
//! `hostpci[n]: mapping=<id>` starts only on a node where a device of that
//! mapping is free. The name a machine uses is translated per instance by
//! the instance's `pciMappings` ([`mapping_id`]).
//!
//! A node is a candidate only when, for every mapping the VM needs, the
//! mapping has a device there that is not in use. In use: devices of the
//! same mapping held by this CAPI cluster's machines on that node (their
//! recorded node, `status.proxmoxNode`) and by machines of any cluster whose
//! placement is in flight to that node in this Proxmox cluster
//! ([`crate::machine::runtime::inflight`]) — so two machines never get the
//! same device, without reading any VM's config. VMs this provider does not
//! manage are not seen; when they hold the last device Proxmox refuses the
//! start, which is reported as a start failure.
//!
//! Mediated devices (`mdev`) are shared by several VMs: for them only the
//! mapping's presence on the node is required, not a free device.

use std::collections::BTreeMap;

use pve_client::options::{MachineKind, MachineType};

use crate::api::machine::PciDeviceSpec;

/// A device option the template cannot have (refused before the clone).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {why}")]
pub struct PciUnfit {
    /// The field (`spec.pciDevices[0].pcie`).
    pub field: String,
    /// Why, with the template and its machine type.
    pub why: String,
}

/// `pcie: true` on a template whose machine type is not `q35`: Proxmox
/// accepts `pcie=1` only on q35 (`hostpci[n]` of
/// `/nodes/{node}/qemu/{vmid}/config`), and the controller does not change
/// a VM's chipset (that renumbers the guest's devices), so the machine is
/// refused with the field named. `machine` is the template's (absent:
/// Proxmox's default `pc`, i440fx).
pub fn pcie_unfit(
    devices: &[PciDeviceSpec],
    machine: Option<&MachineType>,
    template_vmid: u32,
) -> Option<PciUnfit> {
    if machine.is_some_and(|m| m.kind() == MachineKind::Q35) {
        return None;
    }
    let i = devices.iter().position(|d| d.pcie == Some(true))?;
    let have = machine.map_or_else(
        || "pc (i440fx, the default)".to_string(),
        ToString::to_string,
    );
    Some(PciUnfit {
        field: format!("spec.pciDevices[{i}].pcie"),
        why: format!(
            "pcie needs the q35 machine type and template {template_vmid} has machine type {have}: use a q35 template or drop pcie"
        ),
    })
}

/// The mapping id a machine's `pciDevices[].mapping` has in an instance:
/// the instance's rename (`instances[].pciMappings`) or the name itself.
pub fn mapping_id<'a>(name: &'a str, renames: &'a BTreeMap<String, String>) -> &'a str {
    renames.get(name).map_or(name, String::as_str)
}

/// One device the VM needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciNeed {
    /// The field asking for it (`spec.pciDevices[0]`).
    pub field: String,
    /// The mapping id in this instance.
    pub mapping: String,
    /// A mediated device: shared, not counted per device.
    pub mediated: bool,
}

/// The devices `devices` asks for, with their mapping ids in the instance
/// of `renames`.
pub fn needs(devices: &[PciDeviceSpec], renames: &BTreeMap<String, String>) -> Vec<PciNeed> {
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| PciNeed {
            field: format!("spec.pciDevices[{i}]"),
            mapping: mapping_id(&d.mapping, renames).to_string(),
            mediated: d.mdev.is_some(),
        })
        .collect()
}

/// Devices held per mapping id and node: `in_use[mapping][node]`.
pub type InUse = BTreeMap<String, BTreeMap<String, u32>>;

/// Adds the whole devices of `needs` (mediated ones are shared and not
/// counted) on `node` to `in_use`.
pub fn hold(in_use: &mut InUse, needs: &[PciNeed], node: &str) {
    for n in needs.iter().filter(|n| !n.mediated) {
        *in_use
            .entry(n.mapping.clone())
            .or_default()
            .entry(node.to_string())
            .or_insert(0) += 1;
    }
}

/// The PCI filter's input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PciFilter {
    /// What the VM needs.
    pub needs: Vec<PciNeed>,
    /// Devices per node of every mapping the instance lists:
    /// `devices[mapping][node]`; a mapping absent here does not exist in
    /// the instance (or the token may not see it).
    pub devices: BTreeMap<String, BTreeMap<String, u32>>,
    /// Devices already held ([`hold`]).
    pub in_use: InUse,
}

impl PciFilter {
    /// The needs whose mapping the instance does not list, as
    /// `(field, mapping id)`.
    pub fn missing(&self) -> Vec<(String, String)> {
        self.needs
            .iter()
            .filter(|n| !self.devices.contains_key(&n.mapping))
            .map(|n| (n.field.clone(), n.mapping.clone()))
            .collect()
    }

    /// What `node` lacks (`None`: every need has a device there), e.g.
    /// `mapping gpu has no device there` or `mapping gpu: 1 of 1 devices
    /// in use`.
    pub fn problem(&self, node: &str) -> Option<String> {
        let mut wanted: BTreeMap<&str, (u32, bool)> = BTreeMap::new();
        for n in &self.needs {
            let e = wanted.entry(n.mapping.as_str()).or_insert((0, true));
            if !n.mediated {
                e.0 += 1;
            }
            e.1 &= n.mediated;
        }
        let mut lacks = Vec::new();
        for (mapping, (count, all_mediated)) in wanted {
            let have = self
                .devices
                .get(mapping)
                .and_then(|d| d.get(node))
                .copied()
                .unwrap_or(0);
            let used = self
                .in_use
                .get(mapping)
                .and_then(|u| u.get(node))
                .copied()
                .unwrap_or(0);
            if have == 0 {
                lacks.push(format!("mapping {mapping} has no device there"));
            } else if !all_mediated && used.saturating_add(count) > have {
                lacks.push(format!(
                    "mapping {mapping}: {} of {have} devices in use",
                    used.min(have)
                ));
            }
        }
        (!lacks.is_empty()).then(|| lacks.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(m: &str, mdev: bool) -> PciDeviceSpec {
        PciDeviceSpec {
            mapping: m.into(),
            mdev: mdev.then(|| "nvidia-63".into()),
            ..PciDeviceSpec::default()
        }
    }

    fn filter(needs: Vec<PciNeed>) -> PciFilter {
        PciFilter {
            needs,
            devices: [
                (
                    "nvidia-a100".to_string(),
                    [("a1".to_string(), 1), ("a2".to_string(), 2)].into(),
                ),
                ("grid".to_string(), [("a1".to_string(), 1)].into()),
            ]
            .into(),
            in_use: InUse::new(),
        }
    }

    #[test]
    fn pcie_needs_q35() {
        let pcie = PciDeviceSpec {
            pcie: Some(true),
            ..dev("gpu", false)
        };
        let q35 = MachineType::parse("pc-q35-8.1").unwrap();
        let i440 = MachineType::parse("pc-i440fx-9.0").unwrap();
        assert_eq!(
            pcie_unfit(std::slice::from_ref(&pcie), Some(&q35), 9000),
            None
        );
        assert_eq!(pcie_unfit(&[dev("gpu", false)], None, 9000), None);
        let e = pcie_unfit(&[dev("a", false), pcie.clone()], Some(&i440), 9000).unwrap();
        assert_eq!(e.field, "spec.pciDevices[1].pcie");
        assert!(e.why.contains("pc-i440fx-9.0"), "{}", e.why);
        let e = pcie_unfit(&[pcie], None, 9000).unwrap();
        assert!(e.why.contains("i440fx, the default"), "{}", e.why);
    }

    #[test]
    fn renames_translate_names_per_instance() {
        let renames: BTreeMap<String, String> = [("gpu".into(), "nvidia-a100".into())].into();
        let n = needs(&[dev("gpu", false), dev("grid", true)], &renames);
        assert_eq!(n[0].mapping, "nvidia-a100");
        assert_eq!(n[0].field, "spec.pciDevices[0]");
        assert_eq!((n[1].mapping.as_str(), n[1].mediated), ("grid", true));
    }

    #[test]
    fn free_devices_and_devices_in_use() {
        let renames = BTreeMap::new();
        let mut f = filter(needs(&[dev("nvidia-a100", false)], &renames));
        assert_eq!(f.problem("a1"), None);
        assert_eq!(
            f.problem("a3").as_deref(),
            Some("mapping nvidia-a100 has no device there")
        );
        let other = f.needs.clone();
        hold(&mut f.in_use, &other, "a1");
        hold(&mut f.in_use, &other, "a2");
        assert_eq!(
            f.problem("a1").as_deref(),
            Some("mapping nvidia-a100: 1 of 1 devices in use")
        );
        assert_eq!(f.problem("a2"), None, "a2 has two devices, one held");
        hold(&mut f.in_use, &other, "a2");
        assert!(f.problem("a2").is_some());
        assert!(f.missing().is_empty());
    }

    #[test]
    fn mediated_devices_are_shared_and_missing_mappings_named() {
        let renames = BTreeMap::new();
        let mut f = filter(needs(
            &[dev("grid", true), dev("nvidia-t4", false)],
            &renames,
        ));
        assert_eq!(
            f.missing(),
            [("spec.pciDevices[1]".to_string(), "nvidia-t4".to_string())]
        );
        f.needs.pop();
        let held = f.needs.clone();
        hold(&mut f.in_use, &held, "a1");
        assert!(f.in_use.is_empty(), "mediated devices are not counted");
        assert_eq!(f.problem("a1"), None);
        assert!(f.problem("a2").is_some());
    }
}
