//! The `scale` subresource of custom resources whose CRD version declares
//! `subresources.scale`, as apiextensions-apiserver's `ScaleREST` serves it
//! (`pkg/registry/customresource/etcd.go`): an `autoscaling/v1` `Scale` read from the
//! spec replicas, status replicas and label-selector paths of the custom resource.
//!
//! Writes (`PUT`, JSON and merge patches of the `Scale`, server-side apply of a `Scale`)
//! change only the spec replicas path; they are recorded in `managedFields` of the
//! custom resource under subresource `scale` with the resource's `apiVersion`, and take
//! `.spec.replicas` from other managers as any update does (kube-apiserver's
//! `ScaleHandler`). Every write of such a custom resource is also checked by
//! `ValidateScaleSpec`/`ValidateScaleStatus`: replicas are non-negative int32s and the
//! selector parses.

use super::{Engine, Subresource, Target, WriteOptions, Written};
use crate::api_error::{ApiError, Cause};
use crate::json::{self, meta_mut};
use crate::patch::{self, PatchType};
use crate::resource::ScalePaths;
use serde_json::{Map, Value, json};

/// `apiVersion` of the `Scale` objects served for custom resources.
pub const SCALE_API_VERSION: &str = "autoscaling/v1";

/// The spec replicas a patch starts from when the custom resource has none
/// (`math.MinInt32`, `invalidSpecReplicas` in `ScaleREST`); still there after the patch,
/// the write is refused.
const UNSET_REPLICAS: i64 = i32::MIN as i64;

fn nested<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    json::get_path(obj, &ScalePaths::fields(path)).filter(|v| !v.is_null())
}

fn set_nested(obj: &mut Value, path: &str, value: Value) {
    let fields = ScalePaths::fields(path);
    let Some((last, parents)) = fields.split_last() else {
        return;
    };
    let mut cur = obj;
    for f in parents {
        let m = json::ensure_object(cur);
        cur = m
            .entry((*f).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    json::ensure_object(cur).insert((*last).to_string(), value);
}

/// The `autoscaling/v1` `Scale` of a custom resource (served form): `spec.replicas`
/// from the spec replicas path (omitted when 0, as Go's `omitempty` does),
/// `status.replicas` from the status replicas path (0 when absent), `status.selector`
/// from the label-selector path; name, namespace, uid, `resourceVersion` and
/// `creationTimestamp` of the resource.
pub fn scale_of(obj: &Value, paths: &ScalePaths) -> Value {
    let int = |p: &str| nested(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let mut meta = Map::new();
    meta.insert("name".into(), json!(json::name(obj)));
    if !json::namespace(obj).is_empty() {
        meta.insert("namespace".into(), json!(json::namespace(obj)));
    }
    for f in ["uid", "resourceVersion", "creationTimestamp"] {
        if let Some(v) = json::meta(obj).and_then(|m| m.get(f)) {
            meta.insert(f.into(), v.clone());
        }
    }
    let mut spec = Map::new();
    let spec_replicas = int(&paths.spec_replicas);
    if spec_replicas != 0 {
        spec.insert("replicas".into(), json!(spec_replicas));
    }
    let mut status = Map::new();
    status.insert("replicas".into(), json!(int(&paths.status_replicas)));
    if let Some(sel) = paths
        .label_selector
        .as_deref()
        .and_then(|p| nested(obj, p))
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        status.insert("selector".into(), json!(sel));
    }
    json!({
        "kind": "Scale",
        "apiVersion": SCALE_API_VERSION,
        "metadata": meta,
        "spec": spec,
        "status": status
    })
}

/// `ValidateScaleSpec` and `ValidateScaleStatus` of apiextensions-apiserver: the
/// replicas at both paths are non-negative int32s, the selector parses. Field paths are
/// the declared paths (`.spec.replicas`), as kube-apiserver reports them.
pub fn validate(obj: &Value, paths: &ScalePaths) -> Vec<Cause> {
    let mut out = Vec::new();
    for path in [&paths.spec_replicas, &paths.status_replicas] {
        let Some(n) = nested(obj, path).and_then(Value::as_i64) else {
            continue;
        };
        let why = if n < 0 {
            "should be a non-negative integer".to_string()
        } else if n > i64::from(i32::MAX) {
            format!("should be less than or equal to {}", i32::MAX)
        } else {
            continue;
        };
        out.push(Cause::new(
            "FieldValueInvalid",
            path.as_str(),
            format!("Invalid value: {n}: {why}"),
        ));
    }
    if let Some(path) = &paths.label_selector
        && let Some(sel) = nested(obj, path).and_then(Value::as_str)
        && let Err(e) = crate::selector::LabelSelector::parse(sel)
    {
        out.push(Cause::new(
            "FieldValueInvalid",
            path.as_str(),
            format!("Invalid value: {sel:?}: {}", e.message),
        ));
    }
    out
}

/// `spec.replicas` of a `Scale` as Go decodes it into an `int32` (absent: 0).
fn replicas_of(scale: &Value) -> Result<i64, String> {
    let field = "Go struct field ScaleSpec.spec.replicas of type int32";
    match scale.pointer("/spec/replicas") {
        None | Some(Value::Null) => Ok(0),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) if i32::try_from(i).is_ok() => Ok(i),
            _ => Err(format!("json: cannot unmarshal number {n} into {field}")),
        },
        Some(other) => {
            // encoding/json's names of JSON value types
            let kind = match other {
                Value::Bool(_) => "bool",
                Value::String(_) => "string",
                Value::Array(_) => "array",
                _ => "object",
            };
            Err(format!("json: cannot unmarshal {kind} into {field}"))
        }
    }
}

