//! The custom resources of `infrastructure.cluster.x-k8s.io/v1alpha2`, as the
//! Go provider (CAPMOX v0.8 and v0.9, CAPI contract v1beta2) defines them:
//! `ProxmoxCluster`, `ProxmoxClusterTemplate`, `ProxmoxMachine`,
//! `ProxmoxMachineTemplate`.
//!
//! Served (not stored) so that clusters made with the Go provider can be
//! taken over; every object is converted to and from `v1alpha3` by
//! [`super::conversion`]. The types model the JSON the Go provider's CRDs
//! accept, field by field, with the same schema (types, enums, required
//! fields, defaults, CEL rules): string enums stay strings so that every
//! `v1alpha3` value has a `v1alpha2` spelling, and a field the schema
//! requires but a down-converted `v1alpha3` object may lack is an `Option`
//! marked required. Fields the Go provider inlines (a device's routes) or
//! repeats (a zone's pools) are spelled out where they appear:
//! `#[serde(flatten)]` would lose the field path of a parse error. What each
//! field means on our side is in `docs/migrating-from-capmox.md`.

pub mod cluster;
pub mod common;
pub mod machine;
pub mod schema;
pub mod templates;

pub use cluster::{ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterStatus};
pub use machine::{ProxmoxMachine, ProxmoxMachineSpec, ProxmoxMachineStatus};
pub use templates::{
    ProxmoxClusterTemplate, ProxmoxClusterTemplateSpec, ProxmoxMachineTemplate,
    ProxmoxMachineTemplateSpec,
};

/// API version of every kind here.
pub const VERSION: &str = "v1alpha2";
