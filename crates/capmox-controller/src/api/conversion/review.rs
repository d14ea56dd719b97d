//! The conversion function the webhook server calls for each object of a
//! `ConversionReview` (the review's plumbing is [`crate::webhook`]'s).

use serde_json::Value;

use super::convert;

/// Converts `object` to `desired_api_version` for the conversion webhook:
/// the object converted, or a message naming the object, both versions and
/// the field that could not be converted
/// (`ProxmoxCluster ns/name (…/v1alpha2 to …/v1alpha3): spec.zoneConfig: …`).
/// Same-version objects come back unchanged.
///
/// # Errors
/// The message above.
pub fn convert_object(object: Value, desired_api_version: &str) -> Result<Value, String> {
    convert(&object, desired_api_version)
        .map_err(|e| format!("{}: {e}", describe(&object, desired_api_version)))
}

/// `ProxmoxCluster ns/name (infrastructure.cluster.x-k8s.io/v1alpha2 to …/v1alpha3)`.
fn describe(o: &Value, desired: &str) -> String {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_string();
    let meta = o.get("metadata");
    let name = s(meta.and_then(|m| m.get("name")));
    let object = match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    };
    format!(
        "{} {object} ({} to {desired})",
        s(o.get("kind")),
        s(o.get("apiVersion"))
    )
}
