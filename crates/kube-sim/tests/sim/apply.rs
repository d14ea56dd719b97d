//! Server-side apply: managed fields, conflicts, force, removal of fields a manager stops
//! applying, apply on `/status`.

use crate::common::*;
use kube::api::{Patch, PatchParams};
use serde_json::{Value, json};

const W1: &str = "/apis/example.com/v1/namespaces/default/widgets/w1";

async fn apply(c: &kube::Client, path: &str, manager: &str, force: bool, body: &Value) -> Reply {
    let mut q = format!("{path}?fieldManager={manager}");
    if force {
        q.push_str("&force=true");
    }
    call_json(c, "PATCH", &q, "application/apply-patch+yaml", body).await
}

fn entry<'a>(obj: &'a Value, manager: &str, op: &str) -> &'a Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["manager"] == manager && e["operation"] == op)
        .unwrap_or_else(|| panic!("no {manager}/{op} entry in {obj}"))
}

#[tokio::test]
async fn apply_creates_then_conflicts_then_forces() {
    let (_sim, c) = start().await;
    let cfg = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "labels": {"a": "1"}}, "spec": {"size": 2, "tags": ["x"]}});
    let r = apply(&c, W1, "alice", false, &cfg).await;
    assert_eq!(r.code, 201);
    assert_eq!(
        r.body["spec"],
        json!({"size": 2, "tags": ["x"], "color": "red"})
    );
    assert_eq!(
        entry(&r.body, "alice", "Apply")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:size": {}, "f:tags": {"v:\"x\"": {}}}})
    );

    // bob applies the same size: shared ownership, no conflict
    let bob = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 2, "tags": ["y"]}});
    let r = apply(&c, W1, "bob", false, &bob).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["spec"]["tags"], json!(["x", "y"]));

    // bob changes size: conflict with alice
    let bob2 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}});
    let before = call(&c, "GET", W1, None, None).await;
    let r = apply(&c, W1, "bob", false, &bob2).await;
    assert_eq!(r.code, 409);
    assert_eq!(r.body["reason"], "Conflict");
    assert_eq!(
        r.body["message"],
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.size"
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": "conflict with \"alice\"", "field": ".spec.size"}])
    );
    assert_eq!(call(&c, "GET", W1, None, None).await.body, before.body);

    // with force bob takes the field, alice loses it
    let r = apply(&c, W1, "bob", true, &bob2).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["spec"]["size"], 3);
    assert_eq!(
        entry(&r.body, "alice", "Apply")["fieldsV1"],
        json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:tags": {"v:\"x\"": {}}}})
    );
    // bob no longer applies tags[y]: it is removed
    assert_eq!(r.body["spec"]["tags"], json!(["x"]));
}

#[tokio::test]
async fn update_managers_conflict_with_appliers_and_fields_no_longer_applied_are_removed() {
    let (_sim, c) = start().await;
    let cfg = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 2, "name": "abc", "zone": "z1"}});
    assert_eq!(apply(&c, W1, "alice", false, &cfg).await.code, 201);
    // a controller changes size with a merge patch (Update operation)
    let api = widgets(&c, "default");
    api.patch(
        "w1",
        &PatchParams {
            field_manager: Some("ctl".into()),
            ..PatchParams::default()
        },
        &Patch::Merge(json!({"spec": {"size": 5}})),
    )
    .await
    .unwrap();
    // alice re-applies her size: conflict with the updater
    let r = apply(&c, W1, "alice", false, &cfg).await;
    assert_eq!(r.code, 409);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("conflict with \"ctl\" using example.com/v1: .spec.size")
    );
    // alice stops applying name (and gives up size): name is removed, size stays
    let cfg2 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"zone": "z1"}});
    let r = apply(&c, W1, "alice", false, &cfg2).await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.body["spec"],
        json!({"size": 5, "zone": "z1", "color": "red"})
    );
    // a no-op apply does not write
    let r2 = apply(&c, W1, "alice", false, &cfg2).await;
    assert_eq!(rv(&r2.body), rv(&r.body));
}

