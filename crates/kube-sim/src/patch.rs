//! Non-apply patches: JSON patch (RFC 6902), JSON merge patch (RFC 7386) and strategic
//! merge patch (built-in kinds only; kube-apiserver answers `415` for custom resources).
//!
//! Strategic merge patch uses the list semantics of [`crate::fields::typed::Schema`]:
//! `set` lists merge as primitive lists (`patchStrategy: merge`), `map` lists merge by
//! their first key (`patchMergeKey`), other lists are replaced. Directives supported:
//! `$patch: replace|delete|merge`, `$deleteFromPrimitiveList/<field>`, `$retainKeys`;
//! `$setElementOrder/<field>` is accepted and ignored (order is not changed).

use crate::api_error::{ApiError, Cause};
use crate::fields::typed::{ListKind, Schema, key_of};
use serde_json::{Map, Value};

/// The patch formats, by request `Content-Type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatchType {
    /// `application/json-patch+json`.
    Json,
    /// `application/merge-patch+json`.
    Merge,
    /// `application/strategic-merge-patch+json`.
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply).
    Apply,
}

impl PatchType {
    /// The patch type of a `Content-Type` (parameters ignored).
    pub fn from_content_type(ct: &str) -> Option<PatchType> {
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" => Some(PatchType::Merge),
            "application/strategic-merge-patch+json" => Some(PatchType::Strategic),
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

fn rejected(message: String) -> ApiError {
    let mut e = ApiError::invalid("", "", "", Vec::new());
    e.message = "the server rejected our request due to an error in our request".into();
    e.subject = None;
    e.causes = vec![Cause::new("UnexpectedServerResponse", "", message)];
    e
}

/// Applies an RFC 6902 JSON patch. A malformed patch is `400`; an operation that fails
/// (failed `test`, missing path) is `422`.
pub fn json_patch(doc: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: json_patch::Patch = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
    let mut out = doc.clone();
    for (i, op) in p.0.iter().enumerate() {
        // kube-apiserver's JSON patch (evanphx/json-patch) lets `test` of `null` succeed
        // on a missing path; kube-runtime's finalizer helper relies on it.
        if let json_patch::PatchOperation::Test(t) = op
            && t.value.is_null()
            && out.pointer(t.path.as_str()).is_none()
        {
            continue;
        }
        json_patch::patch(&mut out, std::slice::from_ref(op)).map_err(|e| {
            rejected(
                e.to_string()
                    .replacen("operation '/0'", &format!("operation '/{i}'"), 1),
            )
        })?;
    }
    Ok(out)
}

/// Applies an RFC 7386 JSON merge patch (`null` deletes). A body that is not JSON is `400`.
pub fn merge_patch(doc: &Value, body: &[u8]) -> Result<Value, ApiError> {
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON merge patch: {e}")))?;
    if !p.is_object() {
        return Err(ApiError::bad_request(
            "a JSON merge patch must be a JSON object",
        ));
    }
    let mut out = doc.clone();
    json_patch::merge(&mut out, &p);
    Ok(out)
}

/// Applies a strategic merge patch to a built-in object.
pub fn strategic_merge_patch(
    doc: &Value,
    body: &[u8],
    schema: Schema<'_>,
) -> Result<Value, ApiError> {
    let p: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid strategic merge patch: {e}")))?;
    if !p.is_object() {
        return Err(ApiError::bad_request(
            "a strategic merge patch must be a JSON object",
        ));
    }
    Ok(smp(Some(doc), &p, schema).unwrap_or(Value::Object(Map::new())))
}

fn strip_directives(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| !k.starts_with('$'))
                .map(|(k, v)| (k.clone(), strip_directives(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_directives).collect()),
        other => other.clone(),
    }
}

/// Returns `None` when the patch deletes the node (`$patch: delete`).
fn smp(doc: Option<&Value>, patch: &Value, s: Schema<'_>) -> Option<Value> {
    let Value::Object(p) = patch else {
        return Some(patch.clone());
    };
    match p.get("$patch").and_then(Value::as_str) {
        Some("delete") => return None,
        Some("replace") => return Some(strip_directives(patch)),
        _ => {}
    }
    let mut out = match doc {
        Some(Value::Object(m)) => m.clone(),
        _ => Map::new(),
    };
    for (k, pv) in p {
        if k == "$patch" || k == "$retainKeys" || k.starts_with("$setElementOrder/") {
            continue;
        }
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(items)), Value::Array(del)) = (out.get_mut(field), pv) {
                items.retain(|it| !del.contains(it));
            }
            continue;
        }
        if pv.is_null() {
            out.remove(k);
            continue;
        }
        let cs = s.field(k);
        let current = out.get(k);
        let merged = match pv {
            Value::Array(items) => Some(smp_list(current, items, cs)),
            Value::Object(_) => smp(current, pv, cs),
            other => Some(other.clone()),
        };
        match merged {
            Some(v) => {
                out.insert(k.clone(), v);
            }
            None => {
                out.remove(k);
            }
        }
    }
    if let Some(Value::Array(keep)) = p.get("$retainKeys") {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    Some(Value::Object(out))
}

