//! The ProxmoxCluster controller running with its watches against kube-sim
//! and pve-sim: a credentials rotation is picked up without a restart (the
//! Secret watch rebuilds the client and re-probes), and machine changes keep
//! the counts right.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;

use std::time::Duration;

use capmox_controller::api::{ClusterMode, ProxmoxCluster};
use kube::runtime::wait::await_condition;
use support::*;

async fn wait_for(
    env: &Env,
    name: &str,
    what: &str,
    cond: impl Fn(&ProxmoxCluster) -> bool,
) -> ProxmoxCluster {
    let done = await_condition(env.pcs(), name, move |pc: Option<&ProxmoxCluster>| {
        pc.is_some_and(&cond)
    });
    match tokio::time::timeout(Duration::from_secs(60), done).await {
        Ok(Ok(Some(pc))) => pc,
        other => panic!(
            "{name}: gave up waiting for {what}: {other:?}; now: {:?}",
            env.get(name).await.status
        ),
    }
}

#[tokio::test]
async fn credentials_rotation_is_picked_up_without_restart() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    // A long probe period: only watch events make the controller re-probe.
    let mut opts = options(Duration::from_secs(6000));
    opts.time_scale = 0.1;
    let (shared, shutdown) = env.shared(opts);
    let stores = crate::support::watched_stores(&shared);
    let task = tokio::spawn(capmox_controller::cluster::controller(
        shared.clone(),
        stores,
    ));
    env.create_cluster(
        "rot",
        spec(
            ClusterMode::MultiInstance,
            vec![instance("dc-a"), instance("dc-b")],
        ),
    )
    .await;
    wait_for(&env, "rot", "both failure domains", |pc| {
        failure_domains(pc) == ["dc-a", "dc-b"]
    })
    .await;

    // The operator rotates dc-a's token on the Proxmox side and writes a
    // wrong value into the Secret first: dc-a drops out.
    let a = env.pve.cluster("dc-a").unwrap();
    assert!(a.set_token_secret(&a.token_id(), "11111111-2222-4333-8444-555555555555"));
    let mut wrong = env.credentials("dc-a");
    wrong.insert("secret".into(), "not-it".into());
    env.put_secret("dc-a-credentials", &wrong).await;
    let pc = wait_for(&env, "rot", "dc-a to fail with 401", |pc| {
        failure_domains(pc) == ["dc-b"] && instance_message(pc, "dc-a").contains("HTTP 401")
    })
    .await;
    assert_eq!(condition(&pc, "CredentialsReady").0, "False");

    // Then the right value: dc-a comes back, no restart.
    let mut right = env.credentials("dc-a");
    right.insert(
        "secret".into(),
        "11111111-2222-4333-8444-555555555555".into(),
    );
    env.put_secret("dc-a-credentials", &right).await;
    let pc = wait_for(&env, "rot", "dc-a back", |pc| {
        failure_domains(pc) == ["dc-a", "dc-b"]
    })
    .await;
    assert_eq!(condition(&pc, "CredentialsReady").0, "True");

    // Machines appearing are counted (the ProxmoxMachine watch triggers).
    env.create_machine("rot", "rot-md-1", Some("dc-b")).await;
    wait_for(&env, "rot", "the machine counted", |pc| {
        instances(pc).get(1).is_some_and(|i| i.2 == 1)
    })
    .await;

    let metrics = shared.metrics.encode();
    assert!(
        metrics.contains("capmox_pve_requests_total{instance=\"dc-a\",method=\"GET\",endpoint=\"/version\",status=\"401\"}"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("capmox_reconcile_total{controller=\"proxmoxcluster\",outcome=\"success\"}")
    );

    shutdown.shutdown();
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("controller stops on shutdown")
        .unwrap();
    env.stop().await;
}
