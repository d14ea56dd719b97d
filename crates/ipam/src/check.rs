//! Checks across pools: overlap between pools (of different instances) and
//! addresses that must stay outside every node pool.
//!
//! Field case B16: two pools that can hand out the same address give two
//! machines the same IP. Overlap is judged on the allocatable sets, so an
//! address excluded from one pool (or reserved, or the gateway) is no
//! overlap. Whether two pools share an L2 domain (same Proxmox cluster,
//! bridge and VLAN) is the caller's decision: pools on separate networks may
//! legitimately overlap.

use std::net::IpAddr;

use crate::error::IpamError;
use crate::pool::Pool;
use crate::range::{self, AddrRange};

/// Whether `pool` may allocate `addr` (same as [`Pool::contains`]).
pub fn contains(pool: &Pool, addr: IpAddr) -> bool {
    pool.contains(addr)
}

/// The lowest range of addresses both pools can allocate (a single address
/// or a maximal `a-b` run), or `None` when they are disjoint or of different
/// families.
pub fn overlaps(a: &Pool, b: &Pool) -> Option<AddrRange> {
    if a.family() != b.family() {
        return None;
    }
    range::first_intersection(a.ranges(), b.ranges())
}

/// Every pair of overlapping pools in `pools`, as [`IpamError::PoolsOverlap`]
/// naming both pools (in slice order) and their lowest common range. Empty
/// when all pools are pairwise disjoint.
pub fn check_disjoint(pools: &[Pool]) -> Vec<IpamError> {
    let mut errors = Vec::new();
    for (i, a) in pools.iter().enumerate() {
        for b in pools.iter().skip(i + 1) {
            if let Some(overlap) = overlaps(a, b) {
                errors.push(IpamError::PoolsOverlap {
                    first: a.name().to_owned(),
                    second: b.name().to_owned(),
                    overlap,
                });
            }
        }
    }
    errors
}

/// [`IpamError::AddressInPool`] for each pool of `pools` that may allocate
/// `addr`, whose field path is `field` (e.g. `controlPlaneEndpoint.host`:
/// the API endpoint must not be handed to a node). Empty when `addr` is
/// outside all of them.
pub fn check_outside(field: &str, addr: IpAddr, pools: &[Pool]) -> Vec<IpamError> {
    pools
        .iter()
        .filter(|p| p.contains(addr))
        .map(|p| IpamError::AddressInPool {
            field: field.to_owned(),
            address: addr,
            pool: p.name().to_owned(),
        })
        .collect()
}
