//! What the machine controller keeps in memory between reconciles. None of
//! it is needed for correctness after a restart (the world is re-read and
//! the VMID is in spec); it makes the controller fast and polite:
//!
//! - VMID reservations in flight ([`VmidTable`]), per Proxmox cluster identity;
//! - clone slots: an adaptive window of clones per (identity, template),
//!   at most `clone_concurrency`, halved on lock timeouts ([`CloneSlots`]);
//! - `/cluster/resources` snapshots ([`ResourceCache`]) and template configs;
//! - learned task durations ([`TaskTimer`]);
//! - VMs being created (their memory counts before Proxmox lists it);
//! - per machine ([`Memo`]): the last config read (so a step after an upload
//!   does not read it again), whether the ISO was uploaded, the last task
//!   that succeeded, when the current task was issued, the bootstrap
//!   sentinel check ([`BootstrapCheck`]; after a restart it starts over);
//! - a lock per CAPI cluster so concurrent instance choices see each other;
//! - per machine, the object our last write returned ([`Written`]): no
//!   reconcile decides from an older one (see [`super::freshness`]).
//!
//! Every lock here is a `std::sync::Mutex` held only for map access, never
//! across an `await`; the per-cluster placement lock is a Tokio mutex.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;

use kube::runtime::reflector::ObjectRef;

use super::freshness::Written;
use super::node_tasks::NodeTasks;
use super::resources::{ResourceCache, StorageView};
use super::scheduler::PendingVm;
use super::timing::{Operation, TaskTimer};
use super::vmid::VmidTable;
use crate::api::ProxmoxMachine;
use crate::backoff::Backoff;
use crate::context::ControllerOptions;
use crate::pve::VmConfig;

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
            bootstrap_recheck_min: Duration::from_secs(5),
            bootstrap_recheck_max: Duration::from_secs(30),
            agent_exec_inline_wait: Duration::from_secs(2),
            bootstrap_patience: Duration::from_secs(600),
        }
    }
}

/// Clone slots per (identity, template VMID), with an adaptive window.
///
/// Proxmox runs clones of a stopped template in parallel (they share its
/// flock, SEMANTICS.md §6); what limits them is the storage: a storage
/// whose allocations queue behind a cluster-wide lock fails clones with
/// `got lock timeout` once too many wait. So the window starts at the
/// ceiling (`--clone-concurrency`), is halved (to at least 1) when a clone
/// of that template fails on a lock (multiplicative decrease), and grows by
/// one per clone that succeeds (additive increase) back to the ceiling —
/// TCP's congestion control, applied to clone storms.
///
/// Machines refused a slot wait in line, first come first served: a slot
/// that frees (a clone ended, the window grew) goes to the first in line,
/// whose machine is woken on the channel given to [`CloneSlots::new`]
/// instead of re-checking on a timer. A machine stays in line while it
/// keeps asking; one that has not asked for [`CloneSlots::stale_after`]
/// (it was placed elsewhere, paused, or failed) loses its place.
#[derive(Debug)]
pub struct CloneSlots {
    ceiling: usize,
    stale_after: Duration,
    state: Mutex<HashMap<(String, u32), Slots>>,
    wake: Option<mpsc::Sender<ObjectRef<ProxmoxMachine>>>,
}

#[derive(Debug)]
struct Slots {
    held: BTreeSet<String>,
    window: usize,
    line: VecDeque<InLine>,
}

#[derive(Debug)]
struct InLine {
    owner: String,
    machine: ObjectRef<ProxmoxMachine>,
    asked: Instant,
}

impl Slots {
    fn free(&self) -> usize {
        self.window.saturating_sub(self.held.len())
    }

    fn prune(&mut self, stale_after: Duration) {
        let now = Instant::now();
        self.line
            .retain(|w| now.saturating_duration_since(w.asked) < stale_after);
    }

    /// The machines in line that a free slot now awaits.
    fn next_up(&self) -> impl Iterator<Item = &ObjectRef<ProxmoxMachine>> {
        self.line.iter().take(self.free()).map(|w| &w.machine)
    }
}

