//! Ignition bootstrap data (`format: ignition`, CAPI bootstrap contract):
//! the check made before any Proxmox call, and the enrichment written into
//! the config before it goes onto the seed ISO as `user-data`.
//!
//! Ignition's `proxmoxve` platform (Flatcar, Fedora CoreOS on Proxmox VE)
//! mounts the drive labelled `cidata` and takes `user-data` when it is
//! JSON (a `#cloud-config` there is skipped). Ignition applies the config
//! once, in the initramfs, before the network of the real root is up; so,
//! as the Go provider CAPMOX does for its Flatcar flavor, the machine's
//! identity and network go **into** the config (docs/flatcar.md):
//!
//! - `/etc/hostname`: the machine's host name;
//! - `/etc/proxmox-env`: `COREOS_CUSTOM_*` variables ([`PROXMOX_ENV_KEYS`])
//!   that the Flatcar flavors' `coreos-metadata.service` reads;
//! - one systemd-networkd unit per device, `NN-ethN.network`, matched by
//!   MAC: static addresses, the default route per family when it has a
//!   gateway (docs/field-cases.md B14), DNS, DHCP as asked. Spec 2.x puts
//!   them in `networkd.units`; spec 3.x (which has no `networkd`) writes
//!   them as files under `/etc/systemd/network/`.
//!
//! Spec versions 2.x (what the kubeadm bootstrap provider's Container
//! Linux Config transpiler writes) and 3.x are handled. Entries are only
//! added: a path (or networkd unit name) the config already has is left
//! as the config says it. File contents are RFC 2397 `data:,` URLs.

use std::collections::BTreeSet;
use std::net::IpAddr;

use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Map, Value, json};

use super::render::Interface;

/// Where the `COREOS_CUSTOM_*` variables are written.
pub const PROXMOX_ENV_PATH: &str = "/etc/proxmox-env";

/// The variables of [`PROXMOX_ENV_PATH`], in the order written.
pub const PROXMOX_ENV_KEYS: &[&str] = &[
    "COREOS_CUSTOM_HOSTNAME",
    "COREOS_CUSTOM_ZONE",
    "COREOS_CUSTOM_INSTANCE_ID",
    "COREOS_CUSTOM_PROVIDER_ID",
    "COREOS_CUSTOM_NODE",
    "COREOS_CUSTOM_PRIVATE_IPV4",
];

/// File mode of the files added: 0644.
const MODE_0644: u32 = 0o644;

/// Why bootstrap data in format `ignition` cannot be used.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IgnitionError {
    /// Not JSON at all (Ignition would ignore the drive and boot without
    /// a config).
    #[error("not JSON: {0}")]
    NotJson(String),
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// No `ignition.version` string.
    #[error("no ignition.version (an Ignition config names its spec version)")]
    NoVersion,
    /// A spec version other than 2.x or 3.x.
    #[error("ignition.version {0:?} is not a 2.x or 3.x spec version")]
    UnsupportedVersion(String),
    /// A field the enrichment extends has another type.
    #[error("{field} is not {expected}")]
    Shape {
        /// The JSON path, `storage.files`.
        field: &'static str,
        /// `an object` or `a list`.
        expected: &'static str,
    },
}

/// The spec version of a config that passed [`check`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// `ignition.version` as written, `3.4.0`.
    pub version: String,
    /// Its major number: 2 or 3.
    pub major: u8,
}

/// What the enrichment writes into the config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enrichment<'a> {
    /// The machine's host name (`/etc/hostname`, `COREOS_CUSTOM_HOSTNAME`).
    pub hostname: &'a str,
    /// The VM's smbios1 UUID (`COREOS_CUSTOM_INSTANCE_ID`).
    pub instance_id: &'a str,
    /// The machine's providerID (`COREOS_CUSTOM_PROVIDER_ID`).
    pub provider_id: &'a str,
    /// The failure domain, our instance name (`COREOS_CUSTOM_ZONE`).
    pub zone: &'a str,
    /// The Proxmox node the VM runs on (`COREOS_CUSTOM_NODE`).
    pub node: &'a str,
    /// The guest's network devices (networkd units; the first static IPv4
    /// address of the lowest device is `COREOS_CUSTOM_PRIVATE_IPV4`).
    pub interfaces: &'a [Interface],
}

