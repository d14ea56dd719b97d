//! One entry of a pool's `addresses` or `excludedAddresses`: a single
//! address, an inclusive `a-b` range, or a CIDR.
//!
//! These are the three forms the in-cluster IPAM provider accepts
//! (`InClusterIPPool.spec.addresses`, `cluster-api-ipam-provider-in-cluster`
//! README "addresses"). `Display` prints the normalised form: IPv6
//! compressed lower-case (RFC 5952), ranges as `start-end`, so comparing two
//! rendered entries never shows a spurious difference (docs/field-cases.md B13).

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::error::IpamError;
use crate::family::Family;
use crate::parse;
use crate::range::AddrRange;

/// A parsed pool entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PoolEntry {
    /// One address: `10.0.0.5`, `2001:db8::5`.
    Address(IpAddr),
    /// An inclusive range, start not above end: `10.0.0.20-10.0.0.30`.
    Range(AddrRange),
    /// A whole network with its host bits clear: `10.0.0.16/28`.
    Cidr(IpNet),
}

impl PoolEntry {
    /// Parses `text` as one entry of the list field `field` (e.g. `addresses[2]`).
    ///
    /// A `-` makes a range, a `/` a CIDR, anything else one address.
    ///
    /// # Errors
    /// - [`IpamError::InvalidEntry`]: empty, whitespace anywhere, a bad
    ///   address (the reason names the bad octet), a range with more than one
    ///   `-` or with a `/`, families mixed in a range, a missing or
    ///   out-of-range prefix length;
    /// - [`IpamError::ReversedRange`]: `a-b` with `a > b`;
    /// - [`IpamError::HostBitsSet`]: a CIDR such as `10.0.0.5/24`.
    pub fn parse(field: &str, text: &str) -> Result<PoolEntry, IpamError> {
        let invalid = |reason: String| IpamError::InvalidEntry {
            field: field.to_owned(),
            entry: text.to_owned(),
            reason,
        };
        parse::check_text(text).map_err(invalid)?;
        if let Some((start, end)) = text.split_once('-') {
            if end.contains('-') {
                return Err(invalid("a range has exactly one \"-\"".to_owned()));
            }
            if text.contains('/') {
                return Err(invalid(
                    "a range cannot carry a prefix length; write \"a-b\" or a CIDR".to_owned(),
                ));
            }
            let start = parse::address(start).map_err(&invalid)?;
            let end = parse::address(end).map_err(&invalid)?;
            if Family::of(start) != Family::of(end) {
                return Err(invalid(format!(
                    "the range starts with an {} and ends with an {} address",
                    Family::of(start),
                    Family::of(end)
                )));
            }
            return AddrRange::new(start, end)
                .map(PoolEntry::Range)
                .ok_or_else(|| IpamError::ReversedRange {
                    field: field.to_owned(),
                    entry: text.to_owned(),
                });
        }
        if let Some((addr, len)) = text.split_once('/') {
            let address = parse::address(addr).map_err(&invalid)?;
            let len = parse::prefix_len(len, Family::of(address)).map_err(&invalid)?;
            let net = IpNet::new(address, len).map_err(|e| invalid(e.to_string()))?;
            let network = net.trunc();
            if network.addr() != address {
                return Err(IpamError::HostBitsSet {
                    field: field.to_owned(),
                    entry: text.to_owned(),
                    network,
                    address,
                });
            }
            return Ok(PoolEntry::Cidr(network));
        }
        parse::address(text)
            .map(PoolEntry::Address)
            .map_err(invalid)
    }

    /// The family of the entry's addresses.
    pub fn family(&self) -> Family {
        self.span().family()
    }

    /// The inclusive range of addresses the entry covers (a CIDR covers its
    /// network and broadcast addresses too; excluding those is the pool's job).
    pub fn span(&self) -> AddrRange {
        match self {
            PoolEntry::Address(addr) => AddrRange::single(*addr),
            PoolEntry::Range(range) => *range,
            PoolEntry::Cidr(net) => AddrRange::from_bits(
                Family::of(net.network()),
                crate::range::to_bits(net.network()),
                crate::range::to_bits(net.broadcast()),
            ),
        }
    }
}

