//! What the guest's network looks like once it has booted: for an Ignition
//! guest, from the networkd units of its config ([`crate::boot`]); else
//! from the NoCloud seed ISO's `network-config` (cloud-init network config
//! version 2, or version 1), else from Proxmox's own cloud-init options
//! (`ipconfigN`), else from DHCP. NICs are matched by MAC (v2
//! `match.macaddress`, v1 `mac_address`); entries without a MAC match the
//! remaining NICs in `netN` order. A NIC with `dhcp4`, or without any static
//! address (and not `ip=manual`), gets a DHCP lease from the bridge's range
//! (lowest free address, stable per MAC until the VM is destroyed). Every NIC
//! also gets an `fe80::/64` EUI-64 link-local address.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use serde_json::Value;

use crate::boot::GuestBoot;
use crate::config::BridgeConfig;
use crate::iso::NoCloudSeed;
use crate::props::{self, Drive, Net};
use crate::state::ClusterState;
use crate::state::vm::{GuestIface, Vm};

/// A NIC of the VM config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Nic {
    pub index: u32,
    pub mac: String,
    pub bridge: Option<String>,
}

/// Addressing plan of one NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NicPlan {
    pub name: Option<String>,
    pub statics: Vec<(IpAddr, u8)>,
    pub dhcp4: bool,
    /// `ip=manual`: no address at all.
    pub manual: bool,
}

/// NICs of a config, by index.
pub(crate) fn nics(conf: &BTreeMap<String, String>) -> Vec<Nic> {
    let mut out: Vec<Nic> = conf
        .iter()
        .filter(|(k, _)| props::is_net_key(k))
        .filter_map(|(k, v)| {
            let n = Net::parse(v).ok()?;
            Some(Nic {
                index: k.trim_start_matches("net").parse().ok()?,
                mac: n.macaddr.clone()?,
                bridge: n.bridge().map(String::from),
            })
        })
        .collect();
    out.sort_by_key(|n| n.index);
    out
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (a, p) = s.trim().split_once('/')?;
    Some((a.parse().ok()?, p.parse().ok()?))
}

fn netmask_prefix(mask: &str) -> Option<u8> {
    let m: Ipv4Addr = mask.parse().ok()?;
    Some(u32::from(m).count_ones() as u8)
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => {
            matches!(s.to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "1")
        }
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        _ => false,
    }
}

/// Plans from a cloud-init `network-config` document (v1 or v2, optionally
/// wrapped in `network:`).
pub(crate) fn plan_from_network_config(text: &str, nics: &[Nic]) -> Result<Vec<NicPlan>, String> {
    let doc: Value =
        serde_saphyr::from_str(text).map_err(|e| format!("network-config is not YAML: {e}"))?;
    let doc = doc.get("network").cloned().unwrap_or(doc);
    let version = doc.get("version").and_then(|v| {
        v.as_i64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    });
    // (mac, plan) entries in document order
    let mut entries: Vec<(Option<String>, NicPlan)> = Vec::new();
    match version {
        Some(2) => {
            if let Some(eths) = doc.get("ethernets").and_then(Value::as_object) {
                for (id, e) in eths {
                    let mac = e
                        .get("match")
                        .and_then(|m| m.get("macaddress"))
                        .and_then(Value::as_str)
                        .map(String::from);
                    let name = e
                        .get("set-name")
                        .and_then(Value::as_str)
                        .map(String::from)
                        .or_else(|| {
                            if mac.is_none() {
                                Some(id.clone())
                            } else {
                                None
                            }
                        });
                    let statics = e
                        .get("addresses")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .filter_map(|x| x.as_str().and_then(parse_cidr))
                                .collect()
                        })
                        .unwrap_or_default();
                    entries.push((
                        mac,
                        NicPlan {
                            name,
                            statics,
                            dhcp4: truthy(e.get("dhcp4")),
                            manual: false,
                        },
                    ));
                }
            }
        }
        Some(1) => {
            for e in doc
                .get("config")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if e.get("type").and_then(Value::as_str) != Some("physical") {
                    continue;
                }
                let mac = e
                    .get("mac_address")
                    .and_then(Value::as_str)
                    .map(String::from);
                let name = e.get("name").and_then(Value::as_str).map(String::from);
                let mut plan = NicPlan {
                    name,
                    ..NicPlan::default()
                };
                for s in e
                    .get("subnets")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    match s.get("type").and_then(Value::as_str) {
                        Some("static") | Some("static6") => {
                            let Some(addr) = s.get("address").and_then(Value::as_str) else {
                                continue;
                            };
                            let parsed = parse_cidr(addr).or_else(|| {
                                let ip: IpAddr = addr.parse().ok()?;
                                let prefix = s
                                    .get("netmask")
                                    .and_then(Value::as_str)
                                    .and_then(netmask_prefix)
                                    .unwrap_or(if ip.is_ipv4() { 24 } else { 64 });
                                Some((ip, prefix))
                            });
                            plan.statics.extend(parsed);
                        }
                        Some("dhcp") | Some("dhcp4") => plan.dhcp4 = true,
                        _ => {}
                    }
                }
                entries.push((mac, plan));
            }
        }
        other => return Err(format!("unsupported network-config version {other:?}")),
    }
    let mut plans: Vec<Option<NicPlan>> = vec![None; nics.len()];
    let mut unmatched = Vec::new();
    for (mac, plan) in entries {
        match mac {
            Some(m) => {
                if let Some(i) = nics.iter().position(|n| n.mac.eq_ignore_ascii_case(&m)) {
                    plans[i] = Some(plan);
                }
            }
            None => unmatched.push(plan),
        }
    }
    let mut rest = unmatched.into_iter();
    for p in plans.iter_mut() {
        if p.is_none() {
            *p = rest.next();
        }
    }
    // a NIC the network config does not mention stays unconfigured
    Ok(plans.into_iter().map(|p| p.unwrap_or_default()).collect())
}

