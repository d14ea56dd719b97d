//! Where each machine's time goes, while it is created and while it is
//! deleted: every instant of a machine's life between its first reconcile
//! and provisioned (or gone) is booked to exactly one [`Phase`], and the
//! sums are exported as `capmox_machine_seconds_total{lifecycle,phase}`
//! (seconds, real time). The benchmark divides them by the machines of a
//! phase (docs/benchmarks.md, "where the time and calls go"). Nothing
//! decides from them.
//!
//! - Between two reconciles a machine waits for what its last reconcile
//!   ended on (a task, a clone slot, the agent, a watched object, a retry):
//!   that phase, until the requeue it asked for was due or a wake came
//!   ([`Ledger::woken`]: a node's task list showed its task ended, a clone
//!   slot freed); from then on until the reconcile starts it waits for a
//!   worker ([`Phase::Queue`]). A change of a watched object that wakes it
//!   earlier is not seen here: the whole wait stays with its phase.
//! - A reconcile's own time is split into Proxmox calls, Kubernetes calls
//!   ([`crate::spent`]), planning (choosing instance, node, template and
//!   VMID, beyond its calls) and the rest ([`Phase::Controller`]).
//!
//! Memory: one small entry per machine being created or deleted; none for
//! a provisioned one.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::machine::decide::{Operation, Until};
use crate::reasons::Reason;

/// What a machine's time is spent for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lifecycle {
    /// From the first reconcile to provisioned.
    Create,
    /// From the first reconcile after the deletion request to gone.
    Delete,
}

impl Lifecycle {
    /// The label value (`create`, `delete`).
    pub fn as_str(self) -> &'static str {
        match self {
            Lifecycle::Create => "create",
            Lifecycle::Delete => "delete",
        }
    }
}

/// What a machine waits for, or what its reconcile spends time on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// Due (its requeue time came, or a wake), waiting for a worker.
    Queue,
    /// Waiting for a watched Kubernetes object: which one, when the wait's
    /// reason says ([`Awaited`]).
    Objects(Awaited),
    /// In line for a clone slot of its template.
    CloneSlot,
    /// A Proxmox lock on the VM expected to go away soon.
    VmLock,
    /// A Proxmox task of this operation runs.
    Task(Operation),
    /// Waiting for the guest agent to report the addresses.
    Agent,
    /// Waiting for the bootstrap sentinel.
    Bootstrap,
    /// Waiting for the retry of a failed step, or for an instance that
    /// could not be asked.
    Retry,
    /// In a reconcile: inside Proxmox API calls.
    ProxmoxCalls,
    /// In a reconcile: inside Kubernetes API calls.
    KubernetesCalls,
    /// In a reconcile: choosing instance, node, template and VMID, beyond
    /// their calls (includes waiting for the planning locks).
    Scheduler,
    /// In a reconcile: everything else (decisions, rendering the ISO,
    /// waiting for a listing another reconcile reads).
    Controller,
}

/// The Kubernetes object a machine waits for (the `objects_*` phases).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Awaited {
    /// Its owner Machine (set by CAPI's Machine controller).
    Owner,
    /// The Cluster, its ProxmoxCluster, or the Cluster's infrastructure.
    Cluster,
    /// The Machine's bootstrap data Secret.
    BootstrapData,
    /// The IPAM provider's addresses for its claims.
    IpAddresses,
    /// Anything else (a spec to fix, a pool to create, …).
    Other,
}

impl Awaited {
    /// What a wait for a change with `reason` waits for.
    pub fn of(reason: &Reason) -> Awaited {
        match reason {
            Reason::WaitingForOwner => Awaited::Owner,
            Reason::WaitingForCluster
            | Reason::WaitingForProxmoxCluster
            | Reason::WaitingForClusterInfrastructure => Awaited::Cluster,
            Reason::WaitingForBootstrapData(_) => Awaited::BootstrapData,
            Reason::WaitingForIpAddresses(_) => Awaited::IpAddresses,
            _ => Awaited::Other,
        }
    }
}

