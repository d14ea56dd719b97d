//! Running asynchronous tasks (`fork_worker` in Proxmox): a task is
//! registered as `running` with a real UPID, its body runs as a tokio task
//! that waits the configured (time-scaled) durations, and it ends `stopped`
//! with `OK`, `WARNINGS: <n>` or the error text, which is also the last log
//! line (`TASK ERROR: …`). `DELETE /nodes/{node}/tasks/{upid}` interrupts it;
//! dropping the body releases its locks and runs its cleanup guards.

use std::future::Future;
use std::sync::Arc;

use tokio::sync::Notify;

use crate::clock::epoch_now;
use crate::faults::FaultKind;
use crate::locks::flock_timeout_message;
use crate::state::Cluster;
use crate::state::tasks::{Task, TaskStatus, format_upid};

/// Handle given to a task body.
#[derive(Clone)]
pub(crate) struct TaskCtx {
    pub cluster: Arc<Cluster>,
    pub upid: String,
    pub node: String,
}

impl TaskCtx {
    /// Appends a log line.
    pub fn log(&self, line: impl Into<String>) {
        let mut st = self.cluster.lock();
        if let Some(t) = st.tasks.get_mut(&self.upid) {
            t.log.push(line.into());
        }
    }

    /// Waits `secs` simulated seconds.
    pub async fn sleep(&self, secs: f64) {
        self.cluster.clock.sleep(secs).await;
    }
}

/// What a successful task body reports.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TaskOk {
    /// Number of warnings (`WARNINGS: n` when > 0).
    pub warnings: u32,
}

/// Parameters of a new task.
pub(crate) struct TaskSpec {
    /// Node the task runs on.
    pub node: String,
    /// Worker type (`qmclone`, `qmstart`, …).
    pub kind: &'static str,
    /// Task id (usually the VMID acted on; the source VMID for clones).
    pub id: String,
    /// Owner (`user@realm` or `user@realm!token`).
    pub owner: String,
    /// Injected fault affecting the task.
    pub fault: Option<FaultKind>,
    /// Nominal duration (for failure faults), simulated seconds.
    pub nominal: f64,
    /// VMID whose lock a `LockTimeout` fault names.
    pub lock_vmid: u32,
    /// Lock timeout used by a `LockTimeout` fault, simulated seconds.
    pub lock_timeout: f64,
}

/// Registers and starts a task; returns its UPID.
pub(crate) fn spawn<F, Fut>(cluster: &Arc<Cluster>, spec: TaskSpec, body: F) -> String
where
    F: FnOnce(TaskCtx) -> Fut + Send + 'static,
    Fut: Future<Output = Result<TaskOk, String>> + Send + 'static,
{
    let cancel = Arc::new(Notify::new());
    let upid = {
        let mut st = cluster.lock();
        let (pid, pstart) = st.next_pid(&spec.node);
        let starttime = epoch_now();
        let upid = format_upid(
            &spec.node,
            pid,
            pstart,
            starttime,
            spec.kind,
            &spec.id,
            &spec.owner,
        );
        st.tasks.insert(Task {
            upid: upid.clone(),
            node: spec.node.clone(),
            pid,
            pstart,
            starttime,
            kind: spec.kind.to_string(),
            id: spec.id.clone(),
            owner: spec.owner.clone(),
            status: TaskStatus::Running,
            log: vec![],
            cancel: cancel.clone(),
        });
        upid
    };
    let ctx = TaskCtx {
        cluster: cluster.clone(),
        upid: upid.clone(),
        node: spec.node.clone(),
    };
    let fault = spec.fault.clone();
    let run_ctx = ctx.clone();
    tokio::spawn(async move {
        let work = async {
            match fault {
                Some(FaultKind::TaskFailure { message }) => {
                    run_ctx.sleep(spec.nominal).await;
                    Err(message)
                }
                Some(FaultKind::LockTimeout) => {
                    run_ctx.sleep(spec.lock_timeout).await;
                    Err(flock_timeout_message(spec.lock_vmid))
                }
                Some(FaultKind::TaskWarnings { count }) => {
                    let r = body(run_ctx.clone()).await;
                    r.map(|mut ok| {
                        for i in 0..count {
                            run_ctx.log(format!("WARN: simulated warning {}", i + 1));
                        }
                        ok.warnings += count;
                        ok
                    })
                }
                _ => body(run_ctx.clone()).await,
            }
        };
        let result = tokio::select! {
            r = work => r,
            _ = cancel.notified() => Err("received interrupt".to_string()),
        };
        finish(&ctx, result);
    });
    upid
}

fn finish(ctx: &TaskCtx, result: Result<TaskOk, String>) {
    let mut st = ctx.cluster.lock();
    if let Some(t) = st.tasks.get_mut(&ctx.upid) {
        let exitstatus = match &result {
            Ok(ok) if ok.warnings > 0 => {
                t.log.push(format!("TASK WARNINGS: {}", ok.warnings));
                format!("WARNINGS: {}", ok.warnings)
            }
            Ok(_) => {
                t.log.push("TASK OK".into());
                "OK".into()
            }
            Err(e) => {
                t.log.push(format!("TASK ERROR: {e}"));
                e.clone()
            }
        };
        t.status = TaskStatus::Stopped {
            exitstatus,
            endtime: epoch_now(),
        };
    }
    drop(st);
    ctx.cluster.task_done.notify_waiters();
}

/// Waits until a task has stopped, at most `max`; returns its exit status
/// if it stopped in time (`None` also for unknown UPIDs).
pub(crate) async fn wait_stopped(
    cluster: &Arc<Cluster>,
    upid: &str,
    max: std::time::Duration,
) -> Option<String> {
    let deadline = tokio::time::Instant::now() + max;
    loop {
        let notified = cluster.task_done.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let st = cluster.lock();
            match st.tasks.get(upid) {
                Some(Task {
                    status: TaskStatus::Stopped { exitstatus, .. },
                    ..
                }) => return Some(exitstatus.clone()),
                Some(_) => {}
                None => return None,
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return None;
        }
    }
}
