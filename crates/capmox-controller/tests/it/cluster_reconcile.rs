//! Reconcile-level tests of the ProxmoxCluster reconciler against kube-sim
//! (in-memory Kubernetes) and pve-sim (three Proxmox clusters over HTTPS,
//! the real `pve-client`): the three modes, failure domains following
//! instance health, machine counts, IP pools, deletion, pause, ownership and
//! externally managed control planes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use capmox_controller::api::{
    ApiEndpoint, ClusterMode, InstanceNetwork, IpConfig, ProxmoxCluster, ProxmoxClusterSpec,
    ProxmoxMachine, SecretRef,
};
use capmox_controller::capi::core::Cluster;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};
use support::*;

/// Every reconcile probes again (no cached probe results between steps).
const TICK: Duration = Duration::from_millis(1);

fn names(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn three() -> Vec<capmox_controller::api::InstanceSpec> {
    vec![instance("dc-a"), instance("dc-b"), instance("dc-c")]
}

#[tokio::test]
async fn modes_choose_as_specified() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);

    // MultiInstance: every healthy instance is a failure domain.
    env.create_cluster("multi", spec(ClusterMode::MultiInstance, three()))
        .await;
    let multi = reconcile(&env, &ctx, "multi").await;
    assert_eq!(failure_domains(&multi), names(&["dc-a", "dc-b", "dc-c"]));
    assert_eq!(
        instances(&multi),
        vec![
            ("dc-a".to_string(), true, 0, false),
            ("dc-b".to_string(), true, 0, false),
            ("dc-c".to_string(), true, 0, false),
        ]
    );
    let st = multi.status.clone().unwrap();
    assert_eq!(
        st.instances[0].nodes,
        names(&["pve-a1", "pve-a2", "pve-a3", "pve-a4"])
    );
    assert_eq!(
        st.instances[1].nodes,
        names(&["pve-b1", "pve-b2", "pve-b3"])
    );
    assert_eq!(st.instances[0].version.as_deref(), Some("9.1.9"));
    assert_eq!(st.instances_ready.as_deref(), Some("3/3"));
    assert_eq!(st.failure_domains[0].control_plane, Some(true));
    assert_eq!(
        st.failure_domains[2].attributes,
        BTreeMap::from([
            ("nodes".to_string(), "pve-c1,pve-c2,pve-c3".to_string()),
            ("pveVersion".to_string(), "9.1.9".to_string()),
        ])
    );
    assert!(provisioned(&multi));
    assert_eq!(
        condition(&multi, "Ready"),
        ("True".into(), "Ready".into(), String::new())
    );
    assert_eq!(condition(&multi, "CredentialsReady").0, "True");
    assert_eq!(condition(&multi, "InstancesReady").0, "True");
    assert_eq!(
        multi.finalizers(),
        ["proxmoxcluster.infrastructure.cluster.x-k8s.io"]
    );

    // SingleInstance: dc-a's credentials are wrong, so the first healthy
    // instance (dc-b) is chosen — and stays chosen once dc-a recovers.
    let mut broken = env.credentials("dc-a");
    broken.insert("secret".into(), "not-the-secret".into());
    env.put_secret("a-alt", &broken).await;
    let mut a = instance("dc-a");
    a.credentials_ref.name = "a-alt".into();
    env.create_cluster(
        "single",
        spec(
            ClusterMode::SingleInstance,
            vec![a, instance("dc-b"), instance("dc-c")],
        ),
    )
    .await;
    let single = reconcile(&env, &ctx, "single").await;
    assert_eq!(failure_domains(&single), names(&["dc-b"]));
    assert_eq!(
        instances(&single),
        vec![
            ("dc-a".to_string(), false, 0, false),
            ("dc-b".to_string(), true, 0, true),
            ("dc-c".to_string(), true, 0, false),
        ]
    );
    assert!(provisioned(&single));
    env.put_secret("a-alt", &env.credentials("dc-a")).await;
    let single = reconcile(&env, &ctx, "single").await;
    assert_eq!(failure_domains(&single), names(&["dc-b"]));
    assert!(instances(&single)[0].1, "dc-a is healthy again");

    // Default with instances: only the first one is used (and probed).
    env.create_cluster(
        "dflt",
        spec(
            ClusterMode::Default,
            vec![instance("dc-c"), instance("dc-a")],
        ),
    )
    .await;
    let dflt = reconcile(&env, &ctx, "dflt").await;
    assert_eq!(failure_domains(&dflt), names(&["dc-c"]));
    assert_eq!(instances(&dflt), vec![("dc-c".to_string(), true, 0, false)]);

    // Legacy Default: the implicit instance from spec.credentialsRef and allowedNodes.
    env.create_cluster(
        "legacy",
        ProxmoxClusterSpec {
            control_plane_endpoint: Some(ApiEndpoint {
                host: "10.99.0.6".into(),
                port: 6443,
            }),
            credentials_ref: Some(SecretRef {
                name: "dc-b-credentials".into(),
                namespace: None,
            }),
            allowed_nodes: names(&["pve-b2"]),
            ..ProxmoxClusterSpec::default()
        },
    )
    .await;
    let legacy = reconcile(&env, &ctx, "legacy").await;
    assert_eq!(failure_domains(&legacy), names(&["default"]));
    assert_eq!(
        instances(&legacy),
        vec![("default".to_string(), true, 0, false)]
    );
    assert_eq!(
        legacy.status.unwrap().instances[0].nodes,
        names(&["pve-b2"])
    );
    env.stop().await;
}

