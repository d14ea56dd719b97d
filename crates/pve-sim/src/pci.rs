//! PCI passthrough by resource mapping when a VM starts (qemu-server's
//! `parse_hostpci` and `choose_hostpci_devices`).
//!
//! `hostpci[n]: mapping=<id>[,mdev=<type>]…` names a mapping of
//! `GET /cluster/mapping/pci`. Each `map` entry of the mapping whose `node`
//! is the VM's node is one device (its `path` lists the functions of one
//! multifunction device, `a;b`). At start, in `hostpci` order, the VM takes
//! the first entry no other VM on the node holds; with none free the start
//! fails with `could not find a free device for 'hostpci<n>'`. A mapping
//! that does not exist or has no entry on the node fails the start with
//! `PCI device mapping not found for '<id>'`. A mediated device (`mdev=`)
//! is an instance created on the device, so several VMs share one entry:
//! only the entry's presence is needed. Raw `host=` addresses are not
//! checked (the simulator has no host PCI bus).
//!
//! The devices a VM takes are held from the start until it stops
//! ([`crate::state::vm::Vm::pci_held`]), as Proxmox reserves them for the
//! VM's QEMU process.

use std::collections::{BTreeMap, BTreeSet};

use crate::config::PciMappingConfig;
use crate::state::ClusterState;

/// The devices (map entries' `path`) a VM with `conf` takes on `node`, given
/// the `held` devices of the other VMs there.
///
/// # Errors
/// Proxmox's start error text when a mapping is missing on the node or has
/// no free device.
pub(crate) fn take(
    conf: &BTreeMap<String, String>,
    node: &str,
    mappings: &[PciMappingConfig],
    held: &BTreeSet<String>,
) -> Result<Vec<String>, String> {
    let mut taken: Vec<String> = Vec::new();
    for i in 0..16 {
        let key = format!("hostpci{i}");
        let Some(value) = conf.get(&key) else {
            continue;
        };
        let opts = options(value);
        let Some(id) = opts.get("mapping") else {
            continue;
        };
        let devices: Vec<String> = mappings
            .iter()
            .filter(|m| m.id == *id)
            .flat_map(|m| m.map.iter())
            .filter_map(|e| entry_on(e, node))
            .collect();
        if devices.is_empty() {
            return Err(format!("PCI device mapping not found for '{id}'"));
        }
        if opts.contains_key("mdev") {
            continue;
        }
        let free = devices
            .into_iter()
            .find(|d| !held.contains(d) && !taken.contains(d));
        match free {
            Some(d) => taken.push(d),
            None => return Err(format!("could not find a free device for '{key}'")),
        }
    }
    Ok(taken)
}

/// The `pve-qm-hostpci` format (`hostpci[n]` of
/// `/nodes/{node}/qemu/{vmid}/config`): `[[host=]<id[;id…]>]`, `device-id`,
/// `driver` (`vfio`|`keep`), `legacy-igd`, `mapping`, `mdev`, `pcie`,
/// `rombar`, `romfile`, `sub-device-id`, `sub-vendor-id`, `vendor-id`,
/// `x-vga`.
///
/// # Errors
/// Proxmox's message: an unknown key, or `format error` naming the key whose
/// value does not fit.
pub(crate) fn check_format(text: &str) -> Result<(), String> {
    let pci_id = |s: &str| {
        let parts: Vec<&str> = s.split(':').collect();
        let hex = |p: &str, n: usize| p.len() == n && p.chars().all(|c| c.is_ascii_hexdigit());
        let (bus, devfn) = match parts.as_slice() {
            [bus, devfn] => (*bus, *devfn),
            [domain, bus, devfn] if domain.len() >= 4 && hex(domain, domain.len()) => {
                (*bus, *devfn)
            }
            _ => return false,
        };
        let (dev, func) = devfn.split_once('.').unwrap_or((devfn, "0"));
        hex(bus, 2) && hex(dev, 2) && hex(func, 1)
    };
    let hex_id = |s: &str| {
        s.strip_prefix("0x")
            .is_some_and(|h| h.len() == 4 && h.chars().all(|c| c.is_ascii_hexdigit()))
    };
    let pattern = |k: &str| format!("format error\n{k}: value does not match the regex pattern");
    for (k, v) in crate::props::split_pairs(text, Some("host"))? {
        let ok = match k.as_str() {
            "host" => v.split(';').all(pci_id),
            "device-id" | "vendor-id" | "sub-device-id" | "sub-vendor-id" => hex_id(&v),
            "driver" => matches!(v.as_str(), "vfio" | "keep"),
            "legacy-igd" | "pcie" | "rombar" | "x-vga" => {
                if crate::props::parse_bool_word(&v).is_none() {
                    return Err(format!(
                        "format error\n{k}: type check ('boolean') failed - got '{v}'"
                    ));
                }
                true
            }
            "mapping" => crate::schema::check_format("pve-configid", &v).is_ok(),
            "mdev" => !v.is_empty() && !v.contains(['/', '.', ':']),
            "romfile" => !v.is_empty() && !v.contains([',', ';']),
            other => {
                return Err(format!(
                    "invalid key in comma-separated list property: {other}"
                ));
            }
        };
        if !ok {
            return Err(pattern(&k));
        }
    }
    Ok(())
}

