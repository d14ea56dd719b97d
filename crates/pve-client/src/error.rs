//! Errors: [`PveError`] (one enum for every failure of a call), its stable
//! [`PveError::category`], and the pure classifier that turns an HTTP error
//! response from Proxmox into a variant.
//!
//! Proxmox reports almost every runtime failure as HTTP 500 and puts the cause
//! into the text (docs/proxmox-semantics.md §3): a missing VM is `500 Configuration file
//! 'nodes/<node>/qemu-server/<vmid>.conf' does not exist`, a busy VM is
//! `500 can't lock file '/var/lock/qemu-server/lock-<vmid>.conf' - got timeout`.
//! The text comes from the JSON body's `message` (libpve-http-server-perl
//! ≥ 5.2.0, i.e. PVE 8.3+/9.x) or, on older servers, only from the HTTP status
//! line's reason phrase. [`classify_response`] reads both, so callers never
//! match on error text themselves.
//!
//! No variant ever holds a token secret, password or ticket.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::types::{Upid, VmLock};

/// A value that does not have the format Proxmox requires (VMID, node name,
/// property string, UPID, URL, token id, …).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} '{input}': {reason}")]
pub struct ParseError {
    /// What was being parsed, e.g. `"VMID"`, `"net property string"`.
    pub what: &'static str,
    /// The offending input (never a secret).
    pub input: String,
    /// Why it was refused.
    pub reason: String,
}

impl ParseError {
    /// Creates a parse error.
    pub fn new(what: &'static str, input: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            what,
            input: input.into(),
            reason: reason.into(),
        }
    }
}

/// What a failed call acted on: the client instance (the Proxmox cluster's
/// name in logs), the HTTP method and the concrete API path (which names the
/// node, VMID, storage or UPID).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallContext {
    /// Instance name from [`crate::ClientConfig::instance`].
    pub instance: String,
    /// HTTP method, e.g. `"GET"`.
    pub method: &'static str,
    /// API path below `/api2/json`, e.g. `/nodes/pve-a1/qemu/105/config`.
    pub path: String,
}

impl fmt::Display for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {}", self.instance, self.method, self.path)
    }
}

/// Why a [`PveError::Transient`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransientCause {
    /// The server answered with this 5xx status (not one of the classified
    /// messages), e.g. `500 cluster not ready - no quorum?`, 502, 503, 597–599.
    Status(u16),
    /// No response within the call's timeout.
    Timeout,
    /// The TCP connection could not be established (refused, unreachable,
    /// DNS). The request was not sent.
    ConnectFailed,
    /// The connection broke after the request may have been sent (reset,
    /// closed before the response completed).
    ConnectionLost,
}

/// What a "not found" says is missing, decided from Proxmox's wording
/// (docs/proxmox-semantics.md §3) so callers never read the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// The VM: `Configuration file 'nodes/<node>/qemu-server/<vmid>.conf'
    /// does not exist`, `no such VM`. Also what a VM on another node than
    /// the one asked answers (VMs move).
    Vm,
    /// The VM is not an HA resource: `no such resource 'vm:<vmid>'`,
    /// `cannot delete service 'vm:<vmid>', not HA managed!`.
    HaResource,
    /// The HA group: `HA group '<id>' does not exist` (PVE 8).
    HaGroup,
    /// The HA rule: `no such ha rule '<id>'`, `HA rule '<id>' does not exist` (PVE 9).
    HaRule,
    /// The task: `upid: no such task` (the node forgot it, e.g. after a restart).
    Task,
    /// The node: `hostname lookup '<node>' failed`, `no such cluster node`.
    Node,
    /// The storage: `storage '<id>' does not exist`, `no such storage`.
    Storage,
    /// A volume: `volume '<volid>' does not exist`, `no such volume`,
    /// `no such file`.
    Volume,
    /// A resource pool: `pool '<id>' does not exist`.
    Pool,
    /// A snapshot: `snapshot '<name>' does not exist`.
    Snapshot,
    /// Something else (HTTP 404, other wording).
    Other,
}

/// How a request conflicts with the state of the Proxmox cluster, decided
/// from Proxmox's wording (docs/proxmox-semantics.md §3, §7, §10, §16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictKind {
    /// The VMID, volume, pool or HA resource exists already (`VM <id>
    /// already exists`, `config file already exists`, `File exists`, `…
    /// already exists`, `resource ID 'vm:<vmid>' already defined`).
    AlreadyExists,
    /// The VM runs, so the request is refused (`VM <id> is running - destroy failed`).
    VmRunning,
    /// A start of a VM that already runs (`VM <id> already running`).
    AlreadyRunning,
    /// The VM is stopped, so the request is refused (`VM <id> not running`).
    NotRunning,
    /// The config changed since it was read (`checksum mismatch`): re-read it.
    DigestMismatch,
    /// The VM is a template (`… is a template`, `it's a template`).
    Template,
    /// The VM is protected (`protection mode enabled`).
    Protected,
    /// The VM is an HA resource (`used in ha resources`).
    HaManaged,
    /// The clone needs shared storage (`VM uses local storage`, `non-shared storage`).
    LocalStorage,
    /// The storage or disk does not support it (`not supported`, `does not
    /// support`, `not allowed for linked clones`, shrinking a disk).
    Unsupported,
}

/// How a failed task failed, from its exit status text (same rules as
/// [`classify_response`] uses for HTTP 500 messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskFailureKind {
    /// A flock or storage/cluster lock could not be taken in time
    /// (`can't lock file … - got timeout`, `got lock request timeout`).
    /// Retry with backoff; the task cleaned up after itself
    /// (docs/proxmox-semantics.md §6).
    LockTimeout,
    /// The VM carried a `lock` property (`VM is locked (clone)`).
    Locked(VmLock),
    /// Something the task needed does not exist.
    NotFound(Missing),
    /// The request conflicts with existing state.
    Conflict(ConflictKind),
    /// `unexpected status`: the task log ended abnormally (daemon killed);
    /// the effect is unknown, re-read the state.
    Unknown,
    /// Any other failure.
    Other,
}