impl Phase {
    /// What a machine waits for after a reconcile that waits `until` for
    /// `reason` (`None`: nothing, it is provisioned and well).
    pub fn of_wait(until: Until, reason: &Reason) -> Option<Phase> {
        Some(match until {
            Until::Change => Phase::Objects(Awaited::of(reason)),
            Until::Task(op) => Phase::Task(op),
            Until::Boot => Phase::Agent,
            Until::After(_) => Phase::Bootstrap,
            Until::Soon => Phase::VmLock,
            Until::Slot => Phase::CloneSlot,
            Until::Retry(_) | Until::Backoff => Phase::Retry,
            Until::Steady => return None,
        })
    }

    /// The label value: `queue`, `objects`, `task_clone`, ….
    pub fn label(self) -> String {
        match self {
            Phase::Queue => "queue".into(),
            Phase::Objects(Awaited::Owner) => "objects_owner".into(),
            Phase::Objects(Awaited::Cluster) => "objects_cluster".into(),
            Phase::Objects(Awaited::BootstrapData) => "objects_bootstrap_data".into(),
            Phase::Objects(Awaited::IpAddresses) => "objects_ip_addresses".into(),
            Phase::Objects(Awaited::Other) => "objects".into(),
            Phase::CloneSlot => "clone_slot".into(),
            Phase::VmLock => "vm_lock".into(),
            Phase::Task(op) => format!("task_{}", op.as_str()),
            Phase::Agent => "agent".into(),
            Phase::Bootstrap => "bootstrap".into(),
            Phase::Retry => "retry".into(),
            Phase::ProxmoxCalls => "proxmox_calls".into(),
            Phase::KubernetesCalls => "kubernetes_calls".into(),
            Phase::Scheduler => "scheduler".into(),
            Phase::Controller => "controller".into(),
        }
    }
}

/// Time booked to one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Share {
    /// Creation or deletion.
    pub lifecycle: Lifecycle,
    /// The phase.
    pub phase: Phase,
    /// How long.
    pub time: Duration,
}

/// What one reconcile spent, as [`Ledger::end`] books it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReconcileTime {
    /// Its wall time.
    pub wall: Duration,
    /// Inside Proxmox calls.
    pub proxmox: Duration,
    /// Inside Kubernetes calls.
    pub kubernetes: Duration,
    /// Planning, beyond its calls.
    pub scheduler: Duration,
}

/// What a machine waits for after a reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiting {
    /// Creation or deletion.
    pub lifecycle: Lifecycle,
    /// For what.
    pub phase: Phase,
}

#[derive(Debug)]
struct Entry {
    since: Instant,
    waiting: Waiting,
    ready_at: Option<Instant>,
}

/// The ledger: per machine (`namespace/name`), what it waits for since when.
#[derive(Debug, Default)]
pub struct Ledger {
    entries: Mutex<HashMap<String, Entry>>,
}

impl Ledger {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A reconcile of `key` starts at `now`: the wait since the last one,
    /// split into its phase and the queue (after it was due or woken).
    pub fn begin(&self, key: &str, now: Instant) -> Vec<Share> {
        let Some(e) = self.entries().remove(key) else {
            return Vec::new();
        };
        let ready = e.ready_at.unwrap_or(now).clamp(e.since, now);
        let mut out = vec![Share {
            lifecycle: e.waiting.lifecycle,
            phase: e.waiting.phase,
            time: ready - e.since,
        }];
        if now > ready {
            out.push(Share {
                lifecycle: e.waiting.lifecycle,
                phase: Phase::Queue,
                time: now - ready,
            });
        }
        out
    }