#[tokio::test]
async fn apply_on_status_and_requirements() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let api = widgets(&c, "default");
    let status = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
                        "spec": {"size": 9}, "status": {"phase": "Ready", "conditions": [{"type": "Ready", "status": "True"}]}});
    let out = api
        .patch_status(
            "w1",
            &PatchParams::apply("widget-controller"),
            &Patch::Apply(&status),
        )
        .await
        .unwrap();
    assert_eq!(out.data["status"]["phase"], "Ready");
    assert_eq!(out.data["spec"]["size"], 1);
    let v = serde_json::to_value(&out).unwrap();
    let e = entry(&v, "widget-controller", "Apply");
    assert_eq!(e["subresource"], "status");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:status": {"f:phase": {}, "f:conditions": {"k:{\"type\":\"Ready\"}": {".": {}, "f:type": {}, "f:status": {}}}}})
    );
    // apply on the main resource ignores status
    let main = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1}, "status": {"phase": "Forged"}});
    let r = apply(&c, W1, "alice", false, &main).await;
    assert_eq!(r.body["status"]["phase"], "Ready");

    // fieldManager is required
    let r = call_json(&c, "PATCH", W1, "application/apply-patch+yaml", &main).await;
    assert_eq!(r.code, 400);
    // YAML bodies work
    let yaml =
        "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w2\nspec:\n  size: 3\n";
    let r = call(
        &c,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/w2?fieldManager=y",
        Some("application/apply-patch+yaml"),
        Some(yaml.as_bytes().to_vec()),
    )
    .await;
    assert_eq!(r.code, 201);
    assert_eq!(r.body["spec"]["size"], 3);
    // apply on /status of a missing object
    let mut nope = status.clone();
    nope["metadata"]["name"] = json!("nope");
    let r = call_json(
        &c,
        "PATCH",
        "/apis/example.com/v1/namespaces/default/widgets/nope/status?fieldManager=x",
        "application/apply-patch+yaml",
        &nope,
    )
    .await;
    assert_eq!(r.code, 404);
    // creating through apply needs the name in the configuration
    let nameless = json!({"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1}});
    let r = apply(
        &c,
        "/apis/example.com/v1/namespaces/default/widgets/w3",
        "x",
        false,
        &nameless,
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(r.body["details"]["causes"][0]["field"], "metadata.name");
    // name mismatch
    let r = apply(
        &c,
        "/apis/example.com/v1/namespaces/default/widgets/other",
        "x",
        false,
        &main,
    )
    .await;
    assert_eq!(r.code, 400);
    // managedFields in the body
    let mut bad = main.clone();
    bad["metadata"]["managedFields"] = json!([]);
    assert_eq!(apply(&c, W1, "x", false, &bad).await.code, 400);
}

#[tokio::test]
async fn list_map_items_are_owned_by_key() {
    let (_sim, c) = start().await;
    let a = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 1, "ports": [{"name": "http", "port": 80}]}});
    assert_eq!(apply(&c, W1, "alice", false, &a).await.code, 201);
    let b = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"ports": [{"name": "metrics", "port": 9090}]}});
    let r = apply(&c, W1, "bob", false, &b).await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.body["spec"]["ports"],
        json!([{"name": "http", "port": 80}, {"name": "metrics", "port": 9090}])
    );
    let b2 = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"ports": [{"name": "http", "port": 81}]}});
    let r = apply(&c, W1, "bob", false, &b2).await;
    assert_eq!(r.code, 409);
    assert_eq!(
        r.body["details"]["causes"][0]["field"],
        ".spec.ports[name=\"http\"].port"
    );
}

/// A kind whose status holds CAPI-style failure domains: a list-map keyed by `name` whose
/// items carry a nested string map (as ProxmoxCluster's `status.failureDomains`).
const SITES: &str = r#"
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: sites.infra.example.com
spec:
  group: infra.example.com
  scope: Namespaced
  names: {plural: sites, singular: site, kind: Site}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            x-kubernetes-preserve-unknown-fields: true
          status:
            type: object
            properties:
              failureDomains:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string, minLength: 1}
                    controlPlane: {type: boolean}
                    attributes:
                      type: object
                      additionalProperties: {type: string}
"#;

const S1: &str = "/apis/infra.example.com/v1/namespaces/default/sites/s1";

