//! The task in `status.taskRef` (or the one this process issued and the
//! object does not show yet: the informer cache lags behind our own status
//! write, and a task issued by this process wins over an absent or older
//! `status.taskRef` — it is observed, never issued again).
//!
//! A task's end is read from its node's task list, one read shared by every
//! task awaited on that node ([`crate::machine::runtime::node_tasks`]), or
//! directly once it runs well past its expected end. A destroy's end, and a
//! start's, shutdown's or stop's, is read from the instance's listing
//! instead, which every machine of the instance shares (the VM leaves it
//! when the destroy finishes; it shows the VM's new power state). While the requeue that
//! reads its end is not due yet (a watched object woke the machine early),
//! the task is taken as running without asking Proxmox.

use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use crate::clients::Instance;
use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, Power, TaskFact};
use crate::machine::runtime::memo::{Memo, TaskMemo};
use crate::machine::runtime::node_tasks::Answer;
use crate::machine::runtime::slots::TemplateKey;
use crate::machine::runtime::timing::observation;
use crate::pve::{PveError, TaskOutcome, Upid, VmId, WaitOptions};
use crate::reasons::Reason;

/// Polls past a task's expected end after which its status is read
/// directly rather than from its node's task list.
pub const DIRECT_AFTER_LATE_POLLS: u32 = 3;

/// The UPID to observe: ours when this process issued one for the VMID and
/// the object does not show it, else the recorded one.
pub fn current(run: &Run<'_>, facts: &Facts, memo: &Memo) -> Option<String> {
    let own = memo
        .task
        .as_ref()
        .filter(|t| t.vmid.is_some() && t.vmid == facts.vmid)
        .map(|t| t.upid.clone());
    own.or_else(|| run.status.task_ref.clone())
}

/// Reads the task.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let memo = run.rt().memo(&run.me.uid);
    let Some(text) = current(run, facts, &memo) else {
        return Observed::Task(TaskFact::Lost(Operation::Configure));
    };
    run.status.task_ref = Some(text.clone());
    let Ok(upid) = Upid::parse(&text) else {
        return Observed::Task(TaskFact::Lost(Operation::Configure));
    };
    let op = Operation::from_worker(upid.worker_type()).unwrap_or(Operation::Configure);
    let Ok(inst) = run.instance().cloned() else {
        return Observed::Task(TaskFact::Unreadable(Reason::InstanceUnreachable {
            instance: facts.instance.clone().unwrap_or_default(),
            detail: "no client".into(),
        }));
    };
    let rt = run.rt();
    let known_end = rt.node_tasks.ended(&inst.identity, &upid);
    let ours = memo.task.as_ref().filter(|t| t.upid == text);
    if let Some(t) = ours
        && let Some(due) = t.poll_at
        && known_end.is_none()
        && !facts.deleting
        && Instant::now() + run.rt().poll_floor() < due
    {
        return Observed::Task(TaskFact::Running(op));
    }
    if ours.is_none() {
        adopt(run, &inst, &upid, op);
    }
    let memo = run.rt().memo(&run.me.uid);
    let fact = match result(run, &inst, &upid, op, &memo, known_end).await {
        Ok(outcome) => {
            // `None`: a task the listing proved ended; no exit status read.
            if let Some(outcome) = outcome.filter(|o| o.warnings > 0) {
                run.event(
                    EventKind::Normal,
                    Reason::TaskWarnings(format!(
                        "{} task finished with {}",
                        op.as_str(),
                        outcome.exitstatus
                    )),
                );
            }
            TaskFact::Succeeded(op)
        }
        Err(PveError::TaskPending { .. }) => {
            let expected = run.rt().timer.expected(&inst.identity, op);
            run.rt().update_memo(&run.me.uid, |m| {
                if let Some(t) = &mut m.task {
                    let elapsed = t.since.elapsed();
                    t.seen_running = Some(elapsed);
                    if elapsed >= expected {
                        t.late_polls += 1;
                    }
                }
            });
            return Observed::Task(TaskFact::Running(op));
        }
        Err(PveError::TaskFailed {
            exitstatus, kind, ..
        }) => TaskFact::Failed {
            op,
            kind,
            message: exitstatus,
        },
        Err(PveError::NotFound { .. }) => TaskFact::Lost(op),
        Err(e) => {
            return Observed::Task(TaskFact::Unreadable(Reason::InstanceUnreachable {
                instance: inst.name.clone(),
                detail: format!("cannot read task {text}: {e}"),
            }));
        }
    };
    ended(run, &inst, &upid, op, &fact);
    Observed::Task(fact)
}

