//! The claims planning, state and object rules.
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::api::common::IpPoolReference;
use crate::api::machine::NetworkDevice;
use crate::capi::ipam::{IPAddress, IPAddressClaim, IpAddressClaimSpec, PoolRef};
use crate::capi::ipam::{IpAddressClaimStatus, IpAddressSpec, NameRef};
use crate::instances::IpFamily;
use crate::machine::decide::{ClaimedAddress, ClaimsFact};

fn pool(name: &str) -> InstancePool {
    InstancePool::Recorded(
        PoolRef {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "InClusterIPPool".into(),
            name: name.into(),
        },
        None,
    )
}

#[test]
fn net0_claims_from_the_instance_pools() {
    let (claims, plans) = plan(
        "wl1-md-0-abcde",
        &[],
        &pool("wl1-dc-a-ipv4"),
        &pool("wl1-dc-a-ipv6"),
        &["10.0.0.53".into()],
    )
    .unwrap();
    let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["wl1-md-0-abcde-net0-ipv4", "wl1-md-0-abcde-net0-ipv6"]
    );
    assert_eq!(claims[1].pool.name, "wl1-dc-a-ipv6");
    assert_eq!(
        plans,
        vec![DevicePlan {
            index: 0,
            dhcp4: false,
            dhcp6: false,
            dns: vec!["10.0.0.53".into()]
        }]
    );
}

#[test]
fn dhcp_devices_take_no_claim() {
    let net0 = NetworkDevice {
        name: "net0".into(),
        dhcp4: Some(true),
        ..NetworkDevice::default()
    };
    let (claims, plans) = plan("m", &[net0], &pool("p4"), &pool("p6"), &[]).unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].family, Some(IpFamily::V6));
    assert!(plans[0].dhcp4);
    // No pool, no DHCP setting: DHCPv4 by default.
    let (claims, plans) = plan("m", &[], &InstancePool::None, &InstancePool::None, &[]).unwrap();
    assert!(claims.is_empty());
    assert!(plans[0].dhcp4 && !plans[0].dhcp6);
    // A pool the cluster has not recorded yet: wait, never guess.
    let e = plan(
        "m",
        &[],
        &InstancePool::NotRecorded,
        &InstancePool::None,
        &[],
    )
    .unwrap_err();
    assert!(e.contains("ipv4 pool"), "{e}");
}

#[test]
fn explicit_pool_refs_and_extra_devices() {
    let net1 = NetworkDevice {
        name: "net1".into(),
        bridge: Some("vmbr1".into()),
        ip_pool_ref: vec![IpPoolReference {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "GlobalInClusterIPPool".into(),
            name: "storage-net".into(),
        }],
        dns_servers: vec!["10.1.0.53".into()],
        ..NetworkDevice::default()
    };
    let net2 = NetworkDevice {
        name: "net2".into(),
        bridge: Some("vmbr2".into()),
        ..NetworkDevice::default()
    };
    let (claims, plans) = plan(
        "m",
        &[net2, net1],
        &pool("p4"),
        &InstancePool::None,
        &["10.0.0.53".into()],
    )
    .unwrap();
    let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, vec!["m-net0-ipv4", "m-net1-0"]);
    assert_eq!(claims[1].pool.kind, "GlobalInClusterIPPool");
    assert_eq!(plans.len(), 3);
    assert_eq!(plans[1].dns, vec!["10.1.0.53".to_string()]);
    // net2: no ref, no DHCP: no claim and no DHCP.
    assert!(!plans[2].dhcp4 && !plans[2].dhcp6);
}

#[test]
fn long_names_are_cut_stably() {
    let long = "m".repeat(260);
    let a = instance_claim_name(&long, "net0", IpFamily::V4);
    assert_eq!(a.len(), 253);
    assert_eq!(a, instance_claim_name(&long, "net0", IpFamily::V4));
    assert_ne!(a, instance_claim_name(&long, "net0", IpFamily::V6));
}

fn claim(created: i64, conditions: Vec<Condition>) -> IPAddressClaim {
    let mut c = IPAddressClaim::new("m-net0-ipv4", IpAddressClaimSpec::default());
    c.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
    c.status = Some(IpAddressClaimStatus {
        address_ref: None,
        conditions,
    });
    c
}

