//! Inclusive address ranges and the set arithmetic the pool is built on.
//!
//! Addresses are handled as `u128` numbers (an IPv4 address is its 32-bit
//! value), so an IPv6 /64 is two numbers, never 2^64 entries. A "range set"
//! is a slice of [`AddrRange`]s of one family that is sorted by start,
//! pairwise disjoint and not adjacent (adjacent ranges are merged); every
//! function here that takes or returns a range set keeps that invariant.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::family::Family;

/// An inclusive range of addresses of one family, `start <= end`.
///
/// `Display` prints a single address for a one-address range and `start-end`
/// otherwise, IPv6 in compressed lower-case form (`2001:db8::a-2001:db8::f`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AddrRange {
    family: Family,
    start: u128,
    end: u128,
}

impl AddrRange {
    /// The range `start..=end`, or `None` when the two addresses are of
    /// different families or `start > end` (a reversed range).
    pub fn new(start: IpAddr, end: IpAddr) -> Option<AddrRange> {
        let family = Family::of(start);
        if Family::of(end) != family {
            return None;
        }
        let (start, end) = (to_bits(start), to_bits(end));
        (start <= end).then_some(AddrRange { family, start, end })
    }

    /// The range holding only `addr`.
    pub fn single(addr: IpAddr) -> AddrRange {
        let bits = to_bits(addr);
        AddrRange {
            family: Family::of(addr),
            start: bits,
            end: bits,
        }
    }

    /// The family of both ends.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The first address of the range.
    pub fn start(&self) -> IpAddr {
        from_bits(self.family, self.start)
    }

    /// The last address of the range (inclusive).
    pub fn end(&self) -> IpAddr {
        from_bits(self.family, self.end)
    }

    /// The number of addresses in the range, at least 1. The whole IPv6
    /// space (2^128 addresses) does not fit in a `u128`; it saturates to
    /// `u128::MAX`.
    pub fn size(&self) -> u128 {
        (self.end - self.start).saturating_add(1)
    }

    /// Whether `addr` lies inside the range (an address of the other family never does).
    pub fn contains(&self, addr: IpAddr) -> bool {
        Family::of(addr) == self.family && (self.start..=self.end).contains(&to_bits(addr))
    }

    /// Crate-internal constructor from numbers; the caller guarantees
    /// `start <= end` and that both fit the family.
    pub(crate) fn from_bits(family: Family, start: u128, end: u128) -> AddrRange {
        AddrRange { family, start, end }
    }

    /// The first address as a number.
    pub(crate) fn start_bits(&self) -> u128 {
        self.start
    }

    /// The last address as a number.
    pub(crate) fn end_bits(&self) -> u128 {
        self.end
    }
}

impl fmt::Display for AddrRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.start == self.end {
            write!(f, "{}", self.start())
        } else {
            write!(f, "{}-{}", self.start(), self.end())
        }
    }
}

/// The address as a number: an IPv4 address is its 32-bit value, an IPv6 address its 128-bit value.
pub(crate) fn to_bits(addr: IpAddr) -> u128 {
    match addr {
        IpAddr::V4(v4) => u128::from(v4.to_bits()),
        IpAddr::V6(v6) => v6.to_bits(),
    }
}

/// The address of `family` whose number is `bits`. For IPv4 a number above
/// `u32::MAX` (never produced inside this crate) saturates to 255.255.255.255.
pub(crate) fn from_bits(family: Family, bits: u128) -> IpAddr {
    match family {
        Family::V4 => IpAddr::V4(Ipv4Addr::from_bits(u32::try_from(bits).unwrap_or(u32::MAX))),
        Family::V6 => IpAddr::V6(Ipv6Addr::from_bits(bits)),
    }
}

/// Sorts `ranges` (all of one family) and merges overlapping and adjacent
/// ones into a range set.
pub(crate) fn normalise(mut ranges: Vec<AddrRange>) -> Vec<AddrRange> {
    ranges.sort_by_key(|r| (r.start, r.end));
    let mut out: Vec<AddrRange> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match out.last_mut() {
            // `saturating_add`: a range ending at the top of the space absorbs everything after it.
            Some(last) if r.start <= last.end.saturating_add(1) => {
                last.end = last.end.max(r.end);
            }
            _ => out.push(r),
        }
    }
    out
}

/// The addresses of the range set `from` that are not in the range set `remove`.
pub(crate) fn subtract(from: &[AddrRange], remove: &[AddrRange]) -> Vec<AddrRange> {
    let mut out = Vec::with_capacity(from.len());
    for r in from {
        let mut start = r.start;
        let mut alive = true;
        for x in remove {
            if x.end < start {
                continue;
            }
            if x.start > r.end {
                break;
            }
            if x.start > start {
                out.push(AddrRange::from_bits(r.family, start, x.start - 1));
            }
            if x.end >= r.end {
                alive = false;
                break;
            }
            // x.end < r.end <= u128::MAX, so this cannot overflow.
            start = x.end + 1;
        }
        if alive {
            out.push(AddrRange::from_bits(r.family, start, r.end));
        }
    }
    out
}

/// Whether the range set `set` holds the number `bits` (binary search).
pub(crate) fn set_contains(set: &[AddrRange], bits: u128) -> bool {
    let i = set.partition_point(|r| r.end < bits);
    set.get(i).is_some_and(|r| r.start <= bits)
}