/// Plans from Proxmox's cloud-init options (`ipconfigN`; default DHCP).
pub(crate) fn plan_from_ipconfig(conf: &BTreeMap<String, String>, nics: &[Nic]) -> Vec<NicPlan> {
    nics.iter()
        .map(|n| {
            let Some(cfg) = conf
                .get(&format!("ipconfig{}", n.index))
                .and_then(|v| props::parse_ipconfig(v).ok())
            else {
                return NicPlan::default();
            };
            let mut plan = NicPlan::default();
            match cfg.get("ip").map(String::as_str) {
                Some("dhcp") => plan.dhcp4 = true,
                Some("manual") => plan.manual = true,
                Some(c) => plan.statics.extend(parse_cidr(c)),
                None => plan.dhcp4 = !cfg.contains_key("ip6"),
            }
            if let Some(c) = cfg.get("ip6") {
                plan.statics.extend(parse_cidr(c));
            }
            plan
        })
        .collect()
}

/// EUI-64 link-local address of a MAC.
pub(crate) fn link_local(mac: &str) -> Option<Ipv6Addr> {
    let b: Vec<u8> = mac
        .split(':')
        .filter_map(|x| u8::from_str_radix(x, 16).ok())
        .collect();
    if b.len() != 6 {
        return None;
    }
    let segs = [
        0xfe80,
        0,
        0,
        0,
        u16::from_be_bytes([b[0] ^ 0x02, b[1]]),
        u16::from_be_bytes([b[2], 0xff]),
        u16::from_be_bytes([0xfe, b[3]]),
        u16::from_be_bytes([b[4], b[5]]),
    ];
    Some(Ipv6Addr::new(
        segs[0], segs[1], segs[2], segs[3], segs[4], segs[5], segs[6], segs[7],
    ))
}

/// A DHCP lease for `mac` on `bridge`: the existing one, else the lowest free
/// address of the range.
pub(crate) fn lease(
    st: &mut ClusterState,
    bridges: &[BridgeConfig],
    bridge: &str,
    mac: &str,
) -> Option<(Ipv4Addr, u8)> {
    let range = bridges.iter().find(|b| b.name == bridge)?.dhcp.clone()?;
    let mac = mac.to_ascii_lowercase();
    let leases = st.leases.entry(bridge.to_string()).or_default();
    if let Some((ip, _)) = leases.iter().find(|(_, m)| **m == mac) {
        return Some((*ip, range.prefix));
    }
    let (start, end) = (u32::from(range.start), u32::from(range.end));
    let ip = (start..=end)
        .map(Ipv4Addr::from)
        .find(|ip| !leases.contains_key(ip))?;
    leases.insert(ip, mac);
    Some((ip, range.prefix))
}

/// What a guest did when its VM started.
#[derive(Debug)]
pub(crate) struct Started {
    /// The interfaces the agent will report.
    pub ifaces: Vec<GuestIface>,
    /// Why an attached seed ISO could not be used, if it could not.
    pub note: Option<String>,
    /// How the OS took its seed.
    pub boot: GuestBoot,
    /// The NoCloud seed ISO it read at boot (`storage:iso/<file>`), as a
    /// real guest reads it once, before anyone can eject or delete it.
    pub seed: Option<(String, NoCloudSeed)>,
}

