//! `ProxmoxCluster` (`infrastructure.cluster.x-k8s.io/v1alpha3`): the
//! InfraCluster of CAPI contract v1beta2, naming every Proxmox VE cluster
//! ("instance") a Kubernetes cluster may use.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{
    Condition, Initialization, IpConfig, IpPoolReference, SchedulerHints, SecretRef,
    TemplateSource, VmIdRange,
};

/// Desired state of a ProxmoxCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha3",
    kind = "ProxmoxCluster",
    plural = "proxmoxclusters",
    singular = "proxmoxcluster",
    shortname = "pxc",
    category = "cluster-api",
    namespaced,
    status = "ProxmoxClusterStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha3"),
    validation = kube::core::Rule::new(
        "has(self.spec.controlPlaneEndpoint) || has(self.spec.controlPlaneEndpointPool) || (has(self.spec.externalManagedControlPlane) && self.spec.externalManagedControlPlane)"
    ).message("spec.controlPlaneEndpoint is required unless spec.controlPlaneEndpointPool is set or spec.externalManagedControlPlane is true"),
    printcolumn(name = "Cluster", type_ = "string", json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']", description = "Owner CAPI Cluster"),
    printcolumn(name = "Mode", type_ = "string", json_path = ".spec.settings.mode", description = "Default, SingleInstance or MultiInstance"),
    printcolumn(name = "Instances", type_ = "string", json_path = ".status.instancesReady", description = "Ready/total Proxmox instances"),
    printcolumn(name = "Endpoint", type_ = "string", json_path = ".spec.controlPlaneEndpoint.host", description = "Control plane endpoint host"),
    printcolumn(name = "Provisioned", type_ = "boolean", json_path = ".status.initialization.provisioned", description = "Infrastructure provisioned"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status", description = "Ready condition"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterSpec {
    /// The API endpoint of the workload cluster (usually a kube-vip address);
    /// required unless `externalManagedControlPlane` is true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Claim the endpoint's host from an IP pool through the CAPI IPAM
    /// contract when `controlPlaneEndpoint` is not set (docs/control-plane-endpoint.md):
    /// the claimed address is written into `controlPlaneEndpoint` and the
    /// Cluster's, once; a set endpoint is never replaced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint_pool: Option<EndpointPool>,
    /// The endpoint comes from an external control plane provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_managed_control_plane: Option<bool>,
    /// Credentials of the default Proxmox cluster (mode `Default` without instances).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretRef>,
    /// Nodes of the default Proxmox cluster; ignored (with a warning condition)
    /// when `settings.instances` is set.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    pub allowed_nodes: Vec<String>,
    /// Scheduling hints for the default Proxmox cluster and the default for instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,
    /// Default IPv4 node address pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.prefix <= 32", "message": "ipv4Config.prefix must be between 0 and 32"}
    ]))]
    pub ipv4_config: Option<IpConfig>,
    /// Default IPv6 node address pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_config: Option<IpConfig>,
    /// Default name servers for machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(min = 2, max = 39)))]
    pub dns_servers: Vec<String>,
    /// Format of `ProxmoxMachine.spec.providerID`; `UUID` when absent.
    #[serde(
        default,
        rename = "providerIDFormat",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id_format: Option<ProviderIdFormat>,
    /// Multi-instance settings: the mode and the Proxmox clusters to use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<ClusterSettings>,
}

/// `host:port` of the workload cluster's API server (CAPI `APIEndpoint`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// Host name or IP address.
    #[schemars(length(min = 1, max = 512))]
    pub host: String,
    /// TCP port, 1..=65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
}

