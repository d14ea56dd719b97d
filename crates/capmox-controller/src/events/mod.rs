//! Kubernetes events (`events.k8s.io/v1`) for state changes an operator
//! cares about: Normal for progress, Warning for failures. The reason and
//! the note come from a [`Reason`] (its code and message).
//!
//! Series: a repeated event of one object with the same type, reason and
//! action within 6 minutes becomes a series on the first one (the note of
//! the first one stays; [`series`]). Events
//! about one instance of a ProxmoxCluster therefore name the instance in
//! the `regarding` reference's `fieldPath` (`spec.settings.instances{dc-a}`,
//! the way events about one container of a Pod name it), so each
//! instance's event is its own series and stays visible.
//!
//! Publishing is best effort: a failed event write is logged at debug level
//! and never fails a reconcile. Notes are cut to [`MAX_NOTE`] bytes (the API
//! server's limit is 1 kB). Callers never pass secret values; errors of this
//! crate and of `pve-client` carry none.
//!
//! An event is named `<object name>.<hex nanoseconds>`, the object name
//! shortened so that the whole stays a valid object name
//! ([`crate::names::event_name`]).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventObject;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;

use self::series::{Occurrence, SeriesKey};
use crate::context::Shared;
use crate::names;
use crate::reasons::Reason;

pub mod series;

/// Longest note written (bytes); longer ones end in `…`.
pub const MAX_NOTE: usize = 1000;

/// The type of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    /// Progress an operator may want to see.
    Normal,
    /// Something is wrong and needs attention.
    Warning,
}

impl EventKind {
    /// The Event's `type`: `Normal` or `Warning`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Normal => "Normal",
            EventKind::Warning => "Warning",
        }
    }
}

/// Cuts `note` to at most [`MAX_NOTE`] bytes at a character boundary.
pub fn truncate_note(note: &str) -> String {
    if note.len() <= MAX_NOTE {
        return note.to_string();
    }
    let mut end = MAX_NOTE - '…'.len_utf8();
    while !note.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &note[..end])
}

/// Publishes an event about `obj`: `reason` (its code is the event's
/// reason, its message the note) and `action` (what the controller was
/// doing, e.g. `Reconcile`, `Probe`, `Delete`).
pub async fn publish(
    shared: &Shared,
    obj: &ObjectReference,
    kind: EventKind,
    reason: &Reason,
    action: &str,
) {
    publish_note(shared, obj, kind, reason, action, &reason.message()).await
}

/// [`publish`] with a note other than the reason's message (e.g. with a
/// retry appended).
pub async fn publish_note(
    shared: &Shared,
    obj: &ObjectReference,
    kind: EventKind,
    reason: &Reason,
    action: &str,
    note: &str,
) {
    let note = truncate_note(note);
    let key = SeriesKey::new(obj, kind.as_str(), reason.code(), action);
    let now = Timestamp::now();
    let ns = obj.namespace.as_deref().unwrap_or("default");
    let api = Api::<EventObject>::namespaced(shared.kube.clone(), ns);
    let create = || async {
        let event = event_object(
            &shared.reporter,
            kind,
            reason.code(),
            &note,
            action,
            obj,
            now,
        );
        let name = event.metadata.name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &event).await?;
        shared.series.created(key, name, now);
        Ok::<(), kube::Error>(())
    };
    let result = match shared.series.occur(&key, now) {
        Occurrence::New => create().await,
        Occurrence::Repeat { name, count } => {
            let patch = serde_json::json!({
                "series": { "count": count, "lastObservedTime": MicroTime(now) }
            });
            match api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                // The first event is gone (the API server's event TTL):
                // the series starts again.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    shared.series.forget(&key);
                    create().await
                }
                r => r.map(|_| ()),
            }
        }
    };
    if let Err(e) = result {
        tracing::debug!(error = %e, reason = reason.code(), "could not publish event");
    }
}

/// The reference of instance `instance` of the ProxmoxCluster `cluster`
/// (its `regarding` reference with `fieldPath` naming the instance).
pub fn about_instance(cluster: &ObjectReference, instance: &str) -> ObjectReference {
    ObjectReference {
        field_path: Some(format!("spec.settings.instances{{{instance}}}")),
        ..cluster.clone()
    }
}