#[tokio::test]
async fn failure_domains_follow_credentials_breaking_and_repair() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    env.create_cluster("fd", spec(ClusterMode::MultiInstance, three()))
        .await;
    let pc = reconcile(&env, &ctx, "fd").await;
    assert_eq!(failure_domains(&pc), names(&["dc-a", "dc-b", "dc-c"]));

    let good = env.credentials("dc-b");
    let url = good["url"].clone();
    let with = |k: &str, v: &str| {
        let mut m = good.clone();
        m.insert(k.into(), v.into());
        m
    };
    let mut weak = with("token", WEAK_TOKEN);
    weak.insert("secret".into(), WEAK_SECRET.into());
    let mut no_secret = good.clone();
    no_secret.remove("secret");
    let other_ca = env.pve.cluster("dc-c").unwrap().ca_pem();

    let mut seen = BTreeSet::new();
    type Case<'a> = (&'a str, Option<BTreeMap<String, String>>, &'a str);
    let cases: Vec<Case> = vec![
        ("401", Some(with("secret", "wrong-secret")), "False"),
        ("403", Some(weak), "False"),
        ("bad CA", Some(with("root_ca", &other_ca)), "False"),
        (
            "unreachable",
            Some(with("url", "https://127.0.0.1:1")),
            "Unknown",
        ),
        ("missing key", Some(no_secret), "False"),
        ("Secret deleted", None, "False"),
    ];
    for (what, data, creds_status) in cases {
        match &data {
            Some(d) => env.put_secret("dc-b-credentials", d).await,
            None => {
                Api::<Secret>::namespaced(env.kube.clone(), NS)
                    .delete("dc-b-credentials", &DeleteParams::default())
                    .await
                    .unwrap();
            }
        }
        let pc = reconcile(&env, &ctx, "fd").await;
        assert_eq!(failure_domains(&pc), names(&["dc-a", "dc-c"]), "{what}");
        let b = instances(&pc)[1].clone();
        assert_eq!((b.0.as_str(), b.1), ("dc-b", false), "{what}");
        let msg = instance_message(&pc, "dc-b");
        match what {
            "401" => assert_eq!(
                msg,
                format!(
                    "authentication failed at {url} (HTTP 401): the token id or secret in the credentials Secret is wrong, or the token was removed or expired"
                )
            ),
            "403" => assert_eq!(
                msg,
                format!(
                    "permission denied at {url} (HTTP 403): the API token lacks Sys.Audit on /; grant it to the token (with privilege separation, to the token itself)"
                )
            ),
            "bad CA" => {
                assert!(
                    msg.starts_with(&format!("TLS verification of {url} failed: ")),
                    "{msg}"
                );
                assert!(msg.ends_with("; put the cluster's CA certificate into root_ca of the credentials Secret (or pin the certificate with fingerprint)"), "{msg}");
            }
            "unreachable" => assert!(
                msg.starts_with("cannot reach https://127.0.0.1:1: "),
                "{msg}"
            ),
            "missing key" => assert_eq!(
                msg,
                "key 'secret' missing or empty in Secret wl/dc-b-credentials"
            ),
            "Secret deleted" => assert_eq!(msg, "Secret wl/dc-b-credentials not found"),
            _ => unreachable!(),
        }
        assert!(
            seen.insert(msg.clone()),
            "{what}: message not distinct: {msg}"
        );
        assert_eq!(condition(&pc, "CredentialsReady").0, creds_status, "{what}");
        let (ready, reason, ready_msg) = condition(&pc, "Ready");
        assert_eq!(
            (ready.as_str(), reason.as_str()),
            ("True", "Degraded"),
            "{what}"
        );
        assert!(ready_msg.contains(&msg), "{what}: {ready_msg}");
        assert!(provisioned(&pc));

        // Repair: dc-b comes back.
        env.put_secret("dc-b-credentials", &good).await;
        let pc = reconcile(&env, &ctx, "fd").await;
        assert_eq!(
            failure_domains(&pc),
            names(&["dc-a", "dc-b", "dc-c"]),
            "{what} repaired"
        );
        assert_eq!(
            condition(&pc, "Ready"),
            ("True".into(), "Ready".into(), String::new())
        );
    }

    // Every transition was reported as an event.
    let events = Api::<Event>::namespaced(env.kube.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    let reasons: Vec<String> = events
        .items
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("fd"))
        .filter_map(|e| e.reason.clone())
        .collect();
    for r in [
        "Provisioned",
        "InstanceReady",
        "InstanceUnavailable",
        "FailureDomainsChanged",
    ] {
        assert!(
            reasons.iter().any(|x| x == r),
            "no {r} event in {reasons:?}"
        );
    }
    env.stop().await;
}

