//! Leader election against kube-sim: of two candidates one leads while it
//! renews; when it stops renewing (crash) the other takes over after the
//! lease duration; a graceful stop releases the Lease.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmox_controller::manager::leader::{LeaderConfig, LeaderElector};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::runtime::wait::await_condition;
use kube_sim::{KubeSim, KubeSimOptions};

fn cfg(identity: &str) -> LeaderConfig {
    LeaderConfig {
        namespace: "default".into(),
        name: "capmox-test-leader".into(),
        identity: identity.into(),
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_millis(700),
        retry_period: Duration::from_millis(100),
    }
}

fn holder(l: &Lease) -> Option<String> {
    l.spec.as_ref().and_then(|s| s.holder_identity.clone())
}

async fn wait_lease(api: &Api<Lease>, what: &str, cond: impl Fn(&Lease) -> bool) -> Lease {
    let done = await_condition(
        api.clone(),
        "capmox-test-leader",
        move |l: Option<&Lease>| l.is_some_and(&cond),
    );
    match tokio::time::timeout(Duration::from_secs(30), done).await {
        Ok(Ok(Some(l))) => l,
        other => panic!("gave up waiting for {what}: {other:?}"),
    }
}

async fn wait_flag(rx: &mut tokio::sync::watch::Receiver<bool>, want: bool, what: &str) {
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|v| *v == want))
        .await
        .unwrap_or_else(|_| panic!("gave up waiting for {what}"))
        .unwrap();
}

#[tokio::test]
async fn one_leads_and_the_other_takes_over_after_a_crash() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = KubeSim::start(KubeSimOptions::default()).await.unwrap();
    let kube = sim.client().await.unwrap();
    let leases: Api<Lease> = Api::namespaced(kube.clone(), "default");

    let (tx_a, mut rx_a) = tokio::sync::watch::channel(false);
    let a =
        tokio::spawn(LeaderElector::new(kube.clone(), cfg("a")).run(tx_a, std::future::pending()));
    wait_flag(&mut rx_a, true, "a to lead").await;
    let lease = wait_lease(&leases, "a holding", |l| holder(l).as_deref() == Some("a")).await;
    assert_eq!(lease.spec.as_ref().unwrap().lease_duration_seconds, Some(1));

    let (tx_b, mut rx_b) = tokio::sync::watch::channel(false);
    let (stop_b_tx, stop_b_rx) = tokio::sync::oneshot::channel::<()>();
    let b = tokio::spawn(
        LeaderElector::new(kube.clone(), cfg("b")).run(tx_b, async move {
            let _ = stop_b_rx.await;
        }),
    );
    // While a renews (several renewals seen, each far apart from expiry), b never leads.
    let mut seen: Vec<MicroTime> = Vec::new();
    for _ in 0..4 {
        let before = seen.last().cloned();
        let l = wait_lease(&leases, "a renewing", move |l| {
            holder(l).as_deref() == Some("a")
                && l.spec.as_ref().and_then(|s| s.renew_time.clone()) != before
        })
        .await;
        seen.push(l.spec.unwrap().renew_time.unwrap());
        assert!(!*rx_b.borrow(), "b must not lead while a renews");
    }

    // a crashes: no release, no more renewals.
    a.abort();
    wait_flag(&mut rx_b, true, "b to take over").await;
    let lease = leases.get("capmox-test-leader").await.unwrap();
    assert_eq!(holder(&lease).as_deref(), Some("b"));
    assert_eq!(lease.spec.as_ref().unwrap().lease_transitions, Some(1));

    // b stops gracefully: the Lease is released at once.
    stop_b_tx.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), b)
        .await
        .unwrap()
        .unwrap();
    assert!(!*rx_b.borrow());
    let lease = leases.get("capmox-test-leader").await.unwrap();
    assert_eq!(holder(&lease), None);

    // A new candidate acquires a released Lease without waiting for expiry.
    let (tx_c, mut rx_c) = tokio::sync::watch::channel(false);
    let c =
        tokio::spawn(LeaderElector::new(kube.clone(), cfg("c")).run(tx_c, std::future::pending()));
    wait_flag(&mut rx_c, true, "c to lead").await;
    c.abort();
    sim.shutdown().await;
}
