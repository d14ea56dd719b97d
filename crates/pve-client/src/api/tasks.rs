//! Tasks: `GET …/tasks/{upid}/status`, `GET …/tasks/{upid}/log`,
//! `DELETE …/tasks/{upid}`. A task is always addressed on the node in its
//! UPID (another node answers `no such task`).

use serde::Deserialize;

use crate::PveClient;
use crate::client::{Call, seg};
use crate::encode::Form;
use crate::error::PveError;
use crate::types::lenient::{opt_string, opt_u64};
use crate::types::{NodeName, Upid};

/// `running` or `stopped`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskState {
    /// Still running.
    Running,
    /// Finished; see `exitstatus`.
    Stopped,
    /// Anything else, verbatim.
    Other(String),
}

impl<'de> Deserialize<'de> for TaskState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Ok(match s.as_str() {
            "running" => Self::Running,
            "stopped" => Self::Stopped,
            _ => Self::Other(s),
        })
    }
}

/// Response of `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskStatus {
    /// Running or stopped.
    pub status: TaskState,
    /// Only when stopped: `OK`, `WARNINGS: <n>`, the error text, or
    /// `unexpected status`.
    #[serde(default, deserialize_with = "opt_string")]
    pub exitstatus: Option<String>,
    /// Worker type (`qmclone`, …).
    #[serde(rename = "type", default, deserialize_with = "opt_string")]
    pub kind: Option<String>,
    /// Task owner.
    #[serde(default, deserialize_with = "opt_string")]
    pub user: Option<String>,
}

/// One entry of `GET /nodes/{node}/tasks` (a node's task list).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskListEntry {
    /// The task.
    pub upid: String,
    /// `RUNNING` (or absent) while the task runs; afterwards its exit
    /// status: `OK`, `WARNINGS: <n>` or the error text. PVE's
    /// `PVE/API2/Tasks.pm` sets `RUNNING` for tasks of its active list.
    #[serde(default, deserialize_with = "opt_string")]
    pub status: Option<String>,
    /// Start, Unix epoch seconds.
    #[serde(default, deserialize_with = "opt_u64")]
    pub starttime: Option<u64>,
    /// End, Unix epoch seconds (only once the task ended).
    #[serde(default, deserialize_with = "opt_u64")]
    pub endtime: Option<u64>,
}

impl TaskListEntry {
    /// The exit status if the task has ended, `None` while it runs.
    pub fn exitstatus(&self) -> Option<&str> {
        match self.status.as_deref() {
            None | Some("RUNNING") | Some("running") => None,
            Some(s) => Some(s),
        }
    }
}

/// One line of a task log.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct TaskLogLine {
    /// Line number (1-based).
    pub n: u64,
    /// Text.
    pub t: String,
}

/// A slice of a task log with the total line count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLog {
    /// The lines returned.
    pub lines: Vec<TaskLogLine>,
    /// Total lines in the log (when the server reports it).
    pub total: Option<u64>,
}

#[derive(Deserialize)]
struct LogEnvelope {
    data: Vec<TaskLogLine>,
    #[serde(default, deserialize_with = "crate::types::lenient::opt_u64")]
    total: Option<u64>,
}

fn task_path(upid: &Upid, rest: &str) -> String {
    format!(
        "/nodes/{}/tasks/{}{rest}",
        seg(upid.node().as_str()),
        seg(upid.as_str())
    )
}

