//! The manager: flags, Kubernetes client, health and metrics servers,
//! leader election, and the controllers, with a graceful shutdown.
//!
//! | module | owns |
//! |---|---|
//! | [`flags`] | command-line flags and their environment variables |
//! | [`leader`] | leader election on a `coordination.k8s.io/v1` Lease |
//! | [`kubeconfig`] | the Kubernetes client from `--kubeconfig`, `KUBECONFIG` or inference |
//! | [`kube_http`] | the client's HTTP stack: bounded pool, proxy rules |
//! | [`managed_fields`] | responses read without `metadata.managedFields` |
//! | [`http`] | `/healthz`, `/readyz`, `/metrics` |
//!
//! The webhook server is [`crate::webhook`]'s.
//!
//! Lifecycle of [`run`]: build the client (from `--kubeconfig`, else
//! `KUBECONFIG` / `~/.kube/config` / in-cluster), serve health and metrics,
//! serve the webhooks (every replica, leader or not, as controller-runtime
//! does; the conversion function is [`crate::api::conversion::convert_object`]),
//! become ready once the API server answers and the webhook server serves,
//! campaign for the Lease (when
//! `--leader-elect`), run the controllers while leading; on SIGTERM/SIGINT
//! stop the controllers (in-flight reconciles get `--shutdown-timeout`),
//! release the Lease, stop the webhook server and return. Losing the Lease while leading stops the
//! controllers and returns [`ManagerError::LostLeadership`] (the process
//! exits non-zero and is restarted, as controller-runtime does).
//!
//! `main` owns its shutdown select and timeout rather than relying on
//! `Controller::shutdown_on_signal`, which can hang when the API server is
//! unreachable (a known trap of kube 5).

pub mod flags;
pub mod http;
pub mod kube_http;
pub mod kubeconfig;
pub mod leader;
pub mod managed_fields;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use kube::runtime::events::Reporter;

pub use flags::Flags;
pub use kubeconfig::{api_error_text, kube_client};
use leader::{LeaderConfig, LeaderElector};

use crate::context::Shared;
use crate::metrics::Metrics;

/// Name of the manager as event reporter and field manager.
pub const MANAGER_NAME: &str = "capmox-controller";

/// Why the manager stopped abnormally.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    /// The kubeconfig could not be read or used.
    #[error("kubeconfig: {0}")]
    Kubeconfig(String),
    /// An HTTP listener could not be bound.
    #[error("cannot listen on {addr} ({flag}): {source}")]
    Listen {
        /// The address.
        addr: std::net::SocketAddr,
        /// The flag that gave it (`--metrics-addr`, `--health-addr`).
        flag: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The leader Lease was lost while leading.
    #[error("lost the leader lease")]
    LostLeadership,
    /// The Tokio runtime (worker threads, I/O driver) could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// The webhook server could not start (certificate or address).
    #[error("webhook server: {0}{hint}", hint = webhook_hint(.0))]
    Webhook(#[from] crate::webhook::WebhookError),
}

/// What to do about a serving certificate that cannot be read (at the
/// first start outside the cluster there is none): the flags that say
/// where it is, or that there is none.
fn webhook_hint(e: &crate::webhook::WebhookError) -> &'static str {
    match e {
        crate::webhook::WebhookError::Certs(crate::webhook::certs::CertError::Read { .. }) => {
            "; put the serving certificate in --webhook-cert-dir (names: --webhook-cert-name, --webhook-key-name), or run with --disable-webhooks"
        }
        _ => "",
    }
}

impl ManagerError {
    /// Short stable label (`kubeconfig`, `listen`, `lost_leadership`,
    /// `runtime`, `webhook`).
    pub fn category(&self) -> &'static str {
        match self {
            ManagerError::Kubeconfig(_) => "kubeconfig",
            ManagerError::Listen { .. } => "listen",
            ManagerError::LostLeadership => "lost_leadership",
            ManagerError::Runtime(_) => "runtime",
            ManagerError::Webhook(_) => "webhook",
        }
    }

    /// Whether the operator's input is at fault (a kubeconfig that cannot
    /// be read or used), not the running manager: `main` reports it as a
    /// usage error, one plain line and exit status 2, like a bad flag.
    pub fn is_usage(&self) -> bool {
        matches!(self, ManagerError::Kubeconfig(_))
    }
}

