//! Newtypes for the identifiers Proxmox VE passes around, plus lenient
//! deserialisers for its loosely typed JSON.
//!
//! Each identifier is validated against the format the PVE API schema gives it
//! (`pve-vmid`, `pve-node`, `pve-storage-id`, `pve-poolid`, `pve-configid`), so a value that
//! reaches the wire is one Proxmox accepts.

mod ids;
pub(crate) mod lenient;
mod lock;

pub use crate::upid::Upid;
pub use ids::{ConfigId, NodeName, PoolId, StorageId, VmId};
pub use lock::VmLock;