/// `spec.controlPlaneEndpointPool`: where the control-plane endpoint's
/// address is claimed from — an existing pool (`poolRef`), or `addresses`
/// for a pool the provider creates and owns (an `InClusterIPPool` named by
/// `names::endpoint_pool_name`). Exactly one of the two.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointPool {
    /// An IPAM pool of any provider (e.g. `InClusterIPPool`,
    /// `GlobalInClusterIPPool`) to claim the address from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_ref: Option<IpPoolReference>,
    /// Addresses of a pool the provider creates: ranges
    /// (`10.10.0.5-10.10.0.9`), CIDRs or single addresses, one family.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32), inner(length(min = 1, max = 100)))]
    pub addresses: Vec<String>,
    /// Prefix length of the addresses' subnet; required with `addresses`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 128))]
    pub prefix: Option<u8>,
    /// The API server's TCP port; 6443 when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

impl EndpointPool {
    /// The port of the endpoint (6443 when absent).
    pub fn port(&self) -> i32 {
        self.port.unwrap_or(6443)
    }
}

/// `status.controlPlaneEndpointClaim`: the `IPAddressClaim` this cluster's
/// control-plane endpoint is claimed with, recorded before it is created and
/// deleted by this record when the cluster is deleted.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EndpointClaimStatus {
    /// Name of the claim (in the cluster's namespace).
    pub name: String,
    /// The pool it claims from.
    pub pool_ref: IpPoolReference,
    /// The address the pool allocated, once it has.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
}

/// How `ProxmoxMachine.spec.providerID` is written.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ProviderIdFormat {
    /// `proxmox://<smbios1 uuid of the VM, lower case>` — what kubelet gets as
    /// `--provider-id` through the cloud-init instance-id, and what the
    /// Proxmox CCM writes in its `capmox` mode (docs/provider-id.md).
    #[default]
    #[serde(rename = "UUID")]
    Uuid,
    /// `proxmox://<instance>/<vmid>` — what the Proxmox cloud controller manager
    /// writes on Nodes in its default mode (region = instance name,
    /// docs/provider-id.md).
    #[serde(rename = "InstanceVMID")]
    InstanceVmid,
}

impl ProviderIdFormat {
    /// The format's name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderIdFormat::Uuid => "UUID",
            ProviderIdFormat::InstanceVmid => "InstanceVMID",
        }
    }
}

/// How machines are distributed over the listed instances.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ClusterMode {
    /// Legacy single Proxmox cluster (`credentialsRef`), or the first instance.
    #[default]
    Default,
    /// One instance is picked once, recorded in status, and used for every machine.
    SingleInstance,
    /// Machines are spread; every healthy instance is a CAPI failure domain.
    MultiInstance,
}

impl ClusterMode {
    /// The mode's name as written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterMode::Default => "Default",
            ClusterMode::SingleInstance => "SingleInstance",
            ClusterMode::MultiInstance => "MultiInstance",
        }
    }
}

/// `spec.settings`: the mode and the instances.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.mode) || self.mode == 'Default' || (has(self.instances) && size(self.instances) > 0)",
     "message": "settings.instances must list at least one instance when settings.mode is SingleInstance or MultiInstance",
     "fieldPath": ".instances"},
    {"rule": "!has(self.instances) || self.instances.all(i, self.instances.exists_one(j, j.name == i.name))",
     "message": "settings.instances names must be unique",
     "fieldPath": ".instances"}
]))]
pub struct ClusterSettings {
    /// Distribution mode; `Default` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ClusterMode>,
    /// The Proxmox clusters this Kubernetes cluster may use, keyed by `name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub instances: Vec<InstanceSpec>,
}

