//! Admission decisions on JSON objects as the API server sends them.

use kube::core::admission::Operation;
use serde_json::{Value, json};

use super::*;

const AV: &str = "infrastructure.cluster.x-k8s.io/v1alpha3";

fn obj(kind: &str, spec: Value) -> Value {
    json!({"apiVersion": AV, "kind": kind,
           "metadata": {"name": "x", "namespace": "ns", "labels": {CLUSTER_NAME_LABEL: "wl"}},
           "spec": spec})
}

fn cluster_spec() -> Value {
    json!({
        "controlPlaneEndpoint": {"host": "10.10.0.5", "port": 6443},
        "settings": {
            "mode": "MultiInstance",
            "instances": [
                {"name": "dc-a", "credentialsRef": {"name": "dc-a-creds"},
                 "template": {"templateSelector": {"matchTags": ["capmox"]}}},
                {"name": "dc-b", "credentialsRef": {"name": "dc-b-creds"},
                 "template": {"sourceNode": "pve-b1", "templateID": 9100}}
            ]
        }
    })
}

fn machine_spec() -> Value {
    json!({
        "numSockets": 1, "numCores": 2, "memoryMiB": 4096,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "vlan": 10}]}
    })
}

fn template(spec: Value) -> Value {
    json!({"template": {"spec": spec}})
}

fn create<'a>(kind: Kind, object: &'a Value) -> Request<'a> {
    Request {
        kind,
        operation: &Operation::Create,
        object: Some(object),
        old_object: None,
        dry_run: false,
    }
}

fn update<'a>(kind: Kind, old: &'a Value, new: &'a Value, dry_run: bool) -> Request<'a> {
    Request {
        kind,
        operation: &Operation::Update,
        object: Some(new),
        old_object: Some(old),
        dry_run,
    }
}

fn paths(v: &Verdict, reason: Reason) -> Vec<String> {
    v.problems
        .iter()
        .filter(|p| p.reason == reason)
        .map(|p| p.error.path.clone())
        .collect()
}

fn patch_json(p: &Patch) -> Value {
    serde_json::to_value(p).unwrap()
}

#[test]
fn cluster_defaults_are_added_only_where_absent() {
    let pc = obj("ProxmoxCluster", cluster_spec());
    let mut no_mode = pc.clone();
    no_mode["spec"]["settings"]
        .as_object_mut()
        .unwrap()
        .remove("mode");
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxCluster, &no_mode)),
        json!([
            {"op": "add", "path": "/spec/providerIDFormat", "value": "UUID"},
            {"op": "add", "path": "/spec/settings/mode", "value": "Default"}
        ])
    );
    let mut explicit = pc.clone();
    explicit["spec"]["providerIDFormat"] = json!("InstanceVMID");
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxCluster, &explicit)),
        json!([])
    );
    // No `settings`: none is made up.
    let legacy = obj(
        "ProxmoxCluster",
        json!({"controlPlaneEndpoint": {"host": "a", "port": 6443}}),
    );
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxCluster, &legacy)),
        json!([{"op": "add", "path": "/spec/providerIDFormat", "value": "UUID"}])
    );
    let t = obj("ProxmoxClusterTemplate", template(json!({})));
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxClusterTemplate, &t)),
        json!([{"op": "add", "path": "/spec/template/spec/providerIDFormat", "value": "UUID"}])
    );
}

#[test]
fn machine_defaults_make_the_clone_kind_explicit() {
    let m = obj("ProxmoxMachine", machine_spec());
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxMachine, &m)),
        json!([{"op": "add", "path": "/spec/full", "value": true}])
    );
    let mut linked = m.clone();
    linked["spec"]["full"] = json!(false);
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxMachine, &linked)),
        json!([])
    );
    let t = obj("ProxmoxMachineTemplate", template(machine_spec()));
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxMachineTemplate, &t)),
        json!([{"op": "add", "path": "/spec/template/spec/full", "value": true}])
    );
    // Without a spec there is nothing to default.
    let bare = json!({"apiVersion": AV, "kind": "ProxmoxMachine", "metadata": {"name": "x"}});
    assert_eq!(
        patch_json(&defaults(Kind::ProxmoxMachine, &bare)),
        json!([])
    );
    assert_eq!(defaulted_spec(Kind::ProxmoxMachine, &m)["full"], true);
    assert_eq!(
        defaulted_spec(Kind::ProxmoxMachineTemplate, &t)["template"]["spec"]["full"],
        true
    );
    assert_eq!(defaulted_spec(Kind::ProxmoxMachine, &bare), Value::Null);
}

