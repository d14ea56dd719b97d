//! Finalizers with `deletionTimestamp`, owner-reference garbage collection (background,
//! foreground with `blockOwnerDeletion`, orphan) and namespace termination.

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::{Value, json};
use std::time::Duration;

async fn gone<K>(api: &Api<K>, name: &str, uid: &str)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(api.clone(), name, conditions::is_deleted(uid)),
    )
    .await
    .expect("deleted within 10 s")
    .expect("watch");
}

fn owner_ref(owner: &Value, block: bool) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "name": owner["metadata"]["name"],
           "uid": owner["metadata"]["uid"], "controller": true, "blockOwnerDeletion": block})
}

async fn config_map(
    c: &kube::Client,
    name: &str,
    owner: Option<Value>,
    finalizers: &[&str],
) -> ConfigMap {
    let mut cm = json!({"metadata": {"name": name}});
    if let Some(o) = owner {
        cm["metadata"]["ownerReferences"] = json!([o]);
    }
    if !finalizers.is_empty() {
        cm["metadata"]["finalizers"] = json!(finalizers);
    }
    Api::<ConfigMap>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn finalizers_hold_the_object_until_removed() {
    let (_sim, c) = start().await;
    let api = widgets(&c, "default");
    let mut w = widget("w1", 1);
    w["metadata"]["finalizers"] = json!(["example.com/cleanup"]);
    let created = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await
    .body;
    let mut events = api
        .watch(
            &WatchParams::default(),
            created["metadata"]["resourceVersion"].as_str().unwrap(),
        )
        .await
        .unwrap()
        .boxed();

    let r = call(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert!(r.body["metadata"]["deletionTimestamp"].is_string());
    assert_eq!(r.body["metadata"]["generation"], 2);
    match next(&mut events).await.unwrap() {
        WatchEvent::Modified(o) => assert!(o.metadata.deletion_timestamp.is_some()),
        other => panic!("unexpected {other:?}"),
    }
    // still readable; new finalizers are refused
    let r = call_json(
        &c,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": ["example.com/cleanup", "example.com/other"]}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0]["field"],
        "metadata.finalizers"
    );
    // removing the last finalizer deletes it
    let r = call_json(
        &c,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        "application/merge-patch+json",
        &json!({"metadata": {"finalizers": null}}),
    )
    .await;
    assert_eq!(r.code, 200);
    match next(&mut events).await.unwrap() {
        WatchEvent::Deleted(o) => assert_eq!(o.metadata.finalizers, None),
        other => panic!("unexpected {other:?}"),
    }
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/widgets/w1",
            None,
            None
        )
        .await
        .code,
        404
    );
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let (_sim, c) = start().await;
    let owner = create_widget(&c, "owner", 1).await;
    let cm = config_map(&c, "dep", Some(owner_ref(&owner, false)), &[]).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    widgets(&c, "default")
        .delete("owner", &DeleteParams::background())
        .await
        .unwrap();
    gone(&cms, "dep", cm.metadata.uid.as_deref().unwrap()).await;
}

#[tokio::test]
async fn dependents_with_a_live_owner_survive_the_loss_of_another() {
    let (_sim, c) = start().await;
    let a = create_widget(&c, "a", 1).await;
    let b = create_widget(&c, "b", 1).await;
    let mut ra = owner_ref(&a, false);
    ra["controller"] = json!(false);
    let cm = json!({"metadata": {"name": "shared", "ownerReferences": [ra, owner_ref(&b, false)]}});
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    cms.create(&PostParams::default(), &serde_json::from_value(cm).unwrap())
        .await
        .unwrap();
    // a dependent whose owners are all unknown from the start is collected
    let orphan = config_map(
        &c,
        "stray",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "no-such-uid"})),
        &[],
    )
    .await;
    gone(&cms, "stray", orphan.metadata.uid.as_deref().unwrap()).await;
    widgets(&c, "default")
        .delete("a", &DeleteParams::default())
        .await
        .unwrap();
    // wait for a later GC pass, then check "shared" is still there
    let probe = config_map(
        &c,
        "probe",
        Some(json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "gone-too"})),
        &[],
    )
    .await;
    gone(&cms, "probe", probe.metadata.uid.as_deref().unwrap()).await;
    assert!(cms.get("shared").await.is_ok());
}

