//! Property tests: pools and allocation checked against an independent model.
//!
//! The model materialises a small subnet (10.0.0.0/26 or 2001:db8:1::/122,
//! 64 addresses) as offsets and applies the in-cluster IPAM provider's rules
//! directly: in some entry, not excluded, not the gateway, not reserved
//! (offset 0, and offset 63 for IPv4) unless allowed. The crate under test
//! never materialises anything, so the two are written independently.
//! Seeded, with modest case counts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeSet, HashSet};
use std::net::IpAddr;

use ipam::{Allocator, IpamError, Pool, PoolEntry, PoolSpec, overlaps};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

/// Addresses in the model's subnet.
const SPAN: u32 = 64;

fn config() -> Config {
    Config {
        cases: 128,
        rng_seed: RngSeed::Fixed(0x1ba3_2026),
        failure_persistence: None,
        ..Config::default()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fam {
    V4,
    V6,
}

/// An entry as offsets into the subnet.
#[derive(Clone, Copy, Debug)]
enum E {
    One(u32),
    Range(u32, u32),
    /// An aligned block: base offset, log2 of its size.
    Block(u32, u32),
}

impl E {
    fn covers(self, o: u32) -> bool {
        match self {
            E::One(a) => o == a,
            E::Range(a, b) => (a..=b).contains(&o),
            E::Block(base, k) => (base..base + (1 << k)).contains(&o),
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    fam: Fam,
    entries: Vec<E>,
    excluded: Vec<E>,
    gateway: Option<u32>,
    reserved: bool,
    upper: bool,
}

fn addr_text(fam: Fam, o: u32, upper: bool) -> String {
    match (fam, upper) {
        (Fam::V4, _) => format!("10.0.0.{o}"),
        (Fam::V6, false) => format!("2001:db8:1::{o:x}"),
        (Fam::V6, true) => format!("2001:DB8:1:0:0:0:0:{o:X}"),
    }
}

fn entry_text(fam: Fam, e: E, upper: bool) -> String {
    let bits = if fam == Fam::V4 { 32 } else { 128 };
    match e {
        E::One(a) => addr_text(fam, a, upper),
        E::Range(a, b) => format!("{}-{}", addr_text(fam, a, upper), addr_text(fam, b, upper)),
        E::Block(base, k) => format!("{}/{}", addr_text(fam, base, upper), bits - k),
    }
}

fn addr(fam: Fam, o: u32) -> IpAddr {
    addr_text(fam, o, false).parse().unwrap()
}

fn spec(case: &Case) -> PoolSpec {
    PoolSpec {
        addresses: case
            .entries
            .iter()
            .map(|e| entry_text(case.fam, *e, case.upper))
            .collect(),
        prefix: if case.fam == Fam::V4 { 26 } else { 122 },
        gateway: case.gateway.map(|g| addr_text(case.fam, g, case.upper)),
        excluded_addresses: case
            .excluded
            .iter()
            .map(|e| entry_text(case.fam, *e, case.upper))
            .collect(),
        allocate_reserved_ip_addresses: case.reserved,
    }
}

/// The allocatable offsets, ascending, by the in-cluster IPAM provider's rules.
fn model(case: &Case) -> Vec<u32> {
    (0..SPAN)
        .filter(|&o| case.entries.iter().any(|e| e.covers(o)))
        .filter(|&o| !case.excluded.iter().any(|e| e.covers(o)))
        .filter(|&o| case.gateway != Some(o))
        .filter(|&o| case.reserved || (o != 0 && !(case.fam == Fam::V4 && o == SPAN - 1)))
        .collect()
}

fn entry() -> impl Strategy<Value = E> {
    prop_oneof![
        (0..SPAN).prop_map(E::One),
        (0..SPAN, 0..SPAN).prop_map(|(a, b)| E::Range(a.min(b), a.max(b))),
        (0u32..=4).prop_flat_map(|k| (0..SPAN >> k).prop_map(move |i| E::Block(i << k, k))),
    ]
}

fn case_of(fam: Fam) -> impl Strategy<Value = Case> {
    (
        prop::collection::vec(entry(), 1..=4),
        prop::collection::vec(entry(), 0..=3),
        prop::option::of(0..SPAN),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(move |(entries, excluded, gateway, reserved, upper)| Case {
            fam,
            entries,
            excluded,
            gateway,
            reserved,
            upper,
        })
}

fn case() -> impl Strategy<Value = Case> {
    prop_oneof![case_of(Fam::V4), case_of(Fam::V6)]
}

fn pool(case: &Case) -> Pool {
    Pool::parse("prop", &spec(case))
        .unwrap_or_else(|e| panic!("generated pool must be valid: {e:?}"))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn pool_holds_exactly_the_model(case in case()) {
        let p = pool(&case);
        let want: Vec<IpAddr> = model(&case).into_iter().map(|o| addr(case.fam, o)).collect();
        let got: Vec<IpAddr> = p.iter().collect();
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(p.size(), want.len() as u128);
        // Offsets past the subnet (10.0.0.64.., 2001:db8:1::40..) are never in the pool.
        for o in 0..SPAN + 8 {
            prop_assert_eq!(p.contains(addr(case.fam, o)), want.contains(&addr(case.fam, o)));
        }
    }

    #[test]
    fn allocation_never_repeats_never_leaves_the_pool_never_gives_the_gateway(case in case()) {
        let p = pool(&case);
        let want: Vec<IpAddr> = model(&case).into_iter().map(|o| addr(case.fam, o)).collect();
        let mut alloc = Allocator::new(p.clone());
        let mut got = Vec::new();
        let mut err = None;
        // Bounded: one more call than the subnet holds must fail.
        for _ in 0..=SPAN {
            match alloc.allocate() {
                Ok(a) => got.push(a),
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let distinct: HashSet<IpAddr> = got.iter().copied().collect();
        prop_assert_eq!(distinct.len(), got.len(), "an address was allocated twice");
        for a in &got {
            prop_assert!(p.contains(*a), "{} is outside the pool", a);
            prop_assert!(Some(*a) != case.gateway.map(|g| addr(case.fam, g)), "the gateway {} was allocated", a);
        }
        // Lowest first: exactly the model, in ascending order.
        prop_assert_eq!(&got, &want);
        prop_assert_eq!(err, Some(IpamError::Exhausted { pool: "prop".into(), size: want.len() as u128 }));
    }

    #[test]
    fn first_free_is_the_lowest_model_address_not_in_use(
        case in case(),
        mask in prop::collection::vec(any::<bool>(), (SPAN + 8) as usize),
    ) {
        let p = pool(&case);
        let in_use: BTreeSet<IpAddr> =
            (0..SPAN + 8).filter(|&o| mask[o as usize]).map(|o| addr(case.fam, o)).collect();
        let want = model(&case).into_iter().find(|&o| !mask[o as usize]).map(|o| addr(case.fam, o));
        match (p.first_free(&in_use), want) {
            (Ok(got), Some(want)) => prop_assert_eq!(got, want),
            (Err(IpamError::Exhausted { .. }), None) => {}
            (got, want) => prop_assert!(false, "got {:?}, want {:?}", got, want),
        }
    }

    #[test]
    fn release_makes_the_address_allocatable_again(
        case in case(),
        mask in prop::collection::vec(any::<bool>(), SPAN as usize),
        pick in any::<prop::sample::Index>(),
    ) {
        let allocatable = model(&case);
        let used: Vec<u32> = allocatable.iter().copied().filter(|&o| mask[o as usize]).collect();
        prop_assume!(!used.is_empty());
        let x = used[pick.index(used.len())];
        let mut alloc = Allocator::with_in_use(pool(&case), used.iter().map(|&o| addr(case.fam, o)));
        prop_assert!(alloc.release(addr(case.fam, x)));
        prop_assert!(!alloc.is_in_use(addr(case.fam, x)));
        // The next allocation is the lowest free address, which is x or below it.
        let lowest_free = allocatable.iter().copied().find(|&o| o == x || !mask[o as usize]).unwrap();
        prop_assert_eq!(alloc.allocate().unwrap(), addr(case.fam, lowest_free));
        // Draining the pool hands out x (once) if the first allocation did not.
        let mut rest = vec![addr(case.fam, lowest_free)];
        for _ in 0..SPAN {
            match alloc.allocate() {
                Ok(a) => rest.push(a),
                Err(_) => break,
            }
        }
        prop_assert_eq!(rest.iter().filter(|a| **a == addr(case.fam, x)).count(), 1);
        prop_assert_eq!(alloc.usage().free, 0);
    }

    #[test]
    fn overlap_is_the_first_common_run(a in case_of(Fam::V4), b in case_of(Fam::V4)) {
        let (ma, mb) = (model(&a), model(&b));
        let common: Vec<u32> = ma.iter().copied().filter(|o| mb.contains(o)).collect();
        let want = common.first().map(|&start| {
            let mut end = start;
            while common.contains(&(end + 1)) {
                end += 1;
            }
            if start == end {
                addr_text(Fam::V4, start, false)
            } else {
                format!("{}-{}", addr_text(Fam::V4, start, false), addr_text(Fam::V4, end, false))
            }
        });
        prop_assert_eq!(overlaps(&pool(&a), &pool(&b)).map(|r| r.to_string()), want);
    }

    #[test]
    fn entries_display_normalised_and_round_trip(fam in prop_oneof![Just(Fam::V4), Just(Fam::V6)], e in entry()) {
        let upper = entry_text(fam, e, true);
        let lower = entry_text(fam, e, false);
        let parsed = PoolEntry::parse("addresses[0]", &upper).unwrap();
        let shown = parsed.to_string();
        prop_assert_eq!(PoolEntry::parse("addresses[0]", &shown).unwrap(), parsed);
        prop_assert_eq!(&shown, &PoolEntry::parse("addresses[0]", &lower).unwrap().to_string());
        prop_assert!(!shown.chars().any(|c| c.is_ascii_uppercase()), "{} is not lower-case", shown);
        if fam == Fam::V4 {
            prop_assert_eq!(shown, lower);
        } else {
            prop_assert!(!shown.contains(":0:"), "{} is not compressed", shown);
        }
    }

    #[test]
    fn ipv6_slash_64_first_free_by_arithmetic(used in prop::collection::btree_set(0u32..300, 0..120)) {
        let p = Pool::parse("v6", &PoolSpec {
            addresses: vec!["2001:db8:1::/64".into()],
            prefix: 64,
            gateway: Some("2001:db8:1::1".into()),
            ..PoolSpec::default()
        }).unwrap();
        let in_use: BTreeSet<IpAddr> = used.iter().map(|&o| addr(Fam::V6, o)).collect();
        // ::0 is the subnet-router anycast address, ::1 the gateway.
        let want = (2u32..).find(|o| !used.contains(o)).unwrap();
        prop_assert_eq!(p.first_free(&in_use).unwrap(), addr(Fam::V6, want));
        prop_assert_eq!(p.size(), (1u128 << 64) - 2);
    }
}
