//! When each worker ProxmoxMachine appeared, became provisioned and went
//! away — from a watch, so a phase's end is the instant the event arrived,
//! not the next tick of a polling loop, and following 1,000 objects costs
//! the API server one watch instead of a list per tick.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use kube::api::{Api, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use serde_json::Value;
use tokio::task::JoinHandle;

use crate::observe::proxmox_machine_resource;

/// One worker's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Life {
    /// First seen.
    pub seen: Instant,
    /// `status.initialization.provisioned` first seen true.
    pub provisioned: Option<Instant>,
    /// Deletion (the object gone).
    pub gone: Option<Instant>,
}

/// What the watch saw, by ProxmoxMachine name.
#[derive(Debug, Default)]
struct State {
    lives: HashMap<String, Life>,
    /// Names listed since the last `Init` (a re-list after a broken watch).
    relisted: Option<BTreeSet<String>>,
}

impl State {
    fn apply(&mut self, obj: &DynamicObject, prefix: &str, now: Instant) {
        let Some(name) = obj.metadata.name.clone() else {
            return;
        };
        if !name.starts_with(prefix) {
            return;
        }
        if let Some(r) = &mut self.relisted {
            r.insert(name.clone());
        }
        let provisioned = obj
            .data
            .pointer("/status/initialization/provisioned")
            .and_then(Value::as_bool)
            == Some(true);
        let life = self.lives.entry(name).or_insert(Life {
            seen: now,
            provisioned: None,
            gone: None,
        });
        life.gone = None;
        if provisioned && life.provisioned.is_none() {
            life.provisioned = Some(now);
        }
    }

    fn delete(&mut self, name: &str, now: Instant) {
        if let Some(l) = self.lives.get_mut(name)
            && l.gone.is_none()
        {
            l.gone = Some(now);
        }
    }
}

/// The watch on the scenario namespace's ProxmoxMachines whose name starts
/// with a prefix (the workers).
pub struct Tracker {
    state: Arc<Mutex<State>>,
    task: JoinHandle<()>,
}

impl std::fmt::Debug for Tracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracker").finish_non_exhaustive()
    }
}

/// Counts at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Workers that exist.
    pub live: usize,
    /// Of those, provisioned.
    pub provisioned: usize,
}

