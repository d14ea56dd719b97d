//! Never decide from an object older than our own last write.
//!
//! The informer cache (kube-runtime's store) lags behind the API server: a
//! reconcile can be handed a ProxmoxMachine from before the status or spec
//! write that the previous reconcile of this very process made (e.g. without
//! the `status.taskRef` of the clone it just issued). Deciding from it repeats
//! a non-idempotent step (a second clone POST with the same VMID, a second
//! start, destroy or upload) and makes spec patches fail with 409.
//!
//! So this process remembers, per machine UID, the object its last
//! successful write returned ([`Written`]): its `resourceVersion` and the
//! spec and status values it wrote (or, after a fresh read, the object read:
//! it is newer still). At the start of a reconcile
//! ([`classify`]):
//!
//! - the incoming object carries exactly that `resourceVersion` →
//!   [`Freshness::Current`], decide from it;
//! - it carries a version this process wrote *before* the last one →
//!   [`Freshness::Stale`] (certainly older);
//! - any other version → [`Freshness::Unknown`]: newer (someone else wrote)
//!   or older (before our first write) — undecidable, since
//!   `resourceVersion`s are opaque (Kubernetes API concepts, "Resource
//!   versions": clients must not compare them for order).
//!
//! Stale and Unknown objects are read again with one GET, which returns the
//! newest version (a single-object GET is served from etcd, quorum read).
//! Should even that answer be one of our earlier versions, the remembered
//! object is used ([`overlay`]). Versions are compared for equality only,
//! never parsed as numbers.

use std::collections::VecDeque;
use std::sync::Arc;

use kube::ResourceExt;

use crate::api::ProxmoxMachine;

/// How many earlier written `resourceVersion`s are kept per machine (enough
/// to recognise any object a lagging watch may still deliver: a reconcile
/// writes at most a few times).
pub const EARLIER_KEPT: usize = 16;

/// The newest version of one machine this process knows: the answer of its
/// last write, or of a fresh read after it.
#[derive(Clone, Debug, Default)]
pub struct Written {
    /// The object the last successful write returned (its
    /// `resourceVersion`, spec, finalizers and status). Shared: readers
    /// that look at many machines (the duplicate-address check) take a
    /// reference, not a copy.
    pub object: Option<Arc<ProxmoxMachine>>,
    /// `resourceVersion`s of earlier writes, newest last (at most
    /// [`EARLIER_KEPT`]).
    pub earlier: VecDeque<String>,
    /// A write of ours was refused with 409 (someone else wrote): the next
    /// reconcile reads the object fresh whatever its version.
    pub refresh: bool,
}

impl Written {
    /// Records `obj`, the answer of a successful write (or of a fresh read,
    /// which is newer than any write before it), without its
    /// `metadata.managedFields`: like the watch caches (`stores.rs`), the
    /// record is kept for every machine, and the reconcile never reads them.
    pub fn record(&mut self, mut obj: ProxmoxMachine) {
        crate::stores::strip_managed_fields(&mut obj);
        if let Some(rv) = self
            .object
            .as_deref()
            .and_then(ResourceExt::resource_version)
        {
            if obj.resource_version().as_deref() == Some(rv.as_str()) {
                // A write that changed nothing keeps the version.
                self.object = Some(Arc::new(obj));
                self.refresh = false;
                return;
            }
            self.earlier.push_back(rv);
            while self.earlier.len() > EARLIER_KEPT {
                self.earlier.pop_front();
            }
        }
        self.object = Some(Arc::new(obj));
        self.refresh = false;
    }

    /// Keeps `stored` (the watch cache's copy of the machine) instead of
    /// the record's own copy when it is the same version: one object in
    /// memory instead of two. Any other version leaves the record as it is.
    pub fn share(&mut self, stored: &Arc<ProxmoxMachine>) {
        if let Some(kept) = &self.object
            && !Arc::ptr_eq(kept, stored)
            && kept.metadata.resource_version.is_some()
            && kept.metadata.resource_version == stored.metadata.resource_version
        {
            self.object = Some(Arc::clone(stored));
        }
    }

    /// The `resourceVersion` of the last write (borrowed: the
    /// duplicate-address check asks for every machine of the store).
    pub fn version(&self) -> Option<&str> {
        self.object
            .as_deref()
            .and_then(|o| o.metadata.resource_version.as_deref())
    }
}

/// How an object relates to our last write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    /// It is the version of our last write (or we wrote nothing): decide
    /// from it.
    Current,
    /// Not ours, or from before our first write: read it again.
    Unknown,
    /// One of our earlier versions: certainly older than our last write.
    Stale,
}

