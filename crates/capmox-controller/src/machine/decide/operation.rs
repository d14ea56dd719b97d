//! What a Proxmox task does.

/// An operation whose duration is learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Operation {
    /// `qmclone`.
    Clone,
    /// `qmconfig` (asynchronous config write).
    Configure,
    /// `resize`.
    Resize,
    /// `imgcopy` (ISO upload).
    Upload,
    /// `qmstart`.
    Start,
    /// `qmshutdown`.
    Shutdown,
    /// `qmstop`.
    Stop,
    /// `qmdestroy`.
    Destroy,
    /// `imgdel` (volume deletion).
    DeleteVolume,
    /// From the end of the start task until the guest agent reports addresses.
    Boot,
    /// A guest agent `exec` of the bootstrap sentinel check, until
    /// `exec-status` reports it exited (not learned: its end is not
    /// observable more precisely than the poll that finds it).
    AgentExec,
    /// From the guest agent reporting every address until the bootstrap
    /// sentinel says `success`.
    Bootstrap,
}

impl Operation {
    /// The operation of a UPID's worker type (`qmclone`, `qmstart`, …).
    pub fn from_worker(worker: &str) -> Option<Operation> {
        Some(match worker {
            "qmclone" => Operation::Clone,
            "qmconfig" => Operation::Configure,
            "resize" | "qmresize" => Operation::Resize,
            "imgcopy" => Operation::Upload,
            "qmstart" | "hastart" => Operation::Start,
            "qmshutdown" | "hastop" => Operation::Shutdown,
            "qmstop" => Operation::Stop,
            "qmdestroy" => Operation::Destroy,
            "imgdel" => Operation::DeleteVolume,
            _ => return None,
        })
    }

    /// The power state a task of `worker` type leaves its VM in once it
    /// ended OK: `qmstart` running, `qmshutdown` and `qmstop` stopped.
    /// `None` for everything else, and for HA requests (`hastart`,
    /// `hastop`): their task ends before the HA manager acts
    /// (docs/field-cases.md B33).
    pub fn power_after(worker: &str) -> Option<super::facts::Power> {
        use super::facts::Power;
        match worker {
            "qmstart" => Some(Power::Running),
            "qmshutdown" | "qmstop" => Some(Power::Stopped),
            _ => None,
        }
    }

    /// Short name for logs and conditions.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Clone => "clone",
            Operation::Configure => "configure",
            Operation::Resize => "resize",
            Operation::Upload => "upload",
            Operation::Start => "start",
            Operation::Shutdown => "shutdown",
            Operation::Stop => "stop",
            Operation::Destroy => "destroy",
            Operation::DeleteVolume => "delete volume",
            Operation::Boot => "boot",
            Operation::AgentExec => "agent exec",
            Operation::Bootstrap => "bootstrap",
        }
    }
}

/// The kind of an action step: the key of its retry state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StepKind {
    /// Add the finalizer.
    AddFinalizer,
    /// Remove the finalizer.
    RemoveFinalizer,
    /// Choose the instance.
    ChooseInstance,
    /// Create the claims.
    EnsureClaims,
    /// Delete the claims.
    ReleaseClaims,
    /// Choose node and template.
    Plan,
    /// Reserve the VMID.
    ReserveVmid,
    /// Give up the VMID.
    ReplaceVmid,
    /// Clone.
    Clone,
    /// Remove a partial VM.
    RemovePartial,
    /// Upload the bootstrap ISO.
    UploadMedia,
    /// Write the config.
    Configure,
    /// Grow a disk.
    Resize,
    /// Start the VM.
    Start,
    /// providerID and status.
    Provision,
    /// Eject the ISO.
    Eject,
    /// Delete an ISO volume.
    DeleteMedia,
    /// Shut the VM down.
    Shutdown,
    /// Stop the VM.
    Stop,
    /// Destroy the VM.
    Destroy,
    /// Forget the ended task.
    ClearTask,
    /// Adopt a VM CAPMOX made.
    Adopt,
    /// Make the VM an HA resource.
    RegisterHa,
    /// Remove the recorded HA resource.
    UnregisterHa,
}

impl StepKind {
    /// Short name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::AddFinalizer => "add_finalizer",
            StepKind::RemoveFinalizer => "remove_finalizer",
            StepKind::ChooseInstance => "choose_instance",
            StepKind::EnsureClaims => "ensure_claims",
            StepKind::ReleaseClaims => "release_claims",
            StepKind::Plan => "plan",
            StepKind::ReserveVmid => "reserve_vmid",
            StepKind::ReplaceVmid => "replace_vmid",
            StepKind::Clone => "clone",
            StepKind::RemovePartial => "remove_partial",
            StepKind::UploadMedia => "upload_media",
            StepKind::Configure => "configure",
            StepKind::Resize => "resize",
            StepKind::Start => "start",
            StepKind::Provision => "provision",
            StepKind::Eject => "eject",
            StepKind::DeleteMedia => "delete_media",
            StepKind::Shutdown => "shutdown",
            StepKind::Stop => "stop",
            StepKind::Destroy => "destroy",
            StepKind::ClearTask => "clear_task",
            StepKind::Adopt => "adopt",
            StepKind::RegisterHa => "register_ha",
            StepKind::UnregisterHa => "unregister_ha",
        }
    }

    /// The step a task of `op` belongs to (its failure is that step's).
    pub fn of_operation(op: Operation) -> StepKind {
        match op {
            Operation::Clone => StepKind::Clone,
            Operation::Configure => StepKind::Configure,
            Operation::Resize => StepKind::Resize,
            Operation::Upload => StepKind::UploadMedia,
            Operation::Start | Operation::Boot => StepKind::Start,
            Operation::Shutdown => StepKind::Shutdown,
            Operation::Stop => StepKind::Stop,
            Operation::Destroy => StepKind::Destroy,
            Operation::DeleteVolume => StepKind::DeleteMedia,
            Operation::AgentExec | Operation::Bootstrap => StepKind::Provision,
        }
    }
}
