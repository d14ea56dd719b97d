//! Rendering the NoCloud seed: `user-data`, `meta-data`, `network-config`.
//!
//! - `user-data` is the bootstrap Secret's `value`, byte for byte (CAPI
//!   contract: key `value`; the kubeadm bootstrap provider writes a
//!   `#cloud-config` document).
//! - `meta-data`: `instance-id` = the VM's smbios1 UUID (what kubelet gets as
//!   the product UUID, so a `proxmox://<uuid>` providerID matches the Node),
//!   `local-hostname` = the machine name, and `provider-id` when
//!   `metadataSettings.providerIDInjection` asks for it.
//! - `network-config`: cloud-init network config **version 2**. Device `netN`
//!   becomes `ethN`, matched by MAC (`match.macaddress`, lower-case) and
//!   renamed with `set-name: ethN`; static `addresses` in CIDR form; a default
//!   route per family **only when that family has a gateway** (`0.0.0.0/0` for
//!   IPv4, `::/0` for IPv6 — never an empty `via`, docs/field-cases.md B14);
//!   `nameservers.addresses`; `dhcp4` / `dhcp6` as asked.
//!
//! For [`BootstrapFormat::Ignition`] the seed differs in two files:
//! `network-config` is version 1 ([`super::network_v1`], what Afterburn's
//! `proxmoxve` provider parses) and a `vendor-data` file is added, which
//! Afterburn requires (`#cloud-config` and an empty mapping: Ignition skips
//! it, Afterburn parses it). `user-data` is then the enriched Ignition
//! config ([`super::ignition::enrich`]).
//!
//! YAML is written by serde-saphyr with YAML 1.1-safe quoting, so a MAC like
//! `12:34:56:78:9a:bc` never reads back as a sexagesimal number in cloud-init.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use pve_client::options::MacAddr;
use serde::Serialize;
use serde::ser::SerializeMap;

use super::format::BootstrapFormat;

/// One guest network device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    /// Device index: `netN` → `ethN`.
    pub index: u8,
    /// The MAC Proxmox assigned (or the spec fixed).
    pub mac: MacAddr,
    /// Static addresses with their prefix length.
    pub addresses: Vec<(IpAddr, u8)>,
    /// IPv4 default gateway.
    pub gateway4: Option<Ipv4Addr>,
    /// IPv6 default gateway.
    pub gateway6: Option<Ipv6Addr>,
    /// Route metric of the default routes.
    pub metric: Option<u32>,
    /// Name servers.
    pub dns: Vec<IpAddr>,
    /// DHCP for IPv4.
    pub dhcp4: bool,
    /// DHCP / SLAAC for IPv6.
    pub dhcp6: bool,
}

/// Everything the seed is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeedInput {
    /// `instance-id`: the VM's smbios1 UUID.
    pub instance_id: String,
    /// `local-hostname`: the machine name.
    pub hostname: String,
    /// `provider-id`, when injected.
    pub provider_id: Option<String>,
    /// The bootstrap data, verbatim (for Ignition: already enriched).
    pub user_data: Vec<u8>,
    /// Its format: which `network-config` version, whether `vendor-data`.
    pub format: BootstrapFormat,
    /// Network devices, in any order (rendered by index).
    pub interfaces: Vec<Interface>,
}

/// The three files of a NoCloud seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seed {
    /// `user-data`.
    pub user_data: Vec<u8>,
    /// `meta-data`.
    pub meta_data: String,
    /// `network-config`.
    pub network_config: String,
    /// `vendor-data` (Ignition seeds only).
    pub vendor_data: Option<String>,
}

/// The `vendor-data` of Ignition seeds: Ignition skips a `#cloud-config`,
/// Afterburn parses the empty mapping.
pub const IGNITION_VENDOR_DATA: &str = "#cloud-config\n{}\n";

/// Rendering failed (only YAML encoding can fail).
#[derive(Debug, thiserror::Error)]
#[error("cannot render cloud-init {file}: {message}")]
pub struct RenderError {
    /// Which file.
    pub file: &'static str,
    /// Why.
    pub message: String,
}

#[derive(Serialize)]
struct MetaData<'a> {
    #[serde(rename = "instance-id")]
    instance_id: &'a str,
    #[serde(rename = "local-hostname")]
    local_hostname: &'a str,
    #[serde(rename = "provider-id", skip_serializing_if = "Option::is_none")]
    provider_id: Option<&'a str>,
}

#[derive(Serialize)]
struct NetworkConfig {
    version: u8,
    ethernets: Ordered<Ethernet>,
}

/// A map serialised in insertion order.
struct Ordered<V>(Vec<(String, V)>);

impl<V: Serialize> Serialize for Ordered<V> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

#[derive(Serialize)]
struct Ethernet {
    #[serde(rename = "match")]
    matcher: Match,
    #[serde(rename = "set-name")]
    set_name: String,
    dhcp4: bool,
    dhcp6: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    addresses: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    routes: Vec<Route>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nameservers: Option<Nameservers>,
}

