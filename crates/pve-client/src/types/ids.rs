//! `VmId`, `NodeName`, `StorageId`, `PoolId`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::ParseError;

/// A VMID: 100 ..= 999 999 999 (PVE format `pve-vmid`: 3–9 digits, no leading
/// zero). Unique inside one Proxmox cluster only.
///
/// Deserialises from a JSON number or a numeric string (Proxmox sends both).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VmId(u32);

impl VmId {
    /// Smallest valid VMID.
    pub const MIN: u32 = 100;
    /// Largest valid VMID.
    pub const MAX: u32 = 999_999_999;

    /// Checks the range 100 ..= 999 999 999.
    ///
    /// # Errors
    /// [`ParseError`] when the number is outside the range.
    pub fn new(id: u32) -> Result<Self, ParseError> {
        if (Self::MIN..=Self::MAX).contains(&id) {
            Ok(Self(id))
        } else {
            Err(ParseError::new(
                "VMID",
                id.to_string(),
                "must be between 100 and 999999999",
            ))
        }
    }

    /// The number.
    pub fn get(self) -> u32 {
        self.0
    }
}

impl fmt::Debug for VmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "VmId({})", self.0)
    }
}

impl fmt::Display for VmId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl FromStr for VmId {
    type Err = ParseError;

    /// Parses `[1-9][0-9]{2,8}` (no sign, no leading zero, no spaces).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let ok = (3..=9).contains(&s.len())
            && s.bytes().all(|b| b.is_ascii_digit())
            && !s.starts_with('0');
        if !ok {
            return Err(ParseError::new(
                "VMID",
                s,
                "expected 3 to 9 digits without a leading zero",
            ));
        }
        let n: u32 = s
            .parse()
            .map_err(|_| ParseError::new("VMID", s, "not a number"))?;
        Self::new(n)
    }
}

impl TryFrom<u32> for VmId {
    type Error = ParseError;
    fn try_from(value: u32) -> Result<Self, Self::Error> {
        Self::new(value)
    }
}

impl From<VmId> for u32 {
    fn from(v: VmId) -> u32 {
        v.0
    }
}

impl Serialize for VmId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u32(self.0)
    }
}

impl<'de> Deserialize<'de> for VmId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = crate::types::lenient::NumOrStr::deserialize(d)?;
        let n = v.as_u64().map_err(serde::de::Error::custom)?;
        let n = u32::try_from(n).map_err(|_| serde::de::Error::custom("VMID out of range"))?;
        VmId::new(n).map_err(serde::de::Error::custom)
    }
}

/// Defines a validated string newtype with `as_str`, `Display`, `FromStr`,
/// serde in both directions (deserialising validates).
macro_rules! string_id {
    ($(#[$meta:meta])* $name:ident, $what:literal, $check:path) => {
        $(#[$meta])*
        #[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps the value.
            ///
            /// # Errors
            #[doc = concat!("[`ParseError`] when the value is not a valid ", $what, ".")]
            pub fn new(value: impl Into<String>) -> Result<Self, ParseError> {
                let value = value.into();
                match $check(&value) {
                    Ok(()) => Ok(Self(value)),
                    Err(reason) => Err(ParseError::new($what, value, reason)),
                }
            }

            /// The value as sent to Proxmox.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl FromStr for $name {
            type Err = ParseError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                Self::new(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&self.0)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

string_id!(
    /// A cluster node name (PVE format `pve-node`:
    /// `[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?`). Used in every
    /// `/nodes/{node}/…` path; a wrong node for a VM yields "does not exist".
    NodeName,
    "node name",
    check_node
);

string_id!(
    /// A storage identifier (PVE format `pve-storage-id`:
    /// `[a-z][a-z0-9_.-]*[a-z0-9]`, case-insensitive, at least 2 characters),
    /// e.g. `local-lvm`, `ceph`.
    StorageId,
    "storage ID",
    check_storage
);

string_id!(
    /// A resource pool id (PVE format `pve-poolid`: `[A-Za-z0-9.\-_]+` with up
    /// to two `/`-separated nested levels, PVE ≥ 8.1).
    PoolId,
    "pool ID",
    check_pool
);

string_id!(
    /// A configuration id (PVE format `pve-configid`: `[a-z][a-z0-9_-]+`):
    /// the name of an HA group (PVE 8) or an HA rule (PVE 9).
    ConfigId,
    "configuration ID",
    check_config_id
);

fn check_config_id(s: &str) -> Result<(), &'static str> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err("must be at least 2 characters");
    }
    if !b[0].is_ascii_lowercase() {
        return Err("must start with a lower-case letter");
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'_' | b'-'))
    {
        return Err("only lower-case letters, digits, '_' and '-' are allowed");
    }
    Ok(())
}

fn check_node(s: &str) -> Result<(), &'static str> {
    let b = s.as_bytes();
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return Err("must not be empty");
    };
    if !first.is_ascii_alphanumeric() || !last.is_ascii_alphanumeric() {
        return Err("must start and end with a letter or digit");
    }
    if !b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-') {
        return Err("only letters, digits and '-' are allowed");
    }
    Ok(())
}

