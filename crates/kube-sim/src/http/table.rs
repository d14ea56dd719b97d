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
