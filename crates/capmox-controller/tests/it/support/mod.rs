//! Test worlds shared by the modules of this binary: `cluster` for the
//! ProxmoxCluster reconciler and the manager, `machine` for the
//! ProxmoxMachine reconciler, `webhook` for the webhook server.
pub mod cluster;
pub mod machine;
pub mod webhook;

use std::sync::Arc;

use capmox_controller::context::Shared;
use capmox_controller::stores::{self, Stores};
use pve_sim::{AclEntry, ClusterConfig, PoolConfig};

/// Stores filled by their watches, as in production (the watches run until
/// `shared` shuts down).
pub fn watched_stores(shared: &Arc<Shared>) -> Stores {
    let (s, writers) = Stores::new();
    tokio::spawn(stores::reflect(shared, writers));
    s
}

/// docs/field-cases.md B34: the cluster's provider token (its first) holds
/// its VM, datastore and pool rights on `/pool/<pool>` only, the rest
/// (`Sys.*`, `SDN.Use`) on `/`; the pool holds the template and every
/// storage, as an operator sets up a pool-scoped token.
pub fn scope_to_pool(c: &mut ClusterConfig, pool: &str) {
    let storage: Vec<String> = c.storages.iter().map(|s| s.name.clone()).collect();
    let members: Vec<u32> = c.templates.iter().map(|t| t.vmid).collect();
    c.pools.push(PoolConfig {
        poolid: pool.into(),
        comment: None,
        members,
        storage,
    });
    let t = &mut c.tokens[0];
    let all: Vec<String> = t.acl.iter().flat_map(|e| e.privileges.clone()).collect();
    let (in_pool, root): (Vec<String>, Vec<String>) = all.into_iter().partition(|p| {
        p.starts_with("VM.") || p.starts_with("Datastore.") || p.starts_with("Pool.")
    });
    t.acl = vec![
        AclEntry {
            path: "/".into(),
            roles: vec![],
            privileges: root,
            propagate: true,
        },
        AclEntry {
            path: format!("/pool/{pool}"),
            roles: vec![],
            privileges: in_pool,
            propagate: true,
        },
    ];
}
