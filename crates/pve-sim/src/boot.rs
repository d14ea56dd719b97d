//! How the simulated guest OS takes its bootstrap data from the NoCloud seed
//! ISO, and, for an Ignition guest, its network.
//!
//! - `user-data` that is JSON is read as Ignition reads it on Proxmox VE
//!   (platform `proxmoxve`): an object with an `ignition.version` string is
//!   applied ([`GuestBoot::Ignition`]); any other JSON fails the boot
//!   ([`GuestBoot::Failed`]: Ignition stops in the initramfs, the bootstrap
//!   never runs, so the sentinel file is never written).
//! - Anything else is cloud-init's ([`GuestBoot::CloudInit`]).
//!
//! An Ignition guest's network is what systemd-networkd makes of the units
//! the config writes (spec 2.x `networkd.units`, spec 3.x files
//! `/etc/systemd/network/*.network` with `data:,` URL contents): `[Match]
//! MACAddress=`, `Address=` lines, `DHCP=` (`yes`, `true`, `ipv4`, `both`:
//! an IPv4 lease). A device no unit matches gets DHCP, as Flatcar's default
//! `zz-default.network` does. The cloud-init `network-config` plays no part.

use serde_json::Value;

use crate::guest::{Nic, NicPlan};

/// What the guest OS did with its seed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestBoot {
    /// No seed ISO attached: the image's own configuration.
    NoSeed,
    /// cloud-init took `user-data`.
    CloudInit,
    /// Ignition applied a config of this spec version.
    Ignition(String),
    /// The OS could not use `user-data`: why.
    Failed(String),
}

impl std::fmt::Display for GuestBoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GuestBoot::NoSeed => write!(f, "no seed"),
            GuestBoot::CloudInit => write!(f, "cloud-init"),
            GuestBoot::Ignition(v) => write!(f, "ignition {v}"),
            GuestBoot::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// The parsed `user-data`, when it is JSON.
fn json_of(user_data: &str) -> Option<Result<Value, String>> {
    let t = user_data.trim_start();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return None;
    }
    Some(serde_json::from_str(t).map_err(|e| e.to_string()))
}

/// How the guest boots with `user_data`.
pub fn classify(user_data: &str) -> GuestBoot {
    match json_of(user_data) {
        None => GuestBoot::CloudInit,
        Some(Err(e)) => GuestBoot::Failed(format!("Ignition: user-data is not valid JSON: {e}")),
        Some(Ok(v)) => match v
            .get("ignition")
            .and_then(|i| i.get("version"))
            .and_then(Value::as_str)
        {
            Some(version) => GuestBoot::Ignition(version.to_string()),
            None => GuestBoot::Failed("Ignition: the config has no ignition.version".into()),
        },
    }
}

