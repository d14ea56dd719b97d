//! Which fields must not change on update, and the refusal that says why
//! and what to do instead. Compared on the JSON of the specs after the
//! defaults of [`super::decide::defaults`] (an explicit default equals an
//! absent field); a refusal names every differing leaf path.
//!
//! | kind | immutable | why |
//! |---|---|---|
//! | ProxmoxMachineTemplate | the whole `spec` | CAPI rolls machines by pointing at a new template (contract v1beta2, InfraMachineTemplate); **except** in the ClusterClass topology controller's dry-run (a dry-run request whose object carries `topology.cluster.x-k8s.io/dry-run`): it computes its diff with a dry-run server-side apply and must not be refused |
//! | ProxmoxMachine | `instance`, `virtualMachineID`, `providerID` once set (unset → set is allowed: the controller records them); `virtualMachineID` may be cleared while the machine is not provisioned (the controller gives up a VMID it found taken by a VM that is not ours and reserves another) | the VM is found, deleted and matched to its Node by them |
//! | ProxmoxMachine | every other field except `checks` once `virtualMachineID` is set | the controller applies them when it creates the VM, never afterwards; a change would never reach the VM |
//! | ProxmoxCluster | `controlPlaneEndpoint` once set | CAPI copied it to the Cluster and the control plane's certificates name it |
//! | ProxmoxCluster | `providerIDFormat` | existing machines' providerIDs were written in the old format, and CAPI matches Nodes by them |
//! | ProxmoxCluster | an instance's `pool` (set, changed or removed) | its VMs were cloned into that pool; moving a VM between pools needs Proxmox's `allow-move`, which this provider never does (docs/field-cases.md B34) — the machine's own `pool` is fixed with its other fields once its VMID is set |
//!
//! ProxmoxClusterTemplate has no immutable field here (CAPI never rewrites a
//! ClusterClass's templates; a changed one only affects clusters created
//! afterwards).

use serde_json::Value;

use crate::api::validation::FieldError;

/// The annotation CAPI's topology controller puts on the objects of its
/// dry-run server-side applies (`topology.cluster.x-k8s.io/dry-run`).
pub const TOPOLOGY_DRY_RUN_ANNOTATION: &str = "topology.cluster.x-k8s.io/dry-run";

/// Whether a request is CAPI's topology dry-run: `dryRun` set and the
/// object carrying [`TOPOLOGY_DRY_RUN_ANNOTATION`] (CAPI's
/// `topology.IsDryRunRequest`). A plain `kubectl apply --dry-run=server` is
/// not one.
pub fn is_topology_dry_run(dry_run: bool, object: &Value) -> bool {
    dry_run
        && object
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| a.contains_key(TOPOLOGY_DRY_RUN_ANNOTATION))
}

/// The dotted paths (`spec.network.networkDevices[0].vlan`) where `old` and
/// `new` differ: objects are compared key by key, lists of equal length
/// item by item, anything else as a whole.
pub fn diff_paths(path: &str, old: Option<&Value>, new: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    diff_into(path, old, new, &mut out);
    out
}

