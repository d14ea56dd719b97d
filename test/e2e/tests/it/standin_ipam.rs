//! The IPAM fulfilment stand-in against kube-sim: lowest free address,
//! ownership and finalizers, exhaustion and re-queue, skipped claims, pool
//! accounting and protection.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use capmox_e2e::crds::cluster::{Cluster, ClusterSpec};
use capmox_e2e::crds::ipam::{
    IN_CLUSTER_IP_POOL, IPAM_GROUP, IPAddress, IPAddressClaim, InClusterIPPool,
    InClusterIpPoolSpec, IpAddressClaimSpec, PoolCounts, PoolRef,
};
use capmox_e2e::scenario::{Progress, wait_until};
use capmox_e2e::setup;
use capmox_e2e::standin::workload::WorkloadNodes;
use capmox_e2e::standin::{StandIn, StandInOptions};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const NS: &str = "ipam";
const WAIT: Duration = Duration::from_secs(20);
const POLL: Duration = Duration::from_millis(10);

struct World {
    _sim: kube_sim::KubeSim,
    _standin: StandIn,
    client: kube::Client,
}

/// kube-sim with the CAPI and IPAM CRDs of `crate::capi_crds` (the
/// stand-in's own in `make test`, the real ones in the conformance suite).
async fn world() -> World {
    world_with(crate::capi_crds()).await
}

async fn world_with(
    capi_crds: Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
) -> World {
    world_resyncing(capi_crds, Duration::from_millis(300)).await
}

/// [`world_with`], the stand-in's safety net running every `resync`.
async fn world_resyncing(
    capi_crds: Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>,
    resync: Duration,
) -> World {
    let sim = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    let client = sim.client().await.unwrap();
    setup::install_crds(&client, &capi_crds, WAIT)
        .await
        .unwrap();
    setup::install_crds(&client, &setup::provider_crds().unwrap(), WAIT)
        .await
        .unwrap();
    setup::ensure_namespace(&client, NS).await.unwrap();
    let standin = StandIn::start(
        client.clone(),
        Arc::new(WorkloadNodes::new(client.clone())),
        StandInOptions {
            namespace: Some(NS.into()),
            resync,
            retry: Duration::from_millis(20),
            ..StandInOptions::default()
        },
    )
    .await
    .unwrap();
    World {
        _sim: sim,
        _standin: standin,
        client,
    }
}

async fn cluster(client: &kube::Client, name: &str, paused: bool) {
    let c = Cluster::new(
        name,
        ClusterSpec {
            paused: Some(paused),
            ..ClusterSpec::default()
        },
    );
    Api::<Cluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &c)
        .await
        .unwrap();
}

fn pool_ref(name: &str) -> PoolRef {
    PoolRef {
        api_group: IPAM_GROUP.into(),
        kind: IN_CLUSTER_IP_POOL.into(),
        name: name.into(),
    }
}

async fn claim(client: &kube::Client, name: &str, cluster: &str, pool: &str) {
    let mut c = IPAddressClaim::new(
        name,
        IpAddressClaimSpec {
            cluster_name: Some(cluster.into()),
            pool_ref: pool_ref(pool),
        },
    );
    c.metadata.labels = Some(
        [(
            "cluster.x-k8s.io/cluster-name".to_string(),
            cluster.to_string(),
        )]
        .into(),
    );
    Api::<IPAddressClaim>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &c)
        .await
        .unwrap();
}

/// Waits until the claim has an address and returns it.
async fn address_of(client: &kube::Client, claim: &str) -> String {
    let claims: Api<IPAddressClaim> = Api::namespaced(client.clone(), NS);
    let addrs: Api<IPAddress> = Api::namespaced(client.clone(), NS);
    wait_until(&format!("claim {claim} allocated"), WAIT, POLL, || {
        let claims = claims.clone();
        let addrs = addrs.clone();
        let claim = claim.to_string();
        async move {
            let c = claims.get(&claim).await?;
            match c.status.as_ref().and_then(|s| s.address_ref.as_ref()) {
                Some(r) => Ok(Progress::Done(addrs.get(&r.name).await?.spec.address)),
                None => Ok(Progress::Pending(capmox_e2e::standin::ipam::claim_state(
                    c.status.as_ref(),
                ))),
            }
        }
    })
    .await
    .unwrap()
}

