//! `ProxmoxMachineTemplate` and `ProxmoxClusterTemplate`: what MachineDeployments,
//! KubeadmControlPlanes and ClusterClasses clone (CAPI contract v1beta2 §templates).

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cluster::ProxmoxClusterSpec;
use super::machine::ProxmoxMachineSpec;

/// Labels and annotations copied onto the objects cloned from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMetaTemplate {
    /// Labels for the cloned object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations for the cloned object.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Desired state of a ProxmoxMachineTemplate. Immutable: to change machines,
/// create a new template and point the MachineDeployment or control plane at it
/// (CAPI rolls the machines). The provider's validating webhook enforces it;
/// a CEL rule cannot, as it cannot tell the ClusterClass topology
/// controller's dry-run (which must be allowed to change the spec) from
/// other updates.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha3",
    kind = "ProxmoxMachineTemplate",
    plural = "proxmoxmachinetemplates",
    singular = "proxmoxmachinetemplate",
    shortname = "pxmt",
    category = "cluster-api",
    namespaced,
    status = "ProxmoxMachineTemplateStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha3"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Owner CAPI Cluster"
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.capacity.cpu",
        description = "vCPUs per machine"
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.capacity.memory",
        description = "Memory per machine"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateSpec {
    /// The machine template.
    pub template: ProxmoxMachineTemplateResource,
}

/// `spec.template` of a ProxmoxMachineTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateResource {
    /// Labels and annotations for the cloned ProxmoxMachines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// The ProxmoxMachine spec every clone gets.
    pub spec: ProxmoxMachineSpec,
}

/// Observed state of a ProxmoxMachineTemplate, for the cluster autoscaler's
/// scale-from-zero (CAPI contract: InfraMachineTemplate `status.capacity`,
/// `status.nodeInfo`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateStatus {
    /// Resources of one machine: `cpu` (sockets × cores) and `memory` (`<n>Mi`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// Architecture and operating system of the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
}

/// `status.nodeInfo` of an InfraMachineTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInfo {
    /// `amd64`, `arm64`, `s390x` or `ppc64le`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Operating system, e.g. `linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_system: Option<String>,
}

/// Desired state of a ProxmoxClusterTemplate (for ClusterClass).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha3",
    kind = "ProxmoxClusterTemplate",
    plural = "proxmoxclustertemplates",
    singular = "proxmoxclustertemplate",
    shortname = "pxct",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1alpha3"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateSpec {
    /// The cluster template.
    pub template: ProxmoxClusterTemplateResource,
}

/// `spec.template` of a ProxmoxClusterTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateResource {
    /// Labels and annotations for the cloned ProxmoxCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMetaTemplate>,
    /// The ProxmoxCluster spec.
    pub spec: ProxmoxClusterSpec,
}
