//! A deterministic stateful allocator: one pool plus the set of addresses in use.
//!
//! For places where this process is itself the IPAM (the e2e suite's stand-in for the
//! in-cluster IPAM provider) and for the controller's duplicate-address
//! bookkeeping. `allocate` always returns the lowest free address, so a
//! released address is handed out again first (the in-cluster provider
//! behaves the same; docs/field-cases.md B18 is why callers release only after the
//! VM is gone).

use std::collections::BTreeSet;
use std::net::IpAddr;

use crate::error::IpamError;
use crate::pool::{Pool, PoolUsage};

/// A pool and the addresses in use in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocator {
    pool: Pool,
    in_use: BTreeSet<IpAddr>,
}

impl Allocator {
    /// An allocator with nothing in use.
    pub fn new(pool: Pool) -> Allocator {
        Allocator {
            pool,
            in_use: BTreeSet::new(),
        }
    }

    /// An allocator with `in_use` already taken (e.g. the addresses of the
    /// existing `IPAddress` objects of the pool). Addresses that the pool
    /// would not allocate are kept too and reported as
    /// [`PoolUsage::out_of_range`]; they never block an allocation.
    pub fn with_in_use(pool: Pool, in_use: impl IntoIterator<Item = IpAddr>) -> Allocator {
        Allocator {
            pool,
            in_use: in_use.into_iter().collect(),
        }
    }

    /// The pool.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The addresses in use, ascending.
    pub fn in_use(&self) -> &BTreeSet<IpAddr> {
        &self.in_use
    }

    /// Whether `addr` is in use.
    pub fn is_in_use(&self, addr: IpAddr) -> bool {
        self.in_use.contains(&addr)
    }

    /// Takes the lowest free address of the pool and marks it in use.
    ///
    /// # Errors
    /// [`IpamError::Exhausted`] naming the pool and its size; nothing changes.
    pub fn allocate(&mut self) -> Result<IpAddr, IpamError> {
        let addr = self.pool.first_free(&self.in_use)?;
        self.in_use.insert(addr);
        Ok(addr)
    }

    /// Marks `addr` in use, e.g. to adopt an address a machine already has.
    ///
    /// # Errors
    /// - [`IpamError::NotAllocatable`] when the pool never hands out `addr`
    ///   (outside its addresses, excluded, reserved, the gateway, other family);
    /// - [`IpamError::AddressInUse`] when `addr` is already in use.
    ///
    /// Nothing changes on error.
    pub fn allocate_specific(&mut self, addr: IpAddr) -> Result<(), IpamError> {
        if let Some(reason) = self.pool.why_not_allocatable(addr) {
            return Err(IpamError::NotAllocatable {
                pool: self.pool.name().to_owned(),
                address: addr,
                reason,
            });
        }
        if !self.in_use.insert(addr) {
            return Err(IpamError::AddressInUse {
                pool: self.pool.name().to_owned(),
                address: addr,
            });
        }
        Ok(())
    }

    /// Marks `addr` free again; returns whether it was in use. Releasing a
    /// free address is a no-op, so release is idempotent.
    pub fn release(&mut self, addr: IpAddr) -> bool {
        self.in_use.remove(&addr)
    }

    /// Address counts of the pool against the addresses in use.
    pub fn usage(&self) -> PoolUsage {
        self.pool.usage(&self.in_use)
    }
}
