//! `ipconfig[n]`: cloud-init addresses (`ip=10.0.0.21/24,gw=10.0.0.1`).

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::str::FromStr;

use super::propstr::{join, split};
use crate::error::ParseError;

const WHAT: &str = "ipconfig property string";

/// The `ip=` part of an `ipconfig[n]` (PVE format `pve-ipv4-config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv4Config {
    /// `ip=dhcp`.
    Dhcp,
    /// `ip=manual`: cloud-init leaves the interface alone.
    Manual,
    /// `ip=<address>/<prefix>`, prefix 0 ..= 32.
    Static {
        /// Address.
        addr: Ipv4Addr,
        /// Prefix length.
        prefix: u8,
    },
}

/// The `ip6=` part of an `ipconfig[n]` (PVE format `pve-ipv6-config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Ipv6Config {
    /// `ip6=dhcp`.
    Dhcp,
    /// `ip6=auto`: SLAAC (cloud-init ≥ 19.4).
    Auto,
    /// `ip6=manual`.
    Manual,
    /// `ip6=<address>/<prefix>`, prefix 0 ..= 128; printed compressed and
    /// lower-case so comparisons do not see spurious differences (B13).
    Static {
        /// Address.
        addr: Ipv6Addr,
        /// Prefix length.
        prefix: u8,
    },
}

fn split_cidr(s: &str, max: u8) -> Result<(&str, u8), String> {
    let (a, p) = s
        .split_once('/')
        .ok_or_else(|| format!("'{s}' needs a prefix length (address/prefix)"))?;
    if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) || p.len() > 3 {
        return Err(format!("bad prefix length in '{s}'"));
    }
    let prefix: u8 = p
        .parse()
        .map_err(|_| format!("bad prefix length in '{s}'"))?;
    if prefix > max {
        return Err(format!("prefix length in '{s}' is larger than {max}"));
    }
    Ok((a, prefix))
}

impl Ipv4Config {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "dhcp" => Ok(Self::Dhcp),
            "manual" => Ok(Self::Manual),
            _ => {
                let (a, prefix) = split_cidr(s, 32)?;
                let addr = a
                    .parse()
                    .map_err(|_| format!("'{a}' is not an IPv4 address"))?;
                Ok(Self::Static { addr, prefix })
            }
        }
    }

    /// Whether `gw` lies inside the static subnet (`None` for dhcp/manual).
    pub fn contains(&self, gw: Ipv4Addr) -> Option<bool> {
        match *self {
            Self::Static { addr, prefix } => {
                let mask = if prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - u32::from(prefix))
                };
                Some(u32::from(addr) & mask == u32::from(gw) & mask)
            }
            _ => None,
        }
    }
}

impl fmt::Display for Ipv4Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dhcp => f.write_str("dhcp"),
            Self::Manual => f.write_str("manual"),
            Self::Static { addr, prefix } => write!(f, "{addr}/{prefix}"),
        }
    }
}

impl Ipv6Config {
    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "dhcp" => Ok(Self::Dhcp),
            "auto" => Ok(Self::Auto),
            "manual" => Ok(Self::Manual),
            _ => {
                let (a, prefix) = split_cidr(s, 128)?;
                let addr = a
                    .parse()
                    .map_err(|_| format!("'{a}' is not an IPv6 address"))?;
                Ok(Self::Static { addr, prefix })
            }
        }
    }
}

impl fmt::Display for Ipv6Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dhcp => f.write_str("dhcp"),
            Self::Auto => f.write_str("auto"),
            Self::Manual => f.write_str("manual"),
            Self::Static { addr, prefix } => write!(f, "{addr}/{prefix}"),
        }
    }
}

/// An `ipconfig[n]` value (cloud-init network settings for `net[n]`).
///
/// Format: `[gw=<GatewayIPv4>] [,gw6=<GatewayIPv6>] [,ip=<IPv4/CIDR|dhcp|manual>]
/// [,ip6=<IPv6/CIDR|dhcp|auto|manual>]`; printed in that (alphabetical) order.
/// Built from typed fields, so no whitespace or missing prefix can slip in
/// (docs/field-cases.md B13). As in the schema, `gw` requires `ip` and `gw6` requires
/// `ip6`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct IpConfig {
    /// IPv4 configuration.
    pub ip: Option<Ipv4Config>,
    /// IPv4 gateway.
    pub gw: Option<Ipv4Addr>,
    /// IPv6 configuration.
    pub ip6: Option<Ipv6Config>,
    /// IPv6 gateway.
    pub gw6: Option<Ipv6Addr>,
}

impl IpConfig {
    /// Parses an `ipconfig[n]` value.
    ///
    /// # Errors
    /// [`ParseError`] for unknown keys (including `" gw"` from `ip=…, gw=…`),
    /// addresses without prefix, bad octets, a gateway without its address.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut c = Self::default();
        for (k, v) in split(s, WHAT, None)? {
            let e = |r: String| ParseError::new(WHAT, s, r);
            match k.as_str() {
                "ip" => c.ip = Some(Ipv4Config::parse(&v).map_err(e)?),
                "ip6" => c.ip6 = Some(Ipv6Config::parse(&v).map_err(e)?),
                "gw" => {
                    c.gw = Some(
                        v.parse()
                            .map_err(|_| e(format!("gw '{v}' is not an IPv4 address")))?,
                    );
                }
                "gw6" => {
                    c.gw6 = Some(
                        v.parse()
                            .map_err(|_| e(format!("gw6 '{v}' is not an IPv6 address")))?,
                    );
                }
                _ => return Err(e(format!("invalid key '{k}'"))),
            }
        }
        c.validate()?;
        Ok(c)
    }

    /// Checks the schema's `requires`: `gw` needs `ip`, `gw6` needs `ip6`.
    ///
    /// # Errors
    /// [`ParseError`] naming the missing key.
    pub fn validate(&self) -> Result<(), ParseError> {
        if self.gw.is_some() && self.ip.is_none() {
            return Err(ParseError::new(WHAT, self.to_string(), "gw requires ip"));
        }
        if self.gw6.is_some() && self.ip6.is_none() {
            return Err(ParseError::new(WHAT, self.to_string(), "gw6 requires ip6"));
        }
        Ok(())
    }
}

