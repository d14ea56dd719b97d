//! The decision core: a pure function from what a reconcile observed
//! ([`Facts`]) to the next [`Step`] (STYLE.md 4).
//!
//! The executor ([`super::reconcile`](mod@super::reconcile)) gathers facts lazily — [`decide`]
//! answers `Observe…` when it needs a fact that was not read yet — performs
//! the one step decided, records it (spec, `status.taskRef`), and returns.
//! Every reconcile re-reads the world, so a crash between any two steps is
//! harmless: the VMID is in `spec` before the clone is issued, the VM carries
//! the machine's marker from the clone on, and each step is chosen from the
//! VM's observed state, never from a remembered phase.
//!
//! Creation, in order: preconditions (owner Machine, Cluster, pause,
//! finalizer, valid spec, cluster infrastructure provisioned, bootstrap
//! data) → instance → IP claims → clone (VMID reserved and written first) →
//! upload the bootstrap ISO → one config write (CPU, memory, NICs, tags,
//! options, data disks, the ISO as CD-ROM) → grow disks → start → addresses
//! → bootstrap finished (the sentinel file, read through the guest agent,
//! unless `checks.skipCloudInitStatus` or `checks.skipQemuGuestAgent`) →
//! finish (eject and delete the ISO, providerID, provisioned). Bootstrap
//! data in a format that cannot be delivered (Ignition) is refused before
//! any Proxmox call.
//!
//! Deletion: shutdown (forced after a timeout) → destroy with `purge` and
//! `destroy-unreferenced-disks` → the VMID gone → delete the ISO → release
//! the IP claims → drop the finalizer. A VM that is not ours is never
//! touched; an unreachable instance is a condition and a retry, never a
//! silent hang.

use std::net::IpAddr;

use pve_client::options::Tags;
use pve_client::{ConflictKind, TaskFailureKind};

use super::addresses;
use super::disks::{self, Resize};
use super::marker::Marker;
use super::timing::Operation;
use super::vmconfig::{self, Desired};
use crate::api::machine::DeviceAddresses;
use crate::pve::VmConfig;
use pve_client::VmLock;

/// The owner Machine as the reconcile saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// No owner reference to a Machine yet, or the Machine is gone.
    Missing,
    /// The Machine exists.
    Present {
        /// Whether its bootstrap data Secret exists (`dataSecretName` set
        /// and the Secret readable).
        bootstrap_ready: bool,
    },
}

/// The CAPI Cluster and the ProxmoxCluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterFact {
    /// No `cluster.x-k8s.io/cluster-name` label, or the Cluster is gone.
    Missing,
    /// The Cluster exists but its ProxmoxCluster does not.
    NoInfraCluster,
    /// Both exist.
    Present {
        /// `Cluster.status.initialization.infrastructureProvisioned`.
        infra_provisioned: bool,
    },
}

/// The task in `status.taskRef`, as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskFact {
    /// Still running.
    Running(Operation),
    /// Ended with `OK` or `WARNINGS: n`.
    Succeeded(Operation),
    /// Ended with another exit status.
    Failed {
        /// What it was.
        op: Operation,
        /// How it failed.
        kind: TaskFailureKind,
        /// The exit status text (and log tail).
        message: String,
    },
    /// The node does not know the task any more (restart): look at the VM.
    Lost(Operation),
}

/// The VM at `spec.virtualMachineID`, as observed.
// One value per reconcile: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum VmFact {
    /// No VM has that VMID in the instance.
    Absent,
    /// A VM has it but carries another machine's marker or none.
    Foreign(String),
    /// The instance could not be asked (unreachable, credentials broken).
    Unreachable(String),
    /// A VM is being created at that VMID (`lock: clone`/`create`) and shows
    /// no owner yet: wait until it does, never guess.
    Busy(String),
    /// Our VM.
    Ours(VmView),
}

/// Our VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmView {
    /// The node it is on.
    pub node: String,
    /// Running (`None` when the listing does not say yet).
    pub running: Option<bool>,
    /// Its `lock`.
    pub lock: Option<VmLock>,
    /// Template flag (never touch a template).
    pub template: bool,
    /// Tags as listed.
    pub tags: Tags,
    /// The config, when it was read.
    pub config: Option<VmConfig>,
}

/// One claimed address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimedAddress {
    /// Device (`net0`).
    pub net: String,
    /// The address.
    pub address: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Gateway of the subnet.
    pub gateway: Option<IpAddr>,
}