#[tokio::test]
async fn foreground_deletion_waits_for_blocking_dependents() {
    let (_sim, c) = start().await;
    let owner = create_widget(&c, "owner", 1).await;
    let cm = config_map(
        &c,
        "dep",
        Some(owner_ref(&owner, true)),
        &["example.com/hold"],
    )
    .await;
    let api = widgets(&c, "default");
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let mut dep_events = cms
        .watch(
            &WatchParams::default().fields("metadata.name=dep"),
            cm.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap()
        .boxed();

    let r = call_json(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets/owner",
        "application/json",
        &json!({"propagationPolicy": "Foreground"}),
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.body["metadata"]["finalizers"],
        json!(["foregroundDeletion"])
    );
    // the GC deletes the dependent, which its own finalizer holds
    match next(&mut dep_events).await.unwrap() {
        WatchEvent::Modified(o) => assert!(o.metadata.deletion_timestamp.is_some()),
        other => panic!("unexpected {other:?}"),
    }
    // the owner is still there, waiting
    let o = api.get("owner").await.unwrap();
    assert!(o.metadata.deletion_timestamp.is_some());
    assert_eq!(
        o.metadata.finalizers,
        Some(vec!["foregroundDeletion".to_string()])
    );
    // release the dependent: both go away
    cms.patch(
        "dep",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&api, "owner", owner["metadata"]["uid"].as_str().unwrap()).await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_without_the_reference() {
    let (_sim, c) = start().await;
    let owner = create_widget(&c, "owner", 1).await;
    config_map(&c, "dep", Some(owner_ref(&owner, true)), &[]).await;
    let api = widgets(&c, "default");
    api.delete("owner", &DeleteParams::orphan()).await.unwrap();
    gone(&api, "owner", owner["metadata"]["uid"].as_str().unwrap()).await;
    let dep = Api::<ConfigMap>::namespaced(c.clone(), "default")
        .get("dep")
        .await
        .unwrap();
    assert_eq!(dep.metadata.owner_references, None);
}

#[tokio::test]
async fn namespace_termination_deletes_contents_then_the_namespace() {
    let (_sim, c) = start().await;
    let nss: Api<Namespace> = Api::all(c.clone());
    let ns = nss
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    let team = widgets(&c, "team");
    let mut w = widget("held", 1);
    w["metadata"]["finalizers"] = json!(["example.com/hold"]);
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/team/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 201);

    let r = call(&c, "DELETE", "/api/v1/namespaces/team", None, None).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["status"]["phase"], "Terminating");
    // new content is refused
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/team/widgets",
        "application/json",
        &widget("new", 1),
    )
    .await;
    assert_eq!(r.code, 403);
    assert_eq!(r.body["reason"], "Forbidden");
    // the held widget gets a deletionTimestamp; releasing it lets the namespace go
    let held = tokio::time::timeout(
        Duration::from_secs(10),
        await_condition(
            team.clone(),
            "held",
            |o: Option<&kube::api::DynamicObject>| {
                o.is_some_and(|o| o.metadata.deletion_timestamp.is_some())
            },
        ),
    )
    .await
    .unwrap()
    .unwrap()
    .unwrap();
    assert_eq!(held.metadata.name.as_deref(), Some("held"));
    team.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    gone(&nss, "team", ns.metadata.uid.as_deref().unwrap()).await;

    let r = call(&c, "DELETE", "/api/v1/namespaces/default", None, None).await;
    assert_eq!(r.code, 403);
}
