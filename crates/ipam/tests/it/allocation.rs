//! Allocation table tests: literal pools, literal expected addresses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::IpAddr;

use ipam::{Allocator, IpamError, Pool, PoolSpec, PoolUsage};

fn spec(addresses: &[&str], prefix: i64, gateway: Option<&str>) -> PoolSpec {
    PoolSpec {
        addresses: addresses.iter().map(|s| s.to_string()).collect(),
        prefix,
        gateway: gateway.map(str::to_owned),
        ..PoolSpec::default()
    }
}

fn pool(name: &str, spec: &PoolSpec) -> Pool {
    Pool::parse(name, spec).unwrap_or_else(|e| panic!("pool {name} should be valid: {e:?}"))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn set(addrs: &[&str]) -> BTreeSet<IpAddr> {
    addrs.iter().map(|a| ip(a)).collect()
}

/// Allocates until the pool is exhausted; returns the addresses and the final
/// error. Bounded: a pool that hands out more than it holds fails the test.
fn drain(alloc: &mut Allocator) -> (Vec<String>, IpamError) {
    let mut out = Vec::new();
    for _ in 0..=alloc.pool().size().min(1000) {
        match alloc.allocate() {
            Ok(a) => out.push(a.to_string()),
            Err(e) => return (out, e),
        }
    }
    panic!(
        "pool {} handed out more than its size: {out:?}",
        alloc.pool().name()
    );
}

#[test]
fn range_pool_allocates_lowest_first_until_exhausted() {
    let mut alloc = Allocator::new(pool(
        "dc-a-v4",
        &spec(&["10.0.0.20-10.0.0.30"], 24, Some("10.0.0.1")),
    ));
    let (got, err) = drain(&mut alloc);
    assert_eq!(
        got,
        [
            "10.0.0.20",
            "10.0.0.21",
            "10.0.0.22",
            "10.0.0.23",
            "10.0.0.24",
            "10.0.0.25",
            "10.0.0.26",
            "10.0.0.27",
            "10.0.0.28",
            "10.0.0.29",
            "10.0.0.30"
        ]
    );
    assert_eq!(
        err.to_string(),
        "pool \"dc-a-v4\" is exhausted: all 11 addresses are in use"
    );
    assert_eq!(
        err,
        IpamError::Exhausted {
            pool: "dc-a-v4".into(),
            size: 11
        }
    );
}

#[test]
fn cidr_pool_skips_network_gateway_and_broadcast() {
    let mut alloc = Allocator::new(pool("p", &spec(&["10.0.0.0/29"], 29, Some("10.0.0.1"))));
    let (got, err) = drain(&mut alloc);
    assert_eq!(
        got,
        ["10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6"]
    );
    assert_eq!(
        err.to_string(),
        "pool \"p\" is exhausted: all 5 addresses are in use"
    );
}

#[test]
fn allocate_reserved_gives_network_and_broadcast_but_never_the_gateway() {
    let mut s = spec(&["10.0.0.0/29"], 29, Some("10.0.0.1"));
    s.allocate_reserved_ip_addresses = true;
    let mut alloc = Allocator::new(pool("p", &s));
    let (got, _) = drain(&mut alloc);
    assert_eq!(
        got,
        [
            "10.0.0.0", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"
        ]
    );
}

#[test]
fn network_and_broadcast_come_from_the_subnet_not_the_entries() {
    // The subnet is 10.0.0.0/24: .0 and .255 are reserved, .16 and .31 (the ends of the /28) are not.
    let p = pool(
        "p",
        &spec(&["10.0.0.16/28", "10.0.0.250-10.0.0.255"], 24, None),
    );
    let all: Vec<String> = p.iter().map(|a| a.to_string()).collect();
    assert_eq!(all.first().map(String::as_str), Some("10.0.0.16"));
    assert_eq!(all.len(), 16 + 5);
    assert_eq!(all.last().map(String::as_str), Some("10.0.0.254"));
    assert_eq!(p.subnet().to_string(), "10.0.0.0/24");
}

#[test]
fn slash_31_and_32_lose_both_reserved_addresses_like_the_in_cluster_provider() {
    let p = pool("p31", &spec(&["10.0.0.4/31"], 31, None));
    assert_eq!(p.size(), 0);
    let err = Allocator::new(p).allocate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "pool \"p31\" is exhausted: it has no allocatable addresses"
    );

    let mut s = spec(&["10.0.0.4/31"], 31, None);
    s.allocate_reserved_ip_addresses = true;
    let (got, _) = drain(&mut Allocator::new(pool("p31", &s)));
    assert_eq!(got, ["10.0.0.4", "10.0.0.5"]);

    assert_eq!(pool("p32", &spec(&["10.0.0.9"], 32, None)).size(), 0);
}