impl TaskFailureKind {
    /// Whether retrying later, unchanged, may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::LockTimeout => true,
            Self::Locked(lock) => lock.is_transient(),
            _ => false,
        }
    }

    /// Short stable label (metrics, backoff classes): `lock_timeout`,
    /// `locked`, `not_found`, `conflict`, `unknown`, `other`.
    pub fn category(&self) -> &'static str {
        match self {
            Self::LockTimeout => "lock_timeout",
            Self::Locked(_) => "locked",
            Self::NotFound(_) => "not_found",
            Self::Conflict(_) => "conflict",
            Self::Unknown => "unknown",
            Self::Other => "other",
        }
    }
}

/// Why the guest agent could not answer, decided from Proxmox's wording
/// (docs/proxmox-semantics.md §17).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentCause {
    /// The VM has no `agent` option (`No QEMU guest agent configured`).
    NotConfigured,
    /// The VM itself is stopped (`VM <id> is not running`).
    VmNotRunning,
    /// The VM runs but the agent does not answer yet (`QEMU guest agent is
    /// not running`): the guest is booting.
    AgentNotRunning,
    /// The agent did not answer in time (`… got timeout`).
    Timeout,
    /// The agent answered with an error (`Agent error: …`).
    AgentError,
    /// Other wording.
    Other,
}

impl AgentCause {
    /// The cause a message of an agent call names.
    pub(crate) fn of(message: &str) -> AgentCause {
        let m = message.to_ascii_lowercase();
        if m.contains("no qemu guest agent configured") {
            AgentCause::NotConfigured
        } else if m.contains("guest agent is not running") {
            AgentCause::AgentNotRunning
        } else if m.contains("not running") {
            AgentCause::VmNotRunning
        } else if m.contains("timeout") {
            AgentCause::Timeout
        } else if m.contains("agent error") {
            AgentCause::AgentError
        } else {
            AgentCause::Other
        }
    }
}

/// Every failure of the client. Each variant that comes from a call carries a
/// [`CallContext`]; [`PveError::category`] gives a short stable label for
/// metrics and events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PveError {
    /// The client configuration is unusable (URL, token id format, empty
    /// secret, unreadable CA bundle, bad fingerprint). Nothing was sent.
    #[error("{instance}: invalid client configuration: {message}")]
    InvalidConfig {
        /// Instance name.
        instance: String,
        /// What is wrong.
        message: String,
    },
    /// The request was refused on the client side before anything was sent
    /// (e.g. the same key both set and deleted, `storage` without `full`).
    #[error("{instance}: request refused before sending: {message}")]
    InvalidRequest {
        /// Instance name.
        instance: String,
        /// What is wrong.
        message: String,
    },
    /// The object does not exist: HTTP 404, Proxmox's 500 `… does not exist`,
    /// an unknown node (`hostname lookup … failed`), or `no such task`.
    #[error("{ctx}: not found: {message}")]
    NotFound {
        /// The call.
        ctx: Box<CallContext>,
        /// What is missing.
        missing: Missing,
        /// Message from the server.
        message: String,
    },
    /// The VM has a `lock` property (`500 VM is locked (clone)`).
    #[error("{ctx}: locked ({lock}): {message}")]
    Locked {
        /// The call.
        ctx: Box<CallContext>,
        /// The lock value.
        lock: VmLock,
        /// Message from the server.
        message: String,
    },
    /// A lock could not be acquired in time (`can't lock file … - got
    /// timeout`, `cfs-lock … got lock request timeout`). Nothing changed.
    #[error("{ctx}: lock timeout: {message}")]
    LockTimeout {
        /// The call.
        ctx: Box<CallContext>,
        /// Message from the server.
        message: String,
    },
    /// HTTP 401: bad or expired credentials, invalid CSRF token. Proxmox
    /// delays every 401 by ~3 s; do not retry in a tight loop.
    #[error("{ctx}: authentication failed: {message}")]
    Unauthorized {
        /// The call.
        ctx: Box<CallContext>,
        /// Message from the server.
        message: String,
    },
    /// HTTP 403 `Permission check failed (<path>, <priv>[|<priv>…])`.
    #[error("{ctx}: permission denied: {message}")]
    PermissionDenied {
        /// The call.
        ctx: Box<CallContext>,
        /// ACL path the check ran on, e.g. `/vms/105`, when the message names one.
        path: Option<String>,
        /// Privileges the check wanted (any of them), e.g. `["VM.Config.Disk"]`.
        privileges: Vec<String>,
        /// Message from the server.
        message: String,
    },
    /// HTTP 400: parameter verification failed; `errors` maps each parameter
    /// to Proxmox's message (e.g. `vmid` → `VM 105 already exists`).
    #[error("{ctx}: invalid parameters: {message}")]
    InvalidParameter {
        /// The call.
        ctx: Box<CallContext>,
        /// Per-parameter messages from the body's `errors` object.
        errors: BTreeMap<String, String>,
        /// Summary message (includes the per-parameter messages).
        message: String,
    },
    /// The request conflicts with the current state or setup: `already
    /// exists`, `VM … is running - destroy failed`, `protection mode enabled`,
    /// `checksum mismatch` (stale `digest`), `shrinking disks is not
    /// supported`, `not running`, `… is a template`, `Linked clone feature is
    /// not supported …`, `can't clone VM to node … (VM uses local storage)`.
    /// Not retryable as is: re-read the state or change the request.
    #[error("{ctx}: conflicts with the current state: {message}")]
    Conflict {
        /// The call.
        ctx: Box<CallContext>,
        /// How it conflicts.
        kind: ConflictKind,
        /// Message from the server.
        message: String,
    },
    /// A guest agent call failed because the agent cannot answer yet: `No
    /// QEMU guest agent configured`, `VM … is not running`, `QEMU guest agent
    /// is not running`, agent timeouts or `Agent error: …` (docs/proxmox-semantics.md §17).
    /// Retry later while the VM boots.
    #[error("{ctx}: guest agent unavailable: {message}")]
    AgentUnavailable {
        /// The call.
        ctx: Box<CallContext>,
        /// Why the agent cannot answer.
        cause: AgentCause,
        /// Message from the server.
        message: String,
    },
    /// HTTP 595/596: pveproxy could not reach the node named in the path
    /// (node offline, connection refused, TLS between nodes).
    #[error("{ctx}: node unreachable (HTTP {status}): {message}")]
    NodeUnreachable {
        /// The call.
        ctx: Box<CallContext>,
        /// 595 or 596.
        status: u16,
        /// Message from the server.
        message: String,
    },
    /// Other 5xx, connection failures and timeouts. Retry with backoff; for
    /// writes check [`PveError::outcome_unknown`] first.
    #[error("{ctx}: transient failure: {message}")]
    Transient {
        /// The call.
        ctx: Box<CallContext>,
        /// What happened.
        cause: TransientCause,
        /// Message from the server or the transport.
        message: String,
    },
    /// HTTP 501 (`Method 'GET /…' not implemented`: wrong path, old PVE) or
    /// another 4xx the client has no better class for.
    #[error("{ctx}: not supported (HTTP {status}): {message}")]
    Unsupported {
        /// The call.
        ctx: Box<CallContext>,
        /// HTTP status.
        status: u16,
        /// Message from the server.
        message: String,
    },
    /// A success response whose body is not what the API schema promises.
    #[error("{ctx}: unexpected response: {message}")]
    Decode {
        /// The call.
        ctx: Box<CallContext>,
        /// What could not be decoded.
        message: String,
    },
    /// TLS failed: unknown CA, name mismatch, pinned fingerprint mismatch.
    /// Terminal until the configuration changes; not retried.
    #[error("{instance}: TLS error talking to {url}: {message}")]
    Tls {
        /// Instance name.
        instance: String,
        /// The instance URL (`https://host:port`).
        url: String,
        /// The verifier's reason (for pin mismatches it names the seen
        /// fingerprint).
        message: String,
    },
    /// A task ended with an exit status other than `OK` / `WARNINGS: n`.
    #[error("{instance}: task {upid} failed: {exitstatus}")]
    TaskFailed {
        /// Instance name.
        instance: String,
        /// The task.
        upid: Upid,
        /// The task's exit status text (e.g. `clone failed: …`).
        exitstatus: String,
        /// The last lines of the task log (oldest first).
        log_tail: Vec<String>,
        /// How it failed.
        kind: TaskFailureKind,
    },
    /// The task was still running when the wait deadline passed. It goes on
    /// server-side; wait again later.
    #[error("{instance}: task {upid} still running after {waited:?}")]
    TaskPending {
        /// Instance name.
        instance: String,
        /// The task.
        upid: Upid,
        /// How long the client waited.
        waited: Duration,
    },
}

