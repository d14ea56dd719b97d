//! The conversion data annotation ([`super::CONVERSION_DATA_ANNOTATION`])
//! and the three-way merge that restores what it keeps.

use serde_json::{Map, Value};

use super::{Body, CONVERSION_DATA_ANNOTATION, ConversionError};

/// Path of the annotation in error messages.
pub(super) const PATH: &str =
    "metadata.annotations[infrastructure.cluster.x-k8s.io/conversion-data]";

/// What the annotation holds: the object in the other version.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Kept {
    /// `apiVersion` of the kept object.
    pub(super) api_version: String,
    /// `kind` of the kept object.
    pub(super) kind: String,
    /// Its `spec` and `status`.
    pub(super) body: Body,
}

/// Removes the annotation from `metadata` (and `annotations` when it was
/// the only one) and reads it.
///
/// # Errors
/// [`ConversionError`] at [`PATH`] when the value is not the JSON object
/// [`put`] writes.
pub(super) fn take(metadata: &mut Map<String, Value>) -> Result<Option<Kept>, ConversionError> {
    let Some(annotations) = metadata
        .get_mut("annotations")
        .and_then(Value::as_object_mut)
    else {
        return Ok(None);
    };
    let Some(raw) = annotations.remove(CONVERSION_DATA_ANNOTATION) else {
        return Ok(None);
    };
    if annotations.is_empty() {
        metadata.remove("annotations");
    }
    let bad = |why: &str| {
        ConversionError::new(
            PATH,
            format!("unreadable ({why}); remove it or restore its value"),
        )
    };
    let text = raw.as_str().ok_or_else(|| bad("not a string"))?;
    let Ok(Value::Object(mut data)) = serde_json::from_str::<Value>(text) else {
        return Err(bad("not a JSON object"));
    };
    let mut string = |key: &str| match data.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(bad(&format!("no {key}"))),
    };
    let api_version = string("apiVersion")?;
    let kind = string("kind")?;
    let body = data
        .into_iter()
        .filter(|(k, _)| k == "spec" || k == "status")
        .collect();
    Ok(Some(Kept {
        api_version,
        kind,
        body,
    }))
}

/// Writes `body` of an `api_version` `kind` into the annotation of
/// `metadata`.
pub(super) fn put(metadata: &mut Map<String, Value>, api_version: &str, kind: &str, body: &Body) {
    let mut data = Map::new();
    data.insert("apiVersion".into(), Value::from(api_version));
    data.insert("kind".into(), Value::from(kind));
    data.extend(body.clone());
    let annotations = metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()));
    if !annotations.is_object() {
        *annotations = Value::Object(Map::new());
    }
    if let Value::Object(a) = annotations {
        a.insert(
            CONVERSION_DATA_ANNOTATION.into(),
            Value::String(Value::Object(data).to_string()),
        );
    }
}

/// [`merge`] of whole bodies.
pub(super) fn merge_bodies(bases: &[Body], ours: &Body, theirs: &Body) -> Body {
    let bases: Vec<Value> = bases.iter().cloned().map(Value::Object).collect();
    let base_refs: Vec<Option<&Value>> = bases.iter().map(Some).collect();
    match merge(
        &base_refs,
        Some(&Value::Object(ours.clone())),
        Some(&Value::Object(theirs.clone())),
    ) {
        Some(Value::Object(m)) => m,
        _ => theirs.clone(),
    }
}

/// Keys list elements are matched by when every element of every version
/// of the list carries one, unique within its list (the list-map keys of
/// both versions' schemas).
const LIST_KEYS: [&str; 5] = ["name", "type", "net", "zone", "disk"];

/// Three-way merge of one value (`None` = absent). Where `theirs` equals
/// one of the `bases` it was not changed, and `ours` is taken; otherwise
/// objects are merged key by key, lists of keyed objects element by
/// element (elements only `ours` has and no base had are kept), and
/// anything else is `theirs`.
pub(super) fn merge(
    bases: &[Option<&Value>],
    ours: Option<&Value>,
    theirs: Option<&Value>,
) -> Option<Value> {
    if bases.contains(&theirs) {
        return ours.cloned();
    }
    match (ours, theirs) {
        (Some(Value::Object(o)), Some(Value::Object(t))) => {
            let mut out = Map::new();
            let keys = t.keys().chain(o.keys().filter(|k| !t.contains_key(*k)));
            for key in keys {
                let sub: Vec<Option<&Value>> =
                    bases.iter().map(|b| b.and_then(|b| b.get(key))).collect();
                if let Some(v) = merge(&sub, o.get(key), t.get(key)) {
                    out.insert(key.clone(), v);
                }
            }
            Some(Value::Object(out))
        }
        (Some(Value::Array(o)), Some(Value::Array(t))) => {
            let base_lists: Vec<&Vec<Value>> = bases
                .iter()
                .flatten()
                .filter_map(|b| b.as_array())
                .collect();
            let Some(key) = list_key(o, t, &base_lists) else {
                return theirs.cloned();
            };
            let find = |list: &[Value], k: &str| -> Option<usize> {
                list.iter()
                    .position(|e| e.get(key).and_then(Value::as_str) == Some(k))
            };
            let mut out = Vec::new();
            for el in t {
                let k = el.get(key).and_then(Value::as_str).unwrap_or_default();
                let sub: Vec<Option<&Value>> = bases
                    .iter()
                    .map(|b| {
                        b.and_then(Value::as_array)
                            .and_then(|l| find(l, k).map(|i| &l[i]))
                    })
                    .collect();
                let mine = find(o, k).map(|i| &o[i]);
                if let Some(v) = merge(&sub, mine, Some(el)) {
                    out.push(v);
                }
            }
            for el in o {
                let k = el.get(key).and_then(Value::as_str).unwrap_or_default();
                let anywhere =
                    find(t, k).is_some() || base_lists.iter().any(|l| find(l, k).is_some());
                if !anywhere {
                    out.push(el.clone());
                }
            }
            Some(Value::Array(out))
        }
        _ => theirs.cloned(),
    }
}

