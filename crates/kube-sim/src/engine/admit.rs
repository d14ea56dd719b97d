//! Admission webhooks in the engine's writes (see `crate::webhook`): which
//! hooks a request meets, the calls (blocking; the HTTP layer runs requests
//! on a blocking thread when [`Engine::may_call_webhooks`]), and what their
//! answers do — a mutating webhook's patch replaces the object (converted
//! back to the request's version after an equivalent match, then pruned and
//! defaulted by the schema again), a refusal ends the request, a failed call
//! ends it with `500` under `failurePolicy: Fail` and is logged and skipped
//! under `Ignore`.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::{Engine, Subresource, Target, convert};
use crate::api_error::ApiError;
use crate::resource::{Builtin, StorageKey};
use crate::store::ObjKey;
use crate::webhook::admission::{self, Answer, Call, Gvx};
use crate::webhook::config::{self, Attributes, Hook};

/// The admission operations kube-sim calls webhooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// `CREATE` (also an apply or update that creates).
    Create,
    /// `UPDATE` (PUT, PATCH, apply of an existing object).
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
        }
    }
}

/// A write as admission sees it.
#[derive(Clone, Debug)]
pub struct Admission<'a> {
    /// `CREATE` or `UPDATE`.
    pub operation: Operation,
    /// The request's target.
    pub target: &'a Target,
    /// Which part is written.
    pub sub: Subresource,
    /// `dryRun=All`.
    pub dry_run: bool,
    /// `fieldManager` of the request (for the options sent).
    pub field_manager: Option<String>,
    /// Whether the request is a PATCH (the options are then `PatchOptions`).
    pub patch: bool,
}

impl Admission<'_> {
    fn options(&self) -> Value {
        let kind = match (self.operation, self.patch) {
            (_, true) => "PatchOptions",
            (Operation::Create, false) => "CreateOptions",
            (Operation::Update, false) => "UpdateOptions",
        };
        let mut o = json!({"apiVersion": "meta.k8s.io/v1", "kind": kind});
        if self.dry_run {
            o["dryRun"] = json!(["All"]);
        }
        if let Some(m) = &self.field_manager {
            o["fieldManager"] = json!(m);
        }
        o
    }
}

type Parsed = (Vec<(String, String)>, Arc<Vec<Hook>>, Arc<Vec<Hook>>);

/// The parsed hooks of the stored configurations, kept until one changes.
#[derive(Debug, Default)]
pub struct HookCache {
    parsed: Mutex<Option<Parsed>>,
}

fn key(plural: &str) -> StorageKey {
    StorageKey {
        group: "admissionregistration.k8s.io".into(),
        plural: plural.into(),
    }
}

impl Engine {
    /// Whether a request on `group`/`plural` may call a webhook: the CRD
    /// converts by webhook, or a webhook's rules name the resource.
    pub fn may_call_webhooks(&self, group: &str, plural: &str) -> bool {
        if self
            .lock()
            .registry
            .get(group, plural)
            .is_some_and(|rt| rt.conversion.is_some())
        {
            return true;
        }
        let (m, v) = self.hooks();
        m.iter().chain(v.iter()).any(|h| h.may_match(group, plural))
    }

    /// `(mutating, validating)` hooks in call order.
    fn hooks(&self) -> (Arc<Vec<Hook>>, Arc<Vec<Hook>>) {
        let (stamp, mutating, validating) = {
            let st = self.lock();
            let read = |p: &str| -> Vec<Arc<Value>> {
                st.objects(&key(p))
                    .map(|m| m.values().cloned().collect())
                    .unwrap_or_default()
            };
            let (m, v) = (
                read("mutatingwebhookconfigurations"),
                read("validatingwebhookconfigurations"),
            );
            let stamp: Vec<(String, String)> = m
                .iter()
                .chain(&v)
                .map(|o| {
                    (
                        crate::json::name(o).to_string(),
                        crate::json::resource_version(o).to_string(),
                    )
                })
                .collect();
            (stamp, m, v)
        };
        let mut cache = self
            .hooks
            .parsed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((s, m, v)) = cache.as_ref()
            && *s == stamp
        {
            return (m.clone(), v.clone());
        }
        let m = Arc::new(config::hooks(mutating.iter().map(|o| o.as_ref()).collect()));
        let v = Arc::new(config::hooks(
            validating.iter().map(|o| o.as_ref()).collect(),
        ));
        *cache = Some((stamp, m.clone(), v.clone()));
        (m, v)
    }

    /// Mutating admission: each matching mutating webhook in turn may patch
    /// the object (in the request's version); `Some` is the patched object.
    /// Webhook warnings go to `warnings`.
    ///
    /// Errors: the refusal of a webhook; `500` for a failed call under
    /// `failurePolicy: Fail` or a patch that does not apply; `400` for a
    /// dry run of a webhook with side effects.
    pub(crate) fn mutate(
        &self,
        a: &Admission<'_>,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Value>, ApiError> {
        if a.sub == Subresource::Scale {
            return Ok(None);
        }
        let (hooks, _) = self.hooks();
        let mut current: Option<Value> = None;
        for hook in hooks.iter() {
            let base = current.as_ref().unwrap_or(obj);
            if let Some(patched) = self.call(a, hook, base, old, true, warnings)? {
                current = Some(patched);
            }
        }
        Ok(current)
    }

