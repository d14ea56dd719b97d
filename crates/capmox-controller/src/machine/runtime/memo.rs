//! What this process remembers about one machine between reconciles: a
//! cache of its own observations and of what its own steps did. None of it
//! is needed for correctness after a restart (spec and status hold the
//! records, the world is read again); it saves calls.

use std::time::Duration;

use tokio::time::Instant;

use super::slots::TemplateKey;
use crate::api::machine::DeviceAddresses;
use crate::machine::decide::Operation;
use crate::machine::decide::{Plan, Power};
use crate::pve::{NodeName, VmConfig};

/// Our last view of the VM, kept while only our own steps change it (every
/// config write carries the `digest` read, so a concurrent edit fails the
/// write instead of going unseen).
#[derive(Clone, Debug, PartialEq)]
pub struct VmMemo {
    /// The VMID it is at.
    pub vmid: u32,
    /// The node it is on.
    pub node: NodeName,
    /// The config as read, or as our own writes left it.
    pub config: Option<std::sync::Arc<VmConfig>>,
    /// The power state, when a live read or our own task said it.
    pub power: Option<Power>,
}

/// The task in flight, as this process knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskMemo {
    /// Its UPID.
    pub upid: String,
    /// What it does.
    pub op: Operation,
    /// The VMID it works on (`None` when adopted from `status.taskRef`
    /// after a restart).
    pub vmid: Option<u32>,
    /// When this process issued it (or first saw it after a restart).
    pub since: Instant,
    /// Polls past its expected end.
    pub late_polls: u32,
    /// How long after `since` it was last seen running.
    pub seen_running: Option<Duration>,
    /// When the requeue that reads its end is due.
    pub poll_at: Option<Instant>,
    /// The template of a clone (its clone slot).
    pub template: Option<TemplateKey>,
    /// The ISO volume a volume deletion deletes.
    pub volume: Option<String>,
    /// For a task that changes the VM's power state (`qmstart`,
    /// `qmshutdown`, `qmstop`): the state the instance's newest listing
    /// showed when the task was issued, when it was the opposite of the
    /// task's goal. The listing's power states lag but never go back in
    /// time (docs/proxmox-semantics.md §9), so a later listing that shows
    /// the goal proves the change happened.
    pub listed_before: Option<Power>,
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
    pub addresses: Option<Vec<DeviceAddresses>>,
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
    /// Our last view of the VM.
    pub vm: Option<VmMemo>,
    /// The VMID whose bootstrap ISO upload ended.
    pub media_uploaded: Option<u32>,
    /// The task in flight.
    pub task: Option<TaskMemo>,
    /// When the VM was started (to learn boot times).
    pub started_at: Option<Instant>,
    /// Listings older than this must not be used for this machine's VM.
    pub fresh_after: Option<Instant>,
    /// The bootstrap sentinel check.
    pub bootstrap: Option<BootstrapCheck>,
    /// Node and template chosen for the clone, until it is issued.
    pub plan: Option<Plan>,
    /// The last check of Ignition bootstrap data, so a Secret is read
    /// again only when it changed.
    pub ignition: Option<IgnitionCheck>,
    /// The VMID whose destroy task this process saw end OK: while the
    /// machine is deleted, the VM there is known gone without a listing.
    pub destroyed: Option<u32>,
    /// The deletion's sweep of the instance's ISO storages found no ISO of
    /// this machine: nothing is uploaded while a machine is deleted, so
    /// later reconciles of the deletion need not list them again.
    pub media_swept: bool,
    /// When this process first reconciled the machine's deletion: an ISO
    /// listing sent after it shows every ISO the machine can have
    /// ([`super::iso_lists`]).
    pub deleting_since: Option<Instant>,
}

/// The result of checking an Ignition bootstrap data Secret
/// ([`crate::cloudinit::ignition::check`]) at one resourceVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnitionCheck {
    /// `namespace/name` of the Secret.
    pub secret: String,
    /// Its `metadata.resourceVersion` when checked.
    pub resource_version: String,
    /// `None`: usable; else the problem (the condition message).
    pub problem: Option<String>,
}

impl Memo {
    /// The VM view for `vmid`, if it is the one remembered.
    pub fn vm_at(&self, vmid: u32) -> Option<&VmMemo> {
        self.vm.as_ref().filter(|v| v.vmid == vmid)
    }

    /// Forgets the VM view (it is stale: a task ended, the VM moved).
    pub fn forget_vm(&mut self, now: Instant) {
        self.vm = None;
        self.fresh_after = Some(now);
    }
}
