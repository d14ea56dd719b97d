//! Schema-aware operations on objects for managed fields: the field set of an object,
//! the comparison of two objects, the server-side-apply merge, and removal of paths.
//!
//! List semantics come from `x-kubernetes-list-type` (`atomic` is the default, `set`,
//! `map` with `x-kubernetes-list-map-keys`); maps are granular unless
//! `x-kubernetes-map-type: atomic`. Without a schema, objects are granular and lists
//! atomic. `metadata` gets ObjectMeta's semantics (`finalizers` a set,
//! `ownerReferences` a map keyed by `uid`).

use super::set::{FieldSet, Path, PathElement, canonical};
use serde_json::{Map, Value, json};
use std::sync::LazyLock;

static META_SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
            "finalizers": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "ownerReferences": {
                "type": "array",
                "items": {"type": "object"},
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["uid"]
            }
        }
    })
});

/// A (possibly absent) schema node.
#[derive(Clone, Copy, Debug)]
pub struct Schema<'a> {
    node: Option<&'a Value>,
    root: bool,
}

/// How a list is merged and owned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListKind {
    /// Replaced as a whole, owned as one leaf.
    Atomic,
    /// Items are scalars identified by value.
    Set,
    /// Items are objects identified by these key fields.
    Map(Vec<String>),
}

impl<'a> Schema<'a> {
    /// The root schema of an object (`metadata` gets ObjectMeta semantics).
    pub fn root(node: Option<&'a Value>) -> Schema<'a> {
        Schema { node, root: true }
    }

    fn at(node: Option<&'a Value>) -> Schema<'a> {
        Schema { node, root: false }
    }

    /// The schema of a field of an object.
    pub fn field(&self, name: &str) -> Schema<'a> {
        if self.root && name == "metadata" {
            return Schema::at(Some(&*META_SCHEMA));
        }
        let Some(n) = self.node else {
            return Schema::at(None);
        };
        if let Some(p) = n.get("properties").and_then(|p| p.get(name)) {
            return Schema::at(Some(p));
        }
        match n.get("additionalProperties") {
            Some(ap @ Value::Object(_)) => Schema::at(Some(ap)),
            _ => Schema::at(None),
        }
    }

    /// The schema of list items.
    pub fn items(&self) -> Schema<'a> {
        Schema::at(self.node.and_then(|n| n.get("items")))
    }

    /// The list semantics of this node.
    pub fn list_kind(&self) -> ListKind {
        let Some(n) = self.node else {
            return ListKind::Atomic;
        };
        match n.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("set") => ListKind::Set,
            Some("map") => ListKind::Map(
                n.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(Value::as_str)
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
            ),
            _ => ListKind::Atomic,
        }
    }

    /// Whether an object node is atomic (`x-kubernetes-map-type: atomic`).
    pub fn atomic_map(&self) -> bool {
        self.node
            .and_then(|n| n.get("x-kubernetes-map-type"))
            .and_then(Value::as_str)
            == Some("atomic")
    }
}

/// The key element of a list-map item.
pub fn key_of(item: &Value, keys: &[String]) -> PathElement {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            m.insert(k.clone(), v.clone());
        }
    }
    PathElement::Key(canonical(&Value::Object(m)))
}

/// The field set of an object as server-side apply computes it for an applied
/// configuration: leaves, list items, atomic nodes and empty maps.
pub fn to_set(v: &Value, s: Schema<'_>) -> FieldSet {
    let mut out = FieldSet::new();
    walk_set(v, s, &mut Vec::new(), &mut out, false);
    out
}