/// This process's identity for the Lease and events: `POD_NAME`, else the
/// host name plus a random suffix.
pub fn identity() -> String {
    if let Ok(p) = std::env::var("POD_NAME")
        && !p.is_empty()
    {
        return p;
    }
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "capmox".to_string());
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    format!("{host}_{}", &suffix[..8])
}

/// Runs every controller of this manager until `shared` is shut down:
/// ProxmoxCluster, ProxmoxMachine (with `machine` options) and
/// ProxmoxMachineTemplate status. The watched-object stores are made here
/// and passed to the controllers that read them; the machine controller's
/// watches fill them.
pub fn controllers(
    shared: Arc<Shared>,
    machine: crate::machine::MachineOptions,
) -> impl Future<Output = ()> + Send {
    let (stores, writers) = crate::stores::Stores::new();
    let runtime = Arc::new(crate::machine::MachineRuntime::new(
        &shared.options,
        machine,
    ));
    let ctx = Arc::new(crate::machine::Context {
        shared: shared.clone(),
        runtime,
        stores: stores.clone(),
    });
    let cluster = crate::cluster::controller(shared.clone(), stores);
    let machines = crate::machine::controller::run(ctx, writers);
    let templates = crate::template_status::controller(shared);
    async move {
        futures::future::join3(cluster, machines, templates).await;
    }
}