/// A task found recorded that this process did not issue (after a
/// restart): count its time from now; a clone holds its template's slot.
fn adopt(run: &Run<'_>, inst: &Instance, upid: &Upid, op: Operation) {
    let template = (op == Operation::Clone)
        .then(|| upid.id().parse::<u32>().ok())
        .flatten()
        .map(|t| TemplateKey::new(&inst.identity, t));
    if let Some(k) = &template {
        run.rt().slots.adopt(k, &run.me.uid);
    }
    run.rt().update_memo(&run.me.uid, |m| {
        m.task = Some(TaskMemo {
            upid: upid.as_str().to_string(),
            op,
            vmid: None,
            since: Instant::now(),
            late_polls: 0,
            seen_running: None,
            poll_at: None,
            template,
            volume: None,
            listed_before: None,
        })
    });
}

/// The task ended: stop awaiting it on its node, learn its duration (only
/// from tasks whose start this process saw), and give back a clone's slot
/// (widening the template's clone window after a success, halving it after
/// a lock timeout).
fn ended(run: &Run<'_>, inst: &Instance, upid: &Upid, op: Operation, fact: &TaskFact) {
    let rt = run.rt();
    rt.node_tasks.forget(&inst.identity, upid);
    let memo = rt.memo(&run.me.uid);
    let Some(t) = memo.task.as_ref().filter(|t| t.upid == upid.as_str()) else {
        return;
    };
    if let (TaskFact::Succeeded(_), Some(vmid), Some(power)) = (
        fact,
        t.vmid.and_then(|v| VmId::new(v).ok()),
        Operation::power_after(upid.worker_type()),
    ) {
        // Our own start, shutdown or stop ended OK: the VM's power state is
        // known now, while the listing's lags (docs/proxmox-semantics.md §9).
        let config = memo
            .vm_at(vmid.get())
            .filter(|v| v.node == *upid.node())
            .and_then(|v| v.config.clone());
        super::vm::remember(run, vmid, upid.node(), config, Some(power));
    }
    if let TaskFact::Succeeded(op) = fact
        && t.vmid.is_some()
    {
        let expected = rt.timer.expected(&inst.identity, *op);
        rt.timer.observe(
            &inst.identity,
            *op,
            observation(t.since.elapsed(), t.seen_running, expected),
        );
    }
    if op == Operation::Clone {
        rt.slots.release(&run.me.uid);
        if let Some(k) = &t.template {
            match fact {
                TaskFact::Succeeded(_) => rt.slots.succeeded(k),
                TaskFact::Failed { kind, .. } if kind.is_retryable() => {
                    let window = rt.slots.congested(k);
                    tracing::debug!(
                        template = k.template,
                        window,
                        "clone failed on a lock; clone window halved"
                    );
                }
                _ => {}
            }
        }
    }
}

