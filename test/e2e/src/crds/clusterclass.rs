//! `ClusterClass` (`cluster.x-k8s.io/v1beta2`), `KubeadmControlPlaneTemplate`
//! (`controlplane.cluster.x-k8s.io/v1beta2`) and `Cluster.spec.topology`: the
//! fields CAPI's topology controller reads (v1beta2 field names and shapes
//! as in the CAPI release's CRDs; variable schemas, template specs and patch
//! values kept verbatim).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{AnyValue, Opaque};

/// `ClusterClass.spec` (subset: no health checks, naming templates, machine
/// pools or readiness gates).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "ClusterClass",
    plural = "clusterclasses",
    shortname = "cc",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1beta2")
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassSpec {
    /// The InfraCluster template (a ProxmoxClusterTemplate).
    pub infrastructure: InfrastructureClass,
    /// The control plane template and its machines' InfraMachine template.
    pub control_plane: ControlPlaneClass,
    /// The worker classes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersClass>,
    /// The variables a Cluster may set (`spec.topology.variables`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<ClusterClassVariable>,
    /// The patches that turn variables into template fields, applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<ClusterClassPatch>,
}

/// A reference to a template in the ClusterClass's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// `group/version` of the template.
    pub api_version: String,
    /// Kind, e.g. `ProxmoxMachineTemplate`.
    pub kind: String,
    /// Name.
    pub name: String,
}

/// `spec.infrastructure`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InfrastructureClass {
    /// The InfraCluster template.
    pub template_ref: TemplateRef,
}

/// `spec.controlPlane`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneClass {
    /// The control plane template (a KubeadmControlPlaneTemplate).
    pub template_ref: TemplateRef,
    /// The InfraMachine template of the control-plane machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_infrastructure: Option<InfrastructureClass>,
}

/// `spec.workers`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkersClass {
    /// The MachineDeployment classes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_deployments: Vec<MachineDeploymentClass>,
}

/// `spec.workers.machineDeployments[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentClass {
    /// The class name topologies refer to.
    pub class: String,
    /// The bootstrap config template (a KubeadmConfigTemplate).
    pub bootstrap: InfrastructureClass,
    /// The InfraMachine template.
    pub infrastructure: InfrastructureClass,
}

/// `spec.variables[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassVariable {
    /// Variable name (as patches and Clusters name it).
    pub name: String,
    /// A Cluster must set it (after defaulting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Its schema.
    pub schema: VariableSchema,
}

/// `spec.variables[].schema`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct VariableSchema {
    /// The OpenAPI v3 schema (structural; `default`s apply).
    #[serde(rename = "openAPIV3Schema")]
    pub open_api_v3_schema: Opaque,
}

/// `spec.patches[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClassPatch {
    /// Patch name.
    pub name: String,
    /// What it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A Go template deciding whether the patch applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_if: Option<String>,
    /// Selectors and JSON patches.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub definitions: Vec<PatchDefinition>,
}

/// `spec.patches[].definitions[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchDefinition {
    /// Which templates the JSON patches apply to.
    pub selector: PatchSelector,
    /// RFC 6902 operations, in order.
    pub json_patches: Vec<JsonPatch>,
}

/// `spec.patches[].definitions[].selector`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchSelector {
    /// `group/version` of the templates.
    pub api_version: String,
    /// Kind of the templates.
    pub kind: String,
    /// Which of the class's templates of that kind.
    pub match_resources: PatchSelectorMatch,
}

/// `selector.matchResources`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchSelectorMatch {
    /// The control plane template and the control plane's InfraMachine template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// The InfraCluster template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_cluster: Option<bool>,
    /// The templates of these MachineDeployment classes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_deployment_class: Option<ClassNames>,
}

/// `matchResources.machineDeploymentClass`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClassNames {
    /// Class names (`*` matches every class).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
}

/// One RFC 6902 operation of a patch definition.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonPatch {
    /// `add`, `replace` or `remove`.
    pub op: String,
    /// JSON pointer into the template.
    pub path: String,
    /// A literal value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<AnyValue>,
    /// A value from a variable or a template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_from: Option<ValueFrom>,
}

/// `jsonPatches[].valueFrom`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ValueFrom {
    /// A variable (dotted path into object variables, `[i]` into lists).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variable: Option<String>,
    /// A Go template over the variables, rendering YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<String>,
}

/// `KubeadmControlPlaneTemplate.spec`: `template.spec` is a
/// KubeadmControlPlane spec without `replicas`, `version` and the machine
/// template's infrastructure reference (the topology controller adds them).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "controlplane.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "KubeadmControlPlaneTemplate",
    plural = "kubeadmcontrolplanetemplates",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1beta2")
)]
pub struct KubeadmControlPlaneTemplateSpec {
    /// `metadata` and `spec` of the KubeadmControlPlanes made from it, verbatim.
    pub template: Opaque,
}

/// `Cluster.spec.topology` (subset: no machine pools, health checks,
/// per-deployment variable overrides or rollout settings).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Topology {
    /// The ClusterClass.
    pub class_ref: ClassRef,
    /// Kubernetes version of every machine.
    pub version: String,
    /// The control plane.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<ControlPlaneTopology>,
    /// The workers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<WorkersTopology>,
    /// Values of the class's variables.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<ClusterVariable>,
}

/// `topology.classRef`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ClassRef {
    /// ClusterClass name.
    pub name: String,
    /// Its namespace (default: the Cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// `topology.controlPlane`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ControlPlaneTopology {
    /// Control-plane replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// `topology.workers`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkersTopology {
    /// One entry per MachineDeployment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machine_deployments: Vec<MachineDeploymentTopology>,
}

/// `topology.workers.machineDeployments[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineDeploymentTopology {
    /// The MachineDeployment class.
    pub class: String,
    /// Its name in the topology (unique in the Cluster).
    pub name: String,
    /// The failure domain of every machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
    /// Replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
}

/// `topology.variables[]`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ClusterVariable {
    /// The class's variable name.
    pub name: String,
    /// Its value.
    pub value: AnyValue,
}
