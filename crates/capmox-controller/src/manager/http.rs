//! The manager's HTTP endpoints: `/healthz` (the process is alive),
//! `/readyz` (connected to the API server and the webhook server serving; a
//! standby waiting for the leader lease is ready too, as in
//! controller-runtime, and serves webhooks like the leader) and `/metrics`
//! (Prometheus text format). When the metrics and health addresses are equal, one
//! listener serves all three.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::ManagerError;
use crate::metrics::Metrics;

/// Readiness shared with the HTTP handlers: the API server answered, and
/// the webhook server serves (or webhooks are disabled).
#[derive(Clone, Debug, Default)]
pub struct Health {
    ready: Arc<AtomicBool>,
    webhooks: Arc<AtomicBool>,
}

impl Health {
    /// Marks the API server reachable (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Marks the webhook server serving, or not needed (`--disable-webhooks`).
    pub fn set_webhooks_serving(&self, serving: bool) {
        self.webhooks.store(serving, Ordering::Release);
    }

    /// Why the manager is not ready, or `None` when it is.
    pub fn not_ready(&self) -> Option<&'static str> {
        if !self.ready.load(Ordering::Acquire) {
            Some("not ready: the API server has not answered yet")
        } else if !self.webhooks.load(Ordering::Acquire) {
            Some("not ready: the webhook server is not serving")
        } else {
            None
        }
    }

    /// Whether the manager is ready.
    pub fn is_ready(&self) -> bool {
        self.not_ready().is_none()
    }
}

#[derive(Clone)]
struct AppState {
    health: Health,
    metrics: Arc<Metrics>,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(s): State<AppState>) -> impl IntoResponse {
    match s.health.not_ready() {
        None => (StatusCode::OK, "ok"),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

async fn metrics(State(s): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.encode(),
    )
}

/// The addresses the servers listen on (port 0 resolved).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bound {
    /// `/metrics`.
    pub metrics: SocketAddr,
    /// `/healthz`, `/readyz`.
    pub health: SocketAddr,
    /// The webhook server (HTTPS), unless webhooks are disabled.
    pub webhook: Option<SocketAddr>,
}

/// Binds `addr`, given by `flag`.
async fn bind(
    addr: SocketAddr,
    flag: &'static str,
) -> Result<(TcpListener, SocketAddr), ManagerError> {
    let listen = |source| ManagerError::Listen { addr, flag, source };
    let l = TcpListener::bind(addr).await.map_err(listen)?;
    let bound = l.local_addr().map_err(listen)?;
    Ok((l, bound))
}

/// Binds the listeners and serves until `stop` resolves.
///
/// # Errors
/// [`ManagerError::Listen`] when an address cannot be bound, naming it and
/// its flag.
pub async fn serve(
    metrics_addr: SocketAddr,
    health_addr: SocketAddr,
    health: Health,
    registry: Arc<Metrics>,
    stop: impl std::future::Future<Output = ()> + Send + Clone + 'static,
) -> Result<(Bound, tokio::task::JoinHandle<()>), ManagerError> {
    let state = AppState {
        health,
        metrics: registry,
    };
    let health_routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz));
    let metrics_routes = Router::new().route("/metrics", get(metrics));
    let mut tasks = Vec::new();
    let bound = if metrics_addr == health_addr {
        let (l, addr) = bind(metrics_addr, "--metrics-addr and --health-addr").await?;
        let app = health_routes.merge(metrics_routes).with_state(state);
        tasks.push(tokio::spawn(run(l, app, stop)));
        Bound {
            metrics: addr,
            health: addr,
            webhook: None,
        }
    } else {
        let (ml, metrics_bound) = bind(metrics_addr, "--metrics-addr").await?;
        let (hl, health_bound) = bind(health_addr, "--health-addr").await?;
        let bound = Bound {
            metrics: metrics_bound,
            health: health_bound,
            webhook: None,
        };
        tasks.push(tokio::spawn(run(
            ml,
            metrics_routes.with_state(state.clone()),
            stop.clone(),
        )));
        tasks.push(tokio::spawn(run(hl, health_routes.with_state(state), stop)));
        bound
    };
    let handle = tokio::spawn(async move {
        for t in tasks {
            let _ = t.await;
        }
    });
    Ok((bound, handle))
}

async fn run(
    listener: TcpListener,
    app: Router,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) {
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(stop)
        .await
    {
        tracing::warn!(error = %e, "HTTP server failed");
    }
}
