//! Network devices of a machine (`spec.network.networkDevices`): values
//! Proxmox accepts in `net[n]` (`/nodes/{node}/qemu/{vmid}/config`) and a NIC
//! can use.
//!
//! `net[n]` limits: `tag` 1..=4094; `mtu` 1..=65520 where 1 takes the
//! bridge's MTU, and qemu-server refuses anything below 576 when the VM
//! starts and supports it only for virtio; `macaddr` format `mac-addr`
//! (the I/G bit clear — pve-client's `MacAddr`), and the all-zero address,
//! which Proxmox stores, is no station address.

use std::collections::BTreeMap;

use pve_client::options::MacAddr;

use super::FieldError;
use super::cluster::is_bridge_name;
use super::network::check_name_servers;
use super::slots::is_net_name;
use crate::api::machine::{NetworkDevice, NicModel};

/// An example of what to write for a MAC address.
const MAC_EXAMPLE: &str = "e.g. BC:24:11:00:00:01";

/// Every device of `devices` at `{base}.network.networkDevices[i]`.
pub(super) fn check_devices(base: &str, devices: &[NetworkDevice], errs: &mut Vec<FieldError>) {
    let mut names = BTreeMap::new();
    let mut macs: BTreeMap<MacAddr, usize> = BTreeMap::new();
    for (i, d) in devices.iter().enumerate() {
        let p = format!("{base}.network.networkDevices[{i}]");
        if !is_net_name(&d.name) {
            errs.push(FieldError::new(
                format!("{p}.name"),
                format!("{:?} is not a device name net0..net31", d.name),
            ));
        } else if let Some(first) = names.insert(d.name.as_str(), i) {
            errs.push(FieldError::new(
                format!("{p}.name"),
                format!(
                    "device {} is listed twice (also networkDevices[{first}]): name each device once",
                    d.name
                ),
            ));
        }
        if let Some(b) = &d.bridge
            && !is_bridge_name(b)
        {
            errs.push(FieldError::new(
                format!("{p}.bridge"),
                format!("{b:?} is not a bridge name (e.g. vmbr0)"),
            ));
        }
        if let Some(v) = d.vlan
            && !(1..=4094).contains(&v)
        {
            errs.push(FieldError::new(
                format!("{p}.vlan"),
                format!(
                    "VLAN tag {v} is outside 1..4094: write the VLAN ID, or leave vlan out for untagged traffic"
                ),
            ));
        }
        if let Some(mtu) = d.mtu {
            check_mtu(&p, mtu, d.model.unwrap_or_default(), errs);
        }
        if let Some(text) = &d.mac_address
            && let Some(mac) = check_mac(&format!("{p}.macAddress"), text, errs)
            && let Some(first) = macs.insert(mac, i)
        {
            errs.push(FieldError::new(
                format!("{p}.macAddress"),
                format!(
                    "{mac} is also the MAC address of networkDevices[{first}]: each NIC needs its own address"
                ),
            ));
        }
        let mut refs = BTreeMap::new();
        for (j, r) in d.ip_pool_ref.iter().enumerate() {
            if r.name.is_empty() || r.kind.is_empty() || r.api_group.is_empty() {
                errs.push(FieldError::new(
                    format!("{p}.ipPoolRef[{j}]"),
                    "apiGroup, kind and name are all required",
                ));
            } else if let Some(first) =
                refs.insert((r.api_group.as_str(), r.kind.as_str(), r.name.as_str()), j)
            {
                errs.push(FieldError::new(
                    format!("{p}.ipPoolRef[{j}]"),
                    format!(
                        "the same pool as ipPoolRef[{first}]: a device gets one address per pool, list each pool once"
                    ),
                ));
            }
        }
        if d.ip_pool_ref.len() > 2 {
            errs.push(FieldError::new(
                format!("{p}.ipPoolRef"),
                "at most one pool per IP family (two entries)",
            ));
        }
        check_name_servers(&format!("{p}.dnsServers"), &d.dns_servers, errs);
    }
}

fn check_mtu(p: &str, mtu: u32, model: NicModel, errs: &mut Vec<FieldError>) {
    if mtu != 1 && !(576..=65520).contains(&mtu) {
        errs.push(FieldError::new(
            format!("{p}.mtu"),
            format!("{mtu} must be 1 (inherit the bridge MTU) or between 576 and 65520"),
        ));
    }
    if model != NicModel::Virtio {
        errs.push(FieldError::new(
            format!("{p}.mtu"),
            format!(
                "mtu is only supported with model virtio, not {}: remove mtu or use virtio",
                model.as_str()
            ),
        ));
    }
}

/// The MAC address when a NIC can use it; otherwise an error saying why.
fn check_mac(path: &str, text: &str, errs: &mut Vec<FieldError>) -> Option<MacAddr> {
    let why = match MacAddr::parse(text) {
        Ok(mac) => match mac.station_problem() {
            None => return Some(mac),
            Some(problem) => format!("{text:?} cannot be a NIC's address: {problem}"),
        },
        Err(_) if text.eq_ignore_ascii_case("FF:FF:FF:FF:FF:FF") => {
            format!("{text:?} is the broadcast address")
        }
        Err(_) if shaped_like_mac(text) => {
            format!("{text:?} is a multicast address (its first octet is odd)")
        }
        Err(_) => format!("{text:?} is not a MAC address of six hex pairs XX:XX:XX:XX:XX:XX"),
    };
    errs.push(FieldError::new(
        path,
        format!("{why}; a NIC needs a unicast address, {MAC_EXAMPLE}"),
    ));
    None
}

fn shaped_like_mac(text: &str) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}
