//! The CAPI IPAM contract (`ipam.cluster.x-k8s.io/v1beta2`: `IPAddressClaim`,
//! `IPAddress`) and the in-cluster IPAM provider's pool
//! (`ipam.cluster.x-k8s.io/v1alpha2` `InClusterIPPool`).

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::meta::{Condition, NameRef};

/// API group of every IPAM kind.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// Kind of the namespaced in-cluster pool.
pub const IN_CLUSTER_IP_POOL: &str = "InClusterIPPool";

/// `IPPoolReference`: the pool a claim allocates from.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolRef {
    /// API group of the pool kind.
    pub api_group: String,
    /// Pool kind.
    pub kind: String,
    /// Pool name (same namespace).
    pub name: String,
}

/// `IPAddressClaim.spec`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddressClaim",
    plural = "ipaddressclaims",
    category = "cluster-api",
    namespaced,
    status = "IpAddressClaimStatus",
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(name = "PoolName", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(
        name = "Address",
        type_ = "string",
        json_path = ".status.addressRef.name"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimSpec {
    /// The Cluster the claim belongs to (claims of a missing or paused
    /// Cluster are skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    /// The pool to allocate from.
    pub pool_ref: PoolRef,
}

/// `IPAddressClaim.status`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimStatus {
    /// The `IPAddress` allocated for the claim (same name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<NameRef>,
    /// `Ready` (`False` with reason `PoolExhausted` when the pool is full).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// `IPAddress.spec`: one allocated address.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1beta2",
    kind = "IPAddress",
    plural = "ipaddresses",
    category = "cluster-api",
    namespaced,
    label("cluster.x-k8s.io/v1beta2", "v1beta2"),
    printcolumn(name = "Address", type_ = "string", json_path = ".spec.address"),
    printcolumn(name = "PoolName", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressSpec {
    /// The claim the address was allocated for.
    pub claim_ref: NameRef,
    /// The pool it came from.
    pub pool_ref: PoolRef,
    /// The address, without prefix.
    pub address: String,
    /// Prefix length of the subnet.
    pub prefix: i32,
    /// The subnet's gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
}

/// `InClusterIPPool.spec` (the in-cluster IPAM provider's fields).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterIPPool",
    plural = "inclusterippools",
    category = "cluster-api",
    namespaced,
    status = "InClusterIpPoolStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha2"),
    printcolumn(
        name = "Total",
        type_ = "integer",
        json_path = ".status.ipAddresses.total"
    ),
    printcolumn(
        name = "Free",
        type_ = "integer",
        json_path = ".status.ipAddresses.free"
    ),
    printcolumn(
        name = "Used",
        type_ = "integer",
        json_path = ".status.ipAddresses.used"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIpPoolSpec {
    /// Single addresses, `a-b` ranges or CIDRs.
    pub addresses: Vec<String>,
    /// Prefix length of the subnet.
    pub prefix: i64,
    /// Gateway (never allocated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Addresses never allocated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
    /// Also allocate the network/broadcast (v4) or anycast (v6) address.
    #[serde(
        default,
        rename = "allocateReservedIPAddresses",
        skip_serializing_if = "Option::is_none"
    )]
    pub allocate_reserved_ip_addresses: Option<bool>,
}

impl InClusterIpPoolSpec {
    /// The spec in `crates/ipam`'s input shape.
    pub fn to_pool_spec(&self) -> ipam::PoolSpec {
        ipam::PoolSpec {
            addresses: self.addresses.clone(),
            prefix: self.prefix,
            gateway: self.gateway.clone(),
            excluded_addresses: self.excluded_addresses.clone(),
            allocate_reserved_ip_addresses: self.allocate_reserved_ip_addresses.unwrap_or(false),
        }
    }
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
    pub total: i64,
    /// Addresses still free.
    pub free: i64,
    /// Addresses allocated.
    pub used: i64,
    /// Allocated addresses outside the pool.
    pub out_of_range: i64,
}
