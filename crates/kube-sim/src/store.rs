//! The object store: objects per storage resource, the global `resourceVersion` counter,
//! a bounded per-resource watch history and a broadcast channel per resource for watch
//! fan-out.
//!
//! Invariants (all under the one state mutex, held only for short, non-blocking work):
//! - `resourceVersion` strictly increases by one for every committed change;
//! - every change is appended to its resource's history and sent on its broadcast channel
//!   in the same critical section, so a watcher that subscribes under the lock and takes
//!   the history after its starting version sees every later event exactly once;
//! - `floor` of a resource is the newest version dropped from its history: a watch from a
//!   version below it answers `410 Gone`.

use crate::resource::{Registry, StorageKey};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tokio::sync::broadcast;

/// Watch event types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    /// `ADDED`.
    Added,
    /// `MODIFIED`.
    Modified,
    /// `DELETED`.
    Deleted,
}

/// One committed change.
#[derive(Debug)]
pub struct WatchRecord {
    /// The `resourceVersion` of the change.
    pub rv: u64,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (the last state for deletions), in stored form.
    pub object: Arc<Value>,
    /// The object before a modification (for selector transitions).
    pub prev: Option<Arc<Value>>,
    /// `object` as JSON in one served version (`(version, bytes)`), written by
    /// the first JSON watcher that sends it and reused by the others.
    pub encoded: std::sync::OnceLock<(String, Vec<u8>)>,
}

/// The key of an object within its resource.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjKey {
    /// Namespace ("" for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjKey {
    /// Builds a key.
    pub fn new(namespace: &str, name: &str) -> ObjKey {
        ObjKey {
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }
}

/// Objects and watch state of one storage resource.
#[derive(Debug)]
pub struct TypeState {
    /// Current objects, ordered by (namespace, name) like etcd keys.
    pub objects: BTreeMap<ObjKey, Arc<Value>>,
    history: VecDeque<Arc<WatchRecord>>,
    floor: u64,
    tx: broadcast::Sender<Arc<WatchRecord>>,
}

/// A watch subscription: the buffered events after the start version and the live
/// receiver for later ones.
#[derive(Debug)]
pub struct Subscription {
    /// Events after the requested version, oldest first.
    pub backlog: Vec<Arc<WatchRecord>>,
    /// Later events.
    pub rx: broadcast::Receiver<Arc<WatchRecord>>,
}

/// Where an object lives.
pub type Loc = (StorageKey, ObjKey);

/// Work for the garbage collector, queued by commits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum GcWork {
    /// Check a dependent's owners (it was written, or an owner changed or went away).
    Dependent(Loc),
    /// Check an owner being deleted with `foregroundDeletion` or `orphan`.
    Owner(Loc),
    /// Check a terminating namespace.
    Namespace(String),
}

fn owner_uids(obj: &Value) -> Vec<String> {
    crate::json::owner_refs(obj)
        .iter()
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
        .collect()
}

fn is_namespace(key: &StorageKey) -> bool {
    key.group.is_empty() && key.plural == "namespaces"
}

/// The whole server state.
#[derive(Debug)]
pub struct State {
    /// The last committed `resourceVersion`.
    pub rv: u64,
    /// Served resource types.
    pub registry: Registry,
    types: HashMap<StorageKey, TypeState>,
    /// `uid` → where the object lives (for owner references).
    pub uids: HashMap<String, Loc>,
    /// owner `uid` → the objects referring to it.
    pub dependents: HashMap<String, HashSet<Loc>>,
    /// Namespaces being terminated.
    pub terminating: HashSet<String>,
    /// Pending garbage-collector work.
    pub gc_queue: BTreeSet<GcWork>,
    history_limit: usize,
}

impl State {
    /// An empty state keeping `history_limit` events per resource (at least 16).
    pub fn new(history_limit: usize) -> State {
        State {
            rv: 1,
            registry: Registry::default(),
            types: HashMap::new(),
            uids: HashMap::new(),
            dependents: HashMap::new(),
            terminating: HashSet::new(),
            gc_queue: BTreeSet::new(),
            history_limit: history_limit.max(16),
        }
    }