#[tokio::test]
async fn instance_counts_match_the_machines() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    env.create_cluster("counts", spec(ClusterMode::MultiInstance, three()))
        .await;
    env.create_machine("counts", "counts-cp-1", Some("dc-a"))
        .await;
    env.create_machine("counts", "counts-cp-2", Some("dc-a"))
        .await;
    env.create_machine("counts", "counts-md-1", Some("dc-c"))
        .await;
    env.create_machine("counts", "counts-md-2", None).await;
    env.create_machine("other", "other-md-1", Some("dc-b"))
        .await;
    machines_seen(
        &ctx,
        &[
            "counts-cp-1",
            "counts-cp-2",
            "counts-md-1",
            "counts-md-2",
            "other-md-1",
        ],
    )
    .await;
    let pc = reconcile(&env, &ctx, "counts").await;
    assert_eq!(
        instances(&pc),
        vec![
            ("dc-a".to_string(), true, 2, false),
            ("dc-b".to_string(), true, 0, false),
            ("dc-c".to_string(), true, 1, false),
        ]
    );
    let metrics = ctx.shared.metrics.encode();
    for line in [
        "capmox_machines{instance=\"dc-a\",phase=\"Provisioning\"} 2",
        "capmox_machines{instance=\"dc-c\",phase=\"Provisioning\"} 1",
        "capmox_machines{instance=\"none\",phase=\"Provisioning\"} 1",
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    assert!(!metrics.contains("instance=\"dc-b\",phase"), "{metrics}");
    env.machines()
        .delete("counts-cp-2", &DeleteParams::default())
        .await
        .unwrap();
    machines_seen(
        &ctx,
        &["counts-cp-1", "counts-md-1", "counts-md-2", "other-md-1"],
    )
    .await;
    let pc = reconcile(&env, &ctx, "counts").await;
    assert_eq!(instances(&pc)[0].2, 1);
    assert!(
        ctx.shared
            .metrics
            .encode()
            .contains("capmox_machines{instance=\"dc-a\",phase=\"Provisioning\"} 1")
    );
    env.stop().await;
}

