//! Prometheus metrics (prometheus-client), served as text on `/metrics`.
//!
//! Families (all labels bounded — controller names, outcome and error
//! categories, instance names from specs, PVE path templates, HTTP status
//! codes, machine phases — never an object name or an error's text):
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `capmox_reconcile_total` | counter | `controller`, `outcome` (`success`, `requeue`, `error`, `conflict`: a 409 on our own write, retried from a fresh read) |
//! | `capmox_reconcile_errors_total` | counter | `controller`, `category` ([`crate::error::Error::category`]) |
//! | `capmox_reconcile_duration_seconds` | histogram | `controller` |
//! | `capmox_pve_requests_total` | counter | `instance`, `method`, `endpoint` (path template), `status` (HTTP code or `none`) |
//! | `capmox_pve_request_duration_seconds` | histogram | `instance`, `method`, `endpoint` |
//! | `capmox_machines` | gauge | `instance`, `phase` (counted by the ProxmoxCluster reconciler: refreshed when a machine is created, placed, deleted or relabelled, and at each re-probe — a phase change alone shows within `--probe-period`) |
//! | `capmox_reconciles_in_flight` | gauge | — (reconciles of every controller running now) |
//! | `capmox_leader` | gauge | — (1 while this process leads) |
//! | `capmox_webhook_requests_total` | counter | `webhook` (`mutate`, `validate`, `convert`), `kind` (one of our four kinds, or `other`), `outcome` (`allowed`, `patched`, `denied`, `error`) |
//! | `capmox_webhook_request_duration_seconds` | histogram | `webhook` |
//! | `capmox_machine_seconds_total` | counter (seconds) | `lifecycle` (`create`, `delete`), `phase` (what the machines waited for or their reconciles spent time on; [`crate::machine::runtime::ledger::Phase`]) |

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use pve_client::{CallObserver, CallRecord};
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReconcileLabels {
    controller: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    controller: String,
    category: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PveCallLabels {
    instance: String,
    method: String,
    endpoint: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PveLatencyLabels {
    instance: String,
    method: String,
    endpoint: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MachineLabels {
    instance: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLabels {
    webhook: String,
    kind: String,
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MachineTimeLabels {
    lifecycle: String,
    phase: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WebhookLatencyLabels {
    webhook: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

/// Machines by `(instance, phase)`.
pub type MachineCounts = BTreeMap<(String, String), i64>;

fn reconcile_histogram() -> Histogram {
    // 5 ms … ~80 s.
    Histogram::new(exponential_buckets(0.005, 2.5, 12))
}

fn webhook_histogram() -> Histogram {
    // 0.5 ms … ~2 s (kube-apiserver's webhook timeout is 10 s by default).
    Histogram::new(exponential_buckets(0.0005, 2.5, 10))
}

fn pve_histogram() -> Histogram {
    // 2 ms … ~60 s.
    Histogram::new(exponential_buckets(0.002, 2.5, 12))
}

/// A running reconcile, counted until dropped (see
/// [`Metrics::reconcile_started`]).
#[derive(Debug)]
pub struct InFlight(Gauge);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The registry and every metric family of the manager.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ReconcileLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: HistogramFamily<ControllerLabel>,
    pve_calls: Family<PveCallLabels, Counter>,
    pve_durations: HistogramFamily<PveLatencyLabels>,
    machines: Family<MachineLabels, Gauge>,
    in_flight: Gauge,
    machine_counts: Mutex<BTreeMap<String, MachineCounts>>,
    leader: Gauge,
    webhook_requests: Family<WebhookLabels, Counter>,
    webhook_durations: HistogramFamily<WebhookLatencyLabels>,
    machine_seconds: Family<MachineTimeLabels, Counter<f64, AtomicU64>>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// A fresh registry with every family registered (names prefixed `capmox_`).
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("capmox");
        let reconciles = Family::<ReconcileLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations: HistogramFamily<ControllerLabel> =
            Family::new_with_constructor(reconcile_histogram);
        let pve_calls = Family::<PveCallLabels, Counter>::default();
        let pve_durations: HistogramFamily<PveLatencyLabels> =
            Family::new_with_constructor(pve_histogram);
        let machines = Family::<MachineLabels, Gauge>::default();
        let in_flight = Gauge::default();
        let leader = Gauge::default();
        let webhook_requests = Family::<WebhookLabels, Counter>::default();
        let webhook_durations: HistogramFamily<WebhookLatencyLabels> =
            Family::new_with_constructor(webhook_histogram);
        let machine_seconds = Family::<MachineTimeLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "reconcile",
            "Reconciles by controller and outcome",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Failed reconciles by controller and error category",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Reconcile duration in seconds by controller",
            durations.clone(),
        );
        registry.register(
            "pve_requests",
            "Proxmox API requests by instance, method, endpoint (path template) and HTTP status",
            pve_calls.clone(),
        );
        registry.register(
            "pve_request_duration_seconds",
            "Proxmox API request duration in seconds",
            pve_durations.clone(),
        );
        registry.register(
            "machines",
            "ProxmoxMachines by instance and phase",
            machines.clone(),
        );
        registry.register(
            "reconciles_in_flight",
            "Reconciles of every controller running now",
            in_flight.clone(),
        );
        registry.register(
            "leader",
            "1 while this manager holds the leader lease",
            leader.clone(),
        );
        registry.register(
            "webhook_requests",
            "Admission and conversion webhook requests by webhook, kind and outcome",
            webhook_requests.clone(),
        );
        registry.register(
            "webhook_request_duration_seconds",
            "Time to answer a webhook request in seconds",
            webhook_durations.clone(),
        );
        registry.register(
            "machine_seconds",
            "Seconds ProxmoxMachines spent being created or deleted, by what they waited for or spent time on",
            machine_seconds.clone(),
        );
        Metrics {
            registry,
            reconciles,
            errors,
            durations,
            pve_calls,
            pve_durations,
            machines,
            in_flight,
            machine_counts: Mutex::new(BTreeMap::new()),
            leader,
            webhook_requests,
            webhook_durations,
            machine_seconds,
        }
    }

    /// Adds `time` to what ProxmoxMachines spent in `lifecycle` (`create`,
    /// `delete`) on `phase` (a label of
    /// [`crate::machine::runtime::ledger::Phase`]).
    pub fn machine_time(&self, lifecycle: &'static str, phase: String, time: Duration) {
        self.machine_seconds
            .get_or_create(&MachineTimeLabels {
                lifecycle: lifecycle.to_string(),
                phase,
            })
            .inc_by(time.as_secs_f64());
    }

    /// Records one reconcile of `controller` (e.g. `proxmoxcluster`) with its
    /// `outcome` (`success`, `requeue`, `error`, `conflict`) and wall time.
    pub fn reconcile(&self, controller: &'static str, outcome: &'static str, duration: Duration) {
        self.reconciles
            .get_or_create(&ReconcileLabels {
                controller: controller.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        self.durations
            .get_or_create(&ControllerLabel {
                controller: controller.to_string(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Counts a reconcile as running until the returned guard is dropped
    /// (`capmox_reconciles_in_flight`). Every reconcile holds one, so the
    /// manager knows at shutdown whether anything is left to finish
    /// ([`Metrics::reconciles_in_flight`]).
    pub fn reconcile_started(&self) -> InFlight {
        self.in_flight.inc();
        InFlight(self.in_flight.clone())
    }

    /// Reconciles of every controller running now.
    pub fn reconciles_in_flight(&self) -> i64 {
        self.in_flight.get()
    }

    /// Records a failed reconcile of `controller` by error `category`.
    pub fn error(&self, controller: &'static str, category: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels {
                controller: controller.to_string(),
                category: category.to_string(),
            })
            .inc();
    }

    /// Sets the number of machines in `instance` that are in `phase` directly
    /// (overrides what [`Metrics::set_cluster_machines`] summed for that label set).
    pub fn set_machines(&self, instance: &str, phase: &'static str, count: i64) {
        self.machines
            .get_or_create(&MachineLabels {
                instance: instance.to_string(),
                phase: phase.to_string(),
            })
            .set(count);
    }

    /// Records the machines of one ProxmoxCluster (`namespace/name`) by
    /// `(instance, phase)`; `capmox_machines` is the sum over all clusters
    /// (several clusters may use instances of the same name). An empty map
    /// removes the cluster's contribution (after deletion).
    pub fn set_cluster_machines(&self, cluster: &str, counts: MachineCounts) {
        let mut all = self
            .machine_counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut keys: Vec<(String, String)> = all
            .get(cluster)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        keys.extend(counts.keys().cloned());
        if counts.is_empty() {
            all.remove(cluster);
        } else {
            all.insert(cluster.to_string(), counts);
        }
        for (instance, phase) in keys {
            let total: i64 = all
                .values()
                .filter_map(|m| m.get(&(instance.clone(), phase.clone())))
                .sum();
            self.machines
                .get_or_create(&MachineLabels { instance, phase })
                .set(total);
        }
    }

    /// Records one webhook request: `webhook` (`mutate`, `validate`,
    /// `convert`), the `kind` it was about (one of our kinds or `other`), its
    /// `outcome` (`allowed`, `patched`, `denied`, `error`) and the time taken.
    pub fn webhook(
        &self,
        webhook: &'static str,
        kind: &'static str,
        outcome: &'static str,
        duration: Duration,
    ) {
        self.webhook_requests
            .get_or_create(&WebhookLabels {
                webhook: webhook.to_string(),
                kind: kind.to_string(),
                outcome: outcome.to_string(),
            })
            .inc();
        self.webhook_durations
            .get_or_create(&WebhookLatencyLabels {
                webhook: webhook.to_string(),
            })
            .observe(duration.as_secs_f64());
    }

    /// Sets the leader gauge.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// The registry in Prometheus text format (`text/plain; version=0.0.4`).
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// This registry as a shared call observer for `PveClient::with_observer`.
    pub fn observer(self: &Arc<Self>) -> Arc<dyn CallObserver> {
        self.clone()
    }
}

impl CallObserver for Metrics {
    fn on_call(&self, record: &CallRecord<'_>) {
        crate::spent::proxmox(record.duration);
        let status = record
            .status
            .map_or_else(|| "none".to_string(), |s| s.to_string());
        self.pve_calls
            .get_or_create(&PveCallLabels {
                instance: record.instance.to_string(),
                method: record.method.to_string(),
                endpoint: record.path_template.to_string(),
                status,
            })
            .inc();
        self.pve_durations
            .get_or_create(&PveLatencyLabels {
                instance: record.instance.to_string(),
                method: record.method.to_string(),
                endpoint: record.path_template.to_string(),
            })
            .observe(record.duration.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_encode_with_bounded_labels() {
        let m = Arc::new(Metrics::new());
        m.reconcile("proxmoxcluster", "success", Duration::from_millis(20));
        m.reconcile("proxmoxcluster", "success", Duration::from_millis(30));
        m.error("proxmoxcluster", "pve_unauthorized");
        m.set_machines("dc-a", "Running", 3);
        m.set_cluster_machines(
            "ns/wl1",
            BTreeMap::from([(("dc-b".to_string(), "Provisioned".to_string()), 2)]),
        );
        m.set_cluster_machines(
            "ns/wl2",
            BTreeMap::from([
                (("dc-b".to_string(), "Provisioned".to_string()), 1),
                (("dc-c".to_string(), "Deleting".to_string()), 1),
            ]),
        );
        // wl2 gone: its contribution disappears.
        m.set_cluster_machines("ns/wl2", BTreeMap::new());
        m.set_leader(true);
        m.machine_time("create", "task_clone".into(), Duration::from_millis(1500));
        m.machine_time("create", "task_clone".into(), Duration::from_millis(500));
        m.webhook(
            "validate",
            "ProxmoxMachine",
            "denied",
            Duration::from_millis(1),
        );
        m.observer().on_call(&CallRecord {
            instance: "dc-a",
            method: "GET",
            path_template: "/version",
            status: Some(401),
            duration: Duration::from_millis(5),
            error_category: Some("unauthorized"),
        });
        m.on_call(&CallRecord {
            instance: "dc-b",
            method: "GET",
            path_template: "/version",
            status: None,
            duration: Duration::from_millis(5),
            error_category: Some("transient"),
        });
        let text = m.encode();
        for line in [
            "capmox_reconcile_total{controller=\"proxmoxcluster\",outcome=\"success\"} 2",
            "capmox_reconcile_errors_total{controller=\"proxmoxcluster\",category=\"pve_unauthorized\"} 1",
            "capmox_reconcile_duration_seconds_count{controller=\"proxmoxcluster\"} 2",
            "capmox_pve_requests_total{instance=\"dc-a\",method=\"GET\",endpoint=\"/version\",status=\"401\"} 1",
            "capmox_pve_requests_total{instance=\"dc-b\",method=\"GET\",endpoint=\"/version\",status=\"none\"} 1",
            "capmox_machines{instance=\"dc-a\",phase=\"Running\"} 3",
            "capmox_machines{instance=\"dc-b\",phase=\"Provisioned\"} 2",
            "capmox_machines{instance=\"dc-c\",phase=\"Deleting\"} 0",
            "capmox_leader 1",
            "capmox_machine_seconds_total{lifecycle=\"create\",phase=\"task_clone\"} 2.0",
            "capmox_webhook_requests_total{webhook=\"validate\",kind=\"ProxmoxMachine\",outcome=\"denied\"} 1",
            "capmox_webhook_request_duration_seconds_count{webhook=\"validate\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}
