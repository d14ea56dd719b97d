//! `ProxmoxMachineTemplate` and `ProxmoxClusterTemplate`
//! (`infrastructure.cluster.x-k8s.io/v1alpha2`) of the Go provider; neither
//! has a status in this version.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::cluster::ProxmoxClusterSpec;
use super::common::ObjectMeta;
use super::machine::ProxmoxMachineSpec;

/// Desired state of a `v1alpha2` ProxmoxMachineTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxMachineTemplate",
    plural = "proxmoxmachinetemplates",
    singular = "proxmoxmachinetemplate",
    category = "cluster-api",
    namespaced
)]
pub struct ProxmoxMachineTemplateSpec {
    /// The machine template.
    pub template: ProxmoxMachineTemplateResource,
}

/// `spec.template` of a `v1alpha2` ProxmoxMachineTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProxmoxMachineTemplateResource {
    /// Labels and annotations of the cloned ProxmoxMachines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The spec every clone gets.
    pub spec: ProxmoxMachineSpec,
}

/// Desired state of a `v1alpha2` ProxmoxClusterTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxClusterTemplate",
    plural = "proxmoxclustertemplates",
    singular = "proxmoxclustertemplate",
    category = "cluster-api",
    namespaced
)]
pub struct ProxmoxClusterTemplateSpec {
    /// The cluster template.
    pub template: ProxmoxClusterTemplateResource,
}

/// `spec.template` of a `v1alpha2` ProxmoxClusterTemplate.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProxmoxClusterTemplateResource {
    /// Labels and annotations of the cloned ProxmoxCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<ObjectMeta>,
    /// The ProxmoxCluster spec.
    pub spec: ProxmoxClusterSpec,
}
