//! Validation table tests: every bad pool gets one clear error per problem,
//! and checks across pools (overlap, endpoint inside a pool).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::IpAddr;

use ipam::{Family, IpamError, Pool, PoolSpec, check_disjoint, check_outside, contains, overlaps};

fn spec(addresses: &[&str], prefix: i64, gateway: Option<&str>) -> PoolSpec {
    PoolSpec {
        addresses: addresses.iter().map(|s| s.to_string()).collect(),
        prefix,
        gateway: gateway.map(str::to_owned),
        ..PoolSpec::default()
    }
}

fn errors(spec: &PoolSpec) -> Vec<String> {
    match Pool::parse("p", spec) {
        Ok(pool) => panic!("expected errors, got {pool:?}"),
        Err(errs) => errs.iter().map(ToString::to_string).collect(),
    }
}

fn pool(name: &str, spec: &PoolSpec) -> Pool {
    Pool::parse(name, spec).unwrap_or_else(|e| panic!("pool {name} should be valid: {e:?}"))
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn one_error_per_problem_in_a_table() {
    let cases: &[(&[&str], i64, Option<&str>, &str)] = &[
        (
            &["10.0.0.1", "10.0.0.2", "10.0.0.9-10.0.0.3"],
            24,
            None,
            "addresses[2]: \"10.0.0.9-10.0.0.3\" is a reversed range",
        ),
        (
            &["10.0.0.20-10.0.0.30"],
            24,
            Some("10.0.1.1"),
            "gateway 10.0.1.1 is outside 10.0.0.0/24: write the router's address in 10.0.0.0/24",
        ),
        (
            &["10.0.0.20-10.0.0.30"],
            33,
            None,
            "prefix 33 is out of range for IPv4 (0..=32)",
        ),
        (
            &["10.0.0.20-10.0.0.30"],
            -1,
            None,
            "prefix -1 is out of range for IPv4 (0..=32)",
        ),
        (
            &["2001:db8::10"],
            129,
            None,
            "prefix 129 is out of range for IPv6 (0..=128)",
        ),
        (
            &["10.0.0.20", "2001:db8::1"],
            24,
            None,
            "addresses[1]: \"2001:db8::1\" is IPv6 but the pool is IPv4",
        ),
        (
            &["10.0.0.20"],
            24,
            Some("2001:db8::1"),
            "gateway: \"2001:db8::1\" is IPv6 but the pool is IPv4",
        ),
        (
            &["10.0.0.20", "10.0.1.5"],
            24,
            None,
            "addresses[1]: \"10.0.1.5\" is outside 10.0.0.0/24: keep every entry in the subnet of the lowest address, or use a shorter prefix",
        ),
        (
            &["10.0.0.250-10.0.1.5"],
            24,
            None,
            "addresses[0]: \"10.0.0.250-10.0.1.5\" is outside 10.0.0.0/24: keep every entry in the subnet of the lowest address, or use a shorter prefix",
        ),
        (
            &["10.0.0.0/23"],
            24,
            None,
            "addresses[0]: \"10.0.0.0/23\" is outside 10.0.0.0/24: keep every entry in the subnet of the lowest address, or use a shorter prefix",
        ),
        (
            &[],
            24,
            None,
            "addresses: at least one address, range or CIDR is required",
        ),
        (
            &["10.0.0.20"],
            24,
            Some("10.0.0.1/24"),
            "gateway: \"10.0.0.1/24\" is invalid: expected a single address, not a CIDR",
        ),
        // Field case B13: a missing prefix, whitespace, a 4-digit octet.
        (
            &["10.0.0.0/"],
            24,
            None,
            "addresses[0]: \"10.0.0.0/\" is invalid: the prefix length after \"/\" is missing",
        ),
        (
            &["10.0.0.21, 10.0.0.22"],
            24,
            None,
            "addresses[0]: \"10.0.0.21, 10.0.0.22\" is invalid: it contains whitespace",
        ),
        (
            &["10.0.0.1391"],
            24,
            None,
            "addresses[0]: \"10.0.0.1391\" is invalid: octet \"1391\" has more than 3 digits",
        ),
        (
            &["10.0.0.5/24"],
            24,
            None,
            "addresses[0]: \"10.0.0.5/24\" has host bits set: write \"10.0.0.0/24\" for the whole network or \"10.0.0.5\" for one address",
        ),
    ];
    for (addresses, prefix, gateway, want) in cases {
        let got = errors(&spec(addresses, *prefix, *gateway));
        assert_eq!(
            got,
            [*want],
            "for addresses {addresses:?} prefix {prefix} gateway {gateway:?}"
        );
    }
}

#[test]
fn all_problems_are_reported_together() {
    let mut s = spec(
        &[
            "10.0.0.9-10.0.0.3",
            "10.0.0.1391",
            "2001:db8::1",
            "10.0.0.20",
        ],
        33,
        Some("10.0.1.1"),
    );
    s.excluded_addresses = vec!["10.0.0.21".into(), "fe80::1".into(), "10.0.0.x".into()];
    let got = errors(&s);
    assert_eq!(
        got,
        [
            "addresses[0]: \"10.0.0.9-10.0.0.3\" is a reversed range",
            "addresses[1]: \"10.0.0.1391\" is invalid: octet \"1391\" has more than 3 digits",
            "addresses[2]: \"2001:db8::1\" is IPv6 but the pool is IPv4",
            "prefix 33 is out of range for IPv4 (0..=32)",
            "excludedAddresses[2]: \"10.0.0.x\" is invalid: octet \"x\" is not a decimal number",
            "excludedAddresses[1]: \"fe80::1\" is IPv6 but the pool is IPv4",
        ]
    );
    // With a valid prefix the gateway check runs too.
    s.prefix = 24;
    let got = errors(&s);
    assert_eq!(got.len(), 6);
    assert_eq!(
        got[3],
        "excludedAddresses[2]: \"10.0.0.x\" is invalid: octet \"x\" is not a decimal number"
    );
    assert_eq!(
        got[5],
        "gateway 10.0.1.1 is outside 10.0.0.0/24: write the router's address in 10.0.0.0/24"
    );
}

#[test]
fn family_comes_from_the_first_entry_even_when_malformed_else_the_gateway() {
    assert_eq!(
        errors(&spec(&["10.0.0.999", "2001:db8::1"], 64, None)),
        [
            "addresses[0]: \"10.0.0.999\" is invalid: octet 999 is greater than 255",
            "addresses[1]: \"2001:db8::1\" is IPv6 but the pool is IPv4",
            "prefix 64 is out of range for IPv4 (0..=32)",
        ]
    );
    assert_eq!(
        errors(&spec(&["pool-a"], 129, Some("2001:db8::1"))),
        [
            "addresses[0]: \"pool-a\" is invalid: \"pool\" is neither an IPv4 nor an IPv6 address",
            "prefix 129 is out of range for IPv6 (0..=128)",
        ]
    );
}

#[test]
fn categories_and_field_paths() {
    let errs = Pool::parse("p", &spec(&["10.0.0.9-10.0.0.3"], 33, Some("10.0.1.1"))).unwrap_err();
    let cats: Vec<&str> = errs.iter().map(IpamError::category).collect();
    assert_eq!(cats, ["reversed_range", "prefix_out_of_range"]);
    let nested: Vec<String> = errs
        .into_iter()
        .map(|e| {
            e.at("spec.settings.instances[1].network.ipv4Config")
                .to_string()
        })
        .collect();
    assert_eq!(
        nested,
        [
            "spec.settings.instances[1].network.ipv4Config.addresses[0]: \"10.0.0.9-10.0.0.3\" is a reversed range",
            "spec.settings.instances[1].network.ipv4Config.prefix 33 is out of range for IPv4 (0..=32)",
        ]
    );
}

#[test]
fn parse_as_enforces_the_field_family_b14() {
    let errs: Vec<String> = Pool::parse_as(
        "v4",
        &spec(&["2001:db8::10-2001:db8::20"], 64, Some("2001:db8::1")),
        Family::V4,
    )
    .unwrap_err()
    .iter()
    .map(ToString::to_string)
    .collect();
    assert_eq!(
        errs,
        [
            "addresses[0]: \"2001:db8::10-2001:db8::20\" is IPv6 but the pool is IPv4",
            "prefix 64 is out of range for IPv4 (0..=32)",
            "gateway: \"2001:db8::1\" is IPv6 but the pool is IPv4",
        ]
    );
    let v6 = Pool::parse_as(
        "v6",
        &spec(&["2001:db8::10-2001:db8::20"], 64, None),
        Family::V6,
    )
    .unwrap();
    assert_eq!(v6.family(), Family::V6);
    assert_eq!(v6.gateway(), None);
}

#[test]
fn empty_gateway_means_none_and_subnet_comes_from_lowest_address() {
    let p = pool(
        "p",
        &spec(&["10.0.0.200", "10.0.0.20-10.0.0.30"], 24, Some("")),
    );
    assert_eq!(p.gateway(), None);
    assert_eq!(p.subnet().to_string(), "10.0.0.0/24");
    // A /25 inferred from the lowest address (10.0.0.20) excludes 10.0.0.200.
    assert_eq!(
        errors(&spec(&["10.0.0.200", "10.0.0.20"], 25, None)),
        [
            "addresses[0]: \"10.0.0.200\" is outside 10.0.0.0/25: keep every entry in the subnet of the lowest address, or use a shorter prefix"
        ]
    );
}

#[test]
fn to_spec_normalises_entries() {
    let mut s = spec(
        &[
            "2001:DB8:1:0:0:0:0:10-2001:db8:1::0020",
            "2001:DB8:1::100/120",
        ],
        64,
        Some("2001:DB8:1::1"),
    );
    s.excluded_addresses = vec!["2001:DB8:1::15".into()];
    let out = pool("v6", &s).to_spec();
    assert_eq!(
        out,
        PoolSpec {
            addresses: vec![
                "2001:db8:1::10-2001:db8:1::20".into(),
                "2001:db8:1::100/120".into()
            ],
            prefix: 64,
            gateway: Some("2001:db8:1::1".into()),
            excluded_addresses: vec!["2001:db8:1::15".into()],
            allocate_reserved_ip_addresses: false,
        }
    );
}

#[test]
fn spec_uses_the_in_cluster_ippool_field_names() {
    let json = r#"{"addresses":["10.0.0.0/24"],"prefix":24,"gateway":"10.0.0.1",
        "allocateReservedIPAddresses":true,"excludedAddresses":["10.0.0.5"]}"#;
    let s: PoolSpec = serde_json::from_str(json).unwrap();
    assert_eq!(
        s,
        PoolSpec {
            addresses: vec!["10.0.0.0/24".into()],
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            excluded_addresses: vec!["10.0.0.5".into()],
            allocate_reserved_ip_addresses: true,
        }
    );
    let minimal = spec(&["10.0.0.20-10.0.0.30"], 24, None);
    assert_eq!(
        serde_json::to_string(&minimal).unwrap(),
        r#"{"addresses":["10.0.0.20-10.0.0.30"],"prefix":24}"#
    );
}