#[tokio::test]
async fn single_instance_follows_existing_machines_after_move() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    // Status is not moved by clusterctl: machines already in dc-c decide.
    env.create_cluster("moved", spec(ClusterMode::SingleInstance, three()))
        .await;
    env.create_machine("moved", "moved-cp-1", Some("dc-c"))
        .await;
    machines_seen(&ctx, &["moved-cp-1"]).await;
    let pc = reconcile(&env, &ctx, "moved").await;
    assert_eq!(failure_domains(&pc), names(&["dc-c"]));
    assert_eq!(
        instances(&pc),
        vec![
            ("dc-a".to_string(), true, 0, false),
            ("dc-b".to_string(), true, 0, false),
            ("dc-c".to_string(), true, 1, true),
        ]
    );
    env.stop().await;
}

#[tokio::test]
async fn deletion_waits_for_machines_then_removes_pools_and_finalizer() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    let mut s = spec(ClusterMode::MultiInstance, three());
    s.ipv4_config = Some(IpConfig {
        addresses: names(&["10.50.0.10-10.50.0.20"]),
        prefix: 24,
        gateway: Some("10.50.0.1".into()),
        metric: None,
    });
    env.create_cluster("del", s).await;
    env.create_machine("del", "del-md-1", Some("dc-a")).await;
    env.create_machine("del", "del-md-2", None).await;
    let pc = reconcile(&env, &ctx, "del").await;
    assert!(provisioned(&pc));
    assert!(env.pools().get_opt("del-ipv4").await.unwrap().is_some());

    env.pcs()
        .delete("del", &DeleteParams::default())
        .await
        .unwrap();
    let pc = reconcile(&env, &ctx, "del").await;
    assert!(pc.metadata.deletion_timestamp.is_some());
    assert_eq!(
        condition(&pc, "Ready"),
        (
            "False".into(),
            "WaitingForMachines".into(),
            "deleting: waiting for 2 ProxmoxMachines of this cluster to be deleted (del-md-1, del-md-2)".into()
        )
    );
    assert_eq!(
        pc.finalizers(),
        ["proxmoxcluster.infrastructure.cluster.x-k8s.io"]
    );
    assert!(env.pools().get_opt("del-ipv4").await.unwrap().is_some());

    env.machines()
        .delete("del-md-1", &DeleteParams::default())
        .await
        .unwrap();
    let pc = reconcile(&env, &ctx, "del").await;
    assert_eq!(
        condition(&pc, "Ready").2,
        "deleting: waiting for 1 ProxmoxMachine of this cluster to be deleted (del-md-2)"
    );
    env.machines()
        .delete("del-md-2", &DeleteParams::default())
        .await
        .unwrap();
    let pc = env.get("del").await;
    capmox_controller::cluster::reconcile_once(&pc, &ctx)
        .await
        .unwrap();
    assert!(
        env.pcs().get_opt("del").await.unwrap().is_none(),
        "finalizer dropped, object gone"
    );
    assert!(
        env.pools().get_opt("del-ipv4").await.unwrap().is_none(),
        "pool deleted"
    );
    env.stop().await;
}

