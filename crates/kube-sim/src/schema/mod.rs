//! Structural-schema handling of objects against an `openAPIV3Schema`, in kube-apiserver's
//! order: drop `null`s of non-nullable fields, apply `default`s, prune unknown fields
//! ([`normalize`]); then validate types, `required`, `enum`, bounds, `pattern`, `format`,
//! list types and `allOf`/`anyOf`/`oneOf`/`not` ([`validate`]). `metadata` is handled by
//! [`meta`], CEL rules by [`cel`].
//!
//! Messages follow kube-apiserver 1.33's `field.Error` texts (`Required value`,
//! `Unsupported value: ...`, `Invalid value: 11: spec.replicas in body should be less than
//! or equal to 10`).

pub mod cel;
pub mod format;
pub mod meta;

use crate::api_error::Cause;
use crate::json::{invalid_value, type_name};
use regex::Regex;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool) == Some(true)
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Drops `null` values of non-nullable fields (using the default if there is one), applies
/// `default`s and prunes fields the schema does not know (unless
/// `x-kubernetes-preserve-unknown-fields`). At the root, `apiVersion`, `kind` and
/// `metadata` are kept (metadata is pruned by [`meta::prune`]).
///
/// Returns the paths of the pruned unknown fields (`spec.foo`, `spec.items[0].bar`), for
/// `fieldValidation=Strict|Warn`.
///
/// With `defaults == false` (server-side apply configurations) no defaults are applied.
pub fn normalize(object: &mut Value, schema: &Value, defaults: bool) -> Vec<String> {
    let mut w = Walk {
        unknown: Vec::new(),
        defaults,
    };
    normalize_node(object, schema, "", true, &mut w);
    w.unknown
}

/// Prunes unknown `metadata` fields of an object without a schema.
pub fn normalize_meta_only(object: &mut Value) -> Vec<String> {
    let mut unknown = Vec::new();
    if let Some(m) = object.get_mut("metadata") {
        meta::prune(m, "metadata", &mut unknown);
    }
    unknown
}

struct Walk {
    unknown: Vec<String>,
    defaults: bool,
}

fn normalize_node(v: &mut Value, s: &Value, path: &str, root: bool, w: &mut Walk) {
    match v {
        Value::Object(map) => normalize_object(map, s, path, root, w),
        Value::Array(items) => {
            if let Some(item_schema) = s.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    normalize_node(item, item_schema, &index(path, i), false, w);
                }
            }
        }
        _ => {}
    }
}

fn normalize_object(map: &mut Map<String, Value>, s: &Value, path: &str, root: bool, w: &mut Walk) {
    if flag(s, "x-kubernetes-int-or-string") {
        return;
    }
    let props = s.get("properties").and_then(Value::as_object);
    let additional = s.get("additionalProperties");
    let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
    let embedded = flag(s, "x-kubernetes-embedded-resource");

    if let Some(props) = props {
        for (k, ps) in props {
            let is_null = matches!(map.get(k), Some(Value::Null));
            if is_null && !flag(ps, "nullable") {
                map.remove(k);
            }
            if w.defaults
                && !map.contains_key(k)
                && let Some(d) = ps.get("default")
            {
                map.insert(k.clone(), d.clone());
            }
        }
    }
    if let Some(ap @ Value::Object(_)) = additional
        && !flag(ap, "nullable")
    {
        let nulls: Vec<String> = map
            .iter()
            .filter(|(k, v)| v.is_null() && !props.is_some_and(|p| p.contains_key(*k)))
            .map(|(k, _)| k.clone())
            .collect();
        for k in nulls {
            map.remove(&k);
        }
    }

    let keys: Vec<String> = map.keys().cloned().collect();
    for k in keys {
        let child_path = join(path, &k);
        if (root || embedded) && (k == "apiVersion" || k == "kind") {
            continue;
        }
        if (root || embedded) && k == "metadata" {
            if let Some(m) = map.get_mut(&k) {
                meta::prune(m, &child_path, &mut w.unknown);
            }
            continue;
        }
        if let Some(ps) = props.and_then(|p| p.get(&k)) {
            if let Some(child) = map.get_mut(&k) {
                normalize_node(child, ps, &child_path, false, w);
            }
            continue;
        }
        match additional {
            Some(ap @ Value::Object(_)) => {
                if let Some(child) = map.get_mut(&k) {
                    normalize_node(child, ap, &child_path, false, w);
                }
            }
            Some(Value::Bool(true)) => {}
            _ if preserve => {}
            _ => {
                map.remove(&k);
                w.unknown.push(child_path);
            }
        }
    }
}

