//! `network-config` in cloud-init network config **version 1**, the form
//! Proxmox VE itself writes on its NoCloud drives and the one Afterburn's
//! `proxmoxve` provider (Flatcar, Fedora CoreOS) parses from the `cidata`
//! drive: a top-level `config` list of `physical` entries (`name`,
//! `mac_address`, `subnets`) and at most **one** `nameserver` entry
//! (Afterburn refuses more than one). Used for Ignition machines
//! (docs/flatcar.md); cloud-config machines get version 2
//! ([`super::render::network_config`]).
//!
//! Subnets per device: `static` (IPv4) / `static6` (IPv6) with
//! `address: ip/prefix` and the family's `gateway` when there is one (no
//! empty gateway, docs/field-cases.md B14), then `dhcp4` / `dhcp6` as asked.

use std::net::IpAddr;

use serde::Serialize;

use super::render::{Interface, RenderError};

#[derive(Serialize)]
struct NetworkConfigV1 {
    version: u8,
    config: Vec<Entry>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
enum Entry {
    Physical {
        name: String,
        mac_address: String,
        subnets: Vec<Subnet>,
    },
    Nameserver {
        address: Vec<String>,
    },
}

#[derive(Serialize)]
struct Subnet {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    address: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    gateway: Option<String>,
}

/// `network-config` v1 for `interfaces` (sorted by index; device `netN`
/// is `ethN`). Name servers of all devices are merged, in order, without
/// repeats, into the one `nameserver` entry (omitted when there are none).
///
/// # Errors
/// [`RenderError`] if YAML encoding fails.
pub fn network_config_v1(interfaces: &[Interface]) -> Result<String, RenderError> {
    let mut sorted: Vec<&Interface> = interfaces.iter().collect();
    sorted.sort_by_key(|i| i.index);
    let mut config = Vec::new();
    let mut dns: Vec<String> = Vec::new();
    for i in sorted {
        let mut subnets = Vec::new();
        for (addr, prefix) in &i.addresses {
            let gateway = match addr {
                IpAddr::V4(_) => i.gateway4.map(|g| g.to_string()),
                IpAddr::V6(_) => i.gateway6.map(|g| g.to_string()),
            };
            subnets.push(Subnet {
                kind: if addr.is_ipv4() { "static" } else { "static6" },
                address: Some(format!("{addr}/{prefix}")),
                gateway,
            });
        }
        if i.dhcp4 {
            subnets.push(Subnet {
                kind: "dhcp4",
                address: None,
                gateway: None,
            });
        }
        if i.dhcp6 {
            subnets.push(Subnet {
                kind: "dhcp6",
                address: None,
                gateway: None,
            });
        }
        for d in &i.dns {
            let d = d.to_string();
            if !dns.contains(&d) {
                dns.push(d);
            }
        }
        config.push(Entry::Physical {
            name: format!("eth{}", i.index),
            mac_address: i.mac.to_string().to_ascii_lowercase(),
            subnets,
        });
    }
    if !dns.is_empty() {
        config.push(Entry::Nameserver { address: dns });
    }
    serde_saphyr::to_string(&NetworkConfigV1 { version: 1, config }).map_err(|e| RenderError {
        file: "network-config",
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use pve_client::options::MacAddr;
    use serde_json::{Value, json};

    use super::*;

    fn iface(index: u8, mac: &str) -> Interface {
        Interface {
            index,
            mac: MacAddr::parse(mac).unwrap(),
            addresses: vec![],
            gateway4: None,
            gateway6: None,
            metric: None,
            dns: vec![],
            dhcp4: false,
            dhcp6: false,
        }
    }

    #[test]
    fn static_dual_stack_and_dhcp_devices_in_afterburns_shape() {
        let mut second = iface(1, "12:34:56:12:34:56");
        second.dhcp4 = true;
        second.dns = vec!["10.0.0.53".parse().unwrap()];
        let mut first = iface(0, "BC:24:11:AA:BB:CC");
        first.addresses = vec![
            ("10.0.0.20".parse().unwrap(), 24),
            ("2001:db8:1::10".parse().unwrap(), 64),
        ];
        first.gateway4 = Some("10.0.0.1".parse().unwrap());
        first.dns = vec![
            "10.0.0.53".parse().unwrap(),
            "2001:db8::53".parse().unwrap(),
        ];
        let y = network_config_v1(&[second, first]).unwrap();
        let v: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(
            v,
            json!({
                "version": 1,
                "config": [
                    {"type": "physical", "name": "eth0", "mac_address": "bc:24:11:aa:bb:cc",
                     "subnets": [
                        {"type": "static", "address": "10.0.0.20/24", "gateway": "10.0.0.1"},
                        {"type": "static6", "address": "2001:db8:1::10/64"}
                     ]},
                    {"type": "physical", "name": "eth1", "mac_address": "12:34:56:12:34:56",
                     "subnets": [{"type": "dhcp4"}]},
                    {"type": "nameserver", "address": ["10.0.0.53", "2001:db8::53"]}
                ]
            })
        );
    }

    #[test]
    fn no_name_servers_no_nameserver_entry() {
        let y = network_config_v1(&[iface(0, "bc:24:11:00:00:01")]).unwrap();
        let v: Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(v["config"].as_array().unwrap().len(), 1);
        assert_eq!(v["config"][0]["subnets"], json!([]));
    }
}