/// The IP address claims of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimsFact {
    /// Every device uses DHCP: no claim.
    NotNeeded,
    /// Some claims do not exist yet.
    Missing,
    /// The pool of a device is not known yet (the ProxmoxCluster has not
    /// recorded it).
    NoPool(String),
    /// Claims exist; some have no address yet.
    Pending {
        /// The pools waited for.
        pools: String,
        /// A pool reports exhaustion (or the claim waited too long).
        exhausted: bool,
        /// The claims' own messages.
        message: String,
    },
    /// Every claim has its address.
    Bound(Vec<ClaimedAddress>),
}

/// Whether the bootstrap finished, as read through the guest agent
/// (`cat` of [`crate::cloudinit::format::SENTINEL`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapFact {
    /// The sentinel says `success`.
    Done,
    /// Not yet, or the check is running: the condition message.
    Pending(String),
    /// The check cannot run as configured (e.g. the token may not use the
    /// agent's `exec`): the condition message.
    Blocked(String),
}

/// What the guest agent said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentFact {
    /// The agent answered with these device addresses.
    Addresses(Vec<DeviceAddresses>),
    /// The agent does not answer yet (VM booting).
    NotYet(String),
}

/// Everything [`decide`] looks at. `None` means "not observed yet".
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Our finalizer is on the object.
    pub has_finalizer: bool,
    /// The Cluster is paused or the object carries the pause annotation.
    pub paused: bool,
    /// Validation problems (joined), if any.
    pub spec_errors: Option<String>,
    /// Owner Machine.
    pub owner: Owner,
    /// Cluster and ProxmoxCluster.
    pub cluster: ClusterFact,
    /// `spec.instance`.
    pub instance: Option<String>,
    /// `spec.virtualMachineID`.
    pub vmid: Option<u32>,
    /// `status.initialization.provisioned`.
    pub provisioned: bool,
    /// The task of `status.taskRef`, observed.
    pub task: Option<TaskFact>,
    /// The VM, observed.
    pub vm: Option<VmFact>,
    /// IP claims, observed (creation view).
    pub claims: Option<ClaimsFact>,
    /// Claim objects of this machine that still exist: `(total, deleting)`
    /// (deletion view; observed together with `claims`).
    pub claim_objects: Option<(usize, usize)>,
    /// Guest agent, observed.
    pub agent: Option<AgentFact>,
    /// The machine name (host name, VM name).
    pub name: String,
    /// The ownership marker.
    pub marker: Marker,
    /// What the spec asks of the VM (or why it cannot be expressed).
    pub desired: Result<Desired, String>,
    /// The spec's disk requests.
    pub disks: Option<crate::api::machine::Disks>,
    /// The bootstrap ISO file name (`capmox-<vmid>-<uid>.iso`).
    pub iso_file: Option<String>,
    /// The ISO was uploaded by this process and the upload finished.
    pub iso_uploaded: bool,
    /// `checks.skipQemuGuestAgent`.
    pub skip_agent: bool,
    /// Confirm the bootstrap finished before `provisioned`: neither
    /// `checks.skipCloudInitStatus` nor `checks.skipQemuGuestAgent` is set.
    pub check_bootstrap: bool,
    /// The bootstrap data's format cannot be delivered (the Secret's
    /// `format`); `None` when it can or no data was read.
    pub bootstrap_format_error: Option<crate::cloudinit::FormatError>,
    /// The bootstrap check, observed.
    pub bootstrap: Option<BootstrapFact>,
    /// The last task that succeeded was this (to go on without re-reading
    /// lagging listings, e.g. destroy right after a successful shutdown).
    pub last_success: Option<Operation>,
}

/// How long a [`Wait`] lasts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// Until a watched object changes (no timed requeue beyond the periodic resync).
    Change,
    /// Look again soon (a task or a boot is expected to finish).
    Poll,
    /// A failure: retry with the per-object exponential backoff.
    Backoff,
    /// A problem only a change to the objects can fix: wait for a change,
    /// and say so with a Warning event when it is first seen.
    Refused,
}