impl fmt::Display for IpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            self.gw.map(|g| (Some("gw"), g.to_string())),
            self.gw6.map(|g| (Some("gw6"), g.to_string())),
            self.ip.map(|i| (Some("ip"), i.to_string())),
            self.ip6.map(|i| (Some("ip6"), i.to_string())),
        ];
        f.write_str(&join(parts.into_iter().flatten()))
    }
}

impl FromStr for IpConfig {
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
    fn static_dual_stack_b14() {
        let c = IpConfig {
            ip: Some(Ipv4Config::Static {
                addr: Ipv4Addr::new(10, 0, 0, 20),
                prefix: 24,
            }),
            gw: Some(Ipv4Addr::new(10, 0, 0, 1)),
            ip6: Some(Ipv6Config::Static {
                addr: "2001:db8:1::10".parse().unwrap(),
                prefix: 64,
            }),
            gw6: Some("2001:db8:1::1".parse().unwrap()),
        };
        assert_eq!(
            c.to_string(),
            "gw=10.0.0.1,gw6=2001:db8:1::1,ip=10.0.0.20/24,ip6=2001:db8:1::10/64"
        );
        assert_eq!(IpConfig::parse(&c.to_string()).unwrap(), c);
        // Any key order is accepted on input.
        let p =
            IpConfig::parse("ip=10.0.0.20/24,gw=10.0.0.1,ip6=2001:db8:1::10/64,gw6=2001:db8:1::1")
                .unwrap();
        assert_eq!(p, c);
    }

    #[test]
    fn keywords_pass_through() {
        assert_eq!(IpConfig::parse("ip=dhcp").unwrap().to_string(), "ip=dhcp");
        assert_eq!(IpConfig::parse("ip6=auto").unwrap().to_string(), "ip6=auto");
        assert_eq!(
            IpConfig::parse("ip6=dhcp,ip=manual").unwrap().to_string(),
            "ip=manual,ip6=dhcp"
        );
        assert_eq!(IpConfig::parse("").unwrap(), IpConfig::default());
    }

    #[test]
    fn b13_malformed_strings_are_refused() {
        for bad in [
            "ip=10.0.0.21,gw=10.0.0.1",
            "ip=10.0.0.21/24, gw=10.0.0.1",
            "ip=10.0.0.1391/24",
            "ip=10.0.0.21/33",
            "ip6=2001:db8::1/129",
            "ip6=2001:db8::1",
            "gw=10.0.0.1",
            "gw6=2001:db8::1",
            "ip=dhcp4",
            "ip=10.0.0.21/24,gw=2001:db8::1",
            "ip=10.0.0.21/",
        ] {
            assert!(IpConfig::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ipv6_is_normalised() {
        let c = IpConfig::parse("ip6=2001:DB8:0001:0000::0010/64").unwrap();
        assert_eq!(c.to_string(), "ip6=2001:db8:1::10/64");
    }

    #[test]
    fn gateway_containment() {
        let ip = Ipv4Config::Static {
            addr: Ipv4Addr::new(10, 0, 0, 21),
            prefix: 24,
        };
        assert_eq!(ip.contains(Ipv4Addr::new(10, 0, 0, 1)), Some(true));
        assert_eq!(ip.contains(Ipv4Addr::new(10, 0, 1, 1)), Some(false));
        assert_eq!(Ipv4Config::Dhcp.contains(Ipv4Addr::new(10, 0, 0, 1)), None);
        let all = Ipv4Config::Static {
            addr: Ipv4Addr::new(10, 0, 0, 21),
            prefix: 0,
        };
        assert_eq!(all.contains(Ipv4Addr::new(192, 168, 0, 1)), Some(true));
    }

    fn arb() -> impl Strategy<Value = IpConfig> {
        let v4 = prop_oneof![
            Just(Ipv4Config::Dhcp),
            Just(Ipv4Config::Manual),
            (any::<u32>(), 0u8..=32).prop_map(|(a, p)| Ipv4Config::Static {
                addr: Ipv4Addr::from(a),
                prefix: p
            }),
        ];
        let v6 = prop_oneof![
            Just(Ipv6Config::Dhcp),
            Just(Ipv6Config::Auto),
            Just(Ipv6Config::Manual),
            (any::<u128>(), 0u8..=128).prop_map(|(a, p)| Ipv6Config::Static {
                addr: Ipv6Addr::from(a),
                prefix: p
            }),
        ];
        (
            proptest::option::of(v4),
            proptest::option::of(any::<u32>()),
            proptest::option::of(v6),
            proptest::option::of(any::<u128>()),
        )
            .prop_map(|(ip, gw, ip6, gw6)| IpConfig {
                ip,
                gw: ip.and(gw.map(Ipv4Addr::from)),
                ip6,
                gw6: ip6.and(gw6.map(Ipv6Addr::from)),
            })
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(c in arb()) {
            let s = c.to_string();
            prop_assert!(!s.contains(' '));
            let back = IpConfig::parse(&s).unwrap();
            prop_assert_eq!(back, c);
            prop_assert_eq!(back.to_string(), s);
        }
    }
}
