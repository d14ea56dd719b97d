//! What a reconcile knows: the facts [`super::decide`] chooses from.
//!
//! Facts come from three places, and from nowhere else:
//! - the ProxmoxMachine and the objects around it (owner Machine, Cluster,
//!   ProxmoxCluster, bootstrap Secret), read when the reconcile starts
//!   ([`crate::machine::observe::kube`]);
//! - observations of Proxmox and of the IPAM objects, read when `decide`
//!   asks for them ([`super::Step::Observe`]);
//! - what a step did ([`Observed`]), folded in by [`Facts::apply`].
//!
//! `None` means "not observed yet". No code invents a fact to steer the
//! decision: a fact is what was read, or what a step's response said.

use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pve_client::options::DiskSlot;
use pve_client::{TaskFailureKind, VmLock};

use super::operation::Operation;
use crate::api::cluster::ProviderIdFormat;
use crate::api::machine::{DeviceAddresses, Disks};
use crate::api::{HaSettings, MissingPrivilege};
use crate::cloudinit::FormatError;
use crate::machine::plan::placement::PlacementError;
use crate::machine::plan::template::TemplateVm;
use crate::machine::vm::marker::Marker;
use crate::machine::vm::vmconfig::Desired;
use crate::pve::{HaState, NodeName, VmConfig, VmId};
use crate::reasons::Reason;

use super::operation::StepKind;

/// The owner Machine as the reconcile saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Owner {
    /// No owner reference to a Machine yet, or the Machine is gone.
    Missing,
    /// The Machine exists.
    Present {
        /// Its bootstrap data.
        bootstrap: BootstrapData,
    },
}

/// The bootstrap data Secret named by `Machine.spec.bootstrap.dataSecretName`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapData {
    /// Not named yet, not there, or without key `value`: why.
    Missing(String),
    /// There, in a format this provider delivers.
    Ready,
    /// There, in a format this provider cannot deliver.
    Unsupported(FormatError),
    /// There, in a format this provider delivers, but not usable in it
    /// (an Ignition config that does not pass
    /// [`crate::cloudinit::ignition::check`]): the message names the
    /// Secret and the problem.
    Invalid(String),
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

/// The Proxmox client of the machine's instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientFact {
    /// It can be used.
    Ready,
    /// It cannot: [`Reason::CredentialsNotReady`] (a change is needed) or
    /// [`Reason::InstanceUnreachable`].
    Broken(Reason),
}

/// The task in `status.taskRef` (or issued by this process), as observed.
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
        /// How it failed (decided by pve-client from the exit status).
        kind: TaskFailureKind,
        /// The exit status text (and log tail), for the condition.
        message: String,
    },
    /// The node does not know the task any more (restart): look at the VM.
    Lost(Operation),
    /// The task's status could not be read.
    Unreadable(Reason),
}

/// The VM's power state and how it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    /// Running.
    Running,
    /// Stopped.
    Stopped,
    /// Not known from what was read (a config read says nothing about it).
    Unknown,
}

impl Power {
    /// The power state a run state names; `None` for an unknown one (no
    /// status broadcast yet, or the node is offline;
    /// docs/proxmox-semantics.md §9).
    pub fn from_run_state(state: Option<pve_client::api::qemu::VmRunState>) -> Option<Power> {
        use pve_client::api::qemu::VmRunState;
        match state? {
            VmRunState::Running => Some(Power::Running),
            VmRunState::Stopped => Some(Power::Stopped),
            VmRunState::Other(_) => None,
        }
    }

    /// The VM status this state is written as (`status.vmStatus`:
    /// `running`, `stopped`); `None` when unknown.
    pub fn as_status(self) -> Option<&'static str> {
        match self {
            Power::Running => Some("running"),
            Power::Stopped => Some("stopped"),
            Power::Unknown => None,
        }
    }
}

/// Where a [`Power`] came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PowerSource {
    /// `GET /nodes/{node}/qemu/{vmid}/status/current`, the end of our own
    /// start/stop task, or the guest agent saying the VM is not running:
    /// current.
    Live,
    /// `/cluster/resources`: may lag behind the last power change
    /// (docs/proxmox-semantics.md §9).
    Listing,
}

