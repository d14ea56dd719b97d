//! Waiting for tasks: [`PveClient::wait_task`] polls a task's status with
//! capped exponential backoff until it stops or a deadline passes.
//!
//! Success rules (docs/proxmox-semantics.md §5, docs/field-cases.md B04): `OK` and `WARNINGS: <n>`
//! both mean done; anything else is a failure carrying the text and the last
//! log lines. Transient errors while polling (connection resets, 5xx, the
//! node briefly unreachable) are tolerated until the deadline.

use std::time::Duration;

use tokio::time::Instant;

use crate::PveClient;
use crate::api::tasks::TaskState;
use crate::error::{PveError, task_failure_kind};
use crate::types::Upid;

/// Lines of the task log kept in [`PveError::TaskFailed`].
pub const LOG_TAIL_LINES: u64 = 10;

/// How long and how often to poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitOptions {
    /// Give up (with [`PveError::TaskPending`]) after this long.
    pub deadline: Duration,
    /// First pause between polls; doubled after each poll.
    pub initial_interval: Duration,
    /// Upper bound of the pause.
    pub max_interval: Duration,
}

impl Default for WaitOptions {
    /// 10 minutes, polling after 0.5 s, 1 s, 2 s, then every 4 s (docs/proxmox-semantics.md
    /// §19: poll every 1–2 s with backoff; big clones take minutes).
    fn default() -> Self {
        Self {
            deadline: Duration::from_secs(600),
            initial_interval: Duration::from_millis(500),
            max_interval: Duration::from_secs(4),
        }
    }
}

impl WaitOptions {
    /// The pause before poll number `n` (0-based): `initial · 2ⁿ`, capped.
    pub fn interval(&self, n: u32) -> Duration {
        let factor = 1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX);
        self.initial_interval
            .saturating_mul(factor)
            .min(self.max_interval)
    }
}

/// A task that ended successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The task.
    pub upid: Upid,
    /// `OK` or `WARNINGS: <n>`.
    pub exitstatus: String,
    /// Number of warnings (0 for `OK`).
    pub warnings: u32,
}

/// Interprets a stopped task's exit status: `Some(warnings)` for `OK` (0)
/// and `WARNINGS: <n>`, `None` (a failure) for anything else.
pub fn success_warnings(exitstatus: &str) -> Option<u32> {
    let s = exitstatus.trim();
    if s == "OK" {
        return Some(0);
    }
    s.strip_prefix("WARNINGS:")
        .and_then(|n| n.trim().parse().ok())
}

impl PveClient {
    /// Polls `GET /nodes/{node}/tasks/{upid}/status` (on the UPID's node)
    /// until the task stops, sleeping [`WaitOptions::interval`] between polls.
    ///
    /// # Errors
    /// - [`PveError::TaskFailed`] with the exit status, its
    ///   [`crate::TaskFailureKind`] and the last [`LOG_TAIL_LINES`] log lines
    ///   (`unexpected status` = abnormal end, effect unknown).
    /// - [`PveError::TaskPending`] when still running at the deadline (the
    ///   task goes on; wait again later).
    /// - [`PveError::NotFound`] when the node does not know the task (restart):
    ///   re-read the state of what it acted on.
    /// - Any non-retryable error of a poll (authentication, permission, TLS);
    ///   retryable ones are retried until the deadline and then returned.
    pub async fn wait_task(
        &self,
        upid: &Upid,
        options: WaitOptions,
    ) -> Result<TaskOutcome, PveError> {
        let started = Instant::now();
        let mut poll = 0u32;
        loop {
            match self.task_status(upid).await {
                Ok(st) if st.status == TaskState::Running => {}
                Ok(st) => {
                    let exitstatus = st
                        .exitstatus
                        .unwrap_or_else(|| "unexpected status".to_owned());
                    return self.task_ended(upid, exitstatus).await;
                }
                Err(e) if e.is_retryable() && started.elapsed() < options.deadline => {
                    tracing::debug!(upid = %upid, error = %e, "task poll failed; will poll again");
                }
                Err(e) => return Err(e),
            }
            let pause = options.interval(poll);
            poll = poll.saturating_add(1);
            let elapsed = started.elapsed();
            if elapsed >= options.deadline {
                return Err(PveError::TaskPending {
                    instance: self.instance().to_owned(),
                    upid: upid.clone(),
                    waited: elapsed,
                });
            }
            tokio::time::sleep(pause.min(options.deadline - elapsed)).await;
        }
    }