/// Where `rv` (an object's `metadata.resourceVersion`) stands relative to
/// what this process wrote (`None`: nothing written since it started).
pub fn classify(rv: Option<&str>, written: Option<&Written>) -> Freshness {
    let Some(w) = written else {
        return Freshness::Current;
    };
    let last = w.version();
    if w.refresh {
        return Freshness::Unknown;
    }
    let Some(last) = last else {
        return Freshness::Current;
    };
    match rv {
        Some(rv) if rv == last => Freshness::Current,
        Some(rv) if w.earlier.iter().any(|e| e == rv) => Freshness::Stale,
        _ => Freshness::Unknown,
    }
}

/// `fetched` corrected by what we wrote, for a fetched object that is still
/// one of our earlier versions: the remembered object, with the deletion
/// timestamp of `fetched` when it has one (deletion only ever starts).
pub fn overlay(fetched: ProxmoxMachine, written: &Written) -> ProxmoxMachine {
    let Some(mut obj) = written.object.as_deref().cloned() else {
        return fetched;
    };
    if obj.metadata.deletion_timestamp.is_none() {
        obj.metadata.deletion_timestamp = fetched.metadata.deletion_timestamp;
    }
    obj
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ProxmoxMachineSpec, ProxmoxMachineStatus};

    fn at(rv: &str, task: Option<&str>) -> ProxmoxMachine {
        let mut m = ProxmoxMachine::new("m1", ProxmoxMachineSpec::default());
        m.metadata.resource_version = Some(rv.into());
        m.status = Some(ProxmoxMachineStatus {
            task_ref: task.map(str::to_string),
            ..ProxmoxMachineStatus::default()
        });
        m
    }

    #[test]
    fn versions_are_compared_for_equality_only() {
        assert_eq!(classify(Some("5"), None), Freshness::Current);
        let mut w = Written::default();
        w.record(at("10", None));
        w.record(at("12", Some("UPID:clone")));
        assert_eq!(classify(Some("12"), Some(&w)), Freshness::Current);
        assert_eq!(classify(Some("10"), Some(&w)), Freshness::Stale);
        // "9" and "99" are unknown alike: no numeric order is assumed.
        assert_eq!(classify(Some("9"), Some(&w)), Freshness::Unknown);
        assert_eq!(classify(Some("99"), Some(&w)), Freshness::Unknown);
        assert_eq!(classify(None, Some(&w)), Freshness::Unknown);
        w.refresh = true;
        assert_eq!(classify(Some("12"), Some(&w)), Freshness::Unknown);
        w.record(at("13", None));
        assert!(!w.refresh, "a successful write is the newest version again");
        assert_eq!(classify(Some("13"), Some(&w)), Freshness::Current);
    }

    #[test]
    fn the_record_keeps_no_managed_fields() {
        use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
        let mut w = Written::default();
        let mut m = at("10", Some("UPID:clone"));
        m.metadata.managed_fields = Some(vec![ManagedFieldsEntry {
            manager: Some("capmox-controller".into()),
            operation: Some("Update".into()),
            ..ManagedFieldsEntry::default()
        }]);
        w.record(m);
        let kept = w.object.as_deref().unwrap();
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(kept.resource_version().as_deref(), Some("10"));
        assert_eq!(
            kept.status.as_ref().and_then(|s| s.task_ref.as_deref()),
            Some("UPID:clone")
        );
    }

    #[test]
    fn a_write_that_keeps_the_version_is_not_an_earlier_one() {
        let mut w = Written::default();
        w.record(at("10", None));
        w.record(at("10", None));
        assert!(w.earlier.is_empty());
        for i in 0..40 {
            w.record(at(&format!("v{i}"), None));
        }
        assert_eq!(w.earlier.len(), EARLIER_KEPT);
        assert_eq!(w.earlier.back().map(String::as_str), Some("v38"));
    }

    #[test]
    fn a_stale_answer_is_replaced_by_what_we_wrote() {
        let mut w = Written::default();
        w.record(at("10", None));
        w.record(at("12", Some("UPID:clone")));
        let mut fetched = at("10", None);
        fetched.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
            ));
        let o = overlay(fetched, &w);
        assert_eq!(o.resource_version().as_deref(), Some("12"));
        assert_eq!(
            o.status.and_then(|s| s.task_ref).as_deref(),
            Some("UPID:clone")
        );
        assert!(o.metadata.deletion_timestamp.is_some());
    }
}
