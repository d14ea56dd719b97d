//! The controller's error type: one enum for every failure a reconcile can
//! return, with a short stable [`Error::category`] (metric label, event
//! reason) and [`Error::is_transient`] (retry soon with backoff, or wait for a
//! change the watches will report).
//!
//! Invariant: no variant ever carries a credential value. Credentials
//! problems name the Secret (`namespace/name`) and the key, never its value;
//! Proxmox errors come from `pve_client`, which guarantees the same.

use std::time::Duration;

use pve_client::PveError;

/// Every failure of a reconcile.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A Kubernetes API call failed.
    #[error("Kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A Proxmox API call of one instance failed.
    #[error("Proxmox instance {instance}: {source}")]
    Pve {
        /// Instance name (failure domain).
        instance: String,
        /// What the client reported (boxed: `PveError` is large; build
        /// this variant with [`Error::pve`]).
        #[source]
        source: Box<PveError>,
    },
    /// The spec is invalid; the problems, already joined (`path: message; …`).
    #[error("invalid spec: {0}")]
    InvalidSpec(String),
    /// The credentials of an instance are unusable: Secret missing, key
    /// missing or malformed. Never contains a value from the Secret other
    /// than the URL and the token id.
    #[error("credentials of instance {instance}: {message}")]
    Credentials {
        /// Instance name.
        instance: String,
        /// What is wrong and where (Secret `namespace/name`, key).
        message: String,
    },
    /// Something the reconcile needs is not there yet (e.g. "owner Machine
    /// not found"); the watches report when it appears.
    #[error("{0}")]
    Precondition(String),
    /// (De)serialising an object failed.
    #[error("JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// An operation did not finish in time (e.g. an instance probe).
    #[error("{what} did not finish within {after:?}")]
    Timeout {
        /// What timed out, e.g. `probe of instance dc-a`.
        what: String,
        /// The limit that passed.
        after: Duration,
    },
    /// The kube-runtime finalizer helper failed (adding or removing the
    /// finalizer, or the apply/cleanup it ran).
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

/// The controller's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A Proxmox error of `instance`.
    pub fn pve(instance: &str, e: PveError) -> Error {
        Error::Pve {
            instance: instance.to_string(),
            source: Box::new(e),
        }
    }

    /// Short stable label for metrics and event reasons: `kube`,
    /// `pve_<PveError::category()>` (e.g. `pve_unauthorized`), `invalid_spec`,
    /// `credentials`, `precondition`, `json`, `timeout`, or the inner error's
    /// category for finalizer failures of the apply/cleanup step
    /// (`finalizer` otherwise).
    pub fn category(&self) -> &'static str {
        match self {
            Error::Kube(_) => "kube",
            Error::Pve { source, .. } => pve_category(source),
            Error::InvalidSpec(_) => "invalid_spec",
            Error::Credentials { .. } => "credentials",
            Error::Precondition(_) => "precondition",
            Error::Json(_) => "json",
            Error::Timeout { .. } => "timeout",
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.category(),
                _ => "finalizer",
            },
        }
    }

    /// Whether retrying soon, unchanged, may succeed (requeue with
    /// exponential backoff). Not transient: invalid specs, unusable
    /// credentials, missing preconditions, Proxmox errors that need a change
    /// first (401, 403, TLS, not found, parameters) and Kubernetes 4xx other
    /// than 408/409/429 — those wait for a watch event or the periodic
    /// requeue.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Kube(e) => kube_transient(e),
            Error::Pve { source, .. } => source.is_retryable(),
            Error::InvalidSpec(_) | Error::Credentials { .. } | Error::Precondition(_) => false,
            Error::Json(_) => false,
            Error::Timeout { .. } => true,
            Error::Finalizer(inner) => match inner.as_ref() {
                kube::runtime::finalizer::Error::ApplyFailed(e)
                | kube::runtime::finalizer::Error::CleanupFailed(e) => e.is_transient(),
                kube::runtime::finalizer::Error::AddFinalizer(e)
                | kube::runtime::finalizer::Error::RemoveFinalizer(e) => kube_transient(e),
                _ => false,
            },
        }
    }
}

impl From<kube::runtime::finalizer::Error<Error>> for Error {
    fn from(e: kube::runtime::finalizer::Error<Error>) -> Self {
        Error::Finalizer(Box::new(e))
    }
}

fn kube_transient(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => !(400..500).contains(&s.code) || matches!(s.code, 408 | 409 | 429),
        _ => true,
    }
}

/// `pve_` + the client's category, as a static string.
fn pve_category(e: &PveError) -> &'static str {
    match e.category() {
        "invalid_config" => "pve_invalid_config",
        "invalid_request" => "pve_invalid_request",
        "not_found" => "pve_not_found",
        "locked" => "pve_locked",
        "lock_timeout" => "pve_lock_timeout",
        "unauthorized" => "pve_unauthorized",
        "permission_denied" => "pve_permission_denied",
        "invalid_parameter" => "pve_invalid_parameter",
        "conflict" => "pve_conflict",
        "agent_unavailable" => "pve_agent_unavailable",
        "node_unreachable" => "pve_node_unreachable",
        "transient" => "pve_transient",
        "unsupported" => "pve_unsupported",
        "decode" => "pve_decode",
        "tls" => "pve_tls",
        "task_failed" => "pve_task_failed",
        "task_pending" => "pve_task_pending",
        _ => "pve_other",
    }
}