impl fmt::Display for PoolEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PoolEntry::Address(addr) => write!(f, "{addr}"),
            PoolEntry::Range(range) => write!(f, "{}-{}", range.start(), range.end()),
            PoolEntry::Cidr(net) => write!(f, "{net}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> PoolEntry {
        PoolEntry::parse("addresses[0]", text).unwrap()
    }

    fn err(text: &str) -> String {
        PoolEntry::parse("addresses[2]", text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn parses_the_three_forms_and_normalises_display() {
        assert_eq!(ok("10.0.0.5").to_string(), "10.0.0.5");
        assert_eq!(ok("10.0.0.20-10.0.0.30").to_string(), "10.0.0.20-10.0.0.30");
        assert_eq!(ok("10.0.0.16/28").to_string(), "10.0.0.16/28");
        assert_eq!(ok("2001:DB8:1::A").to_string(), "2001:db8:1::a");
        assert_eq!(
            ok("2001:db8:1:0:0:0:0:10-2001:DB8:1::20").to_string(),
            "2001:db8:1::10-2001:db8:1::20"
        );
        assert_eq!(ok("2001:DB8:1::/64").to_string(), "2001:db8:1::/64");
        // A one-address range stays a range: the user wrote it that way.
        assert_eq!(ok("10.0.0.5-10.0.0.5").to_string(), "10.0.0.5-10.0.0.5");
    }

    #[test]
    fn spans() {
        let s = ok("10.0.0.16/28").span();
        assert_eq!(
            (s.start().to_string(), s.end().to_string()),
            ("10.0.0.16".into(), "10.0.0.31".into())
        );
        assert_eq!(s.size(), 16);
        assert_eq!(ok("2001:db8::/64").span().size(), 1 << 64);
        assert_eq!(ok("10.0.0.5").span().size(), 1);
        assert_eq!(ok("10.0.0.5").family(), Family::V4);
        assert_eq!(ok("2001:db8::/64").family(), Family::V6);
    }

    #[test]
    fn rejects_with_a_clear_message() {
        assert_eq!(
            err("10.0.0.9-10.0.0.3"),
            "addresses[2]: \"10.0.0.9-10.0.0.3\" is a reversed range"
        );
        assert_eq!(
            err("10.0.0.5/24"),
            "addresses[2]: \"10.0.0.5/24\" has host bits set: write \"10.0.0.0/24\" for the whole network or \"10.0.0.5\" for one address"
        );
        assert_eq!(
            err("10.0.0.0/"),
            "addresses[2]: \"10.0.0.0/\" is invalid: the prefix length after \"/\" is missing"
        );
        assert_eq!(
            err("10.0.0.1391/24"),
            "addresses[2]: \"10.0.0.1391/24\" is invalid: octet \"1391\" has more than 3 digits"
        );
        assert_eq!(
            err("10.0.0.5, 10.0.0.6"),
            "addresses[2]: \"10.0.0.5, 10.0.0.6\" is invalid: it contains whitespace"
        );
        assert_eq!(
            err("10.0.0.5 - 10.0.0.6"),
            "addresses[2]: \"10.0.0.5 - 10.0.0.6\" is invalid: it contains whitespace"
        );
        assert_eq!(
            err("10.0.0.1-10.0.0.2-10.0.0.3"),
            "addresses[2]: \"10.0.0.1-10.0.0.2-10.0.0.3\" is invalid: a range has exactly one \"-\""
        );
        assert_eq!(
            err("10.0.0.1-10.0.0.9/24"),
            "addresses[2]: \"10.0.0.1-10.0.0.9/24\" is invalid: a range cannot carry a prefix length; write \"a-b\" or a CIDR"
        );
        assert_eq!(
            err("10.0.0.1-2001:db8::1"),
            "addresses[2]: \"10.0.0.1-2001:db8::1\" is invalid: the range starts with an IPv4 and ends with an IPv6 address"
        );
        assert_eq!(
            err("10.0.0.1-"),
            "addresses[2]: \"10.0.0.1-\" is invalid: an address is missing"
        );
        assert_eq!(
            err("10.0.0.0/33"),
            "addresses[2]: \"10.0.0.0/33\" is invalid: prefix length 33 is out of range for IPv4 (0..=32)"
        );
        assert_eq!(err(""), "addresses[2]: \"\" is invalid: it is empty");
    }
}
