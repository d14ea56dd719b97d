//! Discovery documents, OpenAPI v3, Table output and metadata-only lists.

use crate::common::*;
use kube::api::{ListParams, Patch, PatchParams};
use kube::discovery::Discovery;
use serde_json::{Value, json};

#[tokio::test]
async fn discovery_documents() {
    let (_sim, c) = start().await;
    let r = call(&c, "GET", "/api", None, None).await;
    assert_eq!(r.body["kind"], "APIVersions");
    assert_eq!(r.body["versions"], json!(["v1"]));
    let r = call(&c, "GET", "/apis", None, None).await;
    let ex = r.body["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "example.com")
        .unwrap()
        .clone();
    assert_eq!(
        ex["preferredVersion"],
        json!({"groupVersion": "example.com/v1", "version": "v1"})
    );
    assert_eq!(
        ex["versions"],
        json!([{"groupVersion": "example.com/v1", "version": "v1"}, {"groupVersion": "example.com/v1beta1", "version": "v1beta1"}])
    );
    let r = call(&c, "GET", "/apis/example.com/v1", None, None).await;
    assert_eq!(r.body["kind"], "APIResourceList");
    let resources: Vec<Value> = r.body["resources"].as_array().unwrap().clone();
    let widgets = resources.iter().find(|x| x["name"] == "widgets").unwrap();
    assert_eq!(widgets["kind"], "Widget");
    assert_eq!(widgets["namespaced"], true);
    assert_eq!(widgets["shortNames"], json!(["wd"]));
    assert_eq!(widgets["categories"], json!(["all"]));
    assert_eq!(
        widgets["verbs"],
        json!([
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    assert!(resources.iter().any(|x| x["name"] == "widgets/status"));
    assert!(
        resources
            .iter()
            .any(|x| x["name"] == "gadgets" && x["namespaced"] == false)
    );
    assert_eq!(
        call(&c, "GET", "/apis/example.com", None, None).await.body["kind"],
        "APIGroup"
    );
    assert_eq!(call(&c, "GET", "/apis/nope.io", None, None).await.code, 404);
    let v = call(&c, "GET", "/version", None, None).await;
    assert_eq!(v.body["major"], "1");

    // kube-rs discovery sees the CRD kinds
    let d = Discovery::new(c.clone()).run().await.unwrap();
    let (ar, caps) = d
        .resolve_gvk(&kube::core::GroupVersionKind::gvk(
            "example.com",
            "v1",
            "Widget",
        ))
        .unwrap();
    assert_eq!(ar.plural, "widgets");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(d.has_group("coordination.k8s.io"));
}

#[tokio::test]
async fn openapi_v3_index_and_documents() {
    let (_sim, c) = start().await;
    let idx = call(&c, "GET", "/openapi/v3", None, None).await;
    let url = idx.body["paths"]["apis/example.com/v1"]["serverRelativeURL"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(url.starts_with("/openapi/v3/apis/example.com/v1?hash="));
    let doc = call(&c, "GET", &url, None, None).await;
    assert_eq!(doc.code, 200);
    let patch =
        &doc.body["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}"]["patch"];
    assert_eq!(
        patch["x-kubernetes-group-version-kind"],
        json!({"group": "example.com", "version": "v1", "kind": "Widget"})
    );
    assert!(
        patch["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation")
    );
    let schema = &doc.body["components"]["schemas"]["com.example.v1.Widget"];
    assert_eq!(schema["properties"]["spec"]["required"], json!(["size"]));
    assert_eq!(call(&c, "GET", "/openapi/v2", None, None).await.code, 404);
}

#[tokio::test]
async fn table_output_uses_printer_columns() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 3).await;
    widgets(&c, "default")
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(json!({"status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]}})))
        .await
        .unwrap();
    create_widget(&c, "w2", 5).await;
    let req = axum::http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
        .body(Vec::new())
        .unwrap();
    let table: Value = c.request(req).await.unwrap();
    assert_eq!(table["kind"], "Table");
    assert_eq!(table["apiVersion"], "meta.k8s.io/v1");
    let cols: Vec<(&str, &str)> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| (d["name"].as_str().unwrap(), d["type"].as_str().unwrap()))
        .collect();
    assert_eq!(
        cols,
        vec![
            ("Name", "string"),
            ("Size", "integer"),
            ("Color", "string"),
            ("Ready", "string"),
            ("Age", "date")
        ]
    );
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(
        rows[0]["cells"].as_array().unwrap()[0..4],
        [json!("w1"), json!(3), json!("red"), json!("True")]
    );
    assert_eq!(
        rows[1]["cells"].as_array().unwrap()[0..4],
        [json!("w2"), json!(5), json!("red"), Value::Null]
    );
    assert_eq!(rows[0]["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(rows[0]["object"]["metadata"]["name"], "w1");

    // a single object as a Table
    let req = axum::http::Request::get(
        "/apis/example.com/v1/namespaces/default/widgets/w2?includeObject=Object",
    )
    .header("accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let one: Value = c.request(req).await.unwrap();
    assert_eq!(one["rows"].as_array().unwrap().len(), 1);
    assert_eq!(one["rows"][0]["object"]["kind"], "Widget");

    // only protobuf: 406
    let req = axum::http::Request::get("/apis/example.com/v1/namespaces/default/widgets")
        .header("accept", "application/vnd.kubernetes.protobuf")
        .body(Vec::new())
        .unwrap();
    let err = c.request::<Value>(req).await.unwrap_err();
    match err {
        kube::Error::Api(s) => assert_eq!(s.code, 406),
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn metadata_only_lists() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 3).await;
    let list = widgets(&c, "default")
        .list_metadata(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].metadata.name.as_deref(), Some("w1"));
    assert_eq!(
        list.items[0].types.as_ref().unwrap().kind,
        "PartialObjectMetadata"
    );
}