impl PveError {
    /// Short stable label for metrics and event reasons.
    pub fn category(&self) -> &'static str {
        match self {
            Self::InvalidConfig { .. } => "invalid_config",
            Self::InvalidRequest { .. } => "invalid_request",
            Self::NotFound { .. } => "not_found",
            Self::Locked { .. } => "locked",
            Self::LockTimeout { .. } => "lock_timeout",
            Self::Unauthorized { .. } => "unauthorized",
            Self::PermissionDenied { .. } => "permission_denied",
            Self::InvalidParameter { .. } => "invalid_parameter",
            Self::Conflict { .. } => "conflict",
            Self::AgentUnavailable { .. } => "agent_unavailable",
            Self::NodeUnreachable { .. } => "node_unreachable",
            Self::Transient { .. } => "transient",
            Self::Unsupported { .. } => "unsupported",
            Self::Decode { .. } => "decode",
            Self::Tls { .. } => "tls",
            Self::TaskFailed { .. } => "task_failed",
            Self::TaskPending { .. } => "task_pending",
        }
    }

    /// Whether the same call, repeated later without change, may succeed:
    /// lock contention, transient lock properties, agent not up yet, node
    /// unreachable, other 5xx, timeouts, connection failures, tasks still
    /// running, and task failures caused by lock timeouts. Not retryable:
    /// configuration, TLS, authentication, permission, parameter, conflict and
    /// not-found errors — they need a change first.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Locked { lock, .. } => lock.is_transient(),
            Self::LockTimeout { .. }
            | Self::AgentUnavailable { .. }
            | Self::NodeUnreachable { .. }
            | Self::Transient { .. }
            | Self::TaskPending { .. } => true,
            Self::TaskFailed { kind, .. } => kind.is_retryable(),
            _ => false,
        }
    }

    /// Whether a write may or may not have been executed (docs/proxmox-semantics.md §19):
    /// a non-GET call that timed out, lost its connection after sending, or
    /// got 596–599 from pveproxy's forwarding. Re-read the state before
    /// retrying such a write.
    pub fn outcome_unknown(&self) -> bool {
        match self {
            Self::Transient { ctx, cause, .. } => {
                ctx.method != "GET"
                    && match cause {
                        TransientCause::Timeout | TransientCause::ConnectionLost => true,
                        TransientCause::Status(s) => (596..=599).contains(s),
                        TransientCause::ConnectFailed => false,
                    }
            }
            Self::NodeUnreachable { ctx, status, .. } => ctx.method != "GET" && *status == 596,
            _ => false,
        }
    }

    /// The call this error came from, when it came from one.
    pub fn context(&self) -> Option<&CallContext> {
        match self {
            Self::NotFound { ctx, .. }
            | Self::Locked { ctx, .. }
            | Self::LockTimeout { ctx, .. }
            | Self::Unauthorized { ctx, .. }
            | Self::PermissionDenied { ctx, .. }
            | Self::InvalidParameter { ctx, .. }
            | Self::Conflict { ctx, .. }
            | Self::AgentUnavailable { ctx, .. }
            | Self::NodeUnreachable { ctx, .. }
            | Self::Transient { ctx, .. }
            | Self::Unsupported { ctx, .. }
            | Self::Decode { ctx, .. } => Some(ctx),
            _ => None,
        }
    }
}

