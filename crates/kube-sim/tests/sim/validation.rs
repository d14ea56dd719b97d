//! Schema validation (types, required, enum, bounds, pattern, list types), defaults,
//! pruning and `fieldValidation`, CEL rules (incl. transition rules), CRD checks, and the
//! real CAPI CRDs.

use crate::common::*;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

const WIDGETS_PATH: &str = "/apis/example.com/v1/namespaces/default/widgets";

fn fields(r: &Reply) -> Vec<String> {
    r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap_or("").to_string())
        .collect()
}

#[tokio::test]
async fn schema_violations_are_422_with_field_paths() {
    let (_sim, c) = start().await;
    let mut w = widget("w1", 11);
    w["spec"]["color"] = json!("pink");
    w["spec"]["name"] = json!("Bad!");
    w["spec"]["port"] = json!(true);
    w["spec"]["ports"] = json!([{"name": "a"}, {"name": "a"}]);
    w["spec"]["tags"] = json!(["x", "x"]);
    let r = call_json(&c, "POST", WIDGETS_PATH, "application/json", &w).await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(r.body["details"]["kind"], "Widget");
    assert_eq!(r.body["details"]["group"], "example.com");
    assert_eq!(
        fields(&r),
        vec![
            "spec.color",
            "spec.name",
            "spec.port",
            "spec.ports[1]",
            "spec.size",
            "spec.tags[1]"
        ]
    );
    let causes = r.body["details"]["causes"].as_array().unwrap();
    assert_eq!(
        causes[4]["message"],
        "Invalid value: 11: spec.size in body should be less than or equal to 10"
    );
    assert_eq!(causes[4]["reason"], "FieldValueInvalid");
    assert_eq!(
        causes[0]["message"],
        "Unsupported value: \"pink\": supported values: \"red\", \"green\", \"blue\""
    );
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .starts_with("Widget.example.com \"w1\" is invalid: [")
    );

    let mut missing = widget("w2", 1);
    missing["spec"] = json!({});
    let r = call_json(&c, "POST", WIDGETS_PATH, "application/json", &missing).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueRequired", "message": "Required value", "field": "spec.size"})
    );
    assert_eq!(
        r.body["message"],
        "Widget.example.com \"w2\" is invalid: spec.size: Required value"
    );

    let mut wrong_type = widget("w3", 1);
    wrong_type["spec"]["size"] = json!("three");
    let r = call_json(&c, "POST", WIDGETS_PATH, "application/json", &wrong_type).await;
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueTypeInvalid"
    );

    // int-or-string accepts both
    for port in [json!(8080), json!("http")] {
        let mut ok = widget(&format!("p{}", port.is_string() as u8), 1);
        ok["spec"]["port"] = port;
        assert_eq!(
            call_json(&c, "POST", WIDGETS_PATH, "application/json", &ok)
                .await
                .code,
            201
        );
    }
}

#[tokio::test]
async fn unknown_fields_are_pruned_warned_or_refused() {
    let (_sim, c) = start().await;
    let mut w = widget("w1", 1);
    w["spec"]["bogus"] = json!(1);
    w["spec"]["extra"] = json!({"free": {"form": true}});
    w["metadata"]["nonsense"] = json!("x");
    let r = call_json(&c, "POST", WIDGETS_PATH, "application/json", &w).await;
    assert_eq!(r.code, 201);
    assert_eq!(
        r.body["spec"],
        json!({"size": 1, "color": "red", "extra": {"free": {"form": true}}})
    );
    assert!(r.body["metadata"].get("nonsense").is_none());
    let warnings: Vec<&str> = r
        .headers
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap())
        .collect();
    assert_eq!(
        warnings,
        vec![
            "299 - \"unknown field \\\"metadata.nonsense\\\"\"",
            "299 - \"unknown field \\\"spec.bogus\\\"\""
        ]
    );

    let mut strict = widget("w2", 1);
    strict["spec"]["bogus"] = json!(1);
    let r = call_json(
        &c,
        "POST",
        &format!("{WIDGETS_PATH}?fieldValidation=Strict"),
        "application/json",
        &strict,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        r.body["message"],
        "strict decoding error: unknown field \"spec.bogus\""
    );
    let r = call_json(
        &c,
        "POST",
        &format!("{WIDGETS_PATH}?fieldValidation=Ignore"),
        "application/json",
        &strict,
    )
    .await;
    assert_eq!(r.code, 201);
    assert!(r.headers.get("warning").is_none());
}

