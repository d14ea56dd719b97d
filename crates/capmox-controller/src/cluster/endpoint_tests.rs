//! The endpoint decision: a set endpoint wins, the claim is made once and
//! recorded first, its address is written with the pool's port.

use super::*;

fn by_ref() -> EndpointPool {
    EndpointPool {
        pool_ref: Some(IpPoolReference {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "GlobalInClusterIPPool".into(),
            name: "vips".into(),
        }),
        port: Some(8443),
        ..EndpointPool::default()
    }
}

fn spec(pool: Option<EndpointPool>, endpoint: Option<(&str, i32)>) -> ProxmoxClusterSpec {
    ProxmoxClusterSpec {
        control_plane_endpoint_pool: pool,
        control_plane_endpoint: endpoint.map(|(h, p)| ApiEndpoint {
            host: h.into(),
            port: p,
        }),
        ..ProxmoxClusterSpec::default()
    }
}

fn recorded(address: Option<&str>) -> EndpointClaimStatus {
    EndpointClaimStatus {
        name: "wl1-control-plane-endpoint".into(),
        pool_ref: by_ref().pool_ref.unwrap(),
        address: address.map(str::to_string),
    }
}

fn step(
    spec: &ProxmoxClusterSpec,
    cluster: Option<&Endpoint>,
    rec: Option<&EndpointClaimStatus>,
    claim: Option<&ClaimFact>,
) -> Step {
    decide(&Facts {
        name: "wl1",
        spec,
        cluster_endpoint: cluster,
        recorded: rec,
        claim,
    })
}

#[test]
fn without_a_pool_nothing_is_claimed() {
    assert_eq!(step(&spec(None, None), None, None, None), Step::Nothing);
}

#[test]
fn a_user_set_endpoint_wins_on_either_object() {
    let s = spec(Some(by_ref()), Some(("10.0.0.5", 6443)));
    assert_eq!(step(&s, None, None, None), Step::Nothing);
    // Even with a claim recorded and bound: the endpoint is never replaced.
    let r = recorded(Some("10.0.0.77"));
    let bound = ClaimFact::Bound("10.0.0.77".into());
    assert_eq!(step(&s, None, Some(&r), Some(&bound)), Step::Nothing);
    // The Cluster's endpoint (copied by the cluster decision) wins too.
    let s = spec(Some(by_ref()), None);
    let user = Endpoint {
        host: "api.example.org".into(),
        port: 6443,
    };
    assert_eq!(step(&s, Some(&user), None, None), Step::Nothing);
    // An unusable Cluster endpoint (empty host) is not one.
    let empty = Endpoint {
        host: String::new(),
        port: 0,
    };
    assert!(matches!(step(&s, Some(&empty), None, None), Step::Claim(_)));
}

#[test]
fn the_claim_is_recorded_then_read_then_its_address_written() {
    let s = spec(Some(by_ref()), None);
    let Step::Claim(c) = step(&s, None, None, None) else {
        panic!("claim expected")
    };
    assert_eq!(c, recorded(None));
    assert_eq!(c.name, crate::names::endpoint_claim_name("wl1"));
    // Recorded: read it before anything else.
    assert_eq!(step(&s, None, Some(&c), None), Step::ReadClaim);
    let pending = ClaimFact::Pending("PoolExhausted: no free address".into());
    assert_eq!(
        step(&s, None, Some(&c), Some(&pending)),
        Step::Wait(
            "waiting for IPAddressClaim wl1-control-plane-endpoint to get an address from \
             GlobalInClusterIPPool vips: PoolExhausted: no free address"
                .into()
        )
    );
    let bound = ClaimFact::Bound("10.0.0.77".into());
    assert_eq!(
        step(&s, None, Some(&c), Some(&bound)),
        Step::Write(ApiEndpoint {
            host: "10.0.0.77".into(),
            port: 8443,
        })
    );
    // Written: nothing more, not even when the claim is gone later.
    let done = spec(Some(by_ref()), Some(("10.0.0.77", 8443)));
    let r = recorded(Some("10.0.0.77"));
    assert_eq!(
        step(&done, None, Some(&r), Some(&ClaimFact::Missing)),
        Step::Nothing
    );
    // Written, but the status write of that reconcile was lost: the record
    // gets the claim's address, read again.
    let lost = recorded(None);
    assert_eq!(step(&done, None, Some(&lost), None), Step::ReadClaim);
    assert_eq!(
        step(&done, None, Some(&lost), Some(&bound)),
        Step::Record("10.0.0.77".into())
    );
    assert_eq!(
        step(&done, None, Some(&lost), Some(&ClaimFact::Missing)),
        Step::Nothing
    );
}

#[test]
fn a_recorded_claim_that_is_missing_is_created_under_its_recorded_name() {
    // Recorded, then the process stopped before the create (or the claim
    // was deleted by hand): the record's name and pool are used again.
    let s = spec(Some(by_ref()), None);
    let mut r = recorded(None);
    r.name = "older-name".into();
    assert_eq!(
        step(&s, None, Some(&r), Some(&ClaimFact::Missing)),
        Step::Claim(r.clone())
    );
}

#[test]
fn addresses_make_a_pool_named_after_the_cluster() {
    let pool = EndpointPool {
        addresses: vec!["10.10.0.5-10.10.0.9".into()],
        prefix: Some(24),
        ..EndpointPool::default()
    };
    let s = spec(Some(pool.clone()), None);
    let Step::Claim(c) = step(&s, None, None, None) else {
        panic!("claim expected")
    };
    assert_eq!(
        c.pool_ref,
        IpPoolReference {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "InClusterIPPool".into(),
            name: "wl1-control-plane-endpoint".into(),
        }
    );
    let d = desired_pool("wl1", &s).expect("a pool");
    assert_eq!(d.name, "wl1-control-plane-endpoint");
    assert!(d.endpoint && d.instance.is_none());
    assert_eq!(d.spec.addresses, ["10.10.0.5-10.10.0.9"]);
    assert_eq!(d.spec.prefix, 24);
    assert_eq!(d.spec.gateway, None);
    // A poolRef makes no pool.
    assert_eq!(desired_pool("wl1", &spec(Some(by_ref()), None)), None);
    let v6 = EndpointPool {
        addresses: vec!["2001:db8::10".into()],
        prefix: Some(64),
        ..EndpointPool::default()
    };
    assert_eq!(
        desired_pool("wl1", &spec(Some(v6), None)).map(|d| d.family),
        Some(IpFamily::V6)
    );
}
