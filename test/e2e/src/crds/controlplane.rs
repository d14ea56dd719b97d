//! `KubeadmControlPlane` (`controlplane.cluster.x-k8s.io/v1beta2`): N
//! control-plane Machines spread over the failure domains marked `controlPlane`.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Condition, ContractRef, ObjectMetaTemplate, Opaque};

/// `KubeadmControlPlane.spec` (subset; `kubeadmConfigSpec` kept verbatim).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlane",
    plural = "kubeadmcontrolplanes",
    shortname = "kcp",
    category = "cluster-api",
    namespaced,
    status = "KubeadmControlPlaneStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Initialized",
        type_ = "boolean",
        json_path = ".status.initialization.controlPlaneInitialized"
    ),
    printcolumn(name = "Desired", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Current", type_ = "integer", json_path = ".status.replicas"),
    printcolumn(name = "Ready", type_ = "integer", json_path = ".status.readyReplicas"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.version")
)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneSpec {
    /// Desired number of control-plane Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Kubernetes version of the control plane.
    pub version: String,
    /// How each control-plane Machine is made.
    pub machine_template: ControlPlaneMachineTemplate,
    /// The kubeadm configuration (init for the first machine, join for the others).
    #[serde(default, skip_serializing_if = "Opaque::is_empty")]
    pub kubeadm_config_spec: Opaque,
}

/// `spec.machineTemplate`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneMachineTemplate {
    /// Labels and annotations for the Machines.
    #[serde(default, skip_serializing_if = "ObjectMetaTemplate::is_empty")]
    pub metadata: ObjectMetaTemplate,
    /// The InfraMachine template.
    pub spec: ControlPlaneMachineTemplateSpec,
}

/// `spec.machineTemplate.spec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneMachineTemplateSpec {
    /// The InfraMachine template (a ProxmoxMachineTemplate).
    pub infrastructure_ref: ContractRef,
}

/// `KubeadmControlPlane.status.initialization`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneInitialization {
    /// The first control-plane node is up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_initialized: Option<bool>,
}

/// `KubeadmControlPlane.status` (subset).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubeadmControlPlaneStatus {
    /// Milestones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<ControlPlaneInitialization>,
    /// Control-plane Machines that exist (not being deleted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Those with a Node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_replicas: Option<i32>,
    /// Available ones (same as ready here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub available_replicas: Option<i32>,
    /// Those made from the current machine template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_to_date_replicas: Option<i32>,
    /// The label selector of the control-plane Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// The lowest Kubernetes version among the Machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The generation last acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

impl KubeadmControlPlane {
    /// `status.initialization.controlPlaneInitialized`.
    pub fn initialized(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false)
    }
}
