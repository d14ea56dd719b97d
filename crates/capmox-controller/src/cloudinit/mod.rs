//! The bootstrap data a machine boots with: a cloud-init NoCloud seed
//! ([`render`](mod@render): `user-data` = the bootstrap Secret's `value`, `meta-data`,
//! `network-config`) packed into an ISO9660 image labelled `cidata`
//! ([`iso`]), which the machine reconciler uploads to an ISO storage and
//! attaches as a CD-ROM. [`format`] says which bootstrap formats can be
//! delivered and how the bootstrap reports success; [`ignition`] checks
//! and enriches Ignition configs (Flatcar), whose seed carries a
//! version 1 `network-config` ([`network_v1`]) for Afterburn.

pub mod format;
pub mod ignition;
pub mod iso;
pub mod network_v1;
pub mod render;

pub use format::{BootstrapFormat, FormatError};
pub use ignition::{Enrichment, IgnitionError};
pub use iso::{VOLUME_LABEL, build};
pub use render::{Interface, Seed, SeedInput, render};