    /// What a stopped task's exit status means, as [`PveClient::wait_task`]
    /// answers it: `OK` and `WARNINGS: <n>` are success; anything else is
    /// [`PveError::TaskFailed`] with the last [`LOG_TAIL_LINES`] log lines
    /// (read with up to two `GET …/tasks/{upid}/log` calls). For exit
    /// statuses learned elsewhere, e.g. from a node's task list
    /// ([`PveClient::node_tasks`]).
    ///
    /// # Errors
    /// [`PveError::TaskFailed`] for a failed task (a log that cannot be read
    /// leaves `log_tail` empty).
    pub async fn task_ended(
        &self,
        upid: &Upid,
        exitstatus: String,
    ) -> Result<TaskOutcome, PveError> {
        match success_warnings(&exitstatus) {
            Some(warnings) => {
                if warnings > 0 {
                    tracing::info!(upid = %upid, %exitstatus, "task finished with warnings");
                }
                Ok(TaskOutcome {
                    upid: upid.clone(),
                    exitstatus,
                    warnings,
                })
            }
            None => Err(self.task_failed(upid, exitstatus).await),
        }
    }

    /// Builds `TaskFailed`, fetching the log tail (best effort: a failure to
    /// read the log leaves it empty).
    async fn task_failed(&self, upid: &Upid, exitstatus: String) -> PveError {
        let log_tail = match self.task_log(upid, 0, 1).await {
            Ok(first) => {
                let total = first.total.unwrap_or(0);
                let start = total.saturating_sub(LOG_TAIL_LINES);
                match self.task_log(upid, start, LOG_TAIL_LINES).await {
                    Ok(log) => log.lines.into_iter().map(|l| l.t).collect(),
                    Err(e) => {
                        tracing::debug!(upid = %upid, error = %e, "could not read task log");
                        Vec::new()
                    }
                }
            }
            Err(e) => {
                tracing::debug!(upid = %upid, error = %e, "could not read task log");
                Vec::new()
            }
        };
        let kind = task_failure_kind(&exitstatus);
        PveError::TaskFailed {
            instance: self.instance().to_owned(),
            upid: upid.clone(),
            exitstatus,
            log_tail,
            kind,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_statuses() {
        assert_eq!(success_warnings("OK"), Some(0));
        assert_eq!(success_warnings("WARNINGS: 1"), Some(1));
        assert_eq!(success_warnings("WARNINGS: 12"), Some(12));
        assert_eq!(
            success_warnings(
                "clone failed: can't lock file '/var/lock/qemu-server/lock-9000.conf' - got timeout"
            ),
            None
        );
        assert_eq!(success_warnings("unexpected status"), None);
        assert_eq!(success_warnings("WARNINGS: many"), None);
        assert_eq!(success_warnings(""), None);
    }

    #[test]
    fn capped_exponential_intervals() {
        let o = WaitOptions {
            deadline: Duration::from_secs(60),
            initial_interval: Duration::from_millis(250),
            max_interval: Duration::from_secs(2),
        };
        let got: Vec<u128> = (0..6).map(|n| o.interval(n).as_millis()).collect();
        assert_eq!(got, vec![250, 500, 1000, 2000, 2000, 2000]);
        assert_eq!(o.interval(1000), Duration::from_secs(2));
    }
}
