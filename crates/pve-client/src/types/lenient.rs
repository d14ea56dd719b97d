//! Lenient deserialisers for Proxmox's loosely typed JSON.
//!
//! The same field may arrive as a JSON number, a numeric string, `0`/`1`, `""`
//! or `null` depending on endpoint and PVE version (docs/proxmox-semantics.md §1). These
//! helpers are used with `#[serde(deserialize_with = …, default)]` on every
//! numeric or boolean field the client reads.

use serde::{Deserialize, Deserializer};

/// Any JSON scalar Proxmox uses for a number or a flag.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(crate) enum NumOrStr {
    /// Unsigned integer.
    U(u64),
    /// Negative integer.
    I(i64),
    /// Floating point number.
    F(f64),
    /// Boolean.
    B(bool),
    /// String (numeric, empty, or anything else).
    S(String),
}

impl NumOrStr {
    /// Interprets the value as a non-negative integer.
    pub(crate) fn as_u64(&self) -> Result<u64, String> {
        match self {
            NumOrStr::U(u) => Ok(*u),
            NumOrStr::I(i) => u64::try_from(*i).map_err(|_| format!("negative number {i}")),
            NumOrStr::F(f) if f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64 => {
                // Exact: the value is integral and in range.
                Ok(*f as u64)
            }
            NumOrStr::F(f) => Err(format!("expected an integer, got {f}")),
            NumOrStr::B(b) => Ok(u64::from(*b)),
            NumOrStr::S(s) => s
                .trim()
                .parse::<u64>()
                .map_err(|_| format!("expected an integer, got {s:?}")),
        }
    }

    fn as_f64(&self) -> Result<f64, String> {
        match self {
            NumOrStr::U(u) => Ok(*u as f64),
            NumOrStr::I(i) => Ok(*i as f64),
            NumOrStr::F(f) => Ok(*f),
            NumOrStr::B(b) => Ok(if *b { 1.0 } else { 0.0 }),
            NumOrStr::S(s) => s
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("expected a number, got {s:?}")),
        }
    }

    fn is_empty_string(&self) -> bool {
        matches!(self, NumOrStr::S(s) if s.trim().is_empty())
    }

    fn as_bool(&self) -> Result<bool, String> {
        match self {
            NumOrStr::B(b) => Ok(*b),
            NumOrStr::U(u) => Ok(*u != 0),
            NumOrStr::I(i) => Ok(*i != 0),
            NumOrStr::F(f) => Ok(*f != 0.0),
            NumOrStr::S(s) => match s.trim() {
                "" | "0" | "false" | "no" | "off" => Ok(false),
                "1" | "true" | "yes" | "on" => Ok(true),
                other => Err(format!("expected a boolean, got {other:?}")),
            },
        }
    }
}

/// `null`, `""` or absent → `None`; number or numeric string → `Some(n)`.
pub(crate) fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v: Option<NumOrStr> = Option::deserialize(d)?;
    match v {
        None => Ok(None),
        Some(v) if v.is_empty_string() => Ok(None),
        Some(v) => v.as_u64().map(Some).map_err(serde::de::Error::custom),
    }
}

/// Like [`opt_u64`] for `u32` fields (pid, cores, counts).
pub(crate) fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    match opt_u64(d)? {
        None => Ok(None),
        Some(n) => u32::try_from(n)
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("{n} does not fit in 32 bits"))),
    }
}

/// `null`, `""` or absent → `None`; number or numeric string → `Some(x)`.
pub(crate) fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v: Option<NumOrStr> = Option::deserialize(d)?;
    match v {
        None => Ok(None),
        Some(v) if v.is_empty_string() => Ok(None),
        Some(v) => v.as_f64().map(Some).map_err(serde::de::Error::custom),
    }
}

