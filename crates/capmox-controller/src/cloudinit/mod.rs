//! The bootstrap data a machine boots with: a cloud-init NoCloud seed
//! ([`render`](mod@render): `user-data` = the bootstrap Secret's `value`, `meta-data`,
//! `network-config` v2) packed into an ISO9660 image labelled `cidata`
//! ([`iso`]), which the machine reconciler uploads to an ISO storage and
//! attaches as a CD-ROM.

pub mod iso;
pub mod render;

pub use iso::{VOLUME_LABEL, build};
pub use render::{Interface, Seed, SeedInput, render};