    /// A reconcile of `key` ended at `now` having spent `spent`, in
    /// `lifecycle` (`None`: the machine is provisioned, or was not
    /// tracked); from now on it waits for `next` (`None`: provisioned or
    /// gone), due again after `due` (`None`: when a watched object changes).
    /// Answers the reconcile's shares.
    pub fn end(
        &self,
        key: &str,
        now: Instant,
        lifecycle: Option<Lifecycle>,
        spent: ReconcileTime,
        next: Option<Waiting>,
        due: Option<Duration>,
    ) -> Vec<Share> {
        let mut entries = self.entries();
        match next {
            Some(w) => {
                entries.insert(
                    key.to_string(),
                    Entry {
                        since: now,
                        waiting: w,
                        ready_at: due.map(|d| now + d),
                    },
                );
            }
            None => {
                entries.remove(key);
            }
        }
        drop(entries);
        let Some(lifecycle) = lifecycle.or(next.map(|w| w.lifecycle)) else {
            return Vec::new();
        };
        let calls = spent.proxmox + spent.kubernetes + spent.scheduler;
        [
            (Phase::ProxmoxCalls, spent.proxmox),
            (Phase::KubernetesCalls, spent.kubernetes),
            (Phase::Scheduler, spent.scheduler),
            (Phase::Controller, spent.wall.saturating_sub(calls)),
        ]
        .into_iter()
        .filter(|(_, t)| !t.is_zero())
        .map(|(phase, time)| Share {
            lifecycle,
            phase,
            time,
        })
        .collect()
    }

    /// `key` was woken at `now` (its task ended, its clone slot freed):
    /// its wait ends now unless it was due earlier.
    pub fn woken(&self, key: &str, now: Instant) {
        if let Some(e) = self.entries().get_mut(key) {
            e.ready_at = Some(e.ready_at.map_or(now, |r| r.min(now)));
        }
    }

    /// Machines in the ledger.
    pub fn len(&self) -> usize {
        self.entries().len()
    }

