//! Create, update (PUT), patch and server-side apply.

use super::admit::{Admission, Operation};
use super::{Engine, Target, check_namespace, to_storage, to_view, tracks_generation};
use crate::api_error::{ApiError, Cause};
use crate::clock::now_rfc3339;
use crate::fields::managed::{self, ApplyRequest, Entry, Scope};
use crate::fields::typed::Schema;
use crate::json::{self, meta_mut};
use crate::patch::{self, PatchType};
use crate::resource::{Builtin, ResourceType, StorageKey, Version, crd};
use crate::schema;
use crate::store::{ObjKey, State};
use crate::validation;
use base64::Engine as _;
use serde_json::{Map, Value, json};
use std::sync::Arc;

/// `fieldValidation` query parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FieldValidation {
    /// Drop unknown fields silently.
    Ignore,
    /// Drop unknown fields and answer with a `Warning` header per field (the default).
    #[default]
    Warn,
    /// Refuse requests with unknown fields (`400 strict decoding error`).
    Strict,
}

/// Which part of the object a write addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subresource {
    /// The main resource.
    Main,
    /// `/status`.
    Status,
    /// `/scale` (custom resources with `subresources.scale`): the request carries an
    /// `autoscaling/v1` `Scale`; the write changes only the spec replicas path.
    Scale,
}

impl Subresource {
    /// The `subresource` of managed-fields entries ("" for the main resource).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Subresource::Main => "",
            Subresource::Status => "status",
            Subresource::Scale => "scale",
        }
    }
}

/// Options of a write request.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// `dryRun=All`: validate and answer, store nothing.
    pub dry_run: bool,
    /// `fieldManager` (required for apply).
    pub field_manager: Option<String>,
    /// The manager name used when `fieldManager` is absent (the User-Agent's prefix).
    pub default_manager: String,
    /// `fieldValidation`.
    pub field_validation: FieldValidation,
    /// `force` (apply only).
    pub force: bool,
}

impl WriteOptions {
    fn admission<'a>(
        &self,
        operation: Operation,
        target: &'a Target,
        sub: Subresource,
        patch: bool,
    ) -> Admission<'a> {
        Admission {
            operation,
            target,
            sub,
            dry_run: self.dry_run,
            field_manager: self.field_manager.clone(),
            patch,
        }
    }

    fn manager(&self) -> String {
        match &self.field_manager {
            Some(m) if !m.is_empty() => m.clone(),
            _ => self.default_manager.clone(),
        }
    }
}

/// The result of a write.
#[derive(Clone, Debug)]
pub struct Written {
    /// The object as stored, in the request's version.
    pub object: Value,
    /// `Warning` header texts (unknown fields under `fieldValidation=Warn`).
    pub warnings: Vec<String>,
    /// Whether the write created the object (`201`).
    pub created: bool,
}

enum Managed {
    Update(String),
    Given(Vec<Entry>),
}

fn scope_of(v: &Version, sub: Subresource) -> Scope {
    match sub {
        Subresource::Status => Scope::OnlyStatus,
        Subresource::Main | Subresource::Scale if v.status_subresource => Scope::NotStatus,
        Subresource::Main | Subresource::Scale => Scope::All,
    }
}

/// `group/version` split as apimachinery's `ParseGroupVersion` does (`v1` is the core
/// group); `None` for text with more than one `/`.
fn parse_group_version(av: &str) -> Option<(&str, &str)> {
    match av.split_once('/') {
        None => Some(("", av)),
        Some((g, v)) if !v.contains('/') => Some((g, v)),
        Some(_) => None,
    }
}

/// `group/version, Kind=kind` (apimachinery's `GroupVersionKind.String`).
fn gvk_string(group: &str, version: &str, kind: &str) -> String {
    format!("{group}/{version}, Kind={kind}")
}

