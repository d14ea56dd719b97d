//! `CustomResourceDefinition` (`apiextensions.k8s.io/v1`) to [`ResourceType`]: the
//! checks kube-apiserver makes on a CRD that matter here (names, scope, exactly one
//! storage version, a schema per version, the `scale` subresource's paths, the
//! conversion strategy and its webhook), and the `status` it reports
//! (`NamesAccepted`, `Established`).

use super::{
    ColumnSource, PrinterColumn, ResourceType, ScalePaths, StorageKey, Version, View,
    version_priority,
};
use crate::api_error::Cause;
use crate::json::strings;
use crate::schema::cel::CelRules;
use serde_json::{Value, json};
use std::sync::Arc;

fn s<'a>(v: &'a Value, path: &[&str]) -> &'a str {
    crate::json::get_path(v, path)
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn columns(v: &Value) -> Vec<PrinterColumn> {
    let Some(cols) = v.get("additionalPrinterColumns").and_then(Value::as_array) else {
        return vec![PrinterColumn::age()];
    };
    cols.iter()
        .map(|c| PrinterColumn {
            name: s(c, &["name"]).to_string(),
            type_: s(c, &["type"]).to_string(),
            format: s(c, &["format"]).to_string(),
            description: s(c, &["description"]).to_string(),
            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
            source: ColumnSource::JsonPath(s(c, &["jsonPath"]).to_string()),
        })
        .collect()
}