#[test]
fn excluded_addresses_are_skipped() {
    let mut s = spec(&["10.0.0.10-10.0.0.20"], 24, Some("10.0.0.1"));
    s.excluded_addresses = vec![
        "10.0.0.10".into(),
        "10.0.0.12-10.0.0.14".into(),
        "10.0.0.16/30".into(),
    ];
    let (got, _) = drain(&mut Allocator::new(pool("p", &s)));
    assert_eq!(got, ["10.0.0.11", "10.0.0.15", "10.0.0.20"]);
}

#[test]
fn unordered_non_contiguous_entries_are_walked_ascending() {
    let p = pool(
        "p",
        &spec(
            &[
                "10.0.0.50",
                "10.0.0.10-10.0.0.11",
                "10.0.0.30/31",
                "10.0.0.11",
            ],
            24,
            Some("10.0.0.1"),
        ),
    );
    let (got, _) = drain(&mut Allocator::new(p));
    assert_eq!(
        got,
        [
            "10.0.0.10",
            "10.0.0.11",
            "10.0.0.30",
            "10.0.0.31",
            "10.0.0.50"
        ]
    );
}

#[test]
fn gateway_inside_a_range_is_never_allocated() {
    let p = pool("p", &spec(&["10.0.0.1-10.0.0.4"], 24, Some("10.0.0.3")));
    let (got, _) = drain(&mut Allocator::new(p));
    assert_eq!(got, ["10.0.0.1", "10.0.0.2", "10.0.0.4"]);
}

#[test]
fn first_free_fills_holes_in_the_in_use_set() {
    let p = pool(
        "p",
        &spec(&["10.0.0.20-10.0.0.25", "10.0.0.40"], 24, Some("10.0.0.1")),
    );
    assert_eq!(p.first_free(&set(&[])).unwrap(), ip("10.0.0.20"));
    assert_eq!(
        p.first_free(&set(&["10.0.0.20", "10.0.0.21", "10.0.0.23"]))
            .unwrap(),
        ip("10.0.0.22")
    );
    // In-use addresses outside the pool, or of the other family, do not matter.
    assert_eq!(
        p.first_free(&set(&["10.0.0.19", "2001:db8::20", "10.0.0.20"]))
            .unwrap(),
        ip("10.0.0.21")
    );
    let all_range = set(&[
        "10.0.0.20",
        "10.0.0.21",
        "10.0.0.22",
        "10.0.0.23",
        "10.0.0.24",
        "10.0.0.25",
    ]);
    assert_eq!(p.first_free(&all_range).unwrap(), ip("10.0.0.40"));
    let mut everything = all_range.clone();
    everything.insert(ip("10.0.0.40"));
    assert_eq!(
        p.first_free(&everything).unwrap_err().to_string(),
        "pool \"p\" is exhausted: all 7 addresses are in use"
    );
}