#[test]
fn valid_objects_are_allowed() {
    for (kind, o) in [
        (Kind::ProxmoxCluster, obj("ProxmoxCluster", cluster_spec())),
        (
            Kind::ProxmoxClusterTemplate,
            obj("ProxmoxClusterTemplate", template(cluster_spec())),
        ),
        (Kind::ProxmoxMachine, obj("ProxmoxMachine", machine_spec())),
        (
            Kind::ProxmoxMachineTemplate,
            obj("ProxmoxMachineTemplate", template(machine_spec())),
        ),
    ] {
        let v = validate(&create(kind, &o), None).unwrap();
        assert_eq!(v, Verdict::default(), "{kind:?}");
    }
}

#[test]
fn machine_problems_name_their_fields_in_machines_and_templates() {
    let mut spec = machine_spec();
    spec["network"]["networkDevices"][0]["vlan"] = json!(5000);
    spec["memoryMiB"] = json!(8);
    let m = obj("ProxmoxMachine", spec.clone());
    let v = validate(&create(Kind::ProxmoxMachine, &m), None).unwrap();
    let mut got = paths(&v, Reason::Invalid);
    got.sort();
    assert_eq!(
        got,
        ["spec.memoryMiB", "spec.network.networkDevices[0].vlan"]
    );
    let t = obj("ProxmoxMachineTemplate", template(spec));
    let v = validate(&create(Kind::ProxmoxMachineTemplate, &t), None).unwrap();
    let mut got = paths(&v, Reason::Invalid);
    got.sort();
    assert_eq!(
        got,
        [
            "spec.template.spec.memoryMiB",
            "spec.template.spec.network.networkDevices[0].vlan"
        ]
    );
}

#[test]
fn cluster_problems_and_warnings_name_their_fields() {
    let mut spec = cluster_spec();
    spec["settings"]["instances"][0]["name"] = json!("DC_A");
    spec["allowedNodes"] = json!(["pve1"]);
    let pc = obj("ProxmoxCluster", spec.clone());
    let v = validate(&create(Kind::ProxmoxCluster, &pc), None).unwrap();
    assert_eq!(
        paths(&v, Reason::Invalid),
        ["spec.settings.instances[0].name"]
    );
    assert_eq!(v.warnings.len(), 1);
    assert!(
        v.warnings[0].starts_with("spec.allowedNodes: "),
        "{:?}",
        v.warnings
    );
    let t = obj("ProxmoxClusterTemplate", template(spec));
    let v = validate(&create(Kind::ProxmoxClusterTemplate, &t), None).unwrap();
    assert_eq!(
        paths(&v, Reason::Invalid),
        ["spec.template.spec.settings.instances[0].name"]
    );
    assert!(v.warnings[0].starts_with("spec.template.spec.allowedNodes: "));
}

#[test]
fn machines_are_checked_against_their_cluster() {
    let cluster: ProxmoxClusterSpec = serde_json::from_value(cluster_spec()).unwrap();
    let mut spec = machine_spec();
    spec["instance"] = json!("dc-z");
    let m = obj("ProxmoxMachine", spec.clone());
    let r = create(Kind::ProxmoxMachine, &m);
    assert_eq!(cluster_to_read(&r).as_deref(), Some("wl"));
    let v = validate(&r, Some(&cluster)).unwrap();
    assert_eq!(paths(&v, Reason::Invalid), ["spec.instance"]);
    // Without the cluster the pin cannot be judged here.
    assert_eq!(validate(&r, None).unwrap(), Verdict::default());
    let t = obj("ProxmoxMachineTemplate", template(spec));
    let v = validate(&create(Kind::ProxmoxMachineTemplate, &t), Some(&cluster)).unwrap();
    assert_eq!(paths(&v, Reason::Invalid), ["spec.template.spec.instance"]);
}