fn smp_list(current: Option<&Value>, items: &[Value], s: Schema<'_>) -> Value {
    let replace = items
        .iter()
        .any(|i| i.get("$patch").and_then(Value::as_str) == Some("replace"));
    let plain: Vec<Value> = items
        .iter()
        .filter(|i| i.get("$patch").and_then(Value::as_str) != Some("replace"))
        .cloned()
        .collect();
    let existing = match current {
        Some(Value::Array(a)) if !replace => a.clone(),
        _ => return Value::Array(plain.iter().map(strip_directives).collect()),
    };
    match s.list_kind() {
        ListKind::Atomic => Value::Array(plain.iter().map(strip_directives).collect()),
        ListKind::Set => {
            let mut out = existing;
            for it in plain {
                if !out.contains(&it) {
                    out.push(it);
                }
            }
            Value::Array(out)
        }
        ListKind::Map(keys) => {
            let keys: Vec<String> = keys.into_iter().take(1).collect();
            let mut out = existing;
            for it in plain {
                let k = key_of(&it, &keys);
                let pos = out.iter().position(|o| key_of(o, &keys) == k);
                match (pos, smp(pos.map(|p| &out[p]), &it, s.items())) {
                    (Some(p), Some(v)) => out[p] = v,
                    (Some(p), None) => {
                        out.remove(p);
                    }
                    (None, Some(v)) => out.push(v),
                    (None, None) => {}
                }
            }
            Value::Array(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_patch_ops_and_failures() {
        let doc = json!({"spec": {"a": 1}});
        let out = json_patch(&doc, br#"[{"op":"replace","path":"/spec/a","value":2},{"op":"add","path":"/spec/b","value":3}]"#)
            .expect("applies");
        assert_eq!(out, json!({"spec": {"a": 2, "b": 3}}));
        let failed = json_patch(&doc, br#"[{"op":"test","path":"/spec/a","value":9}]"#)
            .expect_err("test fails");
        assert_eq!((failed.code, failed.reason), (422, "Invalid"));
        let absent = json_patch(&doc, br#"[{"op":"test","path":"/metadata/finalizers","value":null},{"op":"add","path":"/metadata","value":{"finalizers":["f"]}}]"#)
            .expect("test of null on a missing path passes");
        assert_eq!(absent["metadata"]["finalizers"], json!(["f"]));
        let bad = json_patch(&doc, b"{not json").expect_err("malformed");
        assert_eq!((bad.code, bad.reason), (400, "BadRequest"));
    }

    #[test]
    fn merge_patch_deletes_with_null() {
        let doc = json!({"spec": {"a": 1, "b": {"c": 2}}});
        let out = merge_patch(&doc, br#"{"spec":{"a":null,"b":{"d":3}}}"#).expect("applies");
        assert_eq!(out, json!({"spec": {"b": {"c": 2, "d": 3}}}));
    }

    #[test]
    fn strategic_merges_finalizers_and_owner_refs() {
        let doc = json!({"metadata": {"finalizers": ["a"], "ownerReferences": [{"uid": "1", "name": "x"}]}, "data": {"k": "v"}});
        let patch = br#"{"metadata":{"finalizers":["b"],"ownerReferences":[{"uid":"1","name":"y"},{"uid":"2","name":"z"}],
            "$deleteFromPrimitiveList/finalizers":["a"]},"data":{"k2":"v2"}}"#;
        let out = strategic_merge_patch(&doc, patch, Schema::root(None)).expect("applies");
        assert_eq!(
            out,
            json!({"metadata": {"finalizers": ["b"], "ownerReferences": [{"uid": "1", "name": "y"}, {"uid": "2", "name": "z"}]},
                   "data": {"k": "v", "k2": "v2"}})
        );
        let del = strategic_merge_patch(&out, br#"{"metadata":{"ownerReferences":[{"uid":"1","$patch":"delete"}]},"data":{"$patch":"replace","only":"1"}}"#, Schema::root(None))
            .expect("applies");
        assert_eq!(
            del["metadata"]["ownerReferences"],
            json!([{"uid": "2", "name": "z"}])
        );
        assert_eq!(del["data"], json!({"only": "1"}));
    }

    #[test]
    fn content_types() {
        assert_eq!(
            PatchType::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchType::Merge)
        );
        assert_eq!(PatchType::from_content_type("application/json"), None);
    }
}