#[tokio::test]
async fn cel_rules_and_transition_rules() {
    let (_sim, c) = start().await;
    let mut w = widget("w1", 2);
    w["spec"]["minSize"] = json!(3);
    let r = call_json(&c, "POST", WIDGETS_PATH, "application/json", &w).await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueInvalid", "field": "spec", "message": "Invalid value: \"object\": minSize must not exceed size"})
    );
    let mut w = widget("w1", 2);
    w["spec"]["zone"] = json!("a");
    let created = call_json(&c, "POST", WIDGETS_PATH, "application/json", &w).await;
    assert_eq!(created.code, 201);
    // zone is immutable (self == oldSelf)
    let r = call_json(
        &c,
        "PATCH",
        &format!("{WIDGETS_PATH}/w1"),
        "application/merge-patch+json",
        &json!({"spec": {"zone": "b"}}),
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.zone");
    assert_eq!(
        r.body["details"]["causes"][0]["message"],
        "Invalid value: \"b\": zone is immutable"
    );
    let r = call_json(
        &c,
        "PATCH",
        &format!("{WIDGETS_PATH}/w1"),
        "application/merge-patch+json",
        &json!({"spec": {"size": 3}}),
    )
    .await;
    assert_eq!(r.code, 200);
}

#[tokio::test]
async fn invalid_crds_are_refused() {
    let (sim, c) = start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "wrong.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}}]}
    });
    let r = call_json(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &crd,
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(fields(&r), vec!["metadata.name", "spec.versions"]);
    let err = sim
        .install_crd_yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
        .unwrap_err();
    assert_eq!(err.category(), "invalid_crd");
    let err = sim.install_crd_yaml(": : :").unwrap_err();
    assert_eq!(err.category(), "parse");
    // nothing new is served
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/things",
            None,
            None
        )
        .await
        .code,
        404
    );
}

#[tokio::test]
async fn crds_posted_at_runtime_are_served_and_removed_with_their_objects() {
    let (_sim, c) = start().await;
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.demo.io"},
        "spec": {"group": "demo.io", "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let r = call_json(
        &c,
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "application/json",
        &crd,
    )
    .await;
    assert_eq!(r.code, 201);
    let conds: Vec<(String, String)> = r.body["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap().to_string(),
                c["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        conds,
        vec![
            ("NamesAccepted".into(), "True".into()),
            ("Established".into(), "True".into())
        ]
    );
    let thing = json!({"apiVersion": "demo.io/v1", "kind": "Thing", "metadata": {"name": "t1"}, "spec": {"any": 1}});
    assert_eq!(
        call_json(
            &c,
            "POST",
            "/apis/demo.io/v1/namespaces/default/things",
            "application/json",
            &thing
        )
        .await
        .code,
        201
    );
    assert_eq!(
        call(
            &c,
            "DELETE",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.demo.io",
            None,
            None
        )
        .await
        .code,
        200
    );
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/demo.io/v1/namespaces/default/things/t1",
            None,
            None
        )
        .await
        .code,
        404
    );
    assert_eq!(
        call(&c, "GET", "/apis/demo.io/v1", None, None).await.code,
        404
    );
}

#[tokio::test]
async fn secrets_fold_string_data_and_check_keys() {
    let (_sim, c) = start().await;
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "default");
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s1"}, "stringData": {"token": "abc"}}))
            .unwrap();
    let created = secrets.create(&PostParams::default(), &s).await.unwrap();
    let v: Value = serde_json::to_value(&created).unwrap();
    assert_eq!(v["data"], json!({"token": "YWJj"}));
    assert_eq!(v["type"], "Opaque");
    assert!(v.get("stringData").is_none());
    let bad = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s2"}, "data": {"bad key": "YWJj"}});
    let r = call_json(
        &c,
        "POST",
        "/api/v1/namespaces/default/secrets",
        "application/json",
        &bad,
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["causes"][0]["field"], "data[bad key]");
    let bad64 = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s3"}, "data": {"k": "%%%"}});
    assert_eq!(
        call_json(
            &c,
            "POST",
            "/api/v1/namespaces/default/secrets",
            "application/json",
            &bad64
        )
        .await
        .code,
        422
    );
}

#[tokio::test]
async fn project_crds_install_and_their_cel_rules_apply() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases");
    let (sim, c) = start().await;
    assert!(sim.install_crds_from_dir(&dir).unwrap() >= 4);
    let base = "/apis/infrastructure.cluster.x-k8s.io/v1alpha3/namespaces/default/proxmoxmachines";
    let m = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "ProxmoxMachine",
                   "metadata": {"name": "m1"}, "spec": {"instance": "pve-a"}});
    let r = call_json(&c, "POST", base, "application/json", &m).await;
    assert_eq!(r.code, 201, "{}", r.body);
    // `instance is immutable once set` (a transition rule with fieldPath .instance)
    let r = call_json(
        &c,
        "PATCH",
        &format!("{base}/m1"),
        "application/merge-patch+json",
        &json!({"spec": {"instance": "pve-b"}}),
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let cause = &r.body["details"]["causes"][0];
    assert_eq!(cause["field"], "spec.instance");
    assert!(
        cause["message"]
            .as_str()
            .unwrap()
            .ends_with("instance is immutable once set"),
        "{cause}"
    );
    // `templateID needs sourceNode`
    let bad = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "ProxmoxMachine",
                     "metadata": {"name": "m2"}, "spec": {"templateID": 100}});
    let r = call_json(&c, "POST", base, "application/json", &bad).await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.sourceNode");
}
