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
use std::collections::{BTreeMap, BTreeSet};
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
            Some("map") => ListKind::Map(crate::json::strings(n.get("x-kubernetes-list-map-keys"))),
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
///
/// Associative lists (sets, list-maps) are ordered as structured-merge-diff's
/// `mergingWalker.visitListItems` orders them: the applied items come in the applied
/// order, live items that are not applied stay where they were relative to the applied
/// items they followed, and items new to the list come where the configuration puts them.
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
            ListKind::Set => Value::Array(merge_associative(
                la,
                ca,
                |it| PathElement::Value(canonical(it)),
                |_, c| c.clone(),
            )),
            ListKind::Map(keys) => Value::Array(merge_associative(
                la,
                ca,
                |it| key_of(it, &keys),
                |l, c| merge(Some(l), c, s.items()),
            )),
        },
        _ => config.clone(),
    }
}

/// The item order of structured-merge-diff's associative-list merge (`visitListItems`,
/// sigs.k8s.io/structured-merge-diff/v4 `typed/merge.go`): walks the live (`lhs`) and
/// applied (`rhs`) lists together; a live item that is also applied is emitted at the
/// applied item's turn (merged with it), a live-only item as soon as the walk reaches it,
/// an applied item that is not live at its turn. A live item whose key repeats an earlier
/// one is dropped; an applied one is appended unmerged, so that validation rejects the
/// object (`Duplicate value`), as kube-apiserver refuses such a configuration.
fn merge_associative(
    lhs: &[Value],
    rhs: &[Value],
    key: impl Fn(&Value) -> PathElement,
    merge_item: impl Fn(&Value, &Value) -> Value,
) -> Vec<Value> {
    // (key, index) of each first occurrence, indexes of repeated keys
    let index = |list: &[Value]| -> (Vec<(PathElement, usize)>, Vec<usize>) {
        let mut seen = BTreeSet::new();
        let (mut order, mut repeated) = (Vec::new(), Vec::new());
        for (i, it) in list.iter().enumerate() {
            let k = key(it);
            if seen.insert(k.clone()) {
                order.push((k, i));
            } else {
                repeated.push(i);
            }
        }
        (order, repeated)
    };
    let (lhs_order, _) = index(lhs);
    let (rhs_order, rhs_repeated) = index(rhs);
    let lhs_at: BTreeMap<&PathElement, usize> = lhs_order.iter().map(|(k, i)| (k, *i)).collect();
    let rhs_at: BTreeMap<&PathElement, usize> = rhs_order.iter().map(|(k, i)| (k, *i)).collect();
    // applied items that are also live, in applied order
    let mut shared = rhs_order
        .iter()
        .map(|(k, _)| k)
        .filter(|k| lhs_at.contains_key(k));
    let mut next_shared = shared.next();
    let emit_rhs = |k: &PathElement, out: &mut Vec<Value>| {
        let c = &rhs[rhs_at[k]];
        match lhs_at.get(k) {
            Some(&l) => out.push(merge_item(&lhs[l], c)),
            None => out.push(c.clone()),
        }
    };
    let mut out = Vec::with_capacity(lhs_order.len().max(rhs_order.len()));
    let (mut li, mut ri) = (0, 0);
    while li < lhs_order.len() || ri < rhs_order.len() {
        if li < lhs_order.len() && ri < rhs_order.len() {
            let lk = &lhs_order[li].0;
            if *lk == rhs_order[ri].0 {
                emit_rhs(lk, &mut out);
                li += 1;
                ri += 1;
                next_shared = shared.next();
                continue;
            }
            if rhs_at.contains_key(lk) && next_shared.is_some_and(|n| n != lk) {
                // applied, but a different applied item comes first: emitted at its turn
                li += 1;
                continue;
            }
        }
        if li < lhs_order.len() {
            let (lk, l) = &lhs_order[li];
            if !rhs_at.contains_key(lk) {
                out.push(lhs[*l].clone());
                li += 1;
                continue;
            }
        }
        if ri < rhs_order.len() {
            let rk = &rhs_order[ri].0;
            emit_rhs(rk, &mut out);
            ri += 1;
            if next_shared == Some(rk) {
                next_shared = shared.next();
            }
        } else {
            // only live items that were already emitted with their applied twin remain
            li += 1;
        }
    }
    out.extend(rhs_repeated.into_iter().map(|i| rhs[i].clone()));
    out
}

