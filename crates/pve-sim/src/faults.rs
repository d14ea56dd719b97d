//! Fault injection, per cluster: which calls (method, path, node) are hit,
//! how often (probability, "the next N"), and what happens (an error status,
//! extra latency, a dropped connection, a lock timeout or failure inside the
//! task, a node that looks unreachable, lost quorum).
//!
//! Probabilities draw from the cluster's seeded RNG, so a run with the same
//! seed and the same request order injects the same faults.

use serde::{Deserialize, Serialize};

/// Identifier returned by [`crate::SimCluster::add_fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct FaultId(pub u64);

/// A fault rule.
///
/// JSON/YAML shape (control API `POST /_sim/faults`):
/// `{"method": "POST", "path": "/nodes/{node}/qemu/{vmid}/clone", "probability": 1.0,
///   "count": 2, "kind": {"type": "error", "status": 500, "message": "boom"}}`.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Fault {
    /// HTTP method to match (`GET`, `POST`, …); absent matches all.
    #[serde(default)]
    pub method: Option<String>,
    /// Path to match, relative to `/api2/json`: either a route template
    /// (`/nodes/{node}/qemu/{vmid}/config`) or a concrete path
    /// (`/nodes/pve-a1/qemu/100/config`); a trailing `*` matches any suffix of
    /// either. Absent matches all.
    #[serde(default)]
    pub path: Option<String>,
    /// Only calls whose `{node}` is this node.
    #[serde(default)]
    pub node: Option<String>,
    /// Probability (0..=1) that a matching call is hit. Default 1.
    #[serde(default = "default_probability")]
    pub probability: f64,
    /// Hit only the next N matching calls, then the rule is spent; absent = forever.
    #[serde(default)]
    pub count: Option<u32>,
    /// What happens.
    pub kind: FaultKind,
}

fn default_probability() -> f64 {
    1.0
}

/// The effect of a fault.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum FaultKind {
    /// Answer with this status and message in Proxmox's error shape
    /// (reason phrase = first line, JSON body with `message`).
    Error {
        /// HTTP status (e.g. 500, 503, 596).
        status: u16,
        /// Error text.
        message: String,
    },
    /// Wait this many simulated seconds (time-scaled) before handling the call.
    Latency {
        /// Seconds.
        seconds: f64,
    },
    /// Drop the connection without any response.
    ConnectionReset,
    /// The task started by the call fails after the lock timeout with
    /// `can't lock file '/var/lock/qemu-server/lock-<vmid>.conf' - got timeout`;
    /// synchronous calls return that as HTTP 500.
    LockTimeout,
    /// The task started by the call runs its normal duration, changes nothing
    /// and ends with this exit status.
    TaskFailure {
        /// Exit status text.
        message: String,
    },
    /// The task started by the call succeeds with `WARNINGS: <count>`.
    TaskWarnings {
        /// Number of warnings.
        count: u32,
    },
    /// The call fails as if its node were unreachable
    /// (`595 Errors during connection establishment, proxy handshake: No route to host`).
    NodeUnreachable,
    /// Writes fail with `500 cluster not ready - no quorum?`.
    NoQuorum,
}

/// A fault with its id and remaining budget, as stored by a cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ActiveFault {
    /// Id for removal.
    pub id: FaultId,
    /// The rule (its `count` is decremented as it fires).
    #[serde(flatten)]
    pub fault: Fault,
    /// How often it fired.
    pub fired: u64,
}

/// The faults of one cluster.
#[derive(Debug, Default)]
pub(crate) struct FaultSet {
    next_id: u64,
    faults: Vec<ActiveFault>,
}

/// What a request learns from the fault set.
#[derive(Clone, Debug, Default)]
pub(crate) struct FaultHits {
    /// Extra latency in simulated seconds.
    pub latency: f64,
    /// The first terminal effect (error, reset, …), if any.
    pub effect: Option<FaultKind>,
}

impl FaultSet {
    pub fn add(&mut self, fault: Fault) -> FaultId {
        self.next_id += 1;
        let id = FaultId(self.next_id);
        self.faults.push(ActiveFault {
            id,
            fault,
            fired: 0,
        });
        id
    }

