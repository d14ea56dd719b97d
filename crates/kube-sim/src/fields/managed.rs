//! `metadata.managedFields` bookkeeping for update operations (create, update, patch) and
//! server-side apply, after structured-merge-diff's `Updater.Update` / `Updater.Apply`.
//!
//! Managers are identified by (manager, operation, subresource), plus `apiVersion` for
//! `Update` entries, as kube-apiserver's `BuildManagerIdentifier` does.

use super::set::{FieldSet, PathElement, display_path};
use super::typed::{Schema, compare, merge, prune, to_set};
use crate::api_error::Cause;
use serde_json::{Map, Value};

/// `Apply` or `Update`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or a non-apply patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// Field manager name.
    pub manager: String,
    /// Operation.
    pub operation: Operation,
    /// `apiVersion` the fields were set through.
    pub api_version: String,
    /// `metav1.Time` of the last change.
    pub time: String,
    /// "" or `status`.
    pub subresource: String,
    /// The owned fields.
    pub fields: FieldSet,
}

impl Entry {
    fn same_manager(&self, manager: &str, op: Operation, sub: &str, api_version: &str) -> bool {
        self.manager == manager
            && self.operation == op
            && self.subresource == sub
            && (op == Operation::Apply || self.api_version == api_version)
    }
}

