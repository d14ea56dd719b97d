//! `metadata` (ObjectMeta): pruning to the known fields and the checks kube-apiserver's
//! `ValidateObjectMeta` makes on names, labels, annotations and owner references.

use crate::api_error::Cause;
use serde_json::Value;

const META_FIELDS: [&str; 16] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
    "clusterName",
];

const OWNER_REF_FIELDS: [&str; 6] = [
    "apiVersion",
    "kind",
    "name",
    "uid",
    "controller",
    "blockOwnerDeletion",
];

const MANAGED_FIELDS_FIELDS: [&str; 7] = [
    "manager",
    "operation",
    "apiVersion",
    "time",
    "fieldsType",
    "fieldsV1",
    "subresource",
];

fn prune_list(v: Option<&mut Value>, known: &[&str], path: &str, unknown: &mut Vec<String>) {
    if let Some(Value::Array(items)) = v {
        for (i, item) in items.iter_mut().enumerate() {
            if let Value::Object(m) = item {
                let extra: Vec<String> = m
                    .keys()
                    .filter(|k| !known.contains(&k.as_str()))
                    .cloned()
                    .collect();
                for k in extra {
                    m.remove(&k);
                    unknown.push(format!("{path}[{i}].{k}"));
                }
            }
        }
    }
}

/// Drops unknown ObjectMeta fields (and `null`s), recording their paths.
pub fn prune(meta: &mut Value, path: &str, unknown: &mut Vec<String>) {
    let Value::Object(m) = meta else {
        return;
    };
    let keys: Vec<String> = m.keys().cloned().collect();
    for k in keys {
        if m.get(&k).is_some_and(Value::is_null) {
            m.remove(&k);
        } else if !META_FIELDS.contains(&k.as_str()) {
            m.remove(&k);
            unknown.push(format!("{path}.{k}"));
        }
    }
    prune_list(
        m.get_mut("ownerReferences"),
        &OWNER_REF_FIELDS,
        &format!("{path}.ownerReferences"),
        unknown,
    );
    prune_list(
        m.get_mut("managedFields"),
        &MANAGED_FIELDS_FIELDS,
        &format!("{path}.managedFields"),
        unknown,
    );
    m.remove("clusterName");
    m.remove("selfLink");
}

use crate::validation::{self, NameRule};

/// `field.Invalid` causes for `value` at `field`, one per message.
fn invalid(field: &str, value: &str, msgs: Vec<String>) -> impl Iterator<Item = Cause> {
    let field = field.to_string();
    let value = value.to_string();
    msgs.into_iter().map(move |m| {
        Cause::new(
            "FieldValueInvalid",
            field.clone(),
            format!("Invalid value: {value:?}: {m}"),
        )
    })
}

/// Checks `metadata.generateName` (when set) and `metadata.name` of a new object the way
/// `ValidateObjectMeta` and the path-segment check of `BeforeCreate` do: one cause per
/// message, the kind's own rule first.
pub fn check_name(name: &str, generate_name: &str, rule: NameRule) -> Vec<Cause> {
    let mut causes = Vec::new();
    if !generate_name.is_empty() {
        causes.extend(invalid(
            "metadata.generateName",
            generate_name,
            validation::object_name(rule, generate_name, true),
        ));
    }
    causes.extend(invalid(
        "metadata.name",
        name,
        validation::object_name(rule, name, false),
    ));
    causes
}