/// Validates an object (after [`normalize`]) against its schema; returns `422` causes.
/// `metadata`, `apiVersion` and `kind` at the root are not checked here.
pub fn validate(object: &Value, schema: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    validate_node(object, schema, "", true, &mut causes);
    causes
}

fn number_text(n: &Value) -> String {
    match n.as_f64() {
        Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
        Some(f) => format!("{f}"),
        None => n.to_string(),
    }
}

fn type_ok(expected: &str, v: &Value) -> bool {
    match expected {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        _ => true,
    }
}

fn invalid(path: &str, v: &Value, msg: String) -> Cause {
    Cause::new(
        "FieldValueInvalid",
        path,
        format!("Invalid value: {}: {msg}", invalid_value(v)),
    )
}

static REGEXES: LazyLock<Mutex<HashMap<String, Option<Arc<Regex>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

fn regex(pattern: &str) -> Option<Arc<Regex>> {
    let mut cache = match REGEXES.lock() {
        Ok(c) => c,
        Err(p) => p.into_inner(),
    };
    cache
        .entry(pattern.to_string())
        .or_insert_with(|| Regex::new(pattern).ok().map(Arc::new))
        .clone()
}

/// Go's `%#v`-like rendering of a list-map key used in `Duplicate value` messages.
fn go_map(keys: &[(String, Value)]) -> String {
    let inner: Vec<String> = keys
        .iter()
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k:?}:{s:?}"),
            other => format!("{k:?}:{other}"),
        })
        .collect();
    format!("map[string]interface {{}}{{{}}}", inner.join(", "))
}

fn validate_node(v: &Value, s: &Value, path: &str, root: bool, causes: &mut Vec<Cause>) {
    let shown_path = if path.is_empty() { "body" } else { path };
    if v.is_null() {
        if flag(s, "nullable") {
            return;
        }
        if let Some(t) = s.get("type").and_then(Value::as_str) {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"null\": {shown_path} in body must be of type {t}: \"null\""
                ),
            ));
        }
        return;
    }
    if flag(s, "x-kubernetes-int-or-string") {
        if !(v.is_string() || v.is_i64() || v.is_u64()) {
            causes.push(Cause::new(
                "FieldValueTypeInvalid",
                path,
                format!(
                    "Invalid value: \"{t}\": {shown_path} in body must be of type integer,string: \"{t}\"",
                    t = type_name(v)
                ),
            ));
        }
    } else if let Some(t) = s.get("type").and_then(Value::as_str)
        && !type_ok(t, v)
    {
        causes.push(Cause::new(
            "FieldValueTypeInvalid",
            path,
            format!(
                "Invalid value: \"{vt}\": {shown_path} in body must be of type {t}: \"{vt}\"",
                vt = type_name(v)
            ),
        ));
        return;
    }

    if let Some(values) = s.get("enum").and_then(Value::as_array)
        && !values.contains(v)
    {
        let supported: Vec<String> = values.iter().map(invalid_value).collect();
        causes.push(Cause::new(
            "FieldValueNotSupported",
            path,
            format!(
                "Unsupported value: {}: supported values: {}",
                invalid_value(v),
                supported.join(", ")
            ),
        ));
    }

    match v {
        Value::Number(_) => validate_number(v, s, path, shown_path, causes),
        Value::String(text) => validate_string(v, text, s, path, shown_path, causes),
        Value::Array(items) => validate_array(items, s, path, shown_path, causes),
        Value::Object(map) => validate_object(map, s, path, shown_path, root, causes),
        _ => {}
    }

    validate_combinators(v, s, path, shown_path, causes);
}

fn validate_number(v: &Value, s: &Value, path: &str, shown: &str, causes: &mut Vec<Cause>) {
    let Some(x) = v.as_f64() else { return };
    let excl_max = flag(s, "exclusiveMaximum");
    let excl_min = flag(s, "exclusiveMinimum");
    if let Some(max) = s.get("maximum")
        && let Some(m) = max.as_f64()
    {
        if excl_max && x >= m {
            causes.push(invalid(
                path,
                v,
                format!("{shown} in body should be less than {}", number_text(max)),
            ));
        } else if !excl_max && x > m {
            causes.push(invalid(
                path,
                v,
                format!(
                    "{shown} in body should be less than or equal to {}",
                    number_text(max)
                ),
            ));
        }
    }
    if let Some(min) = s.get("minimum")
        && let Some(m) = min.as_f64()
    {
        if excl_min && x <= m {
            causes.push(invalid(
                path,
                v,
                format!(
                    "{shown} in body should be greater than {}",
                    number_text(min)
                ),
            ));
        } else if !excl_min && x < m {
            causes.push(invalid(
                path,
                v,
                format!(
                    "{shown} in body should be greater than or equal to {}",
                    number_text(min)
                ),
            ));
        }
    }
    if let Some(mo) = s.get("multipleOf")
        && let Some(m) = mo.as_f64()
        && m != 0.0
        && (x / m).fract() != 0.0
    {
        causes.push(invalid(
            path,
            v,
            format!(
                "{shown} in body should be a multiple of {}",
                number_text(mo)
            ),
        ));
    }
}

