//! JSON patch, merge patch and strategic merge patch.

use crate::common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

const W1: &str = "/apis/example.com/v1/namespaces/default/widgets/w1";

#[tokio::test]
async fn json_patch_applies_and_failed_tests_are_422() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let ops = json!([{"op": "replace", "path": "/spec/size", "value": 4}, {"op": "add", "path": "/spec/tags", "value": ["a"]}]);
    let r = call_json(&c, "PATCH", W1, "application/json-patch+json", &ops).await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.body["spec"],
        json!({"size": 4, "color": "red", "tags": ["a"]})
    );
    assert_eq!(r.body["metadata"]["generation"], 2);
    let failing = json!([{"op": "test", "path": "/spec/size", "value": 99}, {"op": "replace", "path": "/spec/size", "value": 5}]);
    let r = call_json(&c, "PATCH", W1, "application/json-patch+json", &failing).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        widgets(&c, "default").get("w1").await.unwrap().data["spec"]["size"],
        4
    );
    let r = call(
        &c,
        "PATCH",
        W1,
        Some("application/json-patch+json"),
        Some(b"[{\"op\":".to_vec()),
    )
    .await;
    assert_eq!(r.code, 400);
}

#[tokio::test]
async fn merge_patch_merges_and_deletes_with_null() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let r = call_json(
        &c,
        "PATCH",
        W1,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"a": "1"}}, "spec": {"name": "abc"}}),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["spec"]["name"], "abc");
    let r = call_json(
        &c,
        "PATCH",
        W1,
        "application/merge-patch+json",
        &json!({"metadata": {"labels": null}, "spec": {"name": null}}),
    )
    .await;
    assert!(r.body["metadata"].get("labels").is_none());
    assert!(r.body["spec"].get("name").is_none());
    // stale resourceVersion in the patch is a precondition
    let r = call_json(
        &c,
        "PATCH",
        W1,
        "application/merge-patch+json",
        &json!({"metadata": {"resourceVersion": "1"}, "spec": {"size": 3}}),
    )
    .await;
    assert_eq!(r.code, 409);
    // patch of a missing object
    let r = call_json(
        &c,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/nope",
        "application/merge-patch+json",
        &json!({}),
    )
    .await;
    assert_eq!(r.code, 404);
    // a patch that changes nothing keeps the version
    let before = call(&c, "GET", W1, None, None).await;
    let r = call_json(
        &c,
        "PATCH",
        W1,
        "application/merge-patch+json",
        &json!({"spec": {"size": 1}}),
    )
    .await;
    assert_eq!(rv(&r.body), rv(&before.body));
}

#[tokio::test]
async fn strategic_merge_patch_on_core_kinds_and_415_for_custom_resources() {
    let (_sim, c) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap = serde_json::from_value(
        json!({"metadata": {"name": "c1", "finalizers": ["a/x"]}, "data": {"k": "v"}}),
    )
    .unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let patched = cms
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"metadata": {"finalizers": ["b/y"]}, "data": {"k2": "v2"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        patched.metadata.finalizers,
        Some(vec!["a/x".to_string(), "b/y".to_string()])
    );
    assert_eq!(patched.data.unwrap().len(), 2);

    create_widget(&c, "w1", 1).await;
    let r = call_json(
        &c,
        "PATCH",
        W1,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"size": 2}}),
    )
    .await;
    assert_eq!(r.code, 415);
    assert_eq!(r.body["reason"], "UnsupportedMediaType");
    let r = call_json(&c, "PATCH", W1, "text/plain", &json!({})).await;
    assert_eq!(r.code, 415);
}