/// Like [`to_set`] but also marks every container node (used for added subtrees when
/// comparing objects, which is how update operations come to own `.` entries).
fn walk_set(v: &Value, s: Schema<'_>, path: &mut Path, out: &mut FieldSet, containers: bool) {
    match v {
        Value::Object(m) if !s.atomic_map() => {
            if (m.is_empty() || containers) && !path.is_empty() {
                out.insert(path);
            }
            for (k, cv) in m {
                path.push(PathElement::Field(k.clone()));
                walk_set(cv, s.field(k), path, out, containers);
                path.pop();
            }
        }
        Value::Array(items) => match s.list_kind() {
            ListKind::Atomic => out.insert(path),
            ListKind::Set => {
                if containers && !path.is_empty() {
                    out.insert(path);
                }
                for it in items {
                    path.push(PathElement::Value(canonical(it)));
                    out.insert(path);
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                if containers && !path.is_empty() {
                    out.insert(path);
                }
                for it in items {
                    path.push(key_of(it, &keys));
                    out.insert(path);
                    if let Value::Object(m) = it {
                        for (k, cv) in m {
                            path.push(PathElement::Field(k.clone()));
                            walk_set(cv, s.items().field(k), path, out, containers);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
        },
        _ => {
            if !path.is_empty() {
                out.insert(path);
            }
        }
    }
}

/// What changed between two objects.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Comparison {
    /// Paths present only in the new object (with all their descendants).
    pub added: FieldSet,
    /// Leaves (or atomic nodes) whose value changed.
    pub modified: FieldSet,
    /// Paths present only in the old object (with all their descendants).
    pub removed: FieldSet,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }
}

/// Compares two objects.
pub fn compare(old: Option<&Value>, new: Option<&Value>, s: Schema<'_>) -> Comparison {
    let mut c = Comparison::default();
    cmp(old, new, s, &mut Vec::new(), &mut c);
    c
}

fn cmp(
    old: Option<&Value>,
    new: Option<&Value>,
    s: Schema<'_>,
    path: &mut Path,
    c: &mut Comparison,
) {
    match (old, new) {
        (None, None) => {}
        (None, Some(n)) => walk_set(n, s, path, &mut c.added, true),
        (Some(o), None) => walk_set(o, s, path, &mut c.removed, true),
        (Some(Value::Object(om)), Some(Value::Object(nm))) if !s.atomic_map() => {
            let mut keys: Vec<&String> = om.keys().chain(nm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                path.push(PathElement::Field(k.clone()));
                cmp(om.get(k), nm.get(k), s.field(k), path, c);
                path.pop();
            }
        }
        (Some(Value::Array(oa)), Some(Value::Array(na))) => match s.list_kind() {
            ListKind::Atomic => {
                if oa != na {
                    c.modified.insert(path);
                }
            }
            ListKind::Set => {
                for it in na.iter().filter(|it| !oa.contains(it)) {
                    path.push(PathElement::Value(canonical(it)));
                    c.added.insert(path);
                    path.pop();
                }
                for it in oa.iter().filter(|it| !na.contains(it)) {
                    path.push(PathElement::Value(canonical(it)));
                    c.removed.insert(path);
                    path.pop();
                }
            }
            ListKind::Map(keys) => {
                let ok: Vec<PathElement> = oa.iter().map(|i| key_of(i, &keys)).collect();
                let nk: Vec<PathElement> = na.iter().map(|i| key_of(i, &keys)).collect();
                for (i, k) in nk.iter().enumerate() {
                    path.push(k.clone());
                    match ok.iter().position(|x| x == k) {
                        Some(j) => cmp_item(&oa[j], &na[i], s.items(), path, c),
                        None => walk_item(&na[i], s.items(), path, &mut c.added),
                    }
                    path.pop();
                }
                for (j, k) in ok.iter().enumerate() {
                    if !nk.contains(k) {
                        path.push(k.clone());
                        walk_item(&oa[j], s.items(), path, &mut c.removed);
                        path.pop();
                    }
                }
            }
        },
        (Some(o), Some(n)) => {
            if o != n {
                c.modified.insert(path);
            }
        }
    }
}

fn walk_item(item: &Value, s: Schema<'_>, path: &mut Path, out: &mut FieldSet) {
    out.insert(path);
    if let Value::Object(m) = item {
        for (k, v) in m {
            path.push(PathElement::Field(k.clone()));
            walk_set(v, s.field(k), path, out, true);
            path.pop();
        }
    }
}

fn cmp_item(o: &Value, n: &Value, s: Schema<'_>, path: &mut Path, c: &mut Comparison) {
    match (o, n) {
        (Value::Object(om), Value::Object(nm)) => {
            let mut keys: Vec<&String> = om.keys().chain(nm.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                path.push(PathElement::Field(k.clone()));
                cmp(om.get(k), nm.get(k), s.field(k), path, c);
                path.pop();
            }
        }
        _ => {
            if o != n {
                c.modified.insert(path);
            }
        }
    }
}

/// Merges an applied configuration into the live object (server-side apply): granular maps
/// merge key by key, list-maps by key, sets by value, everything else is replaced.
pub fn merge(live: Option<&Value>, config: &Value, s: Schema<'_>) -> Value {
    match (live, config) {
        (Some(Value::Object(lm)), Value::Object(cm)) if !s.atomic_map() => {
            let mut out = lm.clone();
            for (k, cv) in cm {
                let merged = merge(lm.get(k), cv, s.field(k));
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Some(Value::Array(la)), Value::Array(ca)) => match s.list_kind() {
            ListKind::Atomic => config.clone(),
            ListKind::Set => {
                let mut out = la.clone();
                for it in ca {
                    if !out.contains(it) {
                        out.push(it.clone());
                    }
                }
                Value::Array(out)
            }
            ListKind::Map(keys) => {
                let mut out = la.clone();
                for ci in ca {
                    let k = key_of(ci, &keys);
                    match out.iter().position(|li| key_of(li, &keys) == k) {
                        Some(p) => {
                            let merged = merge(Some(&out[p]), ci, s.items());
                            out[p] = merged;
                        }
                        None => out.push(ci.clone()),
                    }
                }
                Value::Array(out)
            }
        },
        _ => config.clone(),
    }
}

/// Removes the paths of `set` from `obj` as server-side apply prunes fields a manager
/// stopped applying: a leaf (scalar, atomic list or map) is removed; a container is
/// removed only when nothing is left in it after its own paths were removed (fields that
/// are not in `set` stay, with their parents).
pub fn remove_paths(obj: &mut Value, set: &FieldSet, s: Schema<'_>) {
    let mut elements: Vec<&PathElement> = set.members().collect();
    elements.extend(set.children().map(|(pe, _)| pe));
    elements.sort();
    elements.dedup();
    for pe in elements {
        let child_schema = child_schema(&s, pe);
        let Some(loc) = locate(obj, pe, &s) else {
            continue;
        };
        if let Some(sub) = set.children().find(|(c, _)| *c == pe).map(|(_, sub)| sub)
            && let Some(child) = at(obj, &loc)
        {
            remove_paths(child, sub, child_schema);
        }
        if set.has_member(pe) {
            let container = match at(obj, &loc).map(|c| &*c) {
                Some(Value::Object(m)) => !child_schema.atomic_map() && !m.is_empty(),
                Some(Value::Array(a)) => {
                    child_schema.list_kind() != ListKind::Atomic && !a.is_empty()
                }
                _ => false,
            };
            if !container {
                match (loc, &mut *obj) {
                    (Loc::Field(f), Value::Object(m)) => {
                        m.remove(&f);
                    }
                    (Loc::Index(i), Value::Array(a)) if i < a.len() => {
                        a.remove(i);
                    }
                    _ => {}
                }
            }
        }
    }
}

enum Loc {
    Field(String),
    Index(usize),
}

fn child_schema<'a>(s: &Schema<'a>, pe: &PathElement) -> Schema<'a> {
    match pe {
        PathElement::Field(f) => s.field(f),
        _ => s.items(),
    }
}

fn locate(obj: &Value, pe: &PathElement, s: &Schema<'_>) -> Option<Loc> {
    match (pe, obj) {
        (PathElement::Field(f), Value::Object(m)) => {
            m.contains_key(f).then(|| Loc::Field(f.clone()))
        }
        (PathElement::Key(_), Value::Array(a)) => {
            let keys = match s.list_kind() {
                ListKind::Map(keys) => keys,
                _ => Vec::new(),
            };
            a.iter()
                .position(|it| &key_of(it, &keys) == pe)
                .map(Loc::Index)
        }
        (PathElement::Value(v), Value::Array(a)) => {
            a.iter().position(|it| &canonical(it) == v).map(Loc::Index)
        }
        (PathElement::Index(i), Value::Array(a)) => (*i < a.len()).then_some(Loc::Index(*i)),
        _ => None,
    }
}

fn at<'v>(obj: &'v mut Value, loc: &Loc) -> Option<&'v mut Value> {
    match (loc, obj) {
        (Loc::Field(f), Value::Object(m)) => m.get_mut(f),
        (Loc::Index(i), Value::Array(a)) => a.get_mut(*i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::set::display_path;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "replicas": {"type": "integer"},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}}}},
            "args": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"}
        }}}})
    }

    fn paths(set: &FieldSet) -> Vec<String> {
        set.paths().iter().map(|p| display_path(p)).collect()
    }

    #[test]
    fn field_set_of_applied_config() {
        let s = schema();
        let cfg = json!({"spec": {"replicas": 2, "ports": [{"name": "http", "port": 80}], "args": ["a"], "tags": ["x"]}});
        assert_eq!(
            paths(&to_set(&cfg, Schema::root(Some(&s)))),
            vec![
                ".spec.args",
                ".spec.ports[name=\"http\"]",
                ".spec.ports[name=\"http\"].name",
                ".spec.ports[name=\"http\"].port",
                ".spec.replicas",
                ".spec.tags[=\"x\"]",
            ]
        );
    }

    #[test]
    fn compare_reports_added_modified_removed() {
        let s = schema();
        let old = json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}]}});
        let new = json!({"spec": {"replicas": 2, "ports": [{"name": "a", "port": 1}, {"name": "c", "port": 3}]}, "x": {"y": 1}});
        let c = compare(Some(&old), Some(&new), Schema::root(Some(&s)));
        assert_eq!(paths(&c.modified), vec![".spec.replicas"]);
        assert_eq!(
            paths(&c.added),
            vec![
                ".spec.ports[name=\"c\"]",
                ".spec.ports[name=\"c\"].name",
                ".spec.ports[name=\"c\"].port",
                ".x",
                ".x.y"
            ]
        );
        assert_eq!(
            paths(&c.removed),
            vec![
                ".spec.ports[name=\"b\"]",
                ".spec.ports[name=\"b\"].name",
                ".spec.ports[name=\"b\"].port"
            ]
        );
    }

    #[test]
    fn merge_by_list_type() {
        let s = schema();
        let live = json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 1}], "args": ["x"], "tags": ["t1"]}, "keep": 1});
        let cfg = json!({"spec": {"ports": [{"name": "a", "port": 9}, {"name": "b", "port": 2}], "args": ["y"], "tags": ["t2"]}});
        assert_eq!(
            merge(Some(&live), &cfg, Schema::root(Some(&s))),
            json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 9}, {"name": "b", "port": 2}],
                            "args": ["y"], "tags": ["t1", "t2"]}, "keep": 1})
        );
    }

    #[test]
    fn remove_paths_removes_items_and_fields() {
        let s = schema();
        let mut obj = json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}], "tags": ["t1", "t2"]}});
        let mut set = FieldSet::new();
        set.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("replicas".into()),
        ]);
        set.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("ports".into()),
            PathElement::Key("{\"name\":\"a\"}".into()),
        ]);
        set.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("tags".into()),
            PathElement::Value("\"t2\"".into()),
        ]);
        remove_paths(&mut obj, &set, Schema::root(Some(&s)));
        assert_eq!(
            obj,
            json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}], "tags": ["t1"]}})
        );

        // a list-map item goes when all of its fields go; a container member whose
        // remaining content is not in the set stays
        let mut set = FieldSet::new();
        let item = [
            PathElement::Field("spec".into()),
            PathElement::Field("ports".into()),
            PathElement::Key("{\"name\":\"a\"}".into()),
        ];
        set.insert(&item);
        for f in ["name", "port"] {
            let mut p = item.to_vec();
            p.push(PathElement::Field(f.into()));
            set.insert(&p);
        }
        set.insert(&[PathElement::Field("spec".into())]);
        remove_paths(&mut obj, &set, Schema::root(Some(&s)));
        assert_eq!(
            obj,
            json!({"spec": {"ports": [{"name": "b", "port": 2}], "tags": ["t1"]}})
        );
    }
}