/// Class of a Proxmox error text, shared by HTTP 500 classification and task
/// exit statuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MessageClass {
    NotFound(Missing),
    LockTimeout,
    Locked(VmLock),
    Conflict(ConflictKind),
    Other,
}

/// The phrases of Proxmox's own wording (qemu-server, pve-storage,
/// pve-cluster; docs/proxmox-semantics.md §3, §6, §10, §11, §12, §16) that
/// classify a message, lower-case, in the order they are tried. Public so a
/// test can check that no code outside this crate matches them.
pub const MESSAGE_PHRASES: &[(&str, MessagePhrase)] = &[
    ("can't lock file", MessagePhrase::LockTimeout),
    ("got lock request timeout", MessagePhrase::LockTimeout),
    ("got lock timeout", MessagePhrase::LockTimeout),
    ("no such task", MessagePhrase::NotFound(Missing::Task)),
    ("hostname lookup", MessagePhrase::NotFound(Missing::Node)),
    (
        "no such cluster node",
        MessagePhrase::NotFound(Missing::Node),
    ),
    ("no such vm", MessagePhrase::NotFound(Missing::Vm)),
    (
        "no such resource 'vm:",
        MessagePhrase::NotFound(Missing::HaResource),
    ),
    (
        "not ha managed",
        MessagePhrase::NotFound(Missing::HaResource),
    ),
    ("ha group '", MessagePhrase::NotFound(Missing::HaGroup)),
    ("no such ha rule", MessagePhrase::NotFound(Missing::HaRule)),
    ("ha rule '", MessagePhrase::NotFound(Missing::HaRule)),
    ("qemu-server/", MessagePhrase::NotFound(Missing::Vm)),
    ("no such storage", MessagePhrase::NotFound(Missing::Storage)),
    ("storage '", MessagePhrase::NotFound(Missing::Storage)),
    ("no such volume", MessagePhrase::NotFound(Missing::Volume)),
    ("volume '", MessagePhrase::NotFound(Missing::Volume)),
    ("no such file", MessagePhrase::NotFound(Missing::Volume)),
    ("pool '", MessagePhrase::NotFound(Missing::Pool)),
    ("snapshot '", MessagePhrase::NotFound(Missing::Snapshot)),
    (
        "already exists",
        MessagePhrase::Conflict(ConflictKind::AlreadyExists),
    ),
    (
        "file exists",
        MessagePhrase::Conflict(ConflictKind::AlreadyExists),
    ),
    (
        "already defined",
        MessagePhrase::Conflict(ConflictKind::AlreadyExists),
    ),
    (
        "migrated to rules",
        MessagePhrase::Conflict(ConflictKind::Unsupported),
    ),
    (
        "already running",
        MessagePhrase::Conflict(ConflictKind::AlreadyRunning),
    ),
    (
        "not running",
        MessagePhrase::Conflict(ConflictKind::NotRunning),
    ),
    (
        "is running",
        MessagePhrase::Conflict(ConflictKind::VmRunning),
    ),
    (
        "protection mode enabled",
        MessagePhrase::Conflict(ConflictKind::Protected),
    ),
    (
        "checksum mismatch",
        MessagePhrase::Conflict(ConflictKind::DigestMismatch),
    ),
    (
        "used in ha resources",
        MessagePhrase::Conflict(ConflictKind::HaManaged),
    ),
    (
        "is a template",
        MessagePhrase::Conflict(ConflictKind::Template),
    ),
    (
        "it's a template",
        MessagePhrase::Conflict(ConflictKind::Template),
    ),
    (
        "uses local storage",
        MessagePhrase::Conflict(ConflictKind::LocalStorage),
    ),
    (
        "non-shared storage",
        MessagePhrase::Conflict(ConflictKind::LocalStorage),
    ),
    (
        "not supported",
        MessagePhrase::Conflict(ConflictKind::Unsupported),
    ),
    (
        "does not support",
        MessagePhrase::Conflict(ConflictKind::Unsupported),
    ),
    (
        "not allowed for linked clones",
        MessagePhrase::Conflict(ConflictKind::Unsupported),
    ),
];

/// What a phrase of [`MESSAGE_PHRASES`] means. `NotFound` phrases count
/// only in a message that says something is missing (`does not exist`,
/// `no such …`); the plain `does not exist` without a known subject is
/// [`Missing::Other`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessagePhrase {
    /// A lock could not be taken in time.
    LockTimeout,
    /// Something is missing.
    NotFound(Missing),
    /// A conflict with the current state.
    Conflict(ConflictKind),
}

/// Classifies a Proxmox error message by its text (see [`MESSAGE_PHRASES`]).
pub(crate) fn classify_message(message: &str) -> MessageClass {
    let m = message.to_ascii_lowercase();
    if m.contains("lock") && m.contains("got timeout") {
        return MessageClass::LockTimeout;
    }
    let missing = m.contains("does not exist")
        || m.contains("no such")
        || m.contains("hostname lookup")
        || m.contains("not ha managed");
    let mut lock_timeout = false;
    let mut not_found = None;
    let mut conflict = None;
    for (phrase, meaning) in MESSAGE_PHRASES {
        if !m.contains(phrase) {
            continue;
        }
        match meaning {
            MessagePhrase::LockTimeout => lock_timeout = true,
            MessagePhrase::NotFound(what) if missing => {
                not_found.get_or_insert(*what);
            }
            MessagePhrase::NotFound(_) => {}
            MessagePhrase::Conflict(kind) => {
                conflict.get_or_insert(*kind);
            }
        }
    }
    if lock_timeout {
        return MessageClass::LockTimeout;
    }
    if let Some(lock) = locked_value(message) {
        return MessageClass::Locked(lock);
    }
    if let Some(what) = not_found {
        return MessageClass::NotFound(what);
    }
    if missing {
        return MessageClass::NotFound(Missing::Other);
    }
    if let Some(kind) = conflict {
        return MessageClass::Conflict(kind);
    }
    MessageClass::Other
}

