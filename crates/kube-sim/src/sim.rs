//! The public handle: [`KubeSim`] starts the server in-process on `127.0.0.1` over HTTPS
//! and hands out client configuration.

use crate::engine::{Engine, Target, WriteOptions};
use crate::error::KubeSimError;
use crate::http::{self, App};
use axum_server::tls_rustls::RustlsConfig;
use serde_json::Value;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Options for [`KubeSim::start`].
#[derive(Clone)]
pub struct KubeSimOptions {
    /// The bearer token clients must send; `None` generates a random one.
    pub token: Option<String>,
    /// Directories whose `*.yaml`/`*.yml`/`*.json` CRDs are installed at start
    /// (e.g. `config/crd/bases`).
    pub crd_dirs: Vec<PathBuf>,
    /// TCP port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Watch events kept per resource for watches that resume from a
    /// `resourceVersion` (older versions answer `410 Gone`). Default 4096.
    pub watch_history: usize,
    /// Interval between `BOOKMARK` events on watches that allow them. Default 10 s.
    pub bookmark_interval: Duration,
}

impl Default for KubeSimOptions {
    fn default() -> Self {
        KubeSimOptions {
            token: None,
            crd_dirs: Vec::new(),
            port: 0,
            watch_history: 4096,
            bookmark_interval: Duration::from_secs(10),
        }
    }
}

impl std::fmt::Debug for KubeSimOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSimOptions")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("crd_dirs", &self.crd_dirs)
            .field("port", &self.port)
            .field("watch_history", &self.watch_history)
            .field("bookmark_interval", &self.bookmark_interval)
            .finish()
    }
}

/// A running in-memory Kubernetes API server.
///
/// Dropping it stops the server (as [`KubeSim::shutdown`] does, without waiting).
pub struct KubeSim {
    addr: SocketAddr,
    ca_pem: String,
    ca_der: Vec<u8>,
    token: String,
    engine: Arc<Engine>,
    handle: axum_server::Handle<SocketAddr>,
    serve: Option<JoinHandle<()>>,
    gc: JoinHandle<()>,
}

impl std::fmt::Debug for KubeSim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeSim")
            .field("addr", &self.addr)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

fn crd_error(name: &str, message: impl Into<String>) -> KubeSimError {
    KubeSimError::InvalidCrd {
        name: name.to_string(),
        message: message.into(),
    }
}

