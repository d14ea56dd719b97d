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
    /// How outdated Machines are replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<ControlPlaneRollout>,
}

/// `spec.rollout` (subset: the strategy).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ControlPlaneRollout {
    /// The rollout strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strategy: Option<ControlPlaneRolloutStrategy>,
}

/// `spec.rollout.strategy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneRolloutStrategy {
    /// `RollingUpdate`, the only strategy (and the default).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub type_: Option<String>,
    /// Its parameters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<ControlPlaneRollingUpdate>,
}

/// `spec.rollout.strategy.rollingUpdate`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneRollingUpdate {
    /// Machines allowed above `replicas` during a rollout: 0 or 1, default 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<k8s_openapi::apimachinery::pkg::util::intstr::IntOrString>,
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
    /// `spec.rollout.strategy.rollingUpdate.maxSurge` as a number of
    /// Machines: 1 when unset; `0`/`"0"` is 0, anything else 1 (CAPI
    /// validates it to 0 or 1).
    pub fn max_surge(&self) -> usize {
        use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
        let surge = self
            .spec
            .rollout
            .as_ref()
            .and_then(|r| r.strategy.as_ref())
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|u| u.max_surge.as_ref());
        match surge {
            Some(IntOrString::Int(0)) => 0,
            Some(IntOrString::String(s)) if s.trim() == "0" => 0,
            _ => 1,
        }
    }

    /// `status.initialization.controlPlaneInitialized`.
    pub fn initialized(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.control_plane_initialized)
            .unwrap_or(false)
    }
}