#[tokio::test]
async fn paused_cluster_is_untouched() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    env.create_cluster("paused", spec(ClusterMode::MultiInstance, three()))
        .await;
    let clusters: Api<Cluster> = Api::namespaced(env.kube.clone(), NS);
    clusters
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"paused": true}})),
        )
        .await
        .unwrap();
    reset_pve_calls(&env);
    let pc = reconcile(&env, &ctx, "paused").await;
    assert_eq!(pve_calls(&env), 0);
    assert!(pc.finalizers().is_empty());
    assert_eq!(condition(&pc, "Paused").0, "True");
    assert_eq!(condition(&pc, "Paused").1, "Paused");
    let st = pc.status.unwrap();
    assert_eq!(st.conditions.len(), 1, "only Paused: {:?}", st.conditions);
    assert!(
        st.failure_domains.is_empty() && st.instances.is_empty() && st.initialization.is_none()
    );

    // The annotation pauses too.
    clusters
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    env.pcs()
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(
                &serde_json::json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}}),
            ),
        )
        .await
        .unwrap();
    let pc = reconcile(&env, &ctx, "paused").await;
    assert_eq!(pve_calls(&env), 0);
    assert_eq!(condition(&pc, "Paused").0, "True");

    // Unpaused: reconciled normally.
    env.pcs()
        .patch(
            "paused",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": null}}})),
        )
        .await
        .unwrap();
    let pc = reconcile(&env, &ctx, "paused").await;
    assert!(pve_calls(&env) > 0);
    assert_eq!(
        condition(&pc, "Paused"),
        ("False".into(), "NotPaused".into(), String::new())
    );
    assert!(provisioned(&pc));
    env.stop().await;
}

#[tokio::test]
async fn without_owner_cluster_nothing_happens() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    let mut pc = ProxmoxCluster::new("orphan", spec(ClusterMode::MultiInstance, three()));
    pc.metadata.namespace = Some(NS.into());
    env.pcs().create(&PostParams::default(), &pc).await.unwrap();
    reset_pve_calls(&env);
    let pc = reconcile(&env, &ctx, "orphan").await;
    assert_eq!(pve_calls(&env), 0);
    assert!(pc.finalizers().is_empty());
    let (s, r, m) = condition(&pc, "Ready");
    assert_eq!((s.as_str(), r.as_str()), ("False", "WaitingForCluster"));
    assert!(
        m.starts_with("waiting for the owner Cluster: no Cluster owner reference yet"),
        "{m}"
    );
    env.stop().await;
}

#[tokio::test]
async fn externally_managed_objects_are_skipped() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    env.create_cluster("ext", spec(ClusterMode::MultiInstance, three()))
        .await;
    env.pcs()
        .patch(
            "ext",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"metadata": {"annotations": {"cluster.x-k8s.io/managed-by": "someone"}}})),
        )
        .await
        .unwrap();
    reset_pve_calls(&env);
    let pc = reconcile(&env, &ctx, "ext").await;
    assert_eq!(pve_calls(&env), 0);
    assert!(pc.status.is_none());
    assert!(pc.finalizers().is_empty());
    env.stop().await;
}

#[tokio::test]
async fn invalid_spec_makes_no_proxmox_call() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    let pool = |r: &str| InstanceNetwork {
        ipv4_config: Some(IpConfig {
            addresses: names(&[r]),
            prefix: 24,
            gateway: Some("10.7.0.1".into()),
            metric: None,
        }),
        ..InstanceNetwork::default()
    };
    let mut a = instance("dc-a");
    a.network = Some(pool("10.7.0.10-10.7.0.20"));
    let mut b = instance("dc-b");
    b.network = Some(pool("10.7.0.15-10.7.0.30"));
    env.create_cluster("bad", spec(ClusterMode::MultiInstance, vec![a, b]))
        .await;
    reset_pve_calls(&env);
    let pc = reconcile(&env, &ctx, "bad").await;
    assert_eq!(pve_calls(&env), 0);
    let (s, r, m) = condition(&pc, "Ready");
    assert_eq!((s.as_str(), r.as_str()), ("False", "InvalidSpec"));
    assert!(
        m.starts_with("spec.settings.instances[1].network.ipv4Config: overlaps spec.settings.instances[0].network.ipv4Config"),
        "{m}"
    );
    assert!(
        m.ends_with("; fix the spec (no Proxmox call is made until it is valid)"),
        "{m}"
    );
    assert!(
        env.pools()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(!provisioned(&pc));
    env.stop().await;
}