    /// Creates the storage of a resource if missing.
    pub fn ensure_type(&mut self, key: &StorageKey) {
        let floor = self.rv;
        let cap = self.history_limit;
        self.types.entry(key.clone()).or_insert_with(|| TypeState {
            objects: BTreeMap::new(),
            history: VecDeque::new(),
            floor,
            tx: broadcast::channel(cap).0,
        });
    }

    /// Drops a resource's storage (watchers see their channel close).
    pub fn drop_type(&mut self, key: &StorageKey) {
        if let Some(t) = self.types.remove(key) {
            for (k, obj) in &t.objects {
                self.uids.remove(crate::json::uid(obj));
                self.index_owners(&(key.clone(), k.clone()), Some(obj), None);
            }
        }
    }

    /// Keeps the owner index current and queues the collector's work for a change from
    /// `old` to `new` (None: absent) of the object at `loc`.
    fn index_owners(&mut self, loc: &Loc, old: Option<&Value>, new: Option<&Value>) {
        let before = old.map(owner_uids).unwrap_or_default();
        let after = new.map(owner_uids).unwrap_or_default();
        for u in before.iter().filter(|u| !after.contains(u)) {
            if let Some(set) = self.dependents.get_mut(u) {
                set.remove(loc);
                if set.is_empty() {
                    self.dependents.remove(u);
                }
            }
            // the owner may be waiting for this dependent
            if let Some(owner) = self.uids.get(u) {
                self.gc_queue.insert(GcWork::Owner(owner.clone()));
            }
        }
        for u in &after {
            self.dependents
                .entry(u.clone())
                .or_default()
                .insert(loc.clone());
        }
        match new {
            Some(n) => {
                if !after.is_empty() {
                    self.gc_queue.insert(GcWork::Dependent(loc.clone()));
                }
                if crate::json::is_deleting(n) {
                    self.gc_queue.insert(GcWork::Owner(loc.clone()));
                    if is_namespace(&loc.0) {
                        self.terminating.insert(loc.1.name.clone());
                        self.gc_queue.insert(GcWork::Namespace(loc.1.name.clone()));
                    }
                }
            }
            None => {
                let uid = old.map(crate::json::uid).unwrap_or("");
                if let Some(deps) = self.dependents.get(uid) {
                    for d in deps {
                        self.gc_queue.insert(GcWork::Dependent(d.clone()));
                    }
                }
                if is_namespace(&loc.0) {
                    self.terminating.remove(&loc.1.name);
                }
            }
        }
        let ns = &loc.1.namespace;
        if !ns.is_empty() && self.terminating.contains(ns) {
            self.gc_queue.insert(GcWork::Namespace(ns.clone()));
        }
    }

    /// The storage of a resource.
    pub fn objects(&self, key: &StorageKey) -> Option<&BTreeMap<ObjKey, Arc<Value>>> {
        self.types.get(key).map(|t| &t.objects)
    }

    /// All storage keys.
    pub fn storage_keys(&self) -> Vec<StorageKey> {
        self.types.keys().cloned().collect()
    }

    /// The oldest version a watch or continue token may start from.
    pub fn floor(&self, key: &StorageKey) -> u64 {
        self.types.get(key).map(|t| t.floor).unwrap_or(self.rv)
    }

    /// One object.
    pub fn get(&self, key: &StorageKey, obj: &ObjKey) -> Option<Arc<Value>> {
        self.types
            .get(key)
            .and_then(|t| t.objects.get(obj))
            .cloned()
    }

    fn record(&mut self, key: &StorageKey, rec: WatchRecord) {
        let rec = Arc::new(rec);
        let limit = self.history_limit;
        if let Some(t) = self.types.get_mut(key) {
            t.history.push_back(rec.clone());
            while t.history.len() > limit {
                if let Some(old) = t.history.pop_front() {
                    t.floor = old.rv;
                }
            }
            // Having no receivers is fine.
            let _ = t.tx.send(rec);
        }
    }

