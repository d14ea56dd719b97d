//! The status subresource: status ignored on the main resource, only status changed
//! through `/status`, generation untouched by status; kinds without the subresource.

use crate::common::*;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn status_is_ignored_on_create_and_update_of_the_main_resource() {
    let (_sim, c) = start().await;
    let mut w = widget("w1", 1);
    w["status"] = json!({"phase": "Forged"});
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 201);
    assert!(r.body.get("status").is_none());

    let mut upd = r.body.clone();
    upd["status"] = json!({"phase": "Forged"});
    let r2 = call_json(
        &c,
        "PUT",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        "application/json",
        &upd,
    )
    .await;
    assert_eq!(r2.code, 200);
    assert!(r2.body.get("status").is_none());
    // nothing changed, so no new version
    assert_eq!(rv(&r2.body), rv(&r.body));
}

#[tokio::test]
async fn only_status_changes_through_the_status_subresource() {
    let (_sim, c) = start().await;
    let w = create_widget(&c, "w1", 1).await;
    let mut body = w.clone();
    body["spec"]["size"] = json!(9);
    body["metadata"]["labels"] = json!({"ignored": "yes"});
    body["status"] = json!({"phase": "Ready", "observedGeneration": 1});
    let r = call_json(
        &c,
        "PUT",
        "/apis/example.com/v1/namespaces/default/widgets/w1/status",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.body["status"],
        json!({"phase": "Ready", "observedGeneration": 1})
    );
    assert_eq!(r.body["spec"]["size"], 1);
    assert!(r.body["metadata"].get("labels").is_none());
    assert_eq!(r.body["metadata"]["generation"], 1);
    assert!(rv(&r.body) > rv(&w));
    let mf = r.body["metadata"]["managedFields"].as_array().unwrap();
    let status_entry = mf.iter().find(|e| e["subresource"] == "status").unwrap();
    assert_eq!(
        status_entry["fieldsV1"],
        json!({"f:status": {".": {}, "f:phase": {}, "f:observedGeneration": {}}})
    );

    // merge patch on /status
    let api = widgets(&c, "default");
    let patched = api
        .patch_status(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Done"}, "spec": {"size": 7}})),
        )
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["phase"], "Done");
    assert_eq!(patched.data["spec"]["size"], 1);

    let got = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/w1/status",
        None,
        None,
    )
    .await;
    assert_eq!(got.code, 200);
    assert_eq!(got.body["status"]["phase"], "Done");

    // a spec change on the main resource keeps the status and bumps generation
    let main = api
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}, "status": {"phase": "X"}})),
        )
        .await
        .unwrap();
    assert_eq!(main.data["status"]["phase"], "Done");
    assert_eq!(main.metadata.generation, Some(2));
}

#[tokio::test]
async fn without_the_subresource_status_is_part_of_the_object() {
    let (_sim, c) = start().await;
    let g = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}, "spec": {"level": 1}, "status": {"note": "kept"}});
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/gadgets",
        "application/json",
        &g,
    )
    .await;
    assert_eq!(r.body["status"]["note"], "kept");
    let mut upd = r.body.clone();
    upd["status"]["note"] = json!("changed");
    let r2 = call_json(
        &c,
        "PUT",
        "/apis/example.com/v1/gadgets/g1",
        "application/json",
        &upd,
    )
    .await;
    assert_eq!(r2.body["status"]["note"], "changed");
    assert_eq!(r2.body["metadata"]["generation"], 2);
    let r3 = call(
        &c,
        "GET",
        "/apis/example.com/v1/gadgets/g1/status",
        None,
        None,
    )
    .await;
    assert_eq!(r3.code, 404);
    let _ = gadgets(&c).create(&PostParams::default(), &serde_json::from_value(json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g2"}})).unwrap()).await.unwrap();
}