#[tokio::test]
async fn ip_pools_follow_the_spec() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    let cfg = |r: &str, gw: &str| IpConfig {
        addresses: names(&[r]),
        prefix: 24,
        gateway: Some(gw.into()),
        metric: None,
    };
    let mut a = instance("dc-a");
    a.network = Some(InstanceNetwork {
        ipv4_config: Some(cfg("10.60.0.10-10.60.0.20", "10.60.0.1")),
        ..InstanceNetwork::default()
    });
    let mut s = spec(
        ClusterMode::MultiInstance,
        vec![a, instance("dc-b"), instance("dc-c")],
    );
    s.ipv4_config = Some(cfg("10.50.0.10-10.50.0.20", "10.50.0.1"));
    env.create_cluster("pools", s).await;
    let pc = reconcile(&env, &ctx, "pools").await;
    let recorded: Vec<(Option<String>, String, String)> = pc
        .status
        .as_ref()
        .unwrap()
        .ip_pools
        .iter()
        .map(|p| (p.instance.clone(), p.family.clone(), p.name.clone()))
        .collect();
    assert_eq!(
        recorded,
        vec![
            (
                Some("dc-a".into()),
                "ipv4".into(),
                "pools-dc-a-ipv4-9dd91795db644e7c".into()
            ),
            (None, "ipv4".into(), "pools-ipv4".into()),
        ]
    );
    let own = env
        .pools()
        .get("pools-dc-a-ipv4-9dd91795db644e7c")
        .await
        .unwrap();
    assert_eq!(own.spec.addresses, names(&["10.60.0.10-10.60.0.20"]));
    assert_eq!(own.spec.prefix, 24);
    assert_eq!(own.spec.gateway.as_deref(), Some("10.60.0.1"));
    assert_eq!(
        owners(&own),
        vec![("ProxmoxCluster".to_string(), "pools".to_string(), true)]
    );
    assert_eq!(
        own.labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("pools")
    );
    let shared_pool = env.pools().get("pools-ipv4").await.unwrap();
    assert_eq!(
        shared_pool.spec.addresses,
        names(&["10.50.0.10-10.50.0.20"])
    );

    // dc-a's range changes: its pool is updated.
    let mut a = instance("dc-a");
    a.network = Some(InstanceNetwork {
        ipv4_config: Some(cfg("10.60.0.30-10.60.0.40", "10.60.0.1")),
        ..InstanceNetwork::default()
    });
    env.patch_spec(
        "pools",
        serde_json::json!({"settings": {"instances": [a, instance("dc-b"), instance("dc-c")]}}),
    )
    .await;
    reconcile(&env, &ctx, "pools").await;
    let own = env
        .pools()
        .get("pools-dc-a-ipv4-9dd91795db644e7c")
        .await
        .unwrap();
    assert_eq!(own.spec.addresses, names(&["10.60.0.30-10.60.0.40"]));

    // dc-a's own config removed: its pool goes, it shares the cluster pool.
    env.patch_spec(
        "pools",
        serde_json::json!({"settings": {"instances": [instance("dc-a"), instance("dc-b"), instance("dc-c")]}}),
    )
    .await;
    let pc = reconcile(&env, &ctx, "pools").await;
    assert!(
        env.pools()
            .get_opt("pools-dc-a-ipv4-9dd91795db644e7c")
            .await
            .unwrap()
            .is_none()
    );
    let recorded: Vec<String> = pc
        .status
        .unwrap()
        .ip_pools
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(recorded, names(&["pools-ipv4"]));
    env.stop().await;
}

