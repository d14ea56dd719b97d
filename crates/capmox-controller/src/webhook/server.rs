//! The HTTPS listener and its routes: each admission route reads an
//! `AdmissionReview`, asks [`super::decide`] (after [`super::lookup`] when a
//! machine must be checked against its cluster) and answers with the
//! review's response; `/convert` hands the review to [`super::convert`].
//! Every request is counted in `capmox_webhook_requests_total` (webhook,
//! kind, outcome) and timed; refusals are logged at `info` with the fields
//! they name, unreadable requests at `warn`, the rest at `debug`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use kube::core::response::{StatusCause, StatusDetails};
use kube::core::{DynamicObject, Status};
use tokio::task::JoinHandle;

use super::certs::{self, CertFiles};
use super::convert::{self, Convert};
use super::decide::{self, Problem};
use super::reviewed::Reviewed;
use super::{CONVERT_PATH, Kind, WebhookError, WebhookOptions, lookup};
use crate::api::GROUP;
use crate::api::validation::FieldError;
use crate::metrics::Metrics;

/// Which admission webhook a route is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Mutate,
    Validate,
}

impl Mode {
    fn as_str(self) -> &'static str {
        match self {
            Mode::Mutate => "mutate",
            Mode::Validate => "validate",
        }
    }
}

struct AppState {
    kube: kube::Client,
    metrics: Arc<Metrics>,
    convert: Convert,
    /// Permits for the cluster lookups ([`LOOKUPS_AT_ONCE`]).
    lookups: tokio::sync::Semaphore,
}

/// Cluster lookups (two GETs each) made at once. A burst of machine writes
/// (a scale-up by hundreds) reaches the webhook as many concurrent reviews;
/// unbounded, each opened its own connection to the API server. Two local
/// GETs take about a millisecond, so a review rarely waits for a permit.
pub const LOOKUPS_AT_ONCE: usize = 8;

/// A running webhook server.
#[derive(Debug)]
pub struct WebhookServer {
    /// The address it listens on (port 0 resolved).
    pub addr: SocketAddr,
    handle: axum_server::Handle<SocketAddr>,
    serve: JoinHandle<()>,
    watch_stop: tokio::sync::watch::Sender<bool>,
    watch: JoinHandle<()>,
}

impl WebhookServer {
    /// Stops accepting connections, lets requests in flight finish (at most
    /// `grace`), stops the certificate watcher.
    pub async fn shutdown(self, grace: Duration) {
        self.handle.graceful_shutdown(Some(grace));
        let _ = self.watch_stop.send(true);
        let _ = tokio::time::timeout(grace + Duration::from_secs(1), self.serve).await;
        let _ = self.watch.await;
    }
}

/// Loads the serving certificate, binds `opts.addr` and serves the routes
/// (see the module docs) until [`WebhookServer::shutdown`]; re-reads the
/// certificate every `opts.reload_period`. `kube` reads the clusters of
/// machines; `convert` answers `/convert`.
///
/// # Errors
/// [`WebhookError::Certs`] when the certificate pair cannot be used,
/// [`WebhookError::Listen`] when the address cannot be bound.
pub async fn serve(
    opts: &WebhookOptions,
    kube: kube::Client,
    metrics: Arc<Metrics>,
    convert: Convert,
) -> Result<WebhookServer, WebhookError> {
    let files = CertFiles::in_dir(&opts.cert_dir, &opts.cert_name, &opts.key_name);
    let (cfg, loaded) = certs::load(&files)?;
    let tls = RustlsConfig::from_config(cfg);
    let listen = |source| WebhookError::Listen {
        addr: opts.addr,
        source,
    };
    let listener = std::net::TcpListener::bind(opts.addr).map_err(listen)?;
    listener.set_nonblocking(true).map_err(listen)?;
    let addr = listener.local_addr().map_err(listen)?;
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls.clone())
        .map_err(listen)?
        .handle(handle.clone());
    let app = router(Arc::new(AppState {
        kube,
        metrics,
        convert,
        lookups: tokio::sync::Semaphore::new(LOOKUPS_AT_ONCE),
    }));
    let serve = tokio::spawn(async move {
        if let Err(e) = server.serve(app.into_make_service()).await {
            tracing::error!(error = %e, "webhook server failed");
        }
    });
    let (watch_stop, mut stop_rx) = tokio::sync::watch::channel(false);
    let watch = tokio::spawn(certs::watch(
        files.clone(),
        tls,
        loaded,
        opts.reload_period,
        async move {
            let _ = stop_rx.wait_for(|s| *s).await;
        },
    ));
    tracing::info!(addr = %addr, cert = %files.cert.display(), "webhook server listening");
    Ok(WebhookServer {
        addr,
        handle,
        serve,
        watch_stop,
        watch,
    })
}

