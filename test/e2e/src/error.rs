//! The crate's one error type, with a short stable [`E2eError::category`].

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while running the stand-in, the environment,
/// a scenario or the demo.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// A call to the Kubernetes API failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// kube-sim could not start or load CRDs.
    #[error("kube-sim: {0}")]
    KubeSim(#[from] kube_sim::KubeSimError),
    /// A JSON (de)serialisation failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A YAML document could not be parsed or written.
    #[error("YAML ({what}): {message}")]
    Yaml {
        /// What was being parsed, e.g. the template file.
        what: String,
        /// The parser's message.
        message: String,
    },
    /// A template could not be rendered with clusterctl's rules.
    #[error("template {template}: {source}")]
    Render {
        /// The template file.
        template: String,
        /// What clusterctl would have said.
        #[source]
        source: crate::clusterctl::RenderError,
    },
    /// A file or process operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file, directory or program involved.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An object does not have the shape the contract requires (a missing
    /// `infrastructureRef`, an unknown kind, a CRD without the served version).
    #[error("{0}")]
    Contract(String),
    /// A bounded wait ran out: what was waited for and the last state seen.
    #[error("timed out after {:.1} s waiting for {what}; last seen: {last_seen}", .after.as_secs_f64())]
    Timeout {
        /// What the wait was for, e.g. `3 control-plane machines provisioned`.
        what: String,
        /// How long it waited.
        after: Duration,
        /// The last observed state, rendered for a human.
        last_seen: String,
    },
    /// The controller binary could not be built, found or started, or it exited.
    #[error("controller process: {0}")]
    Controller(String),
    /// The Proxmox simulator failed or reported a state a scenario did not expect.
    #[error("pve-sim: {0}")]
    Sim(String),
    /// A scenario's expectation did not hold.
    #[error("expectation failed: {0}")]
    Expectation(String),
    /// A managed topology cannot be reconciled (its ClusterClass, variables
    /// or patches).
    #[error("topology: {0}")]
    Topology(#[from] crate::standin::topology::TopologyError),
}

impl E2eError {
    /// A short, stable category for logs and summaries.
    pub fn category(&self) -> &'static str {
        match self {
            E2eError::Kube(_) => "kube",
            E2eError::KubeSim(_) => "kube_sim",
            E2eError::Json(_) => "json",
            E2eError::Yaml { .. } => "yaml",
            E2eError::Render { .. } => "render",
            E2eError::Io { .. } => "io",
            E2eError::Contract(_) => "contract",
            E2eError::Timeout { .. } => "timeout",
            E2eError::Controller(_) => "controller",
            E2eError::Sim(_) => "pve_sim",
            E2eError::Expectation(_) => "expectation",
            E2eError::Topology(_) => "topology",
        }
    }

    /// Whether this is a Kubernetes `404 NotFound`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, E2eError::Kube(kube::Error::Api(s)) if s.code == 404)
    }

    /// Whether this is a Kubernetes `409` (`AlreadyExists` or `Conflict`).
    pub fn is_conflict(&self) -> bool {
        matches!(self, E2eError::Kube(kube::Error::Api(s)) if s.code == 409)
    }
}

/// `Result` with [`E2eError`].
pub type Result<T, E = E2eError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeout_message_names_what_and_last_state() {
        let e = E2eError::Timeout {
            what: "3 machines provisioned".into(),
            after: Duration::from_millis(2500),
            last_seen: "1 of 3".into(),
        };
        assert_eq!(
            e.to_string(),
            "timed out after 2.5 s waiting for 3 machines provisioned; last seen: 1 of 3"
        );
        assert_eq!(e.category(), "timeout");
    }
}