/// Whether task `upid` has ended, from the instance's listing, which every
/// machine of the instance shares (a node's task list serves one node):
///
/// - a destroy: the VM leaves `/cluster/resources` when its destroy task
///   finishes (docs/proxmox-semantics.md §10), so a listing fetched after
///   the destroy was issued that lacks the VMID proves the end;
/// - a `qmstart`, `qmshutdown` or `qmstop` issued while the listing showed
///   the VM in the opposite state
///   ([`TaskMemo::listed_before`](crate::machine::runtime::memo::TaskMemo)):
///   a listing fetched after it that shows the task's goal (running,
///   stopped) proves the change (power states there lag, never go back;
///   docs/proxmox-semantics.md §9).
///
/// `Some(true)`: ended; `Some(false)`: the listing still shows what the
/// task changes, so it runs (a failed task leaves it so, and is read from
/// the task's own status once it runs [`DIRECT_AFTER_LATE_POLLS`] polls
/// late). `None` when the listing cannot tell (cannot be read, the VMID is
/// not known, another task, a power change issued without a listing
/// showing the opposite state): the task list decides.
async fn listing_end(
    run: &Run<'_>,
    inst: &Instance,
    upid: &Upid,
    op: Operation,
    memo: &Memo,
) -> Option<bool> {
    let t = memo.task.as_ref().filter(|t| t.upid == upid.as_str())?;
    let destroy = op == Operation::Destroy;
    let goal = Operation::power_after(upid.worker_type());
    let before = t.listed_before;
    if !destroy && (goal.is_none() || before.is_none()) {
        return None;
    }
    let vmid = t.vmid.or_else(|| upid.id().parse().ok())?;
    let listing = match run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), Some(t.since))
        .await
    {
        Ok(listing) => listing,
        Err(e) => {
            tracing::debug!(error = %e, "the listing cannot be read; reading the task's end from its node");
            return None;
        }
    };
    let vm = listing.vm(vmid);
    if destroy {
        return Some(vm.is_none());
    }
    match vm.and_then(|v| Power::from_run_state(v.run_state())) {
        Some(p) if Some(p) == goal => Some(true),
        Some(p) if Some(p) == before => Some(false),
        _ => None,
    }
}

/// How task `upid` stands: its end as a node's task list showed it
/// (`known_end`, or one list read shared by every task of the node), else
/// its own status read — for a task the list does not show, when the list
/// cannot be read, and once the task runs [`DIRECT_AFTER_LATE_POLLS`] polls
/// past its expected end (the status is computed from the node's live
/// process table; the list comes from a file a crashed worker may leave
/// stale). A destroy's, start's, shutdown's or stop's end comes from the listing
/// first when it can tell ([`listing_end`]): `Ok(None)`, the task ended OK
/// with no exit status read.
///
/// # Errors
/// `TaskPending` while it runs, `TaskFailed`, `NotFound` (the node forgot
/// it), transport errors.
async fn result(
    run: &Run<'_>,
    inst: &Instance,
    upid: &Upid,
    op: Operation,
    memo: &Memo,
    known_end: Option<String>,
) -> Result<Option<TaskOutcome>, PveError> {
    let late = memo.task.as_ref().map_or(0, |t| t.late_polls);
    if known_end.is_none()
        && late < DIRECT_AFTER_LATE_POLLS
        && let Some(ended) = listing_end(run, inst, upid, op, memo).await
    {
        return if ended {
            Ok(None)
        } else {
            Err(PveError::TaskPending {
                instance: inst.api.instance().to_string(),
                upid: upid.clone(),
                waited: Duration::ZERO,
            })
        };
    }
    let exit = match known_end {
        Some(e) => Some(e),
        None if late >= DIRECT_AFTER_LATE_POLLS => None,
        None => {
            let due = memo
                .task
                .as_ref()
                .and_then(|t| t.poll_at)
                .unwrap_or_else(Instant::now);
            let me = ObjectRef::new(&run.me.name).within(&run.me.ns);
            match run
                .rt()
                .node_tasks
                .status(inst.api.as_ref(), &inst.identity, upid, due, me)
                .await
            {
                Ok(Answer::Ended(e)) => Some(e),
                Ok(Answer::Running) => {
                    return Err(PveError::TaskPending {
                        instance: inst.api.instance().to_string(),
                        upid: upid.clone(),
                        waited: Duration::ZERO,
                    });
                }
                Ok(Answer::Unlisted) => None,
                Err(e) => {
                    tracing::debug!(error = %e, node = upid.node().as_str(), "the node's task list cannot be read; reading the task's status");
                    None
                }
            }
        }
    };
    match exit {
        Some(e) => inst.api.task_ended(upid, e).await.map(Some),
        None => {
            let once = WaitOptions {
                deadline: Duration::ZERO,
                initial_interval: Duration::from_millis(1),
                max_interval: Duration::from_millis(1),
            };
            inst.api.wait_task(upid, once).await.map(Some)
        }
    }
}
