//! The crate's error type for starting and driving the simulator (not the HTTP errors it
//! answers with; those are [`crate::api_error::ApiError`], rendered as `metav1.Status`).

use std::net::SocketAddr;
use std::path::PathBuf;

/// Errors returned by [`crate::KubeSim`] entry points.
///
/// Messages never contain the bearer token.
#[derive(Debug, thiserror::Error)]
pub enum KubeSimError {
    /// Generating the CA or serving certificate, or building the rustls config, failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// The listening socket could not be bound.
    #[error("failed to bind {addr}: {source}")]
    Bind {
        /// The address that was tried.
        addr: SocketAddr,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Reading a CRD file or directory, or writing a kubeconfig, failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A YAML or JSON document could not be parsed.
    #[error("cannot parse {what}: {message}")]
    Parse {
        /// What was being parsed (a file name or "CRD YAML").
        what: String,
        /// The parser's message.
        message: String,
    },
    /// A `CustomResourceDefinition` was refused (the same checks as `POST` of a CRD, which
    /// answers `422 Invalid`).
    #[error("invalid CustomResourceDefinition {name}: {message}")]
    InvalidCrd {
        /// `metadata.name` of the CRD (may be empty).
        name: String,
        /// Why it was refused.
        message: String,
    },
    /// Building a `kube::Client` from the simulator's config failed.
    #[error("cannot build kube client: {0}")]
    Client(#[source] kube::Error),
    /// The thread that calls webhooks could not start.
    #[error("cannot start the webhook client: {0}")]
    WebhookClient(#[source] std::io::Error),
}

impl KubeSimError {
    /// A short, stable category for logs and metrics: `tls`, `bind`, `io`, `parse`,
    /// `invalid_crd`, `client` or `webhook_client`.
    pub fn category(&self) -> &'static str {
        match self {
            KubeSimError::Tls(_) => "tls",
            KubeSimError::Bind { .. } => "bind",
            KubeSimError::Io { .. } => "io",
            KubeSimError::Parse { .. } => "parse",
            KubeSimError::InvalidCrd { .. } => "invalid_crd",
            KubeSimError::Client(_) => "client",
            KubeSimError::WebhookClient(_) => "webhook_client",
        }
    }
}
