//! Test worlds shared by the modules of this binary: `cluster` for the
//! ProxmoxCluster reconciler and the manager, `machine` for the
//! ProxmoxMachine reconciler.
pub mod cluster;
pub mod machine;