#[test]
fn exhaustion_and_recovery_b15() {
    // Field case B15: two addresses, three machines, then one machine is deleted.
    let mut alloc = Allocator::new(pool(
        "wl-v4",
        &spec(&["10.0.0.20-10.0.0.21"], 24, Some("10.0.0.1")),
    ));
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.20"));
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.21"));
    let err = alloc.allocate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "pool \"wl-v4\" is exhausted: all 2 addresses are in use"
    );
    assert_eq!(err.category(), "pool_exhausted");
    // Exhaustion changed nothing.
    assert_eq!(alloc.in_use(), &set(&["10.0.0.20", "10.0.0.21"]));
    assert!(alloc.release(ip("10.0.0.21")));
    assert!(!alloc.release(ip("10.0.0.21")), "release is idempotent");
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.21"));
}

#[test]
fn ipv6_slash_64_allocates_by_arithmetic() {
    let p = pool(
        "dc-a-v6",
        &spec(&["2001:db8:1::/64"], 64, Some("2001:db8:1::1")),
    );
    // 2^64 addresses minus the subnet-router anycast address and the gateway.
    assert_eq!(p.size(), 18_446_744_073_709_551_614);
    let mut alloc = Allocator::new(p.clone());
    assert_eq!(alloc.allocate().unwrap(), ip("2001:db8:1::2"));
    assert_eq!(alloc.allocate().unwrap(), ip("2001:db8:1::3"));
    assert_eq!(alloc.allocate().unwrap(), ip("2001:db8:1::4"));

    // 1000 addresses in use from ::2 to ::3e9: the next is ::3ea.
    let in_use: BTreeSet<IpAddr> = (0x2u128..=0x3e9)
        .map(|n| ip(&format!("2001:db8:1::{n:x}")))
        .collect();
    assert_eq!(in_use.len(), 1000);
    assert_eq!(p.first_free(&in_use).unwrap(), ip("2001:db8:1::3ea"));
    let last: Vec<String> = p.iter().take(3).map(|a| a.to_string()).collect();
    assert_eq!(last, ["2001:db8:1::2", "2001:db8:1::3", "2001:db8:1::4"]);
    assert!(p.contains(ip("2001:db8:1::ffff:ffff:ffff:ffff")));
    assert!(!p.contains(ip("2001:db8:2::")));
}

#[test]
fn ipv6_reserved_is_only_the_anycast_address() {
    let mut s = spec(&["2001:db8:1::-2001:db8:1::3", "2001:db8:1::ff"], 120, None);
    assert_eq!(
        drain(&mut Allocator::new(pool("v6", &s))).0,
        [
            "2001:db8:1::1",
            "2001:db8:1::2",
            "2001:db8:1::3",
            "2001:db8:1::ff"
        ]
    );
    s.allocate_reserved_ip_addresses = true;
    assert_eq!(
        drain(&mut Allocator::new(pool("v6", &s))).0[0],
        "2001:db8:1::"
    );
}

#[test]
fn ipv6_range_b14_exhausts_with_its_size() {
    let p = pool(
        "v6",
        &spec(
            &["2001:db8:1::10-2001:db8:1::20"],
            64,
            Some("2001:db8:1::1"),
        ),
    );
    let (got, err) = drain(&mut Allocator::new(p));
    assert_eq!(got.len(), 17);
    assert_eq!(got[0], "2001:db8:1::10");
    assert_eq!(got[16], "2001:db8:1::20");
    assert_eq!(
        err.to_string(),
        "pool \"v6\" is exhausted: all 17 addresses are in use"
    );
}

#[test]
fn whole_ipv6_space_size_saturates() {
    let mut s = spec(&["::/0"], 0, None);
    s.allocate_reserved_ip_addresses = true;
    let p = pool("all", &s);
    assert_eq!(p.size(), u128::MAX);
    assert_eq!(p.first_free(&set(&["::", "::1"])).unwrap(), ip("::2"));
}

