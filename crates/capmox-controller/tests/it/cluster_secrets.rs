//! No token secret ever shows up in logs, events, status or metrics: the
//! ProxmoxCluster reconciler is driven through failing and working
//! credentials that carry one known secret value, with every log line
//! captured, and the value is searched for (plain and base64).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;

use std::time::Duration;

use capmox_controller::api::ClusterMode;
use capmox_controller::cluster::ClusterContext;
use capmox_controller::telemetry::{self, BufferWriter, LogFormat};
use k8s_openapi::ByteString;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;
use support::*;

const KNOWN: &str = "7d3f2a91-5eb4-4c0e-9a65-c0ffee15dead";

// One thread, so the thread-local log subscriber sees every task.
#[tokio::test(flavor = "current_thread")]
async fn secret_values_never_leak() {
    let logs = BufferWriter::default();
    let _guard = tracing::subscriber::set_default(telemetry::subscriber(
        LogFormat::Json,
        "debug",
        logs.clone(),
    ));
    let env = Env::start().await;
    env.put_all_credentials().await;
    // dc-a: the known value pasted into the token id (`id=secret`).
    let mut a = env.credentials("dc-a");
    a.insert("token".into(), format!("capmox@pve!capi={KNOWN}"));
    env.put_secret("dc-a-credentials", &a).await;
    // dc-b: the known value as a wrong secret (401).
    let mut b = env.credentials("dc-b");
    b.insert("secret".into(), KNOWN.into());
    env.put_secret("dc-b-credentials", &b).await;
    // dc-c: the known value is the real secret (successful calls carry it).
    let c = env.pve.cluster("dc-c").unwrap();
    assert!(c.set_token_secret(&c.token_id(), KNOWN));
    let mut cc = env.credentials("dc-c");
    cc.insert("secret".into(), KNOWN.into());
    env.put_secret("dc-c-credentials", &cc).await;

    let (shared, _handle) = env.shared(options(Duration::from_millis(1)));
    let stores = crate::support::watched_stores(&shared);
    let ctx = std::sync::Arc::new(ClusterContext::new(shared.clone(), stores));
    env.create_cluster(
        "leak",
        spec(
            ClusterMode::MultiInstance,
            vec![instance("dc-a"), instance("dc-b"), instance("dc-c")],
        ),
    )
    .await;
    let pc = reconcile(&env, &ctx, "leak").await;
    assert_eq!(failure_domains(&pc), vec!["dc-c".to_string()]);
    assert!(
        instance_message(&pc, "dc-a").contains("key 'token'"),
        "{}",
        instance_message(&pc, "dc-a")
    );
    assert!(instance_message(&pc, "dc-b").contains("HTTP 401"));
    // dc-c's secret now wrong on the Proxmox side: 401 with the known value sent.
    assert!(c.set_token_secret(&c.token_id(), "rotated-elsewhere"));
    let pc = reconcile(&env, &ctx, "leak").await;
    assert!(failure_domains(&pc).is_empty());
    // The known value inside other keys.
    let mut bad = env.credentials("dc-b");
    bad.insert("insecure".into(), KNOWN.into());
    env.put_secret("dc-b-credentials", &bad).await;
    let mut bad_url = env.credentials("dc-a");
    bad_url.insert("secret".into(), format!("{KNOWN} with spaces"));
    env.put_secret("dc-a-credentials", &bad_url).await;
    let pc = reconcile(&env, &ctx, "leak").await;
    assert!(instance_message(&pc, "dc-b").contains("key 'insecure'"));
    assert!(instance_message(&pc, "dc-a").contains("key 'secret'"));

    let events = Api::<Event>::namespaced(env.kube.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(!events.items.is_empty());
    let haystacks = [
        ("logs", logs.contents()),
        ("events", serde_json::to_string(&events.items).unwrap()),
        (
            "status",
            serde_json::to_string(&env.get("leak").await.status).unwrap(),
        ),
        ("metrics", shared.metrics.encode()),
    ];
    assert!(haystacks[0].1.contains("reconcile"), "logs were captured");
    let b64 = serde_json::to_string(&ByteString(KNOWN.as_bytes().to_vec())).unwrap();
    let b64 = b64.trim_matches('"');
    for (what, text) in &haystacks {
        assert!(!text.contains(KNOWN), "secret value found in {what}");
        assert!(
            !text.contains(b64),
            "base64 of the secret value found in {what}"
        );
        assert!(
            !text.contains(&KNOWN[..18]),
            "part of the secret value found in {what}"
        );
    }
    env.stop().await;
}
