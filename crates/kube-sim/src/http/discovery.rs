//! Legacy discovery documents: `/api` (APIVersions), `/apis` (APIGroupList),
//! `/apis/<group>` (APIGroup), `/api/v1` and `/apis/<group>/<version>` (APIResourceList).
//! Aggregated discovery is not offered; clients fall back to these, as they do with
//! servers that answer plain `application/json`.

use crate::resource::{Registry, ResourceType};
use serde_json::{Value, json};

const VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]
    })
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = vs.first().cloned().unwrap_or(json!({}));
    json!({"name": name, "versions": vs, "preferredVersion": preferred})
}

/// `/apis`.
pub fn groups(reg: &Registry) -> Value {
    let groups: Vec<Value> = reg
        .groups()
        .iter()
        .filter(|(g, _)| !g.is_empty())
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/<group>`; `None` for an unknown group.
pub fn group(reg: &Registry, name: &str) -> Option<Value> {
    let all = reg.groups();
    let vs = all.get(name).filter(|_| !name.is_empty())?;
    let mut doc = group_doc(name, vs);
    if let Some(m) = doc.as_object_mut() {
        m.insert("kind".into(), json!("APIGroup"));
        m.insert("apiVersion".into(), json!("v1"));
    }
    Some(doc)
}

fn resource_entries(rt: &ResourceType, version: &str) -> Vec<Value> {
    let Some(v) = rt.served_version(version) else {
        return Vec::new();
    };
    let mut main = json!({
        "name": rt.plural,
        "singularName": rt.singular,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": VERBS,
    });
    if !rt.short_names.is_empty() {
        main["shortNames"] = json!(rt.short_names);
    }
    if !rt.categories.is_empty() {
        main["categories"] = json!(rt.categories);
    }
    let mut out = vec![main];
    if v.status_subresource {
        out.push(json!({
            "name": format!("{}/status", rt.plural),
            "singularName": "",
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": ["get", "patch", "update"],
        }));
    }
    if v.scale.is_some() {
        // client-go's scale client reads the Scale's group and version from here
        out.push(json!({
            "name": format!("{}/scale", rt.plural),
            "singularName": "",
            "namespaced": rt.namespaced,
            "group": "autoscaling",
            "version": "v1",
            "kind": "Scale",
            "verbs": ["get", "patch", "update"],
        }));
    }
    out
}

/// `/api/v1` or `/apis/<group>/<version>`; `None` when nothing is served there.
pub fn resources(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut list = Vec::new();
    for rt in reg.all().filter(|rt| rt.group == group) {
        list.extend(resource_entries(rt, version));
    }
    if list.is_empty() {
        return None;
    }
    let gv = if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    };
    Some(json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": gv,
        "resources": list
    }))
}

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": "v1.33.0-kube-sim",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2025-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64"
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin;

    #[test]
    fn core_resource_list_has_namespaces_and_nodes_with_status() {
        let mut reg = Registry::default();
        for rt in builtin::all() {
            reg.insert(rt);
        }
        let doc = resources(&reg, "", "v1").expect("served");
        let names: Vec<&str> = doc["resources"]
            .as_array()
            .expect("list")
            .iter()
            .map(|r| r["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            names,
            vec![
                "configmaps",
                "events",
                "namespaces",
                "namespaces/status",
                "nodes",
                "nodes/status",
                "secrets"
            ]
        );
        let g = groups(&reg);
        let gnames: Vec<&str> = g["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .map(|x| x["name"].as_str().expect("name"))
            .collect();
        assert_eq!(
            gnames,
            vec![
                "admissionregistration.k8s.io",
                "apiextensions.k8s.io",
                "coordination.k8s.io",
                "events.k8s.io"
            ]
        );
        assert!(group(&reg, "nope.io").is_none());
    }
}
