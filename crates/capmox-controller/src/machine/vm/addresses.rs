//! Machine addresses: what the guest agent reports (or, with
//! `checks.skipQemuGuestAgent`, the claimed static addresses), matched to the
//! VM's `netN` devices by MAC address, without loopback, link-local
//! (`169.254/16`, `fe80::/10`) or unspecified addresses (docs/field-cases.md B14).
//! Addresses are normalised (`IpAddr` text: IPv6 compressed, lower-case) so
//! comparisons never see spurious differences.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use pve_client::options::NetDevice;

use crate::api::machine::{DeviceAddresses, MachineAddress};
use crate::pve::GuestInterface;

/// CAPI `MachineAddress` type of node addresses.
pub const INTERNAL_IP: &str = "InternalIP";
/// CAPI `MachineAddress` type of the host name.
pub const HOSTNAME: &str = "Hostname";

fn usable(a: IpAddr) -> bool {
    match a {
        IpAddr::V4(v4) => !(v4.is_loopback() || v4.is_link_local() || v4.is_unspecified()),
        IpAddr::V6(v6) => {
            !(v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80)
        }
    }
}

fn push(dev: &mut DeviceAddresses, a: IpAddr) {
    let text = a.to_string();
    let list = if a.is_ipv4() {
        &mut dev.ipv4
    } else {
        &mut dev.ipv6
    };
    if !list.contains(&text) {
        list.push(text);
    }
}

/// The guest's usable addresses per `netN` device, matching interfaces by MAC
/// (devices without a reported address are left out; interfaces whose MAC
/// belongs to no device, like `lo`, are ignored). Sorted by device index.
pub fn from_agent(
    interfaces: &[GuestInterface],
    nics: &BTreeMap<u8, NetDevice>,
) -> Vec<DeviceAddresses> {
    let mut out = Vec::new();
    for (index, nic) in nics {
        let Some(mac) = nic.macaddr else { continue };
        let mut dev = DeviceAddresses {
            net: format!("net{index}"),
            ..DeviceAddresses::default()
        };
        for iface in interfaces.iter().filter(|i| i.mac() == Some(mac)) {
            for addr in iface.ip_addresses.iter().filter_map(|a| a.addr()) {
                if usable(addr) {
                    push(&mut dev, addr);
                }
            }
        }
        if !dev.ipv4.is_empty() || !dev.ipv6.is_empty() {
            out.push(dev);
        }
    }
    out
}

/// Device addresses from claimed static addresses (`(netN, address)` pairs),
/// used when the guest agent is not consulted.
pub fn from_claims(claimed: &[(String, IpAddr)]) -> Vec<DeviceAddresses> {
    let mut by_net: BTreeMap<u32, DeviceAddresses> = BTreeMap::new();
    for (net, addr) in claimed {
        let index = net.trim_start_matches("net").parse().unwrap_or(u32::MAX);
        let dev = by_net.entry(index).or_insert_with(|| DeviceAddresses {
            net: net.clone(),
            ..DeviceAddresses::default()
        });
        if usable(*addr) {
            push(dev, *addr);
        }
    }
    by_net
        .into_values()
        .filter(|d| !d.ipv4.is_empty() || !d.ipv6.is_empty())
        .collect()
}

/// Whether the guest is up with its network: at least one usable address,
/// and every claimed static address shows up on its device (cloud-init
/// applied the network config).
pub fn complete(devices: &[DeviceAddresses], claimed: &[(String, IpAddr)]) -> bool {
    let seen: BTreeSet<(String, String)> = devices
        .iter()
        .flat_map(|d| {
            d.ipv4
                .iter()
                .chain(d.ipv6.iter())
                .map(move |a| (d.net.clone(), a.clone()))
        })
        .collect();
    !seen.is_empty()
        && claimed
            .iter()
            .all(|(net, a)| seen.contains(&(net.clone(), a.to_string())))
}

