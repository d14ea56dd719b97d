//! The scale subresource of custom resources (`subresources.scale`): `autoscaling/v1`
//! `Scale` reads and writes through kube-rs' scale calls and raw requests, preconditions,
//! validation, managed fields, server-side apply conflicts, discovery.

use crate::common::*;
use k8s_openapi::api::autoscaling::v1::{Scale, ScaleSpec};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

/// The test CRD with a scale subresource (Fleet).
const FLEETS: &str = include_str!("../fixtures/fleets.yaml");
const FLEET_PATH: &str = "/apis/example.com/v1/namespaces/default/fleets";

fn fleets(c: &kube::Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Fleet"),
        "fleets",
    );
    Api::namespaced_with(c.clone(), "default", &ar)
}

async fn start_with_fleets() -> (kube_sim::KubeSim, kube::Client) {
    let (sim, c) = start().await;
    sim.install_crd_yaml(FLEETS).expect("install the Fleet CRD");
    (sim, c)
}

async fn create_fleet(c: &kube::Client, name: &str, spec: Value) -> Value {
    let body = json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": name}, "spec": spec});
    let r = call_json(c, "POST", FLEET_PATH, "application/json", &body).await;
    assert_eq!(r.code, 201, "{}", r.body);
    r.body
}

async fn get_fleet(c: &kube::Client, name: &str) -> Value {
    call(c, "GET", &format!("{FLEET_PATH}/{name}"), None, None)
        .await
        .body
}

fn manager_entries(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["manager"].as_str().unwrap().to_string(),
                e["operation"].as_str().unwrap().to_string(),
                e["subresource"].as_str().unwrap_or("").to_string(),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

#[tokio::test]
async fn scale_reads_the_declared_paths() {
    let (_sim, c) = start_with_fleets().await;
    let f = create_fleet(&c, "f1", json!({"replicas": 2, "template": "t"})).await;
    fleets(&c)
        .patch_status(
            "f1",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"replicas": 1, "selector": "app=f1"}})),
        )
        .await
        .unwrap();
    let r = call(&c, "GET", &format!("{FLEET_PATH}/f1/scale"), None, None).await;
    assert_eq!(r.code, 200);
    let now = get_fleet(&c, "f1").await;
    assert_eq!(
        r.body,
        json!({
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                "name": "f1",
                "namespace": "default",
                "uid": f["metadata"]["uid"],
                "resourceVersion": now["metadata"]["resourceVersion"],
                "creationTimestamp": f["metadata"]["creationTimestamp"]
            },
            "spec": {"replicas": 2},
            "status": {"replicas": 1, "selector": "app=f1"}
        })
    );
    // kube-rs' typed call reads the same
    let s: Scale = fleets(&c).get_scale("f1").await.unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(2));
    assert_eq!(s.status.unwrap().selector.as_deref(), Some("app=f1"));

    // discovery names the subresource's kind for client-go's scale client
    let d = call(&c, "GET", "/apis/example.com/v1", None, None).await;
    let entry = d.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "fleets/scale")
        .cloned()
        .unwrap();
    assert_eq!(
        (
            &entry["group"],
            &entry["version"],
            &entry["kind"],
            &entry["verbs"]
        ),
        (
            &json!("autoscaling"),
            &json!("v1"),
            &json!("Scale"),
            &json!(["get", "patch", "update"])
        )
    );
    // kinds without the subresource, and missing objects
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/gadgets/g1/scale",
            None,
            None
        )
        .await
        .code,
        404
    );
    create_widget(&c, "w1", 3).await;
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/widgets/w1/scale",
            None,
            None
        )
        .await
        .code,
        404
    );
    let missing = call(&c, "GET", &format!("{FLEET_PATH}/nope/scale"), None, None).await;
    assert_eq!(missing.code, 404);
    assert_eq!(
        missing.body["message"],
        "fleets.example.com \"nope\" not found"
    );
}