/// Starts a server with the Site CRD and a Site `s1` in `default`.
async fn start_with_site() -> (kube_sim::KubeSim, kube::Client) {
    let (sim, c) = start().await;
    sim.install_crd_yaml(SITES).unwrap();
    let site = json!({"apiVersion": "infra.example.com/v1", "kind": "Site", "metadata": {"name": "s1"}, "spec": {}});
    let r = call_json(
        &c,
        "POST",
        "/apis/infra.example.com/v1/namespaces/default/sites",
        "application/json",
        &site,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    (sim, c)
}

/// A status-only apply body for Site `s1` with failure domains named `names`, each with
/// `attributes: {zone: <name>}`.
fn site_status(names: &[&str]) -> Value {
    let fds: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "attributes": {"zone": n}}))
        .collect();
    json!({"apiVersion": "infra.example.com/v1", "kind": "Site", "metadata": {"name": "s1"},
           "status": {"failureDomains": fds}})
}

fn fd_names(obj: &Value) -> Vec<String> {
    obj["status"]["failureDomains"]
        .as_array()
        .unwrap_or_else(|| panic!("no failure domains in {obj}"))
        .iter()
        .map(|fd| fd["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn a_list_map_item_the_applier_drops_is_removed_whole() {
    let (_sim, c) = start_with_site().await;
    let status = format!("{S1}/status");
    let r = apply(
        &c,
        &status,
        "capmox-controller",
        true,
        &site_status(&["a", "b"]),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(fd_names(&r.body), ["a", "b"]);

    // kube-apiserver removes item b with everything in it (its `attributes` included):
    // the manager owned the item and no longer applies it
    let r = apply(&c, &status, "capmox-controller", true, &site_status(&["a"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["status"],
        json!({"failureDomains": [{"name": "a", "attributes": {"zone": "a"}}]})
    );
    assert_eq!(
        entry(&r.body, "capmox-controller", "Apply")["fieldsV1"],
        json!({"f:status": {"f:failureDomains": {"k:{\"name\":\"a\"}": {
            ".": {}, "f:name": {}, "f:attributes": {"f:zone": {}}}}}})
    );

    // dropping every item removes the list (nothing else owns anything in it)
    let empty = json!({"apiVersion": "infra.example.com/v1", "kind": "Site", "metadata": {"name": "s1"}, "status": {}});
    let r = apply(&c, &status, "capmox-controller", true, &empty).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(r.body["status"].get("failureDomains"), None, "{}", r.body);
}

#[tokio::test]
async fn a_dropped_item_another_manager_owns_part_of_stays() {
    let (_sim, c) = start_with_site().await;
    let status = format!("{S1}/status");
    let r = apply(&c, &status, "ctl", true, &site_status(&["a", "b"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    // another applier also sets an attribute of b
    let other = json!({"apiVersion": "infra.example.com/v1", "kind": "Site", "metadata": {"name": "s1"},
                       "status": {"failureDomains": [{"name": "b", "attributes": {"rack": "r1"}}]}});
    assert_eq!(apply(&c, &status, "ops", true, &other).await.code, 200);
    // ctl drops b: what only ctl owned goes, what ops owns stays
    let r = apply(&c, &status, "ctl", true, &site_status(&["a"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(
        r.body["status"]["failureDomains"],
        json!([{"name": "a", "attributes": {"zone": "a"}}, {"name": "b", "attributes": {"rack": "r1"}}])
    );
}

#[tokio::test]
async fn list_map_items_take_the_order_the_applier_gives() {
    let (_sim, c) = start_with_site().await;
    let status = format!("{S1}/status");
    let r = apply(&c, &status, "ctl", true, &site_status(&["a", "b", "c"])).await;
    assert_eq!(fd_names(&r.body), ["a", "b", "c"]);
    // a new order of the same items is kept
    let r = apply(&c, &status, "ctl", true, &site_status(&["c", "b", "a"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(fd_names(&r.body), ["c", "b", "a"]);
    let r = apply(&c, &status, "ctl", true, &site_status(&["a", "c"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(fd_names(&r.body), ["a", "c"]);
    // a re-added item goes where the applier puts it, not at the end
    let r = apply(&c, &status, "ctl", true, &site_status(&["a", "b", "c"])).await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(fd_names(&r.body), ["a", "b", "c"]);
    // a configuration repeating a key is refused
    let r = apply(&c, &status, "ctl", true, &site_status(&["a", "a"])).await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "FieldValueDuplicate"
    );
}