fn check_storage(s: &str) -> Result<(), &'static str> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err("must be at least 2 characters");
    }
    let (Some(first), Some(last)) = (b.first(), b.last()) else {
        return Err("must be at least 2 characters");
    };
    if !first.is_ascii_alphabetic() {
        return Err("must start with a letter");
    }
    if !last.is_ascii_alphanumeric() {
        return Err("must end with a letter or digit");
    }
    if !b
        .iter()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
    {
        return Err("only letters, digits, '_', '.' and '-' are allowed");
    }
    Ok(())
}

fn check_pool(s: &str) -> Result<(), &'static str> {
    let parts: Vec<&str> = s.split('/').collect();
    if parts.len() > 3 {
        return Err("at most 3 nested levels");
    }
    for p in parts {
        if p.is_empty() {
            return Err("empty path segment");
        }
        if !p
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'-' | b'_'))
        {
            return Err("only letters, digits, '.', '-' and '_' are allowed");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vmid_range_and_format() {
        assert_eq!("100".parse::<VmId>().unwrap().get(), 100);
        assert_eq!("999999999".parse::<VmId>().unwrap().get(), 999_999_999);
        for bad in [
            "99",
            "0100",
            "1000000000",
            "",
            "12a",
            "+100",
            " 100",
            "-100",
        ] {
            assert!(bad.parse::<VmId>().is_err(), "{bad:?} must be refused");
        }
        assert!(VmId::new(99).is_err());
        assert!(VmId::new(1_000_000_000).is_err());
    }

    #[test]
    fn vmid_deserialises_from_number_or_string() {
        let a: VmId = serde_json::from_str("105").unwrap();
        let b: VmId = serde_json::from_str("\"105\"").unwrap();
        assert_eq!(a, b);
        assert_eq!(a.get(), 105);
        assert!(serde_json::from_str::<VmId>("\"\"").is_err());
        assert!(serde_json::from_str::<VmId>("42").is_err());
        assert_eq!(serde_json::to_string(&a).unwrap(), "105");
    }

    #[test]
    fn node_names() {
        for ok in ["pve", "pve-a1", "N1", "a"] {
            assert!(NodeName::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "-pve", "pve-", "pve_a", "pve.example", "pve a"] {
            assert!(NodeName::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn storage_ids() {
        for ok in ["local", "local-lvm", "ceph", "nfs.iso_1", "Ab"] {
            assert!(StorageId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a", "1local", "local-", "loc al", "local:lvm"] {
            assert!(StorageId::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn config_ids() {
        for ok in ["capmox", "k8s-cp", "ha_1", "ab"] {
            assert!(ConfigId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a", "1ha", "Capmox", "ha.x", "ha x", "-ha"] {
            assert!(ConfigId::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn pool_ids() {
        for ok in ["capi", "team/capi", "a/b/c", "k8s.prod-1_x"] {
            assert!(PoolId::new(ok).is_ok(), "{ok}");
        }
        for bad in ["", "a/b/c/d", "a//b", "a b", "/a"] {
            assert!(PoolId::new(bad).is_err(), "{bad:?}");
        }
    }
}
