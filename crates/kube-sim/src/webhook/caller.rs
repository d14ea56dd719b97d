//! The HTTPS client that calls webhooks, on a thread of its own with a
//! single-threaded Tokio runtime: the engine's writes are synchronous (they
//! run on a blocking thread when webhooks may be called), so a call is a job
//! sent to that thread and a blocking wait for its answer. The thread never
//! waits on the caller's runtime, so a webhook server in the same process
//! (tests) is never starved by the call waiting for it.
//!
//! Like kube-apiserver, it verifies the server certificate against the
//! configuration's `caBundle` only (no system roots), names a Service as
//! `https://<name>.<namespace>.svc:<port><path>` (the serving certificate
//! must carry that DNS name), and appends `?timeout=<n>s`. There are no
//! Services or endpoints here: [`Caller::route_service`] says which local
//! address a Service's port reaches.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

/// Where a webhook is reached (`clientConfig` of a webhook configuration or a
/// CRD's conversion webhook).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `clientConfig.url`.
    Url(String),
    /// `clientConfig.service`.
    Service {
        /// Service namespace.
        namespace: String,
        /// Service name.
        name: String,
        /// URL path (`/` when absent).
        path: String,
        /// Service port (443 when absent).
        port: u16,
    },
}

/// A webhook's `clientConfig`: where, and the CA certificates (PEM) that
/// must have signed its serving certificate.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientConfig {
    /// Where.
    pub endpoint: Endpoint,
    /// `caBundle`, decoded from base64 (PEM).
    pub ca_bundle: Vec<u8>,
}

impl ClientConfig {
    /// Parses `clientConfig` (`url` or `service`, `caBundle` in base64).
    ///
    /// # Errors
    /// A message naming what is wrong (both or neither of `url`/`service`,
    /// `caBundle` not base64).
    pub fn parse(v: &serde_json::Value) -> Result<ClientConfig, String> {
        use base64::Engine as _;
        let url = v.get("url").and_then(serde_json::Value::as_str);
        let service = v.get("service").filter(|s| s.is_object());
        let endpoint = match (url, service) {
            (Some(u), None) => Endpoint::Url(u.to_string()),
            (None, Some(s)) => {
                let field = |k: &str| {
                    s.get(k)
                        .and_then(serde_json::Value::as_str)
                        .unwrap_or("")
                        .to_string()
                };
                let port = s
                    .get("port")
                    .and_then(serde_json::Value::as_u64)
                    .unwrap_or(443);
                Endpoint::Service {
                    namespace: field("namespace"),
                    name: field("name"),
                    path: Some(field("path"))
                        .filter(|p| !p.is_empty())
                        .unwrap_or_else(|| "/".to_string()),
                    port: u16::try_from(port)
                        .map_err(|_| format!("service.port {port} is not a port"))?,
                }
            }
            (Some(_), Some(_)) => {
                return Err("exactly one of url or service is required, not both".into());
            }
            (None, None) => return Err("exactly one of url or service is required".into()),
        };
        let ca_bundle = match v.get("caBundle").and_then(serde_json::Value::as_str) {
            None | Some("") => Vec::new(),
            Some(b) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map_err(|e| format!("caBundle is not base64: {e}"))?,
        };
        Ok(ClientConfig {
            endpoint,
            ca_bundle,
        })
    }

    /// The URL kube-apiserver would post to (for messages).
    pub fn display_url(&self, timeout: Duration) -> String {
        let t = timeout.as_secs();
        match &self.endpoint {
            Endpoint::Url(u) => format!("{u}?timeout={t}s"),
            Endpoint::Service {
                namespace,
                name,
                path,
                port,
            } => format!("https://{name}.{namespace}.svc:{port}{path}?timeout={t}s"),
        }
    }
}

type Routes = HashMap<(String, String, u16), SocketAddr>;

/// A client per CA bundle and name override.
type Clients = HashMap<(Vec<u8>, Option<(String, SocketAddr)>), reqwest::Client>;

struct Job {
    config: ClientConfig,
    body: Vec<u8>,
    timeout: Duration,
    reply: std::sync::mpsc::Sender<Result<Vec<u8>, String>>,
}

/// The webhook client (see the module docs). Dropping the last handle ends
/// its thread.
pub struct Caller {
    jobs: mpsc::UnboundedSender<Job>,
    routes: Arc<Mutex<Routes>>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller").finish_non_exhaustive()
    }
}

