//! The steps: each runs exactly the action `decide` chose and reports what
//! it observed ([`Observed`]). A step never chooses what happens next and
//! never retries on its own; a failure is reported with its class, and the
//! retry state of the step ([`crate::machine::runtime::retries`]) says when
//! `decide` may choose it again.
//!
//! | module | steps |
//! |---|---|
//! | [`finalizer`] | add, remove the finalizer |
//! | [`adopt`] | mark a VM the Go provider CAPMOX made for this machine |
//! | [`instance`] | choose the instance, write `spec.instance` |
//! | [`claims`] | create, release the IP address claims |
//! | [`plan`] | choose node and template (placement in flight) |
//! | [`vmid`] | reserve the VMID (written to spec first), give it up |
//! | [`clone`] | clone the template |
//! | [`media`] | record and upload the bootstrap ISO, eject it, delete it |
//! | [`configure`] | the one config write |
//! | [`disks`] | grow a disk |
//! | [`power`] | start, shut down, stop |
//! | [`destroy`] | destroy the VM, remove a partial one |
//! | [`provision`] | providerID, addresses, `provisioned` |
//! | [`task`] | forget an ended task, with its bookkeeping |
//! | [`ha`] | make the VM an HA resource, remove it |

pub mod adopt;
pub mod claims;
pub mod clone;
pub mod configure;
pub mod destroy;
pub mod disks;
pub mod finalizer;
pub mod ha;
pub mod instance;
pub mod media;
pub mod plan;
pub mod power;
pub mod provision;
pub mod task;
pub mod vmid;

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pve_client::{ConflictKind, TaskFailureKind};

use super::context::Run;
use super::decide::{Facts, Gate, Observed, Step, StepKind};
use crate::error::Error;
use crate::pve::PveError;
use crate::reasons::Reason;

/// Runs action `step`.
///
/// # Errors
/// Kubernetes API failures ([`Error::Kube`]; a 409 ends the reconcile and
/// it is retried from fresh state). Proxmox failures are reported as
/// [`Observed::Failed`].
pub async fn run(step: Step, run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    match step {
        Step::Done | Step::Wait(_) | Step::Observe(_) => {
            Err(Error::Precondition(format!("not an action step: {step:?}")))
        }
        Step::AddFinalizer => finalizer::add(run).await,
        Step::Adopt => Ok(adopt::adopt(run, facts).await),
        Step::RemoveFinalizer => finalizer::remove(run, facts).await,
        Step::ChooseInstance => instance::choose(run).await,
        Step::EnsureClaims => claims::ensure(run).await,
        Step::ReleaseClaims => claims::release(run).await,
        Step::Plan => Ok(plan::plan(run, facts).await),
        Step::ReserveVmid => vmid::reserve(run, facts).await,
        Step::ReplaceVmid => vmid::replace(run, facts).await,
        Step::Clone => clone::clone(run, facts).await,
        Step::RemovePartial => Ok(destroy::destroy(run, facts, StepKind::RemovePartial).await),
        Step::UploadMedia => media::upload(run, facts).await,
        Step::Configure => Ok(configure::configure(run, facts).await),
        Step::Resize(r) => Ok(disks::resize(run, facts, r).await),
        Step::Start => Ok(power::start(run, facts).await),
        Step::Provision(devs) => provision::provision(run, facts, devs).await,
        Step::Eject => Ok(media::eject(run, facts).await),
        Step::DeleteMedia(m) => media::delete(run, facts, m).await,
        Step::Shutdown => Ok(power::shutdown(run, facts).await),
        Step::Stop => Ok(power::stop(run, facts).await),
        Step::Destroy => Ok(destroy::destroy(run, facts, StepKind::Destroy).await),
        Step::ClearTask(end) => task::clear(run, facts, end).await,
        Step::RegisterHa(target) => ha::register(run, facts, target).await,
        Step::UnregisterHa => ha::unregister(run, facts).await,
    }
}

/// The failure class of a Proxmox error (the key of its retry state).
pub fn class_of(e: &PveError) -> &'static str {
    match e {
        PveError::Conflict {
            kind: ConflictKind::AlreadyExists,
            ..
        } => "already_exists",
        PveError::Conflict {
            kind: ConflictKind::VmRunning,
            ..
        } => "vm_running",
        PveError::TaskFailed { kind, .. } => task_class(kind),
        e => e.category(),
    }
}

/// The failure class of a failed task.
pub fn task_class(kind: &TaskFailureKind) -> &'static str {
    match kind {
        TaskFailureKind::Conflict(ConflictKind::AlreadyExists) => "already_exists",
        TaskFailureKind::Conflict(ConflictKind::VmRunning) => "vm_running",
        k => k.category(),
    }
}

/// Step `step` failed with `reason` (class `class`): its retry gate. A
/// terminal reason is not kept (it is retried when something changes); any
/// other starts or continues the step's growing backoff.
pub fn failed(run: &Run<'_>, step: StepKind, class: &'static str, reason: Reason) -> Observed {
    if reason.terminal() {
        return Observed::Failed(Gate {
            step,
            class,
            reason,
            attempts: 1,
            remaining: Duration::ZERO,
            due_at: Timestamp::now(),
            fresh: true,
        });
    }
    Observed::Failed(
        run.rt()
            .retries
            .failed(&run.me.uid, step, class, reason, run.generation),
    )
}

/// [`failed`] for a Proxmox error: its class, and `reason`.
pub fn pve_failed(run: &Run<'_>, step: StepKind, e: &PveError, reason: Reason) -> Observed {
    failed(run, step, class_of(e), reason)
}

#[cfg(test)]
pub(crate) mod tests;
