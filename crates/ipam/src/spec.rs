//! The unvalidated input of a pool, as users write it.

use serde::{Deserialize, Serialize};

/// A pool as written in a spec: the fields of the in-cluster IPAM provider's
/// `InClusterIPPool.spec` (`ipam.cluster.x-k8s.io/v1alpha2`), which are also
/// the fields of this provider's `ipv4Config` / `ipv6Config` (plus `metric`,
/// which is a routing concern and not part of a pool).
///
/// Serialises with the Kubernetes field names (`addresses`, `prefix`,
/// `gateway`, `excludedAddresses`, `allocateReservedIPAddresses`); unset
/// optional fields are omitted. Turn it into a validated [`crate::Pool`] with
/// [`crate::Pool::parse`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PoolSpec {
    /// Entries: single addresses, inclusive `a-b` ranges or CIDRs, all of
    /// one family, all inside the subnet formed by the pool's lowest
    /// address and `prefix`. Overlapping entries are allowed (union).
    pub addresses: Vec<String>,
    /// The subnet's prefix length in bits: `0..=32` for IPv4, `0..=128` for
    /// IPv6. Wide (`i64`) so any integer field converts losslessly and an
    /// out-of-range value gets a clear error instead of a wrap-around.
    pub prefix: i64,
    /// The default gateway, inside the subnet; never allocated. `None` and
    /// `""` both mean "no gateway" (the in-cluster IPAM provider treats the
    /// empty string as unset; IPv6 pools may rely on router advertisements).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Entries (same three forms) never allocated. They need not lie inside the subnet.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excluded_addresses: Vec<String>,
    /// When `true`, the network and broadcast addresses (IPv4) or the
    /// subnet-router anycast address (IPv6, the subnet's first address,
    /// RFC 4291 section 2.6.1) may be allocated too. Default `false`.
    #[serde(
        default,
        rename = "allocateReservedIPAddresses",
        skip_serializing_if = "is_false"
    )]
    pub allocate_reserved_ip_addresses: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}
