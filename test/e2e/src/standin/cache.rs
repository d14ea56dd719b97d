//! What a controller's watches last delivered, so its reconciles read the
//! objects it watches without a GET (CAPI's controllers read through the
//! controller-runtime cache the same way).
//!
//! A [`Seen`] is fed by the mapper of a `Controller::watches` call: kube's
//! controller calls the mapper for every watch event *before* it schedules the
//! reconcile the event triggers, so a reconcile always finds an object at
//! least as new as the event that woke it. A watch event does not say whether
//! the object was deleted; an object last seen with a `deletionTimestamp`
//! is therefore not trusted ([`Seen::get`] returns `None` and the caller
//! asks the API server), and an object deleted without finalizers (never
//! seen deleting) stays in the map: callers that must see a deletion (the
//! deletion paths) GET instead.
//!
//! The Machine and KubeadmConfig controllers GET the object they reconcile:
//! with 1,000 Machines their watches lagged by thousands of writes, and each
//! reconcile of a stale copy repeated writes already made (see
//! `machine::reconcile`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::api::{ApiResource, DynamicObject};

use crate::crds::{Cluster, Machine};

/// `(group, kind, namespace, name)`.
type Key = (String, String, String, String);

/// The last watched version of objects of one or more kinds, by group, kind,
/// namespace and name.
#[derive(Debug)]
pub struct Seen<K> {
    objects: Mutex<HashMap<Key, Arc<K>>>,
}

impl<K> Default for Seen<K> {
    fn default() -> Self {
        Seen {
            objects: Mutex::new(HashMap::new()),
        }
    }
}

impl<K: Resource> Seen<K> {
    /// Records `obj` (of `group`/`kind`) as the newest version seen. Several
    /// controllers watch the same kinds and feed one map, so a version older
    /// than the one held (numerically smaller `resourceVersion`, as kube-sim
    /// and etcd issue them) is ignored.
    pub fn observe_as(&self, group: &str, kind: &str, obj: K) {
        let key = (
            group.to_string(),
            kind.to_string(),
            obj.meta().namespace.clone().unwrap_or_default(),
            obj.meta().name.clone().unwrap_or_default(),
        );
        let mut map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(held) = map.get(&key)
            && let (Some(old), Some(new)) = (rv_number(held.meta()), rv_number(obj.meta()))
            && new < old
        {
            return;
        }
        map.insert(key, Arc::new(obj));
    }

    /// The newest version seen of `group`/`kind` `namespace`/`name`; `None`
    /// when never seen or last seen being deleted (ask the API server).
    pub fn get(&self, group: &str, kind: &str, namespace: &str, name: &str) -> Option<Arc<K>> {
        let key = (
            group.to_string(),
            kind.to_string(),
            namespace.to_string(),
            name.to_string(),
        );
        let map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&key)
            .filter(|o| o.meta().deletion_timestamp.is_none())
            .cloned()
    }
}

fn rv_number(meta: &kube::api::ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

/// The children a controller watches (fed by the mapper of its watch), by
/// owner UID, with when the owner's children were last LISTed.
///
/// Children that are gone leave when their last version is seen being
/// deleted without finalizers; a child deleted before it ever had a
/// finalizer may stay until the owner's next LIST (see [`Children::listed_within`]).
#[derive(Debug)]
pub struct Children<K> {
    objects: Mutex<HashMap<(String, String), Arc<K>>>,
    listed: Mutex<HashMap<String, Instant>>,
}

impl<K> Default for Children<K> {
    fn default() -> Self {
        Children {
            objects: Mutex::new(HashMap::new()),
            listed: Mutex::new(HashMap::new()),
        }
    }
}

fn gone(meta: &kube::api::ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some() && meta.finalizers.as_ref().is_none_or(Vec::is_empty)
}

fn key_of(meta: &kube::api::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

impl<K: Resource> Children<K> {
    /// Records a version from the watch (older than the one held: ignored).
    pub fn observe(&self, obj: K) {
        let mut map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        Self::put(&mut map, Arc::new(obj));
    }

    fn put(map: &mut HashMap<(String, String), Arc<K>>, obj: Arc<K>) {
        let key = key_of(obj.meta());
        if let Some(held) = map.get(&key)
            && let (Some(old), Some(new)) = (rv_number(held.meta()), rv_number(obj.meta()))
            && new < old
        {
            return;
        }
        if gone(obj.meta()) {
            map.remove(&key);
        } else {
            map.insert(key, obj);
        }
    }

    /// Drops `namespace`/`name` (the API server answered that it is gone).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        map.remove(&(namespace.to_string(), name.to_string()));
    }

    /// The children of the owner with `uid` in `namespace` (any owner
    /// reference, controller or not), sorted by name.
    pub fn of_owner(&self, namespace: &str, uid: &str) -> Vec<Arc<K>> {
        let map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        let mut out: Vec<Arc<K>> = map
            .iter()
            .filter(|((ns, _), o)| ns == namespace && super::meta::is_owned_by(o.meta(), uid))
            .map(|(_, o)| o.clone())
            .collect();
        out.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
        out
    }

    /// Replaces the owner's children with a LIST's answer (versions newer
    /// than the LIST's, delivered meanwhile by the watch, are kept) and
    /// notes the time.
    pub fn listed(&self, namespace: &str, uid: &str, items: &[Arc<K>]) {
        let mut map = self.objects.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|(ns, name), o| {
            ns != namespace
                || !super::meta::is_owned_by(o.meta(), uid)
                || items.iter().any(|i| i.meta().name.as_ref() == Some(name))
        });
        for item in items {
            Self::put(&mut map, item.clone());
        }
        drop(map);
        let mut listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        listed.insert(uid.to_string(), Instant::now());
    }

    /// Whether the owner's children were LISTed less than `window` ago.
    pub fn listed_within(&self, uid: &str, window: Duration) -> bool {
        let listed = self.listed.lock().unwrap_or_else(|p| p.into_inner());
        listed.get(uid).is_some_and(|t| t.elapsed() < window)
    }
}