#[test]
fn the_cluster_is_read_only_when_a_labelled_machine_spec_changes() {
    let m = obj("ProxmoxMachine", machine_spec());
    let mut relabelled = m.clone();
    relabelled["metadata"]["finalizers"] = json!(["x"]);
    assert_eq!(
        cluster_to_read(&update(Kind::ProxmoxMachine, &m, &relabelled, false)),
        None,
        "metadata only"
    );
    let mut changed = m.clone();
    changed["spec"]["instance"] = json!("dc-a");
    assert_eq!(
        cluster_to_read(&update(Kind::ProxmoxMachine, &m, &changed, false)).as_deref(),
        Some("wl")
    );
    let mut unlabelled = m.clone();
    unlabelled["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("labels");
    assert_eq!(
        cluster_to_read(&create(Kind::ProxmoxMachine, &unlabelled)),
        None
    );
    let pc = obj("ProxmoxCluster", cluster_spec());
    assert_eq!(cluster_to_read(&create(Kind::ProxmoxCluster, &pc)), None);
}

#[test]
fn an_unchanged_spec_is_not_judged_again() {
    // Written before the webhook existed: invalid, but its finalizer must go.
    let mut spec = machine_spec();
    spec["memoryMiB"] = json!(8);
    let old = obj("ProxmoxMachine", spec);
    let mut new = old.clone();
    new["metadata"]["finalizers"] = json!([]);
    let v = validate(&update(Kind::ProxmoxMachine, &old, &new, false), None).unwrap();
    assert_eq!(v, Verdict::default());
    // The defaulting webhook writes `full: true` into it on that update.
    new["spec"]["full"] = json!(true);
    let v = validate(&update(Kind::ProxmoxMachine, &old, &new, false), None).unwrap();
    assert_eq!(v, Verdict::default());
}

#[test]
fn machine_templates_are_immutable_except_in_the_topology_dry_run() {
    let old = obj("ProxmoxMachineTemplate", template(machine_spec()));
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["numCores"] = json!(4);
    let mut annotated = new.clone();
    annotated["metadata"]["annotations"] = json!({"topology.cluster.x-k8s.io/dry-run": ""});
    let k = Kind::ProxmoxMachineTemplate;
    // (1) CAPI's topology dry-run: allowed.
    let v = validate(&update(k, &old, &annotated, true), None).unwrap();
    assert_eq!(v, Verdict::default());
    // (2) `kubectl apply --dry-run=server`, no annotation: refused.
    let v = validate(&update(k, &old, &new, true), None).unwrap();
    assert_eq!(
        paths(&v, Reason::Forbidden),
        ["spec.template.spec.numCores"]
    );
    // (3) a real update, even annotated: refused with the field path.
    let v = validate(&update(k, &old, &annotated, false), None).unwrap();
    assert_eq!(
        paths(&v, Reason::Forbidden),
        ["spec.template.spec.numCores"]
    );
    // Writing a default down is no change.
    let mut explicit = old.clone();
    explicit["spec"]["template"]["spec"]["full"] = json!(true);
    let v = validate(&update(k, &old, &explicit, false), None).unwrap();
    assert_eq!(v, Verdict::default());
}

#[test]
fn provisioned_machines_keep_their_fields() {
    let mut spec = machine_spec();
    spec["instance"] = json!("dc-a");
    spec["virtualMachineID"] = json!(1000);
    let old = obj("ProxmoxMachine", spec);
    let mut new = old.clone();
    new["spec"]["instance"] = json!("dc-b");
    new["spec"]["numCores"] = json!(8);
    new["spec"]["providerID"] = json!("proxmox://abc");
    let v = validate(&update(Kind::ProxmoxMachine, &old, &new, false), None).unwrap();
    assert_eq!(
        paths(&v, Reason::Forbidden),
        ["spec.instance", "spec.numCores"]
    );
    assert!(v.problems.iter().all(|p| p.error.message.contains("once")));
}

#[test]
fn cluster_provider_id_format_may_be_written_down_but_not_changed() {
    let old = obj("ProxmoxCluster", cluster_spec());
    let mut explicit = old.clone();
    explicit["spec"]["providerIDFormat"] = json!("UUID");
    let v = validate(&update(Kind::ProxmoxCluster, &old, &explicit, false), None).unwrap();
    assert_eq!(v, Verdict::default());
    let mut changed = old.clone();
    changed["spec"]["providerIDFormat"] = json!("InstanceVMID");
    let v = validate(&update(Kind::ProxmoxCluster, &old, &changed, false), None).unwrap();
    assert_eq!(paths(&v, Reason::Forbidden), ["spec.providerIDFormat"]);
}

#[test]
fn objects_of_another_shape_are_unreadable() {
    let mut m = obj("ProxmoxMachine", machine_spec());
    m["spec"]["numCores"] = json!("many");
    let e = validate(&create(Kind::ProxmoxMachine, &m), None).unwrap_err();
    assert_eq!(e.kind, "ProxmoxMachine");
    assert!(e.to_string().contains("cannot read the ProxmoxMachine"));
}

#[test]
fn deletes_are_not_judged() {
    let m = obj("ProxmoxMachine", machine_spec());
    let r = Request {
        kind: Kind::ProxmoxMachine,
        operation: &Operation::Delete,
        object: None,
        old_object: Some(&m),
        dry_run: false,
    };
    assert_eq!(validate(&r, None).unwrap(), Verdict::default());
}