fn selectable_fields(v: &Value) -> Vec<String> {
    v.get("selectableFields")
        .and_then(Value::as_array)
        .map(|fields| {
            fields
                .iter()
                .map(|f| s(f, &["jsonPath"]).trim_start_matches('.').to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// One `subresources.scale` path: kube-apiserver's `validateSimpleJSONPath` plus the
/// prefix rule (`ValidateCustomResourceDefinitionSubresources`).
fn check_scale_path(
    path: &str,
    field: &str,
    prefixes: &[&str],
    under: &str,
    causes: &mut Vec<Cause>,
) {
    let invalid = |msg: &str| {
        Cause::new(
            "FieldValueInvalid",
            field,
            format!("Invalid value: {path:?}: {msg}"),
        )
    };
    if !path.starts_with('.') {
        causes.push(invalid("must be a simple json path starting with ."));
    } else if !prefixes.iter().any(|p| path.starts_with(p)) {
        causes.push(invalid(&format!("should be a json path under {under}")));
    }
}

/// `subresources.scale` of version `i` (`None` when absent); causes for bad paths.
fn scale_paths(v: &Value, i: usize, causes: &mut Vec<Cause>) -> Option<ScalePaths> {
    let scale = v.pointer("/subresources/scale")?;
    let base = format!("spec.versions[{i}].subresources.scale");
    let spec_replicas = s(scale, &["specReplicasPath"]).to_string();
    let status_replicas = s(scale, &["statusReplicasPath"]).to_string();
    let label_selector =
        Some(s(scale, &["labelSelectorPath"]).to_string()).filter(|p| !p.is_empty());
    for (path, name, prefixes, under) in [
        (&spec_replicas, "specReplicasPath", &[".spec."][..], ".spec"),
        (
            &status_replicas,
            "statusReplicasPath",
            &[".status."][..],
            ".status",
        ),
    ] {
        let field = format!("{base}.{name}");
        if path.is_empty() {
            causes.push(Cause::new("FieldValueRequired", field, "Required value"));
        } else {
            check_scale_path(path, &field, prefixes, under, causes);
        }
    }
    if let Some(path) = &label_selector {
        check_scale_path(
            path,
            &format!("{base}.labelSelectorPath"),
            &[".spec.", ".status."],
            "either .spec or .status",
            causes,
        );
    }
    Some(ScalePaths {
        spec_replicas,
        status_replicas,
        label_selector,
    })
}

/// Parses and checks a CRD; a conversion webhook is called through `caller`.
/// Errors are `422` causes with the CRD field paths.
pub fn from_crd(
    crd: &Value,
    caller: &Arc<crate::webhook::Caller>,
) -> Result<ResourceType, Vec<Cause>> {
    let mut causes = Vec::new();
    let group = s(crd, &["spec", "group"]).to_string();
    let plural = s(crd, &["spec", "names", "plural"]).to_string();
    let kind = s(crd, &["spec", "names", "kind"]).to_string();
    let name = crate::json::name(crd).to_string();
    if group.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.group",
            "Required value",
        ));
    } else if !group.contains('.') || !crate::validation::dns1123_subdomain(&group).is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.group",
            format!("Invalid value: {group:?}: should be a domain with at least one dot"),
        ));
    }
    if plural.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.plural",
            "Required value",
        ));
    } else if !crate::validation::dns1123_label(&plural).is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.names.plural",
            format!("Invalid value: {plural:?}: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-'"),
        ));
    }
    if kind.is_empty() {
        causes.push(Cause::new(
            "FieldValueRequired",
            "spec.names.kind",
            "Required value",
        ));
    }
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "metadata.name",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = s(crd, &["spec", "scope"]);
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => {
            causes.push(Cause::new(
                "FieldValueNotSupported",
                "spec.scope",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Cluster\", \"Namespaced\""
                ),
            ));
            true
        }
    };
    let mut versions = Vec::new();
    let raw_versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if raw_versions.is_empty() {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: \"null\": must have exactly one version marked as storage version",
        ));
    }
    for (i, v) in raw_versions.iter().enumerate() {
        let vname = s(v, &["name"]).to_string();
        if vname.is_empty() || !crate::validation::dns1123_label(&vname).is_empty() {
            causes.push(Cause::new(
                "FieldValueInvalid",
                format!("spec.versions[{i}].name"),
                format!("Invalid value: {vname:?}: a DNS-1035 label is required"),
            ));
        }
        let schema = v.pointer("/schema/openAPIV3Schema").cloned();
        match &schema {
            None => causes.push(Cause::new(
                "FieldValueRequired",
                format!("spec.versions[{i}].schema.openAPIV3Schema"),
                "Required value: schemas are required",
            )),
            Some(sch) if sch.get("type").and_then(Value::as_str) != Some("object") => {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    format!("spec.versions[{i}].schema.openAPIV3Schema.type"),
                    "Invalid value: \"\": must be object at the root",
                ))
            }
            _ => {}
        }
        let cel = schema.as_ref().and_then(CelRules::compile).map(Arc::new);
        let scale = scale_paths(v, i, &mut causes);
        versions.push(Version {
            name: vname,
            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            schema: schema.map(Arc::new),
            cel,
            status_subresource: v.pointer("/subresources/status").is_some(),
            scale,
            columns: columns(v),
            selectable_fields: selectable_fields(v),
        });
    }
    let storage_count = versions.iter().filter(|v| v.storage).count();
    if !raw_versions.is_empty() && storage_count != 1 {
        causes.push(Cause::new(
            "FieldValueInvalid",
            "spec.versions",
            "Invalid value: \"array\": must have exactly one version marked as storage version",
        ));
    }
    let conversion = match crate::webhook::conversion::parse_spec(crd) {
        Ok(c) => c,
        Err((field, message)) => {
            causes.push(Cause::new("FieldValueInvalid", field, message));
            None
        }
    };
    if !causes.is_empty() {
        return Err(causes);
    }
    versions.sort_by_key(|v| version_priority(&v.name));
    let singular = match s(crd, &["spec", "names", "singular"]) {
        "" => kind.to_lowercase(),
        x => x.to_string(),
    };
    let list_kind = match s(crd, &["spec", "names", "listKind"]) {
        "" => format!("{kind}List"),
        x => x.to_string(),
    };
    Ok(ResourceType {
        storage: StorageKey {
            group: group.clone(),
            plural: plural.clone(),
        },
        group,
        kind,
        list_kind,
        plural,
        singular,
        short_names: strings(crd.pointer("/spec/names/shortNames")),
        categories: strings(crd.pointer("/spec/names/categories")),
        namespaced,
        versions,
        view: View::Plain,
        builtin: None,
        return_deleted_object: true,
        allow_unconditional_update: false,
        conversion: conversion.map(|client| {
            Arc::new(crate::webhook::Converter::new(
                name.clone(),
                client,
                caller.clone(),
            ))
        }),
    })
}

