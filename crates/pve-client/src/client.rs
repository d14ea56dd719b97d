//! [`PveClient`]: one Proxmox VE cluster's API over HTTPS.
//!
//! The request core (`PveClient::call`) adds authentication, encodes the
//! parameters ([`crate::encode`]), applies the per-call timeout, unwraps the
//! `{"data": …}` envelope, classifies errors ([`crate::error`]), traces every
//! request (span `pve_call` with `instance`, `method`, `path`, `status`,
//! `duration_ms`) and reports it to the [`CallObserver`].
//!
//! Invariants:
//! - The token secret, password, ticket and CSRF token only ever live in
//!   [`Secret`]s or in header values marked sensitive; neither `Debug` output
//!   nor logs nor errors contain them.
//! - Idempotent GETs are retried **once** when the connection broke (pveproxy
//!   closes connections after error responses and after ~5 s idle); nothing
//!   else is retried here. The connection pool drops idle connections after
//!   3 s so it rarely hands out one the server already closed.
//! - With ticket auth, a 401 triggers one fresh login and one retry.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Method;
use reqwest::header::{HeaderMap, HeaderValue};
use serde::de::DeserializeOwned;
use tracing::Instrument;

use crate::config::{ApiUrl, Auth, ClientConfig, TlsMode};
use crate::encode::{Form, encode_component};
use crate::error::{CallContext, PveError, TransientCause, classify_response};
use crate::observer::{CallObserver, CallRecord};
use crate::secret::Secret;

/// Idle pooled connections are dropped after this (pveproxy closes idle
/// connections after ~5 s).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// TCP connect timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Tickets are valid for 2 h; log in again after this.
const TICKET_RENEW_AFTER: Duration = Duration::from_secs(90 * 60);
/// The ticket login endpoint.
const LOGIN_PATH: &str = "/access/ticket";

/// A typed client for one Proxmox VE cluster. Cheap to clone (shares the
/// connection pool); safe to use from many tasks at once.
///
/// The API methods live in [`crate::api`], grouped by area; each documents the
/// path, the units and the errors it returns. Every method can fail with the
/// transport errors [`PveError::Tls`], [`PveError::Transient`] (timeouts,
/// connection failures, 5xx), [`PveError::Unauthorized`],
/// [`PveError::PermissionDenied`] and [`PveError::NodeUnreachable`]; those are
/// not repeated on each method.
#[derive(Clone)]
pub struct PveClient {
    inner: Arc<Inner>,
    observer: Option<Arc<dyn CallObserver>>,
    timeout: Duration,
}

struct Inner {
    instance: String,
    url: ApiUrl,
    http: reqwest::Client,
    auth: AuthState,
    tls_mode: &'static str,
}

enum AuthState {
    Token {
        header: HeaderValue,
    },
    Ticket {
        username: String,
        password: Secret,
        session: tokio::sync::Mutex<Option<TicketSession>>,
    },
}

#[derive(Clone)]
struct TicketSession {
    cookie: HeaderValue,
    csrf: HeaderValue,
    obtained: Instant,
}

impl fmt::Debug for PveClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let auth = match &self.inner.auth {
            AuthState::Token { .. } => "token".to_owned(),
            AuthState::Ticket { username, .. } => format!("ticket({username})"),
        };
        f.debug_struct("PveClient")
            .field("instance", &self.inner.instance)
            .field("url", &self.inner.url.origin())
            .field("auth", &auth)
            .field("tls", &self.inner.tls_mode)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// Parameters of one API call, built by the `api` modules.
pub(crate) struct Call {
    pub(crate) method: Method,
    /// Path template for traces and call records, e.g.
    /// `/nodes/{node}/qemu/{vmid}/config`.
    pub(crate) template: &'static str,
    /// Concrete path below `/api2/json`, segments already percent-encoded.
    pub(crate) path: String,
    pub(crate) query: Form,
    pub(crate) body: Body,
    /// Send authentication (false only for the ticket login itself).
    pub(crate) authenticate: bool,
}

pub(crate) enum Body {
    None,
    Form(Form),
    Multipart(Option<reqwest::multipart::Form>),
}

impl Call {
    pub(crate) fn new(method: Method, template: &'static str, path: String) -> Self {
        Self {
            method,
            template,
            path,
            query: Form::new(),
            body: Body::None,
            authenticate: true,
        }
    }

    pub(crate) fn get(template: &'static str, path: String) -> Self {
        Self::new(Method::GET, template, path)
    }