fn validate_string(
    v: &Value,
    text: &str,
    s: &Value,
    path: &str,
    shown: &str,
    causes: &mut Vec<Cause>,
) {
    let len = text.chars().count() as u64;
    if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        causes.push(Cause::new(
            "FieldValueTooLong",
            path,
            format!("Too long: may not be more than {max} {unit}"),
        ));
    }
    if let Some(min) = s.get("minLength").and_then(Value::as_u64)
        && len < min
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body should be at least {min} chars long"),
        ));
    }
    if let Some(p) = s.get("pattern").and_then(Value::as_str)
        && let Some(re) = regex(p)
        && !re.is_match(text)
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body should match '{p}'"),
        ));
    }
    if let Some(f) = s.get("format").and_then(Value::as_str)
        && format::check(f, text) == Some(false)
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body must be of type {f}: {text:?}"),
        ));
    }
}

fn validate_array(items: &[Value], s: &Value, path: &str, shown: &str, causes: &mut Vec<Cause>) {
    let n = items.len() as u64;
    if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
        && n > max
    {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {n}: must have at most {max} items"),
        ));
    }
    if let Some(min) = s.get("minItems").and_then(Value::as_u64)
        && n < min
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!("Invalid value: \"array\": {shown} in body should have at least {min} items"),
        ));
    }
    match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = s
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen: Vec<Vec<(String, Value)>> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let key: Vec<(String, Value)> = keys
                    .iter()
                    .map(|k| (k.to_string(), item.get(*k).cloned().unwrap_or(Value::Null)))
                    .collect();
                if seen.contains(&key) {
                    causes.push(Cause::new(
                        "FieldValueDuplicate",
                        index(path, i),
                        format!("Duplicate value: {}", go_map(&key)),
                    ));
                } else {
                    seen.push(key);
                }
            }
        }
        Some("set") => {
            for (i, item) in items.iter().enumerate() {
                if items[..i].contains(item) {
                    causes.push(Cause::new(
                        "FieldValueDuplicate",
                        index(path, i),
                        format!("Duplicate value: {}", invalid_value(item)),
                    ));
                }
            }
        }
        _ => {}
    }
    if let Some(item_schema) = s.get("items") {
        for (i, item) in items.iter().enumerate() {
            validate_node(item, item_schema, &index(path, i), false, causes);
        }
    }
}

fn validate_object(
    map: &Map<String, Value>,
    s: &Value,
    path: &str,
    shown: &str,
    root: bool,
    causes: &mut Vec<Cause>,
) {
    if flag(s, "x-kubernetes-int-or-string") {
        return;
    }
    if let Some(req) = s.get("required").and_then(Value::as_array) {
        for r in req.iter().filter_map(Value::as_str) {
            if root && r == "metadata" {
                continue;
            }
            if !map.contains_key(r) {
                causes.push(Cause::new(
                    "FieldValueRequired",
                    join(path, r),
                    "Required value",
                ));
            }
        }
    }
    let count = map.len() as u64;
    if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
        && count > max
    {
        causes.push(Cause::new(
            "FieldValueTooMany",
            path,
            format!("Too many: {count}: must have at most {max} items"),
        ));
    }
    if let Some(min) = s.get("minProperties").and_then(Value::as_u64)
        && count < min
    {
        causes.push(Cause::new(
            "FieldValueInvalid",
            path,
            format!(
                "Invalid value: \"object\": {shown} in body should have at least {min} properties"
            ),
        ));
    }
    let props = s.get("properties").and_then(Value::as_object);
    let embedded = flag(s, "x-kubernetes-embedded-resource");
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let Some(child) = map.get(k) else { continue };
        if (root || embedded) && (k == "apiVersion" || k == "kind" || k == "metadata") {
            continue;
        }
        let child_path = join(path, k);
        if let Some(ps) = props.and_then(|p| p.get(k)) {
            validate_node(child, ps, &child_path, false, causes);
        } else if let Some(ap @ Value::Object(_)) = s.get("additionalProperties") {
            validate_node(child, ap, &child_path, false, causes);
        }
    }
}