/// The `status` kube-apiserver reports for an accepted CRD.
pub fn accepted_status(crd: &Value, now: &str) -> Value {
    let names = crd.pointer("/spec/names").cloned().unwrap_or(json!({}));
    let mut accepted = names;
    if let Some(m) = accepted.as_object_mut() {
        let kind = m
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        m.entry("singular").or_insert(json!(kind.to_lowercase()));
        m.entry("listKind").or_insert(json!(format!("{kind}List")));
    }
    let stored: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|vs| {
            vs.iter()
                .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
                .filter_map(|v| v.get("name").cloned())
                .collect()
        })
        .unwrap_or_default();
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "lastTransitionTime": now,
             "reason": "NoConflicts", "message": "no conflicts found"},
            {"type": "Established", "status": "True", "lastTransitionTime": now,
             "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"}
        ],
        "storedVersions": stored
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1alpha1", "served": true, "storage": false, "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object"}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}
                ]
            }
        })
    }

    fn caller() -> Arc<crate::webhook::Caller> {
        crate::webhook::Caller::start().expect("webhook client")
    }

    #[test]
    fn conversion_webhooks_are_parsed_and_checked() {
        let mut c = crd();
        c["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/convert"}}}});
        let rt = from_crd(&c, &caller()).expect("valid");
        let conv = rt.conversion.expect("webhook conversion");
        assert_eq!(
            conv.client.endpoint,
            crate::webhook::caller::Endpoint::Service {
                namespace: "ns".into(),
                name: "svc".into(),
                path: "/convert".into(),
                port: 443
            }
        );
        c["spec"]["conversion"]["webhook"]["conversionReviewVersions"] = json!(["v1beta1"]);
        let causes = from_crd(&c, &caller()).expect_err("v1 is required");
        assert_eq!(
            causes[0].field,
            "spec.conversion.webhook.conversionReviewVersions"
        );
        c["spec"]["conversion"] = json!({"strategy": "Magic"});
        let causes = from_crd(&c, &caller()).expect_err("unknown strategy");
        assert_eq!(causes[0].field, "spec.conversion.strategy");
        c["spec"]["conversion"] = json!({"strategy": "None"});
        assert!(from_crd(&c, &caller()).expect("valid").conversion.is_none());
    }

    #[test]
    fn parses_names_versions_and_columns() {
        let rt = from_crd(&crd(), &caller()).expect("valid");
        assert_eq!(rt.kind, "Widget");
        assert_eq!(rt.list_kind, "WidgetList");
        assert_eq!(rt.singular, "widget");
        assert_eq!(rt.short_names, vec!["wd"]);
        assert_eq!(rt.preferred_version(), "v1");
        assert_eq!(rt.storage_version(), "v1");
        let v1 = rt.served_version("v1").expect("served");
        assert!(v1.status_subresource);
        assert_eq!(v1.columns[0].name, "Size");
        let alpha = rt.served_version("v1alpha1").expect("served");
        assert_eq!(alpha.columns, vec![PrinterColumn::age()]);
    }

    #[test]
    fn scale_subresource_paths_are_parsed_and_checked() {
        let mut c = crd();
        c["spec"]["versions"][1]["subresources"]["scale"] = json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector"
        });
        let rt = from_crd(&c, &caller()).expect("valid");
        let v1 = rt.served_version("v1").expect("served");
        assert_eq!(
            v1.scale,
            Some(ScalePaths {
                spec_replicas: ".spec.replicas".into(),
                status_replicas: ".status.replicas".into(),
                label_selector: Some(".status.selector".into()),
            })
        );
        assert_eq!(rt.served_version("v1alpha1").expect("served").scale, None);

        c["spec"]["versions"][1]["subresources"]["scale"] = json!({
            "specReplicasPath": ".status.replicas",
            "labelSelectorPath": "metadata.labels"
        });
        let causes = from_crd(&c, &caller()).expect_err("invalid");
        let got: Vec<(&str, &str)> = causes
            .iter()
            .map(|c| (c.field.as_str(), c.message.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    "spec.versions[1].subresources.scale.specReplicasPath",
                    "Invalid value: \".status.replicas\": should be a json path under .spec"
                ),
                (
                    "spec.versions[1].subresources.scale.statusReplicasPath",
                    "Required value"
                ),
                (
                    "spec.versions[1].subresources.scale.labelSelectorPath",
                    "Invalid value: \"metadata.labels\": must be a simple json path starting with ."
                ),
            ]
        );
    }

    #[test]
    fn refuses_bad_name_and_two_storage_versions() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        c["spec"]["versions"][0]["storage"] = json!(true);
        let causes = from_crd(&c, &caller()).expect_err("invalid");
        let fields: Vec<&str> = causes.iter().map(|c| c.field.as_str()).collect();
        assert_eq!(fields, vec!["metadata.name", "spec.versions"]);
    }
}
