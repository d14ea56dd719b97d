//! The crate's error type for everything outside the simulated HTTP API
//! (configuration, start-up, TLS, schema loading, the lower-bound model).
//!
//! Errors that a *simulated Proxmox* returns to its clients are not Rust
//! errors of the simulator; they live in the internal `http::envelope` module.

use std::path::PathBuf;

/// Everything that can go wrong while configuring, starting or querying the
/// simulator itself.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The configuration is inconsistent (unknown node of a template, duplicate
    /// VMID, storage referenced but not defined, …). The text names the item.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// The YAML configuration could not be parsed.
    #[error("cannot parse YAML configuration: {0}")]
    Yaml(String),
    /// The official API schema (`apidoc.json`) could not be read or parsed.
    #[error("cannot load the Proxmox API schema {path}: {reason}")]
    Schema {
        /// Path that was tried.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// Certificate generation or the rustls server configuration failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// Address that was tried (`IP:port`).
        addr: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// Reading or writing a file (CA certificates in the state directory).
    #[error("I/O error on {path}: {source}")]
    Io {
        /// File or directory concerned.
        path: PathBuf,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// A request named a cluster this simulator does not have.
    #[error("unknown simulated cluster '{0}'")]
    UnknownCluster(String),
    /// The lower-bound calculator could not model a fleet request.
    #[error("cannot compute the lower bound: {0}")]
    LowerBound(String),
}

impl SimError {
    /// Short, stable category for logs and metrics labels.
    pub fn category(&self) -> &'static str {
        match self {
            SimError::Config(_) => "config",
            SimError::Yaml(_) => "yaml",
            SimError::Schema { .. } => "schema",
            SimError::Tls(_) => "tls",
            SimError::Bind { .. } => "bind",
            SimError::Io { .. } => "io",
            SimError::UnknownCluster(_) => "unknown-cluster",
            SimError::LowerBound(_) => "lower-bound",
        }
    }
}