/// The `apiVersion`/`kind` of a create or update body (or of a patched object), as
/// kube-apiserver's decoder treats them.
///
/// Built-in kinds decode into typed objects with the URL's group, version and kind as
/// defaults: a missing `kind` or `apiVersion` is filled in from the URL. Custom resources
/// decode into unstructured objects, which need both: a missing `kind` is
/// `Object 'Kind' is missing`, a missing `apiVersion` (or another group) cannot be
/// converted to the URL's version — both `400` through `transformDecodeError`. A body of
/// another version of the same group is `400` (`the API version in the data … does not
/// match`); a custom resource body of another kind is `422` (`kind: Invalid value`).
fn decode_type_meta(t: &Target, body: &mut Value) -> Result<(), ApiError> {
    let Some(obj) = body.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    };
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let av = obj
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let rt = &t.rt;
    let expected = t.api_version();
    let Some((group, version)) = parse_group_version(&av) else {
        return Err(ApiError::bad_request(format!(
            "the object provided is unrecognized (must be of type {}): unexpected GroupVersion string: {av}",
            rt.kind
        )));
    };
    if rt.builtin.is_some() {
        if kind.is_empty() {
            obj.insert("kind".into(), Value::String(rt.kind.clone()));
        }
        if av.is_empty() || (version.is_empty() && group == rt.group) {
            obj.insert("apiVersion".into(), Value::String(expected.clone()));
        }
    } else {
        if kind.is_empty() {
            // gvkWithDefaults: the URL fills in what the body lacks.
            let shown_version = if av.is_empty() {
                t.version.as_str()
            } else {
                version
            };
            let body_text = Value::Object(obj.clone()).to_string();
            return Err(ApiError::bad_request(format!(
                "{} in version {shown_version:?} cannot be handled as a {}: Object 'Kind' is missing in '{body_text}'",
                rt.kind, rt.kind
            )));
        }
        if group != rt.group {
            return Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {}: {} is unstructured and is not suitable for converting to \"{expected}\"",
                rt.kind,
                gvk_string(group, version, &kind)
            )));
        }
    }
    let av = obj.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if av != expected {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({expected})"
        )));
    }
    let kind = obj.get("kind").and_then(Value::as_str).unwrap_or("");
    if kind != rt.kind {
        if rt.builtin.is_some() {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({kind}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        let name = obj
            .get("metadata")
            .and_then(|m| m.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            name,
            vec![Cause::new(
                "FieldValueInvalid",
                "kind",
                format!("Invalid value: {kind:?}: must be {}", rt.kind),
            )],
        ));
    }
    Ok(())
}

/// The `apiVersion`/`kind` of a server-side apply configuration: exactly the URL's
/// (kube-apiserver's `versionCheckManager`: `400 invalid object type: <gvk>`, nothing
/// filled in).
fn check_apply_type(t: &Target, config: &Value) -> Result<(), ApiError> {
    if !config.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    let kind = config.get("kind").and_then(Value::as_str).unwrap_or("");
    let av = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if kind == t.rt.kind && av == t.api_version() {
        return Ok(());
    }
    let (group, version) = parse_group_version(av).unwrap_or(("", av));
    Err(ApiError::bad_request(format!(
        "invalid object type: {}",
        gvk_string(group, version, kind)
    )))
}

/// Makes `metadata.namespace` agree with the URL (`400` on a mismatch).
fn reconcile_namespace(t: &Target, body: &mut Value) -> Result<(), ApiError> {
    let m = meta_mut(body);
    if !t.rt.namespaced {
        m.remove("namespace");
        return Ok(());
    }
    let url_ns = t.ns();
    match m.get("namespace").and_then(Value::as_str) {
        Some(ns) if !ns.is_empty() && ns != url_ns => Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        )),
        _ => {
            m.insert("namespace".into(), Value::String(url_ns.to_string()));
            Ok(())
        }
    }
}

fn check_body_name(body: &Value, name: &str) -> Result<(), ApiError> {
    let got = json::name(body);
    if got != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({got}) does not match the name on the URL ({name})"
        )));
    }
    Ok(())
}

fn unknown_fields(unknown: Vec<String>, fv: FieldValidation) -> Result<Vec<String>, ApiError> {
    if unknown.is_empty() || fv == FieldValidation::Ignore {
        return Ok(Vec::new());
    }
    let msgs: Vec<String> = unknown
        .iter()
        .map(|p| format!("unknown field \"{p}\""))
        .collect();
    match fv {
        FieldValidation::Strict => Err(ApiError::bad_request(format!(
            "strict decoding error: {}",
            msgs.join(", ")
        ))),
        _ => Ok(msgs),
    }
}

/// Prunes (and, with `defaults`, defaults) a request body; handles unknown fields per
/// `fieldValidation`.
fn decode(
    v: &Version,
    mut obj: Value,
    opts: &WriteOptions,
    defaults: bool,
) -> Result<(Value, Vec<String>), ApiError> {
    let unknown = match &v.schema {
        Some(s) => schema::normalize(&mut obj, s, defaults),
        None => schema::normalize_meta_only(&mut obj),
    };
    let warnings = unknown_fields(unknown, opts.field_validation)?;
    Ok((obj, warnings))
}

const GENERATE_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// `generateName` plus 5 random characters, the prefix cut to
/// [`validation::GENERATE_NAME_PREFIX_MAX`] bytes first (`SimpleNameGenerator`).
fn generated_name(prefix: &str) -> String {
    let mut end = prefix.len().min(validation::GENERATE_NAME_PREFIX_MAX);
    while !prefix.is_char_boundary(end) {
        end -= 1;
    }
    let prefix = &prefix[..end];
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let suffix: String = bytes
        .iter()
        .take(5)
        .map(|b| GENERATE_ALPHABET[usize::from(*b) % GENERATE_ALPHABET.len()] as char)
        .collect();
    format!("{prefix}{suffix}")
}