/// The answer of [`CloneSlots::acquire`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotGrant {
    /// The slot is the caller's.
    Granted,
    /// The window is full (or the free slots go to machines that asked
    /// first): the caller is in line, `ahead` machines before it, and is
    /// woken when a slot is its own.
    InLine {
        /// Clones of the template running now.
        running: usize,
        /// Machines before the caller in line.
        ahead: usize,
    },
}

impl CloneSlots {
    /// Slots with a window of at most `ceiling` per template (at least 1).
    /// A machine in line loses its place when it has not asked for
    /// `stale_after`; machines whose slot frees are sent on `wake` (none
    /// when `None`: waiters then find out on their own re-check).
    pub fn new(
        ceiling: usize,
        stale_after: Duration,
        wake: Option<mpsc::Sender<ObjectRef<ProxmoxMachine>>>,
    ) -> CloneSlots {
        CloneSlots {
            ceiling: ceiling.max(1),
            stale_after,
            state: Mutex::new(HashMap::new()),
            wake,
        }
    }

    /// How long a machine keeps its place in line without asking again.
    pub fn stale_after(&self) -> Duration {
        self.stale_after
    }

    fn with<T>(&self, identity: &str, template: u32, f: impl FnOnce(&mut Slots) -> T) -> T {
        let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        f(Self::slots(&mut m, self.ceiling, identity, template))
    }

    fn slots<'m>(
        m: &'m mut HashMap<(String, u32), Slots>,
        ceiling: usize,
        identity: &str,
        template: u32,
    ) -> &'m mut Slots {
        m.entry((identity.to_string(), template))
            .or_insert_with(|| Slots {
                held: BTreeSet::new(),
                window: ceiling,
                line: VecDeque::new(),
            })
    }

    fn send(&self, machines: Vec<ObjectRef<ProxmoxMachine>>) {
        if let Some(tx) = &self.wake {
            for m in machines {
                // A full buffer drops the wake: the machine re-checks on
                // its own timer.
                let _ = tx.try_send(m);
            }
        }
    }

    /// Takes a slot for `owner` (idempotent), whose ProxmoxMachine is
    /// `machine`. Free slots go to the machines in line first, in the
    /// order they first asked; a caller that gets none joins (or keeps its
    /// place in) the line. The owner now asks for this template only, so
    /// it leaves every other line.
    pub fn acquire(
        &self,
        identity: &str,
        template: u32,
        owner: &str,
        machine: &ObjectRef<ProxmoxMachine>,
    ) -> SlotGrant {
        let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        for ((id, t), s) in m.iter_mut() {
            if id != identity || *t != template {
                s.line.retain(|w| w.owner != owner);
            }
        }
        let s = Self::slots(&mut m, self.ceiling, identity, template);
        if s.held.contains(owner) {
            return SlotGrant::Granted;
        }
        s.prune(self.stale_after);
        let place = s.line.iter().position(|w| w.owner == owner);
        let ahead = place.unwrap_or(s.line.len());
        if ahead < s.free() {
            if let Some(i) = place {
                s.line.remove(i);
            }
            s.held.insert(owner.to_string());
            return SlotGrant::Granted;
        }
        match place {
            Some(i) => s.line[i].asked = Instant::now(),
            None => s.line.push_back(InLine {
                owner: owner.to_string(),
                machine: machine.clone(),
                asked: Instant::now(),
            }),
        }
        SlotGrant::InLine {
            running: s.held.len(),
            ahead,
        }
    }

    /// Records a slot for a clone found running (after a restart), even
    /// beyond the window.
    pub fn adopt(&self, identity: &str, template: u32, owner: &str) {
        self.with(identity, template, |s| {
            s.held.insert(owner.to_string());
        });
    }

    /// Frees every slot `owner` holds and its places in line, and wakes
    /// the machines in line that the freed slots now await.
    pub fn release(&self, owner: &str) {
        let mut woken = Vec::new();
        {
            let mut m = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            for s in m.values_mut() {
                s.line.retain(|w| w.owner != owner);
                if s.held.remove(owner) {
                    s.prune(self.stale_after);
                    woken.extend(s.next_up().cloned());
                }
            }
        }
        self.send(woken);
    }

    /// A clone of the template succeeded: the window grows by one (up to
    /// the ceiling), and a machine in line the new slot awaits is woken.
    pub fn succeeded(&self, identity: &str, template: u32) {
        let ceiling = self.ceiling;
        let stale_after = self.stale_after;
        let woken: Vec<_> = self.with(identity, template, |s| {
            s.window = (s.window + 1).min(ceiling);
            s.prune(stale_after);
            s.next_up().cloned().collect()
        });
        self.send(woken);
    }

    /// A clone of the template failed on a lock (`got lock timeout`): the
    /// window halves, counted from the clones running now (at least 1).
    /// Returns the new window.
    pub fn congested(&self, identity: &str, template: u32) -> usize {
        self.with(identity, template, |s| {
            s.window = (s.window.min(s.held.len().max(1)) / 2).max(1);
            s.window
        })
    }

    /// Slots in use for a template.
    pub fn in_use(&self, identity: &str, template: u32) -> usize {
        self.with(identity, template, |s| s.held.len())
    }

    /// Machines in line for a template (including any that stopped asking
    /// but have not yet lost their place).
    pub fn in_line(&self, identity: &str, template: u32) -> usize {
        self.with(identity, template, |s| s.line.len())
    }

    /// The current window of a template.
    pub fn window(&self, identity: &str, template: u32) -> usize {
        self.with(identity, template, |s| s.window)
    }
}