/// One Proxmox VE cluster (a datacenter) this Kubernetes cluster may use.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceSpec {
    /// Instance name (DNS-1123 label, unique); also its failure-domain name.
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    /// Secret with `url`, `token`, `secret`, optional `root_ca` and `insecure`.
    pub credentials_ref: SecretRef,
    /// Nodes allowed in this instance; empty = every online node.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    pub nodes: Vec<String>,
    /// Default template for machines placed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TemplateSource>,
    /// VMIDs this provider may use in this instance.
    #[serde(default, rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    pub vm_id_range: Option<VmIdRange>,
    /// Whether the instance is a failure domain for control-plane machines; default true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Per-datacenter network overrides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<InstanceNetwork>,
    /// Per-instance scheduling hints (override the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,
    /// Default CPU model and flags of machines placed here (CPU models
    /// differ between Proxmox clusters); a machine's `cpu` overrides each
    /// field it sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<crate::api::machine::CpuSpec>,
    /// Default storage and CD-ROM bus of the bootstrap ISO of machines
    /// placed here (storages differ between Proxmox clusters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_media: Option<crate::api::machine::BootstrapMediaSpec>,
    /// The processor architecture of this instance's VMs (Proxmox `arch`
    /// of `/nodes/{node}/qemu/{vmid}/config`: `x86_64` or `aarch64`), for
    /// Proxmox clusters of aarch64 nodes whose templates do not name it.
    /// A template's own `arch` must agree. Absent: the template's `arch`,
    /// else `x86_64`. On `aarch64` the VM gets OVMF firmware, the `virt`
    /// machine type and no IDE bus (docs/vm-shapes.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<crate::api::machine::VmArch>,
    /// Renames of PCI resource mappings for this Proxmox cluster: a
    /// machine's `pciDevices[].mapping` that is a key here uses the value
    /// as the mapping id in this instance (`GET /cluster/mapping/pci`), so
    /// one machine template can ask for `gpu` while each datacenter calls
    /// its mapping differently (e.g. `{gpu: nvidia-a100}`). Names that are
    /// not keys are used as they are.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pci_mappings: BTreeMap<String, String>,
    /// Proxmox HA for the machines placed here (a machine's `spec.ha`
    /// overrides it); unset: the VMs are not HA resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<HaSettings>,
    /// Proxmox resource pool the VMs placed here are created in (pools are
    /// per Proxmox cluster); a machine's `spec.pool` overrides it. Given in
    /// the clone request, so a token whose rights are granted on
    /// `/pool/<pool>` only can clone; must exist (checked before any clone,
    /// `PoolsReady`); immutable (docs/field-cases.md B34).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        pattern(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+){0,2}$")
    )]
    pub pool: Option<String>,
}

/// Proxmox HA for a machine's VM (docs/field-cases.md B33): after
/// provisioning the VM is made the HA resource `vm:<vmid>` (requested state
/// `started`) and placed by the HA group (PVE 8) or the node-affinity HA
/// rule (PVE 9) named here. The Proxmox major version of the instance
/// (`GET /version`) says which of the two is used, so a spec naming both
/// works on either version; the group or rule must exist in Proxmox.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HaSettings {
    /// HA group (PVE 8), `/cluster/ha/groups/{group}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 128), pattern(r"^[a-z][a-z0-9_-]+$"))]
    pub group: Option<String>,
    /// Node-affinity HA rule (PVE 9), `/cluster/ha/rules/{rule}`: the VM is
    /// added to its resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 128), pattern(r"^[a-z][a-z0-9_-]+$"))]
    pub rule: Option<String>,
    /// `false` turns HA off (a machine's way out of its instance's HA).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl HaSettings {
    /// Whether these settings ask for HA: not disabled, and a group or a rule named.
    pub fn wanted(&self) -> bool {
        self.enabled != Some(false) && (self.group.is_some() || self.rule.is_some())
    }
}

impl InstanceSpec {
    /// Whether control-plane machines may be placed here (default true).
    pub fn is_control_plane(&self) -> bool {
        self.control_plane.unwrap_or(true)
    }
}

/// Network overrides of one instance: each datacenter usually has its own
/// subnet and bridge.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceNetwork {
    /// IPv4 node address pool of this instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.prefix <= 32", "message": "ipv4Config.prefix must be between 0 and 32"}
    ]))]
    pub ipv4_config: Option<IpConfig>,
    /// IPv6 node address pool of this instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6_config: Option<IpConfig>,
    /// Name servers for machines in this instance.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(min = 2, max = 39)))]
    pub dns_servers: Vec<String>,
    /// Default bridge for `net0` in this instance (e.g. `vmbr0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub bridge: Option<String>,
}

