//! What the machine controller keeps in memory between reconciles. None of
//! it is needed for correctness after a restart (the world is re-read, the
//! VMID is in spec, the bootstrap ISO is recorded in status); it makes the
//! controller fast and polite:
//!
//! | module | keeps |
//! |---|---|
//! | [`slots`] | clone slots: an adaptive window of clones per (Proxmox cluster, template) |
//! | [`inflight`] | placements in flight and VMs being created (spread and memory) |
//! | [`retries`] | retry state per machine and step (backoff that grows) |
//! | [`memo`] | per machine: our last view of the VM, the task in flight, the plan |
//! | [`resources`] | `/cluster/resources` snapshots shared by every machine of an instance |
//! | [`node_tasks`] | one task list per node answers every task awaited there |
//! | [`iso_lists`] | one ISO listing per storage answers the sweeps of machines deleted together |
//! | [`timing`] | learned task durations, when to poll |
//! | [`freshness`] | the object our last write returned (never decide from an older one) |
//! | [`ledger`] | where each machine's time goes (exported, never decided from) |
//!
//! VMID reservations in flight live in [`crate::machine::plan::vmid::VmidTable`].
//! Every lock here is a `std::sync::Mutex` held only for map access, never
//! across an `await`; the planning locks are Tokio mutexes.

pub mod freshness;
pub mod inflight;
pub mod iso_lists;
pub mod ledger;
pub mod memo;
pub mod node_tasks;
pub mod resources;
pub mod retries;
pub mod slots;
pub mod timing;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

use self::freshness::Written;
use self::inflight::InFlight;
use self::iso_lists::IsoLists;
use self::ledger::Ledger;
use self::memo::Memo;
use self::node_tasks::NodeTasks;
use self::resources::{ResourceCache, StorageView};
use self::retries::Retries;
use self::slots::{CloneSlots, TemplateKey};
use self::timing::TaskTimer;
use crate::api::ProxmoxMachine;
use crate::clients::Identity;
use crate::context::ControllerOptions;
use crate::machine::plan::vmid::VmidTable;
use crate::pve::{NodeName, VmConfig};

/// Knobs of the machine controller. Durations are **unscaled**; the runtime
/// applies `ControllerOptions::time_scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineOptions {
    /// Ceiling of concurrent clones per (Proxmox cluster, template); the
    /// window below it adapts to lock timeouts ([`CloneSlots`]). Default 128.
    pub clone_concurrency: usize,
    /// How often a machine in line for a clone slot re-checks on its own
    /// (it is woken when its slot frees; this is the safety net). A machine
    /// that has not asked for three times this loses its place. Default 30 s.
    pub slot_recheck: Duration,
    /// How long `/cluster/resources` listings are reused. Default 2 s.
    pub resources_ttl: Duration,
    /// How long a template's config is reused. Default 10 min.
    pub template_ttl: Duration,
    /// Guest shutdown timeout before a forced stop, **seconds** as sent to
    /// Proxmox (`timeout` of `status/shutdown`). Default 60.
    pub shutdown_timeout_secs: u64,
    /// A claim without an address for longer than this is reported as
    /// exhausted. Default 60 s.
    pub claim_patience: Duration,
    /// Shortest requeue after a poll. Default 200 ms.
    pub poll_floor: Duration,
    /// Requeue while waiting for something a watch reports (safety net). Default 5 min.
    pub resync: Duration,
    /// Requeue of a provisioned machine (notice migrations, vanished VMs). Default 10 min.
    pub steady: Duration,
    /// Re-check of something expected to change within seconds (a VM lock
    /// going away). Default 5 s.
    pub soon: Duration,
    /// Shortest interval between two bootstrap sentinel checks after one
    /// that did not say `success` (doubles per failed check). Default 5 s.
    pub bootstrap_recheck_min: Duration,
    /// Longest interval between two bootstrap sentinel checks. Default 30 s.
    pub bootstrap_recheck_max: Duration,
    /// The longest a reconcile waits in line for the bootstrap check's
    /// `exec` to end before reading its result (longer expected `exec`
    /// durations are read on a requeue). Default 2 s.
    pub agent_exec_inline_wait: Duration,
    /// After this long without bootstrap success the condition message
    /// says so (the machine is not failed: a MachineHealthCheck decides;
    /// CAPI's default `nodeStartupTimeout` is 10 min). Default 10 min.
    pub bootstrap_patience: Duration,
}

impl Default for MachineOptions {
    fn default() -> Self {
        MachineOptions {
            clone_concurrency: 128,
            slot_recheck: Duration::from_secs(30),
            resources_ttl: Duration::from_secs(2),
            template_ttl: Duration::from_secs(600),
            shutdown_timeout_secs: 60,
            claim_patience: Duration::from_secs(60),
            poll_floor: Duration::from_millis(200),
            resync: Duration::from_secs(300),
            steady: Duration::from_secs(600),
            soon: Duration::from_secs(5),
            bootstrap_recheck_min: Duration::from_secs(5),
            bootstrap_recheck_max: Duration::from_secs(30),
            agent_exec_inline_wait: Duration::from_secs(2),
            bootstrap_patience: Duration::from_secs(600),
        }
    }
}

