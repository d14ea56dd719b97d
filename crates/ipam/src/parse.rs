//! Strict text parsing of addresses and prefix lengths, with a reason for
//! every rejection.
//!
//! Field case B13: address strings written by hand or by templates carry
//! spaces, 4-digit octets and missing prefixes; Proxmox answers such input
//! with a bare "invalid format". Here each one gets a message that says what
//! is wrong. Syntax follows Go's `netip` (which the in-cluster IPAM provider
//! uses): dotted-quad IPv4 without leading zeros, RFC 4291 IPv6 text, no zone
//! index, no surrounding whitespace.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::IpamError;
use crate::family::Family;

/// Parses one address (IPv4 or IPv6) for the field `field` (e.g.
/// `gateway`, `dnsServers[0]`).
///
/// # Errors
/// [`IpamError::InvalidEntry`] naming `field` and the text, with the reason:
/// empty, whitespace, a CIDR or range where one address is expected, the
/// octet that is wrong, or not an IPv6 address.
pub fn parse_address(field: &str, text: &str) -> Result<IpAddr, IpamError> {
    let invalid = |reason: String| IpamError::InvalidEntry {
        field: field.to_owned(),
        entry: text.to_owned(),
        reason,
    };
    check_text(text).map_err(invalid)?;
    if text.contains('/') {
        return Err(invalid("expected a single address, not a CIDR".to_owned()));
    }
    if text.contains('-') {
        return Err(invalid("expected a single address, not a range".to_owned()));
    }
    address(text).map_err(invalid)
}

/// Rejects empty text and text with whitespace anywhere (leading, trailing or inside).
pub(crate) fn check_text(text: &str) -> Result<(), String> {
    if text.is_empty() {
        return Err("it is empty".to_owned());
    }
    if text.chars().any(char::is_whitespace) {
        return Err("it contains whitespace".to_owned());
    }
    Ok(())
}

/// One address, IPv6 when it contains a `:`, else dotted-quad IPv4.
pub(crate) fn address(text: &str) -> Result<IpAddr, String> {
    if text.is_empty() {
        return Err("an address is missing".to_owned());
    }
    if text.contains(':') {
        ipv6(text).map(IpAddr::V6)
    } else {
        ipv4(text).map(IpAddr::V4)
    }
}

fn ipv6(text: &str) -> Result<Ipv6Addr, String> {
    if let Some((_, zone)) = text.split_once('%') {
        return Err(format!("zone index \"%{zone}\" is not allowed"));
    }
    if text.starts_with('[') || text.ends_with(']') {
        return Err("brackets are not allowed around an IPv6 address".to_owned());
    }
    text.parse::<Ipv6Addr>()
        .map_err(|_| format!("\"{text}\" is not a valid IPv6 address"))
}

fn ipv4(text: &str) -> Result<Ipv4Addr, String> {
    let parts: Vec<&str> = text.split('.').collect();
    if parts.len() == 1 {
        return Err(format!("\"{text}\" is neither an IPv4 nor an IPv6 address"));
    }
    if parts.len() != 4 {
        return Err(format!(
            "\"{text}\" has {} dot-separated parts, an IPv4 address has 4",
            parts.len()
        ));
    }
    let mut octets = [0u8; 4];
    for (slot, part) in octets.iter_mut().zip(&parts) {
        *slot = octet(part)?;
    }
    Ok(Ipv4Addr::from(octets))
}

fn octet(part: &str) -> Result<u8, String> {
    if part.is_empty() {
        return Err("an octet is empty".to_owned());
    }
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("octet \"{part}\" is not a decimal number"));
    }
    if part.len() > 3 {
        return Err(format!("octet \"{part}\" has more than 3 digits"));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!(
            "octet \"{part}\" has a leading zero (ambiguous: octal or decimal?)"
        ));
    }
    // At most 3 ASCII digits, so the value fits a u16.
    let value: u16 = part
        .parse()
        .map_err(|_| format!("octet \"{part}\" is not a decimal number"))?;
    u8::try_from(value).map_err(|_| format!("octet {value} is greater than 255"))
}

