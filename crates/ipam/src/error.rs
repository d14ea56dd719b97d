//! The crate's one error type.
//!
//! Every message names the offending field (relative to the pool spec:
//! `addresses[2]`, `gateway`, `prefix`, `excludedAddresses[0]`) and the entry
//! as the user wrote it. Callers that validate a pool nested in a bigger
//! object prefix the path with [`IpamError::at`], e.g.
//! `spec.settings.instances[1].network.ipv4Config.addresses[2]: ...`.

use std::net::IpAddr;

use ipnet::IpNet;

use crate::family::Family;
use crate::range::AddrRange;

/// A problem with a pool spec, between pools, or in an allocation.
///
/// Validation ([`crate::Pool::parse`], [`crate::check_disjoint`],
/// [`crate::check_outside`]) returns all problems as a `Vec`; allocation
/// returns one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    /// The pool has no `addresses` at all (the in-cluster IPAM provider
    /// requires at least one).
    #[error("{field}: at least one address, range or CIDR is required")]
    EmptyPool {
        /// The field path, `addresses`.
        field: String,
    },

    /// An entry is not a valid single address, `a-b` range or CIDR.
    #[error("{field}: \"{entry}\" is invalid: {reason}")]
    InvalidEntry {
        /// The field path, e.g. `addresses[2]` or `gateway`.
        field: String,
        /// The entry as written.
        entry: String,
        /// What is wrong, e.g. `octet "1391" has more than 3 digits`.
        reason: String,
    },

    /// A range `a-b` whose start is above its end.
    #[error("{field}: \"{entry}\" is a reversed range")]
    ReversedRange {
        /// The field path, e.g. `addresses[2]`.
        field: String,
        /// The entry as written.
        entry: String,
    },

    /// A CIDR entry with bits set after the prefix (`10.0.0.5/24`), which is
    /// ambiguous: the whole network or one address?
    #[error(
        "{field}: \"{entry}\" has host bits set: write \"{network}\" for the whole network or \"{address}\" for one address"
    )]
    HostBitsSet {
        /// The field path, e.g. `addresses[0]`.
        field: String,
        /// The entry as written.
        entry: String,
        /// The network the entry lies in (host bits cleared).
        network: IpNet,
        /// The address part of the entry.
        address: IpAddr,
    },

    /// An entry or the gateway is of the other family than the pool.
    #[error("{field}: \"{entry}\" is {found} but the pool is {expected}")]
    FamilyMismatch {
        /// The field path, e.g. `addresses[1]` or `gateway`.
        field: String,
        /// The entry as written.
        entry: String,
        /// The family of the entry.
        found: Family,
        /// The family of the pool (from the caller, or from its first address).
        expected: Family,
    },

    /// The pool's prefix length is outside `0..=32` (IPv4) or `0..=128` (IPv6).
    #[error("{field} {prefix} is out of range{} (0..={})", family_suffix(.family), max_prefix(.family))]
    PrefixOutOfRange {
        /// The field path, `prefix`.
        field: String,
        /// The prefix length as given.
        prefix: i64,
        /// The pool's family, when it could be determined.
        family: Option<Family>,
    },

    /// An entry does not lie inside the pool's subnet (lowest address of the
    /// pool + `prefix`, as the in-cluster IPAM provider infers it).
    #[error(
        "{field}: \"{entry}\" is outside {subnet}: keep every entry in the subnet of the lowest address, or use a shorter prefix"
    )]
    EntryOutsideSubnet {
        /// The field path, e.g. `addresses[3]`.
        field: String,
        /// The entry as written.
        entry: String,
        /// The pool's subnet.
        subnet: IpNet,
    },

    /// The gateway does not lie inside the pool's subnet.
    #[error("{field} {gateway} is outside {subnet}: write the router's address in {subnet}")]
    GatewayOutsideSubnet {
        /// The field path, `gateway`.
        field: String,
        /// The gateway.
        gateway: IpAddr,
        /// The pool's subnet.
        subnet: IpNet,
    },

    /// Two pools can hand out the same address (docs/field-cases.md B16).
    #[error("pools \"{first}\" and \"{second}\" overlap at {overlap}")]
    PoolsOverlap {
        /// The name of the first pool.
        first: String,
        /// The name of the second pool.
        second: String,
        /// The lowest range of addresses both pools can allocate.
        overlap: AddrRange,
    },

    /// An address that must stay outside the node pools (e.g. the control
    /// plane endpoint) could be allocated to a node.
    #[error("{field} {address} is inside pool \"{pool}\"")]
    AddressInPool {
        /// The field path of the address, e.g. `controlPlaneEndpoint.host`.
        field: String,
        /// The address.
        address: IpAddr,
        /// The name of the pool that contains it.
        pool: String,
    },

    /// An entry reaches into a special-purpose block no host uses as its own
    /// address (loopback, link-local, multicast, …; see [`crate::check_usable`]).
    #[error(
        "{field}: \"{entry}\" includes addresses of {what} {block}, which no host can have: write addresses of the node subnet"
    )]
    UnusableEntry {
        /// The field path, e.g. `addresses[1]`.
        field: String,
        /// The entry, normalised.
        entry: String,
        /// The block it reaches into.
        block: IpNet,
        /// The block's name, e.g. `the loopback block`.
        what: &'static str,
    },

    /// No address of an entry is ever allocated (it is the network, broadcast
    /// or gateway address, or excluded).
    #[error(
        "{field}: \"{entry}\" gives no address to a machine: it {reason}; remove it or list host addresses"
    )]
    NothingAllocatable {
        /// The field path, e.g. `addresses[0]`.
        field: String,
        /// The entry, normalised.
        entry: String,
        /// Why, completing "it …", e.g. `is the gateway`.
        reason: String,
    },

    /// Two entries of one pool overlap (the union is allocated, but the
    /// overlap is almost always a typo in one of them).
    #[error("{field}: \"{entry}\" overlaps {other} at {overlap}: list each address once")]
    OverlappingEntries {
        /// The field path of the later entry, e.g. `addresses[2]`.
        field: String,
        /// The later entry, normalised.
        entry: String,
        /// The field path of the earlier entry it overlaps.
        other: String,
        /// The lowest common range.
        overlap: AddrRange,
    },

    /// The gateway cannot be a router address of the subnet.
    #[error(
        "{field} {gateway} cannot be the gateway: it {reason}; write the router's address in the subnet"
    )]
    UnusableGateway {
        /// The field path, `gateway`.
        field: String,
        /// The gateway.
        gateway: IpAddr,
        /// Why, completing "it …", e.g. `is the network address of 10.0.0.0/24`.
        reason: String,
    },

    /// Every allocatable address of the pool is in use (docs/field-cases.md B15).
    #[error("pool \"{pool}\" is exhausted: {}", exhausted_detail(*.size))]
    Exhausted {
        /// The name of the pool.
        pool: String,
        /// The number of allocatable addresses of the pool.
        size: u128,
    },

    /// A specific address was asked for that the pool never allocates.
    #[error("{address} cannot be allocated from pool \"{pool}\": it {reason}")]
    NotAllocatable {
        /// The name of the pool.
        pool: String,
        /// The address asked for.
        address: IpAddr,
        /// Why, e.g. `is the gateway`, `is excluded`, `is outside the pool`.
        reason: &'static str,
    },

    /// A specific address was asked for that is already in use.
    #[error("{address} is already in use in pool \"{pool}\"")]
    AddressInUse {
        /// The name of the pool.
        pool: String,
        /// The address asked for.
        address: IpAddr,
    },
}

