//! What [`super::decide`] answers: one [`Step`].

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::operation::{Operation, StepKind};
use crate::api::machine::DeviceAddresses;
use crate::machine::vm::disks::Resize;
use crate::reasons::Reason;

use super::facts::MediaVolume;
use super::ha::HaTarget;
use super::observed::TaskEnd;

/// A fact to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Observe {
    /// The instance's client (credentials Secret, identity).
    Client,
    /// The task in `status.taskRef`.
    Task,
    /// The VM at the VMID: its node, owner marker, lock, power.
    Vm,
    /// The VM's config (the VM is ours).
    Config,
    /// The VM's power state, live.
    Power,
    /// The IP address claims (creation).
    Claims,
    /// The claim objects that still exist (deletion).
    ClaimObjects,
    /// The guest agent's addresses.
    Agent,
    /// Whether the bootstrap finished.
    Bootstrap,
    /// Whether another machine in the same network holds a claimed address.
    Duplicates,
    /// This machine's ISO volumes on the instance's ISO storages.
    Media,
    /// The VM's HA resource (and the HA rule it should be listed in).
    Ha,
    /// Whether another machine records the providerID our VM would get.
    ProviderIdHolder,
    /// The machine's resource pool and its members.
    Pool,
}

/// When to look again after a [`Wait`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Until {
    /// When a watched object changes (the periodic resync is the safety net).
    Change,
    /// When the running task of this operation is expected to end.
    Task(Operation),
    /// When the guest is expected to report its addresses.
    Boot,
    /// After this long, already in real time (a bootstrap re-check the
    /// observer scheduled).
    After(Duration),
    /// In a few seconds (a lock expected to go away): the runtime's short
    /// re-check period.
    Soon,
    /// When a clone slot may be free (the machine is also woken when it is).
    Slot,
    /// When the retry of a failed step is due.
    Retry(Duration),
    /// The instance could not be asked (or a read failed): look again after
    /// the machine's growing delay, which a successful read resets.
    Backoff,
    /// The machine is provisioned and well: the steady re-check.
    Steady,
}

/// Retry information shown with a failed step's reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Consecutive failures.
    pub attempts: u32,
    /// When the next attempt is due.
    pub at: Timestamp,
}

/// Nothing to do now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Wait {
    /// Why (the `VirtualMachineProvisioned` / `Ready` reason).
    pub reason: Reason,
    /// When to look again.
    pub until: Until,
    /// The retry, when the reason is a failed step waiting for its next attempt.
    pub retry: Option<Retry>,
}

/// What to do next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do: the machine is provisioned and well, or gone.
    Done,
    /// Nothing to do now.
    Wait(Wait),
    /// Read a fact.
    Observe(Observe),
    /// Add the finalizer.
    AddFinalizer,
    /// Write our ownership marker onto a VM CAPMOX made for this machine
    /// ([`super::VmFact::Legacy`]).
    Adopt,
    /// Remove the finalizer (everything is cleaned up).
    RemoveFinalizer,
    /// Choose the instance and write `spec.instance`.
    ChooseInstance,
    /// Create the missing IP address claims.
    EnsureClaims,
    /// Delete the IP address claims (the VM is gone).
    ReleaseClaims,
    /// Choose the node and the template (replica) for the clone.
    Plan,
    /// Reserve a VMID and write it to `spec.virtualMachineID`.
    ReserveVmid,
    /// The VMID was taken by a VM that is not ours: give it up.
    ReplaceVmid,
    /// Clone the planned template to the VMID.
    Clone,
    /// Destroy a partial VM of ours left by a failed clone.
    RemovePartial,
    /// Record the ISO volume in status, render the seed, upload it.
    UploadMedia,
    /// Write the config (and attach the ISO).
    Configure,
    /// Grow a disk.
    Resize(Resize),
    /// Start the VM.
    Start,
    /// Write providerID, addresses and `status.initialization.provisioned`.
    Provision(Vec<DeviceAddresses>),
    /// Eject the bootstrap ISO.
    Eject,
    /// Delete an ISO volume of this machine (the recorded one, or one the
    /// sweep found).
    DeleteMedia(MediaVolume),
    /// Shut the VM down (forced after the timeout).
    Shutdown,
    /// Hard-stop the VM.
    Stop,
    /// Destroy the VM (`purge`, `destroy-unreferenced-disks`).
    Destroy,
    /// Forget the ended task, doing the bookkeeping its end calls for.
    ClearTask(TaskEnd),
    /// Record `status.haResource`, make the VM an HA resource (requested
    /// state `started`) in the group, or add it to the rule.
    RegisterHa(HaTarget),
    /// Remove the recorded HA resource (and the VM from the rule naming
    /// it), then the record.
    UnregisterHa,
}

impl Step {
    /// The kind of an action step (`None` for `Done`, `Wait`, `Observe`).
    pub fn kind(&self) -> Option<StepKind> {
        Some(match self {
            Step::Done | Step::Wait(_) | Step::Observe(_) => return None,
            Step::AddFinalizer => StepKind::AddFinalizer,
            Step::RemoveFinalizer => StepKind::RemoveFinalizer,
            Step::ChooseInstance => StepKind::ChooseInstance,
            Step::EnsureClaims => StepKind::EnsureClaims,
            Step::ReleaseClaims => StepKind::ReleaseClaims,
            Step::Plan => StepKind::Plan,
            Step::ReserveVmid => StepKind::ReserveVmid,
            Step::ReplaceVmid => StepKind::ReplaceVmid,
            Step::Clone => StepKind::Clone,
            Step::Adopt => StepKind::Adopt,
            Step::RemovePartial => StepKind::RemovePartial,
            Step::UploadMedia => StepKind::UploadMedia,
            Step::Configure => StepKind::Configure,
            Step::Resize(_) => StepKind::Resize,
            Step::Start => StepKind::Start,
            Step::Provision(_) => StepKind::Provision,
            Step::Eject => StepKind::Eject,
            Step::DeleteMedia(_) => StepKind::DeleteMedia,
            Step::Shutdown => StepKind::Shutdown,
            Step::Stop => StepKind::Stop,
            Step::Destroy => StepKind::Destroy,
            Step::ClearTask(_) => StepKind::ClearTask,
            Step::RegisterHa(_) => StepKind::RegisterHa,
            Step::UnregisterHa => StepKind::UnregisterHa,
        })
    }
}

/// A [`Wait`] without retry information.
pub fn wait(reason: Reason, until: Until) -> Step {
    Step::Wait(Wait {
        reason,
        until,
        retry: None,
    })
}
