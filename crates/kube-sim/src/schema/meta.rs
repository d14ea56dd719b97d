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

const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// Whether `s` is an RFC 1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63).
pub fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` is an RFC 1123 subdomain (dot-separated labels, at most 253).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn is_label_value(s: &str) -> bool {
    if s.is_empty() {
        return true;
    }
    let b = s.as_bytes();
    b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

fn qualified_name_errors(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Some(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
    }
    if name.is_empty() {
        return Some("name part must be non-empty".into());
    }
    if name.len() > 63 {
        return Some("name part must be no more than 63 characters".into());
    }
    if !is_label_value(name) {
        return Some(QUALIFIED_NAME_MSG.into());
    }
    None
}

/// How object names are checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain (most kinds).
    Subdomain,
    /// RFC 1123 label (Namespace).
    Label,
}

/// Checks the name against `rule`; returns the cause for `metadata.name`.
pub fn check_name(name: &str, rule: NameRule) -> Option<Cause> {
    let (ok, msg, max) = match rule {
        NameRule::Subdomain => (is_dns_subdomain(name), DNS1123_SUBDOMAIN_MSG, 253),
        NameRule::Label => (is_dns_label(name), DNS1123_LABEL_MSG, 63),
    };
    if ok {
        return None;
    }
    let why = if name.len() > max {
        format!("must be no more than {max} characters")
    } else {
        msg.to_string()
    };
    Some(Cause::new(
        "FieldValueInvalid",
        "metadata.name",
        format!("Invalid value: {name:?}: {why}"),
    ))
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
            if let Some(why) = qualified_name_errors(k) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.labels",
                    format!("Invalid value: {k:?}: {why}"),
                ));
            }
            match v.as_str() {
                Some(s) if is_label_value(s) => {}
                Some(s) => causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.labels",
                    format!("Invalid value: {s:?}: {LABEL_VALUE_MSG}"),
                )),
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
            if let Some(why) = qualified_name_errors(&k.to_lowercase()) {
                causes.push(Cause::new(
                    "FieldValueInvalid",
                    "metadata.annotations",
                    format!("Invalid value: {k:?}: {why}"),
                ));
            }
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
        assert!(check_name("a.b-c", NameRule::Subdomain).is_none());
        assert!(check_name("a.b", NameRule::Label).is_some());
        let c = check_name("Bad_Name", NameRule::Subdomain).expect("invalid");
        assert_eq!(c.field, "metadata.name");
        assert!(
            c.message
                .starts_with("Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain")
        );
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
