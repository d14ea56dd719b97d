//! CEL `x-kubernetes-validations` of a CRD version, compiled once with `kube_cel` and
//! evaluated on create and update (transition rules see `oldSelf` on update).
//!
//! Rules `kube_cel` cannot compile or evaluate (unsupported macros or functions) are
//! skipped with a log line instead of refusing every object; kube-apiserver would have
//! refused the CRD instead. Evaluation errors of supported rules answer `422` as the
//! apiserver does.
//!
//! The rules are compiled per top-level field (`spec`, `status`, …), and an update
//! evaluates only the fields it changed: kube-apiserver's validation ratcheting
//! (on by default since 1.30) drops the errors of a value an update leaves unchanged,
//! so evaluating them cannot change the answer. Transition rules (`oldSelf`) are
//! never ratcheted, and a field holding one is evaluated on every update. Rules at the
//! schema's root see the whole object: with them, the object is one part. Skipping
//! matters for speed: `kube_cel` copies the object and converts each subtree once per
//! schema level, and most updates (status, finalizers, annotations) leave `spec`
//! alone.

use crate::api_error::Cause;
use crate::json::{invalid_value, type_name};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use serde_json::Value;

/// Compiled CEL rules of one schema.
pub struct CelRules {
    parts: Vec<Part>,
}

/// The rules of one top-level field, or of the whole object (rules at the root).
struct Part {
    /// The top-level field; `None`: the whole object.
    field: Option<String>,
    compiled: CompiledSchema,
    /// Whether a rule in the part reads `oldSelf` (a transition rule).
    transition: bool,
}

impl std::fmt::Debug for CelRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelRules")
            .field(
                "parts",
                &self
                    .parts
                    .iter()
                    .map(|p| p.field.as_deref().unwrap_or("<root>"))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Whether `schema` holds a rule (an `x-kubernetes-validations` entry) for
/// which `pred` holds, at any depth.
fn any_rule(schema: &Value, pred: &dyn Fn(&Value) -> bool) -> bool {
    match schema {
        Value::Object(m) => {
            m.get("x-kubernetes-validations")
                .and_then(Value::as_array)
                .is_some_and(|rules| rules.iter().any(pred))
                || m.values().any(|v| any_rule(v, pred))
        }
        Value::Array(a) => a.iter().any(|v| any_rule(v, pred)),
        _ => false,
    }
}

fn has_rules(schema: &Value) -> bool {
    any_rule(schema, &|_| true)
}

/// Whether a rule in `schema` reads `oldSelf` (a transition rule).
fn has_transition_rule(schema: &Value) -> bool {
    any_rule(schema, &|r| {
        r.get("rule")
            .and_then(Value::as_str)
            .is_some_and(|t| t.contains("oldSelf"))
    })
}

impl CelRules {
    /// Compiles the rules of a schema; `None` when the schema has none.
    pub fn compile(schema: &Value) -> Option<CelRules> {
        if !has_rules(schema) {
            return None;
        }
        let at_root = schema.get("x-kubernetes-validations").is_some();
        let fields = schema.get("properties").and_then(Value::as_object);
        let parts = match fields {
            Some(fields) if !at_root => fields
                .iter()
                .filter(|(_, s)| has_rules(s))
                .map(|(name, s)| Part {
                    field: Some(name.clone()),
                    compiled: compile_schema(s),
                    transition: has_transition_rule(s),
                })
                .collect(),
            _ => vec![Part {
                field: None,
                compiled: compile_schema(schema),
                transition: has_transition_rule(schema),
            }],
        };
        Some(CelRules { parts })
    }

    /// Evaluates the rules on `object` (and `old` for transition rules) and returns the
    /// failures as `422` causes. On an update, a top-level field equal in `object` and
    /// `old` is not evaluated unless it holds a transition rule (see the module
    /// documentation).
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let mut causes = Vec::new();
        for part in &self.parts {
            let (new_part, old_part) = match &part.field {
                None => (Some(object), old),
                Some(f) => (object.get(f), old.and_then(|o| o.get(f))),
            };
            // An absent field has nothing for its rules to see.
            let Some(new_part) = new_part else {
                continue;
            };
            if old.is_some() && old_part == Some(new_part) && !part.transition {
                continue;
            }
            let Err(errors) = kube_cel::validate_compiled(&part.compiled, new_part, old_part)
            else {
                continue;
            };
            for e in errors.iter() {
                match e.kind {
                    ErrorKind::ValidationFailure
                    | ErrorKind::EvaluationError
                    | ErrorKind::InvalidResult => {}
                    _ => {
                        tracing::debug!(rule = %e.rule, message = %e.message, "CEL rule skipped");
                        continue;
                    }
                }
                let path = match &part.field {
                    None => e.field_path.clone(),
                    Some(f) if e.field_path.is_empty() => f.clone(),
                    // `.name` (a rule's `fieldPath`) or `[0]`
                    Some(f) if e.field_path.starts_with(['.', '[']) => {
                        format!("{f}{}", e.field_path)
                    }
                    Some(f) => format!("{f}.{}", e.field_path),
                };
                causes.push(cause(object, path, e));
            }
        }
        causes
    }
}

/// The `422` cause of a failed rule at `path` (from the object's root).
fn cause(object: &Value, path: String, e: &kube_cel::ValidationError) -> Cause {
    let reason = e
        .reason
        .clone()
        .unwrap_or_else(|| "FieldValueInvalid".to_string());
    let value = lookup(object, &path);
    let message = match reason.as_str() {
        "FieldValueForbidden" => format!("Forbidden: {}", e.message),
        "FieldValueRequired" => format!("Required value: {}", e.message),
        "FieldValueDuplicate" => format!("Duplicate value: {:?}", e.message),
        _ => {
            let shown = match value {
                Some(v @ (Value::Object(_) | Value::Array(_))) => {
                    format!("\"{}\"", type_name(v))
                }
                Some(v) => invalid_value(v),
                None => "\"object\"".to_string(),
            };
            format!("Invalid value: {shown}: {}", e.message)
        }
    };
    Cause::new(&reason, path, message)
}

