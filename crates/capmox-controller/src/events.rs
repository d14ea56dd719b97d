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

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use crate::context::Shared;
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
    if let Err(e) = shared.recorder.publish(&ev, obj).await {
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
    fn notes_are_cut_at_char_boundaries() {
        assert_eq!(truncate_note("short"), "short");
        let long = "ü".repeat(800);
        let cut = truncate_note(&long);
        assert!(cut.len() <= MAX_NOTE, "{}", cut.len());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("üü"));
    }
}