#[tokio::test]
async fn scale_writes_change_only_spec_replicas() {
    let (_sim, c) = start_with_fleets().await;
    let f = create_fleet(&c, "f1", json!({"replicas": 2, "template": "t"})).await;
    let api = fleets(&c);

    // merge patch, as `kubectl scale` sends it
    let s = api
        .patch_scale(
            "f1",
            &PatchParams {
                field_manager: Some("scaler".into()),
                ..PatchParams::default()
            },
            &Patch::Merge(
                json!({"spec": {"replicas": 5}, "metadata": {"labels": {"ignored": "yes"}}}),
            ),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(5));
    let got = get_fleet(&c, "f1").await;
    assert_eq!(got["spec"], json!({"replicas": 5, "template": "t"}));
    assert_eq!(got["metadata"]["generation"], 2);
    assert!(got["metadata"].get("labels").is_none());
    assert_eq!(
        s.metadata.resource_version.as_deref(),
        got["metadata"]["resourceVersion"].as_str()
    );
    let entries = manager_entries(&got);
    let scaler = entries.iter().find(|e| e.0 == "scaler").unwrap();
    assert_eq!(
        (scaler.1.as_str(), scaler.2.as_str(), &scaler.3),
        ("Update", "scale", &json!({"f:spec": {"f:replicas": {}}}))
    );
    // the creator lost spec.replicas to the scaler
    let creator = entries.iter().find(|e| e.2.is_empty()).unwrap();
    assert_eq!(creator.3, json!({"f:spec": {".": {}, "f:template": {}}}));

    // PUT with a stale resourceVersion: 409; with the current one: applied
    let mut stale = Scale {
        metadata: kube::api::ObjectMeta {
            name: Some("f1".into()),
            namespace: Some("default".into()),
            resource_version: f["metadata"]["resourceVersion"]
                .as_str()
                .map(str::to_string),
            ..Default::default()
        },
        spec: Some(ScaleSpec { replicas: Some(9) }),
        status: None,
    };
    match api
        .replace_scale("f1", &PostParams::default(), &stale)
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!((e.code, e.reason.as_str()), (409, "Conflict")),
        other => panic!("expected a conflict, got {other:?}"),
    }
    stale.metadata.resource_version = got["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_string);
    let s = api
        .replace_scale("f1", &PostParams::default(), &stale)
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(9));
    assert_eq!(get_fleet(&c, "f1").await["spec"]["replicas"], 9);

    // dry run: answered, not stored
    let r = call_json(
        &c,
        "PATCH",
        &format!("{FLEET_PATH}/f1/scale?dryRun=All"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": 1}}),
    )
    .await;
    assert_eq!(r.body["spec"]["replicas"], 1);
    assert_eq!(get_fleet(&c, "f1").await["spec"]["replicas"], 9);

    // JSON patch; to 0, which the Scale omits
    let r = call_json(
        &c,
        "PATCH",
        &format!("{FLEET_PATH}/f1/scale"),
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/spec/replicas", "value": 0}]),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["spec"], json!({}));
    assert_eq!(get_fleet(&c, "f1").await["spec"]["replicas"], 0);
}

#[tokio::test]
async fn scale_writes_are_validated() {
    let (_sim, c) = start_with_fleets().await;
    create_fleet(&c, "f1", json!({"replicas": 2})).await;
    let path = format!("{FLEET_PATH}/f1/scale");
    let negative = call_json(
        &c,
        "PATCH",
        &path,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": -1}}),
    )
    .await;
    assert_eq!(negative.code, 422);
    assert_eq!(
        negative.body["message"],
        "Fleet.example.com \"f1\" is invalid: .spec.replicas: Invalid value: -1: should be a non-negative integer"
    );
    // the same rule on the main resource
    let main = call_json(
        &c,
        "PATCH",
        &format!("{FLEET_PATH}/f1"),
        "application/merge-patch+json",
        &json!({"spec": {"replicas": -3}}),
    )
    .await;
    assert_eq!(main.code, 422);

    let wrong_type = call_json(
        &c,
        "PATCH",
        &path,
        "application/merge-patch+json",
        &json!({"spec": {"replicas": "three"}}),
    )
    .await;
    assert_eq!(wrong_type.code, 422);
    assert_eq!(wrong_type.body["details"]["causes"][0]["field"], "patch");

    let smp = call_json(
        &c,
        "PATCH",
        &path,
        "application/strategic-merge-patch+json",
        &json!({"spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(smp.code, 415);

    let wrong_kind = call_json(
        &c,
        "PUT",
        &path,
        "application/json",
        &json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f1"}, "spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(wrong_kind.code, 400);
    assert_eq!(
        wrong_kind.body["message"],
        "the API version in the data (example.com/v1) does not match the expected API version (autoscaling/v1)"
    );
    let wrong_name = call_json(
        &c,
        "PUT",
        &path,
        "application/json",
        &json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "f2"}, "spec": {"replicas": 3}}),
    )
    .await;
    assert_eq!(wrong_name.code, 400);

    // a resource without spec replicas must get a value from the patch
    create_fleet(&c, "f2", json!({"template": "t"})).await;
    let empty = call_json(
        &c,
        "PATCH",
        &format!("{FLEET_PATH}/f2/scale"),
        "application/merge-patch+json",
        &json!({"metadata": {"labels": {"a": "b"}}}),
    )
    .await;
    assert_eq!(empty.code, 400);
    assert_eq!(
        empty.body["message"],
        "the spec replicas field \".spec.replicas\" cannot be empty"
    );
    assert_eq!(get_fleet(&c, "f1").await["spec"]["replicas"], 2);
}

#[tokio::test]
async fn server_side_apply_of_a_scale_conflicts_with_other_owners() {
    let (_sim, c) = start_with_fleets().await;
    let api = fleets(&c);
    api.patch(
        "f1",
        &PatchParams::apply("deployer"),
        &Patch::Apply(json!({"apiVersion": "example.com/v1", "kind": "Fleet", "metadata": {"name": "f1"}, "spec": {"replicas": 1, "template": "t"}})),
    )
    .await
    .unwrap();
    let scale = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "f1"}, "spec": {"replicas": 4}});
    match api
        .patch_scale(
            "f1",
            &PatchParams::apply("autoscaler"),
            &Patch::Apply(&scale),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 409);
            assert_eq!(
                e.message,
                "Apply failed with 1 conflict: conflict with \"deployer\": .spec.replicas"
            );
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let s = api
        .patch_scale(
            "f1",
            &PatchParams::apply("autoscaler").force(),
            &Patch::Apply(&scale),
        )
        .await
        .unwrap();
    assert_eq!(s.spec.unwrap().replicas, Some(4));
    let got = get_fleet(&c, "f1").await;
    assert_eq!(got["spec"], json!({"replicas": 4, "template": "t"}));
    let mut entries = manager_entries(&got);
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        entries
            .iter()
            .map(|e| (e.0.as_str(), e.1.as_str(), e.2.as_str(), e.3.clone()))
            .collect::<Vec<_>>(),
        vec![
            (
                "autoscaler",
                "Apply",
                "scale",
                json!({"f:spec": {"f:replicas": {}}})
            ),
            (
                "deployer",
                "Apply",
                "",
                json!({"f:spec": {"f:template": {}}})
            ),
        ]
    );
}