#[test]
fn overlapping_pools_are_named_with_the_first_common_range_b16() {
    let a = pool(
        "dc-a-v4",
        &spec(&["10.0.0.20-10.0.0.30"], 24, Some("10.0.0.1")),
    );
    let b = pool(
        "dc-b-v4",
        &spec(&["10.0.0.25-10.0.0.35"], 24, Some("10.0.0.1")),
    );
    let c = pool(
        "dc-c-v4",
        &spec(
            &["10.0.0.30", "10.0.0.100-10.0.0.110"],
            24,
            Some("10.0.0.1"),
        ),
    );
    let d = pool("dc-d-v4", &spec(&["10.0.1.0/24"], 24, Some("10.0.1.1")));
    assert_eq!(overlaps(&a, &b).unwrap().to_string(), "10.0.0.25-10.0.0.30");
    assert_eq!(overlaps(&a, &c).unwrap().to_string(), "10.0.0.30");
    assert_eq!(overlaps(&a, &d), None);
    let got: Vec<String> = check_disjoint(&[a.clone(), b, c, d.clone()])
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        [
            "pools \"dc-a-v4\" and \"dc-b-v4\" overlap at 10.0.0.25-10.0.0.30",
            "pools \"dc-a-v4\" and \"dc-c-v4\" overlap at 10.0.0.30",
            "pools \"dc-b-v4\" and \"dc-c-v4\" overlap at 10.0.0.30",
        ]
    );
    assert!(check_disjoint(&[a, d]).is_empty());
}

