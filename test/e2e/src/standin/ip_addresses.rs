//! The IPAddresses the IPAM stand-in allocates from: its watch's store, plus
//! the addresses its claim controller created that the store does not show
//! yet.
//!
//! The real in-cluster provider reads addresses through controller-runtime's
//! cache. Reading them with a LIST per allocation made the stand-in the
//! slowest part of the benchmark: at 300 machines every claim and every pool
//! reconcile LISTed up to 300 addresses (a quadratic cost), and the claims
//! waited seconds for their turn. A cache alone can lag behind a create, so
//! an allocation is written down here, under the same lock as the choice of
//! the address, before the IPAddress is created: the next allocation sees it
//! as used whatever the watch has delivered. An entry leaves when the store
//! shows the address, when its creation fails, or when the claim releases it.
//!
//! Deletions may show late: an address deleted a moment ago can still count
//! as used, which delays its reuse and never hands it out twice.

use std::collections::{BTreeSet, HashMap};
use std::net::IpAddr;
use std::sync::{Mutex, OnceLock};

use futures::FutureExt;
use kube::runtime::reflector::{ObjectRef, Store};

use crate::crds::ipam::{IPAddress, PoolRef};

/// `(namespace, name)` of an IPAddress.
type Key = (String, String);

/// The known IPAddresses (see the module documentation).
#[derive(Default)]
pub struct Known {
    store: OnceLock<Store<IPAddress>>,
    unseen: Mutex<HashMap<Key, (PoolRef, IpAddr)>>,
}

impl std::fmt::Debug for Known {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Known")
            .field("store", &self.store.get().map(|s| s.len()))
            .finish_non_exhaustive()
    }
}

impl Known {
    /// Sets the store the claim controller's IPAddress watch fills (once; a
    /// second call is ignored).
    pub fn set_store(&self, store: Store<IPAddress>) {
        let _ = self.store.set(store);
    }

    /// The store once its first LIST has arrived; `None` before (callers
    /// ask the API server or come back later; never waits).
    pub fn ready(&self) -> Option<&Store<IPAddress>> {
        let store = self.store.get()?;
        store.wait_until_ready().now_or_never()?.ok()?;
        Some(store)
    }

    /// Whether IPAddress `namespace`/`name` exists as far as the store and
    /// the unseen creations know (`false` before the store is ready).
    pub fn exists(&self, namespace: &str, name: &str) -> bool {
        let key = (namespace.to_string(), name.to_string());
        if self.lock().contains_key(&key) {
            return true;
        }
        self.store
            .get()
            .is_some_and(|s| s.get(&ObjectRef::new(name).within(namespace)).is_some())
    }

    /// The addresses of `pool` in `namespace` in use: every stored
    /// IPAddress naming the pool and every unseen creation; `None` before
    /// the store is ready.
    pub fn in_use(&self, namespace: &str, pool: &PoolRef) -> Option<BTreeSet<IpAddr>> {
        let store = self.ready()?;
        Some(used(store, &mut self.lock(), namespace, pool))
    }

    /// Chooses an address of `pool` in `namespace` for IPAddress `name` with
    /// `pick` (given the addresses in use, as [`Known::in_use`]) and records
    /// the choice, both under one lock. `store` is the ready store
    /// ([`Known::ready`]).
    ///
    /// # Errors
    /// What `pick` returns; nothing is recorded then.
    pub fn allocate<E>(
        &self,
        store: &Store<IPAddress>,
        namespace: &str,
        name: &str,
        pool: &PoolRef,
        pick: impl FnOnce(&BTreeSet<IpAddr>) -> Result<IpAddr, E>,
    ) -> Result<IpAddr, E> {
        let mut unseen = self.lock();
        let addr = pick(&used(store, &mut unseen, namespace, pool))?;
        unseen.insert(
            (namespace.to_string(), name.to_string()),
            (pool.clone(), addr),
        );
        Ok(addr)
    }