    pub(crate) fn post(template: &'static str, path: String, form: Form) -> Self {
        let mut c = Self::new(Method::POST, template, path);
        c.body = Body::Form(form);
        c
    }

    pub(crate) fn put(template: &'static str, path: String, form: Form) -> Self {
        let mut c = Self::new(Method::PUT, template, path);
        c.body = Body::Form(form);
        c
    }

    pub(crate) fn delete(template: &'static str, path: String, query: Form) -> Self {
        let mut c = Self::new(Method::DELETE, template, path);
        c.query = query;
        c
    }

    pub(crate) fn with_query(mut self, query: Form) -> Self {
        self.query = query;
        self
    }
}

/// Percent-encodes one path segment (node, storage, UPID, volume id).
pub(crate) fn seg(s: &str) -> String {
    encode_component(s)
}

/// Outcome of one HTTP attempt before classification.
enum Attempt {
    Done(Vec<u8>),
    Failed(PveError),
}

#[derive(serde::Deserialize)]
struct Envelope<T> {
    data: T,
}

#[derive(serde::Deserialize)]
struct TicketData {
    ticket: String,
    #[serde(rename = "CSRFPreventionToken")]
    csrf: String,
}

impl PveClient {
    /// Builds a client (no request is made).
    ///
    /// # Errors
    /// [`PveError::InvalidConfig`] when the CA bundle is not valid PEM, no
    /// trust roots are available, the fingerprint list is empty, or the HTTP
    /// client cannot be built.
    pub fn new(config: ClientConfig) -> Result<Self, PveError> {
        crate::tls::install_ring_provider();
        let instance = config.instance;
        let invalid = |message: String| PveError::InvalidConfig {
            instance: instance.clone(),
            message,
        };
        let tls = crate::tls::client_config(&config.tls).map_err(&invalid)?;
        let tls_mode = match &config.tls {
            TlsMode::Verify { ca_pem: Some(_) } => "verify(ca bundle + system roots)",
            TlsMode::Verify { ca_pem: None } => "verify(system roots)",
            TlsMode::Fingerprints(_) => "fingerprints",
            TlsMode::Insecure => "insecure",
        };
        if matches!(config.tls, TlsMode::Insecure) {
            tracing::warn!(instance = %instance, url = %config.url, "TLS certificate verification is disabled (insecure)");
        }
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .http1_only()
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .user_agent(concat!("capmox-pve-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| invalid(format!("cannot build HTTP client: {e}")))?;
        let auth = match config.auth {
            Auth::Token { token_id, secret } => {
                let value = format!("PVEAPIToken={}={}", token_id.as_str(), secret.expose());
                let mut header = HeaderValue::from_str(&value).map_err(|_| {
                    invalid(
                        "API token id or secret contains characters not allowed in an HTTP header"
                            .into(),
                    )
                })?;
                header.set_sensitive(true);
                AuthState::Token { header }
            }
            Auth::Ticket { username, password } => {
                if username.trim().is_empty() || !username.contains('@') {
                    return Err(invalid(
                        "ticket auth needs a username of the form user@realm".into(),
                    ));
                }
                AuthState::Ticket {
                    username,
                    password,
                    session: tokio::sync::Mutex::new(None),
                }
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                instance,
                url: config.url,
                http,
                auth,
                tls_mode,
            }),
            observer: None,
            timeout: config.timeout,
        })
    }

    /// The same client reporting every request to `observer`.
    pub fn with_observer(mut self, observer: Arc<dyn CallObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The same client (same connections) with another per-call timeout, for
    /// calls that legitimately take longer (uploads) or should fail faster
    /// (health probes).
    pub fn with_timeout(&self, timeout: Duration) -> Self {
        Self {
            inner: self.inner.clone(),
            observer: self.observer.clone(),
            timeout,
        }
    }

    /// The instance name this client was configured with.
    pub fn instance(&self) -> &str {
        &self.inner.instance
    }

    /// The API URL (`https://host:port`).
    pub fn url(&self) -> &ApiUrl {
        &self.inner.url
    }

    /// The per-call timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub(crate) fn ctx(&self, method: &Method, path: &str) -> Box<CallContext> {
        Box::new(CallContext {
            instance: self.inner.instance.clone(),
            method: method_str(method),
            path: path.to_owned(),
        })
    }