/// Sets the server-owned metadata of a new object.
fn init_meta(rt: &ResourceType, obj: &mut Value, now: &str) -> Result<(), ApiError> {
    let m = meta_mut(obj);
    if m.get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|s| !s.is_empty())
    {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let name = m
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        let prefix = m
            .get("generateName")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                "",
                vec![Cause::new(
                    "FieldValueRequired",
                    "metadata.name",
                    "Required value: name or generateName is required",
                )],
            ));
        }
        m.insert("name".into(), Value::String(generated_name(&prefix)));
    }
    m.insert(
        "uid".into(),
        Value::String(uuid::Uuid::new_v4().to_string()),
    );
    m.insert("creationTimestamp".into(), Value::String(now.to_string()));
    for k in [
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
        "resourceVersion",
    ] {
        m.remove(k);
    }
    if tracks_generation(rt) {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    Ok(())
}

fn is_config_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

const CONFIG_KEY_MSG: &str = "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')";

/// Kind-specific defaulting on create and update.
fn admit(
    rt: &ResourceType,
    old: Option<&Value>,
    obj: &mut Value,
    now: &str,
) -> Result<(), ApiError> {
    match rt.builtin {
        Some(Builtin::Secret) => {
            if let Some(Value::Object(sd)) = obj.get("stringData").cloned() {
                let data = json::ensure_object(
                    json::ensure_object(obj)
                        .entry("data")
                        .or_insert_with(|| Value::Object(Map::new())),
                );
                for (k, v) in sd {
                    let raw = v.as_str().unwrap_or("").as_bytes().to_vec();
                    data.insert(
                        k,
                        Value::String(base64::engine::general_purpose::STANDARD.encode(raw)),
                    );
                }
            }
            let m = json::ensure_object(obj);
            m.remove("stringData");
            m.entry("type")
                .or_insert_with(|| Value::String("Opaque".into()));
        }
        Some(Builtin::Namespace) => {
            let name = json::name(obj).to_string();
            let m = meta_mut(obj);
            let labels = json::ensure_object(
                m.entry("labels")
                    .or_insert_with(|| Value::Object(Map::new())),
            );
            labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
            if old.is_none() {
                let o = json::ensure_object(obj);
                o.insert("status".into(), json!({"phase": "Active"}));
                let spec = json::ensure_object(
                    o.entry("spec").or_insert_with(|| Value::Object(Map::new())),
                );
                spec.entry("finalizers")
                    .or_insert_with(|| json!(["kubernetes"]));
            }
        }
        Some(Builtin::Crd) => {
            let mut status = crd::accepted_status(obj, now);
            if let (Some(old_conds), Some(new_conds)) = (
                old.and_then(|o| o.pointer("/status/conditions")).cloned(),
                status.get_mut("conditions").and_then(Value::as_array_mut),
            ) {
                for c in new_conds.iter_mut() {
                    let t = c.get("type").cloned();
                    if let Some(prev) = old_conds
                        .as_array()
                        .and_then(|a| a.iter().find(|o| o.get("type") == t.as_ref()))
                        && let Some(ts) = prev.get("lastTransitionTime")
                    {
                        c["lastTransitionTime"] = ts.clone();
                    }
                }
            }
            json::ensure_object(obj).insert("status".into(), status);
        }
        _ => {}
    }
    if let (Some(old), Some(Builtin::Secret | Builtin::ConfigMap)) = (old, rt.builtin)
        && old.get("immutable").and_then(Value::as_bool) == Some(true)
    {
        for field in ["data", "binaryData", "immutable"] {
            if old.get(field) != obj.get(field) {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    json::name(old),
                    vec![Cause::new(
                        "FieldValueForbidden",
                        field,
                        "Forbidden: field is immutable when `immutable` is set",
                    )],
                ));
            }
        }
    }
    Ok(())
}

/// All validation of a new or updated object; `422` with every cause.
fn validate_object(
    t: &Target,
    v: &Version,
    old: Option<&Value>,
    obj: &Value,
) -> Result<(), ApiError> {
    let rt = &t.rt;
    let name = json::name(obj);
    let mut causes = Vec::new();
    if old.is_none() {
        let rule = validation::name_rule(&rt.group, &rt.kind);
        causes.extend(schema::meta::check_name(
            name,
            json::meta_str(obj, "generateName"),
            rule,
        ));
    }
    causes.extend(schema::meta::validate(obj));
    if let Some(s) = &v.schema {
        causes.extend(schema::validate(obj, s));
    }
    if matches!(rt.builtin, Some(Builtin::Secret | Builtin::ConfigMap)) {
        for field in ["data", "binaryData"] {
            if let Some(m) = obj.get(field).and_then(Value::as_object) {
                for k in m.keys().filter(|k| !is_config_key(k)) {
                    causes.push(Cause::new(
                        "FieldValueInvalid",
                        format!("{field}[{k}]"),
                        format!("Invalid value: {k:?}: {CONFIG_KEY_MSG}"),
                    ));
                }
            }
        }
    }
    if let Some(scale) = &v.scale {
        causes.extend(super::scale::validate(obj, scale));
    }
    if matches!(
        rt.builtin,
        Some(Builtin::MutatingWebhookConfiguration | Builtin::ValidatingWebhookConfiguration)
    ) {
        causes.extend(
            crate::webhook::config::validate(obj)
                .into_iter()
                .map(|(field, message)| Cause::new("FieldValueInvalid", field, message)),
        );
    }
    if causes.is_empty()
        && let Some(cel) = &v.cel
    {
        causes.extend(cel.validate(obj, old));
    }
    if causes.is_empty() {
        Ok(())
    } else {
        Err(ApiError::invalid(&rt.group, &rt.kind, name, causes))
    }
}