/// Resolves a `kube_cel` field path (`spec.items[0].name`) in an object.
fn lookup<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    if path.is_empty() {
        return Some(cur);
    }
    for part in path.split('.') {
        let (field, indexes) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        for idx in indexes.split('[').filter(|s| !s.is_empty()) {
            let idx = idx.trim_end_matches(']');
            cur = match idx.parse::<usize>() {
                Ok(i) => cur.get(i)?,
                Err(_) => cur.get(idx.trim_matches('"'))?,
            };
        }
    }
    Some(cur)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_failed_rule_with_field_and_message() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {
                "type": "object",
                "properties": {"min": {"type": "integer"}, "max": {"type": "integer"}},
                "x-kubernetes-validations": [{"rule": "self.min <= self.max", "message": "min must not exceed max"}]
            }}
        });
        let rules = CelRules::compile(&schema).expect("has rules");
        assert!(
            rules
                .validate(&json!({"spec": {"min": 1, "max": 2}}), None)
                .is_empty()
        );
        let causes = rules.validate(&json!({"spec": {"min": 3, "max": 2}}), None);
        assert_eq!(
            causes,
            vec![Cause::new(
                "FieldValueInvalid",
                "spec",
                "Invalid value: \"object\": min must not exceed max"
            )]
        );
    }

    fn min_max_schema(extra_rule: Option<&str>) -> Value {
        let mut rules =
            vec![json!({"rule": "self.min <= self.max", "message": "min must not exceed max"})];
        if let Some(r) = extra_rule {
            rules.push(json!({"rule": r, "message": "transition"}));
        }
        json!({
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "properties": {
                        "min": {"type": "integer"},
                        "max": {"type": "integer"},
                        "items": {"type": "array", "items": {
                            "type": "object",
                            "properties": {"name": {"type": "string"}},
                            "x-kubernetes-validations": [{"rule": "self.name != 'bad'", "message": "bad name"}]
                        }}
                    },
                    "x-kubernetes-validations": rules
                },
                "status": {"type": "object", "properties": {"n": {"type": "integer"}}}
            }
        })
    }

    #[test]
    fn an_update_leaving_a_field_unchanged_does_not_evaluate_its_rules() {
        let rules = CelRules::compile(&min_max_schema(None)).expect("has rules");
        let invalid = json!({"spec": {"min": 3, "max": 2}, "status": {"n": 1}});
        // Created invalid (say, before the rule existed): a status update ratchets.
        let status_update = json!({"spec": {"min": 3, "max": 2}, "status": {"n": 2}});
        assert!(rules.validate(&status_update, Some(&invalid)).is_empty());
        // A create, and an update that changes spec, are checked.
        assert_eq!(rules.validate(&invalid, None).len(), 1);
        let spec_update = json!({"spec": {"min": 4, "max": 2}, "status": {"n": 1}});
        assert_eq!(rules.validate(&spec_update, Some(&invalid)).len(), 1);
    }

    #[test]
    fn a_field_holding_a_transition_rule_is_evaluated_on_every_update() {
        let rules = CelRules::compile(&min_max_schema(Some("self.max >= oldSelf.max + 1")))
            .expect("has rules");
        let old = json!({"spec": {"min": 1, "max": 2}, "status": {"n": 1}});
        let unchanged_spec = json!({"spec": {"min": 1, "max": 2}, "status": {"n": 2}});
        let causes = rules.validate(&unchanged_spec, Some(&old));
        assert_eq!(causes.len(), 1, "{causes:?}");
        assert_eq!(causes[0].field, "spec");
    }

    #[test]
    fn causes_name_the_path_from_the_object_root() {
        let rules = CelRules::compile(&min_max_schema(None)).expect("has rules");
        let obj = json!({"spec": {"min": 1, "max": 2, "items": [{"name": "ok"}, {"name": "bad"}]}});
        let causes = rules.validate(&obj, None);
        assert_eq!(
            causes,
            vec![Cause::new(
                "FieldValueInvalid",
                "spec.items[1]",
                "Invalid value: \"object\": bad name"
            )]
        );
    }

    #[test]
    fn rules_at_the_root_see_the_whole_object() {
        let schema = json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "integer"}}}},
            "x-kubernetes-validations": [{"rule": "self.spec.a > 0", "message": "a must be positive"}]
        });
        let rules = CelRules::compile(&schema).expect("has rules");
        let bad = json!({"spec": {"a": 0}});
        assert_eq!(rules.validate(&bad, None).len(), 1);
        // Any change elsewhere in the object evaluates them again.
        let bad_too = json!({"spec": {"a": 0}, "status": {}});
        assert_eq!(rules.validate(&bad_too, Some(&bad)).len(), 1);
        assert!(rules.validate(&json!({"spec": {"a": 1}}), None).is_empty());
    }

    #[test]
    fn schema_without_rules_compiles_to_nothing() {
        assert!(CelRules::compile(&json!({"type": "object"})).is_none());
    }

    #[test]
    fn lookup_follows_fields_and_indexes() {
        let v = json!({"spec": {"items": [{"name": "a"}, {"name": "b"}]}});
        assert_eq!(lookup(&v, "spec.items[1].name"), Some(&json!("b")));
        assert_eq!(lookup(&v, "spec.nope"), None);
    }
}
