//! Create, get, list, update, delete, deletecollection; names, namespaces, errors.

use crate::common::*;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn create_sets_server_fields_and_answers_201() {
    let (_sim, c) = start().await;
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &widget("w1", 3),
    )
    .await;
    assert_eq!(r.code, 201);
    let m = &r.body["metadata"];
    assert_eq!(m["name"], "w1");
    assert_eq!(m["namespace"], "default");
    assert_eq!(m["generation"], 1);
    assert_eq!(m["uid"].as_str().unwrap().len(), 36);
    assert!(m["creationTimestamp"].as_str().unwrap().ends_with('Z'));
    assert!(rv(&r.body) > 0);
    // default applied
    assert_eq!(r.body["spec"], json!({"size": 3, "color": "red"}));
    // created by an Update operation of the request's manager
    assert_eq!(m["managedFields"][0]["operation"], "Update");
    assert_eq!(
        m["managedFields"][0]["fieldsV1"],
        json!({"f:spec": {".": {}, "f:size": {}, "f:color": {}}})
    );

    let got = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        None,
        None,
    )
    .await;
    assert_eq!(got.code, 200);
    assert_eq!(got.body, r.body);
}

#[tokio::test]
async fn already_exists_and_not_found() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &widget("w1", 2),
    )
    .await;
    assert_eq!(r.code, 409);
    assert_eq!(r.body["reason"], "AlreadyExists");
    assert_eq!(
        r.body["message"],
        "widgets.example.com \"w1\" already exists"
    );
    assert_eq!(
        r.body["details"],
        json!({"name": "w1", "group": "example.com", "kind": "widgets"})
    );

    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/nope",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
    assert_eq!(r.body["reason"], "NotFound");
    assert_eq!(r.body["message"], "widgets.example.com \"nope\" not found");
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Failure");

    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/nothings",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
    let r = call(
        &c,
        "GET",
        "/apis/example.com/v9/namespaces/default/widgets",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
}

#[tokio::test]
async fn missing_namespace_is_404_and_body_mismatches_are_400() {
    let (_sim, c) = start().await;
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/ghost/widgets",
        "application/json",
        &widget("w1", 1),
    )
    .await;
    assert_eq!(r.code, 404);
    assert_eq!(r.body["message"], "namespaces \"ghost\" not found");

    let mut w = widget("w1", 1);
    w["metadata"]["namespace"] = json!("other");
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(r.body["reason"], "BadRequest");

    let mut w = widget("w1", 1);
    w["apiVersion"] = json!("example.com/v2");
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "the API version in the data (example.com/v2) does not match the expected API version (example.com/v1)"
    );

    let r = call(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        Some("application/json"),
        Some(b"{oops".to_vec()),
    )
    .await;
    assert_eq!(r.code, 400);

    let mut w = widget("", 1);
    w["metadata"] = json!({});
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");

    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &widget("Bad_Name", 1),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["reason"], "Invalid");

    let mut w = widget("w9", 1);
    w["metadata"]["resourceVersion"] = json!("5");
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "resourceVersion should not be set on objects to be created"
    );

    // nothing was created by the refused requests
    let list = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        None,
    )
    .await;
    assert_eq!(list.body["items"], json!([]));
}

#[tokio::test]
async fn generate_name_and_dry_run() {
    let (_sim, c) = start().await;
    let mut w = widget("", 2);
    w["metadata"] = json!({"generateName": "gen-"});
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 201);
    let name = r.body["metadata"]["name"].as_str().unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets?dryRun=All",
        "application/json",
        &widget("dry", 2),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(r.body["metadata"]["name"], "dry");
    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/dry",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
}

#[tokio::test]
async fn update_bumps_generation_on_spec_changes_only_and_checks_resource_version() {
    let (_sim, c) = start().await;
    let w = create_widget(&c, "w1", 1).await;
    let path = "/apis/example.com/v1/namespaces/default/widgets/w1";

    let mut changed = w.clone();
    changed["spec"]["size"] = json!(2);
    let r = call_json(&c, "PUT", path, "application/json", &changed).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["metadata"]["generation"], 2);
    assert!(rv(&r.body) > rv(&w));

    // label change: new resourceVersion, same generation
    let mut labelled = r.body.clone();
    labelled["metadata"]["labels"] = json!({"a": "b"});
    let r2 = call_json(&c, "PUT", path, "application/json", &labelled).await;
    assert_eq!(r2.code, 200);
    assert_eq!(r2.body["metadata"]["generation"], 2);
    assert!(rv(&r2.body) > rv(&r.body));

    // stale resourceVersion
    let r3 = call_json(&c, "PUT", path, "application/json", &changed).await;
    assert_eq!(r3.code, 409);
    assert_eq!(r3.body["reason"], "Conflict");
    assert_eq!(
        r3.body["message"],
        "Operation cannot be fulfilled on widgets.example.com \"w1\": the object has been modified; please apply your changes to the latest version and try again"
    );

    // custom resources need a resourceVersion on PUT
    let mut unconditional = r2.body.clone();
    unconditional["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("resourceVersion");
    let r4 = call_json(&c, "PUT", path, "application/json", &unconditional).await;
    assert_eq!(r4.code, 422);
    assert_eq!(
        r4.body["details"]["causes"][0]["field"],
        "metadata.resourceVersion"
    );

    // name mismatch
    let mut other = r2.body.clone();
    other["metadata"]["name"] = json!("w2");
    let r5 = call_json(&c, "PUT", path, "application/json", &other).await;
    assert_eq!(r5.code, 400);
    assert_eq!(
        r5.body["message"],
        "the name of the object (w2) does not match the name on the URL (w1)"
    );

    // an identical PUT changes nothing
    let r6 = call_json(&c, "PUT", path, "application/json", &r2.body).await;
    assert_eq!(r6.code, 200);
    assert_eq!(rv(&r6.body), rv(&r2.body));

    // server-owned fields cannot be changed
    let mut forged = r2.body.clone();
    forged["metadata"]["uid"] = json!("forged");
    let r7 = call_json(&c, "PUT", path, "application/json", &forged).await;
    assert_eq!(r7.code, 409);

    let r8 = call_json(
        &c,
        "PUT",
        "/apis/example.com/v1/namespaces/default/widgets/ghost",
        "application/json",
        &widget("ghost", 1),
    )
    .await;
    assert_eq!(r8.code, 404);
}