/// The resource type a CRD object defines (CRD writes only); its conversion
/// webhook is called through `caller`.
fn crd_type(
    t: &Target,
    obj: &Value,
    caller: &Arc<crate::webhook::Caller>,
) -> Result<Option<ResourceType>, ApiError> {
    if t.rt.builtin != Some(Builtin::Crd) {
        return Ok(None);
    }
    crd::from_crd(obj, caller)
        .map(Some)
        .map_err(|c| ApiError::invalid(&t.rt.group, &t.rt.kind, json::name(obj), c))
}

/// Whether `a` and `b` differ outside the top-level `keys` (compared in place,
/// without copying either object).
fn differs_outside(a: &Value, b: &Value, keys: &[&str]) -> bool {
    fn kept<'a>(
        m: &'a serde_json::Map<String, Value>,
        keys: &[&str],
    ) -> Vec<(&'a String, &'a Value)> {
        m.iter()
            .filter(|(k, _)| !keys.contains(&k.as_str()))
            .collect()
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => kept(x, keys) != kept(y, keys),
        _ => a != b,
    }
}

fn copy_field(from: &Value, to: &mut Value, field: &str) {
    let v = json::meta(from).and_then(|m| m.get(field)).cloned();
    let m = meta_mut(to);
    match v {
        Some(v) => {
            m.insert(field.to_string(), v);
        }
        None => {
            m.remove(field);
        }
    }
}

/// Whether the object is gone once it is being deleted and has no finalizers (for
/// Namespaces also no `spec.finalizers`).
pub(crate) fn ready_to_remove(key: &StorageKey, obj: &Value) -> bool {
    if !json::is_deleting(obj) || !json::finalizers(obj).is_empty() {
        return false;
    }
    if key.group.is_empty() && key.plural == "namespaces" {
        return obj
            .pointer("/spec/finalizers")
            .and_then(Value::as_array)
            .is_none_or(|a| a.is_empty());
    }
    true
}

/// After an object is removed: a removed CRD takes its resource type and every object
/// of it along (each one gets a `DELETED` event).
pub(crate) fn on_removed(st: &mut State, key: &StorageKey, last: &Value) {
    if !(key.group == "apiextensions.k8s.io" && key.plural == "customresourcedefinitions") {
        return;
    }
    let group = last
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = last
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(rt) = st.registry.get(group, plural) else {
        return;
    };
    if rt.builtin.is_some() {
        return;
    }
    let keys: Vec<(ObjKey, Arc<Value>)> = st
        .objects(&rt.storage)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    for (k, v) in keys {
        st.remove(&rt.storage, &k, (*v).clone());
    }
    st.registry.remove(group, plural);
    st.drop_type(&rt.storage);
}

/// Stores the new state of an existing object, or removes it when it is being deleted
/// and nothing holds it anymore. Returns the stored (or last) state and whether it was
/// removed.
pub(crate) fn store_update(
    st: &mut State,
    key: &StorageKey,
    obj_key: ObjKey,
    new: Value,
) -> (Arc<Value>, bool) {
    if ready_to_remove(key, &new) {
        let last = st.remove(key, &obj_key, new);
        on_removed(st, key, &last);
        (last, true)
    } else {
        (st.put(key, obj_key, new), false)
    }
}

enum Commit {
    Done(Written),
    Retry,
}

/// One attempt of an update inside the retry loop.
struct Step<'a> {
    t: &'a Target,
    v: &'a Version,
    name: &'a str,
    cur_view: &'a Value,
    candidate: &'a Value,
    sub: Subresource,
    managed: Managed,
    now: &'a str,
}

pub(super) fn parse_apply_body(body: &[u8]) -> Result<Value, ApiError> {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return Ok(v);
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the apply body is not UTF-8"))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
}

impl Engine {
    fn current(&self, t: &Target, name: &str) -> Option<Arc<Value>> {
        self.lock().get(&t.rt.storage, &t.key(name))
    }

