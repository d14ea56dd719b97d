//! Where a VM goes: pure rules for the choices made before the clone.
//!
//! | module | owns |
//! |---|---|
//! | [`pci`] | which nodes have a free device of each PCI mapping a VM needs |
//! | [`placement`] | which instance (pin ▸ failure domain ▸ mode policy) |
//! | [`scheduler`] | which node (allowed ∩ online, memory, spread, storage locality, storages enabled and active) |
//! | [`storage`] | which storages a new VM needs on its node |
//! | [`template`] | which template (`templateID` or tag selector policies) |
//! | [`vmid`] | VMID ranges and reservations per Proxmox cluster |

pub mod pci;
pub mod placement;
pub mod scheduler;
pub mod storage;
pub mod template;
pub mod vmid;