/// The bootstrap sentinel check of one VM (see
/// [`crate::cloudinit::format::SENTINEL`]).
#[derive(Clone, Debug)]
pub struct BootstrapCheck {
    /// The VM checked.
    pub vmid: u32,
    /// When the guest agent was first seen reporting every address: the
    /// wait for the bootstrap began (counted from the first check after a
    /// restart).
    pub since: Instant,
    /// The check in flight: guest PID and when it was started.
    pub exec: Option<(u64, Instant)>,
    /// The addresses the agent reported right before the check in flight
    /// (the reconcile that reads its result reuses them).
    pub addresses: Option<Vec<crate::api::machine::DeviceAddresses>>,
    /// Checks that did not say `success`.
    pub failed: u32,
    /// What the last check that did not say `success` found.
    pub last: Option<String>,
    /// No new check before this instant.
    pub next_at: Option<Instant>,
    /// The sentinel said `success`.
    pub done: bool,
}

impl BootstrapCheck {
    /// A check of `vmid` whose wait begins now.
    pub fn new(vmid: u32) -> BootstrapCheck {
        BootstrapCheck {
            vmid,
            since: Instant::now(),
            exec: None,
            addresses: None,
            failed: 0,
            last: None,
            next_at: None,
            done: false,
        }
    }
}

