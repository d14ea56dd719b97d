//! `smbios1`: SMBIOS type 1 fields; the `uuid` is the VM's stable identity.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::propstr::{check_value, fmt_bool, join, parse_bool, split};
use crate::error::ParseError;

const WHAT: &str = "smbios1 property string";

/// An `smbios1` value (PVE format `pve-qm-smbios1`: `[base64=<1|0>]
/// [,family=…] [,manufacturer=…] [,product=…] [,serial=…] [,sku=…]
/// [,uuid=<UUID>] [,version=…]`). Proxmox generates a fresh `uuid` for every
/// new VM and clone; it is what the guest sees as its product UUID (and what a
/// `proxmox://<uuid>` providerID is built from). Printed lower-case and
/// hyphenated, keys alphabetical.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Smbios1 {
    /// The system UUID.
    pub uuid: Option<uuid::Uuid>,
    /// Whether the other string fields are base64-encoded.
    pub base64: Option<bool>,
    /// `family`, `manufacturer`, `product`, `serial`, `sku`, `version`,
    /// verbatim (base64 when `base64=1`).
    pub fields: BTreeMap<String, String>,
}

const FIELDS: [&str; 6] = [
    "family",
    "manufacturer",
    "product",
    "serial",
    "sku",
    "version",
];

impl Smbios1 {
    /// Parses an `smbios1` value.
    ///
    /// # Errors
    /// [`ParseError`] for unknown keys or a malformed UUID.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut out = Self::default();
        for (k, v) in split(s, WHAT, None)? {
            match k.as_str() {
                "uuid" => {
                    let ok = v.len() == 36 && v.bytes().filter(|b| *b == b'-').count() == 4;
                    let u = uuid::Uuid::parse_str(&v)
                        .ok()
                        .filter(|_| ok)
                        .ok_or_else(|| ParseError::new(WHAT, s, format!("'{v}' is not a UUID")))?;
                    out.uuid = Some(u);
                }
                "base64" => out.base64 = Some(parse_bool(WHAT, "base64", &v)?),
                _ if FIELDS.contains(&k.as_str()) => {
                    out.fields.insert(k, v);
                }
                _ => return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'"))),
            }
        }
        Ok(out)
    }

    /// Checks field names and values.
    ///
    /// # Errors
    /// [`ParseError`] naming the field.
    pub fn validate(&self) -> Result<(), ParseError> {
        for (k, v) in &self.fields {
            if !FIELDS.contains(&k.as_str()) {
                return Err(ParseError::new(WHAT, k.clone(), "unknown smbios1 field"));
            }
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }
}

impl fmt::Display for Smbios1 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut all: BTreeMap<&str, String> = BTreeMap::new();
        if let Some(b) = self.base64 {
            all.insert("base64", fmt_bool(b).to_owned());
        }
        if let Some(u) = self.uuid {
            all.insert("uuid", u.hyphenated().to_string());
        }
        for (k, v) in &self.fields {
            all.insert(k, v.clone());
        }
        f.write_str(&join(all.into_iter().map(|(k, v)| (Some(k), v))))
    }
}

impl FromStr for Smbios1 {
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
    fn parses_generated_value() {
        let s = "uuid=2f1b6c1e-9a7d-4c61-b0e3-5a8d2c4f7e90";
        let m = Smbios1::parse(s).unwrap();
        assert_eq!(
            m.uuid.unwrap().to_string(),
            "2f1b6c1e-9a7d-4c61-b0e3-5a8d2c4f7e90"
        );
        assert_eq!(m.to_string(), s);
        let up = Smbios1::parse("uuid=2F1B6C1E-9A7D-4C61-B0E3-5A8D2C4F7E90").unwrap();
        assert_eq!(up, m);
    }

    #[test]
    fn keeps_other_fields_sorted() {
        let m = Smbios1::parse(
            "uuid=2f1b6c1e-9a7d-4c61-b0e3-5a8d2c4f7e90,base64=1,serial=YWJj,manufacturer=UFZF",
        )
        .unwrap();
        assert_eq!(
            m.to_string(),
            "base64=1,manufacturer=UFZF,serial=YWJj,uuid=2f1b6c1e-9a7d-4c61-b0e3-5a8d2c4f7e90"
        );
    }

    #[test]
    fn refuses_invalid() {
        for bad in [
            "uuid=xyz",
            "uuid=2f1b6c1e9a7d4c61b0e35a8d2c4f7e90",
            "color=red",
            "base64=2",
        ] {
            assert!(Smbios1::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            uuid in proptest::option::of(any::<u128>()),
            base64 in proptest::option::of(any::<bool>()),
            fields in proptest::collection::btree_map("(family|manufacturer|product|serial|sku|version)", "[A-Za-z0-9+/]{1,12}={0,2}", 0..4),
        ) {
            let m = Smbios1 { uuid: uuid.map(uuid::Uuid::from_u128), base64, fields };
            let s = m.to_string();
            prop_assert_eq!(Smbios1::parse(&s).unwrap(), m);
        }
    }
}
