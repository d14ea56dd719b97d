//! `agent`: the QEMU guest agent setting (`1`, `enabled=1,fstrim_cloned_disks=1`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::propstr::{check_value, fmt_bool, join, parse_bool, split};
use crate::error::ParseError;

const WHAT: &str = "agent property string";

/// An `agent` value (`[enabled=]<1|0> [,freeze-fs=<1|0>]
/// [,fstrim_cloned_disks=<1|0>] [,type=<virtio|isa>]`). Note Proxmox checks
/// only for the *presence* of the `agent` key before pinging the agent
/// (docs/proxmox-semantics.md §17), so `agent: 0` still reaches the ping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentOption {
    /// Whether the agent is enabled (the default key, printed bare).
    pub enabled: bool,
    /// Other sub-options, verbatim.
    pub options: BTreeMap<String, String>,
}

impl AgentOption {
    /// `agent: 1` or `agent: 0`.
    pub fn enabled(enabled: bool) -> Self {
        Self {
            enabled,
            options: BTreeMap::new(),
        }
    }

    /// Parses an `agent` value.
    ///
    /// # Errors
    /// [`ParseError`] for a missing or non-boolean `enabled`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut enabled = None;
        let mut options = BTreeMap::new();
        for (k, v) in split(s, WHAT, Some("enabled"))? {
            if k == "enabled" {
                enabled = Some(parse_bool(WHAT, "enabled", &v)?);
            } else if !k.is_empty()
                && k.bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'_' || b == b'-')
            {
                options.insert(k, v);
            } else {
                return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'")));
            }
        }
        let enabled = enabled.ok_or_else(|| ParseError::new(WHAT, s, "enabled is missing"))?;
        Ok(Self { enabled, options })
    }

    /// Checks option names and values.
    ///
    /// # Errors
    /// [`ParseError`] naming the option.
    pub fn validate(&self) -> Result<(), ParseError> {
        for (k, v) in &self.options {
            if k == "enabled" {
                return Err(ParseError::new(WHAT, k.clone(), "reserved key in options"));
            }
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }
}

impl fmt::Display for AgentOption {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = std::iter::once((None, fmt_bool(self.enabled).to_owned())).chain(
            self.options
                .iter()
                .map(|(k, v)| (Some(k.as_str()), v.clone())),
        );
        f.write_str(&join(parts))
    }
}

impl FromStr for AgentOption {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_named() {
        assert!(AgentOption::parse("1").unwrap().enabled);
        assert!(!AgentOption::parse("0").unwrap().enabled);
        let a = AgentOption::parse("enabled=1,fstrim_cloned_disks=1,type=virtio").unwrap();
        assert!(a.enabled);
        assert_eq!(a.to_string(), "1,fstrim_cloned_disks=1,type=virtio");
        assert_eq!(AgentOption::parse(&a.to_string()).unwrap(), a);
        assert!(AgentOption::parse("type=isa").is_err());
        assert!(AgentOption::parse("2").is_err());
        assert_eq!(AgentOption::enabled(true).to_string(), "1");
    }

    /// docs/field-cases.md B31: the `agent` value is a property string whose
    /// first positional value (or `enabled=`) says whether the agent is on.
    #[test]
    fn the_variants_seen_in_the_field() {
        for (value, enabled) in [
            ("1", true),
            ("1,fstrim_cloned_disks=1", true),
            ("enabled=1,type=virtio", true),
            ("0", false),
            ("enabled=0", false),
        ] {
            assert_eq!(
                AgentOption::parse(value).unwrap().enabled,
                enabled,
                "{value}"
            );
        }
    }
}
