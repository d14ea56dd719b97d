//! The CAPI IPAM contract (`ipam.cluster.x-k8s.io/v1beta2`: `IPAddressClaim`,
//! `IPAddress`) and the in-cluster IPAM provider's `InClusterIPPool`
//! (`ipam.cluster.x-k8s.io/v1alpha2`), the pool kind this provider creates.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::Condition;

/// API group of the IPAM contract.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// Kind of the namespaced in-cluster pool.
pub const IN_CLUSTER_POOL_KIND: &str = "InClusterIPPool";

/// A typed reference to a pool (`IPPoolReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolRef {
    /// API group of the pool kind.
    pub api_group: String,
    /// Pool kind.
    pub kind: String,
    /// Pool name.
    pub name: String,
}

/// A local reference by name.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameRef {
    /// Object name in the same namespace.
    pub name: String,
}

/// A request for one address from a pool.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddressClaim",
    plural = "ipaddressclaims",
    namespaced,
    status = "IpAddressClaimStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimSpec {
    /// The Cluster this claim belongs to (the IPAM provider skips claims of
    /// unknown clusters and honours the cluster's pause).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The pool to allocate from.
    pub pool_ref: PoolRef,
}

/// `IPAddressClaim.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimStatus {
    /// The `IPAddress` allocated for this claim (same name by convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<NameRef>,
    /// Conditions, e.g. `Ready=False` with reason `PoolExhausted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// An allocated address.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddress",
    plural = "ipaddresses",
    namespaced
)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressSpec {
    /// The claim this address was allocated for.
    pub claim_ref: NameRef,
    /// The pool it came from.
    pub pool_ref: PoolRef,
    /// The address (no prefix).
    pub address: String,
    /// Prefix length of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<i32>,
    /// Gateway of the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// A namespaced in-cluster pool (the in-cluster IPAM provider's kind).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterIPPool",
    plural = "inclusterippools",
    namespaced,
    status = "InClusterIpPoolStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIpPoolSpec {
    /// Single addresses, `a-b` ranges or CIDRs.
    pub addresses: Vec<String>,
    /// Prefix length of the subnet.
    pub prefix: i32,
    /// Gateway (never allocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Addresses never allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
    /// Also allocate network/broadcast (v4) or anycast (v6) addresses.
    #[serde(
        default,
        rename = "allocateReservedIPAddresses",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocate_reserved_ip_addresses: Option<bool>,
}

/// `InClusterIPPool.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIpPoolStatus {
    /// Address counts.
    #[serde(
        default,
        rename = "ipAddresses",
        skip_serializing_if = "Option::is_none"
    )]
    pub ip_addresses: Option<PoolCounts>,
}

/// Address counts of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolCounts {
    /// Addresses the pool can hand out.
    #[serde(default)]
    pub total: i64,
    /// Addresses still free.
    #[serde(default)]
    pub free: i64,
    /// Addresses allocated.
    #[serde(default)]
    pub used: i64,
    /// Allocated addresses no longer inside the pool.
    #[serde(default)]
    pub out_of_range: i64,
}