fn router(state: Arc<AppState>) -> Router {
    let mut r = Router::new();
    for kind in Kind::ALL {
        for mode in [Mode::Mutate, Mode::Validate] {
            let path = match mode {
                Mode::Mutate => kind.mutate_path(),
                Mode::Validate => kind.validate_path(),
            };
            r = r.route(
                &path,
                post(
                    move |State(s): State<Arc<AppState>>, body: Bytes| async move {
                        admission(s, kind, mode, body).await
                    },
                ),
            );
        }
    }
    r.route(CONVERT_PATH, post(conversion)).with_state(state)
}

fn json<T: serde::Serialize>(body: &T) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(body).unwrap_or_default(),
    )
        .into_response()
}

async fn conversion(State(s): State<Arc<AppState>>, body: Bytes) -> Response {
    let start = Instant::now();
    let a = convert::answer(&body, s.convert);
    let kind = a
        .kind
        .as_deref()
        .and_then(Kind::from_name)
        .map_or("other", Kind::as_str);
    let outcome = match a.outcome {
        convert::Outcome::Converted => "allowed",
        convert::Outcome::Failed => "denied",
        convert::Outcome::Unreadable => "error",
    };
    if a.outcome != convert::Outcome::Converted {
        let message = a
            .review
            .response
            .as_ref()
            .map(|r| r.result.message.clone())
            .unwrap_or_default();
        tracing::warn!(kind, message = %message, "conversion refused");
    }
    s.metrics.webhook("convert", kind, outcome, start.elapsed());
    json(&a.review)
}

async fn admission(s: Arc<AppState>, kind: Kind, mode: Mode, body: Bytes) -> Response {
    let start = Instant::now();
    let (review, outcome) = admit(&s, kind, mode, &body).await;
    s.metrics
        .webhook(mode.as_str(), kind.as_str(), outcome, start.elapsed());
    json(&wire(&review))
}

/// The review as the admission API documents it: `response.patch` is a
/// `[]byte`, base64 in JSON (kube's type writes an array of numbers, which
/// Go's decoder also reads).
pub fn wire(review: &AdmissionReview<DynamicObject>) -> serde_json::Value {
    let mut v = serde_json::to_value(review).unwrap_or_default();
    if let Some(p) = v.pointer_mut("/response/patch")
        && let Some(items) = p.as_array()
    {
        let bytes: Vec<u8> = items
            .iter()
            .filter_map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect();
        *p = serde_json::to_value(k8s_openapi::ByteString(bytes)).unwrap_or_default();
    }
    v
}

fn unreadable(message: String) -> (AdmissionReview<DynamicObject>, &'static str) {
    tracing::warn!(message = %message, "unreadable admission request");
    let mut r = AdmissionResponse::invalid(message);
    r.result.code = 400;
    (r.into_review(), "error")
}

/// [`lookup::proxmox_cluster`] holding one of the [`LOOKUPS_AT_ONCE`]
/// permits.
async fn lookup_bounded(
    s: &AppState,
    namespace: &str,
    cluster: &str,
) -> Result<Option<crate::api::ProxmoxClusterSpec>, kube::Error> {
    // The semaphore is never closed, so a permit always comes.
    let _permit = s.lookups.acquire().await.ok();
    lookup::proxmox_cluster(&s.kube, namespace, cluster).await
}