/// `true`/`false`, `1`/`0`, `"1"`/`"0"`; `null`, `""` or absent → `false`.
pub(crate) fn bool01<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let v: Option<NumOrStr> = Option::deserialize(d)?;
    match v {
        None => Ok(false),
        Some(v) => v.as_bool().map_err(serde::de::Error::custom),
    }
}

/// A string that may arrive as a number; `null` or `""` → `None`.
pub(crate) fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v: Option<NumOrStr> = Option::deserialize(d)?;
    Ok(match v {
        None => None,
        Some(NumOrStr::S(s)) if s.is_empty() => None,
        Some(NumOrStr::S(s)) => Some(s),
        Some(NumOrStr::U(u)) => Some(u.to_string()),
        Some(NumOrStr::I(i)) => Some(i.to_string()),
        Some(NumOrStr::F(f)) => Some(f.to_string()),
        Some(NumOrStr::B(b)) => Some(if b { "1" } else { "0" }.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Deserialize, Debug, PartialEq)]
    struct T {
        #[serde(default, deserialize_with = "opt_u64")]
        n: Option<u64>,
        #[serde(default, deserialize_with = "bool01")]
        b: bool,
        #[serde(default, deserialize_with = "opt_string")]
        s: Option<String>,
        #[serde(default, deserialize_with = "opt_f64")]
        f: Option<f64>,
    }

    fn t(json: &str) -> T {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn numbers_in_every_encoding() {
        assert_eq!(t(r#"{"n": 2048}"#).n, Some(2048));
        assert_eq!(t(r#"{"n": "2048"}"#).n, Some(2048));
        assert_eq!(t(r#"{"n": 2048.0}"#).n, Some(2048));
        assert_eq!(t(r#"{"n": ""}"#).n, None);
        assert_eq!(t(r#"{"n": null}"#).n, None);
        assert_eq!(t(r#"{}"#).n, None);
        assert!(serde_json::from_str::<T>(r#"{"n": "abc"}"#).is_err());
        assert!(serde_json::from_str::<T>(r#"{"n": -1}"#).is_err());
        assert_eq!(t(r#"{"f": "0.25"}"#).f, Some(0.25));
        assert_eq!(t(r#"{"f": 1}"#).f, Some(1.0));
    }

    #[test]
    fn booleans_in_every_encoding() {
        assert!(t(r#"{"b": 1}"#).b);
        assert!(t(r#"{"b": "1"}"#).b);
        assert!(t(r#"{"b": true}"#).b);
        assert!(!t(r#"{"b": 0}"#).b);
        assert!(!t(r#"{"b": ""}"#).b);
        assert!(!t(r#"{"b": null}"#).b);
        assert!(!t(r#"{}"#).b);
        assert!(serde_json::from_str::<T>(r#"{"b": "maybe"}"#).is_err());
    }

    #[test]
    fn strings_that_may_be_numbers() {
        assert_eq!(t(r#"{"s": 105}"#).s.as_deref(), Some("105"));
        assert_eq!(t(r#"{"s": "x"}"#).s.as_deref(), Some("x"));
        assert_eq!(t(r#"{"s": ""}"#).s, None);
    }
}

/// `lock` values: `null`, `""` or absent → `None`.
pub(crate) fn opt_lock<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::types::VmLock>, D::Error> {
    Ok(opt_string(d)?.map(|s| crate::types::VmLock::parse(&s)))
}

#[cfg(test)]
mod lock_tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct L {
        #[serde(default, deserialize_with = "opt_lock")]
        lock: Option<crate::types::VmLock>,
    }

    #[test]
    fn empty_lock_is_none() {
        let l: L = serde_json::from_str(r#"{"lock": ""}"#).unwrap();
        assert!(l.lock.is_none());
        let l: L = serde_json::from_str(r#"{"lock": "clone"}"#).unwrap();
        assert_eq!(l.lock, Some(crate::types::VmLock::Clone));
        let l: L = serde_json::from_str(r#"{}"#).unwrap();
        assert!(l.lock.is_none());
    }
}
