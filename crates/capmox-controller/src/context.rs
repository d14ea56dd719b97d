//! What every controller shares: the Kubernetes client, the Proxmox client
//! map, metrics, the event series, the options (timeouts, requeue periods,
//! concurrency, scope, time scale) and the shutdown signal.
//!
//! Time: every controller-side duration is given unscaled in
//! [`ControllerOptions`]. Durations that stand for simulated work or the
//! controller's own pacing (requeues, probe period, backoff) are read through
//! [`ControllerOptions::scaled`], which multiplies by `time_scale` (1.0 in
//! production; tests and the benchmark use small factors to run the real
//! proportions quickly). Timeouts of real requests — a Proxmox API call
//! (`pve_call_timeout`) and an instance probe (`probe_timeout`) — are
//! wall-clock limits and are never scaled.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::Reporter;
use kube::runtime::watcher;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::capi::CLUSTER_NAME_LABEL;
use crate::clients::{ClientMap, ClientMapConfig};
use crate::metrics::Metrics;

/// Label CAPI's `--watch-filter` convention uses to select objects.
pub const WATCH_FILTER_LABEL: &str = "cluster.x-k8s.io/watch-filter";

/// Field manager of every server-side apply this manager makes.
pub const FIELD_MANAGER: &str = "capmox-controller";

/// Options every controller reads. Durations are unscaled; pacing durations
/// are read through [`ControllerOptions::scaled`], request timeouts as they are.
#[derive(Clone, Debug, PartialEq)]
pub struct ControllerOptions {
    /// Watch only this namespace (`None` = all namespaces).
    pub namespace: Option<String>,
    /// Only reconcile objects labelled `cluster.x-k8s.io/watch-filter=<value>`.
    pub watch_filter: Option<String>,
    /// Reconciles running at once per controller.
    pub concurrency: u16,
    /// Multiplier applied to the durations below that pace the controller
    /// (1.0 = real time); not to `probe_timeout` and `pve_call_timeout`.
    pub time_scale: f64,
    /// Requeue period of a healthy ProxmoxCluster (re-probe), default 60 s.
    pub probe_period: Duration,
    /// Requeue period while an instance is unhealthy (first retry; doubles
    /// per consecutive unhealthy probe up to `backoff_max`, jittered), default 10 s.
    pub unhealthy_retry: Duration,
    /// Per-instance probe timeout (all probe calls of one instance), default
    /// 10 s. Wall-clock: not scaled by `time_scale`.
    pub probe_timeout: Duration,
    /// A probe result younger than this is reused instead of probing again, default 5 s.
    pub probe_cache_ttl: Duration,
    /// Default per-call timeout of every Proxmox client, default 60 s.
    /// Wall-clock: not scaled by `time_scale`.
    pub pve_call_timeout: Duration,
    /// First retry delay after a failed reconcile, default 1 s (doubles per failure).
    pub backoff_base: Duration,
    /// Longest retry delay after failed reconciles, default 5 min.
    pub backoff_max: Duration,
    /// Requeue period while waiting for something only time or an
    /// unwatched change brings (e.g. machines to go away), default 10 s.
    pub wait_period: Duration,
}

impl Default for ControllerOptions {
    fn default() -> Self {
        ControllerOptions {
            namespace: None,
            watch_filter: None,
            concurrency: 32,
            time_scale: 1.0,
            probe_period: Duration::from_secs(60),
            unhealthy_retry: Duration::from_secs(10),
            probe_timeout: Duration::from_secs(10),
            probe_cache_ttl: Duration::from_secs(5),
            pve_call_timeout: pve_client::config::DEFAULT_TIMEOUT,
            backoff_base: Duration::from_secs(1),
            backoff_max: Duration::from_secs(300),
            wait_period: Duration::from_secs(10),
        }
    }
}

impl ControllerOptions {
    /// `d × time_scale` (at least 1 ms, so a scaled timer still yields).
    pub fn scaled(&self, d: Duration) -> Duration {
        let scale = if self.time_scale.is_finite() && self.time_scale > 0.0 {
            self.time_scale
        } else {
            1.0
        };
        d.mul_f64(scale).max(Duration::from_millis(1))
    }

    /// The label selector of `--watch-filter`, if set.
    pub fn label_selector(&self) -> Option<String> {
        self.watch_filter
            .as_ref()
            .map(|v| format!("{WATCH_FILTER_LABEL}={v}"))
    }

    /// Watcher configuration for the objects this manager reconciles
    /// (carries the watch-filter label selector).
    pub fn watcher_config(&self) -> watcher::Config {
        let cfg = watcher::Config::default().any_semantic();
        match self.label_selector() {
            Some(sel) => cfg.labels(&sel),
            None => cfg,
        }
    }

    /// Watcher configuration for objects the watch filter does not apply to
    /// (Secrets, IPAM objects): everything in scope.
    pub fn unfiltered_watcher_config(&self) -> watcher::Config {
        watcher::Config::default().any_semantic()
    }

    /// Whether an object with these labels passes `--watch-filter`.
    pub fn passes_filter(&self, labels: &std::collections::BTreeMap<String, String>) -> bool {
        match &self.watch_filter {
            None => true,
            Some(v) => labels.get(WATCH_FILTER_LABEL) == Some(v),
        }
    }
}

