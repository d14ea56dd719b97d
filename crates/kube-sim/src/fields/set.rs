//! Field sets as in structured-merge-diff (`sigs.k8s.io/structured-merge-diff/v4/fieldpath`)
//! and their `FieldsV1` JSON encoding (`{"f:spec":{"f:replicas":{}}}`, `"."` marking a
//! node that is itself a member, `k:{...}` list-map keys, `v:...` set values, `i:N` indexes).

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a struct or map (`f:name`).
    Field(String),
    /// A list-map item identified by its key fields, as canonical JSON with sorted keys
    /// (`k:{"name":"a"}`).
    Key(String),
    /// A set item identified by its value, as canonical JSON (`v:"a"`).
    Value(String),
    /// A list index (`i:3`).
    Index(usize),
}

/// Canonical JSON (object keys sorted) for key and value path elements.
pub fn canonical(v: &Value) -> String {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            let parts: Vec<String> = keys
                .into_iter()
                .map(|k| {
                    format!(
                        "{}:{}",
                        Value::String(k.clone()),
                        canonical(m.get(k).unwrap_or(&Value::Null))
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        Value::Array(a) => format!(
            "[{}]",
            a.iter().map(canonical).collect::<Vec<_>>().join(",")
        ),
        other => other.to_string(),
    }
}

impl PathElement {
    /// The `FieldsV1` key (`f:name`, `k:{...}`, `v:...`, `i:N`).
    pub fn encode(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key.
    pub fn decode(s: &str) -> Option<PathElement> {
        let (prefix, rest) = s.split_at_checked(2)?;
        match prefix {
            "f:" => Some(PathElement::Field(rest.to_string())),
            "k:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Key(canonical(&v)))
            }
            "v:" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                Some(PathElement::Value(canonical(&v)))
            }
            "i:" => rest.parse().ok().map(PathElement::Index),
            _ => None,
        }
    }

    /// The human form used in conflict messages (`.spec`, `[name="a"]`, `[=5]`, `[3]`).
    pub fn display(&self) -> String {
        match self {
            PathElement::Field(f) => format!(".{f}"),
            PathElement::Key(k) => {
                let parsed: Value = serde_json::from_str(k).unwrap_or(Value::Null);
                let parts: Vec<String> = parsed
                    .as_object()
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                format!("[{}]", parts.join(","))
            }
            PathElement::Value(v) => format!("[={v}]"),
            PathElement::Index(i) => format!("[{i}]"),
        }
    }
}

/// A path (sequence of elements).
pub type Path = Vec<PathElement>;

/// The string form of a whole path (`.spec.ports[name="http"].port`).
pub fn display_path(path: &[PathElement]) -> String {
    path.iter().map(PathElement::display).collect()
}

/// A set of field paths, stored as a tree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSet {
    members: BTreeSet<PathElement>,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Whether the set has no paths.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty() && self.children.is_empty()
    }

    /// Adds a path (an empty path is ignored).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.insert(last.clone());
            }
            [first, rest @ ..] => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether the set contains exactly this path.
    #[cfg(test)]
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path {
            [] => false,
            [last] => self.members.contains(last),
            [first, rest @ ..] => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// The subset below `pe` at this level, if any.
    pub fn child(&self, pe: &PathElement) -> Option<&FieldSet> {
        self.children.get(pe)
    }

    /// Whether `pe` is a member at this level or has paths below it.
    pub fn touches(&self, pe: &PathElement) -> bool {
        self.members.contains(pe) || self.children.contains_key(pe)
    }

    /// Set union.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.members.extend(other.members.iter().cloned());
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Set difference (`self` minus `other`), path by path.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let members = self
            .members
            .iter()
            .filter(|m| !other.members.contains(*m))
            .cloned()
            .collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            if !d.is_empty() {
                children.insert(pe.clone(), d);
            }
        }
        FieldSet { members, children }
    }

    /// Set intersection.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let members = self
            .members
            .iter()
            .filter(|m| other.members.contains(*m))
            .cloned()
            .collect();
        let mut children = BTreeMap::new();
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                let i = c.intersection(o);
                if !i.is_empty() {
                    children.insert(pe.clone(), i);
                }
            }
        }
        FieldSet { members, children }
    }

    /// Removes a path and everything below it.
    pub fn remove_subtree(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.remove(last);
                self.children.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(c) = self.children.get_mut(first) {
                    c.remove_subtree(rest);
                    if c.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Removes a path's membership only (its children stay).
    pub fn remove_member(&mut self, path: &[PathElement]) {
        match path {
            [] => {}
            [last] => {
                self.members.remove(last);
            }
            [first, rest @ ..] => {
                if let Some(c) = self.children.get_mut(first) {
                    c.remove_member(rest);
                    if c.is_empty() {
                        self.children.remove(first);
                    }
                }
            }
        }
    }

    /// Keeps only the subtree under `pe` (plus `pe` itself if it was a member).
    pub fn only(&self, pe: &PathElement) -> FieldSet {
        let mut out = FieldSet::new();
        if self.members.contains(pe) {
            out.members.insert(pe.clone());
        }
        if let Some(c) = self.children.get(pe) {
            out.children.insert(pe.clone(), c.clone());
        }
        out
    }

    /// Every path in the set, in order.
    pub fn paths(&self) -> Vec<Path> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Path, out: &mut Vec<Path>) {
        let mut elements: BTreeSet<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys());
        for pe in elements {
            prefix.push(pe.clone());
            if self.members.contains(pe) {
                out.push(prefix.clone());
            }
            if let Some(c) = self.children.get(pe) {
                c.collect(prefix, out);
            }
            prefix.pop();
        }
    }

    /// Encodes as `FieldsV1` JSON.
    pub fn to_fields_v1(&self) -> Value {
        let mut out = Map::new();
        let mut elements: BTreeSet<&PathElement> = self.members.iter().collect();
        elements.extend(self.children.keys());
        for pe in elements {
            let mut node = match self.children.get(pe) {
                Some(c) => match c.to_fields_v1() {
                    Value::Object(m) => m,
                    _ => Map::new(),
                },
                None => Map::new(),
            };
            if self.members.contains(pe) && self.children.contains_key(pe) {
                node.insert(".".into(), Value::Object(Map::new()));
            }
            out.insert(pe.encode(), Value::Object(node));
        }
        Value::Object(out)
    }

    /// Decodes `FieldsV1` JSON; unknown keys are skipped.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut set = FieldSet::new();
        if let Some(m) = v.as_object() {
            for (k, child) in m {
                let Some(pe) = PathElement::decode(k) else {
                    continue;
                };
                let sub = FieldSet::from_fields_v1(child);
                let is_leaf = child.as_object().is_none_or(|c| c.is_empty());
                let marked = child.get(".").is_some();
                if is_leaf || marked {
                    set.members.insert(pe.clone());
                }
                if !sub.is_empty() {
                    set.children.insert(pe, sub);
                }
            }
        }
        set
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.into())
    }

    #[test]
    fn fields_v1_round_trip_with_dot_markers() {
        let v = json!({
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {"f:ports": {"k:{\"port\":80,\"name\":\"http\"}": {".": {}, "f:name": {}, "f:port": {}}},
                       "f:tags": {"v:\"a\"": {}}}
        });
        let set = FieldSet::from_fields_v1(&v);
        assert!(set.contains(&[f("metadata"), f("labels")]));
        assert!(set.contains(&[f("metadata"), f("labels"), f("app")]));
        assert!(!set.contains(&[f("metadata")]));
        let key = PathElement::Key("{\"name\":\"http\",\"port\":80}".into());
        assert!(set.contains(&[f("spec"), f("ports"), key.clone()]));
        assert!(set.contains(&[f("spec"), f("ports"), key.clone(), f("port")]));
        let mut expected = v.clone();
        // keys come back canonical (sorted)
        expected["f:spec"]["f:ports"] =
            json!({"k:{\"name\":\"http\",\"port\":80}": {".": {}, "f:name": {}, "f:port": {}}});
        assert_eq!(set.to_fields_v1(), expected);
        assert_eq!(
            display_path(&[f("spec"), f("ports"), key, f("port")]),
            ".spec.ports[name=\"http\",port=80].port"
        );
    }

    #[test]
    fn set_algebra() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("a")]);
        a.insert(&[f("spec"), f("b")]);
        let mut b = FieldSet::new();
        b.insert(&[f("spec"), f("b")]);
        b.insert(&[f("spec"), f("c")]);
        assert_eq!(a.intersection(&b).paths(), vec![vec![f("spec"), f("b")]]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("spec"), f("a")]]);
        assert_eq!(a.union(&b).paths().len(), 3);
        let mut c = a.union(&b);
        c.remove_subtree(&[f("spec")]);
        assert!(c.is_empty());
    }
}