/// What is remembered about one machine (by UID).
#[derive(Clone, Debug, Default)]
pub struct Memo {
    /// The last config read or derived from our own writes: `(vmid, node, config)`.
    pub config: Option<(u32, String, VmConfig)>,
    /// The ISO volume uploaded (and its task finished), e.g. `cephfs:iso/capmox-131-….iso`.
    pub iso_uploaded: Option<String>,
    /// The ISO volume whose upload task is running.
    pub iso_pending: Option<String>,
    /// The last task that succeeded, and for which VMID.
    pub last_success: Option<(u32, Operation)>,
    /// The task in flight: UPID, when issued, polls after its expected end.
    pub task: Option<(String, Instant, u32)>,
    /// How long after its issue the task in flight was last seen running
    /// (brackets its end for [`super::timing::observation`]).
    pub task_seen_running: Option<Duration>,
    /// When the requeue that reads the task in flight is due; a reconcile
    /// woken earlier by a watch does not ask Proxmox about the task.
    pub task_poll_at: Option<Instant>,
    /// The VMID the task in flight works on (`None` when the task was
    /// adopted from `status.taskRef`). A task issued by this process wins
    /// over an absent or older `status.taskRef`: it is observed, never
    /// issued again.
    pub task_vmid: Option<u32>,
    /// When the VM was started (to learn boot times).
    pub started_at: Option<Instant>,
    /// Listings older than this must not be used for this machine's VM.
    pub fresh_after: Option<Instant>,
    /// Template the clone in flight came from (for its clone slot).
    pub clone_template: Option<(String, u32)>,
    /// The bootstrap sentinel check.
    pub bootstrap: Option<BootstrapCheck>,
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
    pub clone_slots: CloneSlots,
    /// Listings.
    pub resources: ResourceCache,
    /// Learned task durations.
    pub timer: TaskTimer,
    /// Per-object failure backoff.
    pub backoff: Backoff,
    /// Task lists per node, and the tasks awaited there.
    pub node_tasks: NodeTasks,
    /// Wakes of [`MachineRuntime::node_tasks`], taken by the controller
    /// ([`MachineRuntime::take_wakes`]).
    wakes: Mutex<Option<tokio::sync::mpsc::Receiver<ObjectRef<ProxmoxMachine>>>>,
    memos: Mutex<HashMap<String, Memo>>,
    pending: Mutex<HashMap<(String, u32), (PendingVm, Instant)>>,
    templates: Mutex<HashMap<(String, u32), (VmConfig, Instant)>>,
    placement: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    iso_storages: Mutex<HashMap<(String, String), (StorageView, Instant)>>,
    written: Mutex<HashMap<String, Written>>,
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
        let clone_slots = CloneSlots::new(
            options.clone_concurrency,
            controller.scaled(options.slot_recheck) * 3,
            Some(node_tasks.waker()),
        );
        MachineRuntime {
            node_tasks,
            wakes: Mutex::new(Some(wakes)),
            vmids: VmidTable::new(),
            clone_slots,
            resources: ResourceCache::new(controller.scaled(options.resources_ttl)),
            timer: TaskTimer::new(scale),
            backoff: Backoff::new(
                controller.scaled(controller.backoff_base),
                controller.scaled(controller.backoff_max),
            ),
            options,
            time_scale: scale,
            memos: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            templates: Mutex::new(HashMap::new()),
            placement: Mutex::new(HashMap::new()),
            iso_storages: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
        }
    }

    /// The receiver of machines to reconcile now because a node's task
    /// list showed their task ended (see [`NodeTasks`]); `None` after the
    /// first call (one controller consumes them).
    pub fn take_wakes(&self) -> Option<tokio::sync::mpsc::Receiver<ObjectRef<ProxmoxMachine>>> {
        self.wakes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// `d × time_scale`, at least 1 ms.
    pub fn scaled(&self, d: Duration) -> Duration {
        d.mul_f64(self.time_scale).max(Duration::from_millis(1))
    }

    /// A copy of the machine's memo.
    pub fn memo(&self, uid: &str) -> Memo {
        self.memos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .cloned()
            .unwrap_or_default()
    }

    /// Changes the machine's memo.
    pub fn update_memo(&self, uid: &str, f: impl FnOnce(&mut Memo)) {
        let mut m = self.memos.lock().unwrap_or_else(PoisonError::into_inner);
        f(m.entry(uid.to_string()).or_default());
    }

    /// What this process last wrote for the machine (`None`: nothing since
    /// it started).
    pub fn written(&self, uid: &str) -> Option<Written> {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(uid)
            .cloned()
    }

    /// Records the object a successful write of ours returned.
    pub fn record_write(&self, uid: &str, obj: &crate::api::ProxmoxMachine) {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(uid.to_string())
            .or_default()
            .record(obj.clone());
    }

    /// A write of ours was refused with 409: the next reconcile of the
    /// machine reads it fresh.
    pub fn must_refresh(&self, uid: &str) {
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(uid.to_string())
            .or_default()
            .refresh = true;
    }

    /// The machine was read fresh after a 409: versions compare again.
    pub fn refreshed(&self, uid: &str) {
        if let Some(w) = self
            .written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get_mut(uid)
        {
            w.refresh = false;
        }
    }

    /// Forgets the machine (deleted).
    pub fn forget(&self, uid: &str) {
        self.memos
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        self.written
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uid);
        self.clone_slots.release(uid);
    }

    /// Records a VM this process is creating (its memory counts at once).
    pub fn add_pending(&self, identity: &str, vm: PendingVm) {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.insert((identity.to_string(), vm.vmid), (vm, Instant::now()));
    }

    /// VMs being created on `identity` (entries older than 10 minutes, or
    /// of VMs the listing now shows with their memory, are dropped).
    pub fn pending(&self, identity: &str, listed_with_memory: &BTreeSet<u32>) -> Vec<PendingVm> {
        let mut p = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        p.retain(|(id, vmid), (_, at)| {
            !(id == identity && listed_with_memory.contains(vmid))
                && at.elapsed() < Duration::from_secs(600)
        });
        p.iter()
            .filter(|((id, _), _)| id == identity)
            .map(|(_, (vm, _))| vm.clone())
            .collect()
    }

    /// A cached template config (younger than the template TTL).
    pub fn template_config(&self, identity: &str, vmid: u32) -> Option<VmConfig> {
        let t = self
            .templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        t.get(&(identity.to_string(), vmid))
            .filter(|(_, at)| at.elapsed() < self.options.template_ttl)
            .map(|(c, _)| c.clone())
    }

    /// Caches a template config.
    pub fn cache_template(&self, identity: &str, vmid: u32, config: VmConfig) {
        self.templates
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert((identity.to_string(), vmid), (config, Instant::now()));
    }

    /// The ISO storage chosen for VMs on `node` (kept for the template TTL:
    /// storage configuration rarely changes).
    pub fn iso_storage(&self, identity: &str, node: &str) -> Option<StorageView> {
        self.iso_storages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(identity.to_string(), node.to_string()))
            .filter(|(_, at)| at.elapsed() < self.options.template_ttl)
            .map(|(s, _)| s.clone())
    }

    /// Remembers the ISO storage of `node`.
    pub fn cache_iso_storage(&self, identity: &str, node: &str, storage: StorageView) {
        self.iso_storages
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                (identity.to_string(), node.to_string()),
                (storage, Instant::now()),
            );
    }

    /// The placement lock of one CAPI cluster (`namespace/name`).
    pub fn placement_lock(&self, cluster: &str) -> Arc<tokio::sync::Mutex<()>> {
        self.placement
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(cluster.to_string())
            .or_default()
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> ObjectRef<ProxmoxMachine> {
        ObjectRef::new(name).within("ns")
    }

    fn slots(ceiling: usize) -> CloneSlots {
        CloneSlots::new(ceiling, Duration::from_secs(90), None)
    }

    fn granted(s: &CloneSlots, id: &str, t: u32, owner: &str) -> bool {
        s.acquire(id, t, owner, &m(owner)) == SlotGrant::Granted
    }

    #[test]
    fn clone_slots_bound_per_template() {
        let s = slots(2);
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(granted(&s, "dc-a", 9000, "u1"), "idempotent");
        assert!(granted(&s, "dc-a", 9000, "u2"));
        assert!(!granted(&s, "dc-a", 9000, "u3"));
        assert!(granted(&s, "dc-a", 9001, "u3"), "another template");
        assert!(granted(&s, "dc-b", 9000, "u4"), "another Proxmox cluster");
        s.release("u1");
        assert!(
            granted(&s, "dc-a", 9000, "u5"),
            "u3 left this line when it got 9001"
        );
        s.adopt("dc-a", 9000, "u9");
        assert_eq!(s.in_use("dc-a", 9000), 3);
    }

    #[test]
    fn clone_window_halves_on_lock_timeouts_and_grows_back() {
        let s = slots(8);
        for i in 0..8 {
            assert!(granted(&s, "dc-a", 9000, &format!("u{i}")));
        }
        assert!(!granted(&s, "dc-a", 9000, "u8"), "at the ceiling");
        // u0's clone failed on a lock (its slot is released first): 7
        // still run, so the window is 3.
        s.release("u0");
        assert_eq!(s.congested("dc-a", 9000), 3);
        assert!(!granted(&s, "dc-a", 9000, "u8"), "7 still running > 3");
        for i in 1..6 {
            s.release(&format!("u{i}"));
        }
        assert_eq!(s.in_use("dc-a", 9000), 2);
        assert!(granted(&s, "dc-a", 9000, "u8"));
        assert!(!granted(&s, "dc-a", 9000, "u9"));
        // Repeated timeouts never close the window.
        for _ in 0..10 {
            s.congested("dc-a", 9000);
        }
        assert_eq!(s.window("dc-a", 9000), 1);
        // Successes grow it by one each, up to the ceiling.
        for _ in 0..20 {
            s.succeeded("dc-a", 9000);
        }
        assert_eq!(s.window("dc-a", 9000), 8);
        // Other templates and clusters are untouched.
        assert_eq!(s.window("dc-b", 9000), 8);
    }

    #[tokio::test]
    async fn a_freed_slot_goes_to_the_first_in_line_and_wakes_it() {
        let (tx, mut rx) = mpsc::channel(16);
        let s = CloneSlots::new(2, Duration::from_secs(90), Some(tx));
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(granted(&s, "dc-a", 9000, "u2"));
        assert_eq!(
            s.acquire("dc-a", 9000, "u3", &m("u3")),
            SlotGrant::InLine {
                running: 2,
                ahead: 0
            }
        );
        assert_eq!(
            s.acquire("dc-a", 9000, "u4", &m("u4")),
            SlotGrant::InLine {
                running: 2,
                ahead: 1
            }
        );
        assert_eq!(
            s.acquire("dc-a", 9000, "u3", &m("u3")),
            SlotGrant::InLine {
                running: 2,
                ahead: 0
            },
            "asking again keeps the place"
        );
        assert!(rx.try_recv().is_err(), "nothing freed yet");
        s.release("u1");
        assert_eq!(
            rx.try_recv().ok(),
            Some(m("u3")),
            "the first in line is woken"
        );
        assert!(rx.try_recv().is_err(), "only as many as slots freed");
        assert!(
            !granted(&s, "dc-a", 9000, "u5"),
            "a newcomer does not take the slot u3 was woken for"
        );
        assert!(!granted(&s, "dc-a", 9000, "u4"), "nor the second in line");
        assert!(granted(&s, "dc-a", 9000, "u3"));
        assert_eq!(s.in_line("dc-a", 9000), 2, "u4 and u5 wait");
        // The window grows after a success: the next in line is woken.
        s.congested("dc-a", 9000);
        assert_eq!(s.window("dc-a", 9000), 1);
        s.succeeded("dc-a", 9000);
        assert!(rx.try_recv().is_err(), "window 2, both held");
        s.release("u2");
        assert_eq!(rx.try_recv().ok(), Some(m("u4")));
        // A deleted machine leaves every line.
        s.release("u5");
        assert_eq!(s.in_line("dc-a", 9000), 1);
    }

    #[tokio::test]
    async fn a_machine_that_stopped_asking_loses_its_place() {
        let s = CloneSlots::new(1, Duration::from_millis(600), None);
        assert!(granted(&s, "dc-a", 9000, "u1"));
        assert!(!granted(&s, "dc-a", 9000, "gone"));
        assert!(!granted(&s, "dc-a", 9000, "u2"));
        s.release("u1");
        assert!(
            !granted(&s, "dc-a", 9000, "u2"),
            "gone asked just now: still first"
        );
        tokio::time::sleep(Duration::from_millis(700)).await;
        assert!(
            granted(&s, "dc-a", 9000, "u2"),
            "gone has not asked for 700 ms"
        );
        assert_eq!(s.in_line("dc-a", 9000), 0);
    }

    #[test]
    fn pending_vms_expire_when_listed() {
        let rt = MachineRuntime::new(&ControllerOptions::default(), MachineOptions::default());
        rt.add_pending(
            "dc-a",
            PendingVm {
                vmid: 131,
                node: "pve-a1".into(),
                memory: 1 << 30,
            },
        );
        rt.add_pending(
            "dc-b",
            PendingVm {
                vmid: 131,
                node: "pve-b1".into(),
                memory: 1 << 30,
            },
        );
        assert_eq!(rt.pending("dc-a", &BTreeSet::new()).len(), 1);
        assert_eq!(rt.pending("dc-a", &[131].into()).len(), 0);
        assert_eq!(
            rt.pending("dc-b", &BTreeSet::new()).len(),
            1,
            "other identity untouched"
        );
    }
}
