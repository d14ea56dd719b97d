//! The garbage collector and namespace controller, as one background task woken after
//! commits (no polling). Commits queue the work ([`GcWork`]) and keep an owner →
//! dependents index, so a pass looks only at what changed, not at every object.
//!
//! Decisions follow kube-controller-manager's garbage collector (`attemptToDeleteItem`,
//! `processDeletingDependentsItem`, `orphanDependents`) and namespace controller:
//! - a dependent whose owners are all gone is deleted (background);
//! - a dependent of an owner in foreground deletion is deleted (foreground when it has
//!   dependents itself); references to such owners are dropped from dependents that
//!   still have other live owners;
//! - an owner with `foregroundDeletion` loses the finalizer once no dependent with
//!   `blockOwnerDeletion: true` is left;
//! - an owner with `orphan` has its references removed from its dependents, then loses
//!   the finalizer;
//! - a terminating namespace has its contents deleted and, once empty, loses the
//!   `kubernetes` finalizer (and is removed).
//!
//! Owners are found by `uid` only.

use crate::engine::{
    DeleteOptions, Engine, FOREGROUND, ORPHAN, Propagation, delete_locked, store_update,
    tracks_generation,
};
use crate::json;
use crate::resource::StorageKey;
use crate::store::{GcWork, Loc, ObjKey, State};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::Arc;