/// Nothing to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// `VirtualMachineProvisioned` reason.
    pub reason: &'static str,
    /// Message.
    pub message: String,
    /// When to look again.
    pub until: Until,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do (the machine is provisioned, or gone).
    Done,
    /// Wait.
    Wait(Wait),
    /// Find the VM (by VMID and marker) and read what [`decide`] needs.
    ObserveVm,
    /// Read the VM's config (the VM is ours).
    ObserveConfig,
    /// Read the claims.
    ObserveClaims,
    /// Ask the guest agent for addresses.
    ObserveAgent,
    /// Ask the guest agent whether the bootstrap finished (start the
    /// sentinel check, or read the result of the one started before).
    ObserveBootstrap,
    /// Forget `status.taskRef` (the task ended and was accounted for).
    ClearTask,
    /// Add the finalizer.
    AddFinalizer,
    /// Choose the instance and write `spec.instance`.
    ChooseInstance,
    /// Create the missing IP address claims.
    EnsureClaims,
    /// Reserve a VMID (when none is set), write it, resolve the template,
    /// schedule the node, clone.
    Clone,
    /// The VMID was taken by someone else: reserve another one.
    ReplaceVmid(String),
    /// Destroy a partial VM of ours left by a failed clone.
    RemovePartial,
    /// Render the seed, build the ISO, upload it.
    UploadIso,
    /// Write the config (and attach the ISO).
    Configure,
    /// Grow a disk.
    Resize(Resize),
    /// Start the VM.
    Start,
    /// Eject and delete the ISO, write providerID, addresses, provisioned.
    Finish(Vec<DeviceAddresses>),
    /// Delete the ISO again (an earlier deletion failed).
    DeleteIso,
    /// Shut the VM down (forced after the timeout).
    Shutdown,
    /// Hard-stop the VM.
    Stop,
    /// Destroy the VM (`purge`, `destroy-unreferenced-disks`).
    Destroy,
    /// Delete the IP claims (the VM is gone).
    ReleaseClaims,
    /// Remove the finalizer (everything is cleaned up).
    RemoveFinalizer,
}

fn wait(reason: &'static str, message: impl Into<String>, until: Until) -> Step {
    Step::Wait(Wait {
        reason,
        message: message.into(),
        until,
    })
}

/// The `VirtualMachineProvisioned` reason while a task of `op` runs.
pub fn running_reason(op: Operation) -> &'static str {
    match op {
        Operation::Clone => "Cloning",
        Operation::Configure => "Configuring",
        Operation::Resize => "Resizing",
        Operation::Upload => "UploadingBootstrapData",
        Operation::Start => "PoweringOn",
        Operation::Boot => "WaitingForAddresses",
        Operation::AgentExec | Operation::Bootstrap => "WaitingForBootstrap",
        Operation::DeleteVolume => "CleaningUpBootstrapData",
        Operation::Shutdown | Operation::Stop | Operation::Destroy => "Deleting",
    }
}

/// The reason of a failed task of `op`.
pub fn failed_reason(op: Operation) -> &'static str {
    match op {
        Operation::Clone => "CloneFailed",
        Operation::Configure => "ConfigureFailed",
        Operation::Resize => "ResizeFailed",
        Operation::Upload => "UploadFailed",
        Operation::Start => "PowerOnFailed",
        Operation::Boot => "WaitingForAddresses",
        Operation::AgentExec | Operation::Bootstrap => "WaitingForBootstrap",
        Operation::DeleteVolume => "CleanupFailed",
        Operation::Shutdown | Operation::Stop | Operation::Destroy => "DeletionFailed",
    }
}

/// The claimed addresses as `(netN, address)` pairs.
pub fn claimed_pairs(claims: &[ClaimedAddress]) -> Vec<(String, IpAddr)> {
    claims.iter().map(|c| (c.net.clone(), c.address)).collect()
}

/// Whether `config` has the bootstrap ISO `file` attached as a CD-ROM.
pub fn iso_attached(config: &VmConfig, file: &str) -> bool {
    let suffix = format!(":iso/{file}");
    config
        .disks
        .values()
        .any(|d| d.is_cdrom() && d.file.ends_with(&suffix))
}

/// The next step.
pub fn decide(f: &Facts) -> Step {
    if f.paused {
        return wait(
            "Paused",
            "reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)",
            Until::Change,
        );
    }
    if f.deleting {
        return decide_delete(f);
    }
    decide_create(f)
}

fn task_gate(f: &Facts) -> Option<Step> {
    match &f.task {
        None => None,
        Some(TaskFact::Running(op)) => Some(wait(
            running_reason(*op),
            format!("waiting for the {} task", op.as_str()),
            Until::Poll,
        )),
        Some(TaskFact::Succeeded(_)) | Some(TaskFact::Lost(_)) => Some(Step::ClearTask),
        Some(TaskFact::Failed { .. }) => None,
    }
}