    pub(crate) fn invalid_request(&self, message: impl Into<String>) -> PveError {
        PveError::InvalidRequest {
            instance: self.inner.instance.clone(),
            message: message.into(),
        }
    }

    /// Runs a call and decodes `data` as `T`.
    pub(crate) async fn call<T: DeserializeOwned>(&self, call: Call) -> Result<T, PveError> {
        let ctx = self.ctx(&call.method, &call.path);
        let body = self.execute(call).await?;
        decode_envelope(ctx, &body)
    }

    /// Runs a call and decodes the whole body (for responses with fields next
    /// to `data`, like the task log's `total`).
    pub(crate) async fn call_raw<T: DeserializeOwned>(&self, call: Call) -> Result<T, PveError> {
        let ctx = self.ctx(&call.method, &call.path);
        let body = self.execute(call).await?;
        serde_json::from_slice(&body).map_err(|e| PveError::Decode {
            ctx,
            message: format!("cannot decode response: {e}"),
        })
    }

    /// Runs a call: retries a GET once on a broken connection and, with ticket
    /// auth, logs in again once on 401. Returns the body of a 2xx response.
    async fn execute(&self, mut call: Call) -> Result<Vec<u8>, PveError> {
        let span = tracing::debug_span!(
            "pve_call",
            instance = %self.inner.instance,
            method = method_str(&call.method),
            path = call.template,
            status = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        async move {
            let started = Instant::now();
            let mut retried_connection = false;
            let mut relogged = false;
            let result = loop {
                match self.attempt(&mut call).await {
                    Attempt::Done(body) => break Ok(body),
                    Attempt::Failed(PveError::Transient {
                        cause: TransientCause::ConnectionLost,
                        message,
                        ..
                    }) if call.method == Method::GET && !retried_connection => {
                        tracing::debug!(error = %message, "connection lost; retrying the GET once");
                        retried_connection = true;
                    }
                    Attempt::Failed(PveError::Unauthorized { ctx, .. })
                        if call.authenticate
                            && ctx.path != LOGIN_PATH
                            && !relogged
                            && self.is_ticket()
                            && !matches!(call.body, Body::Multipart(None)) =>
                    {
                        tracing::debug!("401 with ticket auth; logging in again");
                        self.drop_session().await;
                        relogged = true;
                    }
                    Attempt::Failed(e) => break Err(e),
                }
            };
            let span = tracing::Span::current();
            span.record("duration_ms", started.elapsed().as_millis() as u64);
            result
        }
        .instrument(span)
        .await
    }

    fn is_ticket(&self) -> bool {
        matches!(self.inner.auth, AuthState::Ticket { .. })
    }

    async fn drop_session(&self) {
        if let AuthState::Ticket { session, .. } = &self.inner.auth {
            *session.lock().await = None;
        }
    }

    /// One authenticated HTTP request.
    async fn attempt(&self, call: &mut Call) -> Attempt {
        match self.auth_headers(call).await {
            Ok(headers) => self.attempt_with(call, headers).await,
            Err(e) => Attempt::Failed(e),
        }
    }

    /// One HTTP request with the given extra headers. Reports to the observer
    /// and the trace.
    async fn attempt_with(&self, call: &mut Call, headers: HeaderMap) -> Attempt {
        let ctx = self.ctx(&call.method, &call.path);
        let mut url = format!("{}{}", self.inner.url.api_base(), call.path);
        if !call.query.is_empty() {
            url.push('?');
            url.push_str(&call.query.encode());
        }
        let mut req = self
            .inner
            .http
            .request(call.method.clone(), &url)
            .headers(headers)
            .timeout(self.timeout);
        match &mut call.body {
            Body::None => {}
            Body::Form(form) => {
                req = req
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        "application/x-www-form-urlencoded",
                    )
                    .body(form.encode());
            }
            Body::Multipart(form) => {
                match form.take() {
                    Some(f) => req = req.multipart(f),
                    None => {
                        return Attempt::Failed(self.invalid_request(
                            "multipart body already sent; uploads are not retried",
                        ));
                    }
                }
            }
        }

        let started = Instant::now();
        let outcome = self.send(ctx, req).await;
        let duration = started.elapsed();
        let (status, category) = match &outcome {
            Ok((status, _)) => (Some(*status), None),
            Err((status, e)) => (*status, Some(e.category())),
        };
        let span = tracing::Span::current();
        if let Some(s) = status {
            span.record("status", s);
        }
        tracing::debug!(
            instance = %self.inner.instance,
            method = method_str(&call.method),
            path = call.template,
            status = status.unwrap_or(0),
            duration_ms = duration.as_millis() as u64,
            error = category.unwrap_or(""),
            "pve api call"
        );
        if let Some(obs) = &self.observer {
            obs.on_call(&CallRecord {
                instance: &self.inner.instance,
                method: method_str(&call.method),
                path_template: call.template,
                status,
                duration,
                error_category: category,
            });
        }
        match outcome {
            Ok((_, body)) => Attempt::Done(body),
            Err((_, e)) => Attempt::Failed(e),
        }
    }

