//! `Machine` (`cluster.x-k8s.io/v1beta2`): one Kubernetes node-to-be, with
//! its bootstrap config and InfraMachine references.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Condition, ContractRef, MachineAddress, NameRef};

/// `Machine.spec` (also the body of MachineSet and MachineDeployment templates).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Machine",
    plural = "machines",
    shortname = "ma",
    category = "cluster-api",
    namespaced,
    status = "MachineStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(
        name = "NodeName",
        type_ = "string",
        json_path = ".status.nodeRef.name"
    ),
    printcolumn(name = "ProviderID", type_ = "string", json_path = ".spec.providerID"),
    printcolumn(
        name = "FailureDomain",
        type_ = "string",
        json_path = ".spec.failureDomain"
    ),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version")
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The owning Cluster's name.
    pub cluster_name: String,
    /// Bootstrap config reference and the resulting data Secret.
    #[serde(default)]
    pub bootstrap: Bootstrap,
    /// The InfraMachine (a ProxmoxMachine).
    pub infrastructure_ref: ContractRef,
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Copied from the InfraMachine once it is provisioned.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The failure domain the machine must be placed in (KubeadmControlPlane
    /// chooses it; a MachineDeployment copies its template's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// `Machine.spec.bootstrap`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The bootstrap config (a KubeadmConfig).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<ContractRef>,
    /// The Secret holding the bootstrap data (keys `value` and `format`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// `Machine.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineInitialization {
    /// The bootstrap provider created the data Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_secret_created: Option<bool>,
    /// The InfraMachine reported `provisioned` and a providerID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_provisioned: Option<bool>,
}

/// `Machine.status` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    /// Milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<MachineInitialization>,
    /// The workload cluster's Node whose `spec.providerID` equals the machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<NameRef>,
    /// Copied from the InfraMachine.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Copied from the InfraMachine's `status.failureDomain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// `Pending`, `Provisioning`, `Provisioned`, `Running`, `Deleting`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions (`BootstrapConfigReady`, `InfrastructureReady`, `NodeReady`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl Machine {
    /// `status.nodeRef.name`.
    pub fn node_name(&self) -> Option<&str> {
        self.status
            .as_ref()
            .and_then(|s| s.node_ref.as_ref())
            .map(|n| n.name.as_str())
    }

    /// `status.initialization.infrastructureProvisioned`.
    pub fn infrastructure_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false)
    }

    /// `status.phase` (empty when unset).
    pub fn phase(&self) -> &str {
        self.status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("")
    }

    /// The requested failure domain (`None` when unset or empty).
    pub fn failure_domain(&self) -> Option<&str> {
        self.spec
            .failure_domain
            .as_deref()
            .filter(|s| !s.is_empty())
    }
}