    /// Forgets an unseen creation (it failed, or the claim released it).
    pub fn forget(&self, namespace: &str, name: &str) {
        self.lock()
            .remove(&(namespace.to_string(), name.to_string()));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, (PoolRef, IpAddr)>> {
        self.unseen.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The addresses in use in `pool` of `namespace`: the stored ones naming
/// it and the unseen creations (those the store shows now are dropped from
/// `unseen`).
fn used(
    store: &Store<IPAddress>,
    unseen: &mut HashMap<Key, (PoolRef, IpAddr)>,
    namespace: &str,
    pool: &PoolRef,
) -> BTreeSet<IpAddr> {
    unseen.retain(|(ns, n), _| store.get(&ObjectRef::new(n).within(ns)).is_none());
    let stored = store.state_filter(|a| {
        a.metadata.namespace.as_deref() == Some(namespace) && &a.spec.pool_ref == pool
    });
    let mut used = parsed(stored.iter().map(|a| &**a));
    used.extend(
        unseen
            .iter()
            .filter(|((ns, _), (p, _))| ns == namespace && p == pool)
            .map(|(_, (_, a))| *a),
    );
    used
}

/// The addresses of `list` as a set (unparseable ones are skipped).
pub fn parsed<'a>(list: impl IntoIterator<Item = &'a IPAddress>) -> BTreeSet<IpAddr> {
    list.into_iter()
        .filter_map(|a| a.spec.address.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::ipam::IpAddressSpec;
    use crate::crds::meta::NameRef;
    use kube::runtime::reflector::store::Writer;
    use kube::runtime::watcher::Event;

    fn pool(name: &str) -> PoolRef {
        PoolRef {
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "InClusterIPPool".into(),
            name: name.into(),
        }
    }

    fn address(ns: &str, name: &str, pool_name: &str, addr: &str) -> IPAddress {
        let mut a = IPAddress::new(
            name,
            IpAddressSpec {
                claim_ref: NameRef { name: name.into() },
                pool_ref: pool(pool_name),
                address: addr.into(),
                prefix: 24,
                gateway: None,
            },
        );
        a.metadata.namespace = Some(ns.into());
        a
    }

    fn lowest_free(used: &BTreeSet<IpAddr>) -> Result<IpAddr, String> {
        (1..=9u8)
            .map(|i| IpAddr::from([10, 0, 0, i]))
            .find(|a| !used.contains(a))
            .ok_or_else(|| "exhausted".to_string())
    }

    #[test]
    fn an_allocation_counts_as_used_until_the_store_shows_it() {
        let mut writer: Writer<IPAddress> = Writer::default();
        let store = writer.as_reader();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(address("ns", "a", "p", "10.0.0.1")));
        // Another namespace and another pool do not count.
        writer.apply_watcher_event(&Event::InitApply(address("other", "x", "p", "10.0.0.2")));
        writer.apply_watcher_event(&Event::InitApply(address("ns", "y", "q", "10.0.0.2")));
        writer.apply_watcher_event(&Event::InitDone);
        let known = Known::default();
        known.set_store(store.clone());

        let b = known.allocate(&store, "ns", "b", &pool("p"), lowest_free);
        assert_eq!(b, Ok(IpAddr::from([10, 0, 0, 2])));
        assert!(known.exists("ns", "b"), "an unseen creation exists");
        // The watch has not delivered b: the next claim still skips it.
        let c = known.allocate(&store, "ns", "c", &pool("p"), lowest_free);
        assert_eq!(c, Ok(IpAddr::from([10, 0, 0, 3])));

        // b's creation failed: its address is free again.
        known.forget("ns", "b");
        assert!(!known.exists("ns", "b"));
        let d = known.allocate(&store, "ns", "d", &pool("p"), lowest_free);
        assert_eq!(d, Ok(IpAddr::from([10, 0, 0, 2])));

        // The store shows d and c: the unseen entries go, the addresses stay used.
        writer.apply_watcher_event(&Event::Apply(address("ns", "d", "p", "10.0.0.2")));
        writer.apply_watcher_event(&Event::Apply(address("ns", "c", "p", "10.0.0.3")));
        let e = known.allocate(&store, "ns", "e", &pool("p"), lowest_free);
        assert_eq!(e, Ok(IpAddr::from([10, 0, 0, 4])));
        assert_eq!(known.lock().len(), 1, "only e is unseen");
        let in_use: Vec<IpAddr> = known
            .in_use("ns", &pool("p"))
            .expect("ready")
            .into_iter()
            .collect();
        assert_eq!(
            in_use,
            [1, 2, 3, 4].map(|i| IpAddr::from([10, 0, 0, i])).to_vec(),
            "stored a, d, c and unseen e"
        );

        // A refused choice records nothing.
        let full = known.allocate(&store, "ns", "f", &pool("p"), |_| Err::<IpAddr, _>("full"));
        assert_eq!(full, Err("full"));
        assert!(!known.exists("ns", "f"));
    }
}