    /// Creates an object (`POST`). `201` on success; `409 AlreadyExists`, `422 Invalid`,
    /// `404` for a missing namespace, `403` for a terminating one, `400` for a body that
    /// does not match the request.
    pub fn create(
        &self,
        t: &Target,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let v = t.version_def()?.clone();
        let mut body = body;
        decode_type_meta(t, &mut body)?;
        reconcile_namespace(t, &mut body)?;
        let (mut obj, mut warnings) = decode(&v, body, opts, true)?;
        let adm = opts.admission(Operation::Create, t, Subresource::Main, false);
        if let Some(m) = self.mutate(&adm, &obj, None, &mut warnings)? {
            obj = m;
        }
        let now = now_rfc3339();
        init_meta(&t.rt, &mut obj, &now)?;
        // kube-apiserver resets `status` on create for kinds with the subresource, except
        // Node (kubelet registers its Node with a status; `nodeStrategy` keeps it).
        if v.status_subresource
            && t.rt.builtin != Some(Builtin::Node)
            && let Some(m) = obj.as_object_mut()
        {
            m.remove("status");
        }
        admit(&t.rt, None, &mut obj, &now)?;
        let entries = managed::record_update(
            None,
            &obj,
            v.schema.as_deref(),
            Vec::new(),
            &opts.manager(),
            "",
            &t.api_version(),
            scope_of(&v, Subresource::Main),
            &now,
        );
        managed::write(&mut obj, entries);
        validate_object(t, &v, None, &obj)?;
        let crd_rt = crd_type(t, &obj, &self.caller)?;
        self.validate_admission(&adm, &obj, None, &mut warnings)?;
        self.commit_create(t, obj, crd_rt, opts.dry_run, warnings)
    }

    fn commit_create(
        &self,
        t: &Target,
        obj: Value,
        crd_rt: Option<ResourceType>,
        dry_run: bool,
        warnings: Vec<String>,
    ) -> Result<Written, ApiError> {
        let name = json::name(&obj).to_string();
        let key = t.key(&name);
        let stored_form = to_storage(&t.rt, obj)?;
        let mut st = self.lock();
        check_namespace(&st, &t.rt, t.ns(), &name)?;
        if st.get(&t.rt.storage, &key).is_some() {
            return Err(ApiError::already_exists(&t.rt.group, &t.rt.plural, &name));
        }
        if let Some(new_rt) = &crd_rt
            && st
                .registry
                .get(&new_rt.group, &new_rt.plural)
                .is_some_and(|existing| existing.builtin.is_some())
        {
            return Err(ApiError::invalid(
                &t.rt.group,
                &t.rt.kind,
                &name,
                vec![Cause::new(
                    "FieldValueInvalid",
                    "spec.names.plural",
                    format!(
                        "Invalid value: {:?}: is served by a built-in API",
                        new_rt.plural
                    ),
                )],
            ));
        }
        if dry_run {
            drop(st);
            return Ok(Written {
                object: to_view(&t.rt, &t.version, &stored_form)?,
                warnings,
                created: true,
            });
        }
        let stored = st.put(&t.rt.storage, key, stored_form);
        if let Some(new_rt) = crd_rt {
            st.ensure_type(&new_rt.storage);
            st.registry.insert(new_rt);
        }
        drop(st);
        self.wake_gc();
        Ok(Written {
            object: to_view(&t.rt, &t.version, &stored)?,
            warnings,
            created: true,
        })
    }

    /// Computes the new state of an existing object from a candidate (status rules,
    /// server-owned metadata, finalizer rule, generation, managed fields, validation).
    /// `None` when nothing changes.
    #[allow(clippy::too_many_arguments)]
    fn prepare_update(
        &self,
        t: &Target,
        v: &Version,
        old: &Value,
        candidate: &Value,
        sub: Subresource,
        managed_fields: Managed,
        now: &str,
    ) -> Result<Option<(Value, Option<ResourceType>)>, ApiError> {
        let rt = &t.rt;
        let mut new = match sub {
            Subresource::Status => {
                let mut n = old.clone();
                let o = json::ensure_object(&mut n);
                match candidate.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
                n
            }
            Subresource::Main | Subresource::Scale => {
                let mut n = candidate.clone();
                if v.status_subresource {
                    let o = json::ensure_object(&mut n);
                    match old.get("status") {
                        Some(s) => o.insert("status".into(), s.clone()),
                        None => o.remove("status"),
                    };
                }
                n
            }
        };
        for f in [
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "name",
            "namespace",
            "resourceVersion",
            "generation",
        ] {
            copy_field(old, &mut new, f);
        }
        if json::is_deleting(old) {
            let before = json::finalizers(old);
            let added: Vec<String> = json::finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    json::name(old),
                    vec![Cause::new(
                        "FieldValueForbidden",
                        "metadata.finalizers",
                        format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                            added
                                .iter()
                                .map(|f| format!("{f:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    )],
                ));
            }
        }
        admit(rt, Some(old), &mut new, now)?;
        if tracks_generation(rt) {
            let mut skip = vec!["metadata"];
            if v.status_subresource {
                skip.push("status");
            }
            if differs_outside(old, &new, &skip) {
                meta_mut(&mut new).insert("generation".into(), json!(json::generation(old) + 1));
            }
        }
        let entries = match managed_fields {
            Managed::Given(e) => e,
            Managed::Update(manager) => {
                let base = match json::meta(candidate).and_then(|m| m.get("managedFields")) {
                    Some(Value::Array(a)) if sub == Subresource::Main && a.is_empty() => Vec::new(),
                    Some(Value::Array(_)) if sub == Subresource::Main => managed::read(candidate),
                    _ => managed::read(old),
                };
                managed::record_update(
                    Some(old),
                    &new,
                    v.schema.as_deref(),
                    base,
                    &manager,
                    sub.name(),
                    &t.api_version(),
                    scope_of(v, sub),
                    now,
                )
            }
        };
        managed::write(&mut new, entries);
        if new == *old {
            return Ok(None);
        }
        validate_object(t, v, Some(old), &new)?;
        let crd_rt = crd_type(t, &new, &self.caller)?;
        Ok(Some((new, crd_rt)))
    }

    #[allow(clippy::too_many_arguments)]
    fn commit_update(
        &self,
        t: &Target,
        name: &str,
        cur_view: &Value,
        prepared: Option<(Value, Option<ResourceType>)>,
        dry_run: bool,
        warnings: &[String],
    ) -> Result<Commit, ApiError> {
        let done = |object: Value| {
            Ok(Commit::Done(Written {
                object,
                warnings: warnings.to_vec(),
                created: false,
            }))
        };
        let Some((new_view, crd_rt)) = prepared else {
            return done(cur_view.clone());
        };
        if dry_run {
            return done(new_view);
        }
        let storage_form = to_storage(&t.rt, new_view)?;
        let mut st = self.lock();
        let Some(cur) = st.get(&t.rt.storage, &t.key(name)) else {
            return Err(t.not_found(name));
        };
        if json::resource_version(&cur) != json::resource_version(cur_view) {
            return Ok(Commit::Retry);
        }
        let (stored, removed) = store_update(&mut st, &t.rt.storage, t.key(name), storage_form);
        if let Some(new_rt) = crd_rt
            && !removed
        {
            st.ensure_type(&new_rt.storage);
            st.registry.insert(new_rt);
        }
        drop(st);
        self.wake_gc();
        done(to_view(&t.rt, &t.version, &stored)?)
    }

    fn check_preconditions(
        t: &Target,
        cur: &Value,
        rv: &str,
        uid: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        if !rv.is_empty() && rv != json::resource_version(cur) {
            return Err(ApiError::stale(&t.rt.group, &t.rt.plural, name));
        }
        if !uid.is_empty() && uid != json::uid(cur) {
            return Err(ApiError::conflict(
                &t.rt.group,
                &t.rt.plural,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    json::uid(cur)
                ),
            ));
        }
        Ok(())
    }

