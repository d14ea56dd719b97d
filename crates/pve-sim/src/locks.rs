//! The two lock mechanisms of docs/proxmox-semantics.md §6 that are not config
//! properties:
//!
//! * the node-local flock `/var/lock/qemu-server/lock-<vmid>.conf`, shared or
//!   exclusive, with an acquire timeout (1 s clone, 5 s create, 10 s others);
//!   like `flock(2)` it is not fair — a waiting exclusive request does not stop
//!   new shared holders;
//! * storage-level allocation locks, modelled as a bounded number of
//!   parallel allocations per storage (see [`crate::config::AllocLock`]).
//!
//! Guards release on drop, so a cancelled task frees its locks.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

/// Shared or exclusive flock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LockMode {
    Shared,
    Exclusive,
}

#[derive(Debug)]
enum Held {
    Shared(u32),
    Exclusive,
}

type Key = (String, u32);

#[derive(Default)]
struct Inner {
    held: Mutex<HashMap<Key, Held>>,
    notify: Notify,
}

/// The per-node VM config flocks of one cluster.
#[derive(Clone, Default)]
pub(crate) struct FlockTable {
    inner: Arc<Inner>,
}

/// A held flock; released on drop.
pub(crate) struct FlockGuard {
    inner: Arc<Inner>,
    key: Key,
}

impl std::fmt::Debug for FlockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FlockGuard({}/{})", self.key.0, self.key.1)
    }
}

/// The Proxmox error text of a flock timeout.
pub(crate) fn flock_timeout_message(vmid: u32) -> String {
    format!("can't lock file '/var/lock/qemu-server/lock-{vmid}.conf' - got timeout")
}

impl FlockTable {
    fn try_acquire(&self, key: &Key, mode: LockMode) -> Option<FlockGuard> {
        let mut held = self.inner.held.lock().unwrap_or_else(|p| p.into_inner());
        match (held.get_mut(key), mode) {
            (None, LockMode::Shared) => {
                held.insert(key.clone(), Held::Shared(1));
            }
            (None, LockMode::Exclusive) => {
                held.insert(key.clone(), Held::Exclusive);
            }
            (Some(Held::Shared(n)), LockMode::Shared) => *n += 1,
            _ => return None,
        }
        Some(FlockGuard {
            inner: self.inner.clone(),
            key: key.clone(),
        })
    }

    /// Acquires the flock of `vmid` on `node`, waiting at most `timeout`.
    ///
    /// # Errors
    /// The Proxmox timeout text (`can't lock file … - got timeout`).
    pub async fn acquire(
        &self,
        node: &str,
        vmid: u32,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<FlockGuard, String> {
        let key = (node.to_string(), vmid);
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.inner.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(g) = self.try_acquire(&key, mode) {
                return Ok(g);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                // one last try: a release may have raced with the deadline
                return self
                    .try_acquire(&key, mode)
                    .ok_or_else(|| flock_timeout_message(vmid));
            }
        }
    }

    /// Whether anyone holds the flock of `vmid` on `node` (introspection).
    pub fn is_held(&self, node: &str, vmid: u32) -> bool {
        let held = self.inner.held.lock().unwrap_or_else(|p| p.into_inner());
        held.contains_key(&(node.to_string(), vmid))
    }
}

impl Drop for FlockGuard {
    fn drop(&mut self) {
        {
            let mut held = self.inner.held.lock().unwrap_or_else(|p| p.into_inner());
            match held.get_mut(&self.key) {
                Some(Held::Shared(n)) if *n > 1 => *n -= 1,
                _ => {
                    held.remove(&self.key);
                }
            }
        }
        self.inner.notify.notify_waiters();
    }
}

/// Allocation slots of storages with an [`crate::config::AllocLock`].
#[derive(Clone, Default)]
pub(crate) struct StorageLocks {
    slots: Arc<Mutex<HashMap<String, Arc<Semaphore>>>>,
}

/// The Proxmox error text of a storage lock timeout.
pub(crate) fn storage_lock_message(storage: &str, shared: bool) -> String {
    if shared {
        format!("cfs-lock 'storage-{storage}' error: got lock request timeout")
    } else {
        format!("can't lock file '/var/lock/pve-manager/pve-storage-{storage}' - got timeout")
    }
}

impl StorageLocks {
    /// Takes one allocation slot of `key` (storage, plus node for local
    /// storages) with `max_parallel` slots, waiting at most `timeout`.
    pub async fn acquire(
        &self,
        key: &str,
        max_parallel: u32,
        timeout: Duration,
    ) -> Option<OwnedSemaphorePermit> {
        let sem = {
            let mut slots = self.slots.lock().unwrap_or_else(|p| p.into_inner());
            slots
                .entry(key.to_string())
                .or_insert_with(|| Arc::new(Semaphore::new(max_parallel.max(1) as usize)))
                .clone()
        };
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Some(p);
        }
        tokio::time::timeout(timeout, sem.acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shared_coexist_exclusive_waits_and_times_out() {
        let t = FlockTable::default();
        let a = t
            .acquire("n1", 100, LockMode::Shared, Duration::ZERO)
            .await
            .unwrap();
        let _b = t
            .acquire("n1", 100, LockMode::Shared, Duration::ZERO)
            .await
            .unwrap();
        let e = t
            .acquire("n1", 100, LockMode::Exclusive, Duration::from_millis(5))
            .await
            .unwrap_err();
        assert_eq!(
            e,
            "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"
        );
        // another node's lock of the same VMID is independent
        assert!(
            t.acquire("n2", 100, LockMode::Exclusive, Duration::ZERO)
                .await
                .is_ok()
        );
        drop(a);
        assert!(t.is_held("n1", 100));
    }

    #[tokio::test]
    async fn waiter_gets_lock_after_release() {
        let t = FlockTable::default();
        let g = t
            .acquire("n1", 101, LockMode::Exclusive, Duration::ZERO)
            .await
            .unwrap();
        let t2 = t.clone();
        let waiter = tokio::spawn(async move {
            t2.acquire("n1", 101, LockMode::Exclusive, Duration::from_secs(30))
                .await
                .is_ok()
        });
        tokio::task::yield_now().await;
        drop(g);
        assert!(waiter.await.unwrap());
        assert!(!t.is_held("n1", 101));
    }

    #[tokio::test]
    async fn storage_slots() {
        let s = StorageLocks::default();
        let p = s.acquire("local-lvm@n1", 1, Duration::ZERO).await;
        assert!(p.is_some());
        assert!(
            s.acquire("local-lvm@n1", 1, Duration::from_millis(2))
                .await
                .is_none()
        );
        drop(p);
        assert!(s.acquire("local-lvm@n1", 1, Duration::ZERO).await.is_some());
        assert_eq!(
            storage_lock_message("local-lvm", false),
            "can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
        );
    }
}