impl IpamError {
    /// A short, stable, snake_case name of the variant, for metric labels and
    /// event reasons (never the message, which carries user input).
    pub fn category(&self) -> &'static str {
        match self {
            IpamError::EmptyPool { .. } => "empty_pool",
            IpamError::InvalidEntry { .. } => "invalid_entry",
            IpamError::ReversedRange { .. } => "reversed_range",
            IpamError::HostBitsSet { .. } => "host_bits_set",
            IpamError::FamilyMismatch { .. } => "family_mismatch",
            IpamError::PrefixOutOfRange { .. } => "prefix_out_of_range",
            IpamError::EntryOutsideSubnet { .. } => "entry_outside_subnet",
            IpamError::GatewayOutsideSubnet { .. } => "gateway_outside_subnet",
            IpamError::PoolsOverlap { .. } => "pools_overlap",
            IpamError::AddressInPool { .. } => "address_in_pool",
            IpamError::UnusableEntry { .. } => "unusable_entry",
            IpamError::NothingAllocatable { .. } => "nothing_allocatable",
            IpamError::OverlappingEntries { .. } => "overlapping_entries",
            IpamError::UnusableGateway { .. } => "unusable_gateway",
            IpamError::Exhausted { .. } => "pool_exhausted",
            IpamError::NotAllocatable { .. } => "not_allocatable",
            IpamError::AddressInUse { .. } => "address_in_use",
        }
    }

    /// The field path the error is about, for the variants that have one.
    pub fn field(&self) -> Option<&str> {
        match self {
            IpamError::EmptyPool { field }
            | IpamError::InvalidEntry { field, .. }
            | IpamError::ReversedRange { field, .. }
            | IpamError::HostBitsSet { field, .. }
            | IpamError::FamilyMismatch { field, .. }
            | IpamError::PrefixOutOfRange { field, .. }
            | IpamError::EntryOutsideSubnet { field, .. }
            | IpamError::GatewayOutsideSubnet { field, .. }
            | IpamError::AddressInPool { field, .. }
            | IpamError::UnusableEntry { field, .. }
            | IpamError::NothingAllocatable { field, .. }
            | IpamError::OverlappingEntries { field, .. }
            | IpamError::UnusableGateway { field, .. } => Some(field),
            IpamError::PoolsOverlap { .. }
            | IpamError::Exhausted { .. }
            | IpamError::NotAllocatable { .. }
            | IpamError::AddressInUse { .. } => None,
        }
    }

    /// The message without its leading field path, for callers that report
    /// `(field, message)` pairs: `addresses[2]: "10.0.0.9-10.0.0.3" is a
    /// reversed range` gives `"10.0.0.9-10.0.0.3" is a reversed range`,
    /// `gateway 10.0.1.1 is outside 10.0.0.0/24: …` gives `10.0.1.1 is outside
    /// 10.0.0.0/24: …`. Variants without a field give the whole message.
    pub fn detail(&self) -> String {
        let text = self.to_string();
        match self.field().and_then(|f| text.strip_prefix(f)) {
            Some(rest) => rest.trim_start_matches(':').trim_start().to_owned(),
            None => text,
        }
    }

    /// The same error with its field path placed under `parent`:
    /// `addresses[2]` becomes `spec.ipv4Config.addresses[2]` for
    /// `at("spec.ipv4Config")`. Variants without a field, and an empty
    /// `parent`, leave the error unchanged.
    #[must_use]
    pub fn at(mut self, parent: &str) -> IpamError {
        if parent.is_empty() {
            return self;
        }
        match &mut self {
            IpamError::EmptyPool { field }
            | IpamError::InvalidEntry { field, .. }
            | IpamError::ReversedRange { field, .. }
            | IpamError::HostBitsSet { field, .. }
            | IpamError::FamilyMismatch { field, .. }
            | IpamError::PrefixOutOfRange { field, .. }
            | IpamError::EntryOutsideSubnet { field, .. }
            | IpamError::GatewayOutsideSubnet { field, .. }
            | IpamError::AddressInPool { field, .. }
            | IpamError::UnusableEntry { field, .. }
            | IpamError::NothingAllocatable { field, .. }
            | IpamError::UnusableGateway { field, .. } => {
                *field = format!("{parent}.{field}");
            }
            IpamError::OverlappingEntries { field, other, .. } => {
                *field = format!("{parent}.{field}");
                *other = format!("{parent}.{other}");
            }
            IpamError::PoolsOverlap { .. }
            | IpamError::Exhausted { .. }
            | IpamError::NotAllocatable { .. }
            | IpamError::AddressInUse { .. } => {}
        }
        self
    }
}

