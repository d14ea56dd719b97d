//! Types shared by the `v1alpha2` kinds: conditions, object references and
//! the metadata of templates, each with the schema the Go provider's CRDs
//! give it.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A `metav1.Condition` with the validation kube-apiserver's own schema of
/// it carries (enum of `status`, patterns of `type` and `reason`, at most
/// 32 per object).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// When the condition last changed status (RFC 3339).
    pub last_transition_time: Time,
    /// Human-readable detail; may be empty.
    #[schemars(length(max = 32768))]
    pub message: String,
    /// The `metadata.generation` the condition was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub observed_generation: Option<i64>,
    /// CamelCase reason of the last transition.
    #[schemars(
        length(min = 1, max = 1024),
        pattern(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
    )]
    pub reason: String,
    /// `True`, `False` or `Unknown`.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    /// Condition type, CamelCase or `foo.example.com/CamelCase`.
    #[serde(rename = "type")]
    #[schemars(
        length(max = 316),
        pattern(
            r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
        )
    )]
    pub type_: String,
}

/// A `corev1.LocalObjectReference`: a name in the referencing object's
/// namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LocalObjectReference {
    /// Name of the object; the schema defaults it to `""`.
    #[serde(default)]
    pub name: String,
}

/// Labels and annotations copied onto the objects cloned from a template
/// (CAPI `ObjectMeta`); at least one of the two when present.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct ObjectMeta {
    /// Annotations for the cloned object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
    /// Labels for the cloned object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// `initialization` of the status of a ProxmoxCluster or ProxmoxMachine
/// (CAPI contract v1beta2); at least one field when present.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("minProperties" = 1))]
pub struct Initialization {
    /// True once the infrastructure is provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// The pattern of a `v1alpha2` zone name (a label value).
pub const ZONE_PATTERN: &str = r"^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$";

/// A CEL rule with its message, as the Go provider's schema writes it.
pub(super) fn rule(rule: &str, message: &str) -> ValidationRule {
    ValidationRule {
        rule: rule.to_string(),
        message: Some(message.to_string()),
        ..ValidationRule::default()
    }
}