/// `e` and its causes (`std::error::Error::source`), joined by `: `, a
/// cause left out when the text before it already holds it. kube's client
/// errors name only the outermost failure ("client error (Connect)"); the
/// cause says what to fix: a refused connection, a certificate signed by
/// an unknown authority, a name that does not resolve.
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !s.is_empty() && !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

/// The certificate problem of the first rustls error among `e` and its
/// causes, if any ([`tls_error`]).
pub fn certificate_error<'a>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a rustls::CertificateError> {
    match tls_error(e) {
        Some(rustls::Error::InvalidCertificate(problem)) => Some(problem),
        _ => None,
    }
}

/// The first rustls error among `e` and its causes, if any. A TLS
/// handshake failure reaches the caller as an `std::io::Error` wrapping an
/// `std::io::Error` wrapping the `rustls::Error`; `source()` skips a
/// wrapped error itself, so each `io::Error` is opened too.
pub fn tls_error<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        let mut wrapped: &(dyn std::error::Error + 'static) = c;
        loop {
            if let Some(tls) = wrapped.downcast_ref::<rustls::Error>() {
                return Some(tls);
            }
            match wrapped
                .downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
            {
                Some(inner) => wrapped = inner,
                None => break,
            }
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pve_client::{CallContext, TransientCause};

    fn ctx() -> Box<CallContext> {
        Box::new(CallContext {
            instance: "dc-a".into(),
            method: "GET",
            path: "/version".into(),
        })
    }

    #[test]
    fn categories_are_stable() {
        let e = Error::pve(
            "dc-a",
            PveError::Unauthorized {
                ctx: ctx(),
                message: "authentication failure".into(),
            },
        );
        assert_eq!(e.category(), "pve_unauthorized");
        assert!(!e.is_transient());
        let e = Error::pve(
            "dc-a",
            PveError::Transient {
                ctx: ctx(),
                cause: TransientCause::ConnectFailed,
                message: "connection refused".into(),
            },
        );
        assert_eq!(e.category(), "pve_transient");
        assert!(e.is_transient());
        assert_eq!(Error::InvalidSpec("x".into()).category(), "invalid_spec");
        let c = Error::Credentials {
            instance: "dc-a".into(),
            message: "key 'secret' missing".into(),
        };
        assert_eq!(c.category(), "credentials");
        assert!(!c.is_transient());
        assert_eq!(
            c.to_string(),
            "credentials of instance dc-a: key 'secret' missing"
        );
        let t = Error::Timeout {
            what: "probe of instance dc-b".into(),
            after: Duration::from_secs(5),
        };
        assert_eq!(t.category(), "timeout");
        assert!(t.is_transient());
    }

    #[test]
    fn kube_api_errors_classified_by_code() {
        let api = |code: u16| {
            Error::Kube(kube::Error::Api(Box::new(
                kube::core::Status::failure("x", "Reason").with_code(code),
            )))
        };
        assert!(api(409).is_transient());
        assert!(api(429).is_transient());
        assert!(api(500).is_transient());
        assert!(!api(422).is_transient());
        assert!(!api(404).is_transient());
        assert_eq!(api(500).category(), "kube");
    }

    #[test]
    fn finalizer_errors_take_the_inner_category() {
        let inner = kube::runtime::finalizer::Error::ApplyFailed(Error::InvalidSpec("bad".into()));
        let e: Error = inner.into();
        assert_eq!(e.category(), "invalid_spec");
        assert!(!e.is_transient());
    }

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Outer(#[source] Middle);

    #[derive(Debug, thiserror::Error)]
    #[error("tcp connect error")]
    struct Middle(#[source] std::io::Error);

    #[test]
    fn a_certificate_error_is_found_inside_an_io_error() {
        let e = Outer(Middle(std::io::Error::other(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        ))));
        assert_eq!(
            certificate_error(&e),
            Some(&rustls::CertificateError::UnknownIssuer)
        );
        let refused = Outer(Middle(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )));
        assert_eq!(certificate_error(&refused), None);
    }

    #[test]
    fn the_causes_follow_the_error_once_each() {
        let e = Outer(Middle(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        )));
        assert_eq!(
            with_causes(&e),
            "client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
        // A cause already in the text is not repeated.
        #[derive(Debug, thiserror::Error)]
        #[error("cannot list: {0}")]
        struct Repeats(#[source] std::io::Error);
        let r = Repeats(std::io::Error::other("denied"));
        assert_eq!(with_causes(&r), "cannot list: denied");
    }
}