async fn pool(client: &kube::Client, name: &str, addresses: &[&str]) {
    let p = InClusterIPPool::new(
        name,
        InClusterIpPoolSpec {
            addresses: addresses.iter().map(|s| (*s).to_string()).collect(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            ..InClusterIpPoolSpec::default()
        },
    );
    Api::<InClusterIPPool>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &p)
        .await
        .unwrap();
}

/// The cause of the fault scenario's stall (machines at
/// `WaitingForIPAddresses` for good): the claim controller runs one
/// reconcile at a time, and its safety net re-queued every claim each
/// period. Once a period held fewer reconciles than there were claims
/// (a busy machine, a slow API server), the allocated claims came back each
/// period and kube-runtime took the next due claim in no fixed order: the
/// same few claims were reconciled over and over, the others never. Here a
/// period far shorter than any reconcile stands for the busy machine:
/// every claim still gets its address.
#[tokio::test]
async fn a_busy_claim_controller_still_serves_every_claim() {
    let w = world_resyncing(crate::capi_crds(), Duration::from_millis(1)).await;
    let c = &w.client;
    cluster(c, "c1", false).await;
    pool(c, "p1", &["10.0.0.10-10.0.0.40"]).await;
    let names: Vec<String> = (0..12).map(|i| format!("m{i:02}")).collect();
    for n in &names {
        claim(c, n, "c1", "p1").await;
    }
    let mut got = std::collections::BTreeSet::new();
    for n in &names {
        got.insert(address_of(c, n).await);
    }
    // Twelve claims, twelve different addresses, the lowest of the pool.
    let want: std::collections::BTreeSet<String> =
        (10..22).map(|i| format!("10.0.0.{i}")).collect();
    assert_eq!(got, want);
}

#[tokio::test]
async fn lowest_free_exhaustion_requeue_and_release() {
    lowest_free_flow(world().await).await;
}

async fn lowest_free_flow(w: World) {
    let c = &w.client;
    cluster(c, "c1", false).await;
    pool(c, "p1", &["10.0.0.1-10.0.0.3"]).await;
    // The gateway (10.0.0.1) is never handed out: two addresses.
    claim(c, "a", "c1", "p1").await;
    assert_eq!(address_of(c, "a").await, "10.0.0.2");
    claim(c, "b", "c1", "p1").await;
    assert_eq!(address_of(c, "b").await, "10.0.0.3");

    // The address: named after the claim, owned by claim and pool, protected, labelled.
    let addrs: Api<IPAddress> = Api::namespaced(c.clone(), NS);
    let a = addrs.get("a").await.unwrap();
    assert_eq!(a.spec.claim_ref.name, "a");
    assert_eq!(a.spec.prefix, 24);
    assert_eq!(a.spec.gateway.as_deref(), Some("10.0.0.1"));
    assert_eq!(a.finalizers(), ["ipam.cluster.x-k8s.io/ProtectAddress"]);
    assert_eq!(
        a.labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("c1")
    );
    let owners: Vec<(String, String, Option<bool>, Option<bool>)> = a
        .owner_references()
        .iter()
        .map(|o| {
            (
                o.kind.clone(),
                o.name.clone(),
                o.controller,
                o.block_owner_deletion,
            )
        })
        .collect();
    assert_eq!(
        owners,
        [
            ("IPAddressClaim".into(), "a".into(), Some(true), Some(true)),
            (
                "InClusterIPPool".into(),
                "p1".into(),
                Some(false),
                Some(true)
            ),
        ]
    );
    let claims: Api<IPAddressClaim> = Api::namespaced(c.clone(), NS);
    assert_eq!(
        claims.get("a").await.unwrap().finalizers(),
        ["ipam.cluster.x-k8s.io/ReleaseAddress"]
    );

    // A claim of an unknown Cluster is skipped: no finalizer, no address.
    claim(c, "orphan", "no-such-cluster", "p1").await;
    // The pool is full: the next claim says so.
    claim(c, "c", "c1", "p1").await;
    wait_until("claim c PoolExhausted", WAIT, POLL, || {
        let claims = claims.clone();
        async move {
            let s = claims.get("c").await?.status;
            let state = capmox_e2e::standin::ipam::claim_state(s.as_ref());
            Ok(if state.starts_with("PoolExhausted: ") {
                Progress::Done(())
            } else {
                Progress::Pending(state)
            })
        }
    })
    .await
    .unwrap();
    // Pool accounting.
    let pools: Api<InClusterIPPool> = Api::namespaced(c.clone(), NS);
    wait_until("pool counts", WAIT, POLL, || {
        let pools = pools.clone();
        async move {
            let p = pools.get("p1").await?;
            let counts = p.status.and_then(|s| s.ip_addresses);
            let want = PoolCounts {
                total: 2,
                free: 0,
                used: 2,
                out_of_range: 0,
            };
            Ok(if counts.as_ref() == Some(&want) {
                Progress::Done(())
            } else {
                Progress::Pending(format!("{counts:?}"))
            })
        }
    })
    .await
    .unwrap();

    // Releasing b frees 10.0.0.3, and the waiting claim c gets it.
    claims.delete("b", &DeleteParams::default()).await.unwrap();
    assert_eq!(address_of(c, "c").await, "10.0.0.3");
    let gone = wait_until("claim b and its address gone", WAIT, POLL, || {
        let claims = claims.clone();
        let addrs = addrs.clone();
        async move {
            let claim = claims.get_opt("b").await?;
            let addr = addrs.get_opt("b").await?;
            Ok(if claim.is_none() && addr.is_none() {
                Progress::Done(())
            } else {
                Progress::Pending(format!(
                    "claim: {}, address: {}",
                    claim.is_some(),
                    addr.is_some()
                ))
            })
        }
    })
    .await;
    gone.unwrap();
    let ready = claims.get("c").await.unwrap().status.unwrap().conditions;
    assert_eq!(ready[0].type_, "Ready");
    assert_eq!(ready[0].status, "True");

    // The orphan claim was never touched.
    let orphan = claims.get("orphan").await.unwrap();
    assert!(orphan.finalizers().is_empty());
    assert!(orphan.status.is_none());
    assert!(addrs.get_opt("orphan").await.unwrap().is_none());
}