fn parse(data: &[u8]) -> Result<(Map<String, Value>, Spec), IgnitionError> {
    let v: Value =
        serde_json::from_slice(data).map_err(|e| IgnitionError::NotJson(e.to_string()))?;
    let Value::Object(doc) = v else {
        return Err(IgnitionError::NotAnObject);
    };
    let version = doc
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .ok_or(IgnitionError::NoVersion)?
        .to_string();
    let major = match version.split('.').next().and_then(|m| m.parse::<u8>().ok()) {
        Some(m @ (2 | 3)) if version.split('.').count() >= 2 => m,
        _ => return Err(IgnitionError::UnsupportedVersion(version)),
    };
    for (field, value, expected) in [
        ("storage", doc.get("storage"), "an object"),
        ("networkd", doc.get("networkd"), "an object"),
        (
            "storage.files",
            doc.get("storage").and_then(|s| s.get("files")),
            "a list",
        ),
        (
            "networkd.units",
            doc.get("networkd").and_then(|s| s.get("units")),
            "a list",
        ),
    ] {
        let ok = match (value, expected) {
            (None | Some(Value::Null), _) => true,
            (Some(v), "a list") => v.is_array(),
            (Some(v), _) => v.is_object(),
        };
        if !ok {
            return Err(IgnitionError::Shape { field, expected });
        }
    }
    Ok((doc, Spec { version, major }))
}

/// Checks bootstrap data of format `ignition`: a JSON object with an
/// `ignition.version` of spec 2.x or 3.x, whose `storage`, `storage.files`,
/// `networkd` and `networkd.units` (when present) have the types the
/// enrichment extends.
///
/// # Errors
/// [`IgnitionError`] naming the problem.
pub fn check(data: &[u8]) -> Result<Spec, IgnitionError> {
    parse(data).map(|(_, spec)| spec)
}

/// An RFC 2397 data URL of `text` (`data:,` and percent-encoding).
pub fn data_url(text: &str) -> String {
    format!("data:,{}", utf8_percent_encode(text, NON_ALPHANUMERIC))
}

/// The systemd-networkd unit of device `i`: `[Match] MACAddress`, then
/// `[Network]` with `DHCP`, `Address` and `DNS`, then one `[Route]` per
/// family with a gateway (`Destination` `0.0.0.0/0` or `::/0`, `Metric`).
pub fn networkd_unit(i: &Interface) -> String {
    let mut s = format!(
        "[Match]\nMACAddress={}\n\n[Network]\n",
        i.mac.to_string().to_ascii_lowercase()
    );
    match (i.dhcp4, i.dhcp6) {
        (true, true) => s.push_str("DHCP=yes\n"),
        (true, false) => s.push_str("DHCP=ipv4\n"),
        (false, true) => s.push_str("DHCP=ipv6\n"),
        (false, false) => {}
    }
    for (a, p) in &i.addresses {
        s.push_str(&format!("Address={a}/{p}\n"));
    }
    for d in &i.dns {
        s.push_str(&format!("DNS={d}\n"));
    }
    let routes = [
        (i.gateway4.map(IpAddr::V4), "0.0.0.0/0"),
        (i.gateway6.map(IpAddr::V6), "::/0"),
    ];
    for (gw, dest) in routes {
        if let Some(gw) = gw {
            s.push_str(&format!("\n[Route]\nDestination={dest}\nGateway={gw}\n"));
            if let Some(m) = i.metric {
                s.push_str(&format!("Metric={m}\n"));
            }
        }
    }
    s
}

/// The unit (and, for spec 3.x, file) name of device `i`: `00-eth0.network`.
pub fn networkd_unit_name(i: &Interface) -> String {
    format!("{:02}-eth{}.network", i.index, i.index)
}