/// Validates labels, annotations and owner references of an object's metadata.
pub fn validate(obj: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return causes;
    };
    if let Some(labels) = meta.get("labels").and_then(Value::as_object) {
        let mut sorted: Vec<(&String, &Value)> = labels.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in sorted {
            causes.extend(invalid("metadata.labels", k, validation::qualified_name(k)));
            match v.as_str() {
                Some(s) => causes.extend(invalid("metadata.labels", s, validation::label_value(s))),
                None => causes.push(Cause::new(
                    "FieldValueTypeInvalid",
                    format!("metadata.labels.{k}"),
                    "Invalid value: label values must be strings",
                )),
            }
        }
    }
    if let Some(ann) = meta.get("annotations").and_then(Value::as_object) {
        let mut total = 0usize;
        let mut sorted: Vec<(&String, &Value)> = ann.iter().collect();
        sorted.sort_by(|a, b| a.0.cmp(b.0));
        for (k, v) in sorted {
            causes.extend(invalid(
                "metadata.annotations",
                k,
                validation::qualified_name(&k.to_lowercase()),
            ));
            total += k.len() + v.as_str().map(str::len).unwrap_or(0);
        }
        if total > 256 * 1024 {
            causes.push(Cause::new(
                "FieldValueTooLong",
                "metadata.annotations",
                "Too long: may not be more than 262144 bytes",
            ));
        }
    }
    if let Some(refs) = meta.get("ownerReferences").and_then(Value::as_array) {
        let mut controllers = Vec::new();
        for r in refs {
            for (field, what) in [
                ("apiVersion", "version"),
                ("kind", "kind"),
                ("name", "name"),
                ("uid", "uid"),
            ] {
                if r.get(field)
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .is_empty()
                {
                    causes.push(Cause::new(
                        "FieldValueInvalid",
                        format!("metadata.ownerReferences.{field}"),
                        format!("Invalid value: \"\": {what} must not be empty"),
                    ));
                }
            }
            if r.get("controller").and_then(Value::as_bool) == Some(true) {
                controllers.push(format!(
                    "{}/{}",
                    r.get("kind").and_then(Value::as_str).unwrap_or(""),
                    r.get("name").and_then(Value::as_str).unwrap_or("")
                ));
            }
        }
        if controllers.len() > 1 {
            causes.push(Cause::new(
                "FieldValueInvalid",
                "metadata.ownerReferences",
                format!(
                    "Invalid value: \"array\": Only one reference can have Controller set to true. Found \"true\" in references for {}",
                    controllers.join(" and ")
                ),
            ));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names() {
        assert!(check_name("a.b-c", "", NameRule::Subdomain).is_empty());
        assert_eq!(
            check_name("a.b", "", NameRule::Label)[0].display(),
            "metadata.name: Invalid value: \"a.b\": must not contain dots"
        );
        let c = check_name("Bad_Name", "", NameRule::Subdomain);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].field, "metadata.name");
        assert!(
            c[0].message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
        let g = check_name("x-abcde", "X-", NameRule::Subdomain);
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].field, "metadata.generateName");
    }

    #[test]
    fn labels_and_owner_refs() {
        let obj = json!({"metadata": {
            "labels": {"app": "ok", "example.com/x": "bad value!", "-x": "v"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "controller": true},
                {"apiVersion": "v1", "kind": "B", "name": "b", "uid": "", "controller": true}
            ]
        }});
        let shown: Vec<String> = validate(&obj).iter().map(Cause::display).collect();
        assert_eq!(shown.len(), 4, "{shown:?}");
        assert!(
            shown[0].starts_with("metadata.labels: Invalid value: \"-x\": name part must consist")
        );
        assert!(
            shown[1].starts_with("metadata.labels: Invalid value: \"bad value!\": a valid label")
        );
        assert_eq!(
            shown[2],
            "metadata.ownerReferences.uid: Invalid value: \"\": uid must not be empty"
        );
        assert!(shown[3].ends_with("Found \"true\" in references for A/a and B/b"));
    }

    #[test]
    fn prune_drops_unknown_meta_fields() {
        let mut m = json!({"name": "x", "foo": 1, "labels": null,
            "ownerReferences": [{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1", "zzz": 2}]});
        let mut unknown = Vec::new();
        prune(&mut m, "metadata", &mut unknown);
        assert_eq!(
            m,
            json!({"name": "x", "ownerReferences": [{"apiVersion": "v1", "kind": "A", "name": "a", "uid": "1"}]})
        );
        assert_eq!(
            unknown,
            vec!["metadata.foo", "metadata.ownerReferences[0].zzz"]
        );
    }
}
