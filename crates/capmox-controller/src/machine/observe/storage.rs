//! Which storages are enabled and active on which node of the instance, for
//! the scheduler's storage filter (docs/field-cases.md B37).
//!
//! Read from `/cluster/resources` (type `storage`), the listing the plan
//! step already holds (shared by every machine of the Proxmox cluster,
//! `machine/runtime/resources.rs`), so the filter costs no call per node:
//! Proxmox lists a storage for a node only when it is configured for that
//! node and enabled, with status `available` when it is active there and
//! `unknown` when it is not (docs/proxmox-semantics.md §9).

use crate::machine::plan::scheduler::NodeStorage;
use crate::machine::runtime::resources::Snapshot;

/// Every (node, storage) of the listing, with whether it is active and
/// holds ISOs.
pub fn on_nodes(snap: &Snapshot) -> Vec<NodeStorage> {
    snap.storages()
        .into_iter()
        .map(|s| NodeStorage {
            iso: s.content.iter().any(|c| c == "iso"),
            node: s.node,
            storage: s.storage,
            active: s.available,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_storages_become_node_facts() {
        let snap = Snapshot::new(
            tokio::time::Instant::now(),
            serde_json::from_str(
                r#"[
              {"id":"storage/node-a/fast-a","type":"storage","node":"node-a","storage":"fast-a","content":"images","shared":0,"status":"available"},
              {"id":"storage/node-c/ceph-rbd","type":"storage","node":"node-c","storage":"ceph-rbd","content":"images,rootdir","shared":1,"status":"unknown"},
              {"id":"storage/node-c/cephfs","type":"storage","node":"node-c","storage":"cephfs","content":"iso,snippets","shared":1,"status":"available"},
              {"id":"node/node-a","type":"node","node":"node-a","status":"online"}
            ]"#,
            )
            .unwrap(),
        );
        let facts = on_nodes(&snap);
        let at = |node: &str, storage: &str| {
            facts
                .iter()
                .find(|s| s.node == node && s.storage == storage)
                .map(|s| (s.active, s.iso))
        };
        assert_eq!(at("node-a", "fast-a"), Some((true, false)));
        assert_eq!(at("node-c", "ceph-rbd"), Some((false, false)));
        assert_eq!(at("node-c", "cephfs"), Some((true, true)));
        assert_eq!(at("node-b", "fast-a"), None, "not configured there");
        assert_eq!(facts.len(), 3);
    }
}
