//! The ISO volumes of one storage on one node, listed once for every
//! machine whose deletion sweeps it.
//!
//! A deleted machine sweeps the instance's ISO storages for files named
//! after its UID (`machine::observe::media`), in case its record in
//! `status.bootstrapMedia` was lost. Machines deleted together (a
//! scale-down) sweep the same storages: one listing per (Proxmox cluster
//! identity, node, storage) answers all of them
//! (`GET /nodes/{node}/storage/{storage}/content?content=iso`), with
//! concurrent callers sharing one request (single flight).
//!
//! Freshness: a caller passes `not_before`, the instant its deletion was
//! first seen by this process. Nothing is uploaded for a machine while it
//! is deleted, so a listing fetched after that instant shows every ISO the
//! machine can have; an older one is not used for it.
//!
//! Memory: per (identity, node, storage) the file names of the last
//! listing; a listing older than [`KEEP`] is dropped at the next call.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::clients::Identity;
use crate::pve::{NodeName, ProxmoxApi, PveError, StorageId};

/// A listing not used for this long is dropped.
pub const KEEP: Duration = Duration::from_secs(600);

/// One listing of a storage's ISO volumes.
#[derive(Debug)]
pub struct IsoList {
    /// When the request was sent.
    pub fetched: Instant,
    /// The volume IDs (`<storage>:iso/<file>`).
    pub volids: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    identity: Identity,
    node: NodeName,
    storage: StorageId,
}

/// The shared listings.
#[derive(Debug, Default)]
pub struct IsoLists {
    lists: Mutex<HashMap<Key, Arc<IsoList>>>,
    flights: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
}

impl IsoLists {
    fn cached(&self, key: &Key, not_before: Instant) -> Option<Arc<IsoList>> {
        let mut map = self.lists.lock().unwrap_or_else(PoisonError::into_inner);
        map.retain(|_, l| l.fetched.elapsed() <= KEEP);
        map.get(key).filter(|l| l.fetched >= not_before).cloned()
    }

    /// The ISO volumes of `storage` on `node`, from a listing sent at or
    /// after `not_before`: the last one when it is, else one new request
    /// shared with concurrent callers.
    ///
    /// # Errors
    /// The request's [`PveError`].
    pub async fn get(
        &self,
        identity: &Identity,
        api: &dyn ProxmoxApi,
        node: &NodeName,
        storage: &StorageId,
        not_before: Instant,
    ) -> Result<Arc<IsoList>, PveError> {
        let key = Key {
            identity: identity.clone(),
            node: node.clone(),
            storage: storage.clone(),
        };
        if let Some(l) = self.cached(&key, not_before) {
            return Ok(l);
        }
        let flight = self
            .flights
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(key.clone())
            .or_default()
            .clone();
        let _guard = flight.lock().await;
        if let Some(l) = self.cached(&key, not_before) {
            return Ok(l);
        }
        let fetched = Instant::now();
        let volids = api
            .storage_content(node, storage, Some("iso"), None)
            .await?
            .into_iter()
            .map(|v| v.volid)
            .collect();
        let list = Arc::new(IsoList { fetched, volids });
        self.lists
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(key, list.clone());
        Ok(list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pve::fake::FakeProxmox;

    fn names() -> (Identity, NodeName, StorageId) {
        (
            Identity::new("dc-a"),
            NodeName::new("pve-a1").unwrap(),
            StorageId::new("cephfs").unwrap(),
        )
    }

    #[tokio::test]
    async fn deletions_seen_before_a_listing_share_it_later_ones_do_not() {
        let pve = FakeProxmox::new();
        pve.add_volume("cephfs", "cephfs:iso/capmox-131-uid-1.iso");
        let lists = IsoLists::default();
        let (id, node, st) = names();
        let first_deletion = Instant::now();
        let second_deletion = Instant::now();
        let a = lists
            .get(&id, &pve, &node, &st, first_deletion)
            .await
            .unwrap();
        let b = lists
            .get(&id, &pve, &node, &st, second_deletion)
            .await
            .unwrap();
        assert_eq!(a.volids, ["cephfs:iso/capmox-131-uid-1.iso"]);
        assert!(Arc::ptr_eq(&a, &b), "one listing for both");
        assert_eq!(pve.calls(), ["storage_content"]);
        // A deletion first seen after that listing was sent gets a new one,
        // which shows what changed since.
        tokio::time::sleep(Duration::from_millis(2)).await;
        pve.add_volume("cephfs", "cephfs:iso/capmox-132-uid-2.iso");
        let later = Instant::now();
        let c = lists.get(&id, &pve, &node, &st, later).await.unwrap();
        assert_eq!(c.volids.len(), 2);
        assert_eq!(pve.calls(), ["storage_content", "storage_content"]);
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_request() {
        let pve = FakeProxmox::new();
        let lists = IsoLists::default();
        let (id, node, st) = names();
        let since = Instant::now();
        let (a, b) = tokio::join!(
            lists.get(&id, &pve, &node, &st, since),
            lists.get(&id, &pve, &node, &st, since)
        );
        assert!(a.unwrap().volids.is_empty() && b.unwrap().volids.is_empty());
        assert_eq!(pve.calls(), ["storage_content"]);
    }

    #[tokio::test]
    async fn a_failed_listing_is_not_kept() {
        let pve = FakeProxmox::new();
        let lists = IsoLists::default();
        let (id, node, st) = names();
        pve.fail_next(
            "storage_content",
            crate::pve::fake::transient("/nodes/pve-a1/storage/cephfs/content"),
        );
        let since = Instant::now();
        assert!(lists.get(&id, &pve, &node, &st, since).await.is_err());
        assert!(lists.get(&id, &pve, &node, &st, since).await.is_ok());
        assert_eq!(pve.calls(), ["storage_content", "storage_content"]);
    }
}
