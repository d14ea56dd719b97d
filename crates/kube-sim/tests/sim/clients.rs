//! Raw request bodies shaped the way the common clients send them, and object names at
//! kube-apiserver's limits.
//!
//! - Python `kubernetes` serialises only the attributes that are set: a
//!   `V1ConfigMap(metadata=…, data=…)` goes out without `apiVersion` and `kind`.
//! - client-go's typed clients send `kind` first, then `apiVersion`, and ObjectMeta with
//!   `"creationTimestamp": null`.
//! - kube-rs (k8s-openapi) always sends `apiVersion` and `kind`.
//! - `kubectl create --raw` sends the file as it is (see `kubectl.rs`).
//!
//! kube-apiserver fills a missing `apiVersion`/`kind` from the URL for built-in kinds
//! (typed decoding with the URL's kind as default) and refuses it for custom resources
//! (unstructured decoding needs both), with the messages asserted here.

use crate::common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const CONFIGMAPS: &str = "/api/v1/namespaces/default/configmaps";
const WIDGETS: &str = "/apis/example.com/v1/namespaces/default/widgets";

async fn post(c: &kube::Client, path: &str, body: &Value) -> Reply {
    call_json(c, "POST", path, "application/json", body).await
}

#[tokio::test]
async fn python_client_bodies_without_type_meta_are_defaulted_for_built_in_kinds() {
    let (_sim, c) = start().await;
    // kubernetes.client.CoreV1Api().create_namespaced_config_map("default",
    //     V1ConfigMap(metadata=V1ObjectMeta(name="py"), data={"k": "v"}))
    let r = post(
        &c,
        CONFIGMAPS,
        &json!({"metadata": {"name": "py"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "v1");
    assert_eq!(r.body["kind"], "ConfigMap");
    let got = Api::<ConfigMap>::namespaced(c.clone(), "default")
        .get("py")
        .await
        .unwrap();
    assert_eq!(got.data.unwrap()["k"], "v");

    // Only one of the two given: the other comes from the URL.
    let r = post(
        &c,
        CONFIGMAPS,
        &json!({"apiVersion": "v1", "metadata": {"name": "only-version"}}),
    )
    .await;
    assert_eq!((r.code, r.body["kind"].clone()), (201, json!("ConfigMap")));
    let r = post(
        &c,
        CONFIGMAPS,
        &json!({"kind": "ConfigMap", "metadata": {"name": "only-kind"}}),
    )
    .await;
    assert_eq!((r.code, r.body["apiVersion"].clone()), (201, json!("v1")));

    // replace_namespaced_config_map: a PUT without type meta.
    let rv = r.body["metadata"]["resourceVersion"].clone();
    let r = call_json(
        &c,
        "PUT",
        &format!("{CONFIGMAPS}/only-kind"),
        "application/json",
        &json!({"metadata": {"name": "only-kind", "resourceVersion": rv}, "data": {"a": "b"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["kind"], "ConfigMap");
    assert_eq!(r.body["data"]["a"], "b");

    // Cluster-scoped and other groups: V1Namespace, V1Secret, V1Lease.
    let r = post(
        &c,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "team-a"}}),
    )
    .await;
    assert_eq!((r.code, r.body["kind"].clone()), (201, json!("Namespace")));
    let r = post(
        &c,
        "/api/v1/namespaces/default/secrets",
        &json!({"metadata": {"name": "s"}, "stringData": {"token": "x"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["data"]["token"], "eA==");
    let r = post(
        &c,
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        &json!({"metadata": {"name": "leader"}, "spec": {"holderIdentity": "a"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "coordination.k8s.io/v1");
    assert_eq!(r.body["kind"], "Lease");
}

#[tokio::test]
async fn client_go_and_kube_rs_bodies_are_accepted() {
    let (_sim, c) = start().await;
    // client-go typed client: kind first, creationTimestamp null.
    let body = br#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"go","namespace":"default","creationTimestamp":null},"data":{"k":"v"}}"#;
    let r = call(
        &c,
        "POST",
        CONFIGMAPS,
        Some("application/json"),
        Some(body.to_vec()),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert!(r.body["metadata"]["creationTimestamp"].is_string());
    // client-go dynamic client and kube-rs: full type meta on a custom resource.
    let r = post(&c, WIDGETS, &widget("w1", 1)).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // kube-rs typed API.
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "rs"}, "data": {"k": "v"}
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(c.clone(), "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

#[tokio::test]
async fn custom_resources_need_api_version_and_kind() {
    let (_sim, c) = start().await;
    let no_kind =
        json!({"apiVersion": "example.com/v1", "metadata": {"name": "w"}, "spec": {"size": 1}});
    let r = post(&c, WIDGETS, &no_kind).await;
    assert_eq!(r.code, 400);
    assert_eq!(r.body["reason"], "BadRequest");
    assert_eq!(
        r.body["message"],
        format!(
            "Widget in version \"v1\" cannot be handled as a Widget: Object 'Kind' is missing in '{no_kind}'"
        )
    );

    let no_version = json!({"kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}});
    let r = post(&c, WIDGETS, &no_version).await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "Widget in version \"\" cannot be handled as a Widget: /, Kind=Widget is unstructured and is not suitable for converting to \"example.com/v1\""
    );

    let mut other_kind = widget("w", 1);
    other_kind["kind"] = json!("Gadget");
    let r = post(&c, WIDGETS, &other_kind).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "Widget.example.com \"w\" is invalid: kind: Invalid value: \"Gadget\": must be Widget"
    );

    // A merge patch that removes kind from a custom resource leaves an object the
    // decoder refuses; on a built-in kind the URL fills it in again.
    post(&c, WIDGETS, &widget("w", 1)).await;
    let r = call_json(
        &c,
        "PATCH",
        &format!("{WIDGETS}/w"),
        "application/merge-patch+json",
        &json!({"kind": null}),
    )
    .await;
    assert_eq!(r.code, 400, "{}", r.body);
    post(&c, CONFIGMAPS, &json!({"metadata": {"name": "cm"}})).await;
    let r = call_json(
        &c,
        "PATCH",
        &format!("{CONFIGMAPS}/cm"),
        "application/merge-patch+json",
        &json!({"kind": null, "data": {"x": "y"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["kind"], "ConfigMap");
}

#[tokio::test]
async fn server_side_apply_needs_the_exact_type_meta() {
    let (_sim, c) = start().await;
    let apply = |path: String, body: Value| {
        let c = c.clone();
        async move {
            call_json(
                &c,
                "PATCH",
                &format!("{path}?fieldManager=test"),
                "application/apply-patch+yaml",
                &body,
            )
            .await
        }
    };
    let r = apply(
        format!("{CONFIGMAPS}/a"),
        json!({"metadata": {"name": "a"}, "data": {"k": "v"}}),
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(r.body["message"], "invalid object type: /, Kind=");
    let r = apply(
        format!("{WIDGETS}/w"),
        json!({"apiVersion": "example.com/v2", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 1}}),
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "invalid object type: example.com/v2, Kind=Widget"
    );
    let r = apply(
        format!("{CONFIGMAPS}/a"),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
}

#[tokio::test]
async fn names_are_checked_per_kind_like_kube_apiserver() {
    let (_sim, c) = start().await;
    // A subdomain whose first label is longer than 63 characters: valid for every kind
    // with the subdomain rule (custom resources, ConfigMaps, …).
    let long_label = format!("{}.example", "a".repeat(100));
    let r = post(&c, WIDGETS, &widget(&long_label, 1)).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = post(&c, CONFIGMAPS, &json!({"metadata": {"name": long_label}})).await;
    assert_eq!(r.code, 201, "{}", r.body);
    let max = format!("{}.{}", "b".repeat(200), "c".repeat(52));
    assert_eq!(max.len(), 253);
    assert_eq!(post(&c, WIDGETS, &widget(&max, 1)).await.code, 201);

    let too_long = "d".repeat(254);
    let r = post(&c, WIDGETS, &widget(&too_long, 1)).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        format!("Invalid value: \"{too_long}\": must be no more than 253 characters")
    );

    // Namespaces are DNS-1123 labels.
    let r = post(
        &c,
        "/api/v1/namespaces",
        &json!({"metadata": {"name": "a.b"}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["message"],
        "Namespace \"a.b\" is invalid: metadata.name: Invalid value: \"a.b\": must not contain dots"
    );

    // Core v1 Events keep the legacy rule (no name shape, only the path-segment rule);
    // events.k8s.io/v1 Events are subdomains.
    let event = |name: &str| {
        json!({"metadata": {"name": name}, "involvedObject": {"kind": "Widget", "name": "w"},
               "reason": "Test", "message": "m", "type": "Normal"})
    };
    let r = post(
        &c,
        "/api/v1/namespaces/default/events",
        &event("Upper_Case"),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let r = post(&c, "/api/v1/namespaces/default/events", &event("a/b")).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Invalid value: \"a/b\": may not contain '/'"
    );
    let r = post(
        &c,
        "/apis/events.k8s.io/v1/namespaces/default/events",
        &json!({"metadata": {"name": "Upper_Case"}, "eventTime": "2026-01-01T00:00:00.000000Z",
                "reportingController": "x", "reportingInstance": "x", "action": "A",
                "reason": "R", "type": "Normal"}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);

    // generateName keeps at most 58 characters of the prefix, then 5 random ones.
    let r = post(
        &c,
        WIDGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"generateName": format!("{}-", "g".repeat(99))},
                "spec": {"size": 1}}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let name = r.body["metadata"]["name"].as_str().unwrap();
    assert_eq!(name.len(), 63);
    assert!(name.starts_with(&"g".repeat(58)));
    let r = post(
        &c,
        WIDGETS,
        &json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"generateName": "Bad-"}, "spec": {"size": 1}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0]["field"],
        "metadata.generateName"
    );
}