/// The content of [`PROXMOX_ENV_PATH`]: `KEY=value` lines of
/// [`PROXMOX_ENV_KEYS`].
pub fn proxmox_env(e: &Enrichment<'_>) -> String {
    let mut devices: Vec<&Interface> = e.interfaces.iter().collect();
    devices.sort_by_key(|i| i.index);
    let ipv4 = devices
        .iter()
        .flat_map(|i| i.addresses.iter())
        .find(|(a, _)| a.is_ipv4())
        .map(|(a, _)| a.to_string())
        .unwrap_or_default();
    let values = [
        e.hostname,
        e.zone,
        e.instance_id,
        e.provider_id,
        e.node,
        ipv4.as_str(),
    ];
    PROXMOX_ENV_KEYS
        .iter()
        .zip(values)
        .map(|(k, v)| format!("{k}={v}\n"))
        .collect()
}

fn list<'a>(
    doc: &'a mut Map<String, Value>,
    outer: &'static str,
    inner: &'static str,
    field: &'static str,
) -> Result<&'a mut Vec<Value>, IgnitionError> {
    let o = doc.entry(outer).or_insert(Value::Null);
    if o.is_null() {
        *o = Value::Object(Map::new());
    }
    let o = o.as_object_mut().ok_or(IgnitionError::Shape {
        field: outer,
        expected: "an object",
    })?;
    let l = o.entry(inner).or_insert(Value::Null);
    if l.is_null() {
        *l = Value::Array(Vec::new());
    }
    l.as_array_mut().ok_or(IgnitionError::Shape {
        field,
        expected: "a list",
    })
}

fn names(items: &[Value], key: &str) -> BTreeSet<String> {
    items
        .iter()
        .filter_map(|f| f.get(key).and_then(Value::as_str).map(String::from))
        .collect()
}

/// The config with the enrichment added (see the module doc), as compact
/// JSON.
///
/// # Errors
/// [`IgnitionError`] as [`check`].
pub fn enrich(data: &[u8], e: &Enrichment<'_>) -> Result<Vec<u8>, IgnitionError> {
    let (mut doc, spec) = parse(data)?;
    let mut devices: Vec<&Interface> = e.interfaces.iter().collect();
    devices.sort_by_key(|i| i.index);
    let file = |path: &str, text: &str| -> Value {
        let mut f = json!({
            "path": path,
            "mode": MODE_0644,
            "contents": {"source": data_url(text)},
        });
        if spec.major == 2 {
            f["filesystem"] = json!("root");
        } else {
            f["overwrite"] = json!(true);
        }
        f
    };
    let mut files = vec![
        file("/etc/hostname", &format!("{}\n", e.hostname)),
        file(PROXMOX_ENV_PATH, &proxmox_env(e)),
    ];
    let mut units = Vec::new();
    for i in &devices {
        let (name, text) = (networkd_unit_name(i), networkd_unit(i));
        if spec.major == 2 {
            units.push(json!({"name": name, "contents": text}));
        } else {
            files.push(file(&format!("/etc/systemd/network/{name}"), &text));
        }
    }
    let existing = list(&mut doc, "storage", "files", "storage.files")?;
    let taken = names(existing, "path");
    existing.extend(
        files
            .into_iter()
            .filter(|f| f["path"].as_str().is_some_and(|p| !taken.contains(p))),
    );
    if !units.is_empty() {
        let existing = list(&mut doc, "networkd", "units", "networkd.units")?;
        let taken = names(existing, "name");
        existing.extend(
            units
                .into_iter()
                .filter(|u| u["name"].as_str().is_some_and(|n| !taken.contains(n))),
        );
    }
    serde_json::to_vec(&Value::Object(doc)).map_err(|e| IgnitionError::NotJson(e.to_string()))
}

#[cfg(test)]
mod tests {
    use percent_encoding::percent_decode_str;
    use pve_client::options::MacAddr;

    use super::*;