fn family_suffix(family: &Option<Family>) -> String {
    family.map(|f| format!(" for {f}")).unwrap_or_default()
}

fn max_prefix(family: &Option<Family>) -> u8 {
    family.map_or(Family::V6.max_prefix(), Family::max_prefix)
}

fn exhausted_detail(size: u128) -> String {
    match size {
        0 => "it has no allocatable addresses".to_owned(),
        1 => "its only address is in use".to_owned(),
        n => format!("all {n} addresses are in use"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_field_and_entry() {
        let e = IpamError::ReversedRange {
            field: "addresses[2]".into(),
            entry: "10.0.0.9-10.0.0.3".into(),
        };
        assert_eq!(
            e.to_string(),
            "addresses[2]: \"10.0.0.9-10.0.0.3\" is a reversed range"
        );
        let e = IpamError::PrefixOutOfRange {
            field: "prefix".into(),
            prefix: 33,
            family: Some(Family::V4),
        };
        assert_eq!(e.to_string(), "prefix 33 is out of range for IPv4 (0..=32)");
        let e = IpamError::PrefixOutOfRange {
            field: "prefix".into(),
            prefix: -1,
            family: None,
        };
        assert_eq!(e.to_string(), "prefix -1 is out of range (0..=128)");
    }

    #[test]
    fn exhausted_wording_by_size() {
        let e = |size| IpamError::Exhausted {
            pool: "dc-a-v4".into(),
            size,
        };
        assert_eq!(
            e(11).to_string(),
            "pool \"dc-a-v4\" is exhausted: all 11 addresses are in use"
        );
        assert_eq!(
            e(1).to_string(),
            "pool \"dc-a-v4\" is exhausted: its only address is in use"
        );
        assert_eq!(
            e(0).to_string(),
            "pool \"dc-a-v4\" is exhausted: it has no allocatable addresses"
        );
        assert_eq!(e(0).category(), "pool_exhausted");
        assert_eq!(e(0).field(), None);
    }

    #[test]
    fn at_prefixes_the_field_path() {
        let e = IpamError::GatewayOutsideSubnet {
            field: "gateway".into(),
            gateway: "10.0.1.1".parse().unwrap(),
            subnet: "10.0.0.0/24".parse().unwrap(),
        }
        .at("spec.ipv4Config");
        assert_eq!(e.field(), Some("spec.ipv4Config.gateway"));
        assert_eq!(
            e.to_string(),
            "spec.ipv4Config.gateway 10.0.1.1 is outside 10.0.0.0/24: write the router's address in 10.0.0.0/24"
        );
        assert_eq!(e.clone().at(""), e);
        assert_eq!(
            e.detail(),
            "10.0.1.1 is outside 10.0.0.0/24: write the router's address in 10.0.0.0/24"
        );
    }

    #[test]
    fn detail_drops_the_field_path_only() {
        let e = IpamError::ReversedRange {
            field: "addresses[2]".into(),
            entry: "10.0.0.9-10.0.0.3".into(),
        }
        .at("spec.ipv4Config");
        assert_eq!(e.detail(), "\"10.0.0.9-10.0.0.3\" is a reversed range");
        let e = IpamError::PrefixOutOfRange {
            field: "prefix".into(),
            prefix: 33,
            family: Some(Family::V4),
        };
        assert_eq!(e.detail(), "33 is out of range for IPv4 (0..=32)");
        let e = IpamError::AddressInUse {
            pool: "p".into(),
            address: "10.0.0.2".parse().unwrap(),
        };
        assert_eq!(e.detail(), "10.0.0.2 is already in use in pool \"p\"");
    }
}