    /// One attempt of an update: mutating admission on the candidate, the
    /// strategy ([`Engine::prepare_update`]), validating admission on its
    /// result (the current object when nothing changes), the commit.
    fn update_admitted(
        &self,
        step: Step<'_>,
        opts: &WriteOptions,
        patch: bool,
        warnings: &[String],
    ) -> Result<Commit, ApiError> {
        let Step {
            t,
            v,
            name,
            cur_view,
            candidate,
            sub,
            managed,
            now,
        } = step;
        let adm = opts.admission(Operation::Update, t, sub, patch);
        let mut warnings = warnings.to_vec();
        let mutated = self.mutate(&adm, candidate, Some(cur_view), &mut warnings)?;
        let candidate = mutated.as_ref().unwrap_or(candidate);
        let prepared = self.prepare_update(t, v, cur_view, candidate, sub, managed, now)?;
        let new = prepared.as_ref().map_or(cur_view, |(n, _)| n);
        self.validate_admission(&adm, new, Some(cur_view), &mut warnings)?;
        self.commit_update(t, name, cur_view, prepared, opts.dry_run, &warnings)
    }

    /// Replaces an object (`PUT`, also on `/status`). `409` for a stale
    /// `resourceVersion`, `422` when a custom resource is sent without one, `404` when
    /// missing, `400` for a body that does not match the URL.
    pub fn update(
        &self,
        t: &Target,
        name: &str,
        body: Value,
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let v = t.version_def()?.clone();
        let mut body = body;
        decode_type_meta(t, &mut body)?;
        check_body_name(&body, name)?;
        reconcile_namespace(t, &mut body)?;
        let (candidate, warnings) = decode(&v, body, opts, true)?;
        let body_rv = json::resource_version(&candidate).to_string();
        let body_uid = json::uid(&candidate).to_string();
        loop {
            let cur = self.current(t, name).ok_or_else(|| t.not_found(name))?;
            if body_rv.is_empty() && !t.rt.allow_unconditional_update {
                return Err(ApiError::invalid(
                    &t.rt.group,
                    &t.rt.kind,
                    name,
                    vec![Cause::new(
                        "FieldValueInvalid",
                        "metadata.resourceVersion",
                        "Invalid value: 0x0: must be specified for an update",
                    )],
                ));
            }
            let cur_view = to_view(&t.rt, &t.version, &cur)?;
            Self::check_preconditions(t, &cur_view, &body_rv, &body_uid, name)?;
            let now = now_rfc3339();
            if let Commit::Done(w) = self.update_admitted(
                Step {
                    t,
                    v: &v,
                    name,
                    cur_view: &cur_view,
                    candidate: &candidate,
                    sub,
                    managed: Managed::Update(opts.manager()),
                    now: &now,
                },
                opts,
                false,
                &warnings,
            )? {
                return Ok(w);
            }
        }
    }

