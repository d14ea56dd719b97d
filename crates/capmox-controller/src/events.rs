//! Kubernetes events (`events.k8s.io/v1`) for state changes an operator
//! cares about: Normal for progress, Warning for failures (reason = a stable
//! CamelCase word or [`crate::error::Error::category`]).
//!
//! Publishing is best effort: a failed event write is logged at debug level
//! and never fails a reconcile. Notes are cut to [`MAX_NOTE`] bytes (the API
//! server's limit is 1 kB). Callers never pass secret values; errors of this
//! crate and of `pve-client` carry none.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType};

use crate::context::Shared;

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

/// Publishes an event about `obj`: `reason` (CamelCase or an error
/// category), `action` (what the controller was doing, e.g. `Reconcile`,
/// `Probe`, `Delete`) and a human `note`.
pub async fn publish(
    shared: &Shared,
    obj: &ObjectReference,
    kind: EventKind,
    reason: &str,
    action: &str,
    note: &str,
) {
    let ev = Event {
        type_: match kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: reason.to_string(),
        note: Some(truncate_note(note)),
        action: action.to_string(),
        secondary: None,
    };
    if let Err(e) = shared.recorder.publish(&ev, obj).await {
        tracing::debug!(error = %e, reason, "could not publish event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