#[tokio::test]
async fn externally_managed_control_plane_endpoint_comes_from_the_cluster() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    let mut s = spec(ClusterMode::MultiInstance, three());
    s.control_plane_endpoint = None;
    s.external_managed_control_plane = Some(true);
    env.create_cluster("hosted", s).await;
    let pc = reconcile(&env, &ctx, "hosted").await;
    assert!(!provisioned(&pc));
    assert_eq!(condition(&pc, "Ready").1, "WaitingForControlPlaneEndpoint");
    assert_eq!(failure_domains(&pc), names(&["dc-a", "dc-b", "dc-c"]));
    Api::<Cluster>::namespaced(env.kube.clone(), NS)
        .patch(
            "hosted",
            &PatchParams::default(),
            &Patch::Merge(&serde_json::json!({"spec": {"controlPlaneEndpoint": {"host": "cp.example", "port": 443}}})),
        )
        .await
        .unwrap();
    let pc = reconcile(&env, &ctx, "hosted").await;
    assert_eq!(
        pc.spec.control_plane_endpoint,
        Some(ApiEndpoint {
            host: "cp.example".into(),
            port: 443
        })
    );
    assert!(provisioned(&pc));
    env.stop().await;
}

#[tokio::test]
async fn template_and_node_problems_are_reported() {
    use capmox_controller::api::{TemplateSelector, TemplateSource};
    let env = Env::start().await;
    env.put_all_credentials().await;
    let ctx = env.context(TICK);
    // dc-a: a templateID that does not exist; dc-b: the built-in template by
    // tags; dc-c: only pve-c2 allowed, and it goes offline.
    let mut a = instance("dc-a");
    a.template = Some(TemplateSource {
        source_node: Some("pve-a1".into()),
        template_id: Some(9999),
        template_selector: None,
    });
    let mut b = instance("dc-b");
    b.template = Some(TemplateSource {
        source_node: None,
        template_id: None,
        template_selector: Some(TemplateSelector {
            match_tags: names(&["capmox", "ubuntu-24.04"]),
            match_policy: None,
        }),
    });
    let mut c = instance("dc-c");
    c.nodes = names(&["pve-c2"]);
    env.create_cluster("tpl", spec(ClusterMode::MultiInstance, vec![a, b, c]))
        .await;
    let pc = reconcile(&env, &ctx, "tpl").await;
    let url_a = env.pve.cluster("dc-a").unwrap().url();
    assert_eq!(
        instance_message(&pc, "dc-a"),
        format!(
            "{url_a}: template 9999 (templateID) does not exist (or the token lacks VM.Audit on /vms/9999)"
        )
    );
    assert_eq!(failure_domains(&pc), names(&["dc-b", "dc-c"]));
    assert_eq!(
        pc.status.as_ref().unwrap().instances[2].nodes,
        names(&["pve-c2"])
    );

    assert!(
        env.pve
            .cluster("dc-c")
            .unwrap()
            .set_node_online("pve-c2", false)
    );
    let pc = reconcile(&env, &ctx, "tpl").await;
    let url_c = env.pve.cluster("dc-c").unwrap().url();
    assert_eq!(
        instance_message(&pc, "dc-c"),
        format!("{url_c}: no allowed node online (allowed: pve-c2; online: pve-c1, pve-c3)")
    );
    assert_eq!(failure_domains(&pc), names(&["dc-b"]));
    // Credentials are fine on both: only instance health suffers.
    assert_eq!(condition(&pc, "CredentialsReady").0, "True");
    assert_eq!(condition(&pc, "InstancesReady").0, "False");
    env.stop().await;
}

