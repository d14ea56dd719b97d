//! `KubeadmConfig` and `KubeadmConfigTemplate`
//! (`bootstrap.cluster.x-k8s.io/v1beta2`): the kubeadm bootstrap provider's
//! kinds. The stand-in keeps their specs verbatim and renders a small
//! cloud-config from them.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::borrow::Cow;

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::meta::{Condition, ObjectMetaTemplate};

/// `KubeadmConfig.spec`, kept verbatim (`users`, `files`, `format`,
/// `initConfiguration`, `joinConfiguration`, ...).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfig",
    plural = "kubeadmconfigs",
    category = "cluster-api",
    namespaced,
    status = "KubeadmConfigStatus",
    schema = "manual",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"
    ),
    printcolumn(
        name = "DataSecretCreated",
        type_ = "boolean",
        json_path = ".status.initialization.dataSecretCreated"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
pub struct KubeadmConfigSpec {
    /// Every field of the spec.
    #[serde(flatten)]
    pub fields: serde_json::Map<String, serde_json::Value>,
}

impl KubeadmConfigSpec {
    /// `spec.format` (`cloud-config` when unset, as CABPK defaults it).
    pub fn format(&self) -> &str {
        self.fields
            .get("format")
            .and_then(serde_json::Value::as_str)
            .unwrap_or("cloud-config")
    }
}

/// `KubeadmConfig.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigInitialization {
    /// The data Secret exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_created: Option<bool>,
}

/// `KubeadmConfig.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmConfigStatus {
    /// Milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<KubeadmConfigInitialization>,
    /// The Secret with keys `value` (the bootstrap data) and `format`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
    /// Conditions (`Ready`, `DataSecretAvailable`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

fn schema_of_status(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<KubeadmConfigStatus>()
}

impl JsonSchema for KubeadmConfig {
    fn schema_name() -> Cow<'static, str> {
        "KubeadmConfig".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let status = schema_of_status(generator);
        json_schema!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "status": status
            }
        })
    }
}

/// `KubeadmConfigTemplate.spec`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "bootstrap.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmConfigTemplate",
    plural = "kubeadmconfigtemplates",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1beta2")
)]
pub struct KubeadmConfigTemplateSpec {
    /// The config every Machine of a MachineSet gets a copy of.
    pub template: KubeadmConfigTemplateResource,
}

/// `KubeadmConfigTemplate.spec.template`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct KubeadmConfigTemplateResource {
    /// Labels and annotations of the copies.
    #[serde(default, skip_serializing_if = "ObjectMetaTemplate::is_empty")]
    pub metadata: ObjectMetaTemplate,
    /// The KubeadmConfig spec, kept verbatim.
    #[serde(default)]
    pub spec: super::meta::Opaque,
}
