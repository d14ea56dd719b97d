//! Property tests: valid Kubernetes names up to 253 characters (every
//! allowed character, labels longer than 63 included) give values the
//! receiving systems accept — checked with kube-sim's validators
//! (`kube_sim::validation`), pve-sim's format checks (`pve_sim::schema`,
//! `pve_sim::upload_file_name`) and an RFC 1123 host-name check written
//! here — and different inputs give different values.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use pve_client::options::{Tag, Tags};

use super::*;

/// The derivations these functions replace, copied verbatim from the machine
/// controller as it was (`machine/claims.rs` `cut`, `machine/reconcile.rs`
/// `iso_file`, `machine/marker.rs` `Marker::tag`), so that existing objects
/// keep their names.
mod before {
    use pve_client::options::Tag;

    fn cut(name: String) -> String {
        if name.len() <= 253 {
            return name;
        }
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        let mut head = name[..240].to_string();
        while head.ends_with(['-', '.']) {
            head.pop();
        }
        format!("{head}-{h:012x}").chars().take(253).collect()
    }

    pub fn instance_claim_name(machine: &str, net: &str, family: &str) -> String {
        cut(format!("{machine}-{net}-{family}"))
    }

    pub fn ref_claim_name(machine: &str, net: &str, i: usize) -> String {
        cut(format!("{machine}-{net}-{i}"))
    }

    pub fn iso_file(vmid: u32, uid: &str) -> String {
        format!("capmox-{vmid}-{}.iso", uid.to_ascii_lowercase())
    }

    pub fn tag(uid: &str) -> Tag {
        Tag::sanitize(&format!("capmox-{}", uid.to_ascii_lowercase()))
    }

    pub fn pool_name(cluster: &str, instance: Option<&str>, family: &str) -> String {
        match instance {
            Some(i) => format!("{cluster}-{i}-{family}"),
            None => format!("{cluster}-{family}"),
        }
    }
}

