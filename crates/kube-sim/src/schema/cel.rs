//! CEL `x-kubernetes-validations` of a CRD version, compiled once with `kube_cel` and
//! evaluated on create and update (transition rules see `oldSelf` on update).
//!
//! Rules `kube_cel` cannot compile or evaluate (unsupported macros or functions) are
//! skipped with a log line instead of refusing every object; kube-apiserver would have
//! refused the CRD instead. Evaluation errors of supported rules answer `422` as the
//! apiserver does.

use crate::api_error::Cause;
use crate::json::{invalid_value, type_name};
use kube_cel::{CompiledSchema, ErrorKind, compile_schema};
use serde_json::Value;

/// Compiled CEL rules of one schema.
pub struct CelRules {
    compiled: CompiledSchema,
}

impl std::fmt::Debug for CelRules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CelRules").finish_non_exhaustive()
    }
}

fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(m) => m.contains_key("x-kubernetes-validations") || m.values().any(has_rules),
        Value::Array(a) => a.iter().any(has_rules),
        _ => false,
    }
}

impl CelRules {
    /// Compiles the rules of a schema; `None` when the schema has none.
    pub fn compile(schema: &Value) -> Option<CelRules> {
        if !has_rules(schema) {
            return None;
        }
        Some(CelRules {
            compiled: compile_schema(schema),
        })
    }

    /// Evaluates the rules on `object` (and `old` for transition rules) and returns the
    /// failures as `422` causes.
    pub fn validate(&self, object: &Value, old: Option<&Value>) -> Vec<Cause> {
        let Err(errors) = kube_cel::validate_compiled(&self.compiled, object, old) else {
            return Vec::new();
        };
        let mut causes = Vec::new();
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
            let reason = e
                .reason
                .clone()
                .unwrap_or_else(|| "FieldValueInvalid".to_string());
            let value = lookup(object, &e.field_path);
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
            causes.push(Cause::new(&reason, e.field_path.clone(), message));
        }
        causes
    }
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