    /// Sends and reads the whole response. On failure returns the HTTP status
    /// (if a response arrived) with the classified error.
    async fn send(
        &self,
        ctx: Box<CallContext>,
        req: reqwest::RequestBuilder,
    ) -> Result<(u16, Vec<u8>), (Option<u16>, PveError)> {
        let resp = req
            .send()
            .await
            .map_err(|e| (None, self.transport_error(ctx.clone(), &e)))?;
        let status = resp.status().as_u16();
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned());
        let body = resp
            .bytes()
            .await
            .map_err(|e| (Some(status), self.transport_error(ctx.clone(), &e)))?;
        if (200..300).contains(&status) {
            Ok((status, body.to_vec()))
        } else {
            Err((
                Some(status),
                classify_response(*ctx, status, reason.as_deref(), &body),
            ))
        }
    }

    /// Maps a reqwest error to TLS / timeout / connection errors.
    fn transport_error(&self, ctx: Box<CallContext>, e: &reqwest::Error) -> PveError {
        if let Some(tls) = find_rustls_error(e) {
            return PveError::Tls {
                instance: self.inner.instance.clone(),
                url: self.inner.url.origin().to_owned(),
                message: tls,
            };
        }
        let chain = error_chain(e);
        if e.is_timeout() {
            return PveError::Transient {
                ctx,
                cause: TransientCause::Timeout,
                message: format!("no response within {:?} ({chain})", self.timeout),
            };
        }
        let cause = if e.is_connect() {
            TransientCause::ConnectFailed
        } else {
            TransientCause::ConnectionLost
        };
        PveError::Transient {
            ctx,
            cause,
            message: chain,
        }
    }

    async fn auth_headers(&self, call: &Call) -> Result<HeaderMap, PveError> {
        let mut h = HeaderMap::new();
        if !call.authenticate {
            return Ok(h);
        }
        match &self.inner.auth {
            AuthState::Token { header } => {
                h.insert(reqwest::header::AUTHORIZATION, header.clone());
            }
            AuthState::Ticket { .. } => {
                let s = self.session().await?;
                h.insert(reqwest::header::COOKIE, s.cookie);
                if call.method != Method::GET {
                    h.insert("CSRFPreventionToken", s.csrf);
                }
            }
        }
        Ok(h)
    }

    /// The current ticket, logging in when there is none or it is older than
    /// 90 minutes. Logins are serialised.
    async fn session(&self) -> Result<TicketSession, PveError> {
        let AuthState::Ticket {
            username,
            password,
            session,
        } = &self.inner.auth
        else {
            return Err(self.invalid_request("not using ticket auth"));
        };
        let mut guard = session.lock().await;
        if let Some(s) = guard
            .as_ref()
            .filter(|s| s.obtained.elapsed() < TICKET_RENEW_AFTER)
        {
            return Ok(s.clone());
        }
        let mut form = Form::new();
        form.push("username", username.clone())
            .push("password", password.expose());
        let mut call = Call::post(LOGIN_PATH, LOGIN_PATH.to_owned(), form);
        call.authenticate = false;
        let ctx = self.ctx(&call.method, &call.path);
        let body = match self.attempt_with(&mut call, HeaderMap::new()).await {
            Attempt::Done(b) => b,
            Attempt::Failed(e) => return Err(e),
        };
        let data: TicketData = serde_json::from_slice::<Envelope<Option<TicketData>>>(&body)
            .ok()
            .and_then(|e| e.data)
            .ok_or_else(|| PveError::Decode {
                ctx: ctx.clone(),
                message: "ticket response has no ticket".into(),
            })?;
        let header = |v: String| {
            HeaderValue::from_str(&v).map(|mut h| {
                h.set_sensitive(true);
                h
            })
        };
        let cookie =
            header(format!("PVEAuthCookie={}", encode_component(&data.ticket))).map_err(|_| {
                PveError::Decode {
                    ctx: ctx.clone(),
                    message: "ticket is not a valid header value".into(),
                }
            })?;
        let csrf = header(data.csrf).map_err(|_| PveError::Decode {
            ctx,
            message: "CSRF token is not a valid header value".into(),
        })?;
        let s = TicketSession {
            cookie,
            csrf,
            obtained: Instant::now(),
        };
        *guard = Some(s.clone());
        Ok(s)
    }
}