    /// Validating admission of the object about to be stored.
    ///
    /// Errors: as [`Engine::mutate`], without patches.
    pub(crate) fn validate_admission(
        &self,
        a: &Admission<'_>,
        obj: &Value,
        old: Option<&Value>,
        warnings: &mut Vec<String>,
    ) -> Result<(), ApiError> {
        if a.sub == Subresource::Scale {
            return Ok(());
        }
        let (_, hooks) = self.hooks();
        for hook in hooks.iter() {
            self.call(a, hook, obj, old, false, warnings)?;
        }
        Ok(())
    }

    /// One webhook: `Ok(None)` when it does not apply or changes nothing,
    /// `Ok(Some(object))` with its patch applied.
    fn call(
        &self,
        a: &Admission<'_>,
        hook: &Hook,
        obj: &Value,
        old: Option<&Value>,
        mutating: bool,
        warnings: &mut Vec<String>,
    ) -> Result<Option<Value>, ApiError> {
        let t = a.target;
        let rt = &t.rt;
        let served: Vec<String> = rt
            .versions
            .iter()
            .filter(|v| v.served)
            .map(|v| v.name.clone())
            .collect();
        let attrs = Attributes {
            operation: a.operation.as_str(),
            group: &rt.group,
            version: &t.version,
            resource: &rt.plural,
            subresource: a.sub.name(),
            namespaced: rt.namespaced,
            served: &served,
        };
        let Some(version): Option<String> = hook.version_for(&attrs) else {
            return Ok(None);
        };
        let ns_object = if rt.namespaced {
            let ns_key = StorageKey {
                group: String::new(),
                plural: "namespaces".into(),
            };
            Some(
                self.lock()
                    .get(&ns_key, &ObjKey::new("", t.ns()))
                    .map(|n| (*n).clone())
                    .unwrap_or(Value::Null),
            )
        } else if rt.builtin == Some(Builtin::Namespace) {
            Some(obj.clone())
        } else {
            None
        };
        if !hook.namespace_matches(ns_object.as_ref()) || !hook.object_matches(Some(obj), old) {
            return Ok(None);
        }
        if a.dry_run && !hook.dry_run_safe() {
            return Err(ApiError::bad_request(format!(
                "admission webhook {:?} does not support dry run",
                hook.name
            )));
        }
        let (sent, sent_old) = if version == t.version {
            (obj.clone(), old.cloned())
        } else {
            (
                convert(rt, obj, &version)?,
                old.map(|o| convert(rt, o, &version)).transpose()?,
            )
        };
        let gvx = |v: &str, name: &str| Gvx {
            group: rt.group.clone(),
            version: v.to_string(),
            name: name.to_string(),
        };
        let uid = uuid::Uuid::new_v4().to_string();
        let call = Call {
            uid: uid.clone(),
            kind: gvx(&version, &rt.kind),
            resource: gvx(&version, &rt.plural),
            request_kind: gvx(&t.version, &rt.kind),
            request_resource: gvx(&t.version, &rt.plural),
            subresource: a.sub.name(),
            name: crate::json::name(obj),
            namespace: t.ns(),
            operation: a.operation.as_str(),
            object: Some(&sent),
            old_object: sent_old.as_ref(),
            dry_run: a.dry_run,
            options: a.options(),
        };
        let body = serde_json::to_vec(&admission::review(&call))
            .map_err(|e| ApiError::internal(e.to_string()))?;
        let answer = self
            .caller
            .post(&hook.client, body, hook.timeout)
            .map_err(|e| format!("failed to call webhook: {e}"))
            .and_then(|b| admission::read_answer(&hook.name, &b, &uid, mutating));
        let (patch, more) = match answer {
            Err(e) if hook.fail => {
                return Err(ApiError::internal(format!(
                    "Internal error occurred: failed calling webhook {:?}: {e}",
                    hook.name
                )));
            }
            Err(e) => {
                tracing::warn!(
                    configuration = %hook.configuration,
                    webhook = %hook.name,
                    error = %e,
                    "webhook call failed; ignored (failurePolicy: Ignore)"
                );
                return Ok(None);
            }
            Ok(Answer::Denied { error, warnings: w }) => {
                warnings.extend(w);
                return Err(error);
            }
            Ok(Answer::Allowed { patch, warnings: w }) => (patch, w),
        };
        warnings.extend(more);
        let Some(patch): Option<Vec<u8>> = patch else {
            return Ok(None);
        };
        let patched = crate::patch::json_patch(&sent, &patch).map_err(|e| {
            ApiError::internal(format!(
                "Internal error occurred: the patch of admission webhook {:?} does not apply: {}",
                hook.name, e.message
            ))
        })?;
        let mut back = if version == t.version {
            patched
        } else {
            convert(rt, &patched, &t.version)?
        };
        if let Some(s) = t.version_def()?.schema.as_deref() {
            crate::schema::normalize(&mut back, s, true);
        }
        Ok(Some(back))
    }
}
