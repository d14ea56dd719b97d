//! When to look again after a reconcile: at a task's expected end (learned
//! per Proxmox cluster, on a shared grid so one node task list read answers
//! many tasks), near the expected boot, at a failed step's retry, after the
//! machine's growing delay when the instance could not be asked, or at the
//! periodic resync when only a watched change can help.

use std::time::Duration;

use tokio::time::Instant;

use crate::machine::context::Run;
use crate::machine::decide::{Facts, Operation, Until};
use crate::machine::runtime::timing::next_poll;

use super::End;

/// The requeue delay for `end`.
pub fn after(run: &Run<'_>, facts: &Facts, end: &End) -> Duration {
    let rt = run.rt();
    let o = &rt.options;
    let w = match end {
        End::Done => return rt.scaled(o.steady),
        End::More => return rt.poll_floor(),
        End::Wait(w) => w,
    };
    match w.until {
        Until::Change => rt.scaled(o.resync),
        Until::Steady => rt.scaled(o.steady),
        Until::Soon => rt.scaled(o.soon),
        Until::Slot => rt.scaled(o.slot_recheck),
        Until::Retry(d) => d.max(rt.poll_floor()),
        Until::After(d) => d.max(rt.poll_floor()),
        Until::Backoff => rt.retries.unreachable(&run.me.uid),
        Until::Task(op) => task(run, op),
        Until::Boot => boot(run, facts),
    }
}

/// At the running task's expected end; the due time is remembered, so a
/// reconcile woken earlier by a watch does not ask Proxmox about it.
fn task(run: &Run<'_>, op: Operation) -> Duration {
    let rt = run.rt();
    let memo = rt.memo(&run.me.uid);
    let (elapsed, late) = memo
        .task
        .as_ref()
        .map(|t| (t.since.elapsed(), t.late_polls))
        .unwrap_or((Duration::ZERO, 0));
    let identity = run
        .client
        .as_ref()
        .map(|c| c.identity.clone())
        .unwrap_or_else(|| crate::clients::Identity::new(""));
    let expected = rt.timer.expected(&identity, op);
    let delay = rt.timer.poll_in(expected, elapsed, late, rt.poll_floor());
    // kube-runtime keeps the earliest of several requeues of an object, so
    // an earlier due time still stands.
    let due = Instant::now() + delay;
    let now = Instant::now();
    rt.update_memo(&run.me.uid, |m| {
        if let Some(t) = &mut m.task {
            t.poll_at = match t.poll_at.filter(|at| *at > now) {
                Some(old) => Some(old.min(due)),
                None => Some(due),
            };
        }
    });
    delay
}

/// Near the expected end of the boot (the guest agent answers then).
fn boot(run: &Run<'_>, _facts: &Facts) -> Duration {
    let rt = run.rt();
    let memo = rt.memo(&run.me.uid);
    let identity = run
        .client
        .as_ref()
        .map(|c| c.identity.clone())
        .unwrap_or_else(|| crate::clients::Identity::new(""));
    let elapsed = memo.started_at.map(|t| t.elapsed()).unwrap_or_default();
    let expected = rt.timer.expected(&identity, Operation::Boot);
    let late = u32::from(elapsed > expected)
        * ((elapsed.as_millis() / expected.as_millis().max(1)) as u32).min(8);
    next_poll(expected, elapsed, late, rt.poll_floor())
}
