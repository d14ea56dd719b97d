//! Test worlds shared by the modules of this binary: `cluster` for the
//! ProxmoxCluster reconciler and the manager, `machine` for the
//! ProxmoxMachine reconciler, `webhook` for the webhook server.
pub mod cluster;
pub mod machine;
pub mod webhook;