fn decide_create(f: &Facts) -> Step {
    let Owner::Present { bootstrap_ready } = f.owner else {
        return wait(
            "WaitingForOwner",
            "waiting for the owner Machine (owner reference)",
            Until::Change,
        );
    };
    match f.cluster {
        ClusterFact::Missing => {
            return wait(
                "WaitingForCluster",
                "waiting for the Cluster named by the cluster.x-k8s.io/cluster-name label",
                Until::Change,
            );
        }
        ClusterFact::NoInfraCluster => {
            return wait(
                "WaitingForClusterInfrastructure",
                "waiting for the ProxmoxCluster",
                Until::Change,
            );
        }
        ClusterFact::Present { .. } => {}
    }
    if !f.has_finalizer {
        return Step::AddFinalizer;
    }
    if let Some(e) = &f.spec_errors {
        return wait("InvalidSpec", e.clone(), Until::Change);
    }
    let started = f.vmid.is_some();
    if let ClusterFact::Present {
        infra_provisioned: false,
    } = f.cluster
        && !started
    {
        return wait(
            "WaitingForClusterInfrastructure",
            "waiting for the Cluster's infrastructure to be provisioned (Cluster status.initialization.infrastructureProvisioned)",
            Until::Change,
        );
    }
    if !bootstrap_ready && !f.provisioned {
        return wait(
            "WaitingForBootstrapData",
            "waiting for the bootstrap data Secret (Machine spec.bootstrap.dataSecretName)",
            Until::Change,
        );
    }
    // Before any Proxmox call: a VM that cannot get its bootstrap is never
    // created.
    if let Some(e) = &f.bootstrap_format_error
        && !f.provisioned
    {
        return wait(e.reason(), e.to_string(), Until::Refused);
    }
    if f.instance.is_none() {
        return Step::ChooseInstance;
    }
    if f.task.is_some()
        && !matches!(f.task, Some(TaskFact::Failed { .. }))
        && let Some(s) = task_gate(f)
    {
        return s;
    }
    if f.task.is_none() && f.provisioned {
        return Step::Done;
    }
    // Claims before the clone: creating them early lets the IPAM provider
    // work while the clone runs.
    if !f.provisioned {
        match &f.claims {
            None => return Step::ObserveClaims,
            Some(ClaimsFact::Missing) => return Step::EnsureClaims,
            Some(ClaimsFact::NoPool(why)) => {
                return wait("WaitingForIPAddresses", why.clone(), Until::Change);
            }
            _ => {}
        }
    }
    if let Some(TaskFact::Failed { op, kind, message }) = &f.task {
        if f.provisioned && *op != Operation::DeleteVolume {
            return Step::ClearTask;
        }
        return on_failure(f, *op, kind, message);
    }
    if f.vmid.is_none() {
        return Step::Clone;
    }
    let vm = match &f.vm {
        None => return Step::ObserveVm,
        Some(vm) => vm,
    };
    match vm {
        VmFact::Unreachable(msg) => wait("InstanceUnreachable", msg.clone(), Until::Backoff),
        VmFact::Busy(msg) => wait("Cloning", msg.clone(), Until::Poll),
        VmFact::Foreign(owner) => {
            if f.provisioned {
                wait(
                    "VirtualMachineNotOurs",
                    format!(
                        "VM {} now carries another owner's marker ({owner}); it is left alone",
                        f.vmid.unwrap_or_default()
                    ),
                    Until::Backoff,
                )
            } else {
                Step::ReplaceVmid(owner.clone())
            }
        }
        VmFact::Absent => {
            if f.provisioned {
                wait(
                    "VirtualMachineNotFound",
                    format!(
                        "VM {} is gone from instance {}; machines are not recreated (CAPI replaces them)",
                        f.vmid.unwrap_or_default(),
                        f.instance.as_deref().unwrap_or_default()
                    ),
                    Until::Backoff,
                )
            } else {
                Step::Clone
            }
        }
        VmFact::Ours(view) => create_with_vm(f, view),
    }
}