/// A property string's `key=value` pairs (a bare first value is `host`);
/// nothing for a value that does not parse.
fn options(value: &str) -> BTreeMap<String, String> {
    crate::props::split_pairs(value, Some("host"))
        .map(|pairs| pairs.into_iter().collect())
        .unwrap_or_default()
}

/// The `path` of a map entry `node=<node>,path=<p>,…` when it is on `node`.
fn entry_on(entry: &str, node: &str) -> Option<String> {
    let mut opts = options(entry);
    (opts.get("node").map(String::as_str) == Some(node))
        .then(|| opts.remove("path"))
        .flatten()
}

/// The mapping id of a `hostpci[n]` value (`mapping=<id>`), if it names one.
pub(crate) fn mapping_of(value: &str) -> Option<String> {
    options(value).remove("mapping")
}

/// Reserves the PCI devices VM `vmid` (config `conf`) takes on its node at
/// start ([`take`] against what the other VMs there hold), recording them
/// in the VM until it stops.
///
/// # Errors
/// As [`take`]; nothing is reserved then.
pub(crate) fn reserve(
    st: &mut ClusterState,
    mappings: &[PciMappingConfig],
    vmid: u32,
    conf: &BTreeMap<String, String>,
) -> Result<(), String> {
    let Some(node) = st.vms.get(&vmid).map(|v| v.node.clone()) else {
        return Ok(());
    };
    let held: BTreeSet<String> = st
        .vms
        .values()
        .filter(|v| v.node == node && v.vmid != vmid)
        .flat_map(|v| v.pci_held.iter().cloned())
        .collect();
    let taken = take(conf, &node, mappings, &held)?;
    if let Some(vm) = st.vms.get_mut(&vmid) {
        vm.pci_held = taken;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(id: &str, map: &[&str]) -> PciMappingConfig {
        PciMappingConfig {
            id: id.into(),
            description: None,
            map: map.iter().map(|s| (*s).to_string()).collect(),
            mdev: false,
        }
    }

    fn conf(kv: &[(&str, &str)]) -> BTreeMap<String, String> {
        kv.iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn each_entry_is_one_device_taken_in_order() {
        let m = [mapping(
            "gpu",
            &[
                "node=n1,path=0000:01:00.0,id=10de:20b0",
                "node=n1,path=0000:02:00.0;0000:02:00.1,id=10de:20b0",
                "node=n2,path=0000:01:00.0,id=10de:20b0",
            ],
        )];
        let one = conf(&[("hostpci0", "mapping=gpu,pcie=1")]);
        let none = BTreeSet::new();
        assert_eq!(take(&one, "n1", &m, &none), Ok(vec!["0000:01:00.0".into()]));
        let held = BTreeSet::from(["0000:01:00.0".to_string()]);
        assert_eq!(
            take(&one, "n1", &m, &held),
            Ok(vec!["0000:02:00.0;0000:02:00.1".into()]),
            "a multifunction device is one device"
        );
        let two = conf(&[("hostpci0", "mapping=gpu"), ("hostpci1", "mapping=gpu")]);
        assert_eq!(
            take(&two, "n1", &m, &held),
            Err("could not find a free device for 'hostpci1'".into())
        );
        assert_eq!(take(&two, "n1", &m, &none).map(|v| v.len()), Ok(2));
        assert_eq!(
            take(&two, "n2", &m, &none),
            Err("could not find a free device for 'hostpci1'".into())
        );
    }

    #[test]
    fn the_hostpci_format() {
        for ok in [
            "mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1",
            "mapping=vgpu,mdev=nvidia-63",
            "0000:01:00.0;0000:01:00.1",
            "host=01:00,driver=vfio,vendor-id=0x10de",
        ] {
            assert_eq!(check_format(ok), Ok(()), "{ok}");
        }
        assert_eq!(
            check_format("mapping=gpu,pcie=maybe"),
            Err("format error\npcie: type check ('boolean') failed - got 'maybe'".into())
        );
        assert_eq!(
            check_format("mapping=vgpu,mdev=a/b"),
            Err("format error\nmdev: value does not match the regex pattern".into())
        );
        assert_eq!(
            check_format("mapping=gpu,speed=1"),
            Err("invalid key in comma-separated list property: speed".into())
        );
        assert!(check_format("host=zz:00.0").is_err());
    }

    #[test]
    fn missing_mappings_and_shared_mediated_devices() {
        let m = [mapping("vgpu", &["node=n1,path=0000:03:00.0"])];
        assert_eq!(
            take(
                &conf(&[("hostpci0", "mapping=vgpu")]),
                "n2",
                &m,
                &BTreeSet::new()
            ),
            Err("PCI device mapping not found for 'vgpu'".into())
        );
        assert_eq!(
            take(
                &conf(&[("hostpci0", "mapping=nope")]),
                "n1",
                &m,
                &BTreeSet::new()
            ),
            Err("PCI device mapping not found for 'nope'".into())
        );
        let held = BTreeSet::from(["0000:03:00.0".to_string()]);
        assert_eq!(
            take(
                &conf(&[("hostpci0", "mapping=vgpu,mdev=nvidia-63")]),
                "n1",
                &m,
                &held
            ),
            Ok(vec![]),
            "mediated devices are shared"
        );
        assert_eq!(
            take(&conf(&[("hostpci0", "0000:09:00.0")]), "n1", &m, &held),
            Ok(vec![]),
            "raw host addresses are not checked"
        );
    }
}
