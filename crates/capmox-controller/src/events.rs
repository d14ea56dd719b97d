//! Kubernetes events (`events.k8s.io/v1`) for state changes an operator
//! cares about: Normal for progress, Warning for failures. The reason and
//! the note come from a [`Reason`] (its code and message).
//!
//! Series: the event recorder folds repeated events of one object with the
//! same reason into one series (the note of the first one stays). Events
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
//! kube-runtime's recorder names an event `<object name>.<hex nanoseconds>`,
//! which is no valid object name for objects named with more than 236
//! characters; events about those are written directly under
//! [`crate::names::event_name`] (without the recorder's series counting).

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event as EventObject;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::events::{Event, EventType, Reporter};

use crate::context::Shared;
use crate::names;
use crate::reasons::Reason;

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
    let ev = Event {
        type_: match kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: reason.code().to_string(),
        note: Some(truncate_note(note)),
        action: action.to_string(),
        secondary: None,
    };
    let result = match obj.name.as_deref() {
        Some(name) if !names::recorder_can_name(name) => {
            let ns = obj.namespace.as_deref().unwrap_or("default");
            Api::<EventObject>::namespaced(shared.kube.clone(), ns)
                .create(
                    &PostParams::default(),
                    &event_object(&shared.reporter, &ev, obj, Timestamp::now()),
                )
                .await
                .map(|_| ())
        }
        _ => shared.recorder.publish(&ev, obj).await,
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

/// The `events.k8s.io/v1` Event kube-runtime's recorder would write about
/// `obj` at `now`, named by [`names::event_name`].
fn event_object(
    reporter: &Reporter,
    ev: &Event,
    obj: &ObjectReference,
    now: Timestamp,
) -> EventObject {
    let nanos = u64::try_from(now.as_nanosecond()).unwrap_or_default();
    EventObject {
        action: Some(ev.action.clone()),
        reason: Some(ev.reason.clone()),
        event_time: Some(MicroTime(now)),
        regarding: Some(obj.clone()),
        note: ev.note.clone(),
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
        type_: Some(
            match ev.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_string(),
        ),
        related: ev.secondary.clone(),
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
        let ev = Event {
            type_: EventType::Warning,
            reason: "CloneFailed".into(),
            note: Some("n".into()),
            action: "Provision".into(),
            secondary: None,
        };
        let now = Timestamp::from_nanosecond(1_780_000_000_123_456_789).unwrap();
        let e = event_object(&reporter, &ev, &obj, now);
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
}
