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
