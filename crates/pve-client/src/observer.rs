//! The call hook: every HTTP request the client makes is reported to a
//! [`CallObserver`] as a [`CallRecord`], which a controller turns into metrics
//! and the benchmark into "API calls per machine".

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

/// One HTTP request to Proxmox (each attempt of a retried GET is its own
/// record, matching what the server sees).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRecord<'a> {
    /// Instance name from the client config.
    pub instance: &'a str,
    /// HTTP method, e.g. `"POST"`.
    pub method: &'static str,
    /// Path template with placeholders, e.g. `/nodes/{node}/qemu/{vmid}/config`
    /// (bounded cardinality: safe as a metric label).
    pub path_template: &'static str,
    /// HTTP status, or `None` when no response arrived (connect failure,
    /// timeout, reset, TLS failure).
    pub status: Option<u16>,
    /// Wall time from sending to having the whole body (or failing).
    pub duration: Duration,
    /// [`crate::PveError::category`] of the failure, `None` on success.
    pub error_category: Option<&'static str>,
}

/// Receives a [`CallRecord`] for every request. Called inline on the request
/// path: keep it cheap and non-blocking.
pub trait CallObserver: Send + Sync {
    /// Called once per HTTP request, after it completed or failed.
    fn on_call(&self, record: &CallRecord<'_>);
}

/// A ready-made observer counting calls per `(method, path template)`.
#[derive(Debug, Default)]
pub struct CallCounter {
    counts: Mutex<BTreeMap<(&'static str, &'static str), u64>>,
}

impl CallCounter {
    /// An empty counter.
    pub fn new() -> Self {
        Self::default()
    }

    /// Calls per `(method, path template)`, sorted.
    pub fn snapshot(&self) -> BTreeMap<(&'static str, &'static str), u64> {
        self.counts.lock().map(|c| c.clone()).unwrap_or_default()
    }

    /// Calls of one `(method, path template)`.
    pub fn count(&self, method: &str, path_template: &str) -> u64 {
        self.snapshot()
            .iter()
            .filter(|((m, p), _)| *m == method && *p == path_template)
            .map(|(_, n)| *n)
            .sum()
    }

    /// All calls.
    pub fn total(&self) -> u64 {
        self.snapshot().values().sum()
    }
}

impl CallObserver for CallCounter {
    fn on_call(&self, record: &CallRecord<'_>) {
        if let Ok(mut c) = self.counts.lock() {
            *c.entry((record.method, record.path_template)).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_per_template() {
        let c = CallCounter::new();
        let rec = |m, p| CallRecord {
            instance: "dc-a",
            method: m,
            path_template: p,
            status: Some(200),
            duration: Duration::from_millis(1),
            error_category: None,
        };
        c.on_call(&rec("GET", "/version"));
        c.on_call(&rec("GET", "/version"));
        c.on_call(&rec("POST", "/nodes/{node}/qemu/{vmid}/clone"));
        assert_eq!(c.count("GET", "/version"), 2);
        assert_eq!(c.count("POST", "/nodes/{node}/qemu/{vmid}/clone"), 1);
        assert_eq!(c.count("DELETE", "/version"), 0);
        assert_eq!(c.total(), 3);
    }
}