/// A prefix length after a `/`: decimal digits, no sign or leading zero,
/// at most the family's maximum.
pub(crate) fn prefix_len(text: &str, family: Family) -> Result<u8, String> {
    if text.is_empty() {
        return Err("the prefix length after \"/\" is missing".to_owned());
    }
    if !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("prefix length \"{text}\" is not a decimal number"));
    }
    if text.len() > 1 && text.starts_with('0') {
        return Err(format!("prefix length \"{text}\" has a leading zero"));
    }
    let max = family.max_prefix();
    match text.parse::<u8>() {
        Ok(len) if len <= max => Ok(len),
        _ => Err(format!(
            "prefix length {text} is out of range for {family} (0..={max})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(text: &str) -> String {
        match parse_address("gateway", text) {
            Err(IpamError::InvalidEntry { reason, .. }) => reason,
            other => panic!("expected InvalidEntry for {text:?}, got {other:?}"),
        }
    }

    #[test]
    fn accepts_plain_addresses() {
        assert_eq!(
            parse_address("gateway", "10.0.0.1").unwrap().to_string(),
            "10.0.0.1"
        );
        assert_eq!(
            parse_address("gateway", "0.0.0.0").unwrap().to_string(),
            "0.0.0.0"
        );
        assert_eq!(
            parse_address("gateway", "2001:DB8:0000::0001")
                .unwrap()
                .to_string(),
            "2001:db8::1"
        );
        assert_eq!(
            parse_address("gateway", "::ffff:10.0.0.1")
                .unwrap()
                .to_string(),
            "::ffff:10.0.0.1"
        );
    }

    #[test]
    fn explains_each_ipv4_mistake() {
        assert_eq!(
            reason("10.0.0.1391"),
            "octet \"1391\" has more than 3 digits"
        );
        assert_eq!(reason("10.0.0.256"), "octet 256 is greater than 255");
        assert_eq!(
            reason("10.0.0"),
            "\"10.0.0\" has 3 dot-separated parts, an IPv4 address has 4"
        );
        assert_eq!(
            reason("10.0.0.1.5"),
            "\"10.0.0.1.5\" has 5 dot-separated parts, an IPv4 address has 4"
        );
        assert_eq!(reason("10..0.1"), "an octet is empty");
        assert_eq!(reason("node-a"), "expected a single address, not a range");
        assert_eq!(
            reason("localhost"),
            "\"localhost\" is neither an IPv4 nor an IPv6 address"
        );
        assert_eq!(reason("10.0.0.x"), "octet \"x\" is not a decimal number");
        assert_eq!(reason("10.0.0.+1"), "octet \"+1\" is not a decimal number");
        assert_eq!(
            reason("10.0.0.010"),
            "octet \"010\" has a leading zero (ambiguous: octal or decimal?)"
        );
    }

    #[test]
    fn explains_whitespace_and_shape_mistakes() {
        assert_eq!(reason(""), "it is empty");
        assert_eq!(reason(" 10.0.0.1"), "it contains whitespace");
        assert_eq!(reason("10.0.0.1 "), "it contains whitespace");
        assert_eq!(
            reason("10.0.0.1/24"),
            "expected a single address, not a CIDR"
        );
        assert_eq!(
            reason("10.0.0.1-10.0.0.2"),
            "expected a single address, not a range"
        );
    }

    #[test]
    fn explains_ipv6_mistakes() {
        assert_eq!(
            reason("fe80::1%eth0"),
            "zone index \"%eth0\" is not allowed"
        );
        assert_eq!(
            reason("[2001:db8::1]"),
            "brackets are not allowed around an IPv6 address"
        );
        assert_eq!(
            reason("2001:db8::g"),
            "\"2001:db8::g\" is not a valid IPv6 address"
        );
        assert_eq!(
            reason("2001:db8:::1"),
            "\"2001:db8:::1\" is not a valid IPv6 address"
        );
    }

    #[test]
    fn prefix_lengths() {
        assert_eq!(prefix_len("24", Family::V4), Ok(24));
        assert_eq!(prefix_len("0", Family::V4), Ok(0));
        assert_eq!(prefix_len("128", Family::V6), Ok(128));
        assert_eq!(
            prefix_len("", Family::V4).unwrap_err(),
            "the prefix length after \"/\" is missing"
        );
        assert_eq!(
            prefix_len("33", Family::V4).unwrap_err(),
            "prefix length 33 is out of range for IPv4 (0..=32)"
        );
        assert_eq!(
            prefix_len("999", Family::V6).unwrap_err(),
            "prefix length 999 is out of range for IPv6 (0..=128)"
        );
        assert_eq!(
            prefix_len("024", Family::V4).unwrap_err(),
            "prefix length \"024\" has a leading zero"
        );
        assert_eq!(
            prefix_len("+8", Family::V4).unwrap_err(),
            "prefix length \"+8\" is not a decimal number"
        );
    }
}