/// RFC 1123 section 2.1 host name (RFC 952 labels with a leading digit
/// allowed): dot-separated labels of 1–63 letters, digits and `-`, not
/// starting or ending with `-`; at most 253 characters.
fn rfc1123_hostname(h: &str) -> bool {
    !h.is_empty()
        && h.len() <= 253
        && h.split('.').all(|l| {
            (1..=63).contains(&l.len())
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

fn object_name_ok(group: &str, kind: &str, name: &str) -> Result<(), Vec<String>> {
    let errs = kube_sim::validation::object_name(
        kube_sim::validation::name_rule(group, kind),
        name,
        false,
    );
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const LABEL_CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-";

/// One DNS-1123 label shape of 1 to `max` characters (labels of a subdomain
/// have no limit of their own): alphanumeric ends, `-` allowed inside.
fn label(max: usize) -> impl Strategy<Value = String> {
    (1..=max).prop_flat_map(|len| {
        (
            prop::sample::select(ALNUM),
            prop::collection::vec(prop::sample::select(LABEL_CHARS), len.saturating_sub(2)),
            prop::sample::select(ALNUM),
        )
            .prop_map(move |(first, middle, last)| {
                let mut b = vec![first];
                b.extend(middle);
                if len > 1 {
                    b.push(last);
                }
                String::from_utf8(b).unwrap_or_default()
            })
    })
}

/// Cuts a joined subdomain to 253 characters, keeping it a subdomain.
fn fit(mut s: String) -> String {
    s.truncate(253);
    while s.ends_with(['-', '.']) {
        s.pop();
    }
    s
}

/// A valid Kubernetes object name (DNS-1123 subdomain, at most 253
/// characters, every character of `[a-z0-9.-]`): short ones, and ones of
/// several labels up to 120 characters cut at the limit.
fn k8s_name() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::collection::vec(label(30), 1..4).prop_map(|ls| ls.join(".")),
        prop::collection::vec(label(120), 1..8).prop_map(|ls| fit(ls.join("."))),
    ]
}

fn uid() -> impl Strategy<Value = String> {
    any::<[u8; 16]>().prop_map(|b| uuid::Uuid::from_bytes(b).to_string())
}

fn family() -> impl Strategy<Value = IpFamily> {
    prop_oneof![Just(IpFamily::V4), Just(IpFamily::V6)]
}

fn other(f: IpFamily) -> IpFamily {
    match f {
        IpFamily::V4 => IpFamily::V6,
        IpFamily::V6 => IpFamily::V4,
    }
}

fn net() -> impl Strategy<Value = String> {
    (0u8..=31).prop_map(|n| format!("net{n}"))
}

/// Two different valid names that share their first 241–245 characters, so
/// that every value cut to a limit differs only in its hash.
fn twins() -> impl Strategy<Value = (String, String)> {
    (
        proptest::string::string_regex("[a-z0-9][-a-z0-9]{239,243}[a-z0-9]").unwrap(),
        proptest::string::string_regex("[a-z0-9]{1,7}").unwrap(),
        proptest::string::string_regex("[a-z0-9]{1,7}").unwrap(),
    )
        .prop_filter("distinct tails", |(_, a, b)| a != b)
        .prop_map(|(common, a, b)| (format!("{common}.{a}"), format!("{common}.{b}")))
}

#[test]
fn the_generators_make_valid_kubernetes_names() {
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let mut over_63 = 0;
    let mut at_limit = 0;
    for _ in 0..500 {
        let n = k8s_name().new_tree(&mut runner).unwrap().current();
        assert!(
            kube_sim::validation::dns1123_subdomain(&n).is_empty(),
            "{n}"
        );
        over_63 += usize::from(n.split('.').any(|l| l.len() > 63));
        at_limit += usize::from(n.len() >= 250);
    }
    assert!(over_63 > 100, "{over_63} names with a label over 63");
    assert!(at_limit > 50, "{at_limit} names at the limit");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 512,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x4e41_4d45),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn claim_and_pool_names_are_object_names(
        m in k8s_name(), c in k8s_name(), i in k8s_name(), n in net(), f in family(), idx in 0usize..8,
    ) {
        let claim = claim_name(&m, &n, f);
        prop_assert_eq!(object_name_ok("ipam.cluster.x-k8s.io", "IPAddressClaim", &claim), Ok(()));
        let by_ref = ref_claim_name(&m, &n, idx);
        prop_assert_eq!(object_name_ok("ipam.cluster.x-k8s.io", "IPAddressClaim", &by_ref), Ok(()));
        // Instance names are DNS-1123 labels; the cluster is any object name.
        let inst: String = i.replace('.', "-").chars().take(63).collect::<String>();
        let inst = inst.trim_end_matches('-');
        prop_assume!(!inst.is_empty());
        for p in [pool_name(&c, Some(inst), f), pool_name(&c, None, f)] {
            prop_assert_eq!(object_name_ok("ipam.cluster.x-k8s.io", "InClusterIPPool", &p), Ok(()));
        }
    }

    #[test]
    fn existing_names_stay_the_same(m in k8s_name(), n in net(), f in family(), idx in 0usize..8, u in uid(), vmid in 100u32..=999_999_999) {
        prop_assert_eq!(claim_name(&m, &n, f), before::instance_claim_name(&m, &n, f.as_str()));
        prop_assert_eq!(ref_claim_name(&m, &n, idx), before::ref_claim_name(&m, &n, idx));
        prop_assert_eq!(iso_file_name(vmid, &u), before::iso_file(vmid, &u));
        prop_assert_eq!(iso_file_name(vmid, &u.to_uppercase()), before::iso_file(vmid, &u));
        prop_assert_eq!(owner_tag(&u), before::tag(&u));
        prop_assert_eq!(owner_tag(&u.to_uppercase()), before::tag(&u));
        // Names within the limits are used as they are (an instance's pool
        // changed on purpose: see `pools_of_two_clusters_differ`).
        let old = before::pool_name(&m, None, f.as_str());
        if old.len() <= 253 {
            prop_assert_eq!(pool_name(&m, None, f), old);
        }
        if m.len() <= 63 {
            prop_assert_eq!(label_value(&m), m.clone());
        }
        if m.split('.').all(|l| l.len() <= 63) {
            prop_assert_eq!(hostname(&m), m.clone());
        }
        prop_assert_eq!(vm_name(&m), m.clone());
    }

    #[test]
    fn label_values_hostnames_and_vm_names_fit(m in k8s_name(), nanos in any::<u64>()) {
        let v = label_value(&m);
        prop_assert_eq!(kube_sim::validation::label_value(&v), Vec::<String>::new(), "{}", v);
        let h = hostname(&m);
        prop_assert!(rfc1123_hostname(&h), "{}", h);
        // The host name is also the default Node name.
        prop_assert_eq!(object_name_ok("", "Node", &h), Ok(()));
        let vm = vm_name(&m);
        prop_assert_eq!(pve_sim::schema::check_format("dns-name", &vm), Ok(()));
        let e = event_name(&m, nanos);
        prop_assert_eq!(object_name_ok("events.k8s.io", "Event", &e), Ok(()));
        let suffix = format!(".{nanos:x}");
        prop_assert!(e.ends_with(&suffix));
        if plain_event_name_fits(&m) {
            prop_assert_eq!(e, format!("{m}.{nanos:x}"));
        }
    }

    #[test]
    fn tags_and_iso_file_names_fit(u in uid(), vmid in 100u32..=999_999_999) {
        let t = owner_tag(&u);
        prop_assert_eq!(pve_sim::schema::check_format("pve-tag-list", t.as_str()), Ok(()));
        prop_assert_eq!(Tags::parse(t.as_str()).map(|p| p.len()), Ok(1));
        let f = iso_file_name(vmid, &u);
        prop_assert_eq!(pve_sim::upload_file_name(&f, "iso"), Ok(f.clone()));
    }

    #[test]
    fn odd_uids_still_give_valid_file_names(u in ".{0,300}", vmid in 100u32..=999_999_999) {
        let f = iso_file_name(vmid, &u);
        prop_assert_eq!(pve_sim::upload_file_name(&f, "iso"), Ok(f.clone()));
        prop_assert!(Tag::new(owner_tag(&u).as_str()).is_ok());
    }

    #[test]
    fn different_inputs_give_different_values((a, b) in twins(), n in net(), f in family(), nanos in any::<u64>()) {
        prop_assert_ne!(claim_name(&a, &n, f), claim_name(&b, &n, f));
        prop_assert_ne!(ref_claim_name(&a, &n, 0), ref_claim_name(&b, &n, 0));
        prop_assert_ne!(pool_name(&a, Some("dc-a"), f), pool_name(&b, Some("dc-a"), f));
        prop_assert_ne!(label_value(&a), label_value(&b));
        prop_assert_ne!(hostname(&a), hostname(&b));
        prop_assert_ne!(event_name(&a, nanos), event_name(&b, nanos));
    }

    #[test]
    fn pools_of_two_clusters_differ(c in k8s_name(), i in "[a-z0-9]{1,8}", f1 in family(), f2 in family(), j in "[a-z0-9]{1,8}") {
        // The clash the hash is there for: `<c>` with instance `<i>` and a
        // cluster named `<c>-<i>` with its cluster-wide pool.
        let joined = format!("{c}-{i}");
        prop_assert_ne!(pool_name(&c, Some(&i), f1), pool_name(&joined, None, f2));
        prop_assert_ne!(pool_name(&c, Some(&i), f1), pool_name(&joined, Some(&j), f2));
        prop_assert_ne!(pool_name(&c, Some(&i), f1), endpoint_pool_name(&joined));
        prop_assert_ne!(pool_name(&c, None, f1), endpoint_pool_name(&c));
    }

    #[test]
    fn one_machine_and_one_cluster_never_reuse_a_name(
        m in k8s_name(), c in k8s_name(), n1 in net(), n2 in net(), f1 in family(), f2 in family(), i1 in 0usize..4, i2 in 0usize..4,
    ) {
        if (&n1, f1) != (&n2, f2) {
            prop_assert_ne!(claim_name(&m, &n1, f1), claim_name(&m, &n2, f2));
        }
        if (&n1, i1) != (&n2, i2) {
            prop_assert_ne!(ref_claim_name(&m, &n1, i1), ref_claim_name(&m, &n2, i2));
        }
        prop_assert_ne!(claim_name(&m, &n1, f1), ref_claim_name(&m, &n2, i2));
        let pools = [
            pool_name(&c, Some("dc-a"), f1),
            pool_name(&c, Some("dc-b"), f1),
            pool_name(&c, None, f1),
            pool_name(&c, Some("dc-a"), other(f1)),
        ];
        for (i, p) in pools.iter().enumerate() {
            for q in &pools[i + 1..] {
                prop_assert_ne!(p, q);
            }
        }
    }
}

#[test]
fn shortening_by_example() {
    let long = "a".repeat(300);
    let v = label_value(&long);
    assert_eq!(v.len(), 63);
    assert!(v.starts_with(&"a".repeat(50)));
    assert_eq!(v, label_value(&long), "deterministic");
    assert_eq!(label_value("wl1"), "wl1");
    assert_eq!(hostname("wl1-md-0-x7k2p"), "wl1-md-0-x7k2p");
    assert_eq!(hostname("node.example.com"), "node.example.com");
    let h = hostname(&format!("{}.b", "a".repeat(70)));
    assert_eq!(h.len(), 63);
    assert!(!h.contains('.'));
    assert_eq!(
        iso_file_name(131, "3F2A9C1E-7B4D-4E8A-9C2F-0A1B2C3D4E5F"),
        "capmox-131-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso"
    );
    assert_eq!(
        owner_tag("3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f").as_str(),
        "capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
    );
    // FNV-1a of "wl1/dc-a/ipv4", computed apart.
    assert_eq!(
        pool_name("wl1", Some("dc-a"), IpFamily::V4),
        "wl1-dc-a-ipv4-97c9bbbd1ee4075d"
    );
    assert_eq!(endpoint_claim_name("wl1"), "wl1-control-plane-endpoint");
    let long = endpoint_claim_name(&"c".repeat(253));
    assert_eq!(long.len(), 253);
    assert_eq!(long, endpoint_pool_name(&"c".repeat(253)));
    assert_eq!(pool_name("wl1", None, IpFamily::V6), "wl1-ipv6");
    // CAPMOX v0.9's InClusterPoolFormat(cluster, nil, "v4"/"v6").
    assert_eq!(capmox_pool_name("wl1", IpFamily::V4), "wl1-v4-icip");
    assert_eq!(capmox_pool_name("wl1", IpFamily::V6), "wl1-v6-icip");
    assert_eq!(
        claim_name("wl1-md-0-abcde", "net0", IpFamily::V4),
        "wl1-md-0-abcde-net0-ipv4"
    );
    let cut = claim_name(&"m".repeat(253), "net0", IpFamily::V4);
    assert_eq!(cut.len(), 253);
    assert!(cut.starts_with(&format!("{}-", "m".repeat(240))));
    assert_eq!(event_name("w1", 0x18b), "w1.18b");
    assert!(plain_event_name_fits(&"e".repeat(236)));
    assert!(!plain_event_name_fits(&"e".repeat(237)));
}
