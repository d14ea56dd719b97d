//! The stand-in's metadata writes against kube-sim: a write computed from a
//! stale copy (a watch that lags) is recomputed from a fresh read after the
//! 409, keeping what others wrote meanwhile.

use capmox_e2e::standin::meta;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

async fn config_map(name: &str) -> (kube_sim::KubeSim, Api<ConfigMap>, ConfigMap) {
    let sim = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    let api: Api<ConfigMap> = Api::namespaced(sim.client().await.unwrap(), "default");
    let created = api
        .create(
            &PostParams::default(),
            &ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    ..ObjectMeta::default()
                },
                ..ConfigMap::default()
            },
        )
        .await
        .unwrap();
    (sim, api, created)
}

/// Another writer sets the finalizers after `stale` was read.
async fn set_finalizers(api: &Api<ConfigMap>, name: &str, finalizers: &[&str]) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": finalizers}})),
    )
    .await
    .unwrap();
}

/// Someone else's write after `stale` was read: a label.
async fn label_meanwhile(api: &Api<ConfigMap>, name: &str) {
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"labels": {"other": "writer"}}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_finalizer_added_from_a_stale_copy_is_written_after_one_fresh_read() {
    let (_sim, api, stale) = config_map("stale-add").await;
    label_meanwhile(&api, "stale-add").await;

    let wrote = meta::add_finalizer(&api, &stale.metadata, "example.com/f")
        .await
        .unwrap();

    assert!(wrote);
    let now = api.get("stale-add").await.unwrap();
    assert_eq!(now.metadata.finalizers, Some(vec!["example.com/f".into()]));
    assert_eq!(
        now.metadata
            .labels
            .unwrap()
            .get("other")
            .map(String::as_str),
        Some("writer"),
        "the other writer's label survives"
    );
}

#[tokio::test]
async fn a_write_the_fresh_copy_no_longer_needs_is_not_made() {
    let (_sim, api, stale) = config_map("already-done").await;
    // Another writer added the same finalizer after `stale` was read.
    set_finalizers(&api, "already-done", &["example.com/f", "example.com/g"]).await;
    let before = api.get("already-done").await.unwrap();

    let wrote = meta::add_finalizer(&api, &stale.metadata, "example.com/f")
        .await
        .unwrap();

    assert!(!wrote, "the fresh copy has the finalizer: nothing to write");
    let after = api.get("already-done").await.unwrap();
    assert_eq!(
        after.metadata.resource_version,
        before.metadata.resource_version
    );
    assert_eq!(
        after.metadata.finalizers,
        Some(vec!["example.com/f".into(), "example.com/g".into()]),
        "the stale list (none) did not replace the other writer's"
    );
}

#[tokio::test]
async fn a_finalizer_removed_from_a_stale_copy_keeps_the_others() {
    let (_sim, api, _) = config_map("stale-remove").await;
    set_finalizers(&api, "stale-remove", &["example.com/f"]).await;
    let stale = api.get("stale-remove").await.unwrap();
    // Another writer adds its finalizer after `stale` was read.
    set_finalizers(&api, "stale-remove", &["example.com/f", "example.com/g"]).await;

    let wrote = meta::remove_finalizer(&api, &stale.metadata, "example.com/f")
        .await
        .unwrap();

    assert!(wrote);
    let now = api.get("stale-remove").await.unwrap();
    assert_eq!(now.metadata.finalizers, Some(vec!["example.com/g".into()]));
}