/// CAPI `status.addresses`: every device's IPv4 then IPv6 addresses as
/// `InternalIP` (device order), then the host name.
pub fn machine_addresses(hostname: &str, devices: &[DeviceAddresses]) -> Vec<MachineAddress> {
    let mut out: Vec<MachineAddress> = Vec::new();
    for d in devices {
        for a in d.ipv4.iter().chain(d.ipv6.iter()) {
            if !out.iter().any(|m| &m.address == a) {
                out.push(MachineAddress {
                    type_: INTERNAL_IP.into(),
                    address: a.clone(),
                });
            }
        }
    }
    out.push(MachineAddress {
        type_: HOSTNAME.into(),
        address: hostname.to_string(),
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nics() -> BTreeMap<u8, NetDevice> {
        [
            (
                0,
                NetDevice::parse("virtio=BC:24:11:AA:BB:CC,bridge=vmbr0").unwrap(),
            ),
            (
                1,
                NetDevice::parse("virtio=BC:24:11:AA:BB:DD,bridge=vmbr1").unwrap(),
            ),
        ]
        .into()
    }

    fn agent() -> Vec<GuestInterface> {
        serde_json::from_str(
            r#"[
          {"name":"lo","hardware-address":"00:00:00:00:00:00","ip-addresses":[
            {"ip-address":"127.0.0.1","ip-address-type":"ipv4","prefix":8},
            {"ip-address":"::1","ip-address-type":"ipv6","prefix":128}]},
          {"name":"eth0","hardware-address":"bc:24:11:aa:bb:cc","ip-addresses":[
            {"ip-address":"10.0.0.21","ip-address-type":"ipv4","prefix":24},
            {"ip-address":"169.254.10.1","ip-address-type":"ipv4","prefix":16},
            {"ip-address":"2001:DB8:1:0::10","ip-address-type":"ipv6","prefix":64},
            {"ip-address":"fe80::be24:11ff:feaa:bbcc","ip-address-type":"ipv6","prefix":64}]},
          {"name":"eth1","hardware-address":"bc:24:11:aa:bb:dd","ip-addresses":[
            {"ip-address":"fe80::be24:11ff:feaa:bbdd","ip-address-type":"ipv6","prefix":64}]},
          {"name":"cni0","hardware-address":"02:42:ac:11:00:02","ip-addresses":[
            {"ip-address":"10.244.0.1","ip-address-type":"ipv4","prefix":24}]}
        ]"#,
        )
        .unwrap()
    }

    #[test]
    fn b14_link_local_and_loopback_dropped_v6_normalised() {
        let devs = from_agent(&agent(), &nics());
        assert_eq!(
            devs,
            vec![DeviceAddresses {
                net: "net0".into(),
                ipv4: vec!["10.0.0.21".into()],
                ipv6: vec!["2001:db8:1::10".into()],
            }]
        );
        let addrs = machine_addresses("wl1-md-0-abcde", &devs);
        let pairs: Vec<(&str, &str)> = addrs
            .iter()
            .map(|a| (a.type_.as_str(), a.address.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("InternalIP", "10.0.0.21"),
                ("InternalIP", "2001:db8:1::10"),
                ("Hostname", "wl1-md-0-abcde")
            ]
        );
    }

    #[test]
    fn completeness_needs_every_claimed_address() {
        let devs = from_agent(&agent(), &nics());
        let v4: IpAddr = "10.0.0.21".parse().unwrap();
        let v6: IpAddr = "2001:db8:1::10".parse().unwrap();
        assert!(complete(&devs, &[("net0".into(), v4), ("net0".into(), v6)]));
        assert!(complete(&devs, &[]));
        let other: IpAddr = "10.0.0.22".parse().unwrap();
        assert!(!complete(&devs, &[("net0".into(), other)]));
        assert!(!complete(&devs, &[("net1".into(), v4)]));
        assert!(!complete(&[], &[]), "no address at all is not up");
    }

    #[test]
    fn claimed_addresses_without_the_agent() {
        let v4: IpAddr = "10.0.0.21".parse().unwrap();
        let v6: IpAddr = "2001:db8:1::10".parse().unwrap();
        let w: IpAddr = "10.1.0.5".parse().unwrap();
        let devs = from_claims(&[("net1".into(), w), ("net0".into(), v6), ("net0".into(), v4)]);
        assert_eq!(
            devs,
            vec![
                DeviceAddresses {
                    net: "net0".into(),
                    ipv4: vec!["10.0.0.21".into()],
                    ipv6: vec!["2001:db8:1::10".into()]
                },
                DeviceAddresses {
                    net: "net1".into(),
                    ipv4: vec!["10.1.0.5".into()],
                    ipv6: vec![]
                },
            ]
        );
    }
}
