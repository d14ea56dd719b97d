//! OpenAPI v3 documents, as far as `kubectl` uses them: the `/openapi/v3` index and one
//! document per group-version with the resource paths (operations tagged with
//! `x-kubernetes-group-version-kind`, `PATCH` listing the `fieldValidation` parameter so
//! `kubectl` leaves field validation to the server) and the kinds' schemas.
//! `/openapi/v2` is not served (`404`); `kubectl` then relies on v3 and its built-in
//! types.

use crate::resource::{Registry, ResourceType};
use serde_json::{Map, Value, json};
use std::hash::{DefaultHasher, Hash, Hasher};

fn definition_name(rt: &ResourceType, version: &str) -> String {
    if rt.builtin.is_some() {
        let g = match rt.group.as_str() {
            "" => "core".to_string(),
            g => g.trim_end_matches(".k8s.io").to_string(),
        };
        let prefix = if rt.group == "apiextensions.k8s.io" {
            "io.k8s.apiextensions-apiserver.pkg.apis".to_string()
        } else {
            "io.k8s.api".to_string()
        };
        return format!("{prefix}.{g}.{version}.{}", rt.kind);
    }
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{version}.{}", reversed.join("."), rt.kind)
}

fn param(name: &str, type_: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": type_, "uniqueItems": true}})
}

fn op(action: &str, gvk: &Value, def_ref: &str, params: Vec<Value>) -> Value {
    let mut o = json!({
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": def_ref}}}}}
    });
    if action == "patch" {
        let patch_ref = json!({"schema": {"$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.Patch"}});
        o["requestBody"] = json!({"content": {
            "application/json-patch+json": patch_ref,
            "application/merge-patch+json": patch_ref,
            "application/apply-patch+yaml": patch_ref
        }, "required": true});
    } else if action == "put" || action == "post" {
        o["requestBody"] = json!({"content": {"application/json": {"schema": {"$ref": def_ref}}}, "required": true});
    }
    o
}

/// The definition name of `autoscaling/v1` `Scale` (the `/scale` subresource's body).
const SCALE_DEFINITION: &str = "io.k8s.api.autoscaling.v1.Scale";

/// `autoscaling/v1` `Scale`, as in the Kubernetes 1.33 OpenAPI.
fn scale_schema() -> Value {
    json!({
        "type": "object",
        "description": "Scale represents a scaling request for a resource.",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "format": "int32"}
            }},
            "status": {"type": "object", "required": ["replicas"], "properties": {
                "replicas": {"type": "integer", "format": "int32"},
                "selector": {"type": "string"}
            }}
        },
        "x-kubernetes-group-version-kind": [{"group": "autoscaling", "kind": "Scale", "version": "v1"}]
    })
}

/// The document of one group-version; `None` when nothing is served there.
pub fn document(reg: &Registry, group: &str, version: &str) -> Option<Value> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    schemas.insert(
        "io.k8s.apimachinery.pkg.apis.meta.v1.Patch".into(),
        json!({"type": "object", "description": "Patch is provided to give a concrete name and type to the Kubernetes PATCH request body."}),
    );
    let mut any = false;
    for rt in reg.all().filter(|rt| rt.group == group) {
        let Some(v) = rt.served_version(version) else {
            continue;
        };
        any = true;
        let gvk = json!({"group": rt.group, "version": version, "kind": rt.kind});
        let def = definition_name(rt, version);
        let def_ref = format!("#/components/schemas/{def}");
        let mut schema = v
            .schema
            .as_deref()
            .cloned()
            .unwrap_or(json!({"type": "object"}));
        if let Some(m) = schema.as_object_mut() {
            m.insert("x-kubernetes-group-version-kind".into(), json!([gvk]));
        }
        schemas.insert(def.clone(), schema);
        let base = if group.is_empty() {
            format!("/api/{version}")
        } else {
            format!("/apis/{group}/{version}")
        };
        let scope = if rt.namespaced {
            format!("{base}/namespaces/{{namespace}}/{}", rt.plural)
        } else {
            format!("{base}/{}", rt.plural)
        };
        let write_params = || {
            vec![
                param("dryRun", "string"),
                param("fieldManager", "string"),
                param("fieldValidation", "string"),
            ]
        };
        let mut patch_params = write_params();
        patch_params.push(param("force", "boolean"));
        paths.insert(
            scope.clone(),
            json!({
                "get": op("list", &gvk, &def_ref, vec![param("labelSelector", "string"), param("fieldSelector", "string"), param("limit", "integer"), param("continue", "string"), param("watch", "boolean")]),
                "post": op("post", &gvk, &def_ref, write_params()),
                "delete": op("deletecollection", &gvk, &def_ref, vec![param("labelSelector", "string")]),
            }),
        );
        paths.insert(
            format!("{scope}/{{name}}"),
            json!({
                "get": op("get", &gvk, &def_ref, vec![]),
                "put": op("put", &gvk, &def_ref, write_params()),
                "patch": op("patch", &gvk, &def_ref, patch_params.clone()),
                "delete": op("delete", &gvk, &def_ref, vec![param("dryRun", "string"), param("propagationPolicy", "string")]),
            }),
        );
        if v.status_subresource {
            paths.insert(
                format!("{scope}/{{name}}/status"),
                json!({
                    "get": op("get", &gvk, &def_ref, vec![]),
                    "put": op("put", &gvk, &def_ref, write_params()),
                    "patch": op("patch", &gvk, &def_ref, patch_params.clone()),
                }),
            );
        }
        if v.scale.is_some() {
            let scale_gvk = json!({"group": "autoscaling", "version": "v1", "kind": "Scale"});
            let scale_ref = format!("#/components/schemas/{SCALE_DEFINITION}");
            schemas.insert(SCALE_DEFINITION.into(), scale_schema());
            paths.insert(
                format!("{scope}/{{name}}/scale"),
                json!({
                    "get": op("get", &scale_gvk, &scale_ref, vec![]),
                    "put": op("put", &scale_gvk, &scale_ref, write_params()),
                    "patch": op("patch", &scale_gvk, &scale_ref, patch_params),
                }),
            );
        }
    }
    if !any {
        return None;
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas}
    }))
}

/// The `/openapi/v3` index: one entry per served group-version, with a content hash.
pub fn index(reg: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in reg.groups() {
        for v in versions {
            let Some(doc) = document(reg, &group, &v) else {
                continue;
            };
            let mut h = DefaultHasher::new();
            doc.to_string().hash(&mut h);
            let key = if group.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{group}/{v}")
            };
            paths.insert(
                key.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash={:016X}", h.finish())}),
            );
        }
    }
    json!({"paths": paths})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin;

    #[test]
    fn documents_advertise_field_validation_on_patch() {
        let mut reg = Registry::default();
        for rt in builtin::all() {
            reg.insert(rt);
        }
        let doc = document(&reg, "", "v1").expect("core doc");
        let patch = &doc["paths"]["/api/v1/namespaces/{namespace}/configmaps/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "ConfigMap"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .expect("params")
                .iter()
                .any(|p| p["name"] == "fieldValidation")
        );
        assert!(doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"].is_object());
        let idx = index(&reg);
        assert!(
            idx["paths"]["apis/coordination.k8s.io/v1"]["serverRelativeURL"]
                .as_str()
                .expect("url")
                .starts_with("/openapi/v3/apis/coordination.k8s.io/v1?hash=")
        );
    }
}
