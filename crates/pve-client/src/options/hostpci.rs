//! `hostpci[n]`: a host PCI device passed through to the VM, format
//! `pve-qm-hostpci`: `[[host=]<HOSTPCIID[;HOSTPCIID2...]>] [,mapping=<id>]
//! [,mdev=<type>] [,pcie=<1|0>] [,rombar=<1|0>] [,x-vga=<1|0>] …`.
//!
//! A device is named either by its raw host address (`host=0000:01:00.0`,
//! which differs per node and needs `root@pam`) or by a cluster-wide
//! resource mapping (`mapping=<id>`, `GET /cluster/mapping/pci`), which a
//! token may use with `Mapping.Use` on `/mapping/pci/<id>`; never both.
//! `pcie=1` needs the `q35` machine type; `x-vga=1` makes the device the
//! VM's primary GPU; `mdev=<type>` asks for a mediated device of that type
//! (vGPU) instead of the whole device.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::propstr::{check_value, fmt_bool, join, parse_bool, split};
use crate::error::ParseError;

const WHAT: &str = "hostpci property string";

/// Highest index of `hostpci[n]`.
pub const MAX_HOSTPCI_INDEX: u8 = 15;

/// Whether `id` is a Proxmox configuration id (`pve-configid`: a letter,
/// then letters, digits, `-` and `_`), the format of mapping ids.
pub fn is_config_id(id: &str) -> bool {
    let mut c = id.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic())
        && c.all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
}

/// A `hostpci[n]` value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostPci {
    /// `host` (the default key): raw host PCI ids, verbatim.
    pub host: Option<String>,
    /// `mapping`: a resource mapping id.
    pub mapping: Option<String>,
    /// `pcie`: attach on the PCI Express bus (needs `q35`).
    pub pcie: Option<bool>,
    /// `rombar`: show the device's ROM to the guest (Proxmox default 1).
    pub rombar: Option<bool>,
    /// `x-vga`: the VM's primary GPU.
    pub x_vga: Option<bool>,
    /// `mdev`: the mediated device type (e.g. `nvidia-63`).
    pub mdev: Option<String>,
    /// Every other sub-option (`romfile`, `legacy-igd`, `driver`,
    /// `vendor-id`, …), verbatim.
    pub extra: BTreeMap<String, String>,
}

impl HostPci {
    /// A device of resource mapping `id`.
    pub fn mapped(id: impl Into<String>) -> Self {
        Self {
            mapping: Some(id.into()),
            ..Self::default()
        }
    }

    /// Parses a `hostpci[n]` value (syntax only; see [`HostPci::validate`]).
    ///
    /// # Errors
    /// [`ParseError`] for malformed booleans or an empty value.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut d = Self::default();
        for (k, v) in split(s, WHAT, Some("host"))? {
            match k.as_str() {
                "host" => d.host = Some(v),
                "mapping" => d.mapping = Some(v),
                "pcie" => d.pcie = Some(parse_bool(WHAT, &k, &v)?),
                "rombar" => d.rombar = Some(parse_bool(WHAT, &k, &v)?),
                "x-vga" => d.x_vga = Some(parse_bool(WHAT, &k, &v)?),
                "mdev" => d.mdev = Some(v),
                _ => {
                    d.extra.insert(k, v);
                }
            }
        }
        Ok(d)
    }

    /// Checks what Proxmox checks: exactly one of `host` and `mapping`, a
    /// mapping id in `pve-configid` form, an `mdev` type without `/`, `.`
    /// or `:`.
    ///
    /// # Errors
    /// [`ParseError`] naming the problem.
    pub fn validate(&self) -> Result<(), ParseError> {
        match (&self.host, &self.mapping) {
            (Some(_), Some(_)) => {
                return Err(ParseError::new(
                    WHAT,
                    self.to_string(),
                    "'host' and 'mapping' cannot be set at the same time",
                ));
            }
            (None, None) => {
                return Err(ParseError::new(
                    WHAT,
                    self.to_string(),
                    "either 'host' or 'mapping' must be set",
                ));
            }
            _ => {}
        }
        if let Some(m) = &self.mapping
            && !is_config_id(m)
        {
            return Err(ParseError::new(
                "PCI mapping id",
                m,
                "must start with a letter and contain only letters, digits, '-' and '_'",
            ));
        }
        if let Some(t) = &self.mdev
            && (t.is_empty() || t.contains(['/', '.', ':', ',', ';']))
        {
            return Err(ParseError::new(
                "mediated device type",
                t,
                "must not be empty or contain '/', '.', ':', ',' or ';'",
            ));
        }
        for (k, v) in &self.extra {
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }
}