/// The `events.k8s.io/v1` Event about `obj` at `now`, named by
/// [`names::event_name`].
fn event_object(
    reporter: &Reporter,
    kind: EventKind,
    reason: &str,
    note: &str,
    action: &str,
    obj: &ObjectReference,
    now: Timestamp,
) -> EventObject {
    let nanos = u64::try_from(now.as_nanosecond()).unwrap_or_default();
    EventObject {
        action: Some(action.to_string()),
        reason: Some(reason.to_string()),
        event_time: Some(MicroTime(now)),
        regarding: Some(obj.clone()),
        note: Some(note.to_string()),
        metadata: ObjectMeta {
            namespace: obj.namespace.clone(),
            name: Some(names::event_name(
                obj.name.as_deref().unwrap_or(&reporter.controller),
                nanos,
            )),
            ..ObjectMeta::default()
        },
        reporting_controller: Some(reporter.controller.clone()),
        reporting_instance: Some(
            reporter
                .instance
                .clone()
                .unwrap_or_else(|| reporter.controller.clone()),
        ),
        type_: Some(kind.as_str().to_string()),
        ..EventObject::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_events_are_their_own_series() {
        let pc = ObjectReference {
            kind: Some("ProxmoxCluster".into()),
            name: Some("wl1".into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            ..ObjectReference::default()
        };
        let a = about_instance(&pc, "dc-a");
        let b = about_instance(&pc, "dc-b");
        assert_eq!(
            a.field_path.as_deref(),
            Some("spec.settings.instances{dc-a}")
        );
        assert_ne!(a, b);
        assert_eq!(a.uid, pc.uid);
    }

    #[test]
    fn events_about_long_names_get_a_valid_name() {
        let name = "m".repeat(253);
        let obj = ObjectReference {
            name: Some(name.clone()),
            namespace: Some("wl1".into()),
            ..ObjectReference::default()
        };
        let reporter = Reporter {
            controller: "capmox".into(),
            instance: Some("pod-1".into()),
        };
        let now = Timestamp::from_nanosecond(1_780_000_000_123_456_789).unwrap();
        let e = event_object(
            &reporter,
            EventKind::Warning,
            "CloneFailed",
            "n",
            "Provision",
            &obj,
            now,
        );
        let got = e.metadata.name.unwrap();
        assert_eq!(got.len(), 253);
        assert!(got.ends_with(".18b3d491bb8dcd15"), "{got}");
        assert!(kube_sim::validation::dns1123_subdomain(&got).is_empty());
        assert_eq!(e.regarding.unwrap().name.as_deref(), Some(name.as_str()));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.reporting_instance.as_deref(), Some("pod-1"));
    }

    #[test]
    fn notes_are_cut_at_char_boundaries() {
        assert_eq!(truncate_note("short"), "short");
        let long = "ü".repeat(800);
        let cut = truncate_note(&long);
        assert!(cut.len() <= MAX_NOTE, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("üü"));
    }

    use kube::api::{DeleteParams, ListParams};

    use crate::machine::steps::tests::kit::{Kit, NS};

    fn about(name: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha3".into()),
            kind: Some("ProxmoxMachine".into()),
            namespace: Some(NS.into()),
            name: Some(name.into()),
            uid: Some(format!("uid-{name}")),
            ..Default::default()
        }
    }

    async fn events(kit: &Kit) -> Vec<EventObject> {
        Api::<EventObject>::namespaced(kit.ctx.shared.kube.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
    }

    #[tokio::test]
    async fn a_repeat_is_a_series_on_the_first_event_and_a_deleted_one_starts_again() {
        let kit = Kit::new().await;
        let shared = &kit.ctx.shared;
        let r = Reason::Cloning("cloning VM 131".into());
        publish(shared, &about("m1"), EventKind::Normal, &r, "Reconcile").await;
        publish_note(
            shared,
            &about("m1"),
            EventKind::Normal,
            &r,
            "Reconcile",
            "other note",
        )
        .await;
        let all = events(&kit).await;
        assert_eq!(all.len(), 1, "one Event object for the repeat");
        assert_eq!(all[0].series.as_ref().map(|s| s.count), Some(2));
        assert_eq!(
            all[0].note.as_deref(),
            Some("cloning VM 131"),
            "the first note stays"
        );
        // Another object, or another type, is an event of its own.
        publish(shared, &about("m2"), EventKind::Normal, &r, "Reconcile").await;
        publish(shared, &about("m1"), EventKind::Warning, &r, "Reconcile").await;
        assert_eq!(events(&kit).await.len(), 3);
        // The first event is gone (the API server's event TTL): a repeat
        // creates a new one.
        let name = all[0].metadata.name.clone().unwrap();
        Api::<EventObject>::namespaced(shared.kube.clone(), NS)
            .delete(&name, &DeleteParams::default())
            .await
            .unwrap();
        publish(shared, &about("m1"), EventKind::Normal, &r, "Reconcile").await;
        let again: Vec<EventObject> = events(&kit)
            .await
            .into_iter()
            .filter(|e| {
                e.type_.as_deref() == Some("Normal")
                    && e.regarding.as_ref().and_then(|o| o.name.as_deref()) == Some("m1")
            })
            .collect();
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].series, None);
        assert_eq!(shared.series.len(), 3);
    }
}