#[tokio::test]
async fn core_kinds_allow_unconditional_update_and_delete_answers_status() {
    let (_sim, c) = start().await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c1"}, "data": {"a": "1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1"}, "data": {"a": "2"}});
    let r = call_json(
        &c,
        "PUT",
        "/api/v1/namespaces/default/configmaps/c1",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["data"], json!({"a": "2"}));
    assert!(r.body["metadata"].get("generation").is_none());

    let r = call(
        &c,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["kind"], "Status");
    assert_eq!(r.body["status"], "Success");
    assert_eq!(r.body["details"]["name"], "c1");
    let r = call(
        &c,
        "DELETE",
        "/api/v1/namespaces/default/configmaps/c1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
}

#[tokio::test]
async fn delete_of_custom_resource_returns_the_object() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let r = call(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["kind"], "Widget");
    assert_eq!(r.body["metadata"]["name"], "w1");
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

    // preconditions
    let w = create_widget(&c, "w2", 1).await;
    let body = json!({"preconditions": {"uid": "not-it"}});
    let r = call_json(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets/w2",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(r.code, 409);
    let body = json!({"preconditions": {"uid": w["metadata"]["uid"], "resourceVersion": w["metadata"]["resourceVersion"]}});
    let r = call_json(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets/w2",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn deletecollection_with_label_selector() {
    let (_sim, c) = start().await;
    for (n, team) in [("a", "x"), ("b", "x"), ("c", "y")] {
        let mut w = widget(n, 1);
        w["metadata"]["labels"] = json!({"team": team});
        let r = call_json(
            &c,
            "POST",
            "/apis/example.com/v1/namespaces/default/widgets",
            "application/json",
            &w,
        )
        .await;
        assert_eq!(r.code, 201);
    }
    let r = call(
        &c,
        "DELETE",
        "/apis/example.com/v1/namespaces/default/widgets?labelSelector=team%3Dx",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["kind"], "WidgetList");
    let deleted: Vec<&str> = r.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(deleted, vec!["a", "b"]);
    let left = widgets(&c, "default")
        .list(&ListParams::default())
        .await
        .unwrap();
    let names: Vec<String> = left
        .items
        .iter()
        .map(|o| o.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, vec!["c"]);
}

#[tokio::test]
async fn cluster_scoped_kinds_and_scope_errors() {
    let (_sim, c) = start().await;
    let body = json!({"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g1", "namespace": "ignored"}, "spec": {"level": 2}});
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/gadgets",
        "application/json",
        &body,
    )
    .await;
    assert_eq!(r.code, 201);
    assert!(r.body["metadata"].get("namespace").is_none());
    let g = gadgets(&c).get("g1").await.unwrap();
    assert_eq!(g.data["spec"]["level"], 2);
    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/gadgets/g1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 404);
    // POST to the all-namespaces path of a namespaced kind
    let r = call_json(
        &c,
        "POST",
        "/apis/example.com/v1/widgets",
        "application/json",
        &widget("w", 1),
    )
    .await;
    assert_eq!(r.code, 405);
    assert_eq!(r.body["reason"], "MethodNotAllowed");
    // namespaces are cluster-scoped too
    let nss: Api<Namespace> = Api::all(c.clone());
    let names: Vec<String> = nss
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|n| n.metadata.name.unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["default", "kube-node-lease", "kube-public", "kube-system"]
    );
}

#[tokio::test]
async fn authentication_and_unsupported_methods() {
    let (sim, c) = start().await;
    let mut cfg = sim.kube_config();
    cfg.auth_info = serde_json::from_value(json!({"token": "wrong"})).unwrap();
    let bad = kube::Client::try_from(cfg).unwrap();
    let r = call(&bad, "GET", "/api/v1/namespaces", None, None).await;
    assert_eq!(r.code, 401);
    assert_eq!(r.body["reason"], "Unauthorized");
    let r = call(
        &c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        Some("application/json"),
        Some(b"{}".to_vec()),
    )
    .await;
    assert_eq!(r.code, 405);
    let r = call(&c, "GET", "/healthz", None, None).await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn resource_versions_increase_across_kinds() {
    let (_sim, c) = start().await;
    let a = create_widget(&c, "a", 1).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let cm = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "c"}})).unwrap(),
        )
        .await
        .unwrap();
    let b = create_widget(&c, "b", 1).await;
    let cm_rv: u64 = cm.metadata.resource_version.unwrap().parse().unwrap();
    assert!(rv(&a) < cm_rv && cm_rv < rv(&b));
    let dp = DeleteParams::default();
    widgets(&c, "default").delete("a", &dp).await.unwrap();
    let list = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets",
        None,
        None,
    )
    .await;
    let list_rv: u64 = list.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(list_rv > rv(&b));
    let _: Value = list.body;
}

#[tokio::test]
async fn served_versions_share_storage() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 4).await;
    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1beta1/namespaces/default/widgets/w1",
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["apiVersion"], "example.com/v1beta1");
    assert_eq!(r.body["spec"]["size"], 4);
}