async fn admit(
    s: &AppState,
    kind: Kind,
    mode: Mode,
    body: &[u8],
) -> (AdmissionReview<DynamicObject>, &'static str) {
    // The objects are read without their managed fields (`Reviewed`).
    let review: AdmissionReview<Reviewed> = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return unreadable(format!("cannot read the AdmissionReview: {e}")),
    };
    let req: AdmissionRequest<Reviewed> = match review.try_into() {
        Ok(r) => r,
        Err(e) => return unreadable(e.to_string()),
    };
    if req.kind.kind != kind.as_str() {
        return unreadable(format!(
            "this webhook serves {}, not {}",
            kind.as_str(),
            req.kind.kind
        ));
    }
    let (object, old) = (
        req.object.as_ref().map(|o| &o.json),
        req.old_object.as_ref().map(|o| &o.json),
    );
    let request = decide::Request {
        kind,
        operation: &req.operation,
        object,
        old_object: old,
        dry_run: req.dry_run,
    };
    let namespace = req.namespace.clone().unwrap_or_default();
    let response = AdmissionResponse::from(&req);
    match mode {
        Mode::Mutate => {
            let patch = object
                .map(|o| decide::defaults(kind, o))
                .unwrap_or_default();
            if patch.0.is_empty() {
                return (response.into_review(), "allowed");
            }
            tracing::debug!(kind = kind.as_str(), namespace = %namespace, name = %req.name, patch = ?patch, "defaults added");
            match response.with_patch(patch) {
                Ok(r) => (r.into_review(), "patched"),
                Err(e) => unreadable(e.to_string()),
            }
        }
        Mode::Validate => {
            let mut warnings = Vec::new();
            let cluster = match decide::cluster_to_read(&request) {
                Some(name) => match lookup_bounded(s, &namespace, &name).await {
                    Ok(c) => c,
                    Err(e) => {
                        tracing::warn!(error = %e, cluster = %name, "cannot read the machine's cluster; its checks are left to the controller");
                        warnings.push(format!(
                            "the checks against Cluster {name:?} were skipped (cannot read it: {e}); the controller makes them before any Proxmox call"
                        ));
                        None
                    }
                },
                None => None,
            };
            let verdict = match decide::validate(&request, cluster.as_ref()) {
                Ok(v) => v,
                Err(e) => return unreadable(e.to_string()),
            };
            warnings.extend(verdict.warnings);
            let mut response = response;
            if !warnings.is_empty() {
                response.warnings = Some(warnings);
            }
            if verdict.problems.is_empty() {
                tracing::debug!(kind = kind.as_str(), namespace = %namespace, name = %req.name, operation = ?req.operation, "admitted");
                return (response.into_review(), "allowed");
            }
            let status = refusal(kind, &req.name, &verdict.problems);
            tracing::info!(
                kind = kind.as_str(),
                namespace = %namespace,
                name = %req.name,
                operation = ?req.operation,
                dry_run = req.dry_run,
                problems = %status.message,
                "admission refused"
            );
            let mut response = response.deny(&status.message);
            response.result = status;
            (response.into_review(), "denied")
        }
    }
}

/// The `Status` of a refusal, as apimachinery's `NewInvalid` builds it:
/// `422 Invalid`, message `<Kind>.<group> "<name>" is invalid: <path>: <what>`
/// (several in `[...]`), one cause per problem with its field path.
pub fn refusal(kind: Kind, name: &str, problems: &[Problem]) -> Status {
    let list: Vec<String> = problems.iter().map(|p| p.error.to_string()).collect();
    let joined = match list.as_slice() {
        [one] => one.clone(),
        _ => format!("[{}]", list.join(", ")),
    };
    let causes = problems
        .iter()
        .map(|Problem { reason, error }| {
            let FieldError { path, message } = error;
            StatusCause {
                reason: reason.as_str().to_string(),
                message: message.clone(),
                field: path.clone(),
            }
        })
        .collect();
    Status::failure(
        &format!("{}.{GROUP} \"{name}\" is invalid: {joined}", kind.as_str()),
        "Invalid",
    )
    .with_code(422)
    .with_details(StatusDetails {
        name: name.to_string(),
        group: GROUP.to_string(),
        kind: kind.as_str().to_string(),
        uid: String::new(),
        causes,
        retry_after_seconds: 0,
    })
}