/// Reads `metadata.managedFields`.
pub fn read(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj
        .get("metadata")
        .and_then(|m| m.get("managedFields"))
        .and_then(Value::as_array)
    else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let operation = match e.get("operation").and_then(Value::as_str) {
                Some("Apply") => Operation::Apply,
                Some("Update") => Operation::Update,
                _ => return None,
            };
            Some(Entry {
                manager: s("manager"),
                operation,
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

/// Writes entries to `metadata.managedFields`, sorted as kube-apiserver sorts them
/// (operation, time, manager, apiVersion, subresource); removes the key when empty.
pub fn write(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.fields.is_empty());
    entries.sort_by(|a, b| {
        (
            a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let meta = crate::json::meta_mut(obj);
    if entries.is_empty() {
        meta.remove("managedFields");
        return;
    }
    let list: Vec<Value> = entries
        .iter()
        .map(|e| {
            let mut m = Map::new();
            m.insert("manager".into(), Value::String(e.manager.clone()));
            m.insert(
                "operation".into(),
                Value::String(e.operation.as_str().into()),
            );
            m.insert("apiVersion".into(), Value::String(e.api_version.clone()));
            m.insert("time".into(), Value::String(e.time.clone()));
            m.insert("fieldsType".into(), Value::String("FieldsV1".into()));
            m.insert("fieldsV1".into(), e.fields.to_fields_v1());
            if !e.subresource.is_empty() {
                m.insert("subresource".into(), Value::String(e.subresource.clone()));
            }
            Value::Object(m)
        })
        .collect();
    meta.insert("managedFields".into(), Value::Array(list));
}

/// Which part of the object a request may change (status reset rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everything (no status subresource).
    All,
    /// The main resource of a kind with a status subresource: `status` is ignored.
    NotStatus,
    /// The `status` subresource: only `status` counts.
    OnlyStatus,
}

fn f(name: &str) -> PathElement {
    PathElement::Field(name.to_string())
}

/// Removes the fields no manager owns (kube-apiserver's `stripMeta`) and those outside the
/// request's scope.
pub fn strip(set: &FieldSet, scope: Scope) -> FieldSet {
    let mut s = set.clone();
    s.remove_subtree(&[f("apiVersion")]);
    s.remove_subtree(&[f("kind")]);
    s.remove_member(&[f("metadata")]);
    for m in [
        "name",
        "namespace",
        "creationTimestamp",
        "selfLink",
        "uid",
        "clusterName",
        "generation",
        "managedFields",
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ] {
        s.remove_subtree(&[f("metadata"), f(m)]);
    }
    match scope {
        Scope::All => s,
        Scope::NotStatus => {
            s.remove_subtree(&[f("status")]);
            s
        }
        Scope::OnlyStatus => s.only(&f("status")),
    }
}

/// Records an update operation by `manager`: it gains the added and modified fields, other
/// managers lose them, removed fields are dropped everywhere. Entries are unchanged when
/// nothing changed.
#[allow(clippy::too_many_arguments)]
pub fn record_update(
    old: Option<&Value>,
    new: &Value,
    schema: Option<&Value>,
    mut entries: Vec<Entry>,
    manager: &str,
    subresource: &str,
    api_version: &str,
    scope: Scope,
    now: &str,
) -> Vec<Entry> {
    let c = compare(old, Some(new), Schema::root(schema));
    let added = strip(&c.added, scope);
    let modified = strip(&c.modified, scope);
    let removed = strip(&c.removed, scope);
    if added.is_empty() && modified.is_empty() && removed.is_empty() {
        return entries;
    }
    let changed = added.union(&modified);
    for e in entries.iter_mut() {
        if !e.same_manager(manager, Operation::Update, subresource, api_version) {
            e.fields = e.fields.difference(&changed);
        }
        e.fields = e.fields.difference(&removed);
    }
    match entries
        .iter_mut()
        .find(|e| e.same_manager(manager, Operation::Update, subresource, api_version))
    {
        Some(e) => {
            e.fields = e.fields.union(&changed).difference(&removed);
            e.time = now.to_string();
        }
        None => entries.push(Entry {
            manager: manager.to_string(),
            operation: Operation::Update,
            api_version: api_version.to_string(),
            time: now.to_string(),
            subresource: subresource.to_string(),
            fields: changed.difference(&removed),
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
    entries
}

/// Inputs of a server-side apply.
#[derive(Debug)]
pub struct ApplyRequest<'a> {
    /// The live object (None when the apply creates it).
    pub live: Option<&'a Value>,
    /// The applied configuration (already pruned; not defaulted).
    pub config: &'a Value,
    /// The schema of the request version.
    pub schema: Option<&'a Value>,
    /// Current managed fields.
    pub entries: Vec<Entry>,
    /// Field manager.
    pub manager: &'a str,
    /// "" or `status`.
    pub subresource: &'a str,
    /// `apiVersion` of the request.
    pub api_version: &'a str,
    /// Status reset scope.
    pub scope: Scope,
    /// `force=true`.
    pub force: bool,
    /// Timestamp for changed entries.
    pub now: &'a str,
}

/// One field another manager owns that an apply would change.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    /// The other manager's name.
    pub manager: String,
    /// Its operation.
    pub operation: Operation,
    /// Its subresource ("" for the main resource).
    pub subresource: String,
    /// Its `apiVersion` (shown for `Update` managers only).
    pub api_version: String,
    /// The field path (`.spec.replicas`).
    pub path: String,
}

impl Conflict {
    /// kube-apiserver's `printManager`: `"m"`, plus ` with subresource "s"`, plus
    /// ` using <apiVersion>` for `Update` managers (manager identifiers carry no time).
    fn manager_text(&self) -> String {
        let mut out = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            out.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == Operation::Update {
            out.push_str(&format!(" using {}", self.api_version));
        }
        out
    }

    /// The manager identifier as `BuildManagerIdentifier` encodes it (JSON of the
    /// entry without fields and time; no `apiVersion` for appliers): the sort key of
    /// managers in messages.
    fn identifier(&self) -> String {
        let mut m = Map::new();
        m.insert("manager".into(), Value::String(self.manager.clone()));
        m.insert(
            "operation".into(),
            Value::String(self.operation.as_str().into()),
        );
        if self.operation == Operation::Update && !self.api_version.is_empty() {
            m.insert("apiVersion".into(), Value::String(self.api_version.clone()));
        }
        if !self.subresource.is_empty() {
            m.insert(
                "subresource".into(),
                Value::String(self.subresource.clone()),
            );
        }
        Value::Object(m).to_string()
    }
}

/// A refused apply: conflicts with other managers.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflicts {
    /// The conflicts, in path order.
    pub items: Vec<Conflict>,
}

impl Conflicts {
    /// kube-apiserver's message (`getConflictMessage`): `Apply failed with 1 conflict:
    /// conflict with "m" using v1: .spec.replicas`; with several, per manager (sorted by
    /// identifier) a `conflicts with "m":` line followed by `- <path>` lines.
    pub fn message(&self) -> String {
        let n = self.items.len();
        if n == 1 {
            let c = &self.items[0];
            return format!(
                "Apply failed with 1 conflict: conflict with {}: {}",
                c.manager_text(),
                c.path
            );
        }
        let mut by_manager: std::collections::BTreeMap<String, (String, Vec<&str>)> =
            std::collections::BTreeMap::new();
        for c in &self.items {
            by_manager
                .entry(c.identifier())
                .or_insert_with(|| (c.manager_text(), Vec::new()))
                .1
                .push(&c.path);
        }
        let mut lines = Vec::new();
        for (text, paths) in by_manager.values() {
            lines.push(format!("conflicts with {text}:"));
            lines.extend(paths.iter().map(|p| format!("- {p}")));
        }
        format!("Apply failed with {n} conflicts: {}", lines.join("\n"))
    }

    /// `details.causes` entries (`FieldManagerConflict`, `conflict with <manager>`).
    pub fn causes(&self) -> Vec<Cause> {
        self.items
            .iter()
            .map(|c| {
                Cause::new(
                    "FieldManagerConflict",
                    c.path.clone(),
                    format!("conflict with {}", c.manager_text()),
                )
            })
            .collect()
    }
}

/// Runs a server-side apply: merges the configuration into the live object, removes
/// fields and list items this manager applied before but no longer applies (unless another
/// manager owns them or something below them; see [`prune`]), detects conflicts (fields owned by other managers whose value would change) and
/// updates the managed fields. Returns the merged object (not yet defaulted).
pub fn apply(req: ApplyRequest<'_>) -> Result<(Value, Vec<Entry>), Conflicts> {
    let schema = Schema::root(req.schema);
    let config_set = strip(&to_set(req.config, schema), req.scope);
    let empty = Value::Object(Map::new());
    let live = req.live.unwrap_or(&empty);
    let mut merged = merge(Some(live), req.config, schema);

    let mut entries = req.entries;
    let mine = |e: &Entry| {
        e.same_manager(
            req.manager,
            Operation::Apply,
            req.subresource,
            req.api_version,
        )
    };
    let last_set = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let others = entries
        .iter()
        .filter(|e| !mine(e))
        .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
    // What stays even if the applier owned it before: what it applies now (the whole
    // configuration, as structured-merge-diff sees it, `metadata.name` included, so
    // `metadata` itself never goes) and whatever any other manager owns.
    let mut keep = to_set(req.config, schema).union(&others);
    keep.insert(&[f("metadata"), f("name")]);
    prune(&mut merged, &last_set, &keep, schema);

    let c = compare(Some(live), Some(&merged), schema);
    let changed = strip(&c.added.union(&c.modified), req.scope);
    let removed = strip(&c.removed, req.scope);

    let mut conflicts = Vec::new();
    for e in entries.iter().filter(|e| !mine(e)) {
        let clash = e.fields.intersection(&changed);
        for p in clash.paths() {
            conflicts.push(Conflict {
                manager: e.manager.clone(),
                operation: e.operation,
                subresource: e.subresource.clone(),
                api_version: e.api_version.clone(),
                path: display_path(&p),
            });
        }
    }
    if !conflicts.is_empty() && !req.force {
        conflicts.sort_by(|a, b| a.path.cmp(&b.path).then(a.manager.cmp(&b.manager)));
        return Err(Conflicts { items: conflicts });
    }
    for e in entries.iter_mut() {
        if !mine(e) {
            e.fields = e.fields.difference(&changed);
        }
        e.fields = e.fields.difference(&removed);
    }
    let set_changed = last_set != config_set;
    match entries.iter_mut().find(|e| mine(e)) {
        Some(e) => {
            if set_changed || !c.is_empty() {
                e.time = req.now.to_string();
            }
            e.fields = config_set;
            e.api_version = req.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: req.manager.to_string(),
            operation: Operation::Apply,
            api_version: req.api_version.to_string(),
            time: req.now.to_string(),
            subresource: req.subresource.to_string(),
            fields: config_set,
        }),
    }
    entries.retain(|e| !e.fields.is_empty());
    Ok((merged, entries))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req<'a>(
        live: Option<&'a Value>,
        config: &'a Value,
        entries: Vec<Entry>,
        manager: &'a str,
        force: bool,
    ) -> ApplyRequest<'a> {
        ApplyRequest {
            live,
            config,
            schema: None,
            entries,
            manager,
            subresource: "",
            api_version: "example.com/v1",
            scope: Scope::NotStatus,
            force,
            now: "2024-01-01T00:00:00Z",
        }
    }

    #[test]
    fn apply_then_conflict_then_force() {
        let cfg_a = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"a": 1, "b": 2}});
        let (obj, entries) = apply(req(None, &cfg_a, vec![], "alice", false)).expect("first apply");
        assert_eq!(obj["spec"], json!({"a": 1, "b": 2}));
        assert_eq!(entries.len(), 1);
        assert_eq!(
            entries[0].fields.to_fields_v1(),
            json!({"f:spec": {"f:a": {}, "f:b": {}}})
        );

        // bob sets a to the same value: shared, no conflict
        let cfg_b = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"a": 1}});
        let (obj2, entries2) =
            apply(req(Some(&obj), &cfg_b, entries.clone(), "bob", false)).expect("same value");
        assert_eq!(obj2, obj);
        assert_eq!(entries2.len(), 2);

        // bob changes b (owned by alice): conflict
        let cfg_c = json!({"apiVersion": "example.com/v1", "kind": "W", "metadata": {"name": "w"}, "spec": {"b": 3}});
        let err =
            apply(req(Some(&obj), &cfg_c, entries.clone(), "bob", false)).expect_err("conflict");
        assert_eq!(
            err.message(),
            "Apply failed with 1 conflict: conflict with \"alice\": .spec.b"
        );

        // with force bob takes b
        let (obj3, entries3) =
            apply(req(Some(&obj), &cfg_c, entries, "bob", true)).expect("forced");
        assert_eq!(obj3["spec"], json!({"a": 1, "b": 3}));
        let alice = entries3
            .iter()
            .find(|e| e.manager == "alice")
            .expect("alice");
        assert_eq!(alice.fields.to_fields_v1(), json!({"f:spec": {"f:a": {}}}));
    }

    #[test]
    fn apply_removes_fields_the_manager_stopped_applying() {
        let cfg1 = json!({"spec": {"a": 1, "b": 2}});
        let (obj, entries) = apply(req(None, &cfg1, vec![], "alice", false)).expect("apply");
        let cfg2 = json!({"spec": {"a": 1}});
        let (obj2, _) = apply(req(Some(&obj), &cfg2, entries, "alice", false)).expect("apply");
        assert_eq!(obj2, json!({"spec": {"a": 1}}));
    }

    #[test]
    fn update_takes_ownership_from_others() {
        let old = json!({"spec": {"a": 1, "b": 2}});
        let e = vec![Entry {
            manager: "alice".into(),
            operation: Operation::Apply,
            api_version: "v1".into(),
            time: "t".into(),
            subresource: String::new(),
            fields: to_set(&old, Schema::root(None)),
        }];
        let new = json!({"spec": {"a": 5, "b": 2, "c": 3}});
        let out = record_update(Some(&old), &new, None, e, "ctl", "", "v1", Scope::All, "t2");
        let alice = out.iter().find(|e| e.manager == "alice").expect("alice");
        assert_eq!(alice.fields.to_fields_v1(), json!({"f:spec": {"f:b": {}}}));
        let ctl = out.iter().find(|e| e.manager == "ctl").expect("ctl");
        assert_eq!(
            ctl.fields.to_fields_v1(),
            json!({"f:spec": {"f:a": {}, "f:c": {}}})
        );
        assert_eq!(ctl.operation, Operation::Update);
    }

    #[test]
    fn conflict_messages_follow_print_manager() {
        let c = |manager: &str, operation, subresource: &str, path: &str| Conflict {
            manager: manager.into(),
            operation,
            subresource: subresource.into(),
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            path: path.into(),
        };
        let one = Conflicts {
            items: vec![c("kubectl", Operation::Update, "scale", ".spec.replicas")],
        };
        assert_eq!(
            one.message(),
            "Apply failed with 1 conflict: conflict with \"kubectl\" with subresource \"scale\" using cluster.x-k8s.io/v1beta2: .spec.replicas"
        );
        let many = Conflicts {
            items: vec![
                c("zed", Operation::Apply, "", ".spec.a"),
                c("ctl", Operation::Update, "", ".spec.b"),
                c("zed", Operation::Apply, "", ".spec.c"),
            ],
        };
        assert_eq!(
            many.message(),
            "Apply failed with 3 conflicts: conflicts with \"ctl\" using cluster.x-k8s.io/v1beta2:\n- .spec.b\nconflicts with \"zed\":\n- .spec.a\n- .spec.c"
        );
        assert_eq!(many.causes()[0].message, "conflict with \"zed\"");
    }
}