#[derive(Serialize)]
struct Match {
    macaddress: String,
}

#[derive(Serialize)]
struct Route {
    to: &'static str,
    via: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    metric: Option<u32>,
}

#[derive(Serialize)]
struct Nameservers {
    addresses: Vec<String>,
}

fn yaml<T: Serialize>(file: &'static str, value: &T) -> Result<String, RenderError> {
    serde_saphyr::to_string(value).map_err(|e| RenderError {
        file,
        message: e.to_string(),
    })
}

/// `meta-data` alone.
///
/// # Errors
/// [`RenderError`] if YAML encoding fails.
pub fn meta_data(input: &SeedInput) -> Result<String, RenderError> {
    yaml(
        "meta-data",
        &MetaData {
            instance_id: &input.instance_id,
            local_hostname: &input.hostname,
            provider_id: input.provider_id.as_deref(),
        },
    )
}

/// `network-config` alone.
///
/// # Errors
/// [`RenderError`] if YAML encoding fails.
pub fn network_config(interfaces: &[Interface]) -> Result<String, RenderError> {
    let mut sorted: Vec<&Interface> = interfaces.iter().collect();
    sorted.sort_by_key(|i| i.index);
    let ethernets = sorted
        .into_iter()
        .map(|i| {
            let name = format!("eth{}", i.index);
            let mut routes = Vec::new();
            if let Some(gw) = i.gateway4 {
                routes.push(Route {
                    to: "0.0.0.0/0",
                    via: gw.to_string(),
                    metric: i.metric,
                });
            }
            if let Some(gw) = i.gateway6 {
                routes.push(Route {
                    to: "::/0",
                    via: gw.to_string(),
                    metric: i.metric,
                });
            }
            let eth = Ethernet {
                matcher: Match {
                    macaddress: i.mac.to_string().to_ascii_lowercase(),
                },
                set_name: name.clone(),
                dhcp4: i.dhcp4,
                dhcp6: i.dhcp6,
                addresses: i
                    .addresses
                    .iter()
                    .map(|(a, p)| format!("{a}/{p}"))
                    .collect(),
                routes,
                nameservers: (!i.dns.is_empty()).then(|| Nameservers {
                    addresses: i.dns.iter().map(ToString::to_string).collect(),
                }),
            };
            (name, eth)
        })
        .collect();
    yaml(
        "network-config",
        &NetworkConfig {
            version: 2,
            ethernets: Ordered(ethernets),
        },
    )
}

