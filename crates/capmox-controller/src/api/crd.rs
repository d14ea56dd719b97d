//! CRD generation: the four CustomResourceDefinitions as YAML, exactly as
//! `make generate` writes them to `config/crd/bases/`.
//!
//! Each CRD serves two versions: `v1alpha3` (stored; listed first) and
//! `v1alpha2` (the Go provider's schema, deprecated, for taking over its
//! clusters). kube-apiserver converts between them by calling the
//! conversion webhook ([`super::conversion::convert_object`]) at
//! `https://capmox-webhook-service.capmox-system.svc:443/convert`, whose CA
//! cert-manager injects from the Certificate `capmox-system/capmox-serving-cert`.
//! The CAPI contract label lists `v1alpha3` only: `v1alpha2` keeps the Go
//! provider's contract v1beta1 shape ([`super::CONTRACT_LABEL`]).

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, CustomResourceDefinition, CustomResourceDefinitionVersion,
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool, ServiceReference,
    WebhookClientConfig, WebhookConversion,
};
use kube::CustomResourceExt;

use super::v1alpha2;
use super::{ProxmoxCluster, ProxmoxClusterTemplate, ProxmoxMachine, ProxmoxMachineTemplate};

/// Namespace of the manager, its webhook Service and serving certificate.
pub const WEBHOOK_NAMESPACE: &str = "capmox-system";
/// The Service in front of the manager's webhook server (port 443 → 9443).
pub const WEBHOOK_SERVICE: &str = "capmox-webhook-service";
/// Port of [`WEBHOOK_SERVICE`] kube-apiserver calls.
pub const WEBHOOK_SERVICE_PORT: i32 = 443;
/// Path of the conversion webhook.
pub const CONVERSION_PATH: &str = "/convert";
/// The cert-manager Certificate whose CA is injected into the CRDs'
/// `spec.conversion.webhook.clientConfig.caBundle`.
pub const SERVING_CERT: &str = "capmox-serving-cert";
/// The cert-manager CA injector annotation.
pub const INJECT_CA_ANNOTATION: &str = "cert-manager.io/inject-ca-from";

/// Every CRD of this provider, in a stable order: both versions, the
/// schemas tidied for kube-apiserver (see [`tidy_schema`]), webhook
/// conversion, the contract label of both versions.
pub fn all() -> Vec<CustomResourceDefinition> {
    [
        (ProxmoxCluster::crd(), v1alpha2::ProxmoxCluster::crd()),
        (
            ProxmoxClusterTemplate::crd(),
            v1alpha2::ProxmoxClusterTemplate::crd(),
        ),
        (ProxmoxMachine::crd(), v1alpha2::ProxmoxMachine::crd()),
        (
            ProxmoxMachineTemplate::crd(),
            v1alpha2::ProxmoxMachineTemplate::crd(),
        ),
    ]
    .into_iter()
    .map(|(stored, served)| two_versions(stored, served))
    .collect()
}

/// `stored` (the `v1alpha3` CRD) serving `old`'s only version as well.
fn two_versions(
    mut stored: CustomResourceDefinition,
    old: CustomResourceDefinition,
) -> CustomResourceDefinition {
    let kind = stored.spec.names.kind.clone();
    for v in &mut stored.spec.versions {
        if let Some(schema) = schema_of(v) {
            tidy_schema(schema);
        }
    }
    for mut v in old.spec.versions {
        if let Some(schema) = schema_of(&mut v) {
            tidy_schema(schema);
            v1alpha2::schema::as_capmox(&kind, schema);
        }
        v.served = true;
        v.storage = false;
        v.deprecated = Some(true);
        v.deprecation_warning = Some(format!(
            "{}/{} {kind} is the Go provider's version, served for taking over its clusters; use {}/{}",
            super::GROUP,
            v1alpha2::VERSION,
            super::GROUP,
            super::VERSION
        ));
        stored.spec.versions.push(v);
    }
    let (label, value) = super::CONTRACT_LABEL;
    stored
        .metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(label.to_string(), value.to_string());
    stored
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(
            INJECT_CA_ANNOTATION.to_string(),
            format!("{WEBHOOK_NAMESPACE}/{SERVING_CERT}"),
        );
    stored.spec.conversion = Some(CustomResourceConversion {
        strategy: "Webhook".to_string(),
        webhook: Some(WebhookConversion {
            client_config: Some(WebhookClientConfig {
                service: Some(ServiceReference {
                    name: WEBHOOK_SERVICE.to_string(),
                    namespace: WEBHOOK_NAMESPACE.to_string(),
                    path: Some(CONVERSION_PATH.to_string()),
                    port: Some(WEBHOOK_SERVICE_PORT),
                }),
                ca_bundle: None,
                url: None,
            }),
            conversion_review_versions: vec!["v1".to_string()],
        }),
    });
    stored
}

fn schema_of(v: &mut CustomResourceDefinitionVersion) -> Option<&mut JSONSchemaProps> {
    v.schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
}

/// Rewrites what schemars emits for Rust unsigned integer types into the
/// formats Kubernetes documents for CRD schemas: `format: uint8/uint16/uint32`
/// becomes `int32`, `uint64` becomes `int64`.
pub fn tidy_schema(schema: &mut JSONSchemaProps) {
    match schema.format.as_deref() {
        Some("uint8" | "uint16" | "uint32") => schema.format = Some("int32".into()),
        Some("uint64") => schema.format = Some("int64".into()),
        _ => {}
    }
    if let Some(props) = schema.properties.as_mut() {
        props.values_mut().for_each(tidy_schema);
    }
    if let Some(JSONSchemaPropsOrArray::Schema(items)) = schema.items.as_mut() {
        tidy_schema(items);
    }
    if let Some(JSONSchemaPropsOrBool::Schema(extra)) = schema.additional_properties.as_mut() {
        tidy_schema(extra);
    }
}

/// File name of a CRD in `config/crd/bases/` (`<group>_<plural>.yaml`, the
/// kubebuilder convention CAPI providers use).
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Errors writing a CRD as YAML.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The CRD could not be turned into JSON.
    #[error("cannot encode CRD: {0}")]
    Json(#[from] serde_json::Error),
    /// The JSON could not be written as YAML.
    #[error("cannot write CRD as YAML: {0}")]
    Yaml(#[from] serde_saphyr::SerializeError),
}

/// One CRD as YAML; whole-number bounds (`minimum: 1.0`, k8s-openapi keeps
/// them as `f64`) are written as integers (`minimum: 1`).
///
/// # Errors
/// [`CrdError`] if the CRD cannot be serialised.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let mut value = serde_json::to_value(crd)?;
    integral_bounds(&mut value);
    let body = serde_saphyr::to_string(&value)?;
    Ok(format!(
        "# Generated by `make generate` (crdgen) from crates/capmox-controller/src/api; do not edit.\n---\n{body}"
    ))
}

fn integral_bounds(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if matches!(k.as_str(), "minimum" | "maximum")
                    && let Some(f) = child.as_f64()
                    && f.fract() == 0.0
                    && f.abs() < 9.0e15
                {
                    // Exact: |f| < 2^53 and f has no fraction.
                    #[allow(clippy::cast_possible_truncation)]
                    let i = f as i64;
                    *child = serde_json::Value::from(i);
                } else {
                    integral_bounds(child);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(integral_bounds),
        _ => {}
    }
}
