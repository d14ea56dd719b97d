//! ClusterClass variables: the values a Cluster sets
//! (`spec.topology.variables`) defaulted from the class's schemas, the
//! built-in variables, and the two ways a patch reads them (a variable path,
//! `{{ .path }}` in a template). Source: CAPI `internal/topology/variables`
//! and `exp/runtime/topologymutation` (variable paths), ClusterClass docs
//! ("Writing a ClusterClass", "Builtin variables").

use serde_json::{Map, Value};

use super::TopologyError;
use crate::crds::clusterclass::{ClusterClassVariable, ClusterVariable};

/// The structural default of `schema` applied to `value`: a missing value
/// takes the schema's `default`; an object's missing properties take theirs
/// (recursively); list items are defaulted by `items`. Returns `None` when
/// the value is missing and the schema has no default.
pub fn apply_defaults(schema: &Value, value: Option<Value>) -> Option<Value> {
    let mut value = value.or_else(|| schema.get("default").cloned())?;
    match &mut value {
        Value::Object(map) => {
            if let Some(Value::Object(props)) = schema.get("properties") {
                for (k, s) in props {
                    let current = map.remove(k);
                    if let Some(v) = apply_defaults(s, current) {
                        map.insert(k.clone(), v);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(s) = schema.get("items") {
                for item in items.iter_mut() {
                    if let Some(v) = apply_defaults(s, Some(item.take())) {
                        *item = v;
                    }
                }
            }
        }
        _ => {}
    }
    Some(value)
}

/// The variables of a Cluster: every class variable with the Cluster's value
/// or its schema default, plus `builtin` (CAPI's `builtin.*` object).
///
/// # Errors
/// [`TopologyError::UnknownVariable`] for a value of a variable the class
/// does not define; [`TopologyError::MissingVariable`] for a required
/// variable without value and default.
pub fn resolve(
    class: &[ClusterClassVariable],
    set: &[ClusterVariable],
    builtin: Value,
) -> Result<Map<String, Value>, TopologyError> {
    if let Some(v) = set.iter().find(|v| !class.iter().any(|c| c.name == v.name)) {
        return Err(TopologyError::UnknownVariable(v.name.clone()));
    }
    let mut out = Map::new();
    for c in class {
        let given = set
            .iter()
            .find(|v| v.name == c.name)
            .map(|v| v.value.0.clone());
        let schema = Value::Object(c.schema.open_api_v3_schema.0.clone());
        match apply_defaults(&schema, given) {
            Some(v) => {
                out.insert(c.name.clone(), v);
            }
            None if c.required == Some(true) => {
                return Err(TopologyError::MissingVariable(c.name.clone()));
            }
            None => {}
        }
    }
    out.insert("builtin".into(), builtin);
    Ok(out)
}

/// The value at a variable path: `name`, `name.field.sub`, `name[2].field`.
pub fn lookup<'a>(vars: &'a Map<String, Value>, path: &str) -> Option<&'a Value> {
    let mut segments = path.split('.');
    let first = segments.next()?;
    let (name, first_index) = split_index(first)?;
    let mut cur = index_into(vars.get(name)?, first_index)?;
    for seg in segments {
        let (field, idx) = split_index(seg)?;
        cur = index_into(cur.get(field)?, idx)?;
    }
    Some(cur)
}

/// `field[3]` → (`field`, Some(3)); `field` → (`field`, None).
fn split_index(seg: &str) -> Option<(&str, Option<usize>)> {
    match seg.split_once('[') {
        None => Some((seg, None)),
        Some((field, rest)) => {
            let n = rest.strip_suffix(']')?.parse().ok()?;
            Some((field, Some(n)))
        }
    }
}

fn index_into(v: &Value, idx: Option<usize>) -> Option<&Value> {
    match idx {
        None => Some(v),
        Some(i) => v.as_array()?.get(i),
    }
}

/// Renders a patch's `valueFrom.template` and parses the result as YAML.
/// Only `{{ .path }}` actions are understood (the value at the variable
/// path; strings as they are, other values as JSON); any other Go template
/// action is refused.
///
/// # Errors
/// [`TopologyError::Template`] naming the action or path at fault, or the
/// YAML parse error.
pub fn render_template(text: &str, vars: &Map<String, Value>) -> Result<Value, TopologyError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or_else(|| TopologyError::Template("unterminated {{".into()))?;
        let action = after[..end].trim();
        let path = action.strip_prefix('.').ok_or_else(|| {
            TopologyError::Template(format!(
                "{{{{ {action} }}}}: only {{{{ .variable.path }}}} is supported"
            ))
        })?;
        let value = lookup(vars, path).ok_or_else(|| {
            TopologyError::Template(format!("{{{{ .{path} }}}}: no such variable"))
        })?;
        match value {
            Value::String(s) => out.push_str(s),
            other => out.push_str(&other.to_string()),
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    serde_saphyr::from_str::<Value>(&out)
        .map_err(|e| TopologyError::Template(format!("the rendered YAML does not parse: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::clusterclass::VariableSchema;
    use crate::crds::meta::{AnyValue, Opaque};
    use serde_json::json;

    fn class_var(name: &str, required: bool, schema: Value) -> ClusterClassVariable {
        let Value::Object(m) = schema else {
            panic!("schema must be an object")
        };
        ClusterClassVariable {
            name: name.into(),
            required: Some(required),
            schema: VariableSchema {
                open_api_v3_schema: Opaque(m),
            },
        }
    }

    fn set(name: &str, value: Value) -> ClusterVariable {
        ClusterVariable {
            name: name.into(),
            value: AnyValue(value),
        }
    }

    #[test]
    fn defaults_fill_objects_and_list_items() {
        let schema = json!({
            "type": "object", "default": {},
            "properties": {
                "a": {"type": "integer", "default": 1},
                "b": {"type": "array", "items": {"type": "object", "properties": {
                    "c": {"type": "boolean", "default": true}}}}
            }
        });
        assert_eq!(apply_defaults(&schema, None), Some(json!({"a": 1})));
        assert_eq!(
            apply_defaults(&schema, Some(json!({"a": 5, "b": [{}, {"c": false}]}))),
            Some(json!({"a": 5, "b": [{"c": true}, {"c": false}]}))
        );
        assert_eq!(apply_defaults(&json!({"type": "string"}), None), None);
    }

    #[test]
    fn resolve_defaults_requires_and_refuses_unknown() {
        let class = vec![
            class_var("need", true, json!({"type": "string"})),
            class_var("opt", false, json!({"type": "integer", "default": 3})),
        ];
        let vars = resolve(&class, &[set("need", json!("x"))], json!({"cluster": {}})).unwrap();
        assert_eq!(vars["need"], "x");
        assert_eq!(vars["opt"], 3);
        assert!(vars.contains_key("builtin"));
        assert_eq!(
            resolve(&class, &[], Value::Null).unwrap_err().to_string(),
            TopologyError::MissingVariable("need".into()).to_string()
        );
        assert!(matches!(
            resolve(&class, &[set("need", json!("x")), set("typo", json!(1))], Value::Null),
            Err(TopologyError::UnknownVariable(n)) if n == "typo"
        ));
    }

    #[test]
    fn lookup_paths_and_templates() {
        let mut vars = Map::new();
        vars.insert("ep".into(), json!({"host": "10.0.0.5", "port": 6443}));
        vars.insert("list".into(), json!([{"n": "a"}, {"n": "b"}]));
        assert_eq!(lookup(&vars, "ep.port"), Some(&json!(6443)));
        assert_eq!(lookup(&vars, "list[1].n"), Some(&json!("b")));
        assert_eq!(lookup(&vars, "list[2].n"), None);
        assert_eq!(lookup(&vars, "nope"), None);
        let v = render_template("a: \"{{ .ep.host }}\"\nb: {{.ep.port}}\n", &vars).unwrap();
        assert_eq!(v, json!({"a": "10.0.0.5", "b": 6443}));
        assert!(render_template("{{ if .ep }}x{{ end }}", &vars).is_err());
        assert!(render_template("{{ .ep.nope }}", &vars).is_err());
    }
}