/// Our VM.
#[derive(Clone, Debug, PartialEq)]
pub struct VmView {
    /// The node it is on.
    pub node: NodeName,
    /// Its power state.
    pub power: Power,
    /// How the power state is known.
    pub power_source: PowerSource,
    /// Its `lock`.
    pub lock: Option<VmLock>,
    /// The config, when it was read.
    pub config: Option<std::sync::Arc<VmConfig>>,
    /// The requested state of its HA resource as `status/current` showed it
    /// (`None`: not HA-managed, or not read live).
    pub ha: Option<HaState>,
}

/// The VM at `spec.virtualMachineID`, as observed.
// One value per reconcile: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum VmFact {
    /// No VM has that VMID in the instance.
    Absent,
    /// A VM has it but carries another machine's marker or none: who.
    Foreign(String),
    /// A template has it: which.
    Template(String),
    /// The instance could not be asked.
    Unreachable(Reason),
    /// A VM is being created at that VMID (`lock: clone`/`create`) and shows
    /// no owner yet: wait until it does, never guess.
    Busy(String),
    /// Our VM.
    Ours(VmView),
    /// A VM the Go provider (CAPMOX) made for this machine: at its VMID,
    /// without any capmox marker, named after the machine, and its SMBIOS
    /// UUID is the one `spec.providerID` (`proxmox://<uuid>`) names — the
    /// proof CAPMOX left (docs/migrating-from-capmox.md). It is adopted by
    /// writing our marker onto it; nothing else happens to it before.
    Legacy(VmView),
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
    /// Route metric of the pool.
    pub metric: Option<u32>,
}

/// The IP address claims of the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimsFact {
    /// Every device uses DHCP: no claim.
    NotNeeded,
    /// Some claims do not exist yet.
    Missing,
    /// The pool of a device is not known yet (the ProxmoxCluster has not
    /// recorded it): why.
    NoPool(String),
    /// Claims exist; some have no address yet.
    Pending {
        /// The pools waited for.
        pools: String,
        /// A pool reports exhaustion.
        exhausted: bool,
        /// The claims' own messages.
        message: String,
    },
    /// Every claim has its address.
    Bound(Vec<ClaimedAddress>),
}

/// The claim objects that still exist during deletion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClaimObjects {
    /// Claims owned by the machine.
    pub total: usize,
    /// Of them, already being deleted.
    pub deleting: usize,
}

/// What the guest agent said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentFact {
    /// The agent answered with these device addresses.
    Addresses(Vec<DeviceAddresses>),
    /// The agent does not answer yet (the guest boots): what Proxmox said.
    NotYet(String),
    /// Proxmox says the VM is not running.
    VmStopped,
}

/// Whether the bootstrap finished, read through the guest agent (the
/// sentinel file of the CAPI bootstrap contract).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BootstrapFact {
    /// The sentinel says `success`.
    Done,
    /// Not yet: the condition message, and when to look again.
    Pending(String, Duration),
    /// The check cannot run as configured (e.g. the token may not use the
    /// agent's `exec`): the condition message.
    Blocked(String),
}

/// The VM's HA resource (`GET /cluster/ha/resources/{sid}`, and on PVE 9
/// the rule it should be listed in).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HaFact {
    /// The VM is not an HA resource.
    Absent,
    /// It is one.
    Present {
        /// Its requested state.
        state: Option<HaState>,
        /// The HA rule the machine names lists it (true when no rule applies).
        listed: bool,
    },
    /// The HA configuration could not be read, or what the spec names does
    /// not exist: why.
    Unusable(Reason),
}

/// The machine's resource pool as read before the clone and after it
/// (docs/field-cases.md B34).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolFact {
    /// The pool exists; the VMIDs of its guests.
    Members(Vec<u32>),
    /// It does not exist, or the token may not read it: what to fix.
    Problem(String),
    /// The instance could not be asked.
    Unreachable(Reason),
}

/// A bootstrap ISO volume of this machine found on a storage.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MediaVolume {
    /// The node whose storage holds it (the API path of the deletion).
    pub node: NodeName,
    /// The volume ID, `storage:iso/capmox-<vmid>-<uid>.iso`.
    pub volid: String,
}