/// What every controller shares.
pub struct Shared {
    /// Kubernetes client.
    pub kube: kube::Client,
    /// Per-instance Proxmox clients.
    pub clients: ClientMap,
    /// Metrics registry.
    pub metrics: Arc<Metrics>,
    /// Who reports events (`capmox-controller`, instance = holder identity).
    pub reporter: Reporter,
    /// The live event series, shared between reconciles
    /// ([`crate::events::series`]).
    pub series: crate::events::series::SeriesCache,
    /// Options.
    pub options: ControllerOptions,
    shutdown: tokio::sync::watch::Receiver<bool>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("options", &self.options)
            .field("clients", &self.clients)
            .finish_non_exhaustive()
    }
}

/// Triggers the shutdown of every controller holding the matching [`Shared`].
#[derive(Debug, Clone)]
pub struct ShutdownHandle(tokio::sync::watch::Sender<bool>);

impl ShutdownHandle {
    /// Asks the controllers to stop (in-flight reconciles finish).
    pub fn shutdown(&self) {
        let _ = self.0.send(true);
    }
}

impl Shared {
    /// Shared state with a client map built from `options` (default
    /// credentials, metrics observer, call timeout) and a shutdown handle.
    /// The client map's call and identity timeouts are `pve_call_timeout`
    /// and `probe_timeout` as given (wall-clock, not scaled).
    pub fn new(
        kube: kube::Client,
        options: ControllerOptions,
        metrics: Arc<Metrics>,
        reporter: Reporter,
        default_credentials: Option<(String, String)>,
    ) -> (Shared, ShutdownHandle) {
        let clients = ClientMap::new(client_map_config(&options, &metrics, default_credentials));
        Shared::with_clients(kube, options, metrics, reporter, clients)
    }

    /// Shared state around an existing client map (tests inject fakes this way).
    pub fn with_clients(
        kube: kube::Client,
        options: ControllerOptions,
        metrics: Arc<Metrics>,
        reporter: Reporter,
        clients: ClientMap,
    ) -> (Shared, ShutdownHandle) {
        let (tx, rx) = tokio::sync::watch::channel(false);
        (
            Shared {
                kube,
                clients,
                metrics,
                reporter,
                series: Default::default(),
                options,
                shutdown: rx,
            },
            ShutdownHandle(tx),
        )
    }

    /// Resolves once shutdown was requested (for
    /// `Controller::graceful_shutdown_on`).
    pub fn shutdown_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.shutdown.clone();
        async move {
            // An error means the handle is gone: shut down as well.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }

    /// Whether shutdown was requested.
    pub fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// `Api<K>` over the watched scope: `--namespace`, or all namespaces.
    pub fn scoped_api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match &self.options.namespace {
            Some(ns) => Api::namespaced(self.kube.clone(), ns),
            None => Api::all(self.kube.clone()),
        }
    }

    /// `Api<K>` in one namespace.
    pub fn namespaced_api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::namespaced(self.kube.clone(), namespace)
    }
}

/// The Proxmox client map's configuration: the call and identity timeouts
/// are `pve_call_timeout` and `probe_timeout` as given — wall-clock limits on
/// real requests, never multiplied by `time_scale`.
fn client_map_config(
    options: &ControllerOptions,
    metrics: &Arc<Metrics>,
    default_credentials: Option<(String, String)>,
) -> ClientMapConfig {
    ClientMapConfig {
        call_timeout: options.pve_call_timeout,
        identity_timeout: options.probe_timeout,
        default_credentials,
        observer: Some(metrics.observer()),
        factory: None,
    }
}

/// Label selector of the objects of one CAPI cluster
/// (`cluster.x-k8s.io/cluster-name=<cluster>`).
pub fn cluster_selector(cluster_name: &str) -> String {
    format!("{CLUSTER_NAME_LABEL}={cluster_name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_and_filters() {
        let mut o = ControllerOptions::default();
        assert_eq!(o.scaled(Duration::from_secs(60)), Duration::from_secs(60));
        o.time_scale = 0.01;
        assert_eq!(
            o.scaled(Duration::from_secs(60)),
            Duration::from_millis(600)
        );
        assert_eq!(
            o.scaled(Duration::from_micros(10)),
            Duration::from_millis(1)
        );
        o.time_scale = f64::NAN;
        assert_eq!(o.scaled(Duration::from_secs(2)), Duration::from_secs(2));
        assert_eq!(o.label_selector(), None);
        assert!(o.passes_filter(&Default::default()));
        o.watch_filter = Some("team-a".into());
        assert_eq!(
            o.label_selector().as_deref(),
            Some("cluster.x-k8s.io/watch-filter=team-a")
        );
        assert!(!o.passes_filter(&Default::default()));
        assert!(o.passes_filter(&[(WATCH_FILTER_LABEL.to_string(), "team-a".to_string())].into()));
        assert_eq!(cluster_selector("wl1"), "cluster.x-k8s.io/cluster-name=wl1");
    }

    #[test]
    fn request_timeouts_are_not_scaled() {
        let o = ControllerOptions {
            time_scale: 0.005,
            ..ControllerOptions::default()
        };
        let cfg = client_map_config(&o, &Arc::new(Metrics::new()), None);
        assert_eq!(cfg.call_timeout, Duration::from_secs(60));
        assert_eq!(cfg.identity_timeout, Duration::from_secs(10));
        // pacing durations still shrink
        assert_eq!(o.scaled(o.probe_period), Duration::from_millis(300));
    }
}