/// Stores holding `machines` (the other kinds empty), each marked as
/// having its initial list; the writers are returned to keep them alive.
fn machine_stores(
    machines: Vec<ProxmoxMachine>,
) -> (
    capmox_controller::stores::Stores,
    capmox_controller::stores::Writers,
) {
    use kube::runtime::watcher::Event as W;
    let (stores, mut w) = capmox_controller::stores::Stores::new();
    w.machines.apply_watcher_event(&W::Init);
    for o in machines {
        w.machines.apply_watcher_event(&W::InitApply(o));
    }
    w.machines.apply_watcher_event(&W::InitDone);
    w.owners.apply_watcher_event(&W::Init);
    w.owners.apply_watcher_event(&W::InitDone);
    w.clusters.apply_watcher_event(&W::Init);
    w.clusters.apply_watcher_event(&W::InitDone);
    w.proxmox_clusters.apply_watcher_event(&W::Init);
    w.proxmox_clusters.apply_watcher_event(&W::InitDone);
    w.secrets.apply_watcher_event(&W::Init);
    w.secrets.apply_watcher_event(&W::InitDone);
    (stores, w)
}

/// A ProxmoxMachine of CAPI cluster `cluster` as a store holds it (with a UID).
fn stored_machine(cluster: &str, name: &str, instance: Option<&str>) -> ProxmoxMachine {
    let mut m = machine_of(cluster, name, instance);
    m.metadata.uid = Some(format!("uid-{name}"));
    m
}

/// A reconcile counts machines from the stores (the API server is not
/// asked: here it holds another picture). A deletion still waits for a
/// LIST that finds no machine.
#[tokio::test]
async fn counts_come_from_the_machine_stores_and_deletion_confirms_with_a_list() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    env.create_cluster("stored", spec(ClusterMode::MultiInstance, three()))
        .await;
    // In the API server: one machine in dc-a. In the stores: two in dc-b.
    env.create_machine("stored", "stored-md-1", Some("dc-a"))
        .await;
    let (stores, _writers) = machine_stores(vec![
        stored_machine("stored", "stored-md-8", Some("dc-b")),
        stored_machine("stored", "stored-md-9", Some("dc-b")),
        stored_machine("other", "other-md-1", Some("dc-c")),
    ]);
    let (shared, _) = env.shared(options(TICK));
    let ctx = Arc::new(capmox_controller::cluster::ClusterContext::new(
        shared, stores,
    ));
    let pc = reconcile(&env, &ctx, "stored").await;
    let counts: Vec<(String, u32)> = instances(&pc)
        .into_iter()
        .map(|(name, _, n, _)| (name, n))
        .collect();
    assert_eq!(
        counts,
        vec![
            ("dc-a".to_string(), 0),
            ("dc-b".to_string(), 2),
            ("dc-c".to_string(), 0)
        ],
        "counted from the stores"
    );

    // Deleting: stores that hold no machine of the cluster do not drop the
    // finalizer while the API server still has one.
    let (empty, _writers2) = machine_stores(Vec::new());
    let (shared, _) = env.shared(options(TICK));
    let dctx = Arc::new(capmox_controller::cluster::ClusterContext::new(
        shared, empty,
    ));
    env.pcs()
        .delete("stored", &DeleteParams::default())
        .await
        .unwrap();
    let pc = reconcile(&env, &dctx, "stored").await;
    assert_eq!(
        condition(&pc, "Ready").1,
        "WaitingForMachines",
        "a LIST found stored-md-1"
    );
    assert_eq!(
        pc.finalizers(),
        ["proxmoxcluster.infrastructure.cluster.x-k8s.io"]
    );
    env.machines()
        .delete("stored-md-1", &DeleteParams::default())
        .await
        .unwrap();
    let pc = env.get("stored").await;
    capmox_controller::cluster::reconcile_once(&pc, &dctx)
        .await
        .unwrap();
    assert!(env.pcs().get_opt("stored").await.unwrap().is_none());
    env.stop().await;
}
