//! The VM's shape: pure rules about what the VM should look like and how
//! it is recognised.
//!
//! | module | owns |
//! |---|---|
//! | [`marker`] | the ownership marker (tag, description line), the bootstrap ISO's file name |
//! | [`vmconfig`] | the one config write; idempotent compare |
//! | [`disks`] | grow-only resizes |
//! | [`media`] | the bootstrap ISO's storage and CD-ROM bus |
//! | [`arch`](mod@arch) | what each architecture allows and needs (bus, CPU model, firmware, machine type) |
//! | [`addresses`] | guest agent interfaces → machine addresses |
//! | [`provider_id`] | `spec.providerID` in the cluster's format; how recorded ones compare |

pub mod addresses;
pub mod arch;
pub mod disks;
pub mod marker;
pub mod media;
pub mod provider_id;
pub mod vmconfig;