/// Observed state of a ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterStatus {
    /// CAPI contract v1beta2 `status.initialization.provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// `Ready`, `CredentialsReady`, `InstancesReady`, `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// CAPI failure domains as a list (contract v1beta2): in `MultiInstance` one per
    /// healthy instance, in the other modes the instance in use.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub failure_domains: Vec<FailureDomain>,
    /// Per-instance health and distribution.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub instances: Vec<InstanceStatus>,
    /// `ready/total` instances, for `kubectl get` (e.g. `2/3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances_ready: Option<String>,
    /// IP pools created for this cluster (per instance and family).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_pools: Vec<IpPoolStatus>,
    /// The claim of the control-plane endpoint's address
    /// (`spec.controlPlaneEndpointPool`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint_claim: Option<EndpointClaimStatus>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A CAPI failure domain (contract v1beta2 list entry).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Failure-domain name = instance name.
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may be placed here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Non-secret attributes, e.g. `pveVersion`, `nodes`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

/// Health and distribution of one instance.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceStatus {
    /// Instance name.
    pub name: String,
    /// Whether the instance can be used: the last probe succeeded (credentials valid, API reachable, a node online), or fewer than three probes in a row got no answer (5xx, timeout) and the last good state is held (docs/failure-domains.md).
    pub ready: bool,
    /// ProxmoxMachines of this cluster placed in this instance.
    #[serde(default)]
    pub machines: u32,
    /// Online nodes (allowed ones only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Proxmox VE version reported by `/version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// What is wrong, when not ready; never carries secret values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `SingleInstance`: the instance chosen for every machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selected: Option<bool>,
    /// Privileges the token lacks for the features in use, checked against
    /// `GET /access/permissions` with the table of the instance's Proxmox
    /// VE major version (docs/field-cases.md B31). Only the operations that
    /// need them wait.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_privileges: Vec<MissingPrivilege>,
    /// What is wrong with the instance's resource pool (`pool`): it does
    /// not exist, or the token may not read it (`Pool.Audit` on
    /// `/pool/<pool>`). Machines using it wait; no clone is made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool_problem: Option<String>,
}

/// A privilege an instance's token lacks.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MissingPrivilege {
    /// The privilege (`VM.GuestAgent.Audit`; alternatives joined by ` or `).
    pub privilege: String,
    /// The ACL path template it is needed on (`/vms/{vmid}`, `/storage/{storage}`, `/`).
    pub path: String,
    /// The operation that needs it and waits for it: `agentRead`,
    /// `agentExec`, `haWrite`, `vmClone`, … (pve-client's `Endpoint::name`).
    pub operation: String,
}

/// A pool this cluster's reconciler created, for one instance and family.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpPoolStatus {
    /// Instance name, or absent for the cluster-wide default pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<String>,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// API group of the pool (`ipam.cluster.x-k8s.io`).
    pub api_group: String,
    /// Kind of the pool (`InClusterIPPool`).
    pub kind: String,
    /// Pool name (in the cluster's namespace).
    pub name: String,
}

impl ProxmoxClusterSpec {
    /// The effective mode (`Default` when unset).
    pub fn mode(&self) -> ClusterMode {
        self.settings
            .as_ref()
            .and_then(|s| s.mode)
            .unwrap_or_default()
    }

    /// The listed instances (empty in legacy `Default` mode).
    pub fn instances(&self) -> &[InstanceSpec] {
        self.settings
            .as_ref()
            .map(|s| s.instances.as_slice())
            .unwrap_or(&[])
    }

    /// The instance with this name.
    pub fn instance(&self, name: &str) -> Option<&InstanceSpec> {
        self.instances().iter().find(|i| i.name == name)
    }

    /// The providerID format (`UUID` when unset).
    pub fn provider_id_format(&self) -> ProviderIdFormat {
        self.provider_id_format.unwrap_or_default()
    }
}