/// `apiVersion`/`kind` of a `Scale` body: absent ones default (`PUT`; apply requires
/// them), others must be `autoscaling/v1` `Scale` (`400`).
fn check_scale_type(body: &Value, required: bool) -> Result<(), ApiError> {
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request was not a JSON object",
        ));
    }
    let kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    let av = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if required && kind.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{body}'"
        )));
    }
    if required && av.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Object 'apiVersion' is missing in '{body}'"
        )));
    }
    if !av.is_empty() && av != SCALE_API_VERSION {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({SCALE_API_VERSION})"
        )));
    }
    if !kind.is_empty() && kind != "Scale" {
        return Err(ApiError::bad_request(format!(
            "the kind in the data ({kind}) does not match the expected kind (Scale)"
        )));
    }
    Ok(())
}

fn scale_paths(t: &Target) -> Result<ScalePaths, ApiError> {
    t.version_def()?
        .scale
        .clone()
        .ok_or_else(|| ApiError::no_route(&format!("{}/{}/scale", t.version, t.rt.plural)))
}

impl Engine {
    /// `GET .../{name}/scale`: the resource's `Scale`. `404` when missing.
    pub fn get_scale(&self, t: &Target, name: &str) -> Result<Value, ApiError> {
        let paths = scale_paths(t)?;
        Ok(scale_of(&self.get(t, name)?, &paths))
    }

