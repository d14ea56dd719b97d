//! One task list per node answers for every task awaited there.
//!
//! A machine waits for its Proxmox task (clone, upload, resize, start, …)
//! by requeueing at the task's expected end. Asking for that one task's
//! status (`GET /nodes/{node}/tasks/{upid}/status`) costs a call per task
//! and poll; a node's task list (`GET /nodes/{node}/tasks?source=all&since=…`,
//! `PVE/API2/Tasks.pm`) answers for all of them at once. So when a task is
//! due, its node's list is read, and
//!
//! * the caller gets its own task's state from it;
//! * every other awaited task of that node the list shows ended is
//!   remembered, and its machine is woken at once (a wake on the channel
//!   [`NodeTasks::new`] returns) instead of at its own poll: machines whose
//!   tasks end together cost one call together, and none waits for a
//!   poll margin;
//! * concurrent callers for one node share one request (single flight).
//!
//! A "running" answer counts only from a list read after the caller's due
//! time. A task the list does not show (pushed out by `limit`, or a node
//! whose list lags) is [`Answer::Unlisted`]: the caller reads its status
//! directly, which Proxmox computes from the node's live process table.
//!
//! Memory: per node the last list (at most [`LIST_LIMIT`] entries) and the
//! awaited tasks; an awaited task nobody asked about for [`FORGET_AFTER`]
//! (its machine was deleted) is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::ProxmoxMachine;
use crate::clients::Identity;
use crate::pve::{NodeName, ProxmoxApi, PveError, Upid};

/// Most entries one list read asks for.
pub const LIST_LIMIT: u32 = 500;

/// An awaited task not asked about for this long is forgotten.
pub const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// Wakes buffered for the controller; beyond this a wake is dropped (the
/// machine still looks at its own poll time).
pub const WAKE_BUFFER: usize = 4096;

/// What a node's task list says about one task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The task ended with this exit status (`OK`, `WARNINGS: n`, or the
    /// error text).
    Ended(String),
    /// The task runs (from a list read after the caller's due time).
    Running,
    /// The list does not show the task: read its status directly.
    Unlisted,
}

#[derive(Debug)]
struct Waiter {
    /// Start of the task, Unix epoch seconds (from its UPID).
    starttime: u64,
    machine: ObjectRef<ProxmoxMachine>,
    asked: Instant,
    woken: bool,
}

#[derive(Debug, Default)]
struct Board {
    read_at: Option<Instant>,
    /// UPID → exit status (`None`: running), from the last read.
    listed: HashMap<String, Option<String>>,
    /// UPID → who awaits it.
    waiting: HashMap<String, Waiter>,
}

/// The board of one (identity, node), locked for the duration of a read.
type SharedBoard = Arc<tokio::sync::Mutex<Board>>;

/// Per (Proxmox cluster identity, node): the last task list and the tasks
/// awaited there.
#[derive(Debug)]
pub struct NodeTasks {
    nodes: Mutex<HashMap<super::NodeKey, SharedBoard>>,
    wake: mpsc::Sender<ObjectRef<ProxmoxMachine>>,
}

impl NodeTasks {
    /// A board and the receiver of its wakes (machines whose task a list
    /// showed ended before their own poll). Dropping the receiver is
    /// allowed: wakes are then dropped.
    pub fn new() -> (NodeTasks, mpsc::Receiver<ObjectRef<ProxmoxMachine>>) {
        let (wake, rx) = mpsc::channel(WAKE_BUFFER);
        (
            NodeTasks {
                nodes: Mutex::new(HashMap::new()),
                wake,
            },
            rx,
        )
    }

    /// Another sender of the wakes this board's receiver gets (for other
    /// parts of the runtime that wake machines, e.g. clone slots).
    pub fn waker(&self) -> mpsc::Sender<ObjectRef<ProxmoxMachine>> {
        self.wake.clone()
    }

    fn board(&self, identity: &Identity, node: &NodeName) -> SharedBoard {
        self.nodes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(super::NodeKey {
                identity: identity.clone(),
                node: node.clone(),
            })
            .or_default()
            .clone()
    }

    /// The exit status of `upid` if a list read already showed it ended
    /// (no call). `None` also while another caller reads the node's list.
    pub fn ended(&self, identity: &Identity, upid: &Upid) -> Option<String> {
        let board = self.board(identity, upid.node());
        let b = board.try_lock().ok()?;
        b.listed.get(upid.as_str()).cloned().flatten()
    }

    /// The state of `upid`, awaited by `machine`, whose poll was due at
    /// `due`: from the node's last list if it already shows the task ended
    /// or was read after `due`, else from one new read of the list
    /// (`GET /nodes/{node}/tasks?source=all&since=<oldest awaited start>&limit=`
    /// [`LIST_LIMIT`]), shared with concurrent callers for the node.
    ///
    /// # Errors
    /// The list read's error ([`PveError`]); the caller then reads the
    /// task's status directly.
    pub async fn status(
        &self,
        api: &dyn ProxmoxApi,
        identity: &Identity,
        upid: &Upid,
        due: Instant,
        machine: ObjectRef<ProxmoxMachine>,
    ) -> Result<Answer, PveError> {
        let board = self.board(identity, upid.node());
        let mut b = board.lock().await;
        let now = Instant::now();
        let key = upid.as_str().to_string();
        let w = b.waiting.entry(key.clone()).or_insert(Waiter {
            starttime: upid.starttime(),
            machine,
            asked: now,
            woken: false,
        });
        w.asked = now;
        w.woken = false;
        if let Some(Some(exit)) = b.listed.get(&key) {
            let exit = exit.clone();
            b.waiting.remove(&key);
            return Ok(Answer::Ended(exit));
        }
        if b.read_at.is_some_and(|t| t >= due) && b.listed.get(&key) == Some(&None) {
            return Ok(Answer::Running);
        }
        b.waiting
            .retain(|_, w| now.duration_since(w.asked) < FORGET_AFTER);
        let since = b
            .waiting
            .values()
            .map(|w| w.starttime)
            .min()
            .unwrap_or(upid.starttime());
        let list = api.node_tasks(upid.node(), Some(since), LIST_LIMIT).await?;
        b.read_at = Some(Instant::now());
        b.listed = list
            .into_iter()
            .map(|e| {
                let exit = e.exitstatus().map(str::to_string);
                (e.upid, exit)
            })
            .collect();
        let Board {
            listed, waiting, ..
        } = &mut *b;
        for (u, w) in waiting.iter_mut() {
            if *u != key && !w.woken && matches!(listed.get(u), Some(Some(_))) {
                w.woken = true;
                // A full buffer or no receiver: the machine polls at its own time.
                let _ = self.wake.try_send(w.machine.clone());
            }
        }
        Ok(match b.listed.get(&key) {
            Some(Some(exit)) => {
                let exit = exit.clone();
                b.waiting.remove(&key);
                Answer::Ended(exit)
            }
            Some(None) => Answer::Running,
            None => {
                b.waiting.remove(&key);
                Answer::Unlisted
            }
        })
    }

    /// `upid` is no longer awaited (its end was read another way).
    pub fn forget(&self, identity: &Identity, upid: &Upid) {
        let board = self.board(identity, upid.node());
        if let Ok(mut b) = board.try_lock() {
            b.waiting.remove(upid.as_str());
            b.listed.remove(upid.as_str());
        }
    }
}
