//! `Cluster` and `Machine` (`cluster.x-k8s.io/v1beta2`), read-only shims.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A typed local reference (v1beta2 contract refs have no apiVersion or namespace).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractRef {
    /// API group, e.g. `infrastructure.cluster.x-k8s.io`.
    #[serde(default)]
    pub api_group: String,
    /// Kind, e.g. `ProxmoxCluster`.
    #[serde(default)]
    pub kind: String,
    /// Object name in the same namespace.
    #[serde(default)]
    pub name: String,
}

/// `Cluster.spec.controlPlaneEndpoint`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoint {
    /// Host name or IP.
    #[serde(default)]
    pub host: String,
    /// Port.
    #[serde(default)]
    pub port: i32,
}

/// The fields of `Cluster.spec` this provider reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
    status = "ClusterStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Paused: no reconciliation of the cluster's objects (`clusterctl move`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// The workload cluster's API endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<Endpoint>,
    /// The InfraCluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractRef>,
    /// The control plane object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_ref: Option<ContractRef>,
}

/// `Cluster.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterInitialization {
    /// The InfraCluster reported `provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
    /// The control plane is initialised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// The fields of `Cluster.status` this provider reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// Initialization milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ClusterInitialization>,
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
}

/// `Machine.spec.bootstrap`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The Secret (same namespace) holding the bootstrap data in key `value`
    /// and its format in key `format` (`cloud-config` or `ignition`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// The fields of `Machine.spec` this provider reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    plural = "machines",
    namespaced,
    status = "MachineStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The owning Cluster's name.
    #[serde(default)]
    pub cluster_name: String,
    /// Bootstrap data reference.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// The InfraMachine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractRef>,
    /// The failure domain the machine must be placed in (set by
    /// KubeadmControlPlane or copied from the MachineDeployment template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Kubernetes version of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// The fields of `Machine.status` this provider reads.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Lifecycle phase (`Provisioning`, `Running`, `Deleting`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

impl Machine {
    /// The bootstrap data Secret name, once the bootstrap provider set it.
    pub fn bootstrap_secret(&self) -> Option<&str> {
        self.spec
            .bootstrap
            .data_secret_name
            .as_deref()
            .filter(|s| !s.is_empty())
    }

    /// The requested failure domain (empty means none).
    pub fn failure_domain(&self) -> Option<&str> {
        self.spec
            .failure_domain
            .as_deref()
            .filter(|s| !s.is_empty())
    }
}