    /// A read-modify-write of an existing object through `sub` (the `/scale` writes):
    /// `change` turns the current object (served form) into the candidate; a non-empty
    /// `metadata.resourceVersion` in the candidate is a precondition (`409`). Recomputed
    /// when the object changed meanwhile. The managed-fields entry is an `Update` by the
    /// request's manager with `sub`'s subresource name.
    pub(crate) fn update_with(
        &self,
        t: &Target,
        name: &str,
        sub: Subresource,
        opts: &WriteOptions,
        mut change: impl FnMut(&Value) -> Result<Value, ApiError>,
    ) -> Result<Written, ApiError> {
        let v = t.version_def()?.clone();
        loop {
            let cur = self.current(t, name).ok_or_else(|| t.not_found(name))?;
            let cur_view = to_view(&t.rt, &t.version, &cur)?;
            let candidate = change(&cur_view)?;
            let rv = json::resource_version(&candidate).to_string();
            Self::check_preconditions(t, &cur_view, &rv, "", name)?;
            let now = now_rfc3339();
            if let Commit::Done(w) = self.update_admitted(
                Step {
                    t,
                    v: &v,
                    name,
                    cur_view: &cur_view,
                    candidate: &candidate,
                    sub,
                    managed: Managed::Update(opts.manager()),
                    now: &now,
                },
                opts,
                false,
                &[],
            )? {
                return Ok(w);
            }
        }
    }

    /// Patches an object (`PATCH`, also on `/status`): JSON patch, merge patch, strategic
    /// merge patch (built-in kinds; `415` for custom resources) or server-side apply.
    pub fn patch(
        &self,
        t: &Target,
        name: &str,
        pt: PatchType,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        if pt == PatchType::Apply {
            return self.apply(t, name, body, sub, opts);
        }
        if pt == PatchType::Strategic && t.rt.builtin.is_none() {
            return Err(ApiError::unsupported_media_type(&[
                "application/json-patch+json",
                "application/merge-patch+json",
                "application/apply-patch+yaml",
            ]));
        }
        let v = t.version_def()?.clone();
        loop {
            let cur = self.current(t, name).ok_or_else(|| t.not_found(name))?;
            let cur_view = to_view(&t.rt, &t.version, &cur)?;
            let patched = match pt {
                PatchType::Json => patch::json_patch(&cur_view, body)?,
                PatchType::Merge => patch::merge_patch(&cur_view, body)?,
                _ => patch::strategic_merge_patch(
                    &cur_view,
                    body,
                    Schema::root(v.schema.as_deref()),
                )?,
            };
            let mut patched = patched;
            decode_type_meta(t, &mut patched)?;
            for (field, want) in [
                ("name", json::name(&cur_view)),
                ("namespace", json::namespace(&cur_view)),
            ] {
                let got = json::meta_str(&patched, field);
                if got != want && !(field == "namespace" && got.is_empty()) {
                    return Err(ApiError::invalid(
                        &t.rt.group,
                        &t.rt.kind,
                        name,
                        vec![Cause::new(
                            "FieldValueInvalid",
                            format!("metadata.{field}"),
                            format!("Invalid value: {got:?}: field is immutable"),
                        )],
                    ));
                }
            }
            let rv = json::resource_version(&patched).to_string();
            let uid = json::uid(&patched).to_string();
            Self::check_preconditions(t, &cur_view, &rv, &uid, name)?;
            let (candidate, warnings) = decode(&v, patched, opts, true)?;
            let now = now_rfc3339();
            if let Commit::Done(w) = self.update_admitted(
                Step {
                    t,
                    v: &v,
                    name,
                    cur_view: &cur_view,
                    candidate: &candidate,
                    sub,
                    managed: Managed::Update(opts.manager()),
                    now: &now,
                },
                opts,
                true,
                &warnings,
            )? {
                return Ok(w);
            }
        }
    }

    /// Server-side apply (`PATCH` with `application/apply-patch+yaml`; the body may be
    /// JSON). Creates the object when missing (main resource only). `409 Conflict` with
    /// `FieldManagerConflict` causes when other managers own changed fields and `force`
    /// is not set; `400` without `fieldManager`.
    pub fn apply(
        &self,
        t: &Target,
        name: &str,
        body: &[u8],
        sub: Subresource,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let manager = match &opts.field_manager {
            Some(m) if !m.is_empty() => m.clone(),
            _ => {
                return Err(ApiError::bad_request(
                    "PATCH, application/apply-patch+yaml requests require fieldManager to be set",
                ));
            }
        };
        let config = parse_apply_body(body)?;
        check_apply_type(t, &config)?;
        self.apply_config(t, name, config, sub, &manager, opts)
    }