#[derive(Debug)]
enum Action {
    Delete(Loc, String, Propagation),
    RemoveOwnerRefs(Loc, String, Vec<String>),
    RemoveFinalizer(Loc, String, &'static str),
    FinishNamespace(Loc, String),
}

/// Runs the collector forever (the owner aborts the task on shutdown).
pub async fn run(engine: Arc<Engine>) {
    loop {
        engine.gc_woken().await;
        // A pass with no queued work ends the round; the bound guards against livelock.
        for _ in 0..256 {
            if !pass(&engine) {
                break;
            }
        }
    }
}

/// One pass over the queued work; returns whether there was any.
pub fn pass(engine: &Engine) -> bool {
    let actions = {
        let mut st = engine.lock();
        if st.gc_queue.is_empty() {
            return false;
        }
        let work = std::mem::take(&mut st.gc_queue);
        plan(&st, work)
    };
    for a in actions {
        execute(engine, a);
    }
    true
}

fn is_namespace(key: &StorageKey) -> bool {
    key.group.is_empty() && key.plural == "namespaces"
}

fn ref_uid(r: &Value) -> &str {
    r.get("uid").and_then(Value::as_str).unwrap_or("")
}

fn plan(st: &State, mut work: BTreeSet<GcWork>) -> Vec<Action> {
    let mut actions = Vec::new();
    let mut done = BTreeSet::new();
    while let Some(item) = work.pop_first() {
        if !done.insert(item.clone()) {
            continue;
        }
        match item {
            GcWork::Dependent(loc) => plan_dependent(st, &loc, &mut actions),
            GcWork::Owner(loc) => {
                let Some(obj) = st.get(&loc.0, &loc.1) else {
                    continue;
                };
                if !json::is_deleting(&obj) {
                    continue;
                }
                let uid = json::uid(&obj).to_string();
                let fins = json::finalizers(&obj);
                let deps: Vec<Loc> = st
                    .dependents
                    .get(&uid)
                    .map(|d| d.iter().cloned().collect())
                    .unwrap_or_default();
                if fins.iter().any(|f| f == ORPHAN) {
                    if deps.is_empty() {
                        actions.push(Action::RemoveFinalizer(loc, uid, ORPHAN));
                    } else {
                        for d in deps {
                            if let Some(dep) = st.get(&d.0, &d.1) {
                                let duid = json::uid(&dep).to_string();
                                actions.push(Action::RemoveOwnerRefs(d, duid, vec![uid.clone()]));
                            }
                        }
                    }
                } else if fins.iter().any(|f| f == FOREGROUND) {
                    let blocking = deps.iter().any(|d| {
                        st.get(&d.0, &d.1).is_some_and(|dep| {
                            json::owner_refs(&dep).iter().any(|r| {
                                ref_uid(r) == uid
                                    && r.get("blockOwnerDeletion").and_then(Value::as_bool)
                                        == Some(true)
                            })
                        })
                    });
                    if !blocking {
                        actions.push(Action::RemoveFinalizer(loc, uid, FOREGROUND));
                    }
                    for d in deps {
                        work.insert(GcWork::Dependent(d));
                    }
                }
            }
            GcWork::Namespace(name) => {
                let ns_loc = (
                    StorageKey {
                        group: String::new(),
                        plural: "namespaces".into(),
                    },
                    ObjKey::new("", &name),
                );
                let Some(ns) = st.get(&ns_loc.0, &ns_loc.1) else {
                    continue;
                };
                if !json::is_deleting(&ns) {
                    continue;
                }
                let mut left = 0usize;
                for key in st.storage_keys() {
                    let Some(objs) = st.objects(&key) else {
                        continue;
                    };
                    let start = ObjKey::new(&name, "");
                    for (k, obj) in objs.range(start..) {
                        if k.namespace != name {
                            break;
                        }
                        left += 1;
                        if !json::is_deleting(obj) {
                            let uid = json::uid(obj).to_string();
                            actions.push(Action::Delete(
                                (key.clone(), k.clone()),
                                uid,
                                Propagation::Background,
                            ));
                        }
                    }
                }
                if left == 0 {
                    let uid = json::uid(&ns).to_string();
                    actions.push(Action::FinishNamespace(ns_loc, uid));
                }
            }
        }
    }
    actions
}

fn plan_dependent(st: &State, loc: &Loc, actions: &mut Vec<Action>) {
    let Some(obj) = st.get(&loc.0, &loc.1) else {
        return;
    };
    if json::is_deleting(&obj) {
        return;
    }
    let refs = json::owner_refs(&obj);
    if refs.is_empty() {
        return;
    }
    let uid = json::uid(&obj).to_string();
    let mut solid = 0usize;
    let mut dangling = Vec::new();
    let mut waiting = Vec::new();
    for r in &refs {
        let owner_uid = ref_uid(r).to_string();
        let owner = st.uids.get(&owner_uid).and_then(|(k, o)| st.get(k, o));
        match owner {
            None => dangling.push(owner_uid),
            Some(o)
                if json::is_deleting(&o)
                    && json::finalizers(&o).iter().any(|f| f == FOREGROUND) =>
            {
                waiting.push(owner_uid)
            }
            Some(_) => solid += 1,
        }
    }
    if solid > 0 {
        if !waiting.is_empty() {
            let mut drop_refs = dangling;
            drop_refs.extend(waiting);
            actions.push(Action::RemoveOwnerRefs(loc.clone(), uid, drop_refs));
        }
        return;
    }
    if !waiting.is_empty() {
        let policy = if st.dependents.contains_key(&uid) {
            Propagation::Foreground
        } else {
            Propagation::Background
        };
        actions.push(Action::Delete(loc.clone(), uid, policy));
    } else if !dangling.is_empty() {
        actions.push(Action::Delete(loc.clone(), uid, Propagation::Background));
    }
}

fn execute(engine: &Engine, action: Action) {
    let mut st = engine.lock();
    let (loc, uid) = match &action {
        Action::Delete(l, u, _)
        | Action::RemoveOwnerRefs(l, u, _)
        | Action::RemoveFinalizer(l, u, _)
        | Action::FinishNamespace(l, u) => (l.clone(), u.clone()),
    };
    let Some(cur) = st.get(&loc.0, &loc.1) else {
        return;
    };
    if json::uid(&cur) != uid {
        return;
    }
    let next = match action {
        Action::Delete(_, _, policy) => {
            let gen_tracked = st
                .registry
                .all()
                .find(|rt| rt.storage == loc.0)
                .is_some_and(|rt| tracks_generation(rt));
            let opts = DeleteOptions {
                propagation: Some(policy),
                uid: Some(uid),
                ..DeleteOptions::default()
            };
            let (group, plural) = (loc.0.group.clone(), loc.0.plural.clone());
            let _ = delete_locked(
                &mut st,
                &loc.0,
                &loc.1,
                cur,
                gen_tracked,
                &opts,
                (&group, &plural),
            );
            drop(st);
            engine.wake_gc();
            return;
        }
        Action::RemoveOwnerRefs(_, _, uids) => {
            let mut next = (*cur).clone();
            let refs: Vec<Value> = json::owner_refs(&cur)
                .into_iter()
                .filter(|r| !uids.iter().any(|u| u == ref_uid(r)))
                .collect();
            let m = json::meta_mut(&mut next);
            if refs.is_empty() {
                m.remove("ownerReferences");
            } else {
                m.insert("ownerReferences".into(), Value::Array(refs));
            }
            next
        }
        Action::RemoveFinalizer(_, _, f) => {
            let mut next = (*cur).clone();
            let fins: Vec<String> = json::finalizers(&cur)
                .into_iter()
                .filter(|x| x != f)
                .collect();
            json::set_finalizers(&mut next, &fins);
            next
        }
        Action::FinishNamespace(..) => {
            let mut next = (*cur).clone();
            if is_namespace(&loc.0)
                && let Some(spec) = next.get_mut("spec").and_then(Value::as_object_mut)
            {
                spec.insert("finalizers".into(), Value::Array(Vec::new()));
            }
            next
        }
    };
    if next != *cur {
        store_update(&mut st, &loc.0, loc.1, next);
        drop(st);
        engine.wake_gc();
    }
}