/// The objects the stand-in's controllers watch, shared by all of them.
#[derive(Debug, Default)]
pub struct Caches {
    /// Clusters.
    pub clusters: Seen<Cluster>,
    /// Machines.
    pub machines: Seen<Machine>,
    /// Objects behind contract references (KubeadmConfigs, InfraMachines),
    /// as dynamic objects.
    pub objects: Seen<DynamicObject>,
    /// The MachineSet controller's Machines, by owner.
    pub set_machines: Children<Machine>,
    /// Every Machine in scope (the Cluster controller's reflector; a
    /// reflector store drops deleted objects, so it can count them).
    pub all_machines: std::sync::OnceLock<kube::runtime::reflector::Store<Machine>>,
    /// The IPAddresses the IPAM claim controller knows (its reflector's
    /// store and its unseen creations).
    pub addresses: super::ip_addresses::Known,
}

impl<K> Seen<K>
where
    K: Resource<DynamicType = ()>,
{
    /// Records a typed object.
    pub fn observe(&self, obj: K) {
        let (group, kind) = (K::group(&()).into_owned(), K::kind(&()).into_owned());
        self.observe_as(&group, &kind, obj);
    }

    /// The newest version seen of a typed object (see [`Seen::get`]).
    pub fn get_typed(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get(&K::group(&()), &K::kind(&()), namespace, name)
    }
}

impl Seen<DynamicObject> {
    /// Records a dynamic object of the kind `ar` describes.
    pub fn observe_dynamic(&self, ar: &ApiResource, obj: DynamicObject) {
        self.observe_as(&ar.group, &ar.kind, obj);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::api::ObjectMeta;

    fn cluster(name: &str, rv: &str, deleting: bool) -> Cluster {
        let mut c: Cluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2",
            "kind": "Cluster",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {}
        }))
        .unwrap();
        c.metadata = ObjectMeta {
            resource_version: Some(rv.into()),
            deletion_timestamp: deleting.then(super::super::meta::now),
            ..c.metadata
        };
        c
    }

    fn machine(name: &str, owner: &str, rv: &str, deleting: bool, finalizer: bool) -> Machine {
        let mut m = Machine::new(name, crate::crds::machine::MachineSpec::default());
        m.metadata.namespace = Some("ns".into());
        m.metadata.resource_version = Some(rv.into());
        m.metadata.owner_references = Some(vec![super::super::meta::owner_ref(
            "cluster.x-k8s.io/v1beta2",
            "MachineSet",
            &ObjectMeta {
                name: Some("ms".into()),
                uid: Some(owner.into()),
                ..ObjectMeta::default()
            },
            true,
            true,
        )]);
        m.metadata.deletion_timestamp = deleting.then(super::super::meta::now);
        m.metadata.finalizers = finalizer.then(|| vec!["f".to_string()]);
        m
    }

    fn names(list: &[Arc<Machine>]) -> Vec<String> {
        list.iter()
            .filter_map(|m| m.metadata.name.clone())
            .collect()
    }

    #[test]
    fn children_by_owner_follow_the_watch_and_lists() {
        let c = Children::<Machine>::default();
        c.observe(machine("b", "u1", "2", false, true));
        c.observe(machine("a", "u1", "3", false, true));
        c.observe(machine("x", "u2", "4", false, true));
        assert_eq!(names(&c.of_owner("ns", "u1")), ["a", "b"]);
        assert!(c.of_owner("other", "u1").is_empty());
        // Deleting with a finalizer: still there; without: gone.
        c.observe(machine("a", "u1", "5", true, true));
        assert_eq!(names(&c.of_owner("ns", "u1")), ["a", "b"]);
        c.observe(machine("a", "u1", "6", true, false));
        assert_eq!(names(&c.of_owner("ns", "u1")), ["b"]);
        // A LIST replaces the owner's children, keeping newer watched versions.
        assert!(!c.listed_within("u1", Duration::from_secs(60)));
        c.observe(machine("c", "u1", "9", false, true));
        c.listed(
            "ns",
            "u1",
            &[
                Arc::new(machine("c", "u1", "8", false, true)),
                Arc::new(machine("d", "u1", "7", false, true)),
            ],
        );
        let got = c.of_owner("ns", "u1");
        assert_eq!(names(&got), ["c", "d"]);
        assert_eq!(got[0].metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(names(&c.of_owner("ns", "u2")), ["x"]);
        assert!(c.listed_within("u1", Duration::from_secs(60)));
        assert!(!c.listed_within("u2", Duration::from_secs(60)));
    }

    #[test]
    fn newest_version_wins_and_deleting_objects_are_not_trusted() {
        let seen = Seen::<Cluster>::default();
        assert!(seen.get_typed("ns", "a").is_none());
        seen.observe(cluster("a", "1", false));
        seen.observe(cluster("a", "2", false));
        let got = seen.get_typed("ns", "a").unwrap();
        assert_eq!(got.metadata.resource_version.as_deref(), Some("2"));
        assert!(seen.get_typed("other", "a").is_none());
        assert!(seen.get("cluster.x-k8s.io", "Machine", "ns", "a").is_none());
        seen.observe(cluster("a", "1", false));
        let got = seen.get_typed("ns", "a").unwrap();
        assert_eq!(got.metadata.resource_version.as_deref(), Some("2"));
        seen.observe(cluster("a", "3", true));
        assert!(seen.get_typed("ns", "a").is_none());
    }
}
