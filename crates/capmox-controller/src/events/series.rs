//! Event series: a repeat of an event about the same object, with the same
//! type, reason and action, within [`SERIES_TTL`] becomes a series on the
//! first event (`series.count`, `series.lastObservedTime`, PATCHed; the
//! first note stays) instead of a new Event object. This is what
//! kube-runtime's `Recorder` does, without what made it the controller's
//! largest heap consumer at scale: the recorder keeps every published Event
//! object for 6 minutes and walks the whole cache on every publish (8.85
//! MiB of a 33.9 MiB heap at 300 machines, docs/benchmarks.md). Here a
//! series keeps a digest of its key, its event's name, count and last time
//! (about 100 bytes), and expired series are dropped at most once per
//! [`PRUNE_EVERY`].

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher, RandomState};
use std::sync::{Mutex, PoisonError};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How long after its last occurrence a repeat still joins a series
/// (kube-runtime's recorder uses the same 6 minutes).
pub const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// Expired series are dropped at most this often.
pub const PRUNE_EVERY: SignedDuration = SignedDuration::from_secs(30);

/// What makes two events the same series: the object they are about (its
/// namespace, name, UID, kind, API version and field path), their type,
/// reason and action, kept as a 128-bit digest instead of the ten strings
/// (at 1,000 machines the keys' strings and their table were 3 MB of the
/// heap, docs/benchmarks.md). The digest is two 64-bit SipHashes with keys
/// drawn at random when the process starts, so nobody can choose names
/// that collide; two different keys share a digest with a probability of
/// about 2⁻¹²⁸ per pair, and the cost of that would be one event counted in
/// another's series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey(u128);

/// The two hash functions of [`SeriesKey`] (random keys, one per process).
static DIGEST: std::sync::LazyLock<[RandomState; 2]> =
    std::sync::LazyLock::new(|| [RandomState::new(), RandomState::new()]);

impl SeriesKey {
    /// The key of an event about `obj`.
    pub fn new(obj: &ObjectReference, type_: &str, reason: &str, action: &str) -> Self {
        let half = |state: &RandomState| {
            let mut h = state.build_hasher();
            (
                &obj.namespace,
                &obj.name,
                &obj.uid,
                &obj.kind,
                &obj.api_version,
                &obj.field_path,
            )
                .hash(&mut h);
            (type_, reason, action).hash(&mut h);
            h.finish()
        };
        let [a, b] = &*DIGEST;
        SeriesKey((u128::from(half(a)) << 64) | u128::from(half(b)))
    }
}

/// A series: the Event object of its first occurrence and how often it
/// happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Series {
    /// The Event object's name.
    pub name: String,
    /// Occurrences so far (1: the event alone, no series yet).
    pub count: i32,
    /// The last occurrence.
    pub last: Timestamp,
}

/// What to write for an occurrence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Occurrence {
    /// A new Event object.
    New,
    /// A repeat: PATCH the series of Event `name` to `count`.
    Repeat {
        /// The Event object's name.
        name: String,
        /// The series count (2 on the first repeat).
        count: i32,
    },
}

#[derive(Debug, Default)]
struct State {
    series: HashMap<SeriesKey, Series>,
    pruned: Option<Timestamp>,
}

/// The live series of this process.
#[derive(Debug, Default)]
pub struct SeriesCache {
    state: Mutex<State>,
}

impl SeriesCache {
    /// Counts an occurrence of `key` at `now`: a repeat of a live series,
    /// or a new event (recorded once [`SeriesCache::created`] names it).
    pub fn occur(&self, key: &SeriesKey, now: Timestamp) -> Occurrence {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.pruned.is_none_or(|t| t + PRUNE_EVERY <= now) {
            st.series.retain(|_, s| s.last + SERIES_TTL > now);
            st.pruned = Some(now);
        }
        match st.series.get_mut(key) {
            Some(s) if s.last + SERIES_TTL > now => {
                s.count += 1;
                s.last = now;
                Occurrence::Repeat {
                    name: s.name.clone(),
                    count: s.count,
                }
            }
            _ => Occurrence::New,
        }
    }