#[tokio::test]
async fn paused_cluster_waits_and_pool_is_protected() {
    let w = world().await;
    let c = &w.client;
    cluster(c, "paused", true).await;
    cluster(c, "running", false).await;
    pool(c, "p2", &["10.0.0.10/31"]).await;
    claim(c, "held", "paused", "p2").await;
    claim(c, "free", "running", "p2").await;
    // 10.0.0.10/31 has two addresses (a /31 inside a /24 pool: network and
    // broadcast of the /24 are elsewhere).
    assert_eq!(address_of(c, "free").await, "10.0.0.10");
    let claims: Api<IPAddressClaim> = Api::namespaced(c.clone(), NS);
    assert!(claims.get("held").await.unwrap().status.is_none());
    // Unpausing the Cluster lets the claim through.
    Api::<Cluster>::namespaced(c.clone(), NS)
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    assert_eq!(address_of(c, "held").await, "10.0.0.11");

    // A pool with allocated addresses is protected until they are released.
    let pools: Api<InClusterIPPool> = Api::namespaced(c.clone(), NS);
    wait_until("pool finalizer", WAIT, POLL, || {
        let pools = pools.clone();
        async move {
            let p = pools.get("p2").await?;
            Ok(
                if p.finalizers()
                    .contains(&"ipam.cluster.x-k8s.io/ProtectPool".to_string())
                {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("{:?}", p.finalizers()))
                },
            )
        }
    })
    .await
    .unwrap();
    pools.delete("p2", &DeleteParams::default()).await.unwrap();
    claims
        .delete("free", &DeleteParams::default())
        .await
        .unwrap();
    // Still one address allocated: the pool stays (being deleted).
    let p = pools.get("p2").await.unwrap();
    assert!(p.metadata.deletion_timestamp.is_some());
    claims
        .delete("held", &DeleteParams::default())
        .await
        .unwrap();
    wait_until("pool p2 gone", WAIT, POLL, || {
        let pools = pools.clone();
        async move {
            Ok(match pools.get_opt("p2").await? {
                None => Progress::Done(()),
                Some(p) => Progress::Pending(format!("finalizers {:?}", p.finalizers())),
            })
        }
    })
    .await
    .unwrap();
    let addrs: Api<IPAddress> = Api::namespaced(c.clone(), NS);
    assert!(
        addrs
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
}