    /// Stores an object (create or update), assigning the next `resourceVersion`; returns
    /// the stored object.
    pub fn put(&mut self, key: &StorageKey, obj_key: ObjKey, mut value: Value) -> Arc<Value> {
        self.ensure_type(key);
        self.rv += 1;
        let rv = self.rv;
        crate::json::meta_mut(&mut value)
            .insert("resourceVersion".into(), Value::String(rv.to_string()));
        let uid = crate::json::uid(&value).to_string();
        let stored = Arc::new(value);
        let prev = self
            .types
            .get_mut(key)
            .and_then(|t| t.objects.insert(obj_key.clone(), stored.clone()));
        if !uid.is_empty() {
            self.uids.insert(uid, (key.clone(), obj_key.clone()));
        }
        self.index_owners(&(key.clone(), obj_key), prev.as_deref(), Some(&stored));
        let kind = if prev.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.record(
            key,
            WatchRecord {
                rv,
                kind,
                object: stored.clone(),
                prev,
                encoded: std::sync::OnceLock::new(),
            },
        );
        stored
    }

    /// Removes an object; `last` is its final state (sent in the `DELETED` event).
    /// Returns the final state with the deletion's `resourceVersion`.
    pub fn remove(&mut self, key: &StorageKey, obj_key: &ObjKey, mut last: Value) -> Arc<Value> {
        self.rv += 1;
        let rv = self.rv;
        crate::json::meta_mut(&mut last)
            .insert("resourceVersion".into(), Value::String(rv.to_string()));
        let last = Arc::new(last);
        let prev = self
            .types
            .get_mut(key)
            .and_then(|t| t.objects.remove(obj_key));
        if let Some(p) = &prev {
            self.uids.remove(crate::json::uid(p));
            self.index_owners(&(key.clone(), obj_key.clone()), Some(p), None);
        }
        self.record(
            key,
            WatchRecord {
                rv,
                kind: EventType::Deleted,
                object: last.clone(),
                prev,
                encoded: std::sync::OnceLock::new(),
            },
        );
        last
    }

    /// Subscribes to a resource's changes after version `from`. `Err(floor)` when events
    /// after `from` were already dropped from the history.
    pub fn subscribe(&self, key: &StorageKey, from: u64) -> Result<Subscription, u64> {
        let Some(t) = self.types.get(key) else {
            return Err(self.rv);
        };
        if from < t.floor {
            return Err(t.floor);
        }
        let backlog = t.history.iter().filter(|r| r.rv > from).cloned().collect();
        Ok(Subscription {
            backlog,
            rx: t.tx.subscribe(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key() -> StorageKey {
        StorageKey {
            group: "example.com".into(),
            plural: "widgets".into(),
        }
    }

    #[test]
    fn versions_increase_and_history_is_bounded() {
        let mut s = State::new(16);
        s.ensure_type(&key());
        let start = s.rv;
        for i in 0..20u64 {
            let obj = json!({"metadata": {"name": format!("w{i}"), "uid": format!("u{i}")}});
            let stored = s.put(&key(), ObjKey::new("ns", &format!("w{i}")), obj);
            assert_eq!(
                crate::json::resource_version(&stored),
                (start + 1 + i).to_string()
            );
        }
        // 20 events, 16 kept: the 4 oldest are gone.
        assert_eq!(s.floor(&key()), start + 4);
        assert!(s.subscribe(&key(), start + 3).is_err());
        let sub = s.subscribe(&key(), start + 4).expect("in window");
        assert_eq!(sub.backlog.len(), 16);
        assert_eq!(s.uids.len(), 20);
        let removed = s.remove(
            &key(),
            &ObjKey::new("ns", "w0"),
            json!({"metadata": {"name": "w0"}}),
        );
        assert_eq!(
            crate::json::resource_version(&removed),
            (start + 21).to_string()
        );
        assert_eq!(s.uids.len(), 19);
    }
}
