//! `ProxmoxCluster` (`infrastructure.cluster.x-k8s.io/v1alpha2`): the
//! InfraCluster of the Go provider (CAPMOX v0.8, v0.9), one Proxmox VE
//! cluster per Kubernetes cluster. Served for clusters made with it and
//! converted to and from `v1alpha3` (`docs/migrating-from-capmox.md`).

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;

use super::common::{Condition, Initialization, LocalObjectReference, ZONE_PATTERN, rule};

/// Desired state of a `v1alpha2` ProxmoxCluster (also the body of a
/// `v1alpha2` ProxmoxClusterTemplate). The ProxmoxCluster's `spec` carries
/// one more rule, [`cluster_spec_rules`], which the template's does not.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxCluster",
    plural = "proxmoxclusters",
    singular = "proxmoxcluster",
    category = "cluster-api",
    namespaced,
    status = "ProxmoxClusterStatus",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Cluster"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "Cluster infrastructure is ready"
    ),
    printcolumn(
        name = "Endpoint",
        type_ = "string",
        json_path = ".spec.controlPlaneEndpoint",
        description = "API Endpoint"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterSpec {
    /// Proxmox nodes VMs may be cloned onto.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Vec<String>,
    /// The workload cluster's API endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "port must be within 1-65535", "rule": "self.port > 0 && self.port < 65536"}
    ]))]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Secret with the Proxmox credentials; the controller's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretReference>,
    /// Name servers of the machines.
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,
    /// The endpoint is set by an external control plane provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub external_managed_control_plane: Option<bool>,
    /// IPv4 node address pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "IPv4Config addresses must be provided", "rule": "self.addresses.size() > 0"}
    ]))]
    pub ipv4_config: Option<IpConfig>,
    /// IPv6 node address pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "IPv6Config addresses must be provided", "rule": "self.addresses.size() > 0"}
    ]))]
    pub ipv6_config: Option<IpConfig>,
    /// Scheduling hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,
    /// Address pools per deployment zone, keyed by `zone`.
    #[serde(default, rename = "zoneConfig", skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["zone"]))]
    pub zone_configs: Vec<ZoneConfig>,
}

/// `host` and `port` of the workload cluster's API server; at least one.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct ApiEndpoint {
    /// Host name or IP address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub host: Option<String>,
    /// TCP port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// A `corev1.SecretReference`: name and namespace, both optional in the schema.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct SecretReference {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the Secret; the ProxmoxCluster's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// An address pool of one IP family.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpConfig {
    /// Addresses, `a-b` ranges or CIDRs.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub addresses: Vec<String>,
    /// The gateway (required by the schema; absent only in a down-converted
    /// `v1alpha3` pool without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required, length(min = 1))]
    pub gateway: Option<String>,
    /// Route metric of the default gateway; the schema defaults it to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 100))]
    pub metric: Option<i32>,
    /// Prefix length.
    #[schemars(range(min = 1, max = 128))]
    pub prefix: i32,
}

/// Scheduling hints.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerHints {
    /// Node memory counted in percent (100 = exact, 0 = ignore memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub memory_adjustment: Option<i64>,
}

/// Address pools of one deployment zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneConfig {
    /// Name servers of the zone's machines.
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,
    /// IPv4 pool of the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "IPv4Config addresses must be provided", "rule": "self.addresses.size() > 0"}
    ]))]
    pub ipv4_config: Option<IpConfig>,
    /// IPv6 pool of the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "IPv6Config addresses must be provided", "rule": "self.addresses.size() > 0"}
    ]))]
    pub ipv6_config: Option<IpConfig>,
    /// Zone name.
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: String,
}

/// Observed state of a `v1alpha2` ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterStatus {
    /// `Ready`, `ProxmoxAvailable`, `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The InClusterIPPools the Go provider created.
    #[serde(
        default,
        rename = "inClusterIPPoolRef",
        skip_serializing_if = "Vec::is_empty"
    )]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub in_cluster_ip_pool_ref: Vec<LocalObjectReference>,
    /// The InClusterIPPools per zone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["zone"]))]
    pub in_cluster_zone_ref: Vec<InClusterZoneRef>,
    /// CAPI contract v1beta2 `status.initialization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// Which Proxmox node each machine was placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_locations: Option<NodeLocations>,
}

/// The pools of one zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InClusterZoneRef {
    /// The IPv4 pool.
    #[serde(
        default,
        rename = "inClusterIPPoolRefV4",
        skip_serializing_if = "Option::is_none"
    )]
    pub in_cluster_ip_pool_ref_v4: Option<LocalObjectReference>,
    /// The IPv6 pool.
    #[serde(
        default,
        rename = "inClusterIPPoolRefV6",
        skip_serializing_if = "Option::is_none"
    )]
    pub in_cluster_ip_pool_ref_v6: Option<LocalObjectReference>,
    /// The zone; the schema defaults it to `default`.
    #[serde(default = "default_zone")]
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: String,
}

/// The CEL rules of a ProxmoxCluster's `spec` (not of a template's): at
/// least one IP pool.
pub fn cluster_spec_rules() -> Vec<ValidationRule> {
    vec![rule(
        "self.ipv4Config != null || self.ipv6Config != null",
        "at least one ip config must be set, either ipv4Config or ipv6Config",
    )]
}

fn default_zone() -> String {
    "default".to_string()
}

/// Nodes of the control-plane and worker machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocations {
    /// Control-plane machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub control_plane: Vec<NodeLocation>,
    /// Worker machines.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub workers: Vec<NodeLocation>,
}

/// One machine's node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NodeLocation {
    /// The ProxmoxMachine.
    pub machine: LocalObjectReference,
    /// The Proxmox node.
    #[schemars(length(min = 1))]
    pub node: String,
    /// The machine's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: Option<String>,
}