/// Extracts `clone` from `… VM is locked (clone) …` (also `VM 105 is locked`
/// variants, which qemu-server does not use but forks might).
fn locked_value(message: &str) -> Option<VmLock> {
    let idx = message.find("is locked (")?;
    let rest = &message[idx + "is locked (".len()..];
    let end = rest.find(')')?;
    let value = rest[..end].trim();
    if value.is_empty() {
        return None;
    }
    Some(VmLock::parse(value))
}

/// Parses `Permission check failed (/vms/105, VM.Config.Disk|VM.Config.CDROM)`.
fn permission_details(message: &str) -> (Option<String>, Vec<String>) {
    let Some(start) = message.find('(') else {
        return (None, Vec::new());
    };
    let Some(len) = message[start + 1..].find(')') else {
        return (None, Vec::new());
    };
    let inner = &message[start + 1..start + 1 + len];
    let mut parts = inner.splitn(2, ',');
    let first = parts.next().unwrap_or_default().trim();
    let privs = parts.next().unwrap_or_default().trim();
    if !first.starts_with('/') {
        return (None, Vec::new());
    }
    let privileges = privs
        .split('|')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    (Some(first.to_owned()), privileges)
}

/// The parts of a Proxmox error body: `{"data": null, "errors": {…},
/// "message": "…"}`.
#[derive(Default)]
struct ErrorBody {
    message: Option<String>,
    errors: BTreeMap<String, String>,
}

fn parse_error_body(body: &[u8]) -> ErrorBody {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(body)
    else {
        return ErrorBody::default();
    };
    let message = map
        .get("message")
        .and_then(serde_json::Value::as_str)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty());
    let mut errors = BTreeMap::new();
    if let Some(serde_json::Value::Object(e)) = map.get("errors") {
        for (k, v) in e {
            let text = match v {
                serde_json::Value::String(s) => s.trim().to_owned(),
                other => other.to_string(),
            };
            errors.insert(k.clone(), text);
        }
    }
    ErrorBody { message, errors }
}

/// Turns an HTTP error response into a [`PveError`]. Pure: `status` is the
/// HTTP status, `reason` the status line's reason phrase when it differs from
/// the standard one (that is where older PVE servers put the message), `body`
/// the raw response body.
///
/// The message is taken from the body's `message`, else the reason phrase,
/// else the `errors` map, else the status code. Then:
/// 400 → `InvalidParameter` (or `NotFound` for `upid: no such task`);
/// 401 → `Unauthorized`; 403 → `PermissionDenied` (`NotFound` when it
/// names a missing pool, storage, … as `check_pool_exist` does); 404 → `NotFound`;
/// 501 and other 4xx → `Unsupported`; 595/596 → `NodeUnreachable`;
/// 5xx → by message text (Proxmox's wording; agent paths give
/// `AgentUnavailable`), falling back to `Transient`.
pub fn classify_response(
    ctx: CallContext,
    status: u16,
    reason: Option<&str>,
    body: &[u8],
) -> PveError {
    let ctx = Box::new(ctx);
    let parsed = parse_error_body(body);
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let errors_text = (!parsed.errors.is_empty()).then(|| {
        parsed
            .errors
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect::<Vec<_>>()
            .join("; ")
    });
    let message = parsed
        .message
        .clone()
        .or_else(|| reason.map(str::to_owned))
        .or_else(|| errors_text.clone())
        .unwrap_or_else(|| {
            let canonical = reqwest::StatusCode::from_u16(status)
                .ok()
                .and_then(|s| s.canonical_reason())
                .unwrap_or("error");
            format!("HTTP {status} {canonical}")
        });

    // Proxmox raises some missing objects as permission exceptions:
    // `403 Permission check failed (pool 'x' does not exist)` from a clone
    // naming a pool that is not there (`check_pool_exist`).
    if status == 403
        && let MessageClass::NotFound(missing) = classify_message(&message)
        && missing != Missing::Other
    {
        return PveError::NotFound {
            ctx,
            missing,
            message,
        };
    }
    match status {
        400 => {
            let no_such_task = parsed
                .errors
                .get("upid")
                .is_some_and(|v| v.contains("no such task"));
            if no_such_task {
                return PveError::NotFound {
                    ctx,
                    missing: Missing::Task,
                    message: errors_text.unwrap_or(message),
                };
            }
            let message = match &errors_text {
                Some(et) if !message.contains(et.as_str()) => format!("{message} ({et})"),
                _ => message,
            };
            PveError::InvalidParameter {
                ctx,
                errors: parsed.errors,
                message,
            }
        }
        401 => PveError::Unauthorized { ctx, message },
        403 => {
            let (path, privileges) = permission_details(&message);
            PveError::PermissionDenied {
                ctx,
                path,
                privileges,
                message,
            }
        }
        404 => PveError::NotFound {
            ctx,
            missing: Missing::Other,
            message,
        },
        595 | 596 => PveError::NodeUnreachable {
            ctx,
            status,
            message,
        },
        500..=599 => {
            let is_agent = ctx.path.contains("/agent/");
            match classify_message(&message) {
                MessageClass::NotFound(missing) => PveError::NotFound {
                    ctx,
                    missing,
                    message,
                },
                MessageClass::LockTimeout if !is_agent => PveError::LockTimeout { ctx, message },
                MessageClass::Locked(lock) => PveError::Locked { ctx, lock, message },
                _ if is_agent && status == 500 => PveError::AgentUnavailable {
                    ctx,
                    cause: AgentCause::of(&message),
                    message,
                },
                MessageClass::Conflict(kind) => PveError::Conflict { ctx, kind, message },
                _ if status == 501 => PveError::Unsupported {
                    ctx,
                    status,
                    message,
                },
                _ => PveError::Transient {
                    ctx,
                    cause: TransientCause::Status(status),
                    message,
                },
            }
        }
        _ => PveError::Unsupported {
            ctx,
            status,
            message,
        },
    }
}

