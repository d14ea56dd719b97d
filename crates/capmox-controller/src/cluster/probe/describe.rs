//! The message and credential state of a failed probe call: each says what
//! to fix, and never carries a credential value.

use std::time::Duration;

use pve_client::{PveError, TransientCause};

use super::CredentialState;
use crate::error::Error;

/// The message and credential state for an error of `ClientMap::get`
/// (Secret missing, key missing or malformed) or of a probe call.
pub fn describe_error(e: &Error, origin: Option<&str>) -> (String, CredentialState) {
    match e {
        Error::Credentials { message, .. } => (message.clone(), CredentialState::Invalid),
        Error::Pve { source, .. } => describe_pve(source, origin.unwrap_or("the instance")),
        Error::Timeout { what, after } => (
            format!("{what} got no answer within {}", fmt_duration(*after)),
            CredentialState::Unverified,
        ),
        other => (other.to_string(), CredentialState::Unverified),
    }
}

pub(super) fn fmt_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The message and credential state for a Proxmox error from `origin`.
pub fn describe_pve(e: &PveError, origin: &str) -> (String, CredentialState) {
    use CredentialState::{Invalid, Unverified};
    match e {
        PveError::Unauthorized { .. } => (
            format!(
                "authentication failed at {origin} (HTTP 401): the token id or secret in the credentials Secret is wrong, or the token was removed or expired"
            ),
            Invalid,
        ),
        PveError::PermissionDenied {
            path,
            privileges,
            message,
            ..
        } => {
            let what = match (path, privileges.is_empty()) {
                (Some(p), false) => format!("lacks {} on {p}", privileges.join(" or ")),
                (Some(p), true) => format!("lacks a privilege on {p}"),
                (None, _) => format!("was refused: {message}"),
            };
            (
                format!(
                    "permission denied at {origin} (HTTP 403): the API token {what}; grant it to the token (with privilege separation, to the token itself)"
                ),
                Invalid,
            )
        }
        PveError::Tls { url, message, .. } => (
            format!(
                "TLS verification of {url} failed: {message}; put the cluster's CA certificate into root_ca of the credentials Secret (or pin the certificate with fingerprint)"
            ),
            Invalid,
        ),
        PveError::InvalidConfig { message, .. } => (message.clone(), Invalid),
        PveError::Unsupported {
            status, message, ..
        } => (
            format!(
                "{origin} does not serve the Proxmox VE API (HTTP {status}: {message}); check url in the credentials Secret"
            ),
            Invalid,
        ),
        PveError::Transient { cause, message, .. } => match cause {
            TransientCause::ConnectFailed => {
                (format!("cannot reach {origin}: {message}"), Unverified)
            }
            TransientCause::Timeout => (
                format!("no answer from {origin} within the call timeout"),
                Unverified,
            ),
            TransientCause::ConnectionLost => (
                format!("connection to {origin} lost: {message}"),
                Unverified,
            ),
            TransientCause::Status(s) => {
                (format!("{origin} answered HTTP {s}: {message}"), Unverified)
            }
        },
        PveError::NodeUnreachable {
            status, message, ..
        } => (
            format!(
                "{origin}: the answering node cannot reach another node (HTTP {status}: {message})"
            ),
            Unverified,
        ),
        other => (format!("{origin}: {other}"), Unverified),
    }
}