    /// Server-side apply of a parsed configuration of `t`'s kind (for `/scale`, the
    /// `Scale` already turned into the custom resource's replicas path).
    pub(crate) fn apply_config(
        &self,
        t: &Target,
        name: &str,
        mut config: Value,
        sub: Subresource,
        manager: &str,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let manager = manager.to_string();
        let v = t.version_def()?.clone();
        let cfg_name = json::name(&config).to_string();
        if !cfg_name.is_empty() && cfg_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({cfg_name}) does not match the name on the URL ({name})"
            )));
        }
        if json::meta(&config).is_some_and(|m| m.get("managedFields").is_some_and(|f| !f.is_null()))
        {
            return Err(ApiError::bad_request("metadata.managedFields must be nil"));
        }
        meta_mut(&mut config).insert("name".into(), Value::String(name.to_string()));
        reconcile_namespace(t, &mut config)?;
        let (mut config, warnings) = decode(&v, config, opts, false)?;
        match sub {
            Subresource::Status => {
                if let Some(m) = config.as_object_mut() {
                    m.retain(|k, _| {
                        matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status")
                    });
                }
            }
            Subresource::Main | Subresource::Scale if v.status_subresource => {
                if let Some(m) = config.as_object_mut() {
                    m.remove("status");
                }
            }
            Subresource::Main | Subresource::Scale => {}
        }
        let cfg_rv = json::resource_version(&config).to_string();
        let cfg_uid = json::uid(&config).to_string();
        let schema_value = v.schema.clone();
        let scope = scope_of(&v, sub);
        loop {
            let now = now_rfc3339();
            let Some(cur) = self.current(t, name) else {
                if sub != Subresource::Main {
                    return Err(t.not_found(name));
                }
                if !cfg_rv.is_empty() {
                    return Err(t.not_found(name));
                }
                if cfg_name.is_empty() {
                    // kube-apiserver builds the new object from the configuration alone
                    return Err(ApiError::invalid(
                        &t.rt.group,
                        &t.rt.kind,
                        "",
                        vec![Cause::new(
                            "FieldValueRequired",
                            "metadata.name",
                            "Required value: name or generateName is required",
                        )],
                    ));
                }
                let (merged, entries) = managed::apply(ApplyRequest {
                    live: None,
                    config: &config,
                    schema: schema_value.as_deref(),
                    entries: Vec::new(),
                    manager: &manager,
                    subresource: sub.name(),
                    api_version: &t.api_version(),
                    scope,
                    force: opts.force,
                    now: &now,
                })
                .map_err(|c| {
                    ApiError::apply_conflict(
                        &t.rt.group,
                        &t.rt.plural,
                        name,
                        c.message(),
                        c.causes(),
                    )
                })?;
                let mut obj = merged;
                if let Some(s) = &schema_value {
                    schema::normalize(&mut obj, s, true);
                }
                let adm = opts.admission(Operation::Create, t, sub, true);
                let mut warnings = warnings.clone();
                if let Some(m) = self.mutate(&adm, &obj, None, &mut warnings)? {
                    obj = m;
                }
                init_meta(&t.rt, &mut obj, &now)?;
                admit(&t.rt, None, &mut obj, &now)?;
                managed::write(&mut obj, entries);
                validate_object(t, &v, None, &obj)?;
                let crd_rt = crd_type(t, &obj, &self.caller)?;
                self.validate_admission(&adm, &obj, None, &mut warnings)?;
                match self.commit_create(t, obj, crd_rt, opts.dry_run, warnings) {
                    Err(e) if e.reason == "AlreadyExists" => continue,
                    other => return other,
                }
            };
            let cur_view = to_view(&t.rt, &t.version, &cur)?;
            Self::check_preconditions(t, &cur_view, &cfg_rv, &cfg_uid, name)?;
            let (merged, entries) = managed::apply(ApplyRequest {
                live: Some(&cur_view),
                config: &config,
                schema: schema_value.as_deref(),
                entries: managed::read(&cur_view),
                manager: &manager,
                subresource: sub.name(),
                api_version: &t.api_version(),
                scope,
                force: opts.force,
                now: &now,
            })
            .map_err(|c| {
                ApiError::apply_conflict(&t.rt.group, &t.rt.plural, name, c.message(), c.causes())
            })?;
            let mut merged = merged;
            if let Some(s) = &schema_value {
                schema::normalize(&mut merged, s, true);
            }
            if let Commit::Done(w) = self.update_admitted(
                Step {
                    t,
                    v: &v,
                    name,
                    cur_view: &cur_view,
                    candidate: &merged,
                    sub,
                    managed: Managed::Given(entries),
                    now: &now,
                },
                opts,
                true,
                &warnings,
            )? {
                return Ok(w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_outside_skipped_keys() {
        let skip = ["metadata", "status"];
        let a = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "status": {"y": 1}});
        let b = json!({"metadata": {"name": "b"}, "spec": {"x": 1}, "status": {"y": 2}});
        let c = json!({"metadata": {"name": "a"}, "spec": {"x": 2}});
        let d = json!({"metadata": {"name": "a"}, "spec": {"x": 1}, "extra": true});
        assert!(!differs_outside(&a, &b, &skip));
        assert!(differs_outside(&a, &c, &skip));
        assert!(differs_outside(&a, &d, &skip));
        assert!(differs_outside(&json!(1), &json!(2), &skip));
    }
}