fn method_str(m: &Method) -> &'static str {
    match *m {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

fn decode_envelope<T: DeserializeOwned>(ctx: Box<CallContext>, body: &[u8]) -> Result<T, PveError> {
    serde_json::from_slice::<Envelope<T>>(body)
        .map(|e| e.data)
        .map_err(|e| PveError::Decode {
            ctx,
            message: format!("cannot decode response data: {e}"),
        })
}

/// Finds a rustls error in the source chain (tokio-rustls wraps it in an
/// `io::Error`, whose `source()` skips the wrapped error, so look inside).
fn find_rustls_error(e: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(r) = err.downcast_ref::<rustls::Error>() {
            return Some(r.to_string());
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
        {
            if let Some(r) = inner.downcast_ref::<rustls::Error>() {
                return Some(r.to_string());
            }
            if let Some(found) = find_rustls_error(inner) {
                return Some(found);
            }
        }
        cur = err.source();
    }
    None
}

/// `outer: inner: innermost`, skipping repeated texts.
fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        let text = err.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        cur = err.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ApiUrl, Auth};

    fn cfg(tls: TlsMode) -> ClientConfig {
        ClientConfig::new(
            "dc-a",
            ApiUrl::parse("https://127.0.0.1:8006").unwrap(),
            Auth::token("capmox@pve!capi", "5f0c9a2e-0000-4000-8000-00000000beef").unwrap(),
        )
        .with_tls(tls)
    }

    #[test]
    fn debug_output_hides_the_secret() {
        let c = PveClient::new(cfg(TlsMode::Insecure)).unwrap();
        let dbg = format!("{c:?}");
        assert!(!dbg.contains("5f0c9a2e"), "{dbg}");
        assert!(
            dbg.contains("dc-a") && dbg.contains("https://127.0.0.1:8006"),
            "{dbg}"
        );
        let cfg_dbg = format!("{:?}", cfg(TlsMode::Insecure));
        assert!(!cfg_dbg.contains("5f0c9a2e"), "{cfg_dbg}");
    }

    #[test]
    fn invalid_ca_bundle_is_a_config_error() {
        let e = PveClient::new(cfg(TlsMode::Verify {
            ca_pem: Some("garbage".into()),
        }))
        .unwrap_err();
        assert_eq!(e.category(), "invalid_config");
        assert!(
            e.to_string()
                .starts_with("dc-a: invalid client configuration:"),
            "{e}"
        );
    }

    #[test]
    fn with_timeout_shares_the_client() {
        let c = PveClient::new(cfg(TlsMode::Insecure)).unwrap();
        let d = c.with_timeout(Duration::from_secs(5));
        assert_eq!(d.timeout(), Duration::from_secs(5));
        assert_eq!(c.timeout(), crate::config::DEFAULT_TIMEOUT);
        assert!(Arc::ptr_eq(&c.inner, &d.inner));
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(
            seg("UPID:pve-a1:0000:x:y:qmclone:9000:capmox@pve!capi:"),
            "UPID%3Apve-a1%3A0000%3Ax%3Ay%3Aqmclone%3A9000%3Acapmox%40pve%21capi%3A"
        );
        assert_eq!(seg("nfs-iso:iso/seed.iso"), "nfs-iso%3Aiso%2Fseed.iso");
        assert_eq!(seg("pve-a1"), "pve-a1");
    }

    #[test]
    fn envelope_decoding() {
        let ctx = Box::new(CallContext {
            instance: "dc-a".into(),
            method: "GET",
            path: "/x".into(),
        });
        let v: Option<String> = decode_envelope(ctx.clone(), br#"{"data":null}"#).unwrap();
        assert_eq!(v, None);
        let v: u32 = decode_envelope(ctx.clone(), br#"{"data":105}"#).unwrap();
        assert_eq!(v, 105);
        let e = decode_envelope::<u32>(ctx, br#"{"data":null}"#).unwrap_err();
        assert_eq!(e.category(), "decode");
    }
}