/// A node of one Proxmox cluster: the key of per-node caches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeKey {
    /// The Proxmox cluster.
    pub identity: Identity,
    /// The node.
    pub node: NodeName,
}

/// The per-process state of the machine controller.
#[derive(Debug)]
pub struct MachineRuntime {
    /// Options (unscaled).
    pub options: MachineOptions,
    /// Time scale of the controller.
    pub time_scale: f64,
    /// VMID reservations.
    pub vmids: VmidTable,
    /// Clone slots.
    pub slots: CloneSlots,
    /// Placements in flight and VMs being created.
    pub inflight: InFlight,
    /// Retry state per machine and step.
    pub retries: Retries,
    /// Listings.
    pub resources: ResourceCache,
    /// Learned task durations.
    pub timer: TaskTimer,
    /// Task lists per node, and the tasks awaited there.
    pub node_tasks: NodeTasks,
    /// ISO listings per storage, for the deletions' sweeps.
    pub iso_lists: IsoLists,
    /// Where each machine's time goes.
    pub ledger: Ledger,
    /// Wakes of [`MachineRuntime::node_tasks`] and the clone slots, taken by
    /// the controller ([`MachineRuntime::take_wakes`]).
    wakes: Mutex<Option<mpsc::Receiver<ObjectRef<ProxmoxMachine>>>>,
    memos: Mutex<HashMap<String, Arc<Memo>>>,
    templates: Mutex<HashMap<TemplateKey, (VmConfig, Instant)>>,
    iso_storages: Mutex<HashMap<NodeKey, (StorageView, Instant)>>,
    written: Mutex<HashMap<String, Written>>,
    instance_locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MachineRuntime {
    /// A runtime for the controller's options.
    pub fn new(controller: &ControllerOptions, options: MachineOptions) -> MachineRuntime {
        let scale = if controller.time_scale.is_finite() && controller.time_scale > 0.0 {
            controller.time_scale
        } else {
            1.0
        };
        let (node_tasks, wakes) = NodeTasks::new();
        let slots = CloneSlots::new(
            options.clone_concurrency,
            controller.scaled(options.slot_recheck) * 3,
            Some(node_tasks.waker()),
        );
        MachineRuntime {
            node_tasks,
            iso_lists: IsoLists::default(),
            ledger: Ledger::default(),
            wakes: Mutex::new(Some(wakes)),
            vmids: VmidTable::new(),
            slots,
            inflight: InFlight::default(),
            retries: Retries::new(
                controller.scaled(controller.backoff_base),
                controller.scaled(controller.backoff_max),
            ),
            resources: ResourceCache::new(controller.scaled(options.resources_ttl)),
            timer: TaskTimer::new(scale),
            options,
            time_scale: scale,
            memos: Mutex::new(HashMap::new()),
            templates: Mutex::new(HashMap::new()),
            iso_storages: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            instance_locks: Mutex::new(HashMap::new()),
        }
    }

    /// The receiver of machines to reconcile now because a node's task
    /// list showed their task ended, or a clone slot freed for them;
    /// `None` after the first call (one controller consumes them).
    pub fn take_wakes(&self) -> Option<mpsc::Receiver<ObjectRef<ProxmoxMachine>>> {
        lock(&self.wakes).take()
    }

    /// `d × time_scale`, at least 1 ms.
    pub fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_scale).max(Duration::from_millis(1))
    }

    /// The shortest requeue (`poll_floor`, scaled, at least 5 ms).
    pub fn poll_floor(&self) -> Duration {
        self.scaled(self.options.poll_floor)
            .max(Duration::from_millis(5))
    }

    /// The machine's memo as it is now: a shared snapshot, not a copy (a
    /// later [`MachineRuntime::update_memo`] copies it only while a
    /// snapshot is still held).
    pub fn memo(&self, uid: &str) -> Arc<Memo> {
        lock(&self.memos).get(uid).cloned().unwrap_or_default()
    }

    /// Changes the machine's memo.
    pub fn update_memo<T>(&self, uid: &str, f: impl FnOnce(&mut Memo) -> T) -> T {
        f(Arc::make_mut(
            lock(&self.memos).entry(uid.to_string()).or_default(),
        ))
    }

    /// What this process last wrote for the machine (`None`: nothing since
    /// it started).
    pub fn written(&self, uid: &str) -> Option<Written> {
        lock(&self.written).get(uid).cloned()
    }

    /// The object our last write returned, when `rv` (the version of a
    /// stored copy of the machine) is one of our earlier versions; `None`
    /// when the copy is current or unknown. Neither is copied: the
    /// duplicate-address check asks this for every machine of the store.
    pub fn newer_written(&self, uid: &str, rv: Option<&str>) -> Option<Arc<ProxmoxMachine>> {
        let map = lock(&self.written);
        let w = map.get(uid)?;
        (freshness::classify(rv, Some(w)) == freshness::Freshness::Stale)
            .then(|| w.object.clone())
            .flatten()
    }

    /// Where `machine` (a stored copy, handed to a reconcile or just
    /// stored by the watch) stands relative to our last write
    /// ([`freshness::classify`]), without copying the record; the record
    /// then shares `machine` when it is the same version
    /// ([`Written::share`]: at 1,000 machines the second copies were 4 MB
    /// of the heap, docs/benchmarks.md). The machine controller calls this
    /// for every object its watch stores, and a reconcile for the object it
    /// is handed.
    pub fn seen(&self, uid: &str, machine: &Arc<ProxmoxMachine>) -> freshness::Freshness {
        let mut map = lock(&self.written);
        let Some(w) = map.get_mut(uid) else {
            return freshness::Freshness::Current;
        };
        w.share(machine);
        freshness::classify(machine.resource_version().as_deref(), Some(w))
    }

    /// Records the object a successful write of ours returned.
    pub fn record_write(&self, uid: &str, obj: &ProxmoxMachine) {
        lock(&self.written)
            .entry(uid.to_string())
            .or_default()
            .record(obj.clone());
    }

    /// A write of ours was refused with 409: the next reconcile of the
    /// machine reads it fresh.
    pub fn must_refresh(&self, uid: &str) {
        lock(&self.written)
            .entry(uid.to_string())
            .or_default()
            .refresh = true;
    }

    /// The machine was read fresh after a 409: versions compare again.
    pub fn refreshed(&self, uid: &str) {
        if let Some(w) = lock(&self.written).get_mut(uid) {
            w.refresh = false;
        }
    }

    /// Forgets the machine (deleted): its memo, its last write, its clone
    /// slot and place in line, its placement in flight, its retry state
    /// and its VMID reservations.
    pub fn forget(&self, uid: &str) {
        lock(&self.memos).remove(uid);
        lock(&self.written).remove(uid);
        self.slots.release(uid);
        self.inflight.settle(uid);
        self.retries.forget(uid);
        self.vmids.release_everywhere(uid);
    }

    /// A cached template config (younger than the template TTL).
    pub fn template_config(&self, key: &TemplateKey) -> Option<VmConfig> {
        lock(&self.templates)
            .get(key)
            .filter(|(_, at)| at.elapsed() < self.options.template_ttl)
            .map(|(c, _)| c.clone())
    }

    /// Caches a template config.
    pub fn cache_template(&self, key: TemplateKey, config: VmConfig) {
        lock(&self.templates).insert(key, (config, Instant::now()));
    }

    /// The ISO storage chosen for VMs on a node (kept for the template TTL:
    /// storage configuration rarely changes).
    pub fn iso_storage(&self, key: &NodeKey) -> Option<StorageView> {
        lock(&self.iso_storages)
            .get(key)
            .filter(|(_, at)| at.elapsed() < self.options.template_ttl)
            .map(|(s, _)| s.clone())
    }

    /// Remembers the ISO storage of a node.
    pub fn cache_iso_storage(&self, key: NodeKey, storage: StorageView) {
        lock(&self.iso_storages).insert(key, (storage, Instant::now()));
    }

    /// The instance-choice lock of one CAPI cluster (`namespace/name`):
    /// concurrent choices see each other's result.
    pub fn instance_lock(&self, cluster: &str) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.instance_locks)
            .entry(cluster.to_string())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProxmoxMachineSpec;
    use crate::machine::runtime::freshness::Freshness;

    fn at(rv: &str) -> ProxmoxMachine {
        let mut m = ProxmoxMachine::new("m1", ProxmoxMachineSpec::default());
        m.metadata.uid = Some("u1".into());
        m.metadata.resource_version = Some(rv.into());
        m
    }

    #[test]
    fn the_record_shares_the_stored_copy_of_its_own_version_only() {
        let rt = MachineRuntime::new(&ControllerOptions::default(), MachineOptions::default());
        assert_eq!(rt.seen("u1", &Arc::new(at("3"))), Freshness::Current);
        rt.record_write("u1", &at("5"));
        let kept = |rt: &MachineRuntime| rt.written("u1").and_then(|w| w.object).unwrap();

        // Another version (older or someone else's): the record keeps its own.
        let other = Arc::new(at("4"));
        assert_eq!(rt.seen("u1", &other), Freshness::Unknown);
        assert!(!Arc::ptr_eq(&kept(&rt), &other));

        // The stored copy of our last write: one object for both.
        let stored = Arc::new(at("5"));
        assert!(!Arc::ptr_eq(&kept(&rt), &stored));
        assert_eq!(rt.seen("u1", &stored), Freshness::Current);
        assert!(Arc::ptr_eq(&kept(&rt), &stored));

        // Older versions are still recognised after the swap.
        rt.record_write("u1", &at("7"));
        assert_eq!(rt.seen("u1", &Arc::new(at("5"))), Freshness::Stale);
    }
}