    /// `PUT .../{name}/scale` with a `Scale`: sets the spec replicas. Its
    /// `metadata.resourceVersion`, when set, is a precondition (`409`); `400` for a body
    /// that is not a `Scale` of this name; `422` when the resource's validation refuses
    /// the replicas.
    pub fn update_scale(
        &self,
        t: &Target,
        name: &str,
        body: Value,
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let paths = scale_paths(t)?;
        check_scale_type(&body, false)?;
        let got = json::name(&body);
        if got != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({got}) does not match the name on the URL ({name})"
            )));
        }
        let ns = json::namespace(&body);
        if t.rt.namespaced && !ns.is_empty() && ns != t.ns() {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let replicas = replicas_of(&body).map_err(ApiError::bad_request)?;
        let rv = json::resource_version(&body).to_string();
        self.write_scale(t, name, &paths, opts, |_| Ok((replicas, rv.clone())))
    }

    /// `PATCH .../{name}/scale`: a JSON or merge patch of the `Scale` (a resource without
    /// spec replicas shows `-2147483648` to the patch, and must get a value), or
    /// server-side apply of a `Scale`. Strategic merge patch answers `415`, as for every
    /// custom-resource path. A patch result whose replicas are not an int32 is `422`.
    pub fn patch_scale(
        &self,
        t: &Target,
        name: &str,
        pt: PatchType,
        body: &[u8],
        opts: &WriteOptions,
    ) -> Result<Written, ApiError> {
        let paths = scale_paths(t)?;
        match pt {
            PatchType::Apply => return self.apply_scale(t, name, &paths, body, opts),
            PatchType::Strategic => {
                return Err(ApiError::unsupported_media_type(&[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]));
            }
            PatchType::Json | PatchType::Merge => {}
        }
        self.write_scale(t, name, &paths, opts, |cur| {
            let mut base = scale_of(cur, &paths);
            if nested(cur, &paths.spec_replicas).is_none() {
                base["spec"]["replicas"] = json!(UNSET_REPLICAS);
            }
            let patched = if pt == PatchType::Json {
                patch::json_patch(&base, body)?
            } else {
                patch::merge_patch(&base, body)?
            };
            let replicas = replicas_of(&patched).map_err(|e| {
                ApiError::invalid(
                    "",
                    "",
                    "",
                    vec![Cause::new(
                        "FieldValueInvalid",
                        "patch",
                        format!("Invalid value: {:?}: {e}", patched.to_string()),
                    )],
                )
            })?;
            Ok((replicas, json::resource_version(&patched).to_string()))
        })
    }

    /// Server-side apply of a `Scale`: its `spec.replicas` becomes an apply
    /// configuration of the resource's spec replicas path (subresource `scale`);
    /// conflicts with other owners of that path answer `409` unless forced.
    fn apply_scale(
        &self,
        t: &Target,
        name: &str,
        paths: &ScalePaths,
        body: &[u8],
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
        let scale = super::write::parse_apply_body(body)?;
        check_scale_type(&scale, true)?;
        let mut meta = Map::new();
        if let Some(m) = json::meta(&scale) {
            for f in ["name", "namespace", "resourceVersion", "managedFields"] {
                if let Some(v) = m.get(f) {
                    meta.insert(f.into(), v.clone());
                }
            }
        }
        let mut config = json!({
            "apiVersion": t.api_version(),
            "kind": t.rt.kind,
            "metadata": meta
        });
        if scale.pointer("/spec/replicas").is_some() {
            let replicas = replicas_of(&scale).map_err(ApiError::bad_request)?;
            set_nested(&mut config, &paths.spec_replicas, json!(replicas));
        }
        let mut w = self.apply_config(t, name, config, Subresource::Scale, &manager, opts)?;
        w.object = scale_of(&w.object, paths);
        Ok(w)
    }

    /// Sets the spec replicas `new` computes from the current resource (with the
    /// `resourceVersion` precondition it returns, "" for none) and answers the `Scale`.
    fn write_scale(
        &self,
        t: &Target,
        name: &str,
        paths: &ScalePaths,
        opts: &WriteOptions,
        mut new: impl FnMut(&Value) -> Result<(i64, String), ApiError>,
    ) -> Result<Written, ApiError> {
        let mut w = self.update_with(t, name, Subresource::Scale, opts, |cur| {
            let (replicas, rv) = new(cur)?;
            if replicas == UNSET_REPLICAS {
                return Err(ApiError::bad_request(format!(
                    "the spec replicas field {:?} cannot be empty",
                    paths.spec_replicas
                )));
            }
            let mut candidate = cur.clone();
            set_nested(&mut candidate, &paths.spec_replicas, json!(replicas));
            if !rv.is_empty() {
                meta_mut(&mut candidate).insert("resourceVersion".into(), Value::String(rv));
            }
            Ok(candidate)
        })?;
        w.object = scale_of(&w.object, paths);
        Ok(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths() -> ScalePaths {
        ScalePaths {
            spec_replicas: ".spec.replicas".into(),
            status_replicas: ".status.replicas".into(),
            label_selector: Some(".status.selector".into()),
        }
    }

    #[test]
    fn scale_view_of_a_custom_resource() {
        let md = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "creationTimestamp": "2025-01-01T00:00:00Z", "labels": {"a": "b"}},
            "spec": {"replicas": 3},
            "status": {"replicas": 2, "selector": "cluster.x-k8s.io/deployment-name=md"}
        });
        assert_eq!(
            scale_of(&md, &paths()),
            json!({
                "kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {"name": "md", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                    "creationTimestamp": "2025-01-01T00:00:00Z"},
                "spec": {"replicas": 3},
                "status": {"replicas": 2, "selector": "cluster.x-k8s.io/deployment-name=md"}
            })
        );
        // nothing set: spec.replicas omitted (omitempty), status.replicas 0, no selector
        let bare = json!({"metadata": {"name": "c"}, "spec": {}});
        assert_eq!(
            scale_of(&bare, &paths()),
            json!({"kind": "Scale", "apiVersion": "autoscaling/v1", "metadata": {"name": "c"},
                "spec": {}, "status": {"replicas": 0}})
        );
    }

    #[test]
    fn replicas_decode_as_int32() {
        assert_eq!(replicas_of(&json!({"spec": {"replicas": 4}})), Ok(4));
        assert_eq!(replicas_of(&json!({"spec": {}})), Ok(0));
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": "4"}})),
            Err(
                "json: cannot unmarshal string into Go struct field ScaleSpec.spec.replicas of type int32"
                    .into()
            )
        );
        assert_eq!(
            replicas_of(&json!({"spec": {"replicas": 3000000000u64}})),
            Err("json: cannot unmarshal number 3000000000 into Go struct field ScaleSpec.spec.replicas of type int32".into())
        );
    }

    #[test]
    fn validation_of_replicas_and_selector() {
        let obj = json!({"spec": {"replicas": -1}, "status": {"replicas": 2147483648i64, "selector": "a in (b"}});
        let causes: Vec<(String, String)> = validate(&obj, &paths())
            .into_iter()
            .map(|c| (c.field, c.message))
            .collect();
        assert_eq!(causes.len(), 3);
        assert_eq!(
            causes[0],
            (
                ".spec.replicas".to_string(),
                "Invalid value: -1: should be a non-negative integer".to_string()
            )
        );
        assert_eq!(
            causes[1],
            (
                ".status.replicas".to_string(),
                "Invalid value: 2147483648: should be less than or equal to 2147483647".to_string()
            )
        );
        assert_eq!(causes[2].0, ".status.selector");
        assert!(validate(&json!({"spec": {"replicas": 0}}), &paths()).is_empty());
    }

    #[test]
    fn nested_paths_are_created() {
        let mut obj = json!({"metadata": {"name": "x"}});
        set_nested(&mut obj, ".spec.scaling.replicas", json!(5));
        assert_eq!(obj["spec"], json!({"scaling": {"replicas": 5}}));
    }
}