impl fmt::Display for HostPci {
    /// `host` bare first, then the other keys alphabetically.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest: BTreeMap<&str, String> = self
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        if let Some(m) = &self.mapping {
            rest.insert("mapping", m.clone());
        }
        if let Some(m) = &self.mdev {
            rest.insert("mdev", m.clone());
        }
        for (k, v) in [
            ("pcie", self.pcie),
            ("rombar", self.rombar),
            ("x-vga", self.x_vga),
        ] {
            if let Some(b) = v {
                rest.insert(k, fmt_bool(b).to_string());
            }
        }
        let head = self.host.clone().map(|h| (None, h));
        f.write_str(&join(
            head.into_iter()
                .chain(rest.into_iter().map(|(k, v)| (Some(k), v))),
        ))
    }
}

impl FromStr for HostPci {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mapped_devices() {
        let d = HostPci::parse("mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1").unwrap();
        assert_eq!(d.mapping.as_deref(), Some("nvidia-a100"));
        assert_eq!(
            (d.pcie, d.rombar, d.x_vga),
            (Some(true), Some(false), Some(true))
        );
        assert!(d.validate().is_ok());
        assert_eq!(d.to_string(), "mapping=nvidia-a100,pcie=1,rombar=0,x-vga=1");
        let mut m = HostPci::mapped("grid");
        m.mdev = Some("nvidia-63".into());
        assert_eq!(m.to_string(), "mapping=grid,mdev=nvidia-63");
        assert_eq!(HostPci::parse(&m.to_string()).unwrap(), m);
    }

    #[test]
    fn raw_host_ids_are_kept() {
        let d = HostPci::parse("0000:01:00.0;0000:01:00.1,pcie=1,romfile=x.rom").unwrap();
        assert_eq!(d.host.as_deref(), Some("0000:01:00.0;0000:01:00.1"));
        assert_eq!(d.extra["romfile"], "x.rom");
        assert!(d.validate().is_ok());
        assert_eq!(
            d.to_string(),
            "0000:01:00.0;0000:01:00.1,pcie=1,romfile=x.rom"
        );
    }

    #[test]
    fn refusals() {
        assert!(HostPci::default().validate().is_err());
        assert!(
            HostPci::parse("0000:01:00.0,mapping=gpu")
                .unwrap()
                .validate()
                .is_err()
        );
        assert!(HostPci::mapped("1gpu").validate().is_err());
        assert!(HostPci::mapped("gpu a").validate().is_err());
        let mut m = HostPci::mapped("gpu");
        m.mdev = Some("a/b".into());
        assert!(m.validate().is_err());
        assert!(HostPci::parse("mapping=gpu,pcie=yes-please").is_err());
        assert!(is_config_id("gpu_A-1") && !is_config_id("-gpu") && !is_config_id(""));
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            id in "[a-z][a-z0-9_-]{0,15}",
            pcie in proptest::option::of(any::<bool>()),
            rombar in proptest::option::of(any::<bool>()),
            x_vga in proptest::option::of(any::<bool>()),
            mdev in proptest::option::of("[a-z0-9-]{1,12}"),
        ) {
            let d = HostPci { mapping: Some(id), pcie, rombar, x_vga, mdev, ..HostPci::default() };
            prop_assert!(d.validate().is_ok());
            prop_assert_eq!(HostPci::parse(&d.to_string()).unwrap(), d);
        }
    }
}