fn list_key(ours: &[Value], theirs: &[Value], bases: &[&Vec<Value>]) -> Option<&'static str> {
    LIST_KEYS.into_iter().find(|key| {
        std::iter::once(ours)
            .chain(std::iter::once(theirs))
            .chain(bases.iter().map(|b| b.as_slice()))
            .all(|list| {
                let mut seen = std::collections::BTreeSet::new();
                list.iter().all(|e| {
                    e.get(*key)
                        .and_then(Value::as_str)
                        .is_some_and(|k| seen.insert(k))
                })
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(bases: &[Value], ours: Value, theirs: Value) -> Value {
        let b: Vec<Option<&Value>> = bases.iter().map(Some).collect();
        merge(&b, Some(&ours), Some(&theirs)).unwrap()
    }

    #[test]
    fn unchanged_gives_ours_back() {
        let base = json!({"a": 1});
        assert_eq!(
            m(
                std::slice::from_ref(&base),
                json!({"a": 1, "x": [1, 2]}),
                base.clone()
            ),
            json!({"a": 1, "x": [1, 2]})
        );
    }

    #[test]
    fn a_change_wins_and_what_only_ours_has_stays() {
        // `x` cannot be expressed in the other version (absent in base and theirs);
        // `a` was changed there.
        assert_eq!(
            m(&[json!({"a": 1})], json!({"a": 1, "x": 5}), json!({"a": 2})),
            json!({"a": 2, "x": 5})
        );
        // `a` removed there: removed.
        assert_eq!(
            m(
                &[json!({"a": 1, "b": 1})],
                json!({"a": 1, "b": 1, "x": 5}),
                json!({"b": 1})
            ),
            json!({"b": 1, "x": 5})
        );
        // a value the other version could not hold (base lacks it) replaced there.
        assert_eq!(
            m(
                &[json!({})],
                json!({"m": 5_000_000_000_u64}),
                json!({"m": 7})
            ),
            json!({"m": 7})
        );
    }

    #[test]
    fn any_base_counts_as_unchanged() {
        assert_eq!(
            m(
                &[json!({"full": null}), json!({"full": true})],
                json!({"n": 1}),
                json!({"full": true})
            ),
            json!({"n": 1})
        );
    }

    #[test]
    fn keyed_lists_merge_element_by_element() {
        let ours =
            json!({"d": [{"name": "net0", "mac": "aa", "vlan": 1}, {"name": "net1", "mac": "bb"}]});
        let base = json!({"d": [{"name": "net0", "vlan": 1}, {"name": "net1"}]});
        // net0's vlan changed, net1 removed, net2 added.
        let theirs = json!({"d": [{"name": "net0", "vlan": 2}, {"name": "net2"}]});
        assert_eq!(
            m(&[base], ours, theirs),
            json!({"d": [{"name": "net0", "mac": "aa", "vlan": 2}, {"name": "net2"}]})
        );
    }

    #[test]
    fn lists_without_unique_keys_are_atomic() {
        let ours = json!({"a": [{"type": "InternalIP", "address": "1"}, {"type": "InternalIP", "address": "2"}]});
        let base = json!({"a": []});
        let theirs = json!({"a": [{"type": "InternalIP", "address": "3"}]});
        assert_eq!(m(&[base], ours, theirs.clone()), theirs);
        assert_eq!(m(&[json!([1])], json!([1, 9]), json!([2])), json!([2]));
    }

    #[test]
    fn take_reads_and_removes_what_put_wrote() {
        let body: Body = json!({"spec": {"a": 1}}).as_object().unwrap().clone();
        let mut meta = json!({"name": "x", "annotations": {"keep": "me"}})
            .as_object()
            .unwrap()
            .clone();
        put(
            &mut meta,
            "infrastructure.cluster.x-k8s.io/v1alpha3",
            "ProxmoxMachine",
            &body,
        );
        assert_eq!(meta["annotations"]["keep"], "me");
        let kept = take(&mut meta).unwrap().unwrap();
        assert_eq!(kept.api_version, "infrastructure.cluster.x-k8s.io/v1alpha3");
        assert_eq!(kept.kind, "ProxmoxMachine");
        assert_eq!(kept.body, body);
        assert_eq!(
            meta,
            json!({"name": "x", "annotations": {"keep": "me"}})
                .as_object()
                .unwrap()
                .clone()
        );

        let mut only = json!({"name": "x"}).as_object().unwrap().clone();
        put(&mut only, "v", "K", &body);
        take(&mut only).unwrap().unwrap();
        assert_eq!(only, json!({"name": "x"}).as_object().unwrap().clone());
    }

    #[test]
    fn an_unreadable_annotation_is_refused_by_name() {
        let mut meta = json!({"annotations": {CONVERSION_DATA_ANNOTATION: "{not json"}})
            .as_object()
            .unwrap()
            .clone();
        let e = take(&mut meta).unwrap_err();
        assert_eq!(e.path, PATH);
        assert!(e.message.contains("not a JSON object"), "{e}");
        let mut meta = json!({"annotations": {CONVERSION_DATA_ANNOTATION: "{\"kind\": \"K\"}"}})
            .as_object()
            .unwrap()
            .clone();
        assert!(
            take(&mut meta)
                .unwrap_err()
                .message
                .contains("no apiVersion")
        );
    }
}