/// Resolves once no reconcile runs, seen twice 50 ms apart, after the
/// controllers were asked to stop (they start none after that). The
/// controllers end by themselves once their reconciles finished, except
/// one whose watch never listed its objects (the API server unreachable
/// since the start): kube-runtime's runner then waits for its store
/// forever, though it never started a reconcile, and the shutdown would
/// wait the whole `--shutdown-timeout` for nothing.
async fn reconciles_done(metrics: &crate::metrics::Metrics) {
    let mut idle = 0;
    loop {
        if metrics.reconciles_in_flight() == 0 {
            idle += 1;
            if idle >= 2 {
                return;
            }
        } else {
            idle = 0;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Resolves on SIGTERM or SIGINT.
async fn termination() {
    #[cfg(unix)]
    {
        let term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate());
        match term {
            Ok(mut t) => {
                tokio::select! {
                    _ = t.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

fn stop_future(
    rx: &tokio::sync::watch::Receiver<bool>,
) -> futures::future::Shared<futures::future::BoxFuture<'static, ()>> {
    let mut rx = rx.clone();
    async move {
        let _ = rx.wait_for(|s| *s).await;
    }
    .boxed()
    .shared()
}

/// [`run`] on a multi-threaded Tokio runtime of its own: the binary's
/// plain `main` calls this. (An `async fn` is compiled again in every crate
/// that polls it; a `#[tokio::main]` binary awaiting [`run`] re-compiled the
/// whole manager, 72 s of the release build.)
///
/// # Errors
/// [`ManagerError::Runtime`] when the runtime cannot start; otherwise as [`run`].
pub fn run_blocking(flags: Flags) -> Result<(), ManagerError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(ManagerError::Runtime)?
        .block_on(run(flags))
}

/// Runs the manager until SIGTERM/SIGINT (see the module docs).
///
/// # Errors
/// [`ManagerError`] when the client cannot be built, a listener cannot be
/// bound, or leadership is lost.
pub async fn run(flags: Flags) -> Result<(), ManagerError> {
    run_until(flags, termination()).await
}

/// [`run`] with an explicit stop signal.
///
/// # Errors
/// As [`run`].
pub async fn run_until(
    flags: Flags,
    stop: impl Future<Output = ()> + Send,
) -> Result<(), ManagerError> {
    run_with(flags, stop, None).await
}

/// [`run_until`] that also reports the bound HTTP addresses once serving
/// (tests listen on port 0).
///
/// # Errors
/// As [`run`].
pub async fn run_with(
    flags: Flags,
    stop: impl Future<Output = ()> + Send,
    started: Option<tokio::sync::oneshot::Sender<http::Bound>>,
) -> Result<(), ManagerError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let (kube, server) = kube_client(flags.kubeconfig.as_deref()).await?;
    let identity = identity();
    let metrics = Arc::new(Metrics::new());
    let reporter = Reporter {
        controller: MANAGER_NAME.to_string(),
        instance: Some(identity.clone()),
    };
    let (shared, shutdown) = Shared::new(
        kube.clone(),
        flags.controller_options(),
        metrics.clone(),
        reporter,
        flags.default_credentials(),
    );
    let shared = Arc::new(shared);

    let (http_stop_tx, http_stop_rx) = tokio::sync::watch::channel(false);
    let health = http::Health::default();
    let (mut bound, http_task) = http::serve(
        flags.metrics_addr,
        flags.health_addr,
        health.clone(),
        metrics.clone(),
        stop_future(&http_stop_rx),
    )
    .await?;
    let webhooks = match flags.webhook_options() {
        Some(opts) => match crate::webhook::serve(
            &opts,
            kube.clone(),
            metrics.clone(),
            crate::api::conversion::convert_object,
        )
        .await
        {
            Ok(w) => Some(w),
            Err(e) => {
                let _ = http_stop_tx.send(true);
                return Err(e.into());
            }
        },
        None => None,
    };
    bound.webhook = webhooks.as_ref().map(|w| w.addr);
    health.set_webhooks_serving(true);
    tracing::info!(
        identity = %identity,
        metrics = %bound.metrics,
        health = %bound.health,
        webhooks = %bound.webhook.map_or_else(|| "disabled".to_string(), |a| a.to_string()),
        namespace = shared.options.namespace.as_deref().unwrap_or("all"),
        watch_filter = shared.options.watch_filter.as_deref().unwrap_or("none"),
        "capmox-controller starting"
    );
    if let Some(tx) = started {
        let _ = tx.send(bound);
    }
    let ready_task = {
        let kube = kube.clone();
        let health = health.clone();
        tokio::spawn(async move {
            loop {
                match kube.apiserver_version().await {
                    Ok(v) => {
                        tracing::info!(version = %v.git_version, "connected to the Kubernetes API server");
                        health.set_ready(true);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(
                            server = %server,
                            error = %api_error_text(&e),
                            "Kubernetes API server not reachable yet"
                        );
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                }
            }
        })
    };

    tokio::pin!(stop);
    let (lead_tx, mut lead_rx) = tokio::sync::watch::channel(!flags.leader_elect);
    let (elector_stop_tx, elector_stop_rx) = tokio::sync::watch::channel(false);
    let elector = if flags.leader_elect {
        let cfg = LeaderConfig {
            namespace: flags.manager_namespace(),
            name: flags.leader_election_id.clone(),
            identity: identity.clone(),
            lease_duration: flags.leader_lease_duration,
            renew_deadline: flags.leader_renew_deadline,
            retry_period: flags.leader_retry_period,
        };
        tracing::info!(lease = %format!("{}/{}", cfg.namespace, cfg.name), "waiting for the leader lease");
        Some(tokio::spawn(
            LeaderElector::new(kube.clone(), cfg).run(lead_tx, stop_future(&elector_stop_rx)),
        ))
    } else {
        None
    };

    let mut result = Ok(());
    let leading = tokio::select! {
        () = &mut stop => { tracing::info!("shutdown requested before leading"); false }
        r = lead_rx.wait_for(|l| *l) => r.is_ok(),
    };
    if leading {
        metrics.set_leader(true);
        if flags.leader_elect {
            tracing::info!("leading: starting controllers");
        } else {
            tracing::info!("starting controllers (no leader election)");
        }
        let running = controllers(shared.clone(), flags.machine_options());
        tokio::pin!(running);
        let ended_by_itself = tokio::select! {
            () = &mut stop => { tracing::info!("shutdown requested"); false }
            () = &mut running => true,
            r = lead_rx.wait_for(|l| !*l) => {
                if r.is_ok() {
                    result = Err(ManagerError::LostLeadership);
                }
                false
            }
        };
        shutdown.shutdown();
        if !ended_by_itself {
            let drained = tokio::time::timeout(flags.shutdown_timeout, async {
                tokio::select! {
                    () = &mut running => {}
                    () = reconciles_done(&metrics) => {}
                }
            })
            .await;
            if drained.is_err() {
                tracing::warn!(timeout = ?flags.shutdown_timeout, "in-flight reconciles did not finish in time; stopping anyway");
            }
        }
        metrics.set_leader(false);
    } else {
        shutdown.shutdown();
    }
    let _ = elector_stop_tx.send(true);
    if let Some(e) = elector {
        let _ = tokio::time::timeout(flags.shutdown_timeout, e).await;
    }
    ready_task.abort();
    if let Some(w) = webhooks {
        w.shutdown(Duration::from_secs(5)).await;
    }
    let _ = http_stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(5), http_task).await;
    tracing::info!("capmox-controller stopped");
    result
}