/// Classifies a task's non-OK exit status text.
pub fn task_failure_kind(exitstatus: &str) -> TaskFailureKind {
    if exitstatus.trim() == "unexpected status" {
        return TaskFailureKind::Unknown;
    }
    match classify_message(exitstatus) {
        MessageClass::NotFound(m) => TaskFailureKind::NotFound(m),
        MessageClass::LockTimeout => TaskFailureKind::LockTimeout,
        MessageClass::Locked(l) => TaskFailureKind::Locked(l),
        MessageClass::Conflict(k) => TaskFailureKind::Conflict(k),
        MessageClass::Other => TaskFailureKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(method: &'static str, path: &str) -> CallContext {
        CallContext {
            instance: "dc-a".into(),
            method,
            path: path.into(),
        }
    }

    fn body(message: Option<&str>, errors: &[(&str, &str)]) -> Vec<u8> {
        let mut m = serde_json::Map::new();
        m.insert("data".into(), serde_json::Value::Null);
        if let Some(msg) = message {
            m.insert("message".into(), msg.into());
        }
        if !errors.is_empty() {
            let e: serde_json::Map<String, serde_json::Value> = errors
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).into()))
                .collect();
            m.insert("errors".into(), e.into());
        }
        serde_json::to_vec(&serde_json::Value::Object(m)).unwrap()
    }

    const MISSING: &str = "Configuration file 'nodes/pve-a1/qemu-server/105.conf' does not exist";

    #[test]
    fn missing_vm_500_is_not_found_from_json_message() {
        let e = classify_response(
            ctx("GET", "/nodes/pve-a1/qemu/105/config"),
            500,
            Some(MISSING),
            &body(Some(&format!("{MISSING}\n")), &[]),
        );
        match &e {
            PveError::NotFound {
                message,
                ctx,
                missing,
            } => {
                assert_eq!(*missing, Missing::Vm);
                assert_eq!(message, MISSING);
                assert_eq!(ctx.path, "/nodes/pve-a1/qemu/105/config");
            }
            other => panic!("expected NotFound, got {other:?}"),
        }
        assert_eq!(e.category(), "not_found");
        assert!(!e.is_retryable());
        assert_eq!(
            e.to_string(),
            format!("dc-a: GET /nodes/pve-a1/qemu/105/config: not found: {MISSING}")
        );
    }

    #[test]
    fn missing_vm_500_from_status_line_only() {
        // Older servers (libpve-http-server-perl < 5.2.0): body is {"data":null}.
        let e = classify_response(
            ctx("GET", "/nodes/pve-a1/qemu/105/config"),
            500,
            Some(MISSING),
            br#"{"data":null}"#,
        );
        assert!(
            matches!(&e, PveError::NotFound { message, .. } if message == MISSING),
            "{e:?}"
        );
    }

    #[test]
    fn no_message_anywhere_falls_back_to_status() {
        let e = classify_response(ctx("GET", "/version"), 500, None, b"");
        match e {
            PveError::Transient { cause, message, .. } => {
                assert_eq!(cause, TransientCause::Status(500));
                assert_eq!(message, "HTTP 500 Internal Server Error");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lock_timeout_and_locked() {
        let msg = "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout";
        let e = classify_response(
            ctx("POST", "/nodes/n/qemu/131/config"),
            500,
            None,
            &body(Some(msg), &[]),
        );
        assert!(matches!(e, PveError::LockTimeout { .. }), "{e:?}");
        assert!(e.is_retryable());

        let cfs = "cfs-lock 'storage-ceph' error: got lock request timeout";
        let e = classify_response(ctx("POST", "/x"), 500, Some(cfs), b"{\"data\":null}");
        assert_eq!(e.category(), "lock_timeout");

        let e = classify_response(
            ctx("PUT", "/nodes/n/qemu/131/config"),
            500,
            Some("VM is locked (clone)"),
            b"",
        );
        match &e {
            PveError::Locked { lock, .. } => assert_eq!(lock, &VmLock::Clone),
            other => panic!("{other:?}"),
        }
        assert!(e.is_retryable());
        let e = classify_response(ctx("PUT", "/x"), 500, Some("VM is locked (suspended)"), b"");
        assert!(!e.is_retryable());
    }

    #[test]
    fn parameter_errors_keep_the_map() {
        let e = classify_response(
            ctx("GET", "/cluster/nextid"),
            400,
            Some("Parameter verification failed."),
            &body(
                Some("Parameter verification failed.\n"),
                &[("vmid", "VM 105 already exists\n")],
            ),
        );
        match &e {
            PveError::InvalidParameter {
                errors, message, ..
            } => {
                assert_eq!(
                    errors.get("vmid").map(String::as_str),
                    Some("VM 105 already exists")
                );
                assert_eq!(
                    message,
                    "Parameter verification failed. (vmid: VM 105 already exists)"
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(e.category(), "invalid_parameter");

        // A reason phrase containing a newline becomes a bare 400 on PVE.
        let e = classify_response(ctx("POST", "/x"), 400, None, b"");
        assert!(
            matches!(&e, PveError::InvalidParameter { errors, message, .. }
            if errors.is_empty() && message == "HTTP 400 Bad Request")
        );
    }

    #[test]
    fn unknown_task_is_not_found() {
        let e = classify_response(
            ctx("GET", "/nodes/pve-a2/tasks/UPID%3A/status"),
            400,
            Some("Parameter verification failed."),
            &body(None, &[("upid", "no such task")]),
        );
        assert!(
            matches!(&e, PveError::NotFound { message, .. } if message == "upid: no such task"),
            "{e:?}"
        );
    }

    /// docs/field-cases.md B34: a clone into a pool that does not exist is
    /// refused as a permission exception naming the pool.
    #[test]
    fn a_missing_pool_refused_with_403_is_not_found() {
        let msg = "Permission check failed (pool 'k8s-wl9' does not exist)";
        let e = classify_response(ctx("POST", "/nodes/n/qemu/9000/clone"), 403, Some(msg), b"");
        assert!(
            matches!(&e, PveError::NotFound { missing: Missing::Pool, message, .. } if message == msg),
            "{e:?}"
        );
        // Other 403s stay permission errors, also when they say what is missing
        // without naming a known kind of object.
        for msg in [
            "Permission check failed (/pool/k8s, VM.Allocate)",
            "Permission check failed (user 'bob@pve' does not exist)",
        ] {
            let e = classify_response(ctx("POST", "/x"), 403, Some(msg), b"");
            assert!(
                matches!(&e, PveError::PermissionDenied { .. }),
                "{msg}: {e:?}"
            );
        }
    }

    #[test]
    fn permission_denied_names_path_and_privileges() {
        let msg = "Permission check failed (/vms/105, VM.Config.Disk|VM.Config.CDROM)";
        let e = classify_response(ctx("POST", "/nodes/n/qemu/105/config"), 403, Some(msg), b"");
        match &e {
            PveError::PermissionDenied {
                path,
                privileges,
                message,
                ..
            } => {
                assert_eq!(path.as_deref(), Some("/vms/105"));
                assert_eq!(
                    privileges,
                    &["VM.Config.Disk".to_owned(), "VM.Config.CDROM".to_owned()]
                );
                assert_eq!(message, msg);
            }
            other => panic!("{other:?}"),
        }
        let e = classify_response(ctx("GET", "/x"), 403, Some("Permission check failed"), b"");
        assert!(
            matches!(&e, PveError::PermissionDenied { path: None, privileges, .. } if privileges.is_empty())
        );
    }

    #[test]
    fn unauthorized() {
        let e = classify_response(
            ctx("GET", "/version"),
            401,
            Some("authentication failure"),
            br#"{"data":null}"#,
        );
        assert!(
            matches!(&e, PveError::Unauthorized { message, .. } if message == "authentication failure")
        );
        assert!(!e.is_retryable());
        let e = classify_response(
            ctx("POST", "/x"),
            401,
            Some("Permission denied - invalid csrf token"),
            b"",
        );
        assert_eq!(e.category(), "unauthorized");
    }

    #[test]
    fn node_unreachable_595_596_and_transient_597() {
        let e = classify_response(
            ctx("POST", "/nodes/pve-a3/qemu/105/status/start"),
            595,
            Some("Connection refused"),
            b"",
        );
        assert!(matches!(e, PveError::NodeUnreachable { status: 595, .. }));
        assert!(e.is_retryable());
        assert!(!e.outcome_unknown());
        let msg = "tls_process_server_certificate: certificate verify failed";
        let e = classify_response(
            ctx("POST", "/nodes/pve-a3/qemu/105/clone"),
            596,
            Some(msg),
            b"",
        );
        assert!(
            matches!(&e, PveError::NodeUnreachable { status: 596, message, .. } if message == msg)
        );
        assert!(e.outcome_unknown());
        let e = classify_response(ctx("GET", "/nodes/pve-a3/status"), 597, None, b"");
        assert!(matches!(
            e,
            PveError::Transient {
                cause: TransientCause::Status(597),
                ..
            }
        ));
        assert!(!e.outcome_unknown(), "GETs have no unknown outcome");
    }

    #[test]
    fn quorum_loss_is_transient() {
        let e = classify_response(
            ctx("POST", "/x"),
            500,
            Some("cluster not ready - no quorum?"),
            b"",
        );
        assert!(matches!(
            e,
            PveError::Transient {
                cause: TransientCause::Status(500),
                ..
            }
        ));
        assert!(e.is_retryable());
    }

    #[test]
    fn conflicts() {
        for (msg, want) in [
            (
                "VM 105 is running - destroy failed",
                ConflictKind::VmRunning,
            ),
            (
                "unable to create VM 105 - VM 105 already exists on node 'pve-a2'",
                ConflictKind::AlreadyExists,
            ),
            (
                "can't remove VM 105 - protection mode enabled",
                ConflictKind::Protected,
            ),
            (
                "resource ID 'vm:105' already defined",
                ConflictKind::AlreadyExists,
            ),
            (
                "invalid parameter 'group': ha groups have been migrated to rules",
                ConflictKind::Unsupported,
            ),
            (
                "checksum mismatch (file change by other user?)",
                ConflictKind::DigestMismatch,
            ),
            ("VM 105 not running", ConflictKind::NotRunning),
            ("VM 105 already running", ConflictKind::AlreadyRunning),
            (
                "you can't start a vm if it's a template",
                ConflictKind::Template,
            ),
            (
                "Linked clone feature is not supported for drive 'scsi0'",
                ConflictKind::Unsupported,
            ),
            (
                "can't clone VM to node 'pve-a2' (VM uses local storage)",
                ConflictKind::LocalStorage,
            ),
            (
                "can't clone to non-shared storage 'local-lvm'",
                ConflictKind::LocalStorage,
            ),
            (
                "unable to remove VM 105 - used in HA resources",
                ConflictKind::HaManaged,
            ),
        ] {
            let e = classify_response(ctx("POST", "/x"), 500, Some(msg), b"");
            assert!(
                matches!(e, PveError::Conflict { kind, .. } if kind == want),
                "{msg}: {e:?}"
            );
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn missing_things_are_named() {
        for (msg, want) in [
            (MISSING, Missing::Vm),
            ("no such resource 'vm:105'", Missing::HaResource),
            (
                "cannot delete service 'vm:105', not HA managed!",
                Missing::HaResource,
            ),
            ("HA group 'capmox' does not exist", Missing::HaGroup),
            ("no such ha rule 'capmox'", Missing::HaRule),
            ("HA rule 'capmox' does not exist", Missing::HaRule),
            ("storage 'ceph' does not exist", Missing::Storage),
            (
                "volume 'local:iso/capmox-105-abc.iso' does not exist",
                Missing::Volume,
            ),
            ("pool 'team-a' does not exist", Missing::Pool),
            ("snapshot 'base' does not exist", Missing::Snapshot),
            ("no such cluster node 'pve-x'", Missing::Node),
            ("something else does not exist", Missing::Other),
        ] {
            let e = classify_response(ctx("DELETE", "/x"), 500, Some(msg), b"");
            assert!(
                matches!(e, PveError::NotFound { missing, .. } if missing == want),
                "{msg}: {e:?}"
            );
        }
        let e = classify_response(ctx("GET", "/x"), 404, None, b"");
        assert!(matches!(
            e,
            PveError::NotFound {
                missing: Missing::Other,
                ..
            }
        ));
    }

    #[test]
    fn agent_errors() {
        for (msg, want) in [
            ("No QEMU guest agent configured", AgentCause::NotConfigured),
            ("VM 105 is not running", AgentCause::VmNotRunning),
            (
                "QEMU guest agent is not running",
                AgentCause::AgentNotRunning,
            ),
            (
                "VM 105 qmp command 'guest-network-get-interfaces' failed - got timeout",
                AgentCause::Timeout,
            ),
            ("Agent error: command not supported", AgentCause::AgentError),
        ] {
            let e = classify_response(
                ctx("GET", "/nodes/n/qemu/105/agent/network-get-interfaces"),
                500,
                Some(msg),
                b"",
            );
            assert!(
                matches!(e, PveError::AgentUnavailable { cause, .. } if cause == want),
                "{msg}: {e:?}"
            );
            assert!(e.is_retryable());
        }
        // The VM itself missing stays NotFound even on agent paths.
        let e = classify_response(
            ctx("POST", "/nodes/n/qemu/105/agent/ping"),
            500,
            Some(MISSING),
            b"",
        );
        assert!(matches!(e, PveError::NotFound { .. }));
    }

    #[test]
    fn unknown_node_is_not_found() {
        let msg = "hostname lookup 'pve-x' failed - failed to get address info for: pve-x: Name or service not known";
        let e = classify_response(ctx("GET", "/nodes/pve-x/status"), 500, Some(msg), b"");
        assert!(matches!(e, PveError::NotFound { .. }));
    }

    #[test]
    fn not_implemented_is_unsupported() {
        let msg = "Method 'GET /cluster/resourcez' not implemented";
        let e = classify_response(ctx("GET", "/cluster/resourcez"), 501, Some(msg), b"");
        assert!(
            matches!(e, PveError::Unsupported { status: 501, .. }),
            "{e:?}"
        );
        let e = classify_response(ctx("GET", "/x"), 405, None, b"");
        assert_eq!(e.category(), "unsupported");
    }

    #[test]
    fn message_preferred_over_reason_phrase() {
        let e = classify_response(
            ctx("GET", "/x"),
            500,
            Some("first line only"),
            &body(Some("first line only\nsecond line"), &[]),
        );
        assert!(
            matches!(&e, PveError::Transient { message, .. } if message == "first line only\nsecond line")
        );
    }

    #[test]
    fn task_exit_statuses() {
        assert_eq!(
            task_failure_kind(
                "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
            ),
            TaskFailureKind::LockTimeout
        );
        assert_eq!(
            task_failure_kind("VM is locked (create)"),
            TaskFailureKind::Locked(VmLock::Create)
        );
        assert_eq!(
            task_failure_kind("unable to create VM 131: config file already exists"),
            TaskFailureKind::Conflict(ConflictKind::AlreadyExists)
        );
        assert_eq!(
            task_failure_kind("shrinking disks is not supported"),
            TaskFailureKind::Conflict(ConflictKind::Unsupported)
        );
        assert_eq!(
            task_failure_kind("VM 131 already running"),
            TaskFailureKind::Conflict(ConflictKind::AlreadyRunning)
        );
        assert_eq!(
            task_failure_kind("volume 'local:iso/x.iso' does not exist"),
            TaskFailureKind::NotFound(Missing::Volume)
        );
        assert_eq!(
            task_failure_kind("unexpected status"),
            TaskFailureKind::Unknown
        );
        assert_eq!(
            task_failure_kind("clone failed: out of space"),
            TaskFailureKind::Other
        );
        assert!(TaskFailureKind::LockTimeout.is_retryable());
        assert!(!TaskFailureKind::Other.is_retryable());
    }

    #[test]
    fn outcome_unknown_only_for_writes() {
        let t = |m: &'static str, cause| PveError::Transient {
            ctx: Box::new(ctx(m, "/x")),
            cause,
            message: String::new(),
        };
        assert!(t("POST", TransientCause::Timeout).outcome_unknown());
        assert!(t("PUT", TransientCause::ConnectionLost).outcome_unknown());
        assert!(!t("POST", TransientCause::ConnectFailed).outcome_unknown());
        assert!(!t("GET", TransientCause::Timeout).outcome_unknown());
        assert!(t("DELETE", TransientCause::Status(598)).outcome_unknown());
        assert!(!t("POST", TransientCause::Status(500)).outcome_unknown());
    }
}
