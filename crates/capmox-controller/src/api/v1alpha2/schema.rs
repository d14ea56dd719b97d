//! The last touches that make the derived `v1alpha2` schemas equal to the
//! Go provider's: what its CRD generator writes and the derive does not.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};

use super::cluster::cluster_spec_rules;
use super::machine::machine_spec_rules;

/// Rewrites the derived root schema of `kind`'s `v1alpha2` version:
/// no `nullable` anywhere (the Go provider's schema has none, so a `null`
/// is refused rather than read as absent), `apiVersion`, `kind` and
/// `metadata` declared at the root, and the CEL rules the Go provider puts
/// on a ProxmoxCluster's or ProxmoxMachine's `spec` but not on a template's
/// (see [`cluster_spec_rules`], [`machine_spec_rules`]).
pub fn as_capmox(kind: &str, root: &mut JSONSchemaProps) {
    strip_nullable(root);
    root.title = None;
    root.description = Some(format!(
        "{kind} as the Go provider (CAPMOX) defines it; served for taking over its clusters, stored as v1alpha3."
    ));
    let props = root.properties.get_or_insert_with(Default::default);
    for (name, type_) in [
        ("apiVersion", "string"),
        ("kind", "string"),
        ("metadata", "object"),
    ] {
        props.insert(
            name.to_string(),
            JSONSchemaProps {
                type_: Some(type_.to_string()),
                ..JSONSchemaProps::default()
            },
        );
    }
    let mut rules = match kind {
        "ProxmoxCluster" => cluster_spec_rules(),
        "ProxmoxMachine" => machine_spec_rules(),
        _ => return,
    };
    if let Some(spec) = props.get_mut("spec") {
        rules.extend(spec.x_kubernetes_validations.take().unwrap_or_default());
        spec.x_kubernetes_validations = Some(rules);
    }
}

fn strip_nullable(schema: &mut JSONSchemaProps) {
    schema.nullable = None;
    if let Some(props) = schema.properties.as_mut() {
        props.values_mut().for_each(strip_nullable);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        strip_nullable(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        strip_nullable(extra);
    }
}