fn diff_into(path: &str, old: Option<&Value>, new: Option<&Value>, out: &mut Vec<String>) {
    if old == new {
        return;
    }
    match (old, new) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                diff_into(&format!("{path}.{k}"), a.get(k), b.get(k), out);
            }
        }
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff_into(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

/// The first field name after `spec.` in a path (`spec.network.x` → `network`).
fn top_field(path: &str) -> &str {
    let rest = path.strip_prefix("spec.").unwrap_or(path);
    let end = rest.find(['.', '[']).unwrap_or(rest.len());
    &rest[..end]
}

/// ProxmoxMachineTemplate: the spec must not change, except in the topology
/// dry-run (the caller checks [`is_topology_dry_run`]).
pub fn machine_template(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    diff_paths("spec", Some(old_spec), Some(new_spec))
        .into_iter()
        .map(|p| {
            FieldError::new(
                p,
                "ProxmoxMachineTemplate spec is immutable: create a new ProxmoxMachineTemplate with this change and point the MachineDeployment, KubeadmControlPlane or ClusterClass at it (CAPI then replaces the machines)",
            )
        })
        .collect()
}

/// Fields of a ProxmoxMachine that may go from unset to set (the controller
/// records them) but never change afterwards, and why.
const SET_ONCE: [(&str, &str); 3] = [
    (
        "instance",
        "the VM lives in that instance; to move the machine, delete it and CAPI creates a replacement",
    ),
    (
        "virtualMachineID",
        "the controller records the VMID before it creates the VM and finds and deletes the VM by it",
    ),
    (
        "providerID",
        "CAPI matches the Node by it (contract v1beta2, InfraMachine spec.providerID)",
    ),
];

/// Fields of a ProxmoxMachine that may change after the VM exists: the
/// controller reads them on every reconcile.
const MUTABLE_AFTER_PROVISIONING: [&str; 1] = ["checks"];

/// ProxmoxMachine: [`SET_ONCE`] fields never change once set; once
/// `spec.virtualMachineID` is set (the clone may have been issued) every
/// other field except [`MUTABLE_AFTER_PROVISIONING`] is fixed. One
/// exception: while the machine is not `provisioned`, `virtualMachineID`
/// may be cleared (set → unset) — the controller gives up a VMID that a VM
/// that is not ours took before its clone, and an operator clears a VMID
/// that cannot be the machine's (`InvalidVMID`) so another is reserved.
pub fn machine(old_spec: &Value, new_spec: &Value, provisioned: bool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let vmid = old_spec.get("virtualMachineID").filter(|v| !v.is_null());
    let mut reported_set_once = Vec::new();
    for p in diff_paths("spec", Some(old_spec), Some(new_spec)) {
        let top = top_field(&p).to_string();
        if let Some((_, why)) = SET_ONCE.iter().find(|(f, _)| *f == top) {
            let cleared = new_spec.get(&top).is_none_or(Value::is_null);
            if top == "virtualMachineID" && cleared && !provisioned {
                continue;
            }
            let was = old_spec.get(&top).filter(|v| !v.is_null());
            if let Some(was) = was
                && !reported_set_once.contains(&top)
            {
                errs.push(FieldError::new(
                    format!("spec.{top}"),
                    format!("is immutable once set (it is {was}): {why}"),
                ));
                reported_set_once.push(top);
            }
            continue;
        }
        if let Some(id) = vmid
            && !MUTABLE_AFTER_PROVISIONING.contains(&top.as_str())
        {
            errs.push(FieldError::new(
                p,
                format!(
                    "cannot change once the VM exists (spec.virtualMachineID is {id}): the controller applies it only when it creates the VM; change the ProxmoxMachineTemplate instead (CAPI replaces the machine) or delete this ProxmoxMachine"
                ),
            ));
        }
    }
    errs
}

/// ProxmoxCluster: `controlPlaneEndpoint` once set, and `providerIDFormat`.
pub fn cluster(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if let Some(was) = old_spec
        .get("controlPlaneEndpoint")
        .filter(|v| !v.is_null())
    {
        for p in diff_paths(
            "spec.controlPlaneEndpoint",
            Some(was),
            new_spec.get("controlPlaneEndpoint"),
        ) {
            errs.push(FieldError::new(
                p,
                "is immutable once set: CAPI copied the endpoint to the Cluster and the control plane's certificates name it; create a new cluster for another endpoint",
            ));
        }
    }
    for p in diff_paths(
        "spec.providerIDFormat",
        old_spec.get("providerIDFormat"),
        new_spec.get("providerIDFormat"),
    ) {
        errs.push(FieldError::new(
            p,
            "is immutable: the providerIDs of existing machines were written in this format and CAPI matches Nodes by them",
        ));
    }
    errs.extend(instance_pools(old_spec, new_spec));
    errs
}

/// `settings.instances[].pool` of an instance kept by name must not change.
fn instance_pools(old_spec: &Value, new_spec: &Value) -> Vec<FieldError> {
    let list = |s: &Value| -> Vec<Value> {
        s.pointer("/settings/instances")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let (old, new) = (list(old_spec), list(new_spec));
    let mut errs = Vec::new();
    for (i, n) in new.iter().enumerate() {
        let Some(o) = old.iter().find(|o| o.get("name") == n.get("name")) else {
            continue;
        };
        let (was, is) = (o.get("pool"), n.get("pool"));
        if was.filter(|v| !v.is_null()) != is.filter(|v| !v.is_null()) {
            errs.push(FieldError::new(
                format!("spec.settings.instances[{i}].pool"),
                format!(
                    "is immutable (it is {}): the VMs of this instance were cloned into that pool, and this provider never moves a VM between pools (Proxmox's allow-move); list another instance for the same Proxmox cluster with the new pool and replace the machines",
                    was.filter(|v| !v.is_null()).map_or("unset".to_string(), Value::to_string)
                ),
            ));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diff_names_leaves() {
        let a = json!({"a": 1, "l": [1, 2], "m": {"x": 1, "y": 2}, "gone": true});
        let b = json!({"a": 1, "l": [1, 3], "m": {"x": 1, "y": 3, "z": 0}, "new": 1});
        assert_eq!(
            diff_paths("spec", Some(&a), Some(&b)),
            ["spec.gone", "spec.l[1]", "spec.m.y", "spec.m.z", "spec.new"]
        );
        // Lists of another length are named whole.
        let c = json!({"l": [1]});
        assert_eq!(
            diff_paths("spec", Some(&json!({"l": [1, 2]})), Some(&c)),
            ["spec.l"]
        );
        assert!(diff_paths("spec", Some(&a), Some(&a)).is_empty());
    }

    /// docs/field-cases.md B34: an instance's pool is fixed; a new instance
    /// may name any; the machine's pool is fixed with its VMID.
    #[test]
    fn pools_do_not_change() {
        let spec = |pool: Option<&str>| {
            let mut i = json!({"name": "dc-a"});
            if let Some(p) = pool {
                i["pool"] = json!(p);
            }
            json!({"settings": {"instances": [{"name": "dc-x"}, i]}})
        };
        assert!(cluster(&spec(Some("k8s")), &spec(Some("k8s"))).is_empty());
        for (from, to) in [
            (Some("k8s"), Some("k8s-2")),
            (Some("k8s"), None),
            (None, Some("k8s")),
        ] {
            let errs = cluster(&spec(from), &spec(to));
            assert_eq!(errs.len(), 1, "{from:?} → {to:?}");
            assert_eq!(errs[0].path, "spec.settings.instances[1].pool");
        }
        let added = json!({"settings": {"instances": [{"name": "dc-a", "pool": "k8s"}, {"name": "dc-b", "pool": "p"}]}});
        assert!(cluster(&spec(Some("k8s")).clone(), &json!({"settings": {"instances": [{"name": "dc-x"}, {"name": "dc-a", "pool": "k8s"}, {"name": "dc-b", "pool": "p"}]}})).is_empty());
        assert!(cluster(&json!({}), &added).is_empty());
        let m = json!({"pool": "k8s", "virtualMachineID": 1000});
        let mut moved = m.clone();
        moved["pool"] = json!("other");
        assert_eq!(machine(&m, &moved, false)[0].path, "spec.pool");
    }

    #[test]
    fn topology_dry_run_needs_both_the_flag_and_the_annotation() {
        let annotated = json!({"metadata": {"annotations": {TOPOLOGY_DRY_RUN_ANNOTATION: ""}}});
        let plain = json!({"metadata": {"name": "t"}});
        assert!(is_topology_dry_run(true, &annotated));
        assert!(!is_topology_dry_run(false, &annotated));
        assert!(!is_topology_dry_run(true, &plain));
    }

    #[test]
    fn machine_set_once_fields_may_be_recorded_but_not_changed() {
        let before = json!({"full": true});
        let recorded = json!({"full": true, "instance": "dc-a"});
        assert!(machine(&before, &recorded, false).is_empty(), "unset → set");
        let moved = json!({"full": true, "instance": "dc-b"});
        let errs = machine(&recorded, &moved, false);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec.instance");
        assert!(errs[0].message.contains("\"dc-a\""), "{}", errs[0].message);
        let cleared = json!({"full": true});
        assert_eq!(machine(&recorded, &cleared, false)[0].path, "spec.instance");
        // A VMID may be given up before the machine is provisioned, not after.
        let reserved = json!({"full": true, "virtualMachineID": 1000});
        let given_up = json!({"full": true});
        assert!(machine(&reserved, &given_up, false).is_empty());
        assert_eq!(
            machine(&reserved, &given_up, true)[0].path,
            "spec.virtualMachineID"
        );
        let other = json!({"full": true, "virtualMachineID": 1001});
        assert_eq!(
            machine(&reserved, &other, false)[0].path,
            "spec.virtualMachineID"
        );
    }

    #[test]
    fn machine_fields_are_fixed_once_the_vmid_is_recorded() {
        let waiting = json!({"full": true, "numCores": 2});
        let more = json!({"full": true, "numCores": 4});
        assert!(machine(&waiting, &more, false).is_empty(), "no VM yet");
        let cloned = json!({"full": true, "numCores": 2, "virtualMachineID": 1000,
                            "network": {"networkDevices": [{"name": "net0", "vlan": 10}]}});
        let mut changed = cloned.clone();
        changed["numCores"] = json!(4);
        changed["network"]["networkDevices"][0]["vlan"] = json!(20);
        changed["checks"] = json!({"skipCloudInitStatus": true});
        changed["providerID"] = json!("proxmox://x");
        let paths: Vec<String> = machine(&cloned, &changed, false)
            .into_iter()
            .map(|e| e.path)
            .collect();
        assert_eq!(
            paths,
            ["spec.network.networkDevices[0].vlan", "spec.numCores"],
            "checks may change, providerID may be recorded"
        );
    }

    #[test]
    fn cluster_endpoint_once_set_and_provider_id_format() {
        let old = json!({"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
                         "providerIDFormat": "UUID"});
        let mut new = old.clone();
        new["controlPlaneEndpoint"]["port"] = json!(443);
        new["providerIDFormat"] = json!("InstanceVMID");
        let paths: Vec<String> = cluster(&old, &new).into_iter().map(|e| e.path).collect();
        assert_eq!(
            paths,
            ["spec.controlPlaneEndpoint.port", "spec.providerIDFormat"]
        );
        let unset = json!({"externalManagedControlPlane": true, "providerIDFormat": "UUID"});
        let mut set = unset.clone();
        set["controlPlaneEndpoint"] = json!({"host": "a", "port": 6443});
        assert!(cluster(&unset, &set).is_empty(), "unset → set is allowed");
    }

    #[test]
    fn template_changes_are_named() {
        let old = json!({"template": {"spec": {"numCores": 2}}});
        let new = json!({"template": {"spec": {"numCores": 4}}});
        let errs = machine_template(&old, &new);
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].path, "spec.template.spec.numCores");
        assert!(
            errs[0]
                .message
                .contains("create a new ProxmoxMachineTemplate")
        );
    }
}
