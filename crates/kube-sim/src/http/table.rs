//! Server-side printing: `meta.k8s.io/v1` Table (CRD `additionalPrinterColumns`, the
//! built-in kinds' columns) and `PartialObjectMetadata` conversions.

use crate::clock::age;
use crate::jsonpath::JsonPath;
use crate::resource::{Builtin, ColumnSource, PrinterColumn, ResourceType, Version};
use serde_json::{Map, Value, json};

/// `includeObject` of Table requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IncludeObject {
    /// No object in rows.
    None,
    /// `PartialObjectMetadata` in rows (the default).
    #[default]
    Metadata,
    /// The full object in rows.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` parameter.
    pub fn parse(v: Option<&str>) -> IncludeObject {
        match v {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

fn name_column() -> PrinterColumn {
    PrinterColumn {
        name: "Name".into(),
        type_: "string".into(),
        format: "name".into(),
        description: "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names".into(),
        priority: 0,
        source: ColumnSource::JsonPath(".metadata.name".into()),
    }
}

/// The columns of a resource version: `Name` then the printer columns (Events: their
/// columns then `Name` at priority 1, as kube-apiserver prints events).
pub fn columns(rt: &ResourceType, v: &Version) -> Vec<PrinterColumn> {
    if matches!(
        rt.builtin,
        Some(Builtin::CoreEvent | Builtin::EventsV1Event)
    ) {
        let mut cols = v.columns.clone();
        let mut name = name_column();
        name.priority = 1;
        cols.push(name);
        return cols;
    }
    let mut cols = vec![name_column()];
    cols.extend(v.columns.iter().cloned());
    cols
}

fn cell(col: &PrinterColumn, obj: &Value) -> Value {
    match &col.source {
        ColumnSource::DataCount => {
            let n = ["data", "binaryData"]
                .iter()
                .filter_map(|f| obj.get(*f).and_then(Value::as_object))
                .map(Map::len)
                .sum::<usize>();
            json!(n)
        }
        ColumnSource::EventObject => {
            let r = obj.get("involvedObject").or_else(|| obj.get("regarding"));
            let kind = r
                .and_then(|r| r.get("kind"))
                .and_then(Value::as_str)
                .unwrap_or("");
            let name = r
                .and_then(|r| r.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("");
            json!(format!("{}/{}", kind.to_lowercase(), name))
        }
        ColumnSource::EventLastSeen => {
            let t = [
                "/series/lastObservedTime",
                "/lastTimestamp",
                "/deprecatedLastTimestamp",
                "/eventTime",
                "/metadata/creationTimestamp",
            ]
            .iter()
            .find_map(|p| {
                obj.pointer(p)
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
            });
            json!(t.map(age).unwrap_or_else(|| "<unknown>".into()))
        }
        ColumnSource::TextOr(p, missing) => {
            let found = JsonPath::parse(p)
                .and_then(|path| path.find(obj).first().map(|v| go_print(v)))
                .filter(|s| !s.is_empty());
            json!(found.unwrap_or_else(|| missing.clone()))
        }
        ColumnSource::NodeStatus => json!(node_status(obj)),
        ColumnSource::NodeRoles => json!(node_roles(obj)),
        ColumnSource::NodeAddress(kind) => {
            let found = obj
                .pointer("/status/addresses")
                .and_then(Value::as_array)
                .and_then(|a| {
                    a.iter()
                        .find(|x| x.get("type").and_then(Value::as_str) == Some(kind.as_str()))
                })
                .and_then(|x| x.get("address"))
                .and_then(Value::as_str);
            json!(found.unwrap_or("<none>"))
        }
        ColumnSource::Raw(p) => JsonPath::parse(p)
            .and_then(|path| path.find(obj).first().map(|v| (*v).clone()))
            .unwrap_or(Value::Null),
        ColumnSource::JsonPath(p) => {
            let Some(path) = JsonPath::parse(p) else {
                return Value::Null;
            };
            let found = path.find(obj);
            let Some(v) = found.first() else {
                return Value::Null;
            };
            match col.type_.as_str() {
                "date" => match v.as_str() {
                    Some(s) => json!(age(s)),
                    None => json!("<invalid>"),
                },
                "integer" | "number" | "boolean" => (*v).clone(),
                _ => json!(go_print(v)),
            }
        }
    }
}

/// kube-apiserver's node `STATUS` (`printNode`): the `Ready` condition as `Ready` or
/// `NotReady`, `Unknown` without it, then `SchedulingDisabled` when unschedulable.
fn node_status(obj: &Value) -> String {
    let ready = obj
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter()
                .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
        });
    let mut parts = vec![match ready {
        Some(c) if c.get("status").and_then(Value::as_str) == Some("True") => "Ready",
        Some(_) => "NotReady",
        None => "Unknown",
    }];
    if obj.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        parts.push("SchedulingDisabled");
    }
    parts.join(",")
}

/// kube-apiserver's node `ROLES` (`findNodeRoles`): `node-role.kubernetes.io/<role>`
/// label suffixes and the `kubernetes.io/role` value, sorted, comma-joined.
fn node_roles(obj: &Value) -> String {
    let mut roles = std::collections::BTreeSet::new();
    if let Some(labels) = obj.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(role) = k.strip_prefix("node-role.kubernetes.io/") {
                if !role.is_empty() {
                    roles.insert(role.to_string());
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str().filter(|v| !v.is_empty())
            {
                roles.insert(v.to_string());
            }
        }
    }
    if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    }
}