fn on_failure(f: &Facts, op: Operation, kind: &TaskFailureKind, message: &str) -> Step {
    let text = format!("{} task failed: {message}", op.as_str());
    match op {
        Operation::Clone => match kind {
            TaskFailureKind::Conflict(ConflictKind::AlreadyExists) => match &f.vm {
                // "already exists": is it our VM after all?
                None => Step::ObserveVm,
                Some(VmFact::Ours(_)) => Step::ClearTask,
                Some(VmFact::Foreign(owner)) => Step::ReplaceVmid(owner.clone()),
                Some(VmFact::Absent) | Some(VmFact::Unreachable(_)) | Some(VmFact::Busy(_)) => {
                    wait("CloneFailed", text, Until::Backoff)
                }
            },
            _ => match &f.vm {
                None => Step::ObserveVm,
                // A failed clone normally cleans up; if a partial VM of ours
                // is left, remove it before retrying.
                Some(VmFact::Ours(view))
                    if view.lock.is_none() || view.lock == Some(VmLock::Clone) =>
                {
                    if view.lock == Some(VmLock::Clone) {
                        wait(
                            "CloneFailed",
                            format!("{text}; the partial VM is still locked"),
                            Until::Backoff,
                        )
                    } else {
                        Step::RemovePartial
                    }
                }
                _ => wait("CloneFailed", text, Until::Backoff),
            },
        },
        Operation::Start
            if matches!(
                kind,
                TaskFailureKind::Conflict(ConflictKind::AlreadyRunning)
            ) =>
        {
            Step::ClearTask
        }
        Operation::DeleteVolume if matches!(kind, TaskFailureKind::NotFound(_)) => Step::ClearTask,
        Operation::DeleteVolume => Step::DeleteIso,
        _ => wait(failed_reason(op), text, Until::Backoff),
    }
}

fn create_with_vm(f: &Facts, view: &VmView) -> Step {
    if view.template {
        return wait(
            "VirtualMachineIsTemplate",
            format!(
                "VM {} is a template; it is never modified",
                f.vmid.unwrap_or_default()
            ),
            Until::Change,
        );
    }
    if let Some(lock) = &view.lock {
        return wait(
            if *lock == VmLock::Clone {
                "Cloning"
            } else {
                "VirtualMachineLocked"
            },
            format!("VM {} is locked ({lock})", f.vmid.unwrap_or_default()),
            Until::Poll,
        );
    }
    if f.provisioned {
        return Step::Done;
    }
    let Some(config) = &view.config else {
        return Step::ObserveConfig;
    };
    let desired = match &f.desired {
        Ok(d) => d,
        Err(e) => return wait("InvalidSpec", e.clone(), Until::Change),
    };
    let claimed = match &f.claims {
        Some(ClaimsFact::Bound(c)) => c.clone(),
        Some(ClaimsFact::NotNeeded) => Vec::new(),
        Some(ClaimsFact::Pending {
            pools,
            exhausted,
            message,
        }) => {
            let text = if message.is_empty() {
                format!("waiting for IP addresses from {pools}")
            } else {
                format!("waiting for IP addresses from {pools}: {message}")
            };
            return wait(
                if *exhausted {
                    "IPAddressPoolExhausted"
                } else {
                    "WaitingForIPAddresses"
                },
                text,
                Until::Change,
            );
        }
        _ => return Step::ObserveClaims,
    };
    let Some(iso_file) = &f.iso_file else {
        return wait("InvalidSpec", "no VMID", Until::Change);
    };
    let attached = iso_attached(config, iso_file);
    let running = view.running == Some(true) || f.last_success == Some(Operation::Start);
    // The ISO matters only until the first boot: a started VM read it (a
    // restart after the eject must not upload it again).
    if !running && !attached && !f.iso_uploaded {
        return Step::UploadIso;
    }
    let pending = match vmconfig::update(desired, config, &f.marker, None) {
        Ok(u) => !u.is_empty(),
        Err(e) => return wait("InvalidSpec", e.to_string(), Until::Change),
    };
    if (!running && !attached) || pending {
        return Step::Configure;
    }
    match disks::plan(f.disks.as_ref(), config) {
        Ok(r) if !r.is_empty() => return Step::Resize(r[0]),
        Ok(_) => {}
        Err(e) => return wait("ResizeFailed", e.to_string(), Until::Change),
    }
    if !running {
        return Step::Start;
    }
    let pairs = claimed_pairs(&claimed);
    if f.skip_agent {
        let devs = addresses::from_claims(&pairs);
        if devs.is_empty() {
            return wait(
                "WaitingForAddresses",
                "checks.skipQemuGuestAgent is set but the machine has no static address to report",
                Until::Change,
            );
        }
        return Step::Finish(devs);
    }
    match &f.agent {
        None => Step::ObserveAgent,
        Some(AgentFact::NotYet(msg)) => wait(
            "WaitingForAddresses",
            format!("waiting for the guest agent to report addresses: {msg}"),
            Until::Poll,
        ),
        Some(AgentFact::Addresses(devs)) => {
            if addresses::complete(devs, &pairs) {
                if !f.check_bootstrap {
                    return Step::Finish(devs.clone());
                }
                match &f.bootstrap {
                    None => Step::ObserveBootstrap,
                    Some(BootstrapFact::Done) => Step::Finish(devs.clone()),
                    Some(BootstrapFact::Pending(msg)) => {
                        wait("WaitingForBootstrap", msg.clone(), Until::Poll)
                    }
                    Some(BootstrapFact::Blocked(msg)) => {
                        wait("WaitingForBootstrap", msg.clone(), Until::Backoff)
                    }
                }
            } else {
                wait(
                    "WaitingForAddresses",
                    "the guest agent does not report every claimed address yet",
                    Until::Poll,
                )
            }
        }
    }
}

