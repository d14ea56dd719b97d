//! `MachineSet` and `MachineDeployment` (`cluster.x-k8s.io/v1beta2`):
//! replicas of one machine template, pinned to one failure domain.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine::MachineSpec;
use super::meta::{Condition, ObjectMetaTemplate};

/// The machine template of a MachineSet or MachineDeployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct MachineTemplateSpec {
    /// Labels and annotations for the Machines (and their infra and bootstrap objects).
    #[serde(default, skip_serializing_if = "ObjectMetaTemplate::is_empty")]
    pub metadata: ObjectMetaTemplate,
    /// The Machine spec; `infrastructureRef` and `bootstrap.configRef` name templates.
    pub spec: MachineSpec,
}

/// `spec.deletion`: which machines go first on scale-down.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct DeletionSpec {
    /// `Random` (default), `Newest` or `Oldest`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub order: Option<String>,
}

/// `MachineSet.spec`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineSet",
    plural = "machinesets",
    shortname = "ms",
    category = "cluster-api",
    namespaced,
    status = "ReplicaStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSetSpec {
    /// The owning Cluster's name.
    pub cluster_name: String,
    /// Desired number of Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Selects the Machines of this set (must match the template's labels).
    pub selector: LabelSelector,
    /// The Machine template.
    pub template: MachineTemplateSpec,
    /// Scale-down order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DeletionSpec>,
}

/// `MachineDeployment.spec`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "MachineDeployment",
    plural = "machinedeployments",
    shortname = "md",
    category = "cluster-api",
    namespaced,
    status = "ReplicaStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".spec.clusterName"),
    printcolumn(
        name = "FailureDomain",
        type_ = "string",
        json_path = ".spec.template.spec.failureDomain"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentSpec {
    /// The owning Cluster's name.
    pub cluster_name: String,
    /// Desired number of Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Selects the Machines of this deployment.
    pub selector: LabelSelector,
    /// The Machine template (its `spec.failureDomain` pins every replica).
    pub template: MachineTemplateSpec,
    /// Scale-down order, passed to the MachineSet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion: Option<DeletionSpec>,
    /// Paused: the deployment is not reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

/// Status of MachineSets and MachineDeployments (v1beta2 counters).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaStatus {
    /// Machines that exist (not counting ones being deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Machines whose Node exists (`status.nodeRef` set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Ready Machines (no `minReadySeconds` modelled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Machines created from the current template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// The label selector as a string (for the scale subresource).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// MachineDeployment only: `ScalingUp`, `ScalingDown` or `Running`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