impl KubeSim {
    /// Starts a server on `127.0.0.1:<port>` (0: any free port) with a fresh CA, the
    /// built-in kinds and the CRDs of `opts.crd_dirs`.
    ///
    /// Errors: [`KubeSimError::Bind`], [`KubeSimError::Tls`], and the errors of
    /// [`KubeSim::install_crds_from_dir`].
    pub async fn start(opts: KubeSimOptions) -> Result<KubeSim, KubeSimError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let token = opts
            .token
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
        let caller = crate::webhook::Caller::start().map_err(KubeSimError::WebhookClient)?;
        let engine = Engine::new(opts.watch_history, caller);
        let bind: SocketAddr = (Ipv4Addr::LOCALHOST, opts.port).into();
        let bind_err = |source| KubeSimError::Bind { addr: bind, source };
        let listener = std::net::TcpListener::bind(bind).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let certs = crate::tls::generate(&[])?;
        let app = Arc::new(App::new(
            engine.clone(),
            token.clone(),
            addr.to_string(),
            opts.bookmark_interval,
        ));
        let handle = axum_server::Handle::new();
        let server =
            axum_server::from_tcp_rustls(listener, RustlsConfig::from_config(certs.server_config))
                .map_err(bind_err)?
                .handle(handle.clone());
        // many watches may share one HTTP/2 connection (kube-apiserver allows 250)
        let mut server = server;
        server.http_builder().http2().max_concurrent_streams(1000);
        let router = http::router(app);
        let serve = tokio::spawn(async move {
            if let Err(e) = server.serve(router.into_make_service()).await {
                tracing::error!(error = %e, "kube-sim server stopped");
            }
        });
        let gc = tokio::spawn(crate::gc::run(engine.clone()));
        let sim = KubeSim {
            addr,
            ca_pem: certs.ca_pem,
            ca_der: certs.ca_der,
            token,
            engine,
            handle,
            serve: Some(serve),
            gc,
        };
        for dir in &opts.crd_dirs {
            sim.install_crds_from_dir(dir)?;
        }
        Ok(sim)
    }

    /// The server URL, `https://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> String {
        self.ca_pem.clone()
    }

    /// The bearer token clients must send.
    pub fn token(&self) -> String {
        self.token.clone()
    }

    /// A `kube::Config` for this server (CA pinned, token set, namespace `default`),
    /// ready for `kube::Client::try_from`.
    pub fn kube_config(&self) -> kube::Config {
        crate::kubeconfig::kube_config(&self.url(), &self.ca_der, &self.token)
    }

    /// A `kube::Client` for this server. Errors: [`KubeSimError::Client`].
    pub async fn client(&self) -> Result<kube::Client, KubeSimError> {
        kube::Client::try_from(self.kube_config()).map_err(KubeSimError::Client)
    }

    /// Makes port `port` of Service `namespace/name` reach `addr`, for the
    /// webhooks whose `clientConfig.service` names it (kube-sim has no
    /// Services or endpoints; in a cluster the Service would route to the
    /// pod). The webhook's serving certificate must still carry the
    /// Service's DNS name `<name>.<namespace>.svc`, as kube-apiserver
    /// verifies it. A later call for the same Service port replaces the route.
    pub fn route_service(&self, namespace: &str, name: &str, port: u16, addr: SocketAddr) {
        self.engine
            .caller()
            .route_service(namespace, name, port, addr);
    }

    /// Writes a kubeconfig file (mode 0600; it holds the token) with context `kube-sim`.
    /// Errors: [`KubeSimError::Io`].
    pub fn write_kubeconfig(&self, path: &Path) -> Result<(), KubeSimError> {
        crate::kubeconfig::write(path, &self.url(), &self.ca_pem, &self.token)
    }

    /// Installs (or updates) the `CustomResourceDefinition`s of a YAML stream
    /// (multi-document; JSON works too). Other kinds are refused.
    ///
    /// Errors: [`KubeSimError::Parse`] for bad YAML, [`KubeSimError::InvalidCrd`] for
    /// a document that is not a valid CRD (the checks of `POST` on CRDs).
    pub fn install_crd_yaml(&self, yaml: &str) -> Result<(), KubeSimError> {
        self.install_documents(yaml, "CRD YAML").map(|_| ())
    }

    fn install_documents(&self, yaml: &str, what: &str) -> Result<usize, KubeSimError> {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(yaml).map_err(|e| KubeSimError::Parse {
                what: what.to_string(),
                message: e.to_string(),
            })?;
        let mut n = 0;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            self.install_crd(doc)?;
            n += 1;
        }
        Ok(n)
    }

    fn install_crd(&self, doc: Value) -> Result<(), KubeSimError> {
        let name = crate::json::name(&doc).to_string();
        if doc.get("kind").and_then(Value::as_str) != Some("CustomResourceDefinition") {
            return Err(crd_error(
                &name,
                "the document is not a CustomResourceDefinition",
            ));
        }
        let rt = self
            .engine
            .resolve("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .ok_or_else(|| crd_error(&name, "CRD API not served"))?;
        let t = Target {
            rt,
            version: "v1".into(),
            namespace: None,
        };
        let opts = WriteOptions {
            default_manager: "kube-sim".into(),
            ..WriteOptions::default()
        };
        match self.engine.create(&t, doc.clone(), &opts) {
            Ok(_) => Ok(()),
            Err(e) if e.reason == "AlreadyExists" => {
                let cur = self
                    .engine
                    .get(&t, &name)
                    .map_err(|e| crd_error(&name, e.message))?;
                let mut doc = doc;
                crate::json::meta_mut(&mut doc).insert(
                    "resourceVersion".into(),
                    Value::String(crate::json::resource_version(&cur).to_string()),
                );
                self.engine
                    .update(&t, &name, doc, crate::engine::Subresource::Main, &opts)
                    .map(|_| ())
                    .map_err(|e| crd_error(&name, e.message))
            }
            Err(e) => Err(crd_error(&name, e.message)),
        }
    }

    /// Installs the CRDs of every `*.yaml`, `*.yml` and `*.json` file of a directory (in
    /// file-name order); returns how many were installed.
    ///
    /// Errors: [`KubeSimError::Io`], [`KubeSimError::Parse`],
    /// [`KubeSimError::InvalidCrd`].
    pub fn install_crds_from_dir(&self, dir: &Path) -> Result<usize, KubeSimError> {
        let io = |source| KubeSimError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                p.extension()
                    .and_then(|e| e.to_str())
                    .is_some_and(|e| matches!(e, "yaml" | "yml" | "json"))
            })
            .collect();
        files.sort();
        let mut n = 0;
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(|source| KubeSimError::Io {
                path: f.clone(),
                source,
            })?;
            n += self.install_documents(&text, &f.display().to_string())?;
        }
        Ok(n)
    }

    /// Stops the server and the garbage collector and waits for the listener to close.
    pub async fn shutdown(mut self) {
        self.handle.shutdown();
        self.gc.abort();
        if let Some(t) = self.serve.take() {
            let _ = t.await;
        }
    }
}

impl Drop for KubeSim {
    fn drop(&mut self) {
        self.handle.shutdown();
        self.gc.abort();
    }
}