/// The text of an RFC 2397 `data:` URL (`data:,<percent-encoded>`; a
/// `;base64` URL is not read).
fn data_url_text(source: &str) -> Option<String> {
    let body = source.strip_prefix("data:")?;
    let (meta, data) = body.split_once(',')?;
    if meta.ends_with(";base64") {
        return None;
    }
    percent_encoding::percent_decode_str(data)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The text of file `path` an Ignition `user_data` writes
/// (`storage.files[].contents.source` as a `data:,` URL); `None` when
/// `user_data` is not an Ignition config or has no such file.
pub fn ignition_file(user_data: &str, path: &str) -> Option<String> {
    let Some(Ok(config)) = json_of(user_data) else {
        return None;
    };
    config
        .get("storage")?
        .get("files")?
        .as_array()?
        .iter()
        .find(|f| f.get("path").and_then(Value::as_str) == Some(path))?
        .get("contents")?
        .get("source")?
        .as_str()
        .and_then(data_url_text)
}

/// The `.network` unit texts an Ignition config writes.
fn network_units(config: &Value) -> Vec<String> {
    let mut out: Vec<String> = config
        .get("networkd")
        .and_then(|n| n.get("units"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|u| {
            u.get("name")
                .and_then(Value::as_str)
                .is_some_and(|n| n.ends_with(".network"))
        })
        .filter_map(|u| u.get("contents").and_then(Value::as_str).map(String::from))
        .collect();
    out.extend(
        config
            .get("storage")
            .and_then(|s| s.get("files"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|f| {
                f.get("path").and_then(Value::as_str).is_some_and(|p| {
                    p.starts_with("/etc/systemd/network/") && p.ends_with(".network")
                })
            })
            .filter_map(|f| {
                f.get("contents")
                    .and_then(|c| c.get("source"))
                    .and_then(Value::as_str)
                    .and_then(data_url_text)
            }),
    );
    out
}

/// One unit: the MAC it matches and the plan it gives.
fn unit_plan(text: &str) -> Option<(String, NicPlan)> {
    let mut mac = None;
    let mut plan = NicPlan::default();
    for line in text.lines().map(str::trim) {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        match k.trim() {
            "MACAddress" => mac = Some(v.trim().to_ascii_lowercase()),
            "Address" => {
                if let Some((a, p)) = v.trim().split_once('/')
                    && let (Ok(a), Ok(p)) = (a.parse(), p.parse())
                {
                    plan.statics.push((a, p));
                }
            }
            "DHCP" => {
                plan.dhcp4 = matches!(v.trim(), "yes" | "true" | "ipv4" | "both");
            }
            _ => {}
        }
    }
    Some((mac?, plan))
}

/// The plans of `nics` under an Ignition `user_data`: each NIC from the
/// unit matching its MAC, else DHCP. `None` when `user_data` is not an
/// Ignition config.
pub(crate) fn ignition_plans(user_data: &str, nics: &[Nic]) -> Option<Vec<NicPlan>> {
    let Some(Ok(config)) = json_of(user_data) else {
        return None;
    };
    config.get("ignition")?.get("version")?.as_str()?;
    let units: Vec<(String, NicPlan)> = network_units(&config)
        .iter()
        .filter_map(|t| unit_plan(t))
        .collect();
    Some(
        nics.iter()
            .map(|n| {
                units
                    .iter()
                    .find(|(mac, _)| mac.eq_ignore_ascii_case(&n.mac))
                    .map(|(_, p)| p.clone())
                    .unwrap_or(NicPlan {
                        dhcp4: true,
                        ..NicPlan::default()
                    })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nics() -> Vec<Nic> {
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
    fn user_data_decides_how_the_guest_boots() {
        assert_eq!(
            classify("#cloud-config\nruncmd: []\n"),
            GuestBoot::CloudInit
        );
        assert_eq!(
            classify(r#"{"ignition":{"version":"3.4.0"}}"#),
            GuestBoot::Ignition("3.4.0".into())
        );
        assert_eq!(
            classify(r#"{"storage":{}}"#),
            GuestBoot::Failed("Ignition: the config has no ignition.version".into())
        );
        assert!(matches!(classify("{ nope"), GuestBoot::Failed(_)));
        assert_eq!(
            GuestBoot::Ignition("2.3.0".into()).to_string(),
            "ignition 2.3.0"
        );
    }

    #[test]
    fn spec3_files_and_spec2_units_configure_by_mac_others_get_dhcp() {
        // spec 3.x: a file under /etc/systemd/network with a data URL.
        let unit = "[Match]\nMACAddress=bc:24:11:00:00:02\n\n[Network]\nAddress=10.10.0.7/24\nDNS=1.1.1.1\n";
        let encoded: String = unit
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    char::from(b).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        let v3 = serde_json::json!({
            "ignition": {"version": "3.4.0"},
            "storage": {"files": [
                {"path": "/etc/hostname", "contents": {"source": "data:,m1"}},
                {"path": "/etc/systemd/network/01-eth1.network",
                 "contents": {"source": format!("data:,{encoded}")}}
            ]}
        })
        .to_string();
        let plans = ignition_plans(&v3, &nics()).unwrap();
        assert!(plans[0].dhcp4 && plans[0].statics.is_empty());
        assert_eq!(plans[1].statics, vec![("10.10.0.7".parse().unwrap(), 24)]);
        assert_eq!(ignition_file(&v3, "/etc/hostname").as_deref(), Some("m1"));
        assert_eq!(ignition_file(&v3, "/etc/other"), None);
        assert!(!plans[1].dhcp4);

        // spec 2.x: networkd.units.
        let v2 = serde_json::json!({
            "ignition": {"version": "2.3.0"},
            "networkd": {"units": [
                {"name": "00-eth0.network",
                 "contents": "[Match]\nMACAddress=BC:24:11:00:00:01\n[Network]\nDHCP=yes\n"}
            ]}
        })
        .to_string();
        let plans = ignition_plans(&v2, &nics()).unwrap();
        assert!(plans[0].dhcp4 && plans[0].statics.is_empty());
        assert!(plans[1].dhcp4);

        assert_eq!(ignition_plans("#cloud-config\n", &nics()), None);
        assert_eq!(ignition_plans(r#"{"storage":{}}"#, &nics()), None);
    }
}