#[test]
fn excluded_gateway_and_other_family_are_no_overlap() {
    let a = pool("a", &spec(&["10.0.0.0/24"], 24, Some("10.0.0.1")));
    let mut bs = spec(&["10.0.0.20-10.0.0.30"], 24, None);
    bs.excluded_addresses = vec!["10.0.0.20-10.0.0.30".into()];
    assert_eq!(overlaps(&a, &pool("b", &bs)), None);
    // b's only address is a's gateway: a never hands it out.
    assert_eq!(
        overlaps(&a, &pool("c", &spec(&["10.0.0.1"], 24, None))),
        None
    );
    assert_eq!(
        overlaps(&a, &pool("v6", &spec(&["::ffff:10.0.0.0/120"], 120, None))),
        None
    );
}

#[test]
fn endpoint_host_must_stay_outside_node_pools() {
    let mut s = spec(&["10.0.0.0/24"], 24, Some("10.0.0.1"));
    s.excluded_addresses = vec!["10.0.0.10".into()];
    let a = pool("dc-a-v4", &s);
    let b = pool(
        "dc-b-v4",
        &spec(&["10.0.1.20-10.0.1.30"], 24, Some("10.0.1.1")),
    );
    let pools = [a.clone(), b];
    let got: Vec<String> = check_outside("controlPlaneEndpoint.host", ip("10.0.0.25"), &pools)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        got,
        ["controlPlaneEndpoint.host 10.0.0.25 is inside pool \"dc-a-v4\""]
    );
    // Excluded from the pool (the usual kube-vip setup), the gateway, or elsewhere: fine.
    assert!(check_outside("controlPlaneEndpoint.host", ip("10.0.0.10"), &pools).is_empty());
    assert!(check_outside("controlPlaneEndpoint.host", ip("10.0.0.1"), &pools).is_empty());
    assert!(check_outside("controlPlaneEndpoint.host", ip("10.0.2.5"), &pools).is_empty());
    assert!(contains(&a, ip("10.0.0.25")));
    assert!(!contains(&a, ip("10.0.0.10")));
}