fn validate_combinators(v: &Value, s: &Value, path: &str, shown: &str, causes: &mut Vec<Cause>) {
    let branch_ok = |b: &Value| {
        let mut c = Vec::new();
        validate_node(v, b, path, false, &mut c);
        c.is_empty()
    };
    if let Some(all) = s.get("allOf").and_then(Value::as_array) {
        for b in all {
            validate_node(v, b, path, false, causes);
        }
    }
    if let Some(any) = s.get("anyOf").and_then(Value::as_array)
        && !any.is_empty()
        && !any.iter().any(branch_ok)
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body must validate at least one schema (anyOf)"),
        ));
    }
    if let Some(one) = s.get("oneOf").and_then(Value::as_array)
        && !one.is_empty()
        && one.iter().filter(|b| branch_ok(b)).count() != 1
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body must validate one and only one schema (oneOf)"),
        ));
    }
    if let Some(not) = s.get("not")
        && branch_ok(not)
    {
        causes.push(invalid(
            path,
            v,
            format!("{shown} in body must not validate the schema (not)"),
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn widget_schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "required": ["size"],
                    "properties": {
                        "size": {"type": "integer", "minimum": 1, "maximum": 10},
                        "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                        "name": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-z]+$"},
                        "port": {"x-kubernetes-int-or-string": true},
                        "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set", "maxItems": 3},
                        "conds": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"],
                                  "items": {"type": "object", "properties": {"type": {"type": "string"}, "ok": {"type": "boolean", "default": false}}}},
                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                        "opt": {"type": "string", "nullable": true},
                        "nn": {"type": "string", "default": "d"}
                    }
                }
            }
        })
    }

    #[test]
    fn normalize_prunes_defaults_and_drops_nulls() {
        let mut obj = json!({
            "apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w", "bogus": 1},
            "spec": {
                "size": 3, "extra": true, "opt": null, "nn": null,
                "conds": [{"type": "A", "x": 1}],
                "free": {"anything": {"goes": 1}},
                "labels": {"a": "b"}
            },
            "top": 1
        });
        let unknown = normalize(&mut obj, &widget_schema(), true);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": "w"},
                "spec": {
                    "size": 3, "color": "red", "opt": null, "nn": "d",
                    "conds": [{"type": "A", "ok": false}],
                    "free": {"anything": {"goes": 1}},
                    "labels": {"a": "b"}
                }
            })
        );
        let mut unknown = unknown;
        unknown.sort();
        assert_eq!(
            unknown,
            vec!["metadata.bogus", "spec.conds[0].x", "spec.extra", "top"]
        );
    }

    #[test]
    fn validate_reports_each_rule_with_kube_messages() {
        let obj = json!({
            "spec": {
                "size": 11, "color": "pink", "name": "ABCDEFG", "port": true,
                "tags": ["a", "b", "a", "c"],
                "conds": [{"type": "A"}, {"type": "A"}]
            }
        });
        let causes = validate(&obj, &widget_schema());
        let shown: Vec<String> = causes.iter().map(Cause::display).collect();
        assert_eq!(
            shown,
            vec![
                "spec.color: Unsupported value: \"pink\": supported values: \"red\", \"blue\"",
                "spec.conds[1]: Duplicate value: map[string]interface {}{\"type\":\"A\"}",
                "spec.name: Too long: may not be more than 5 bytes",
                "spec.name: Invalid value: \"ABCDEFG\": spec.name in body should match '^[a-z]+$'",
                "spec.port: Invalid value: \"boolean\": spec.port in body must be of type integer,string: \"boolean\"",
                "spec.size: Invalid value: 11: spec.size in body should be less than or equal to 10",
                "spec.tags: Too many: 4: must have at most 3 items",
                "spec.tags[2]: Duplicate value: \"a\"",
            ]
        );
    }

    #[test]
    fn validate_required_and_types() {
        let causes = validate(&json!({"spec": {"name": 5}}), &widget_schema());
        let shown: Vec<String> = causes.iter().map(Cause::display).collect();
        assert_eq!(
            shown,
            vec![
                "spec.size: Required value",
                "spec.name: Invalid value: \"integer\": spec.name in body must be of type string: \"integer\"",
            ]
        );
        assert_eq!(causes[0].reason, "FieldValueRequired");
        assert_eq!(causes[1].reason, "FieldValueTypeInvalid");
    }

    #[test]
    fn combinators() {
        let s = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                       "oneOf": [{"required": ["a"]}, {"required": ["b"]}]});
        assert!(validate(&json!({"a": "x"}), &s).is_empty());
        let both = validate(&json!({"a": "x", "b": "y"}), &s);
        assert_eq!(
            both[0].display(),
            "Invalid value: \"object\": body in body must validate one and only one schema (oneOf)"
        );
    }
}
