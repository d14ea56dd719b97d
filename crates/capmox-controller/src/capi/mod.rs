//! The Cluster API objects this provider reads or creates, as local shims of
//! the upstream types (only the fields we use; unknown fields are ignored on
//! read, and we never write CAPI core objects back), plus the contract's
//! labels, annotations and owner-reference rules.
//!
//! Versions: CAPI core `cluster.x-k8s.io/v1beta2`, IPAM contract
//! `ipam.cluster.x-k8s.io/v1beta2`, in-cluster IPAM pools
//! `ipam.cluster.x-k8s.io/v1alpha2` (the CAPI infrastructure provider
//! contract and the CAPI IPAM contract).

pub mod core;
pub mod ipam;
pub mod owners;

pub use core::{Cluster, ClusterSpec, ClusterStatus, Machine, MachineSpec, MachineStatus};
pub use owners::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, MANAGED_BY_ANNOTATION, PAUSED_ANNOTATION,
    is_control_plane, is_externally_managed, is_paused, owner_of_kind,
};
