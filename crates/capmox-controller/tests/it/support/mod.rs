//! Test worlds shared by the modules of this binary: `cluster` for the
//! ProxmoxCluster reconciler and the manager, `machine` for the
//! ProxmoxMachine reconciler, `webhook` for the webhook server.
pub mod cluster;
pub mod machine;
pub mod webhook;

use std::sync::Arc;

use capmox_controller::context::Shared;
use capmox_controller::stores::{self, Stores};

/// Stores filled by their watches, as in production (the watches run until
/// `shared` shuts down).
pub fn watched_stores(shared: &Arc<Shared>) -> Stores {
    let (s, writers) = Stores::new();
    tokio::spawn(stores::reflect(shared, writers));
    s
}
