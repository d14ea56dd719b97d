//! The API semantics, independent of HTTP: create, get, list, update, patch, apply,
//! delete and watch subscription on resource types, with kube-apiserver's rules for
//! names, namespaces, `resourceVersion` preconditions, the status and scale subresources,
//! `generation`, managed fields, finalizers and validation.
//!
//! Writes follow kube-apiserver's `GuaranteedUpdate`: read the current object under the
//! state lock, compute the new one outside it (patching, defaulting, validation, CEL),
//! then commit under the lock if the object did not change meanwhile, else recompute.

mod admit;
mod delete;
mod read;
mod scale;
mod view;
mod write;

pub use delete::{DeleteOptions, DeleteOutcome, Propagation};
pub(crate) use delete::{FOREGROUND, ORPHAN, delete_locked};
pub use read::{ListOptions, ListResult, Selectors, WatchStart};
pub use view::{ViewRef, view_ref};
pub(crate) use write::store_update;
pub use write::{FieldValidation, Subresource, WriteOptions, Written};

use crate::api_error::ApiError;
use crate::resource::{Builtin, ResourceType, StorageKey, Version, View, builtin, events};
use crate::store::{ObjKey, State};
use crate::webhook::Caller;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::Notify;

/// A request's target: resource type, version and namespace.
#[derive(Clone, Debug)]
pub struct Target {
    /// The resource type.
    pub rt: Arc<ResourceType>,
    /// The requested version (served).
    pub version: String,
    /// The namespace from the URL (`None`: cluster-scoped resource or all namespaces).
    pub namespace: Option<String>,
}

impl Target {
    /// The requested version's definition.
    pub fn version_def(&self) -> Result<&Version, ApiError> {
        self.rt
            .served_version(&self.version)
            .ok_or_else(|| ApiError::no_route(&self.version))
    }

    /// The namespace part of object keys ("" for cluster-scoped resources).
    pub fn ns(&self) -> &str {
        if self.rt.namespaced {
            self.namespace.as_deref().unwrap_or("")
        } else {
            ""
        }
    }

    /// The key of a named object.
    pub fn key(&self, name: &str) -> ObjKey {
        ObjKey::new(self.ns(), name)
    }

    /// `apiVersion` of the request.
    pub fn api_version(&self) -> String {
        self.rt.api_version(&self.version)
    }

    /// 404 for a named object.
    pub fn not_found(&self, name: &str) -> ApiError {
        ApiError::not_found(&self.rt.group, &self.rt.plural, name)
    }
}

/// Whether objects of `rt` stored as `stored_api_version` need the CRD's
/// conversion webhook to be served at `version`.
pub fn needs_conversion(rt: &ResourceType, stored_api_version: &str, version: &str) -> bool {
    rt.conversion.is_some() && stored_api_version != rt.api_version(version)
}

/// `obj` (of any served version of `rt`) at `version`: through the CRD's
/// conversion webhook when it has one and the versions differ, else only
/// `apiVersion` and `kind` are set (conversion strategy `None`).
///
/// Errors: `500` when the conversion webhook fails.
pub fn convert(rt: &ResourceType, obj: &Value, version: &str) -> Result<Value, ApiError> {
    let av = rt.api_version(version);
    let mut out = match &rt.conversion {
        Some(c) if crate::json::api_version(obj) != av => {
            c.convert(&[obj], &av)?.pop().unwrap_or(Value::Null)
        }
        _ => obj.clone(),
    };
    let m = crate::json::ensure_object(&mut out);
    m.insert("apiVersion".into(), Value::String(av));
    m.insert("kind".into(), Value::String(rt.kind.clone()));
    Ok(out)
}

/// The stored form of an object served through `rt` (converted to the
/// storage version).
///
/// Errors: `500` when the conversion webhook fails.
pub fn to_storage(rt: &ResourceType, obj: Value) -> Result<Value, ApiError> {
    match rt.view {
        View::EventsV1 => Ok(events::to_core(&obj)),
        View::Plain => convert(rt, &obj, rt.storage_version()),
    }
}

/// The served form of a stored object at `version`.
///
/// Errors: `500` when the conversion webhook fails.
pub fn to_view(rt: &ResourceType, version: &str, stored: &Value) -> Result<Value, ApiError> {
    match rt.view {
        View::EventsV1 => Ok(relabel(rt, version, events::from_core(stored))),
        View::Plain => convert(rt, stored, version),
    }
}

