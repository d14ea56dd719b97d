//! Deletion: preconditions, propagation policy finalizers (`orphan`,
//! `foregroundDeletion`), `deletionTimestamp` for objects held by finalizers, and
//! immediate removal otherwise (kube-apiserver's `Store.Delete` with
//! `deletionFinalizersForGarbageCollection`).

use super::write::{on_removed, ready_to_remove};
use super::{Engine, ListOptions, Target, to_view, tracks_generation};
use crate::api_error::ApiError;
use crate::json::{self, meta_mut};
use crate::resource::{Builtin, StorageKey};
use crate::store::{ObjKey, State};
use serde_json::{Value, json};
use std::sync::Arc;

/// `propagationPolicy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Propagation {
    /// Remove owner references from dependents, keep them.
    Orphan,
    /// Delete the owner now, dependents afterwards.
    Background,
    /// Delete blocking dependents first (`foregroundDeletion` finalizer).
    Foreground,
}

/// `DeleteOptions` (body or query).
#[derive(Clone, Debug, Default)]
pub struct DeleteOptions {
    /// `propagationPolicy`.
    pub propagation: Option<Propagation>,
    /// Deprecated `orphanDependents`.
    pub orphan_dependents: Option<bool>,
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// `dryRun=All`.
    pub dry_run: bool,
}

/// What a delete did (objects in stored form).
#[derive(Clone, Debug)]
pub enum DeleteOutcome {
    /// The object is gone; its last state.
    Deleted(Arc<Value>),
    /// The object is held by finalizers; its state with `deletionTimestamp`.
    Pending(Arc<Value>),
}

pub(crate) const ORPHAN: &str = "orphan";
pub(crate) const FOREGROUND: &str = "foregroundDeletion";

/// Deletes one object under the state lock.
pub(crate) fn delete_locked(
    st: &mut State,
    key: &StorageKey,
    obj_key: &ObjKey,
    cur: Arc<Value>,
    gen_tracked: bool,
    opts: &DeleteOptions,
    group_plural: (&str, &str),
) -> Result<DeleteOutcome, ApiError> {
    let (group, plural) = group_plural;
    if let Some(uid) = &opts.uid
        && uid != json::uid(&cur)
    {
        return Err(ApiError::conflict(
            group,
            plural,
            &obj_key.name,
            &format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                json::uid(&cur)
            ),
        ));
    }
    if let Some(rv) = &opts.resource_version
        && rv != json::resource_version(&cur)
    {
        return Err(ApiError::conflict(
            group,
            plural,
            &obj_key.name,
            &format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                json::resource_version(&cur)
            ),
        ));
    }
    let fins = json::finalizers(&cur);
    let has = |f: &str| fins.iter().any(|x| x == f);
    let orphan = match opts.propagation {
        Some(p) => p == Propagation::Orphan,
        None => opts.orphan_dependents.unwrap_or(has(ORPHAN)),
    };
    let foreground = match opts.propagation {
        Some(p) => p == Propagation::Foreground,
        None => !orphan && has(FOREGROUND),
    };
    let mut new_fins: Vec<String> = fins
        .iter()
        .filter(|f| *f != ORPHAN && *f != FOREGROUND)
        .cloned()
        .collect();
    if orphan {
        new_fins.push(ORPHAN.into());
    }
    if foreground {
        new_fins.push(FOREGROUND.into());
    }
    let mut next = (*cur).clone();
    json::set_finalizers(&mut next, &new_fins);
    if !json::is_deleting(&cur) {
        let m = meta_mut(&mut next);
        m.insert(
            "deletionTimestamp".into(),
            Value::String(crate::clock::now_rfc3339()),
        );
        m.insert("deletionGracePeriodSeconds".into(), json!(0));
        if gen_tracked {
            m.insert("generation".into(), json!(json::generation(&cur) + 1));
        }
    }
    let is_namespace = key.group.is_empty() && key.plural == "namespaces";
    if is_namespace && let Some(o) = next.as_object_mut() {
        o.insert("status".into(), json!({"phase": "Terminating"}));
    }
    if ready_to_remove(key, &next) {
        if opts.dry_run {
            return Ok(DeleteOutcome::Deleted(cur));
        }
        let last = st.remove(key, obj_key, (*cur).clone());
        on_removed(st, key, &last);
        return Ok(DeleteOutcome::Deleted(last));
    }
    if next == *cur || opts.dry_run {
        return Ok(DeleteOutcome::Pending(Arc::new(next)));
    }
    let stored = st.put(key, obj_key.clone(), next);
    Ok(DeleteOutcome::Pending(stored))
}

const PROTECTED_NAMESPACES: [&str; 3] = ["default", "kube-system", "kube-public"];

impl Engine {
    /// Deletes an object (`DELETE`). `404` when missing, `409` for failed preconditions,
    /// `403` for the protected namespaces.
    pub fn delete(
        &self,
        t: &Target,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<DeleteOutcome, ApiError> {
        if t.rt.builtin == Some(Builtin::Namespace) && PROTECTED_NAMESPACES.contains(&name) {
            return Err(ApiError::forbidden(
                "",
                "namespaces",
                name,
                "this namespace may not be deleted",
            ));
        }
        let key = t.key(name);
        let mut st = self.lock();
        let cur = st
            .get(&t.rt.storage, &key)
            .ok_or_else(|| t.not_found(name))?;
        let out = delete_locked(
            &mut st,
            &t.rt.storage,
            &key,
            cur,
            tracks_generation(&t.rt),
            opts,
            (&t.rt.group, &t.rt.plural),
        )?;
        drop(st);
        self.wake_gc();
        Ok(out)
    }

    /// Deletes every object matching the list options (`DELETE` on a collection);
    /// returns their last (or pending) states in the request's version.
    pub fn delete_collection(
        &self,
        t: &Target,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let mut all = ListOptions {
            limit: None,
            continue_token: None,
            ..list.clone()
        };
        all.resource_version = None;
        all.resource_version_match = None;
        let items = self.list(t, &all)?.items;
        let mut out = Vec::new();
        for item in items {
            let name = json::name(&item).to_string();
            let mut tt = t.clone();
            if t.rt.namespaced {
                tt.namespace = Some(json::namespace(&item).to_string());
            }
            match self.delete(&tt, &name, opts) {
                Ok(DeleteOutcome::Deleted(v) | DeleteOutcome::Pending(v)) => {
                    out.push(to_view(&t.rt, &t.version, &v)?);
                }
                Err(e) if e.code == 404 || e.code == 403 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}