impl PveClient {
    /// `GET /nodes/{node}/tasks/{upid}/status` on the UPID's node.
    ///
    /// # Errors
    /// [`PveError::NotFound`] (`no such task`: the node forgot it, e.g. after
    /// a restart — re-read the state of what the task acted on); transport
    /// errors.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, PveError> {
        self.call(Call::get(
            "/nodes/{node}/tasks/{upid}/status",
            task_path(upid, "/status"),
        ))
        .await
    }

    /// `GET /nodes/{node}/tasks?source=all&since=&limit=`: the node's
    /// tasks visible to this token, running ones first, then ended ones
    /// newest first, started at or after `since` (Unix epoch seconds), at
    /// most `limit` of them. One call answers for every task of the node.
    ///
    /// # Errors
    /// Transport and API errors ([`PveError::NotFound`] for an unknown node).
    pub async fn node_tasks(
        &self,
        node: &NodeName,
        since: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TaskListEntry>, PveError> {
        let mut q = Form::new();
        q.push("source", "all").push("limit", limit.to_string());
        if let Some(since) = since {
            q.push("since", since.to_string());
        }
        self.call(
            Call::get(
                "/nodes/{node}/tasks",
                format!("/nodes/{}/tasks", seg(node.as_str())),
            )
            .with_query(q),
        )
        .await
    }

    /// `GET /nodes/{node}/tasks/{upid}/log?start=&limit=`: `limit` lines from
    /// line index `start` (0-based).
    ///
    /// # Errors
    /// As [`PveClient::task_status`].
    pub async fn task_log(&self, upid: &Upid, start: u64, limit: u64) -> Result<TaskLog, PveError> {
        let mut q = Form::new();
        q.push("start", start.to_string())
            .push("limit", limit.to_string());
        let env: LogEnvelope = self
            .call_raw(
                Call::get("/nodes/{node}/tasks/{upid}/log", task_path(upid, "/log")).with_query(q),
            )
            .await?;
        Ok(TaskLog {
            lines: env.data,
            total: env.total,
        })
    }

    /// `DELETE /nodes/{node}/tasks/{upid}`: stops a running task (the worker
    /// gets SIGTERM; a clone cleans up its partial disks).
    ///
    /// # Errors
    /// As [`PveClient::task_status`].
    pub async fn stop_task(&self, upid: &Upid) -> Result<(), PveError> {
        let _: Option<serde_json::Value> = self
            .call(Call::delete(
                "/nodes/{node}/tasks/{upid}",
                task_path(upid, ""),
                Form::new(),
            ))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_status_and_log() {
        let s: TaskStatus = serde_json::from_str(
            r#"{"status":"stopped","exitstatus":"WARNINGS: 1","type":"qmstart","user":"capmox@pve!capi","pid":1,"upid":"x"}"#,
        )
        .unwrap();
        assert_eq!(s.status, TaskState::Stopped);
        assert_eq!(s.exitstatus.as_deref(), Some("WARNINGS: 1"));
        let r: TaskStatus = serde_json::from_str(r#"{"status":"running"}"#).unwrap();
        assert_eq!(r.status, TaskState::Running);
        assert_eq!(r.exitstatus, None);
        let l: LogEnvelope = serde_json::from_str(
            r#"{"data":[{"n":1,"t":"starting"},{"n":2,"t":"TASK OK"}],"total":2}"#,
        )
        .unwrap();
        assert_eq!(l.total, Some(2));
        assert_eq!(l.data[1].t, "TASK OK");
    }

    #[test]
    fn task_list_entries_say_whether_the_task_ended() {
        let l: Vec<TaskListEntry> = serde_json::from_str(
            r#"[{"upid":"a","status":"RUNNING","starttime":100},
                {"upid":"b","starttime":"100"},
                {"upid":"c","status":"OK","starttime":100,"endtime":160},
                {"upid":"d","status":"can't lock file","starttime":100,"endtime":101}]"#,
        )
        .unwrap();
        assert_eq!(l[0].exitstatus(), None);
        assert_eq!(l[1].exitstatus(), None);
        assert_eq!(l[1].starttime, Some(100));
        assert_eq!(l[2].exitstatus(), Some("OK"));
        assert_eq!(l[2].endtime, Some(160));
        assert_eq!(l[3].exitstatus(), Some("can't lock file"));
    }

    #[test]
    fn task_paths_use_the_upid_node() {
        let u = Upid::parse("UPID:pve-a2:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:capmox@pve!capi:")
            .unwrap();
        assert_eq!(
            task_path(&u, "/status"),
            "/nodes/pve-a2/tasks/UPID%3Apve-a2%3A000A1B2C%3A0132F4E5%3A6754A3B2%3Aqmclone%3A9000%3Acapmox%40pve%21capi%3A/status"
        );
    }
}