/// Several stored objects at `version`, converted in one review when the
/// CRD has a conversion webhook.
///
/// Errors: `500` when the conversion webhook fails.
pub fn to_views(
    rt: &ResourceType,
    version: &str,
    stored: &[Arc<Value>],
) -> Result<Vec<Value>, ApiError> {
    let av = rt.api_version(version);
    let Some(c) = rt.conversion.as_ref().filter(|_| rt.view == View::Plain) else {
        return stored.iter().map(|o| to_view(rt, version, o)).collect();
    };
    let pending: Vec<&Value> = stored
        .iter()
        .map(|o| o.as_ref())
        .filter(|o| crate::json::api_version(o) != av)
        .collect();
    let mut converted = c.convert(&pending, &av)?.into_iter();
    stored
        .iter()
        .map(|o| {
            let v = if crate::json::api_version(o) != av {
                converted.next().unwrap_or(Value::Null)
            } else {
                (**o).clone()
            };
            Ok(relabel(rt, version, v))
        })
        .collect()
}

fn relabel(rt: &ResourceType, version: &str, mut out: Value) -> Value {
    let m = crate::json::ensure_object(&mut out);
    m.insert("apiVersion".into(), Value::String(rt.api_version(version)));
    m.insert("kind".into(), Value::String(rt.kind.clone()));
    out
}

/// The simulated API server's state and operations.
#[derive(Debug)]
pub struct Engine {
    state: Mutex<State>,
    gc_wake: Notify,
    caller: Arc<Caller>,
    hooks: admit::HookCache,
}

impl Engine {
    /// A server with the built-in kinds and the initial namespaces, keeping
    /// `history_limit` watch events per resource; webhooks are called
    /// through `caller`.
    pub fn new(history_limit: usize, caller: Arc<Caller>) -> Arc<Engine> {
        let mut state = State::new(history_limit);
        for rt in builtin::all() {
            state.ensure_type(&rt.storage);
            state.registry.insert(rt);
        }
        let now = crate::clock::now_rfc3339();
        let ns_key = StorageKey {
            group: String::new(),
            plural: "namespaces".into(),
        };
        for ns in builtin::INITIAL_NAMESPACES {
            let obj = json!({
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {
                    "name": ns, "uid": uuid::Uuid::new_v4().to_string(),
                    "creationTimestamp": now,
                    "labels": {"kubernetes.io/metadata.name": ns}
                },
                "spec": {"finalizers": ["kubernetes"]},
                "status": {"phase": "Active"}
            });
            state.put(&ns_key, ObjKey::new("", ns), obj);
        }
        Arc::new(Engine {
            state: Mutex::new(state),
            gc_wake: Notify::new(),
            caller,
            hooks: admit::HookCache::default(),
        })
    }

    /// The webhook client.
    pub fn caller(&self) -> &Arc<Caller> {
        &self.caller
    }

    /// Locks the state (a poisoned lock is recovered: the state is always consistent
    /// between statements that mutate it).
    pub fn lock(&self) -> MutexGuard<'_, State> {
        match self.state.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        }
    }

    /// Wakes the garbage collector.
    pub fn wake_gc(&self) {
        self.gc_wake.notify_one();
    }

    /// Waits until the garbage collector is woken.
    pub async fn gc_woken(&self) {
        self.gc_wake.notified().await;
    }

    /// Looks up a served resource by group, version and plural.
    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceType>> {
        let rt = self.lock().registry.get(group, plural)?;
        rt.served_version(version)?;
        Some(rt)
    }

    /// A snapshot of the registry.
    pub fn registry(&self) -> crate::resource::Registry {
        self.lock().registry.clone()
    }

    /// The current `resourceVersion`.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }
}

/// Whether a kind tracks `metadata.generation` (custom resources and CRDs).
pub fn tracks_generation(rt: &ResourceType) -> bool {
    matches!(rt.builtin, None | Some(Builtin::Crd))
}

/// `metadata.namespace` checks for namespaced writes: the namespace must exist and not be
/// terminating (404 / 403 as kube-apiserver's NamespaceLifecycle admission answers).
pub fn check_namespace(
    state: &State,
    rt: &ResourceType,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    if !rt.namespaced {
        return Ok(());
    }
    let key = StorageKey {
        group: String::new(),
        plural: "namespaces".into(),
    };
    match state.get(&key, &ObjKey::new("", ns)) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if crate::json::is_deleting(&n) => {
            let mut e = ApiError::forbidden(
                &rt.group,
                &rt.plural,
                name,
                &format!(
                    "unable to create new content in namespace {ns} because it is being terminated"
                ),
            );
            e.causes = vec![crate::api_error::Cause::new(
                "NamespaceTerminating",
                "metadata.namespace",
                format!("namespace {ns} is being terminated"),
            )];
            Err(e)
        }
        Some(_) => Ok(()),
    }
}