#[test]
fn allocate_specific_explains_refusals() {
    let mut s = spec(&["10.0.0.0/24"], 24, Some("10.0.0.1"));
    s.excluded_addresses = vec!["10.0.0.5".into()];
    let mut alloc = Allocator::new(pool("dc-a-v4", &s));
    let refuse =
        |alloc: &mut Allocator, a: &str| alloc.allocate_specific(ip(a)).unwrap_err().to_string();
    assert_eq!(
        refuse(&mut alloc, "10.0.0.1"),
        "10.0.0.1 cannot be allocated from pool \"dc-a-v4\": it is the gateway"
    );
    assert_eq!(
        refuse(&mut alloc, "10.0.0.5"),
        "10.0.0.5 cannot be allocated from pool \"dc-a-v4\": it is excluded"
    );
    assert_eq!(
        refuse(&mut alloc, "10.0.0.0"),
        "10.0.0.0 cannot be allocated from pool \"dc-a-v4\": it is the network address"
    );
    assert_eq!(
        refuse(&mut alloc, "10.0.0.255"),
        "10.0.0.255 cannot be allocated from pool \"dc-a-v4\": it is the broadcast address"
    );
    assert_eq!(
        refuse(&mut alloc, "10.0.1.7"),
        "10.0.1.7 cannot be allocated from pool \"dc-a-v4\": it is outside the pool's addresses"
    );
    assert_eq!(
        refuse(&mut alloc, "2001:db8::7"),
        "2001:db8::7 cannot be allocated from pool \"dc-a-v4\": it is of the other address family"
    );
    assert!(alloc.in_use().is_empty(), "refusals change nothing");

    alloc.allocate_specific(ip("10.0.0.2")).unwrap();
    assert_eq!(
        refuse(&mut alloc, "10.0.0.2"),
        "10.0.0.2 is already in use in pool \"dc-a-v4\""
    );
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.3"));

    let v6 = pool("v6", &spec(&["2001:db8::/64"], 64, None));
    assert_eq!(
        v6.why_not_allocatable(ip("2001:db8::")),
        Some("is the subnet-router anycast address")
    );
    assert_eq!(v6.why_not_allocatable(ip("2001:db8::1")), None);
}

#[test]
fn adopting_existing_addresses_then_allocating() {
    let p = pool("p", &spec(&["10.0.0.20-10.0.0.30"], 24, Some("10.0.0.1")));
    let mut alloc = Allocator::with_in_use(p, [ip("10.0.0.20"), ip("10.0.0.22"), ip("10.0.1.9")]);
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.21"));
    assert_eq!(alloc.allocate().unwrap(), ip("10.0.0.23"));
    assert!(alloc.is_in_use(ip("10.0.1.9")));
    assert_eq!(
        alloc.usage(),
        PoolUsage {
            total: 11,
            used: 4,
            free: 7,
            out_of_range: 1
        }
    );
}

#[test]
fn usage_counts_in_and_out_of_range() {
    let p = pool("p", &spec(&["10.0.0.20-10.0.0.30"], 24, Some("10.0.0.1")));
    let usage = p.usage(&set(&[
        "10.0.0.20",
        "10.0.0.21",
        "10.0.0.1",
        "10.0.1.5",
        "2001:db8::1",
    ]));
    assert_eq!(
        usage,
        PoolUsage {
            total: 11,
            used: 2,
            free: 9,
            out_of_range: 3
        }
    );
}

#[test]
fn accessors_for_rendering_cloud_init() {
    let p = pool(
        "dc-a-v6",
        &spec(
            &["2001:DB8:1::10-2001:DB8:1::20"],
            64,
            Some("2001:DB8:1::1"),
        ),
    );
    assert_eq!(p.name(), "dc-a-v6");
    assert_eq!(p.family(), ipam::Family::V6);
    assert_eq!(p.prefix(), 64);
    assert_eq!(p.gateway(), Some(ip("2001:db8:1::1")));
    assert_eq!(p.subnet().to_string(), "2001:db8:1::/64");
    assert!(!p.allocates_reserved());
    assert_eq!(
        p.addresses()[0].to_string(),
        "2001:db8:1::10-2001:db8:1::20"
    );
    let ranges: Vec<String> = p.ranges().iter().map(ToString::to_string).collect();
    assert_eq!(ranges, ["2001:db8:1::10-2001:db8:1::20"]);
}