fn decide_delete(f: &Facts) -> Step {
    if !f.has_finalizer {
        return Step::Done;
    }
    match &f.task {
        Some(TaskFact::Running(op)) => {
            return wait(
                "Deleting",
                format!("waiting for the {} task", op.as_str()),
                Until::Poll,
            );
        }
        Some(TaskFact::Succeeded(_)) | Some(TaskFact::Lost(_)) => return Step::ClearTask,
        Some(TaskFact::Failed { op, kind, message }) => {
            let text = format!("{} task failed: {message}", op.as_str());
            return match op {
                // Graceful shutdown failed: stop hard.
                Operation::Shutdown => Step::Stop,
                Operation::Destroy
                    if matches!(kind, TaskFailureKind::Conflict(ConflictKind::VmRunning)) =>
                {
                    Step::Stop
                }
                Operation::DeleteVolume if matches!(kind, TaskFailureKind::NotFound(_)) => {
                    Step::ClearTask
                }
                // The VM is gone already (e.g. a destroy issued twice): look
                // again, it is no failure.
                Operation::Destroy if matches!(kind, TaskFailureKind::NotFound(_)) => {
                    Step::ClearTask
                }
                // A clone that fails while the machine is deleted leaves nothing.
                Operation::Clone => Step::ClearTask,
                _ => wait("DeletionFailed", text, Until::Backoff),
            };
        }
        None => {}
    }
    let (Some(_), Some(_)) = (&f.instance, f.vmid) else {
        // No VM was ever cloned for this machine.
        return release_or_finish(f);
    };
    let vm = match &f.vm {
        None => return Step::ObserveVm,
        Some(vm) => vm,
    };
    match vm {
        VmFact::Busy(msg) => wait("Deleting", msg.clone(), Until::Poll),
        VmFact::Unreachable(msg) => wait(
            "DeletionFailed",
            format!(
                "cannot delete VM {} in instance {}: {msg}",
                f.vmid.unwrap_or_default(),
                f.instance.as_deref().unwrap_or_default()
            ),
            Until::Backoff,
        ),
        VmFact::Absent | VmFact::Foreign(_) => {
            if !f.provisioned && f.last_success != Some(Operation::DeleteVolume) {
                Step::DeleteIso
            } else {
                release_or_finish(f)
            }
        }
        VmFact::Ours(view) => {
            if view.template {
                return wait(
                    "DeletionFailed",
                    format!(
                        "VM {} is a template; it is never destroyed",
                        f.vmid.unwrap_or_default()
                    ),
                    Until::Change,
                );
            }
            if let Some(lock) = &view.lock {
                return wait(
                    "Deleting",
                    format!(
                        "VM {} is locked ({lock}); waiting before deleting it",
                        f.vmid.unwrap_or_default()
                    ),
                    if lock.is_transient() {
                        Until::Poll
                    } else {
                        Until::Backoff
                    },
                );
            }
            match (f.last_success, view.running) {
                (Some(Operation::Shutdown | Operation::Stop), _) | (_, Some(false)) => {
                    Step::Destroy
                }
                _ => Step::Shutdown,
            }
        }
    }
}

/// Claims are released only after the VM is gone (field case B18), and the
/// finalizer goes once the claim objects are gone too.
fn release_or_finish(f: &Facts) -> Step {
    match f.claim_objects {
        None => Step::ObserveClaims,
        Some((0, _)) => Step::RemoveFinalizer,
        Some((total, deleting)) if deleting >= total => wait(
            "Deleting",
            format!("waiting for {total} IP address claim(s) to be released by the IPAM provider"),
            Until::Change,
        ),
        Some(_) => Step::ReleaseClaims,
    }
}

#[cfg(test)]
mod tests;