impl Caller {
    /// Starts the client thread. Errors: the thread or its runtime cannot start.
    pub fn start() -> std::io::Result<Arc<Caller>> {
        let (jobs, rx) = mpsc::unbounded_channel();
        let routes: Arc<Mutex<Routes>> = Arc::default();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread_routes = routes.clone();
        std::thread::Builder::new()
            .name("kube-sim-webhooks".into())
            .spawn(move || rt.block_on(run(rx, thread_routes)))?;
        Ok(Arc::new(Caller { jobs, routes }))
    }

    /// Makes Service `namespace/name`'s `port` reach `addr` (what an
    /// Endpoints object does in a cluster); replaces an earlier route.
    pub fn route_service(&self, namespace: &str, name: &str, port: u16, addr: SocketAddr) {
        self.routes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert((namespace.to_string(), name.to_string(), port), addr);
    }

    /// POSTs `body` (JSON) to the webhook and waits for the response body
    /// (blocking the calling thread; call from a blocking context).
    ///
    /// # Errors
    /// kube-apiserver's wording: `Post "<url>": <why>` for transport errors
    /// and timeouts, `... : <status>` for a non-2xx answer.
    pub fn post(
        &self,
        config: &ClientConfig,
        body: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.jobs
            .send(Job {
                config: config.clone(),
                body,
                timeout,
                reply,
            })
            .map_err(|_| "the webhook client is stopped".to_string())?;
        answer
            .recv()
            .map_err(|_| "the webhook client is stopped".to_string())?
    }
}

async fn run(mut rx: mpsc::UnboundedReceiver<Job>, routes: Arc<Mutex<Routes>>) {
    let mut clients = Clients::new();
    while let Some(job) = rx.recv().await {
        let shown = job.config.display_url(job.timeout);
        let target = match &job.config.endpoint {
            Endpoint::Url(u) => Ok((u.clone(), None)),
            Endpoint::Service {
                namespace,
                name,
                path,
                port,
            } => {
                let addr = routes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .get(&(namespace.clone(), name.clone(), *port))
                    .copied();
                match addr {
                    Some(addr) => {
                        let host = format!("{name}.{namespace}.svc");
                        Ok((
                            format!("https://{host}:{}{path}", addr.port()),
                            Some((host, addr)),
                        ))
                    }
                    None => Err(format!(
                        "Post \"{shown}\": service \"{name}\" not found (no route: KubeSim::route_service)"
                    )),
                }
            }
        };
        let (url, resolve) = match target {
            Ok(t) => t,
            Err(e) => {
                let _ = job.reply.send(Err(e));
                continue;
            }
        };
        let key = (job.config.ca_bundle.clone(), resolve.clone());
        let client = match clients.get(&key) {
            Some(c) => c.clone(),
            None => match build_client(&job.config.ca_bundle, resolve.as_ref()) {
                Ok(c) => {
                    clients.insert(key, c.clone());
                    c
                }
                Err(e) => {
                    let _ = job.reply.send(Err(format!("Post \"{shown}\": {e}")));
                    continue;
                }
            },
        };
        tokio::spawn(async move {
            let url = format!("{url}?timeout={}s", job.timeout.as_secs());
            let result = call(&client, &url, job.body, job.timeout)
                .await
                .map_err(|e| format!("Post \"{shown}\": {e}"));
            let _ = job.reply.send(result);
        });
    }
}

fn build_client(
    ca_bundle: &[u8],
    resolve: Option<&(String, SocketAddr)>,
) -> Result<reqwest::Client, String> {
    let certs = if ca_bundle.is_empty() {
        Vec::new()
    } else {
        reqwest::Certificate::from_pem_bundle(ca_bundle).map_err(|e| format!("caBundle: {e}"))?
    };
    let mut b = reqwest::Client::builder().no_proxy().tls_certs_only(certs);
    if let Some((host, addr)) = resolve {
        b = b.resolve(host, *addr);
    }
    b.build().map_err(|e| e.to_string())
}

/// The error and its sources, as one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

async fn call(
    client: &reqwest::Client,
    url: &str,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let resp = client
        .post(url)
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .timeout(timeout)
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_timeout() {
                "context deadline exceeded".to_string()
            } else {
                chain(&e)
            }
        })?;
    let status = resp.status();
    let bytes = resp.bytes().await.map_err(|e| chain(&e))?;
    if !status.is_success() {
        return Err(format!(
            "the server responded with {status}: {}",
            String::from_utf8_lossy(&bytes)
                .chars()
                .take(200)
                .collect::<String>()
        ));
    }
    Ok(bytes.to_vec())
}