    fn device() -> Interface {
        Interface {
            index: 0,
            mac: MacAddr::parse("BC:24:11:AA:BB:CC").unwrap(),
            addresses: vec![
                ("10.0.0.20".parse().unwrap(), 24),
                ("2001:db8:1::10".parse().unwrap(), 64),
            ],
            gateway4: Some("10.0.0.1".parse().unwrap()),
            gateway6: None,
            metric: Some(100),
            dns: vec!["10.0.0.53".parse().unwrap()],
            dhcp4: false,
            dhcp6: false,
        }
    }

    fn enrichment(interfaces: &[Interface]) -> Enrichment<'_> {
        Enrichment {
            hostname: "wl1-md-a-x7k2p",
            instance_id: "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
            provider_id: "proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
            zone: "dc-a",
            node: "pve-a1",
            interfaces,
        }
    }

    /// The text of a `data:,` URL.
    fn text(source: &Value) -> String {
        let s = source.as_str().unwrap();
        let body = s.strip_prefix("data:,").unwrap();
        percent_decode_str(body).decode_utf8().unwrap().into_owned()
    }

    fn file<'a>(doc: &'a Value, path: &str) -> &'a Value {
        doc["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["path"] == path)
            .unwrap_or_else(|| panic!("no file {path} in {doc}"))
    }

    const UNIT: &str = "[Match]\nMACAddress=bc:24:11:aa:bb:cc\n\n[Network]\n\
        Address=10.0.0.20/24\nAddress=2001:db8:1::10/64\nDNS=10.0.0.53\n\n\
        [Route]\nDestination=0.0.0.0/0\nGateway=10.0.0.1\nMetric=100\n";

    const ENV: &str = "COREOS_CUSTOM_HOSTNAME=wl1-md-a-x7k2p\nCOREOS_CUSTOM_ZONE=dc-a\n\
        COREOS_CUSTOM_INSTANCE_ID=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\n\
        COREOS_CUSTOM_PROVIDER_ID=proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\n\
        COREOS_CUSTOM_NODE=pve-a1\nCOREOS_CUSTOM_PRIVATE_IPV4=10.0.0.20\n";

    #[test]
    fn configs_that_cannot_be_used_are_named() {
        let cases: [(&[u8], IgnitionError); 7] = [
            (
                b"#cloud-config\n",
                IgnitionError::NotJson("expected value at line 1 column 1".into()),
            ),
            (b"[1]", IgnitionError::NotAnObject),
            (b"{\"storage\":{}}", IgnitionError::NoVersion),
            (b"{\"ignition\":{\"version\":3}}", IgnitionError::NoVersion),
            (
                b"{\"ignition\":{\"version\":\"1.0.0\"}}",
                IgnitionError::UnsupportedVersion("1.0.0".into()),
            ),
            (
                b"{\"ignition\":{\"version\":\"3\"}}",
                IgnitionError::UnsupportedVersion("3".into()),
            ),
            (
                b"{\"ignition\":{\"version\":\"3.4.0\"},\"storage\":{\"files\":{}}}",
                IgnitionError::Shape {
                    field: "storage.files",
                    expected: "a list",
                },
            ),
        ];
        for (data, want) in cases {
            assert_eq!(
                check(data),
                Err(want.clone()),
                "{}",
                String::from_utf8_lossy(data)
            );
            assert_eq!(enrich(data, &enrichment(&[])), Err(want));
        }
        assert_eq!(
            IgnitionError::NoVersion.to_string(),
            "no ignition.version (an Ignition config names its spec version)"
        );
        assert_eq!(
            check(b"{\"ignition\":{\"version\":\"2.3.0\"}}"),
            Ok(Spec {
                version: "2.3.0".into(),
                major: 2
            })
        );
    }

    #[test]
    fn spec3_gets_files_for_hostname_env_and_networkd() {
        let input = br#"{"ignition":{"version":"3.4.0"},"storage":{"files":[{"path":"/etc/capmox-e2e/machine","contents":{"source":"data:,x"}}]}}"#;
        let devices = [device()];
        let out: Value =
            serde_json::from_slice(&enrich(input, &enrichment(&devices)).unwrap()).unwrap();
        assert_eq!(out["ignition"]["version"], "3.4.0");
        let files = out["storage"]["files"].as_array().unwrap();
        let paths: Vec<&str> = files.iter().map(|f| f["path"].as_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/etc/capmox-e2e/machine",
                "/etc/hostname",
                "/etc/proxmox-env",
                "/etc/systemd/network/00-eth0.network"
            ]
        );
        let hostname = file(&out, "/etc/hostname");
        assert_eq!(text(&hostname["contents"]["source"]), "wl1-md-a-x7k2p\n");
        assert_eq!(hostname["mode"], 420);
        assert_eq!(hostname["overwrite"], true);
        assert!(hostname.get("filesystem").is_none());
        assert_eq!(
            text(&file(&out, "/etc/proxmox-env")["contents"]["source"]),
            ENV
        );
        assert_eq!(
            text(&file(&out, "/etc/systemd/network/00-eth0.network")["contents"]["source"]),
            UNIT
        );
        assert!(out.get("networkd").is_none());
    }

    #[test]
    fn spec2_gets_networkd_units_and_root_filesystem() {
        let input = br#"{"ignition":{"version":"2.3.0"},"systemd":{"units":[{"name":"kubeadm.service","enabled":true}]}}"#;
        let mut dhcp = device();
        dhcp.index = 1;
        dhcp.mac = MacAddr::parse("12:34:56:12:34:56").unwrap();
        dhcp.addresses.clear();
        dhcp.gateway4 = None;
        dhcp.dns.clear();
        dhcp.dhcp4 = true;
        dhcp.dhcp6 = true;
        let devices = [dhcp, device()];
        let out: Value =
            serde_json::from_slice(&enrich(input, &enrichment(&devices)).unwrap()).unwrap();
        assert_eq!(out["systemd"]["units"][0]["name"], "kubeadm.service");
        let units = out["networkd"]["units"].as_array().unwrap();
        assert_eq!(units.len(), 2);
        assert_eq!(units[0]["name"], "00-eth0.network");
        assert_eq!(units[0]["contents"], UNIT);
        assert_eq!(units[1]["name"], "01-eth1.network");
        assert_eq!(
            units[1]["contents"],
            "[Match]\nMACAddress=12:34:56:12:34:56\n\n[Network]\nDHCP=yes\n"
        );
        let hostname = file(&out, "/etc/hostname");
        assert_eq!(hostname["filesystem"], "root");
        assert!(hostname.get("overwrite").is_none());
        // The lowest device's first IPv4 address, whatever the input order.
        assert!(
            text(&file(&out, "/etc/proxmox-env")["contents"]["source"])
                .ends_with("COREOS_CUSTOM_PRIVATE_IPV4=10.0.0.20\n")
        );
    }

    #[test]
    fn what_the_config_already_has_is_kept() {
        let input = br#"{"ignition":{"version":"3.0.0"},"storage":{"files":[{"path":"/etc/hostname","contents":{"source":"data:,mine"}}]}}"#;
        let out: Value = serde_json::from_slice(&enrich(input, &enrichment(&[])).unwrap()).unwrap();
        let hostnames: Vec<&Value> = out["storage"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["path"] == "/etc/hostname")
            .collect();
        assert_eq!(hostnames.len(), 1);
        assert_eq!(hostnames[0]["contents"]["source"], "data:,mine");
        // No devices: no private IPv4, the key is there, empty.
        assert!(
            text(&file(&out, "/etc/proxmox-env")["contents"]["source"])
                .ends_with("COREOS_CUSTOM_PRIVATE_IPV4=\n")
        );
    }

    #[test]
    fn data_urls_escape_everything_but_letters_and_digits() {
        assert_eq!(data_url("a b\n%"), "data:,a%20b%0A%25");
    }
}
