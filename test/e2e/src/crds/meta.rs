//! Shapes shared by the CAPI kinds (`cluster.x-k8s.io/v1beta2` field names):
//! contract references, template metadata, addresses, failure domains, and
//! the schema helper for fields kept verbatim.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

/// `metav1.Condition`, as every v1beta2 kind carries them.
pub type Condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// A v1beta2 contract reference (`ContractVersionedObjectReference`): group,
/// kind and name in the referrer's namespace; no apiVersion, no namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractRef {
    /// API group, e.g. `infrastructure.cluster.x-k8s.io`.
    pub api_group: String,
    /// Kind, e.g. `ProxmoxMachine`.
    pub kind: String,
    /// Object name.
    pub name: String,
}

/// A reference by name (`nodeRef`, `addressRef`, `claimRef`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NameRef {
    /// Object name.
    pub name: String,
}

/// `spec.template.metadata` of MachineSets, MachineDeployments and
/// KubeadmControlPlane machine templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ObjectMetaTemplate {
    /// Labels copied to the created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations copied to the created objects.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl ObjectMetaTemplate {
    /// Whether neither labels nor annotations are set (serialised as absent:
    /// the real CRDs require `minProperties: 1`).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}

/// A machine address (`Hostname`, `InternalIP`, `ExternalIP`, `InternalDNS`, `ExternalDNS`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// Address type.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// One failure domain as the v1beta2 contract lists them
/// (`Cluster.status.failureDomains[]`, copied from the InfraCluster).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Name (the Proxmox instance for this provider).
    pub name: String,
    /// Whether control-plane machines may be placed there (`nil` → false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form attributes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// A JSON object kept verbatim (`x-kubernetes-preserve-unknown-fields`), for
/// the parts of CAPI kinds the stand-in passes along without reading every
/// field (`kubeadmConfigSpec`, `clusterNetwork`, ...).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct Opaque(pub serde_json::Map<String, serde_json::Value>);

impl Opaque {
    /// Whether the object has no field.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Any JSON value kept verbatim (`x-kubernetes-preserve-unknown-fields`
/// without a type): ClusterClass variable values and JSON patch values.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(transparent)]
pub struct AnyValue(pub serde_json::Value);

impl JsonSchema for AnyValue {
    fn schema_name() -> Cow<'static, str> {
        "AnyValue".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}

impl JsonSchema for Opaque {
    fn schema_name() -> Cow<'static, str> {
        "Opaque".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}