/// Removes from `obj` what server-side apply prunes after merging (structured-merge-diff's
/// `Updater.prune`, `addBackOwnedItems`, `addBackDanglingItems`): every node whose path is
/// in `last` (the applier's previous field set) or above a path in it, and that is neither
/// in `keep` (the fields the applier applies now and those every other manager owns) nor
/// above a path in it, goes with everything below it — a list item the applier owned goes
/// whole, fields nobody owns inside it included.
///
/// Structured-merge-diff counts every field of a manager's set that has paths below it as
/// owned (struct fields through `EnsureNamedFieldsAreMembers`, map keys always), hence
/// "above a path". A map or list whose every entry is removed this way becomes `null`,
/// which kube-apiserver's CRD defaulting then drops (non-nullable fields): it is removed;
/// its parent stays.
pub fn prune(obj: &mut Value, last: &FieldSet, keep: &FieldSet, s: Schema<'_>) {
    prune_node(obj, last, Some(keep), s);
}

/// Prunes below one node; returns whether it is a non-empty container all of whose
/// entries were removed (so the caller drops it).
fn prune_node(v: &mut Value, last: &FieldSet, keep: Option<&FieldSet>, s: Schema<'_>) -> bool {
    let kept = |pe: &PathElement| keep.is_some_and(|k| k.touches(pe));
    let below = |pe: &PathElement| keep.and_then(|k| k.child(pe));
    match v {
        Value::Object(m) if !s.atomic_map() => {
            if m.is_empty() {
                return false;
            }
            let before = m.len();
            let mut removed = 0;
            let fields: Vec<String> = m.keys().cloned().collect();
            for f in fields {
                let pe = PathElement::Field(f.clone());
                if !last.touches(&pe) {
                    continue;
                }
                if !kept(&pe) {
                    m.remove(&f);
                    removed += 1;
                    continue;
                }
                let emptied = match (last.child(&pe), m.get_mut(&f)) {
                    (Some(sub), Some(child)) => prune_node(child, sub, below(&pe), s.field(&f)),
                    _ => false,
                };
                if emptied {
                    m.remove(&f);
                }
            }
            removed == before
        }
        Value::Array(items) => {
            let kind = s.list_kind();
            if items.is_empty() || kind == ListKind::Atomic {
                return false;
            }
            let before = items.len();
            let mut removed = 0;
            let mut out = Vec::with_capacity(before);
            for mut it in std::mem::take(items) {
                let pe = match &kind {
                    ListKind::Map(keys) => key_of(&it, keys),
                    _ => PathElement::Value(canonical(&it)),
                };
                if last.touches(&pe) && !kept(&pe) {
                    removed += 1;
                    continue;
                }
                let emptied = match last.child(&pe) {
                    Some(sub) => prune_node(&mut it, sub, below(&pe), s.items()),
                    None => false,
                };
                if !emptied {
                    out.push(it);
                }
            }
            *items = out;
            removed == before
        }
        _ => false,
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

    fn ports(keys: &[&str]) -> Value {
        let items: Vec<Value> = keys.iter().map(|k| json!({"name": k, "port": 1})).collect();
        json!({"spec": {"ports": items}})
    }

    fn port_names(obj: &Value) -> Vec<String> {
        obj["spec"]["ports"]
            .as_array()
            .expect("ports")
            .iter()
            .map(|p| p["name"].as_str().expect("name").to_string())
            .collect()
    }

    #[test]
    fn list_map_merge_keeps_the_applied_order() {
        let s = schema();
        // (live order, applied order, merged order) as structured-merge-diff's
        // `visitListItems` produces them: applied items in the applied order, live-only
        // items where they were relative to the applied ones
        let cases: [(&[&str], &[&str], &[&str]); 6] = [
            (&["a", "b"], &["b", "a"], &["b", "a"]),
            (&["a", "c"], &["a", "b", "c"], &["a", "b", "c"]),
            (&["a", "b", "x"], &["b", "a"], &["b", "x", "a"]),
            (&["x", "a"], &["b", "a"], &["x", "b", "a"]),
            (&["a", "x"], &["b"], &["a", "x", "b"]),
            (&[], &["c", "a"], &["c", "a"]),
        ];
        for (live, applied, want) in cases {
            let merged = merge(Some(&ports(live)), &ports(applied), Schema::root(Some(&s)));
            assert_eq!(
                port_names(&merged),
                want,
                "live {live:?} applied {applied:?}"
            );
        }
        // a repeated applied key is kept (unmerged, at the end) for validation to reject
        let dup = json!({"spec": {"ports": [{"name": "a", "port": 1}, {"name": "a", "port": 2}]}});
        assert_eq!(
            merge(Some(&ports(&["a"])), &dup, Schema::root(Some(&s)))["spec"]["ports"],
            json!([{"name": "a", "port": 1}, {"name": "a", "port": 2}])
        );
        // sets follow the same rule
        let live = json!({"spec": {"tags": ["t1", "t2"]}});
        let cfg = json!({"spec": {"tags": ["t3", "t1"]}});
        assert_eq!(
            merge(Some(&live), &cfg, Schema::root(Some(&s)))["spec"]["tags"],
            json!(["t3", "t1", "t2"])
        );
    }

    fn nested_schema() -> Value {
        json!({"type": "object", "properties": {"status": {"type": "object", "properties": {
            "domains": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {
                            "name": {"type": "string"},
                            "attributes": {"type": "object", "additionalProperties": {"type": "string"}}}}},
            "phase": {"type": "string"}
        }}}})
    }

    #[test]
    fn prune_removes_whole_items_and_fields_nobody_keeps() {
        let s = nested_schema();
        let root = Schema::root(Some(&s));
        let obj = json!({"status": {"phase": "x", "domains": [
            {"name": "a", "attributes": {"zone": "a"}},
            {"name": "b", "attributes": {"zone": "b"}}]}});
        let last = to_set(&obj, root);
        // the applier now applies only a: b goes with its attributes, phase goes
        let applied = json!({"status": {"domains": [{"name": "a", "attributes": {"zone": "a"}}]}});
        let mut pruned = obj.clone();
        prune(&mut pruned, &last, &to_set(&applied, root), root);
        assert_eq!(pruned, applied);

        // another manager keeps b's rack attribute: only the applier's part of b goes
        let mut with_rack = obj.clone();
        with_rack["status"]["domains"][1]["attributes"]["rack"] = json!("r1");
        let rack = json!({"status": {"domains": [{"name": "b", "attributes": {"rack": "r1"}}]}});
        let keep = to_set(&applied, root).union(&to_set(&rack, root));
        prune(&mut with_rack, &last, &keep, root);
        assert_eq!(
            with_rack,
            json!({"status": {"domains": [
                {"name": "a", "attributes": {"zone": "a"}},
                {"name": "b", "attributes": {"rack": "r1"}}]}})
        );

        // fields nobody owned inside a removed item go with it; unowned siblings of
        // removed fields stay while their parent is kept
        let obj2 = json!({"status": {"phase": "x", "extra": 1, "seen": 2, "domains": [
            {"name": "a", "attributes": {"zone": "a", "default": "d"}}]}});
        let last2 = to_set(
            &json!({"status": {"phase": "x", "domains": [{"name": "a", "attributes": {"zone": "a"}}]}}),
            root,
        );
        let mut pruned2 = obj2.clone();
        let seen = to_set(&json!({"status": {"seen": 2}}), root);
        prune(&mut pruned2, &last2, &seen, root);
        assert_eq!(pruned2, json!({"status": {"extra": 1, "seen": 2}}));
        // with nothing kept below it, `status` itself goes (it is a field of the
        // applier's set with paths below it), unowned fields included
        let mut pruned2 = obj2.clone();
        prune(&mut pruned2, &last2, &FieldSet::new(), root);
        assert_eq!(pruned2, json!({}));

        // a map kept by someone but emptied by removal goes (structured-merge-diff leaves
        // it null, kube-apiserver's CRD defaulting drops the null)
        let mut obj3 = json!({"status": {"domains": [{"name": "a", "attributes": {"zone": "a"}}]}});
        let last3 = to_set(&obj3, root);
        let mut keep3 = to_set(&json!({"status": {"domains": [{"name": "a"}]}}), root);
        keep3.insert(&[
            PathElement::Field("status".into()),
            PathElement::Field("domains".into()),
            PathElement::Key("{\"name\":\"a\"}".into()),
            PathElement::Field("attributes".into()),
        ]);
        prune(&mut obj3, &last3, &keep3, root);
        assert_eq!(obj3, json!({"status": {"domains": [{"name": "a"}]}}));
    }

    #[test]
    fn prune_removes_scalars_set_values_and_list_map_items() {
        let s = schema();
        let root = Schema::root(Some(&s));
        let mut obj = json!({"spec": {"replicas": 1, "ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}], "tags": ["t1", "t2"]}});
        let last = to_set(&obj, root);
        let applied = json!({"spec": {"ports": [{"name": "b", "port": 2}], "tags": ["t1"]}});
        prune(&mut obj, &last, &to_set(&applied, root), root);
        assert_eq!(obj, applied);
    }
}