/// The lowest maximal range that the range sets `a` and `b` (same family)
/// have in common, or `None` when they are disjoint.
pub(crate) fn first_intersection(a: &[AddrRange], b: &[AddrRange]) -> Option<AddrRange> {
    let (mut i, mut j) = (0, 0);
    while let (Some(x), Some(y)) = (a.get(i), b.get(j)) {
        let start = x.start.max(y.start);
        let end = x.end.min(y.end);
        if start <= end {
            return Some(AddrRange::from_bits(x.family, start, end));
        }
        if x.end < y.end {
            i += 1;
        } else {
            j += 1;
        }
    }
    None
}

/// The number of addresses in a range set, saturating at `u128::MAX`.
pub(crate) fn set_size(set: &[AddrRange]) -> u128 {
    set.iter()
        .fold(0u128, |acc, r| acc.saturating_add(r.size()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(a: &str, b: &str) -> AddrRange {
        AddrRange::new(a.parse().unwrap(), b.parse().unwrap()).unwrap()
    }

    fn show(set: &[AddrRange]) -> Vec<String> {
        set.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn new_rejects_reversed_and_mixed_ranges() {
        assert!(AddrRange::new("10.0.0.9".parse().unwrap(), "10.0.0.3".parse().unwrap()).is_none());
        assert!(
            AddrRange::new("10.0.0.1".parse().unwrap(), "2001:db8::1".parse().unwrap()).is_none()
        );
        assert_eq!(r("10.0.0.3", "10.0.0.9").size(), 7);
    }

    #[test]
    fn display_is_single_or_dash_and_ipv6_compressed() {
        assert_eq!(r("10.0.0.3", "10.0.0.3").to_string(), "10.0.0.3");
        assert_eq!(r("10.0.0.3", "10.0.0.9").to_string(), "10.0.0.3-10.0.0.9");
        assert_eq!(
            r("2001:DB8:0:0::A", "2001:0db8::00ff").to_string(),
            "2001:db8::a-2001:db8::ff"
        );
    }

    #[test]
    fn size_of_whole_spaces() {
        assert_eq!(r("0.0.0.0", "255.255.255.255").size(), 1 << 32);
        assert_eq!(
            r("::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff").size(),
            u128::MAX
        );
        assert_eq!(
            r("2001:db8::", "2001:db8::ffff:ffff:ffff:ffff").size(),
            1 << 64
        );
    }

    #[test]
    fn normalise_merges_overlapping_and_adjacent() {
        let set = normalise(vec![
            r("10.0.0.20", "10.0.0.30"),
            r("10.0.0.1", "10.0.0.5"),
            r("10.0.0.6", "10.0.0.6"),
            r("10.0.0.25", "10.0.0.40"),
            r("10.0.0.50", "10.0.0.50"),
        ]);
        assert_eq!(
            show(&set),
            ["10.0.0.1-10.0.0.6", "10.0.0.20-10.0.0.40", "10.0.0.50"]
        );
    }

    #[test]
    fn normalise_at_the_top_of_the_space_does_not_overflow() {
        let top = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff";
        let set = normalise(vec![r("ffff::", top), r(top, top), r("fffe::", "fffe::1")]);
        assert_eq!(
            show(&set),
            ["fffe::-fffe::1", format!("ffff::-{top}").as_str()]
        );
    }

    #[test]
    fn subtract_cuts_holes_and_edges() {
        let from = normalise(vec![
            r("10.0.0.0", "10.0.0.15"),
            r("10.0.0.32", "10.0.0.40"),
        ]);
        let remove = normalise(vec![
            r("10.0.0.0", "10.0.0.0"),
            r("10.0.0.5", "10.0.0.6"),
            r("10.0.0.15", "10.0.0.33"),
            r("10.0.0.40", "10.0.0.90"),
        ]);
        assert_eq!(
            show(&subtract(&from, &remove)),
            [
                "10.0.0.1-10.0.0.4",
                "10.0.0.7-10.0.0.14",
                "10.0.0.34-10.0.0.39"
            ]
        );
        assert!(subtract(&from, &from).is_empty());
        assert_eq!(subtract(&from, &[]), from);
    }

    #[test]
    fn contains_and_intersection() {
        let a = normalise(vec![
            r("10.0.0.20", "10.0.0.30"),
            r("10.0.0.50", "10.0.0.60"),
        ]);
        let b = normalise(vec![
            r("10.0.0.31", "10.0.0.49"),
            r("10.0.0.55", "10.0.0.70"),
        ]);
        assert!(set_contains(&a, to_bits("10.0.0.20".parse().unwrap())));
        assert!(set_contains(&a, to_bits("10.0.0.60".parse().unwrap())));
        assert!(!set_contains(&a, to_bits("10.0.0.31".parse().unwrap())));
        assert!(!set_contains(&a, to_bits("10.0.0.61".parse().unwrap())));
        assert_eq!(
            first_intersection(&a, &b),
            Some(r("10.0.0.55", "10.0.0.60"))
        );
        assert_eq!(first_intersection(&a, &[r("10.0.0.31", "10.0.0.49")]), None);
        assert_eq!(set_size(&a), 22);
    }
}
