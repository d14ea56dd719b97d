//! Tasks: recording one that a step started, and forgetting one that ended
//! with the bookkeeping its end calls for (what the runtime remembers, the
//! retry state of the step the task belongs to).

use tokio::time::Instant;

use crate::error::Error;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, Power, StepKind, TaskEnd};
use crate::machine::runtime::memo::{TaskMemo, VmMemo};
use crate::machine::runtime::slots::TemplateKey;
use crate::pve::{NodeName, Upid};

/// A task was started: recorded in `status.taskRef` (written at the end of
/// the reconcile) and remembered as issued by this process, so a reconcile
/// handed an object from before that write observes it instead of issuing
/// it again.
pub fn started(
    run: &mut Run<'_>,
    upid: &Upid,
    op: Operation,
    vmid: Option<u32>,
    template: Option<TemplateKey>,
    volume: Option<String>,
) -> Observed {
    run.status.task_ref = Some(upid.as_str().to_string());
    let listed_before = listed_before(run, upid, vmid);
    run.rt().update_memo(&run.me.uid, |m| {
        m.task = Some(TaskMemo {
            upid: upid.as_str().to_string(),
            op,
            vmid,
            since: Instant::now(),
            late_polls: 0,
            seen_running: None,
            poll_at: None,
            template,
            volume,
            listed_before,
        })
    });
    tracing::info!(%upid, op = op.as_str(), "task started");
    Observed::TaskStarted(op)
}

/// The power state the instance's newest listing showed for `vmid` when a
/// `qmstart`, `qmshutdown` or `qmstop` was issued, when it was the opposite
/// of the task's goal (see [`TaskMemo::listed_before`]); `None` for every
/// other task, and for HA requests, whose task ends before the VM changes
/// state (docs/field-cases.md B33).
fn listed_before(run: &Run<'_>, upid: &Upid, vmid: Option<u32>) -> Option<Power> {
    let goal = Operation::power_after(upid.worker_type())?;
    let inst = run.instance().ok()?;
    let snapshot = run.rt().resources.latest(&inst.identity)?;
    let listed = Power::from_run_state(snapshot.vm(vmid?)?.run_state())?;
    (listed != goal).then_some(listed)
}

/// Forgets the ended task.
///
/// # Errors
/// None today; the signature matches the other steps.
pub async fn clear(run: &mut Run<'_>, facts: &Facts, end: TaskEnd) -> Result<Observed, Error> {
    run.status.task_ref = None;
    let memo = run.rt().memo(&run.me.uid);
    let task = memo.task.clone();
    let now = Instant::now();
    let mut out = vec![Observed::TaskCleared(end.clone())];
    let uid = run.me.uid.clone();
    let rt = run.rt();
    match &end {
        TaskEnd::Succeeded(op) => {
            rt.retries.succeeded(&uid, StepKind::of_operation(*op));
            match op {
                Operation::Start => {
                    run.status.vm_status = Some("running".into());
                    rt.update_memo(&uid, |m| {
                        m.started_at = Some(now);
                        if let Some(v) = &mut m.vm {
                            v.power = Some(Power::Running);
                        }
                    });
                }
                Operation::Shutdown | Operation::Stop => {
                    run.status.vm_status = Some("stopped".into());
                    rt.update_memo(&uid, |m| {
                        if let Some(v) = &mut m.vm {
                            v.power = Some(Power::Stopped);
                        }
                    });
                }
                Operation::Clone => {
                    // A fresh clone is stopped, on the node it was cloned to.
                    let node = run
                        .status
                        .proxmox_node
                        .as_ref()
                        .and_then(|n| NodeName::new(n.clone()).ok());
                    rt.update_memo(&uid, |m| {
                        m.vm = match (facts.vmid, node) {
                            (Some(vmid), Some(node)) => Some(VmMemo {
                                vmid,
                                node,
                                config: None,
                                power: Some(Power::Stopped),
                            }),
                            _ => None,
                        };
                        m.fresh_after = Some(now);
                    });
                }
                Operation::Upload => {
                    rt.update_memo(&uid, |m| m.media_uploaded = facts.vmid);
                    out.push(Observed::MediaUploaded);
                }
                Operation::DeleteVolume => {
                    let volume = task
                        .as_ref()
                        .and_then(|t| t.volume.clone())
                        .or_else(|| facts.media_recorded.as_ref().map(|m| m.volid.clone()));
                    if let Some(v) = volume {
                        run.clear_media_record(&v).await?;
                        out.push(Observed::MediaDeleted(v));
                    }
                }
                Operation::Destroy => rt.update_memo(&uid, |m| {
                    m.forget_vm(now);
                    m.destroyed = facts.vmid;
                }),
                Operation::Configure | Operation::Resize => {}
                Operation::Boot | Operation::AgentExec | Operation::Bootstrap => {}
            }
        }
        TaskEnd::Lost(_) => rt.update_memo(&uid, |m| m.forget_vm(now)),
        TaskEnd::Failed { op, kind, reason } => {
            rt.update_memo(&uid, |m| m.forget_vm(now));
            out.push(super::failed(
                run,
                StepKind::of_operation(*op),
                super::task_class(kind),
                reason.clone(),
            ));
        }
    }
    rt.update_memo(&uid, |m| m.task = None);
    Ok(Observed::All(out))
}
