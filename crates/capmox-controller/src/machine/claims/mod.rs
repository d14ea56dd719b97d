//! IP addresses through the CAPI IPAM contract (`ipam.cluster.x-k8s.io`):
//! one `IPAddressClaim` per device and family, owned by the ProxmoxMachine
//! (controller, `blockOwnerDeletion`), `spec.clusterName` set, pointing at the
//! pool of the machine's instance (from `ProxmoxCluster.status.ipPools`) or at
//! the device's own `ipPoolRef` (any IPAM provider's pool kind). The address
//! is read from the `IPAddress` named by `status.addressRef`.
//!
//! Which devices claim:
//! - `net0` (the default device, listed or not) without `ipPoolRef`: one
//!   claim per family the instance has a pool for, unless `dhcp4`/`dhcp6`
//!   asks for DHCP on that family. With no pool and no DHCP setting at all,
//!   `net0` uses DHCPv4.
//! - A device with `ipPoolRef`: one claim per reference.
//! - Other devices without `ipPoolRef`: no claim (DHCP only if asked).
//!
//! Names: `<machine>-<net>-<family>` for instance pools (e.g.
//! `wl1-md-0-abcde-net0-ipv4`), `<machine>-<net>-<i>` for the i-th
//! `ipPoolRef` (its family is only known once the address is there). Names
//! longer than 253 characters are cut and suffixed with a hash.
//!
//! A claim without an address is reported exhausted only when the claim
//! itself says so (its condition reason `PoolExhausted`, or the IPAM
//! provider's message saying "exhausted"); otherwise the machine waits,
//! naming the pool and how long the claim has waited.
//!
//! Claims are released only after the VM is gone (docs/field-cases.md B18).

pub mod objects;
pub mod plan;
pub mod state;

#[cfg(test)]
mod tests;

pub use objects::*;
pub use plan::*;
pub use state::*;