/// The whole seed.
///
/// # Errors
/// [`RenderError`] if YAML encoding fails.
pub fn render(input: &SeedInput) -> Result<Seed, RenderError> {
    let (network_config, vendor_data) = match input.format {
        BootstrapFormat::CloudConfig => (network_config(&input.interfaces)?, None),
        BootstrapFormat::Ignition => (
            super::network_v1::network_config_v1(&input.interfaces)?,
            Some(IGNITION_VENDOR_DATA.to_string()),
        ),
    };
    Ok(Seed {
        user_data: input.user_data.clone(),
        meta_data: meta_data(input)?,
        network_config,
        vendor_data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mac(s: &str) -> MacAddr {
        MacAddr::parse(s).unwrap()
    }

    fn dual_stack() -> Interface {
        Interface {
            index: 0,
            mac: mac("BC:24:11:AA:BB:CC"),
            addresses: vec![
                ("10.0.0.20".parse().unwrap(), 24),
                ("2001:db8:1::10".parse().unwrap(), 64),
            ],
            gateway4: Some("10.0.0.1".parse().unwrap()),
            gateway6: Some("2001:db8:1::1".parse().unwrap()),
            metric: None,
            dns: vec![
                "10.0.0.53".parse().unwrap(),
                "2001:db8::53".parse().unwrap(),
            ],
            dhcp4: false,
            dhcp6: false,
        }
    }

    #[test]
    fn meta_data_shape() {
        let input = SeedInput {
            instance_id: "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f".into(),
            hostname: "wl1-md-0-abcde".into(),
            provider_id: Some("proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f".into()),
            user_data: b"#cloud-config\nruncmd: []\n".to_vec(),
            format: BootstrapFormat::CloudConfig,
            interfaces: vec![],
        };
        assert_eq!(
            meta_data(&input).unwrap(),
            "instance-id: 3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\n\
             local-hostname: wl1-md-0-abcde\n\
             provider-id: proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\n"
        );
        let without = SeedInput {
            provider_id: None,
            ..input.clone()
        };
        assert_eq!(
            meta_data(&without).unwrap(),
            "instance-id: 3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\nlocal-hostname: wl1-md-0-abcde\n"
        );
        // user-data is verbatim.
        let seed = render(&input).unwrap();
        assert_eq!(seed.user_data, input.user_data);
        assert!(seed.network_config.starts_with("version: 2\n"));
        assert_eq!(seed.vendor_data, None);
    }

    #[test]
    fn ignition_seeds_have_network_config_v1_and_vendor_data() {
        let input = SeedInput {
            instance_id: "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f".into(),
            hostname: "wl1-md-0-abcde".into(),
            provider_id: None,
            user_data: br#"{"ignition":{"version":"3.4.0"}}"#.to_vec(),
            format: BootstrapFormat::Ignition,
            interfaces: vec![dual_stack()],
        };
        let seed = render(&input).unwrap();
        assert_eq!(seed.user_data, input.user_data);
        let v: serde_json::Value = serde_saphyr::from_str(&seed.network_config).unwrap();
        assert_eq!(v["version"], 1);
        assert_eq!(v["config"][0]["mac_address"], "bc:24:11:aa:bb:cc");
        assert_eq!(seed.vendor_data.as_deref(), Some("#cloud-config\n{}\n"));
        let vendor: serde_json::Value =
            serde_saphyr::from_str(seed.vendor_data.as_deref().unwrap()).unwrap();
        assert_eq!(vendor, serde_json::json!({}));
    }

    #[test]
    fn b14_dual_stack_has_both_default_routes() {
        let y = network_config(&[dual_stack()]).unwrap();
        assert_eq!(
            y,
            "version: 2\n\
             ethernets:\n  \
               eth0:\n    \
                 match:\n      \
                   macaddress: bc:24:11:aa:bb:cc\n    \
                 set-name: eth0\n    \
                 dhcp4: false\n    \
                 dhcp6: false\n    \
                 addresses:\n    \
                 - 10.0.0.20/24\n    \
                 - 2001:db8:1::10/64\n    \
                 routes:\n    \
                 - to: 0.0.0.0/0\n      \
                   via: \"10.0.0.1\"\n    \
                 - to: \"::/0\"\n      \
                   via: 2001:db8:1::1\n    \
                 nameservers:\n      \
                   addresses:\n      \
                   - \"10.0.0.53\"\n      \
                   - 2001:db8::53\n"
        );
        // Quoting follows YAML 1.1 (cloud-init's PyYAML): `10.0.0.1` would read as
        // a float there, `::/0` starts like a key. It parses back as intended.
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(v["ethernets"]["eth0"]["routes"][1]["to"], "::/0");
        assert_eq!(
            v["ethernets"]["eth0"]["match"]["macaddress"],
            "bc:24:11:aa:bb:cc"
        );
    }

    #[test]
    fn b14_no_gateway_no_route_and_v6_only() {
        let mut i = dual_stack();
        i.gateway6 = None;
        let v: serde_json::Value = serde_saphyr::from_str(&network_config(&[i]).unwrap()).unwrap();
        let routes = v["ethernets"]["eth0"]["routes"].as_array().unwrap();
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[0]["to"], "0.0.0.0/0");

        let v6_only = Interface {
            addresses: vec![("2001:db8:1::10".parse().unwrap(), 64)],
            gateway4: None,
            dns: vec![],
            ..dual_stack()
        };
        let y = network_config(&[v6_only]).unwrap();
        assert!(!y.contains("0.0.0.0/0"), "{y}");
        assert!(!y.contains("10.0.0"), "{y}");
        assert!(!y.contains("nameservers"), "{y}");
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        assert_eq!(v["ethernets"]["eth0"]["routes"][0]["via"], "2001:db8:1::1");
    }

    #[test]
    fn dhcp_devices_and_order_by_index() {
        let dhcp = Interface {
            index: 1,
            mac: mac("12:34:56:12:34:56"),
            addresses: vec![],
            gateway4: None,
            gateway6: None,
            metric: None,
            dns: vec![],
            dhcp4: true,
            dhcp6: true,
        };
        let mut first = dual_stack();
        first.metric = Some(100);
        let y = network_config(&[dhcp, first]).unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&y).unwrap();
        let eth = v["ethernets"].as_object().unwrap();
        assert_eq!(eth.keys().collect::<Vec<_>>(), vec!["eth0", "eth1"]);
        assert_eq!(v["ethernets"]["eth1"]["dhcp4"], true);
        assert_eq!(v["ethernets"]["eth1"]["dhcp6"], true);
        assert!(v["ethernets"]["eth1"].get("addresses").is_none());
        assert!(v["ethernets"]["eth1"].get("routes").is_none());
        assert_eq!(v["ethernets"]["eth0"]["routes"][0]["metric"], 100);
        // An all-digit MAC stays a string (YAML 1.1 would read 12:34:56 as a number).
        assert_eq!(
            v["ethernets"]["eth1"]["match"]["macaddress"],
            "12:34:56:12:34:56"
        );
        assert!(
            y.contains("'12:34:56:12:34:56'") || y.contains("\"12:34:56:12:34:56\""),
            "{y}"
        );
        assert!(y.find("eth0:").unwrap() < y.find("eth1:").unwrap());
    }
}