/// A value as Go's `fmt.Fprint` prints what `kubectl`'s JSONPath finds (strings bare,
/// lists `[a b]`, maps `map[k:v]` with sorted keys).
fn go_print(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "<nil>".to_string(),
        Value::Array(a) => format!("[{}]", a.iter().map(go_print).collect::<Vec<_>>().join(" ")),
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| format!("{k}:{}", go_print(&m[k])))
                .collect();
            format!("map[{}]", parts.join(" "))
        }
        other => other.to_string(),
    }
}

/// An object's `PartialObjectMetadata`.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))
    })
}

/// A `PartialObjectMetadataList`.
pub fn partial_metadata_list(items: &[Value], list_meta: Value) -> Value {
    json!({
        "kind": "PartialObjectMetadataList",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "items": items.iter().map(partial_metadata).collect::<Vec<_>>()
    })
}

/// A Table of objects (in the request's version).
pub fn table(
    rt: &ResourceType,
    v: &Version,
    items: &[Value],
    list_meta: Value,
    include: IncludeObject,
    beta: bool,
) -> Value {
    let cols = columns(rt, v);
    let defs: Vec<Value> = cols
        .iter()
        .map(|c| {
            json!({
                "name": c.name, "type": c.type_, "format": c.format,
                "description": c.description, "priority": c.priority
            })
        })
        .collect();
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let cells: Vec<Value> = cols.iter().map(|c| cell(c, o)).collect();
            let mut row = json!({"cells": cells});
            match include {
                IncludeObject::None => {}
                IncludeObject::Metadata => row["object"] = partial_metadata(o),
                IncludeObject::Object => row["object"] = o.clone(),
            }
            row
        })
        .collect();
    json!({
        "kind": "Table",
        "apiVersion": if beta { "meta.k8s.io/v1beta1" } else { "meta.k8s.io/v1" },
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin;

    #[test]
    fn go_printing_of_non_string_cells() {
        assert_eq!(
            go_print(&json!(["10.0.0.1", "10.0.0.2"])),
            "[10.0.0.1 10.0.0.2]"
        );
        assert_eq!(go_print(&json!({"b": 1, "a": "x"})), "map[a:x b:1]");
        assert_eq!(go_print(&json!(3)), "3");
    }

    #[test]
    fn node_table_follows_the_node_printer() {
        let rt = builtin::node();
        let v = &rt.versions[0];
        let ready = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "creationTimestamp": crate::clock::rfc3339(crate::clock::now_unix() - 5 * 3600),
                "labels": {"node-role.kubernetes.io/control-plane": "", "kubernetes.io/role": "etcd"}},
            "spec": {"unschedulable": true},
            "status": {"conditions": [{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}],
                "addresses": [{"type": "Hostname", "address": "n1"}, {"type": "InternalIP", "address": "10.0.0.7"}],
                "nodeInfo": {"kubeletVersion": "v1.33.4", "osImage": "Ubuntu 24.04"}}});
        let bare = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n2", "creationTimestamp": crate::clock::rfc3339(crate::clock::now_unix() - 2 * 3600)},
            "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        let none = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n3"}});
        let t = table(
            &rt,
            v,
            &[ready, bare, none],
            json!({}),
            IncludeObject::None,
            false,
        );
        let defs: Vec<(&str, i64)> = t["columnDefinitions"]
            .as_array()
            .expect("defs")
            .iter()
            .map(|d| {
                (
                    d["name"].as_str().expect("name"),
                    d["priority"].as_i64().expect("priority"),
                )
            })
            .collect();
        assert_eq!(
            defs,
            vec![
                ("Name", 0),
                ("Status", 0),
                ("Roles", 0),
                ("Age", 0),
                ("Version", 0),
                ("Internal-IP", 1),
                ("External-IP", 1),
                ("OS-Image", 1),
                ("Kernel-Version", 1),
                ("Container-Runtime", 1)
            ]
        );
        assert_eq!(
            t["rows"][0]["cells"],
            json!([
                "n1",
                "Ready,SchedulingDisabled",
                "control-plane,etcd",
                "5h",
                "v1.33.4",
                "10.0.0.7",
                "<none>",
                "Ubuntu 24.04",
                "<unknown>",
                "<unknown>"
            ])
        );
        assert_eq!(t["rows"][1]["cells"][1], "NotReady");
        assert_eq!(t["rows"][1]["cells"][2], "<none>");
        assert_eq!(t["rows"][1]["cells"][4], "");
        assert_eq!(t["rows"][2]["cells"][1], "Unknown");
    }

    #[test]
    fn config_map_table_counts_data() {
        let rt = builtin::config_map();
        let v = &rt.versions[0];
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "creationTimestamp": crate::clock::rfc3339(crate::clock::now_unix() - 3 * 3600)},
            "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}});
        let t = table(
            &rt,
            v,
            &[cm],
            json!({"resourceVersion": "5"}),
            IncludeObject::Metadata,
            false,
        );
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .expect("defs")
            .iter()
            .map(|d| d["name"].as_str().expect("name"))
            .collect();
        assert_eq!(names, vec!["Name", "Data", "Age"]);
        assert_eq!(t["rows"][0]["cells"][0], "c");
        assert_eq!(t["rows"][0]["cells"][1], 3);
        // 3 h (+ at most a few seconds) prints as "3h"
        assert_eq!(t["rows"][0]["cells"][2], "3h");
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["metadata"]["resourceVersion"], "5");
    }
}
