//! Task records and UPIDs (docs/proxmox-semantics.md §5):
//! `UPID:<node>:<pid 8 hex>:<pstart 8 hex>:<starttime 8 hex>:<type>:<id>:<user>:`.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::Notify;

/// Formats a UPID (upper-case hex, trailing colon).
pub(crate) fn format_upid(
    node: &str,
    pid: u32,
    pstart: u32,
    starttime: u64,
    kind: &str,
    id: &str,
    user: &str,
) -> String {
    format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:")
}

/// State of a task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Running,
    Stopped { exitstatus: String, endtime: u64 },
}

/// One task.
#[derive(Clone, Debug)]
pub(crate) struct Task {
    pub upid: String,
    pub node: String,
    pub pid: u32,
    pub pstart: u32,
    pub starttime: u64,
    pub kind: String,
    pub id: String,
    /// `user@realm` or `user@realm!token`.
    pub owner: String,
    pub status: TaskStatus,
    pub log: Vec<String>,
    pub cancel: Arc<Notify>,
}

impl Task {
    /// The JSON of `GET /nodes/{node}/tasks/{upid}/status`.
    pub fn status_json(&self) -> Value {
        let (user, tokenid) = match self.owner.split_once('!') {
            Some((u, t)) => (u.to_string(), Some(t.to_string())),
            None => (self.owner.clone(), None),
        };
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": user,
        });
        if let Some(t) = tokenid {
            v["tokenid"] = json!(t);
        }
        match &self.status {
            TaskStatus::Running => v["status"] = json!("running"),
            TaskStatus::Stopped { exitstatus, .. } => {
                v["status"] = json!("stopped");
                v["exitstatus"] = json!(exitstatus);
            }
        }
        v
    }

    /// The JSON of a task list entry (`/nodes/{node}/tasks`, `/cluster/tasks`).
    pub fn list_json(&self) -> Value {
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": self.owner,
        });
        match &self.status {
            TaskStatus::Stopped {
                exitstatus,
                endtime,
            } => {
                v["status"] = json!(exitstatus);
                v["endtime"] = json!(endtime);
            }
            // PVE/API2/Tasks.pm: `$task->{status} = 'RUNNING' if !$task->{status}`.
            TaskStatus::Running => v["status"] = json!("RUNNING"),
        }
        v
    }

    pub fn is_running(&self) -> bool {
        self.status == TaskStatus::Running
    }
}

/// All tasks of a cluster, in start order.
#[derive(Debug, Default)]
pub(crate) struct TaskTable {
    pub by_upid: HashMap<String, Task>,
    pub order: Vec<String>,
}

impl TaskTable {
    pub fn insert(&mut self, t: Task) {
        self.order.push(t.upid.clone());
        self.by_upid.insert(t.upid.clone(), t);
    }

    pub fn get(&self, upid: &str) -> Option<&Task> {
        self.by_upid.get(upid)
    }

    pub fn get_mut(&mut self, upid: &str) -> Option<&mut Task> {
        self.by_upid.get_mut(upid)
    }

    /// Newest first.
    pub fn iter_newest(&self) -> impl Iterator<Item = &Task> {
        self.order.iter().rev().filter_map(|u| self.by_upid.get(u))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upid_format() {
        assert_eq!(
            format_upid(
                "pve-a1",
                0x1a2b,
                0x3c4d5e,
                0x6700_0000,
                "qmclone",
                "9000",
                "capmox@pve!capi"
            ),
            "UPID:pve-a1:00001A2B:003C4D5E:67000000:qmclone:9000:capmox@pve!capi:"
        );
    }

    #[test]
    fn status_json_splits_token() {
        let t = Task {
            upid: "U".into(),
            node: "n".into(),
            pid: 1,
            pstart: 2,
            starttime: 3,
            kind: "qmstart".into(),
            id: "100".into(),
            owner: "capmox@pve!capi".into(),
            status: TaskStatus::Stopped {
                exitstatus: "OK".into(),
                endtime: 4,
            },
            log: vec![],
            cancel: Arc::new(Notify::new()),
        };
        let v = t.status_json();
        assert_eq!(v["user"], "capmox@pve");
        assert_eq!(v["tokenid"], "capi");
        assert_eq!(v["status"], "stopped");
        assert_eq!(v["exitstatus"], "OK");
    }
}