/// What the guest of a VM that starts now does: the interfaces the agent
/// will report, and how its OS took the seed.
pub(crate) fn start_guest(st: &mut ClusterState, bridges: &[BridgeConfig], vm: &Vm) -> Started {
    let nics = nics(&vm.conf);
    let mut note = None;
    let mut seed = None;
    for (_, d) in vm.drives() {
        if !d.is_cdrom() || d.is_cloudinit() {
            continue;
        }
        if let Some(data) = st.volume(&vm.node, &d.file).and_then(|v| v.data.clone()) {
            match crate::iso::read_nocloud(&data) {
                Ok(s) => {
                    seed = Some((d.file.clone(), s));
                    break;
                }
                Err(e) => note = Some(format!("{}: {e}", d.file)),
            }
        }
    }
    let has_pve_cloudinit = vm
        .drives()
        .iter()
        .any(|(_, d): &(String, Drive)| d.is_cloudinit());
    let boot = seed.as_ref().map_or(GuestBoot::NoSeed, |(_, s)| {
        crate::boot::classify(&s.user_data)
    });
    let ignition = seed
        .as_ref()
        .and_then(|(_, s)| crate::boot::ignition_plans(&s.user_data, &nics));
    let plans = match &seed {
        Some(_) if ignition.is_some() => ignition.unwrap_or_default(),
        Some((_, s)) => match s.network_config.as_deref() {
            Some(nc) => plan_from_network_config(nc, &nics).unwrap_or_else(|e| {
                note = Some(e);
                nics.iter()
                    .map(|_| NicPlan {
                        dhcp4: true,
                        ..NicPlan::default()
                    })
                    .collect()
            }),
            None => nics
                .iter()
                .map(|_| NicPlan {
                    dhcp4: true,
                    ..NicPlan::default()
                })
                .collect(),
        },
        None if has_pve_cloudinit => plan_from_ipconfig(&vm.conf, &nics),
        None => nics
            .iter()
            .map(|_| NicPlan {
                dhcp4: true,
                ..NicPlan::default()
            })
            .collect(),
    };
    let mut out = Vec::new();
    for (nic, plan) in nics.iter().zip(plans) {
        let mut addrs = plan.statics.clone();
        if (plan.dhcp4 || (plan.statics.is_empty() && !plan.manual))
            && let Some(b) = &nic.bridge
            && let Some((ip, prefix)) = lease(st, bridges, b, &nic.mac)
        {
            addrs.insert(0, (IpAddr::V4(ip), prefix));
        }
        if let Some(ll) = link_local(&nic.mac) {
            addrs.push((IpAddr::V6(ll), 64));
        }
        out.push(GuestIface {
            name: plan
                .name
                .unwrap_or_else(|| format!("ens{}", 18 + nic.index)),
            mac: nic.mac.to_ascii_lowercase(),
            addrs,
        });
    }
    Started {
        ifaces: out,
        note,
        boot,
        seed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_nics() -> Vec<Nic> {
        vec![
            Nic {
                index: 0,
                mac: "BC:24:11:00:00:01".into(),
                bridge: Some("vmbr0".into()),
            },
            Nic {
                index: 1,
                mac: "BC:24:11:00:00:02".into(),
                bridge: Some("vmbr0".into()),
            },
        ]
    }

    #[test]
    fn v2_by_mac() {
        let nc = r#"
version: 2
ethernets:
  eth1:
    match: {macaddress: "bc:24:11:00:00:02"}
    set-name: eth1
    dhcp4: true
  eth0:
    match:
      macaddress: "BC:24:11:00:00:01"
    set-name: eth0
    addresses: ["10.0.0.21/24", "2001:db8::21/64"]
    routes: [{to: default, via: 10.0.0.1}]
    nameservers: {addresses: [10.0.0.1]}
"#;
        let p = plan_from_network_config(nc, &two_nics()).unwrap();
        assert_eq!(p[0].name.as_deref(), Some("eth0"));
        assert_eq!(
            p[0].statics,
            vec![
                ("10.0.0.21".parse().unwrap(), 24),
                ("2001:db8::21".parse().unwrap(), 64)
            ]
        );
        assert!(!p[0].dhcp4);
        assert!(p[1].dhcp4 && p[1].statics.is_empty());
    }

    #[test]
    fn v1_and_wrapped() {
        let nc = r#"
network:
  version: 1
  config:
    - type: physical
      name: eth0
      mac_address: "bc:24:11:00:00:01"
      subnets:
        - {type: static, address: 10.0.0.5, netmask: 255.255.255.0, gateway: 10.0.0.1}
    - type: nameserver
      address: [10.0.0.1]
"#;
        let p = plan_from_network_config(nc, &two_nics()).unwrap();
        assert_eq!(p[0].statics, vec![("10.0.0.5".parse().unwrap(), 24)]);
        assert_eq!(p[1], NicPlan::default());
        assert!(plan_from_network_config("version: 3", &two_nics()).is_err());
    }

    #[test]
    fn ipconfig_plans_and_link_local() {
        let conf = BTreeMap::from([(
            "ipconfig0".to_string(),
            "ip=10.1.0.5/24,gw=10.1.0.1,ip6=2001:db8::5/64".to_string(),
        )]);
        let p = plan_from_ipconfig(&conf, &two_nics());
        assert_eq!(p[0].statics.len(), 2);
        assert!(
            !p[1].dhcp4,
            "ipconfig1 absent: no address on the second NIC"
        );
        assert_eq!(
            link_local("BC:24:11:12:34:56").unwrap(),
            "fe80::be24:11ff:fe12:3456".parse::<Ipv6Addr>().unwrap()
        );
    }
}
