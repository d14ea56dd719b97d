//! `Cluster` (`cluster.x-k8s.io/v1beta2`): the fields CAPI core's Cluster
//! controller reads and writes around the InfraCluster and the control plane.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::clusterclass::Topology;
use super::meta::{Condition, ContractRef, FailureDomain, Opaque};

/// `Cluster.spec` (subset; unknown fields are pruned by the minimal CRD).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    plural = "clusters",
    shortname = "cl",
    category = "cluster-api",
    namespaced,
    status = "ClusterStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Infrastructure",
        type_ = "boolean",
        json_path = ".status.initialization.infrastructureProvisioned"
    ),
    printcolumn(
        name = "ControlPlane",
        type_ = "boolean",
        json_path = ".status.initialization.controlPlaneInitialized"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Paused: no controller touches the cluster's objects (`clusterctl move`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Pod and service networks, kept verbatim.
    #[serde(default, skip_serializing_if = "Opaque::is_empty")]
    pub cluster_network: Opaque,
    /// The workload cluster's API endpoint; copied from the InfraCluster once
    /// it is provisioned, when not set here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// The control plane object (a KubeadmControlPlane).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractRef>,
    /// The InfraCluster (a ProxmoxCluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractRef>,
    /// A managed topology: the topology controller makes the InfraCluster,
    /// the control plane and the MachineDeployments from a ClusterClass.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology: Option<Topology>,
}

/// `controlPlaneEndpoint`: host and port (1..65535).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ApiEndpoint {
    /// Host name or IP address.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// TCP port.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub port: i32,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

impl ApiEndpoint {
    /// CAPI's `IsValid`: a host and a non-zero port.
    pub fn is_valid(&self) -> bool {
        !self.host.is_empty() && self.port != 0
    }
}

/// `Cluster.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The InfraCluster reported `status.initialization.provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane reported `status.initialization.controlPlaneInitialized`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// `Cluster.status` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
    /// The InfraCluster's failure domains, sorted by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failure_domains: Vec<FailureDomain>,
    /// `Pending`, `Provisioning`, `Provisioned`, `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions (`InfrastructureReady`, `ControlPlaneInitialized`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Cluster {
    /// `status.initialization.infrastructureProvisioned`.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }

    /// `status.initialization.controlPlaneInitialized`.
    pub fn control_plane_initialized(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false)
    }

    /// `status.failureDomains` (empty when unset).
    pub fn failure_domains(&self) -> &[FailureDomain] {
        self.status
            .as_ref()
            .map(|s| s.failure_domains.as_slice())
            .unwrap_or(&[])
    }

    /// Whether `spec.paused` is true.
    pub fn is_paused(&self) -> bool {
        self.spec.paused == Some(true)
    }
}
