//! Whether a valid pool can serve hosts: checks that go beyond what the
//! in-cluster IPAM provider refuses, for pools a user writes by hand.
//!
//! A pool can parse and still hand out nothing useful: an entry in the
//! loopback, link-local or multicast block, an entry that is only the
//! network, broadcast or gateway address (never allocated), two entries that
//! overlap (usually a typo in one of them), or a gateway that is the subnet's
//! network or broadcast address. A pool none of whose entries is reported
//! has an allocatable address. [`check_usable`] reports each with its field; [`special_block`]
//! answers for single addresses (a control-plane endpoint, a name server).
//!
//! Special-purpose blocks (RFC 6890 for IPv4, RFC 4291 for IPv6) that a host
//! never uses as its own address: `0.0.0.0/8`, `127.0.0.0/8`,
//! `169.254.0.0/16`, `224.0.0.0/4`, `240.0.0.0/4` (with the limited
//! broadcast address `255.255.255.255`); `::/128`, `::1/128`,
//! `::ffff:0:0/96`, `fe80::/10`, `ff00::/8`.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::entry::PoolEntry;
use crate::error::IpamError;
use crate::family::Family;
use crate::pool::Pool;
use crate::range::{self, AddrRange};

/// The special-purpose blocks with the name used in messages.
const BLOCKS: [(&str, &str); 10] = [
    ("0.0.0.0/8", "the \"this network\" block"),
    ("127.0.0.0/8", "the loopback block"),
    ("169.254.0.0/16", "the link-local block"),
    ("224.0.0.0/4", "the multicast block"),
    (
        "240.0.0.0/4",
        "the reserved block (with the broadcast address 255.255.255.255)",
    ),
    ("::/128", "the unspecified address"),
    ("::1/128", "the loopback address"),
    ("::ffff:0:0/96", "the IPv4-mapped block"),
    ("fe80::/10", "the link-local block"),
    ("ff00::/8", "the multicast block"),
];

fn blocks() -> impl Iterator<Item = (IpNet, &'static str)> {
    BLOCKS
        .iter()
        .filter_map(|(net, what)| net.parse::<IpNet>().ok().map(|n| (n, *what)))
}

fn span_of(net: IpNet) -> AddrRange {
    AddrRange::from_bits(
        Family::of(net.network()),
        range::to_bits(net.network()),
        range::to_bits(net.broadcast()),
    )
}

fn intersects(a: AddrRange, b: AddrRange) -> bool {
    a.family() == b.family() && a.start_bits() <= b.end_bits() && b.start_bits() <= a.end_bits()
}

/// The special-purpose block `addr` lies in, with its name (e.g.
/// `(127.0.0.0/8, "the loopback block")`), or `None` for an address a host
/// can have.
pub fn special_block(addr: IpAddr) -> Option<(IpNet, &'static str)> {
    blocks().find(|(net, _)| net.contains(&addr))
}

fn special_overlap(span: AddrRange) -> Option<(IpNet, &'static str)> {
    blocks().find(|(net, _)| intersects(span, span_of(*net)))
}

/// Every reason the valid `pool` cannot serve hosts as written, field paths
/// relative to the pool spec (`addresses[1]`, `gateway`), in this order: each
/// `addresses` entry (a special-purpose block, nothing allocatable, overlap
/// with an earlier entry), then the gateway. Empty for a pool that can serve
/// hosts (then it has at least one allocatable address).
///
/// # Errors
/// Returned as values, not as `Err`: [`IpamError::UnusableEntry`],
/// [`IpamError::NothingAllocatable`], [`IpamError::OverlappingEntries`],
/// [`IpamError::UnusableGateway`].
pub fn check_usable(pool: &Pool) -> Vec<IpamError> {
    let mut errors = Vec::new();
    let entries = pool.addresses();
    for (i, entry) in entries.iter().enumerate() {
        let field = format!("addresses[{i}]");
        let span = entry.span();
        if let Some((block, what)) = special_overlap(span) {
            errors.push(IpamError::UnusableEntry {
                field,
                entry: entry.to_string(),
                block,
                what,
            });
            continue;
        }
        if !pool.ranges().iter().any(|r| intersects(*r, span)) {
            let reason = match entry {
                PoolEntry::Address(addr) => pool
                    .why_not_allocatable(*addr)
                    .unwrap_or("is never allocated")
                    .to_owned(),
                _ => "holds only addresses that are never allocated (network, broadcast, gateway or excluded)"
                    .to_owned(),
            };
            errors.push(IpamError::NothingAllocatable {
                field,
                entry: entry.to_string(),
                reason,
            });
            continue;
        }
        if let Some((j, overlap)) = entries[..i].iter().enumerate().find_map(|(j, other)| {
            range::first_intersection(&[other.span()], &[span]).map(|o| (j, o))
        }) {
            errors.push(IpamError::OverlappingEntries {
                field,
                entry: entry.to_string(),
                other: format!("addresses[{j}]"),
                overlap,
            });
        }
    }
    if let Some(gw) = pool.gateway() {
        let subnet = pool.subnet();
        let reason = if let Some((block, what)) = special_block(gw) {
            Some(format!("lies in {what} {block}"))
        } else if pool.family() == Family::V4 && pool.prefix() <= 30 && gw == subnet.network() {
            Some(format!("is the network address of {subnet}"))
        } else if pool.family() == Family::V4 && pool.prefix() <= 30 && gw == subnet.broadcast() {
            Some(format!("is the broadcast address of {subnet}"))
        } else {
            None
        };
        if let Some(reason) = reason {
            errors.push(IpamError::UnusableGateway {
                field: "gateway".to_owned(),
                gateway: gw,
                reason,
            });
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::PoolSpec;

    fn pool(addresses: &[&str], prefix: i64, gateway: Option<&str>) -> Pool {
        let spec = PoolSpec {
            addresses: addresses.iter().map(|s| s.to_string()).collect(),
            prefix,
            gateway: gateway.map(str::to_owned),
            ..PoolSpec::default()
        };
        Pool::parse("p", &spec).unwrap_or_else(|e| panic!("{e:?}"))
    }

    fn problems(p: &Pool) -> Vec<String> {
        check_usable(p).iter().map(ToString::to_string).collect()
    }

    #[test]
    fn ordinary_pools_are_usable() {
        assert!(problems(&pool(&["10.0.0.0/24"], 24, Some("10.0.0.1"))).is_empty());
        assert!(problems(&pool(&["10.0.0.10-10.0.0.20", "10.0.0.30"], 24, None)).is_empty());
        assert!(problems(&pool(&["2001:db8::/64"], 64, Some("2001:db8::1"))).is_empty());
    }

    #[test]
    fn special_blocks() {
        assert_eq!(
            special_block("127.0.0.53".parse().unwrap()).map(|(n, _)| n.to_string()),
            Some("127.0.0.0/8".to_string())
        );
        assert_eq!(special_block("10.0.0.1".parse().unwrap()), None);
        assert_eq!(
            special_block("ff02::1".parse().unwrap()).map(|(_, w)| w),
            Some("the multicast block")
        );
    }
}