/// Pools that parse but cannot serve hosts: one row per mistake, with the
/// message written out.
#[test]
fn usable_checks_in_a_table() {
    let cases: &[(&[&str], i64, Option<&str>, &str)] = &[
        (
            &["127.0.0.10-127.0.0.20"],
            24,
            None,
            "addresses[0]: \"127.0.0.10-127.0.0.20\" includes addresses of the loopback block 127.0.0.0/8, which no host can have: write addresses of the node subnet",
        ),
        (
            &["169.254.1.0/24"],
            24,
            None,
            "addresses[0]: \"169.254.1.0/24\" includes addresses of the link-local block 169.254.0.0/16, which no host can have: write addresses of the node subnet",
        ),
        (
            &["224.0.0.10"],
            24,
            None,
            "addresses[0]: \"224.0.0.10\" includes addresses of the multicast block 224.0.0.0/4, which no host can have: write addresses of the node subnet",
        ),
        (
            &["0.0.0.5"],
            24,
            None,
            "addresses[0]: \"0.0.0.5\" includes addresses of the \"this network\" block 0.0.0.0/8, which no host can have: write addresses of the node subnet",
        ),
        (
            &["255.255.255.10"],
            24,
            None,
            "addresses[0]: \"255.255.255.10\" includes addresses of the reserved block (with the broadcast address 255.255.255.255) 240.0.0.0/4, which no host can have: write addresses of the node subnet",
        ),
        (
            &["fe80::10-fe80::20"],
            64,
            None,
            "addresses[0]: \"fe80::10-fe80::20\" includes addresses of the link-local block fe80::/10, which no host can have: write addresses of the node subnet",
        ),
        (
            &["ff05::10"],
            64,
            None,
            "addresses[0]: \"ff05::10\" includes addresses of the multicast block ff00::/8, which no host can have: write addresses of the node subnet",
        ),
        (
            &["10.0.0.0"],
            24,
            None,
            "addresses[0]: \"10.0.0.0\" gives no address to a machine: it is the network address; remove it or list host addresses",
        ),
        (
            &["10.0.0.255"],
            24,
            None,
            "addresses[0]: \"10.0.0.255\" gives no address to a machine: it is the broadcast address; remove it or list host addresses",
        ),
        (
            &["10.0.0.10-10.0.0.20", "10.0.0.1"],
            24,
            Some("10.0.0.1"),
            "addresses[1]: \"10.0.0.1\" gives no address to a machine: it is the gateway; remove it or list host addresses",
        ),
        (
            &["10.0.0.0/31"],
            31,
            None,
            "addresses[0]: \"10.0.0.0/31\" gives no address to a machine: it holds only addresses that are never allocated (network, broadcast, gateway or excluded); remove it or list host addresses",
        ),
        (
            &["2001:db8::"],
            64,
            None,
            "addresses[0]: \"2001:db8::\" gives no address to a machine: it is the subnet-router anycast address; remove it or list host addresses",
        ),
        (
            &["10.0.0.10-10.0.0.50", "10.0.0.40-10.0.0.90"],
            24,
            None,
            "addresses[1]: \"10.0.0.40-10.0.0.90\" overlaps addresses[0] at 10.0.0.40-10.0.0.50: list each address once",
        ),
        (
            &["10.0.0.64/26", "10.0.0.70"],
            24,
            None,
            "addresses[1]: \"10.0.0.70\" overlaps addresses[0] at 10.0.0.70: list each address once",
        ),
        (
            &["10.0.0.10-10.0.0.20"],
            24,
            Some("10.0.0.0"),
            "gateway 10.0.0.0 cannot be the gateway: it is the network address of 10.0.0.0/24; write the router's address in the subnet",
        ),
        (
            &["10.0.0.10-10.0.0.20"],
            24,
            Some("10.0.0.255"),
            "gateway 10.0.0.255 cannot be the gateway: it is the broadcast address of 10.0.0.0/24; write the router's address in the subnet",
        ),
        (
            &["127.0.0.10"],
            8,
            Some("127.0.0.1"),
            "gateway 127.0.0.1 cannot be the gateway: it lies in the loopback block 127.0.0.0/8; write the router's address in the subnet",
        ),
    ];
    for (addresses, prefix, gateway, want) in cases {
        let p = pool("p", &spec(addresses, *prefix, *gateway));
        let got: Vec<String> = ipam::check_usable(&p)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert!(
            got.iter().any(|g| g == want),
            "{addresses:?}/{prefix} gateway {gateway:?}: expected {want:?}, got {got:?}"
        );
    }
    // The gateway row of the loopback pool also names the entry; the other rows
    // have exactly one problem.
    for (addresses, prefix, gateway, _) in &cases[..cases.len() - 1] {
        let p = pool("p", &spec(addresses, *prefix, *gateway));
        assert_eq!(ipam::check_usable(&p).len(), 1, "{addresses:?}");
    }
    // Ordinary pools have none, including /31 and /32 pools the in-cluster
    // provider handles and a CIDR that contains the gateway.
    for (addresses, prefix, gateway) in [
        (&["10.0.0.0/24"][..], 24, Some("10.0.0.1")),
        (&["10.0.0.2-10.0.0.254"][..], 24, Some("10.0.0.1")),
        (&["2001:db8::10-2001:db8::ff"][..], 64, Some("2001:db8::1")),
        (&["192.168.1.10", "192.168.1.11"][..], 24, None),
    ] {
        let p = pool("p", &spec(addresses, prefix, gateway));
        assert_eq!(ipam::check_usable(&p), vec![], "{addresses:?}");
    }
    let e = &ipam::check_usable(&pool("p", &spec(&["10.0.0.1", "10.0.0.1"], 24, None)))[0];
    assert_eq!(e.field(), Some("addresses[1]"));
    assert_eq!(
        e.clone().at("spec.ipv4Config").to_string(),
        "spec.ipv4Config.addresses[1]: \"10.0.0.1\" overlaps spec.ipv4Config.addresses[0] at 10.0.0.1: list each address once"
    );
    assert_eq!(e.category(), "overlapping_entries");
}