/// The choice of node and template for the clone, made once and kept in
/// memory until the clone is issued (placements in flight count for the
/// placement of other machines; see `runtime::inflight`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// The target node.
    pub node: NodeName,
    /// The template (replica) to clone, on its node.
    pub template: TemplateVm,
    /// The VM's memory, **bytes** (counts against the node until listed).
    pub memory: u64,
}

/// A clone slot of the template was not granted: the machine waits in line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InLine {
    /// Template VMID.
    pub template: u32,
    /// Clones of the template running.
    pub running: usize,
    /// Machines ahead in line.
    pub ahead: usize,
}

/// A step that failed before (the retry state kept per machine and step):
/// its failure and when the next attempt is due.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gate {
    /// The step.
    pub step: StepKind,
    /// The failure class (a pve-client or Kubernetes error category, or a
    /// task failure kind), e.g. `pve_transient`, `lock_timeout`.
    pub class: &'static str,
    /// What failed.
    pub reason: Reason,
    /// Consecutive failures of this step with this class.
    pub attempts: u32,
    /// Time left until the next attempt (zero: due now).
    pub remaining: Duration,
    /// When the next attempt is due (for the condition message).
    pub due_at: Timestamp,
    /// It failed in this reconcile: it is not tried again in it, however
    /// short its delay (the failure is reported first).
    pub fresh: bool,
}

/// Everything [`super::decide`] looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct Facts {
    // ---- the ProxmoxMachine ----------------------------------------------
    /// The machine name (VM name, host name).
    pub name: String,
    /// The ownership marker.
    pub marker: Marker,
    /// `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// How long ago `metadata.deletionTimestamp` was set (deleting
    /// machines; zero when it lies in the future).
    pub deletion_age: Option<Duration>,
    /// Our finalizer is on the object.
    pub has_finalizer: bool,
    /// `spec.instance`.
    pub instance: Option<String>,
    /// `spec.virtualMachineID`, as written (validated by `decide`).
    pub vmid: Option<u32>,
    /// The VMID was reserved by the controller (the reservation annotation
    /// names it), not given by a user.
    pub vmid_reserved: bool,
    /// The VMIDs this machine may use in its instance (its own range ▸ the
    /// instance's ▸ Proxmox's), inclusive.
    pub vmid_range: (u32, u32),
    /// `status.initialization.provisioned`.
    pub provisioned: bool,
    /// A task is recorded (`status.taskRef`) or was issued by this process.
    pub task_recorded: bool,
    /// `status.bootstrapMedia`: the ISO volume recorded before its upload.
    pub media_recorded: Option<MediaVolume>,
    /// `status.bootstrapMediaDeleted` without a record: every ISO this
    /// machine recorded was deleted, so it has none (no sweep needed).
    pub media_deleted: bool,
    /// The bootstrap ISO file name (`capmox-<vmid>-<uid>.iso`).
    pub iso_file: Option<String>,
    /// The ISO for this VMID was uploaded (this process saw the upload end).
    pub media_uploaded: bool,
    /// What the spec asks of the VM (or why it cannot be expressed).
    pub desired: Result<Desired, String>,
    /// The spec's disk requests.
    pub disks: Option<Disks>,
    /// `checks.skipQemuGuestAgent`.
    pub skip_agent: bool,
    /// Confirm the bootstrap finished before `provisioned`.
    pub check_bootstrap: bool,
    /// The HA the machine asks for (its `spec.ha`, else its instance's),
    /// when it asks for HA ([`HaSettings::wanted`]).
    pub ha_wanted: Option<HaSettings>,
    /// `status.haResource`: the HA resource recorded before it was created.
    pub ha_recorded: bool,
    /// The resource pool the VM is cloned into: the machine's `spec.pool`,
    /// else its instance's `pool` (docs/field-cases.md B34).
    pub pool: Option<String>,
    /// The instance's `pool`.
    pub instance_pool: Option<String>,
    /// The ProxmoxCluster's probe found the instance's pool missing or
    /// unreadable (`status.instances[].poolProblem`): what it said.
    pub pool_problem: Option<String>,
    /// One pool is read with `GET /pools?poolid=` (PVE ≥ 8.1, or version
    /// not known), else with `GET /pools/{poolid}`.
    pub pool_query: bool,
    /// `spec.providerID`, as recorded (never changed once set).
    pub provider_id: Option<String>,
    /// The ProxmoxCluster's `providerIDFormat`.
    pub provider_id_format: ProviderIdFormat,

    // ---- the objects around it --------------------------------------------
    /// The Cluster is paused or the object carries the pause annotation.
    pub paused: bool,
    /// Validation problems (joined), if any.
    pub spec_problems: Option<String>,
    /// Owner Machine.
    pub owner: Owner,
    /// Cluster and ProxmoxCluster.
    pub cluster: ClusterFact,
    /// The machine's instance cannot be used (placement rules against the
    /// ProxmoxCluster's status), when `spec.instance` is set.
    pub placement: Option<PlacementError>,
    /// The Proxmox VE major version of the instance (`status.instances[].version`
    /// of the ProxmoxCluster, read from `GET /version`).
    pub pve_major: Option<u32>,
    /// Privileges the instance's token lacks, from the ProxmoxCluster's
    /// `status.instances[].missingPrivileges`.
    pub missing_privileges: Vec<MissingPrivilege>,

    // ---- observed on request ------------------------------------------------
    /// The instance client.
    pub client: Option<ClientFact>,
    /// The task.
    pub task: Option<TaskFact>,
    /// The VM.
    pub vm: Option<VmFact>,
    /// IP claims (creation).
    pub claims: Option<ClaimsFact>,
    /// Claim objects (deletion).
    pub claim_objects: Option<ClaimObjects>,
    /// Guest agent.
    pub agent: Option<AgentFact>,
    /// Bootstrap check.
    pub bootstrap: Option<BootstrapFact>,
    /// Duplicate addresses in the same network (`Some(None)`: none).
    pub duplicates: Option<Option<String>>,
    /// ISO volumes of this machine found by the deletion's sweep.
    pub media_found: Option<Vec<MediaVolume>>,
    /// The VM's HA resource.
    pub ha: Option<HaFact>,
    /// The resource pool and its members.
    pub pool_members: Option<PoolFact>,
    /// Another machine recording the providerID our VM would get
    /// (`Some(None)`: none does).
    pub provider_id_holder: Option<Option<String>>,

    // ---- memory of this process ---------------------------------------------
    /// The node and template chosen for the clone (in flight).
    pub plan: Option<Plan>,
    /// The clone slot was refused.
    pub in_line: Option<InLine>,
    /// Steps that failed before, with their retry state.
    pub gates: Vec<Gate>,
}