    /// Whether no machine is in the ledger.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn every_instant_is_booked_once() {
        let l = Ledger::default();
        let t0 = Instant::now();
        // First reconcile: nothing before it; it spent 10 ms, 4 in Proxmox
        // calls, 1 in Kubernetes calls, 2 planning; then a clone runs,
        // due in 100 ms.
        assert!(l.begin("ns/m", t0).is_empty());
        let spent = ReconcileTime {
            wall: ms(10),
            proxmox: ms(4),
            kubernetes: ms(1),
            scheduler: ms(2),
        };
        let clone = Waiting {
            lifecycle: Lifecycle::Create,
            phase: Phase::Task(Operation::Clone),
        };
        let t1 = t0 + ms(10);
        let r = l.end(
            "ns/m",
            t1,
            Some(Lifecycle::Create),
            spent,
            Some(clone),
            Some(ms(100)),
        );
        let booked: Vec<(Phase, Duration)> = r.iter().map(|s| (s.phase, s.time)).collect();
        assert_eq!(
            booked,
            vec![
                (Phase::ProxmoxCalls, ms(4)),
                (Phase::KubernetesCalls, ms(1)),
                (Phase::Scheduler, ms(2)),
                (Phase::Controller, ms(3)),
            ]
        );
        // The next reconcile starts 130 ms later: 100 ms of clone, 30 ms
        // waiting for a worker.
        let r = l.begin("ns/m", t1 + ms(130));
        assert_eq!(
            r,
            vec![
                Share {
                    lifecycle: Lifecycle::Create,
                    phase: Phase::Task(Operation::Clone),
                    time: ms(100),
                },
                Share {
                    lifecycle: Lifecycle::Create,
                    phase: Phase::Queue,
                    time: ms(30),
                },
            ]
        );
        // Begun twice without an end in between: nothing is booked twice.
        assert!(l.begin("ns/m", t1 + ms(140)).is_empty());
    }

    #[test]
    fn a_wake_ends_the_wait_early_and_done_forgets() {
        let l = Ledger::default();
        let t0 = Instant::now();
        let slot = Waiting {
            lifecycle: Lifecycle::Create,
            phase: Phase::CloneSlot,
        };
        l.end(
            "ns/m",
            t0,
            None,
            ReconcileTime::default(),
            Some(slot),
            Some(ms(1000)),
        );
        assert_eq!(l.len(), 1);
        l.woken("ns/m", t0 + ms(50));
        // A later wake does not move the ready time.
        l.woken("ns/m", t0 + ms(70));
        let r = l.begin("ns/m", t0 + ms(60));
        assert_eq!(r[0].phase, Phase::CloneSlot);
        assert_eq!(r[0].time, ms(50));
        assert_eq!(r[1].phase, Phase::Queue);
        assert_eq!(r[1].time, ms(10));
        // Waiting for a watched object (no due time): all of it is that wait.
        let objects = Waiting {
            lifecycle: Lifecycle::Create,
            phase: Phase::Objects(Awaited::Other),
        };
        l.end(
            "ns/m",
            t0 + ms(60),
            None,
            ReconcileTime::default(),
            Some(objects),
            None,
        );
        let r = l.begin("ns/m", t0 + ms(560));
        assert_eq!(
            r,
            vec![Share {
                lifecycle: Lifecycle::Create,
                phase: Phase::Objects(Awaited::Other),
                time: ms(500),
            }]
        );
        // Provisioned: forgotten; its reconcile is booked to creation.
        let r = l.end(
            "ns/m",
            t0 + ms(570),
            Some(Lifecycle::Create),
            ReconcileTime {
                wall: ms(10),
                ..ReconcileTime::default()
            },
            None,
            None,
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].phase, Phase::Controller);
        assert!(l.is_empty());
        // A provisioned machine's steady reconcile books nothing.
        assert!(
            l.end("ns/m", t0, None, ReconcileTime::default(), None, None)
                .is_empty()
        );
        // Woken while not in the ledger: nothing.
        l.woken("ns/x", t0);
        assert!(l.is_empty());
    }

    #[test]
    fn what_a_wait_is_booked_to() {
        let idle = Reason::NotPaused;
        assert_eq!(
            Phase::of_wait(Until::Task(Operation::Start), &idle),
            Some(Phase::Task(Operation::Start))
        );
        assert_eq!(Phase::of_wait(Until::Slot, &idle), Some(Phase::CloneSlot));
        assert_eq!(Phase::of_wait(Until::Boot, &idle), Some(Phase::Agent));
        assert_eq!(Phase::of_wait(Until::Soon, &idle), Some(Phase::VmLock));
        assert_eq!(
            Phase::of_wait(Until::Change, &Reason::WaitingForOwner),
            Some(Phase::Objects(Awaited::Owner))
        );
        assert_eq!(
            Phase::of_wait(Until::Change, &Reason::WaitingForIpAddresses("x".into())),
            Some(Phase::Objects(Awaited::IpAddresses))
        );
        assert_eq!(
            Phase::of_wait(Until::Change, &Reason::InvalidSpec("x".into()))
                .map(Phase::label)
                .as_deref(),
            Some("objects")
        );
        assert_eq!(
            Phase::of_wait(Until::After(Duration::from_secs(5)), &idle),
            Some(Phase::Bootstrap)
        );
        assert_eq!(Phase::of_wait(Until::Backoff, &idle), Some(Phase::Retry));
        assert_eq!(
            Phase::of_wait(Until::Retry(Duration::from_secs(1)), &idle),
            Some(Phase::Retry)
        );
        assert_eq!(Phase::of_wait(Until::Steady, &idle), None);
    }

    #[test]
    fn labels() {
        assert_eq!(Phase::Task(Operation::Clone).label(), "task_clone");
        assert_eq!(Phase::CloneSlot.label(), "clone_slot");
        assert_eq!(Lifecycle::Delete.as_str(), "delete");
    }
}