    /// Event `name` was created for `key` at `now`: later occurrences join
    /// its series.
    pub fn created(&self, key: SeriesKey, name: String, now: Timestamp) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.series.insert(
            key,
            Series {
                name,
                count: 1,
                last: now,
            },
        );
    }

    /// The series of `key` is gone (its Event object was not found): the
    /// next occurrence creates a new one.
    pub fn forget(&self, key: &SeriesKey) {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.series.remove(key);
    }

    /// Live series (for tests and metrics).
    pub fn len(&self) -> usize {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .series
            .len()
    }

    /// No live series.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(name: &str) -> ObjectReference {
        ObjectReference {
            namespace: Some("ns".into()),
            name: Some(name.into()),
            kind: Some("ProxmoxMachine".into()),
            ..Default::default()
        }
    }

    #[test]
    fn every_part_of_the_key_tells_series_apart() {
        let base = obj("m1");
        let key = |o: &ObjectReference, t: &str, r: &str, a: &str| SeriesKey::new(o, t, r, a);
        let k = key(&base, "Normal", "Cloning", "Reconcile");
        assert_eq!(k, key(&obj("m1"), "Normal", "Cloning", "Reconcile"));
        let with = |change: fn(&mut ObjectReference)| {
            let mut o = base.clone();
            change(&mut o);
            o
        };
        let variants = [
            with(|o| o.namespace = Some("other".into())),
            with(|o| o.uid = Some("u2".into())),
            with(|o| o.kind = Some("ProxmoxCluster".into())),
            with(|o| o.api_version = Some("v2".into())),
            with(|o| o.field_path = Some("spec.instances[0]".into())),
            // The same letters split differently between two fields.
            with(|o| {
                o.namespace = Some("n".into());
                o.name = Some("sm1".into());
            }),
        ];
        for v in &variants {
            assert_ne!(k, key(v, "Normal", "Cloning", "Reconcile"), "{v:?}");
        }
        assert_ne!(k, key(&base, "Warning", "Cloning", "Reconcile"));
        assert_ne!(k, key(&base, "Normal", "Cloned", "Reconcile"));
        assert_ne!(k, key(&base, "Normal", "Cloning", "Delete"));
        assert_ne!(
            key(&base, "Normal", "ab", "c"),
            key(&base, "Normal", "a", "bc")
        );
    }

    #[test]
    fn repeats_within_the_ttl_are_a_series_and_expired_ones_are_dropped() {
        let c = SeriesCache::default();
        let t0 = Timestamp::UNIX_EPOCH + SignedDuration::from_hours(1);
        let k = SeriesKey::new(&obj("m1"), "Normal", "Cloning", "Reconcile");
        assert_eq!(c.occur(&k, t0), Occurrence::New);
        c.created(k, "m1.1".into(), t0);
        let t1 = t0 + SignedDuration::from_secs(10);
        assert_eq!(
            c.occur(&k, t1),
            Occurrence::Repeat {
                name: "m1.1".into(),
                count: 2
            }
        );
        // Another reason, type or object is its own event.
        let other = SeriesKey::new(&obj("m1"), "Warning", "Cloning", "Reconcile");
        assert_eq!(c.occur(&other, t1), Occurrence::New);
        let m2 = SeriesKey::new(&obj("m2"), "Normal", "Cloning", "Reconcile");
        assert_eq!(c.occur(&m2, t1), Occurrence::New);
        // Six minutes after the last occurrence: a new event, and the
        // expired series is dropped from memory.
        let late = t1 + SERIES_TTL;
        assert_eq!(c.occur(&k, late), Occurrence::New);
        assert!(c.is_empty());
        c.created(k, "m1.2".into(), late);
        c.forget(&k);
        assert_eq!(c.len(), 0);
    }
}