#[test]
fn claim_states_with_an_injected_clock() {
    let now = Timestamp::from_second(1000).unwrap();
    let patience = Duration::from_secs(60);
    assert_eq!(
        claim_state("net0", None, None, now, patience),
        ClaimState::Missing
    );
    assert_eq!(
        claim_state("net0", Some(&claim(990, vec![])), None, now, patience),
        ClaimState::Waiting {
            exhausted: false,
            message: "no address since 1970-01-01T00:16:30Z".into()
        }
    );
    // Waiting long is said, but it is not exhaustion.
    assert_eq!(
        claim_state("net0", Some(&claim(800, vec![])), None, now, patience),
        ClaimState::Waiting {
            exhausted: false,
            message:
                "no address since 1970-01-01T00:13:20Z; longer than the usual 60s: is the IPAM provider running?"
                    .into()
        }
    );
    let failed = Condition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: "AllocationFailed".into(),
        message: "pool p not found".into(),
        last_transition_time: Time(now),
        observed_generation: None,
    };
    assert_eq!(
        claim_state("net0", Some(&claim(998, vec![failed])), None, now, patience),
        ClaimState::Waiting {
            exhausted: false,
            message: "no address since 1970-01-01T00:16:38Z (AllocationFailed: pool p not found)"
                .into()
        }
    );
    let exhausted = Condition {
        type_: "Ready".into(),
        status: "False".into(),
        reason: "PoolExhausted".into(),
        message: "pool wl1-dc-a-ipv4 has no free address".into(),
        last_transition_time: Time(now),
        observed_generation: None,
    };
    assert_eq!(
        claim_state(
            "net0",
            Some(&claim(999, vec![exhausted])),
            None,
            now,
            patience
        ),
        ClaimState::Waiting {
            exhausted: true,
            message: "PoolExhausted: pool wl1-dc-a-ipv4 has no free address".into()
        }
    );
    let addr = IPAddress::new(
        "m-net0-ipv4",
        IpAddressSpec {
            claim_ref: NameRef {
                name: "m-net0-ipv4".into(),
            },
            pool_ref: PoolRef::default(),
            address: "10.0.0.20".into(),
            prefix: Some(24),
            gateway: Some("10.0.0.1".into()),
        },
    );
    let mut c = claim(990, vec![]);
    c.status = Some(IpAddressClaimStatus {
        address_ref: Some(NameRef {
            name: "m-net0-ipv4".into(),
        }),
        conditions: vec![],
    });
    assert_eq!(
        claim_state("net0", Some(&c), Some(&addr), now, patience),
        ClaimState::Bound(ClaimedAddress {
            net: "net0".into(),
            address: "10.0.0.20".parse().unwrap(),
            prefix: 24,
            gateway: Some("10.0.0.1".parse().unwrap()),
            metric: None,
        })
    );
}

#[test]
fn waits_read_like_a_human_wrote_them() {
    assert_eq!(waited(Duration::from_millis(300)), "0.3s");
    assert_eq!(waited(Duration::from_secs(42)), "42s");
    assert_eq!(waited(Duration::from_secs(185)), "3m05s");
    assert_eq!(waited(Duration::from_secs(3720)), "1h02m");
}

#[test]
fn b16_duplicates_only_in_the_same_l2_domain() {
    let a: IpAddr = "10.0.0.25".parse().unwrap();
    let b: IpAddr = "10.0.0.26".parse().unwrap();
    let ours = vec![(a, "vmbr0".to_string(), Some(10))];
    let others = vec![
        (
            "wl1/wl1-md-0-x".to_string(),
            vec![(a, "vmbr0".to_string(), Some(10))],
        ),
        (
            "wl3/other-vlan".to_string(),
            vec![(a, "vmbr0".to_string(), Some(20))],
        ),
        (
            "wl4/other-bridge".to_string(),
            vec![(a, "vmbr1".to_string(), Some(10))],
        ),
        (
            "wl5/other-address".to_string(),
            vec![(b, "vmbr0".to_string(), Some(10))],
        ),
    ];
    assert_eq!(
        duplicates(&ours, &others),
        vec![(a, "wl1/wl1-md-0-x".to_string())]
    );
}

#[test]
fn folding() {
    let (wanted, _) = plan("m", &[], &pool("p4"), &pool("p6"), &[]).unwrap();
    let bound = ClaimState::Bound(ClaimedAddress {
        net: "net0".into(),
        address: "10.0.0.20".parse().unwrap(),
        prefix: 24,
        gateway: None,
        metric: None,
    });
    assert_eq!(fold(&[], &[]), ClaimsFact::NotNeeded);
    assert_eq!(
        fold(&wanted, &[bound.clone(), ClaimState::Missing]),
        ClaimsFact::Missing
    );
    assert_eq!(
        fold(
            &wanted,
            &[
                bound.clone(),
                ClaimState::Waiting {
                    exhausted: true,
                    message: "PoolExhausted".into()
                }
            ]
        ),
        ClaimsFact::Pending {
            pools: "InClusterIPPool p6".into(),
            exhausted: true,
            message: "m-net0-ipv6: PoolExhausted".into()
        }
    );
    assert!(matches!(fold(&wanted, &[bound.clone(), bound]), ClaimsFact::Bound(v) if v.len() == 2));
}
