//! The address family of a pool: IPv4 or IPv6.
//!
//! A pool holds addresses of exactly one family (the in-cluster IPAM
//! provider's webhook rejects a pool whose `addresses`, `gateway` and
//! `excludedAddresses` mix families; the CAPI IPAM contract is single-stack,
//! so dual stack is two pools).

use std::fmt;
use std::net::IpAddr;

/// An IP address family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    /// IPv4: 32-bit addresses, prefix lengths `0..=32`.
    V4,
    /// IPv6: 128-bit addresses, prefix lengths `0..=128`.
    V6,
}

impl Family {
    /// The family of `addr`. An IPv4-mapped IPv6 address (`::ffff:10.0.0.1`)
    /// is IPv6, as in Go's `netip` which the in-cluster IPAM provider uses.
    pub fn of(addr: IpAddr) -> Family {
        match addr {
            IpAddr::V4(_) => Family::V4,
            IpAddr::V6(_) => Family::V6,
        }
    }

    /// The longest prefix length of the family in bits: 32 for IPv4, 128 for IPv6.
    pub fn max_prefix(self) -> u8 {
        match self {
            Family::V4 => 32,
            Family::V6 => 128,
        }
    }

    /// The family's usual name, `"IPv4"` or `"IPv6"` (also what `Display` prints).
    pub fn name(self) -> &'static str {
        match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn family_of_addresses_and_limits() {
        assert_eq!(Family::of("10.0.0.1".parse().unwrap()), Family::V4);
        assert_eq!(Family::of("2001:db8::1".parse().unwrap()), Family::V6);
        assert_eq!(Family::of("::ffff:10.0.0.1".parse().unwrap()), Family::V6);
        assert_eq!(Family::V4.max_prefix(), 32);
        assert_eq!(Family::V6.max_prefix(), 128);
        assert_eq!(Family::V4.to_string(), "IPv4");
        assert_eq!(Family::V6.to_string(), "IPv6");
    }
}