impl Facts {
    /// The gate of `step`, if it failed before.
    pub fn gate(&self, step: StepKind) -> Option<&Gate> {
        self.gates.iter().find(|g| g.step == step)
    }

    /// Whether the ISO volume `volid` of this machine is attached to `config`.
    pub fn media_attached(&self, config: &VmConfig) -> bool {
        let Some(file) = &self.iso_file else {
            return false;
        };
        let suffix = format!(":iso/{file}");
        config
            .disks
            .values()
            .any(|d| d.is_cdrom() && d.file.ends_with(&suffix))
    }

    /// The privileges the token lacks for `operation` (`agentRead`, …),
    /// as `privilege on path`, joined; `None` when it lacks none.
    pub fn blocked(&self, operation: &str) -> Option<String> {
        let v: Vec<String> = self
            .missing_privileges
            .iter()
            .filter(|m| m.operation == operation)
            .map(|m| format!("{} on {}", m.privilege, m.path))
            .collect();
        (!v.is_empty()).then(|| v.join(", "))
    }

    /// The recorded VMID as Proxmox's type, if it is one.
    pub fn vm_id(&self) -> Option<VmId> {
        self.vmid.and_then(|v| VmId::new(v).ok())
    }
}

/// The disk slot names of a config's CD-ROMs holding `file` (for tests and
/// the eject step).
pub fn cdrom_slots(config: &VmConfig, file: &str) -> Vec<DiskSlot> {
    let suffix = format!(":iso/{file}");
    config
        .disks
        .iter()
        .filter(|(_, d)| d.is_cdrom() && d.file.ends_with(&suffix))
        .map(|(s, _)| *s)
        .collect()
}