impl Tracker {
    /// Starts watching ProxmoxMachines of `namespace` named `prefix…`.
    pub fn start(client: kube::Client, namespace: &str, prefix: &str) -> Tracker {
        let api: Api<DynamicObject> =
            Api::namespaced_with(client, namespace, &proxmox_machine_resource());
        let state = Arc::new(Mutex::new(State::default()));
        let s = state.clone();
        let prefix = prefix.to_string();
        let task = tokio::spawn(async move {
            let mut stream = watcher::watcher(api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(ev) = stream.next().await {
                let now = Instant::now();
                let Ok(ev) = ev else { continue };
                let mut st = s.lock().unwrap_or_else(PoisonError::into_inner);
                match ev {
                    Event::Apply(o) => st.apply(&o, &prefix, now),
                    Event::Delete(o) => {
                        if let Some(n) = &o.metadata.name {
                            st.delete(n, now);
                        }
                    }
                    Event::Init => st.relisted = Some(BTreeSet::new()),
                    Event::InitApply(o) => st.apply(&o, &prefix, now),
                    Event::InitDone => {
                        let listed = st.relisted.take().unwrap_or_default();
                        let missing: Vec<String> = st
                            .lives
                            .iter()
                            .filter(|(n, l)| l.gone.is_none() && !listed.contains(*n))
                            .map(|(n, _)| n.clone())
                            .collect();
                        for n in missing {
                            st.delete(&n, now);
                        }
                    }
                }
            }
        });
        Tracker { state, task }
    }

    fn with<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.state.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Live and provisioned workers now.
    pub fn counts(&self) -> Counts {
        self.with(|s| {
            let live: Vec<&Life> = s.lives.values().filter(|l| l.gone.is_none()).collect();
            Counts {
                live: live.len(),
                provisioned: live.iter().filter(|l| l.provisioned.is_some()).count(),
            }
        })
    }

    /// The instant the last live worker became provisioned (`None` while one is not).
    pub fn all_provisioned_at(&self) -> Option<Instant> {
        self.with(|s| {
            s.lives
                .values()
                .filter(|l| l.gone.is_none())
                .map(|l| l.provisioned)
                .try_fold(None, |acc: Option<Instant>, p| Some(acc.max(Some(p?))))
                .flatten()
        })
    }

    /// The instant the last worker went (`None` while one is live or none ever was).
    pub fn all_gone_at(&self) -> Option<Instant> {
        self.with(|s| {
            s.lives
                .values()
                .map(|l| l.gone)
                .try_fold(None, |acc: Option<Instant>, g| Some(acc.max(Some(g?))))
                .flatten()
        })
    }

    /// The first instant a worker appeared after `after`.
    pub fn first_seen_after(&self, after: Instant) -> Option<Instant> {
        self.with(|s| {
            s.lives
                .values()
                .map(|l| l.seen)
                .filter(|t| *t >= after)
                .min()
        })
    }

    /// The names of the live workers, sorted.
    pub fn live_names(&self) -> Vec<String> {
        self.with(|s| {
            let mut names: Vec<String> = s
                .lives
                .iter()
                .filter(|(_, l)| l.gone.is_none())
                .map(|(n, _)| n.clone())
                .collect();
            names.sort();
            names
        })
    }

    /// The instant the last of `names` went (`None` while one is live;
    /// a name never seen counts as gone at no time).
    pub fn all_gone_of(&self, names: &[String]) -> Option<Instant> {
        self.with(|s| {
            names
                .iter()
                .filter_map(|n| s.lives.get(n))
                .map(|l| l.gone)
                .try_fold(None, |acc: Option<Instant>, g| Some(acc.max(Some(g?))))
        })
        .map(|t| t.unwrap_or_else(Instant::now))
    }

    /// Per provisioned live worker first seen at or after `after`: from its
    /// creation to provisioned.
    pub fn provision_times_since(&self, after: Instant) -> Vec<std::time::Duration> {
        self.with(|s| {
            s.lives
                .values()
                .filter(|l| l.gone.is_none() && l.seen >= after)
                .filter_map(|l| l.provisioned.map(|p| p.saturating_duration_since(l.seen)))
                .collect()
        })
    }

    /// Forgets workers that are gone (between phases).
    pub fn forget_gone(&self) {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .lives
            .retain(|_, l| l.gone.is_none());
    }

    /// Stops the watch.
    pub fn stop(self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pm(name: &str, provisioned: bool) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
            "kind": "ProxmoxMachine",
            "metadata": {"name": name},
            "status": {"initialization": {"provisioned": provisioned}}
        }))
        .unwrap()
    }

    #[test]
    fn lives_follow_events() {
        let t0 = Instant::now();
        let t1 = t0 + std::time::Duration::from_secs(1);
        let mut s = State::default();
        s.apply(&pm("bench-md-a", false), "bench-md-", t0);
        s.apply(&pm("bench-control-plane-x", true), "bench-md-", t0);
        assert_eq!(s.lives.len(), 1, "only the prefix is followed");
        s.apply(&pm("bench-md-a", true), "bench-md-", t1);
        s.apply(
            &pm("bench-md-a", true),
            "bench-md-",
            t1 + t1.duration_since(t0),
        );
        assert_eq!(
            s.lives["bench-md-a"].provisioned,
            Some(t1),
            "first time only"
        );
        // A re-list that misses an object counts it as gone.
        s.relisted = Some(BTreeSet::new());
        s.apply(&pm("bench-md-b", false), "bench-md-", t1);
        let listed = s.relisted.take().unwrap();
        assert!(listed.contains("bench-md-b") && !listed.contains("bench-md-a"));
        s.delete("bench-md-a", t1);
        assert_eq!(s.lives["bench-md-a"].gone, Some(t1));
    }
}
