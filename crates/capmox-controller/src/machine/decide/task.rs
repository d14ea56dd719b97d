//! What a recorded task means for the next step, in creation and deletion.

use pve_client::{ConflictKind, TaskFailureKind};

use super::operation::Operation;
use crate::reasons::Reason;

use super::facts::{Facts, TaskFact};
use super::observed::TaskEnd;
use super::step::{Observe, Step, Until, wait};

/// The `VirtualMachineProvisioned` reason while a task of `op` runs.
pub fn running(op: Operation, deleting: bool) -> Reason {
    let text = format!("waiting for the {} task", op.as_str());
    if deleting {
        return Reason::Deleting(text);
    }
    match op {
        Operation::Clone => Reason::Cloning(text),
        Operation::Configure => Reason::Configuring(text),
        Operation::Resize => Reason::Resizing(text),
        Operation::Upload => Reason::UploadingBootstrapData(text),
        Operation::Start => Reason::PoweringOn(text),
        Operation::Boot => Reason::WaitingForAddresses(text),
        Operation::AgentExec | Operation::Bootstrap => Reason::WaitingForBootstrap(text),
        Operation::DeleteVolume => Reason::CleaningUpBootstrapData(text),
        Operation::Shutdown | Operation::Stop | Operation::Destroy => Reason::Deleting(text),
    }
}

/// The reason of a failed task of `op`.
pub fn failed(op: Operation, deleting: bool, message: &str) -> Reason {
    let text = format!("{} task failed: {message}", op.as_str());
    if deleting {
        return Reason::DeletionFailed(text);
    }
    match op {
        Operation::Clone => Reason::CloneFailed(text),
        Operation::Configure => Reason::ConfigureFailed(text),
        Operation::Resize => Reason::ResizeFailed(text),
        Operation::Upload => Reason::UploadFailed(text),
        Operation::Start => Reason::PowerOnFailed(text),
        Operation::Boot => Reason::WaitingForAddresses(text),
        Operation::AgentExec | Operation::Bootstrap => Reason::WaitingForBootstrap(text),
        Operation::DeleteVolume => Reason::MediaDeletionFailed(text),
        Operation::Shutdown | Operation::Stop | Operation::Destroy => Reason::DeletionFailed(text),
    }
}

/// The step a recorded task calls for, or `None` when no task is recorded
/// (the decision goes on).
pub fn decide(f: &Facts) -> Option<Step> {
    if !f.task_recorded {
        return None;
    }
    let Some(task) = &f.task else {
        return Some(Step::Observe(Observe::Task));
    };
    Some(match task {
        TaskFact::Running(op) => wait(running(*op, f.deleting), Until::Task(*op)),
        TaskFact::Unreadable(reason) => wait(reason.clone(), Until::Backoff),
        TaskFact::Succeeded(op) => Step::ClearTask(TaskEnd::Succeeded(*op)),
        TaskFact::Lost(op) => Step::ClearTask(TaskEnd::Lost(*op)),
        TaskFact::Failed { op, kind, message } => Step::ClearTask(ended(f, *op, kind, message)),
    })
}

/// How a failed task ended. Some failures mean the operation's goal holds
/// anyway: a start of a VM that already runs, a deletion of something that
/// is already gone, a clone into a VMID that turns out to hold our VM (the
/// VM is looked at again either way).
fn ended(f: &Facts, op: Operation, kind: &TaskFailureKind, message: &str) -> TaskEnd {
    let goal_holds = matches!(
        (op, kind),
        (
            Operation::Start,
            TaskFailureKind::Conflict(ConflictKind::AlreadyRunning)
        ) | (
            Operation::Shutdown | Operation::Stop,
            TaskFailureKind::Conflict(ConflictKind::NotRunning)
        ) | (
            Operation::DeleteVolume | Operation::Destroy,
            TaskFailureKind::NotFound(_)
        )
    );
    if goal_holds {
        return TaskEnd::Succeeded(op);
    }
    // A clone that fails while the machine is deleted leaves nothing to do.
    if f.deleting && op == Operation::Clone {
        return TaskEnd::Lost(op);
    }
    TaskEnd::Failed {
        op,
        kind: kind.clone(),
        reason: failed(op, f.deleting, message),
    }
}
