//! Address pools for the Proxmox CAPI provider: parse, validate, allocate
//! the lowest free address, release.
//!
//! Knows nothing of Kubernetes or Proxmox. The rules are those of the
//! in-cluster IPAM provider (`cluster-api-ipam-provider-in-cluster`,
//! `InClusterIPPool`): entries are single addresses, `a-b` ranges or CIDRs
//! of one family; the subnet is the lowest address with `prefix` applied;
//! the gateway is never allocated, nor (unless
//! `allocateReservedIPAddresses`) the IPv4 network and broadcast addresses
//! or the IPv6 subnet-router anycast address, nor `excludedAddresses`;
//! allocation takes the lowest free address.
//!
//! - [`Pool`]: a validated value ([`Pool::parse`] from a [`PoolSpec`]),
//!   with [`Pool::first_free`] against a set of addresses in use;
//! - [`Allocator`]: a pool plus its in-use set (`allocate`,
//!   `allocate_specific`, `release`);
//! - [`check_disjoint`], [`overlaps`], [`contains`], [`check_outside`]:
//!   checks across pools (per-instance pools, the endpoint host);
//! - [`check_usable`], [`special_block`]: whether a valid pool (or one
//!   address) can serve hosts — stricter than the in-cluster IPAM provider,
//!   for pools written by hand (loopback or multicast entries, entries that
//!   are only the gateway, overlapping entries, …);
//! - [`IpamError`]: one error enum; validation returns all problems, each
//!   naming its field and entry.
//!
//! ```
//! use ipam::{Allocator, Pool, PoolSpec};
//!
//! let spec = PoolSpec {
//!     addresses: vec!["10.0.0.20-10.0.0.30".into()],
//!     prefix: 24,
//!     gateway: Some("10.0.0.1".into()),
//!     ..PoolSpec::default()
//! };
//! let pool = Pool::parse("dc-a-v4", &spec).map_err(|e| format!("{e:?}"))?;
//! let mut alloc = Allocator::new(pool);
//! assert_eq!(alloc.allocate()?.to_string(), "10.0.0.20");
//! assert_eq!(alloc.allocate()?.to_string(), "10.0.0.21");
//! alloc.release("10.0.0.20".parse()?);
//! assert_eq!(alloc.allocate()?.to_string(), "10.0.0.20");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod allocator;
mod check;
mod entry;
mod error;
mod family;
mod parse;
mod pool;
mod range;
mod spec;
mod usable;

pub use allocator::Allocator;
pub use check::{check_disjoint, check_outside, contains, overlaps};
pub use entry::PoolEntry;
pub use error::IpamError;
pub use family::Family;
pub use parse::parse_address;
pub use pool::{Addresses, Pool, PoolUsage};
pub use range::AddrRange;
pub use spec::PoolSpec;
pub use usable::{check_usable, special_block};
