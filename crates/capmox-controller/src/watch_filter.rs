//! Watch streams that pass on only the changes a controller acts on.
//!
//! Every status write of an object is a watch event, and a controller that
//! reconciles on each of them works for nothing: a ProxmoxMachine's own
//! status writes would wake it again, a ProxmoxCluster's machine counts
//! would wake every machine of the cluster (N machines × N writes). These
//! filters hash the fields a trigger depends on and drop an update whose
//! hash did not change — controller-runtime's `GenerationChangedPredicate`
//! idea, with the hash chosen per watch.
//!
//! Unlike kube-runtime's `predicate_filter` (which sees touched objects
//! only), a deletion always passes, so "the last machine of the cluster is
//! gone" is never swallowed. The reflector, when there is one, must sit
//! before the filter so the store still sees every change.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::runtime::watcher;

/// The hash of `value` (any `Hash` tuple of the fields a trigger depends on).
pub fn hash_of<T: Hash + ?Sized>(value: &T) -> u64 {
    let mut h = DefaultHasher::new();
    value.hash(&mut h);
    h.finish()
}

/// The hash of a serializable part of an object (status fragments, lists of
/// structs without `Hash`), through its JSON text. `0` if it cannot be
/// serialized (never happens for our types).
pub fn hash_json<T: serde::Serialize + ?Sized>(value: &T) -> u64 {
    serde_json::to_string(value).map_or(0, |s| hash_of(&s))
}

/// The metadata every controller reacts to: generation (spec changes and
/// the deletion mark), labels, annotations (`paused`), finalizers, owner
/// references and whether a deletion is pending. A status-only write
/// changes none of them.
pub fn metadata_hash<K: Resource>(obj: &K) -> u64 {
    let m = obj.meta();
    hash_of(&(
        m.generation,
        &m.labels,
        &m.annotations,
        &m.finalizers,
        m.owner_references.as_ref().map(|o| {
            o.iter()
                .map(|r| (&r.uid, &r.kind, r.controller))
                .collect::<Vec<_>>()
        }),
        m.deletion_timestamp.is_some(),
    ))
}

/// Objects from a watcher event stream, passing an update only when
/// `relevant(obj)` differs from the value last seen for that object (by
/// UID, else namespace/name). Objects listed at (re)start pass, and so do
/// deletions. Errors pass through unchanged.
pub fn changed<K, S, F>(
    events: S,
    relevant: F,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
    F: Fn(&K) -> u64 + Send + 'static,
{
    let mut seen: HashMap<String, u64> = HashMap::new();
    events.filter_map(move |event| {
        let out = match event {
            Err(e) => Some(Err(e)),
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Ok(watcher::Event::InitApply(obj)) => {
                seen.insert(key(&obj), relevant(&obj));
                Some(Ok(obj))
            }
            Ok(watcher::Event::Apply(obj)) => {
                let h = relevant(&obj);
                match seen.insert(key(&obj), h) {
                    Some(old) if old == h => None,
                    _ => Some(Ok(obj)),
                }
            }
            Ok(watcher::Event::Delete(obj)) => {
                seen.remove(&key(&obj));
                Some(Ok(obj))
            }
        };
        future::ready(out)
    })
}

fn key<K: Resource>(obj: &K) -> String {
    let m = obj.meta();
    match &m.uid {
        Some(uid) => uid.clone(),
        None => format!(
            "{}/{}",
            m.namespace.as_deref().unwrap_or_default(),
            m.name.as_deref().unwrap_or_default()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use std::collections::BTreeMap;

    fn cm(uid: &str, generation: i64, data: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(uid.to_string()),
                namespace: Some("ns".into()),
                uid: Some(uid.to_string()),
                generation: Some(generation),
                ..ObjectMeta::default()
            },
            data: Some(BTreeMap::from([("k".to_string(), data.to_string())])),
            ..ConfigMap::default()
        }
    }

    async fn run(events: Vec<watcher::Event<ConfigMap>>) -> Vec<(String, i64, String)> {
        let s = changed(
            futures::stream::iter(events.into_iter().map(Ok)),
            metadata_hash::<ConfigMap>,
        );
        s.map(|r| {
            let c = r.unwrap();
            (
                c.metadata.uid.clone().unwrap(),
                c.metadata.generation.unwrap(),
                c.data.unwrap()["k"].clone(),
            )
        })
        .collect()
        .await
    }

    #[tokio::test]
    async fn status_only_updates_are_dropped_deletions_and_listings_pass() {
        let out = run(vec![
            watcher::Event::Init,
            watcher::Event::InitApply(cm("a", 1, "listed")),
            watcher::Event::InitDone,
            // Same generation: a status write.
            watcher::Event::Apply(cm("a", 1, "status")),
            watcher::Event::Apply(cm("a", 2, "spec")),
            watcher::Event::Apply(cm("b", 1, "new")),
            watcher::Event::Apply(cm("b", 1, "status again")),
            // The deletion carries nothing new, and still passes.
            watcher::Event::Delete(cm("a", 2, "gone")),
            // A re-created object with the same name is new.
            watcher::Event::Apply(cm("a", 2, "again")),
        ])
        .await;
        assert_eq!(
            out,
            vec![
                ("a".into(), 1, "listed".into()),
                ("a".into(), 2, "spec".into()),
                ("b".into(), 1, "new".into()),
                ("a".into(), 2, "gone".into()),
                ("a".into(), 2, "again".into()),
            ]
        );
    }

    #[test]
    fn metadata_hash_sees_finalizers_annotations_and_the_deletion_mark() {
        let base = cm("a", 1, "x");
        let h = metadata_hash(&base);
        let mut f = base.clone();
        f.metadata.finalizers = Some(vec!["x".into()]);
        assert_ne!(metadata_hash(&f), h);
        let mut a = base.clone();
        a.metadata.annotations = Some(BTreeMap::from([(
            "cluster.x-k8s.io/paused".to_string(),
            String::new(),
        )]));
        assert_ne!(metadata_hash(&a), h);
        let mut d = base.clone();
        d.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
        assert_ne!(metadata_hash(&d), h);
        let mut s = base.clone();
        s.data = Some(BTreeMap::new());
        assert_eq!(metadata_hash(&s), h, "data/status is not metadata");
        assert_ne!(hash_json(&s.data), hash_json(&base.data));
    }
}