    pub fn remove(&mut self, id: FaultId) -> bool {
        let before = self.faults.len();
        self.faults.retain(|f| f.id != id);
        before != self.faults.len()
    }

    pub fn clear(&mut self) {
        self.faults.clear();
    }

    pub fn list(&self) -> Vec<ActiveFault> {
        self.faults.clone()
    }

    /// Evaluates all rules for one call. `draw` yields uniform numbers in [0, 1).
    pub fn evaluate(
        &mut self,
        method: &str,
        template: &str,
        concrete: &str,
        node: Option<&str>,
        mut draw: impl FnMut() -> f64,
    ) -> FaultHits {
        let mut hits = FaultHits::default();
        for f in &mut self.faults {
            if f.fault.count == Some(0) || !matches(&f.fault, method, template, concrete, node) {
                continue;
            }
            if f.fault.probability < 1.0 && draw() >= f.fault.probability {
                continue;
            }
            match &f.fault.kind {
                FaultKind::Latency { seconds } => hits.latency += seconds.max(0.0),
                other => {
                    if hits.effect.is_some() {
                        continue;
                    }
                    hits.effect = Some(other.clone());
                }
            }
            f.fired += 1;
            if let Some(c) = f.fault.count.as_mut() {
                *c -= 1;
            }
        }
        self.faults.retain(|f| f.fault.count != Some(0));
        hits
    }
}

fn matches(f: &Fault, method: &str, template: &str, concrete: &str, node: Option<&str>) -> bool {
    if let Some(m) = &f.method
        && !m.eq_ignore_ascii_case(method)
    {
        return false;
    }
    if let Some(n) = &f.node
        && node != Some(n.as_str())
    {
        return false;
    }
    if let Some(p) = &f.path {
        let p = p.strip_prefix("/api2/json").unwrap_or(p);
        let ok = match p.strip_suffix('*') {
            Some(prefix) => template.starts_with(prefix) || concrete.starts_with(prefix),
            None => p == template || p == concrete,
        };
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_fault(path: &str, count: Option<u32>) -> Fault {
        Fault {
            method: Some("POST".into()),
            path: Some(path.into()),
            node: None,
            probability: 1.0,
            count,
            kind: FaultKind::Error {
                status: 500,
                message: "boom".into(),
            },
        }
    }

    #[test]
    fn count_is_consumed_and_rule_removed() {
        let mut set = FaultSet::default();
        set.add(err_fault("/nodes/{node}/qemu/{vmid}/clone", Some(2)));
        let t = "/nodes/{node}/qemu/{vmid}/clone";
        let c = "/nodes/n1/qemu/100/clone";
        assert!(
            set.evaluate("POST", t, c, Some("n1"), || 0.0)
                .effect
                .is_some()
        );
        assert!(
            set.evaluate("GET", t, c, Some("n1"), || 0.0)
                .effect
                .is_none()
        );
        assert!(
            set.evaluate("POST", t, c, Some("n1"), || 0.0)
                .effect
                .is_some()
        );
        assert!(
            set.evaluate("POST", t, c, Some("n1"), || 0.0)
                .effect
                .is_none()
        );
        assert!(set.list().is_empty());
    }

    #[test]
    fn prefix_concrete_and_probability() {
        let mut set = FaultSet::default();
        let mut f = err_fault("/nodes/n1/*", None);
        f.probability = 0.5;
        set.add(f);
        let t = "/nodes/{node}/qemu";
        assert!(
            set.evaluate("POST", t, "/nodes/n1/qemu", None, || 0.4)
                .effect
                .is_some()
        );
        assert!(
            set.evaluate("POST", t, "/nodes/n1/qemu", None, || 0.6)
                .effect
                .is_none()
        );
        assert!(
            set.evaluate("POST", t, "/nodes/n2/qemu", None, || 0.0)
                .effect
                .is_none()
        );
    }

    #[test]
    fn json_shape() {
        let f: Fault = serde_json::from_str(
            r#"{"path":"/cluster/resources","kind":{"type":"latency","seconds":2}}"#,
        )
        .unwrap();
        assert_eq!(f.kind, FaultKind::Latency { seconds: 2.0 });
        assert_eq!(f.probability, 1.0);
    }
}
