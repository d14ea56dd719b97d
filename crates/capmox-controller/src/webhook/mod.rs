//! The webhook server: admission (defaulting and validating) and conversion
//! webhooks of our four kinds, served over HTTPS the way controller-runtime
//! serves them for CAPI providers.
//!
//! | module | owns |
//! |---|---|
//! | [`certs`] | the serving certificate: read from `<cert-dir>/tls.crt` and `tls.key`, re-read on rotation |
//! | [`decide`] | what an admission request gets: defaults (a JSON patch), problems (field paths), warnings — pure |
//! | [`immutable`] | the fields that must not change on update, and why |
//! | [`lookup`] | the ProxmoxCluster a machine belongs to (for the checks against its cluster) |
//! | [`reviewed`] | a request's object as JSON, read without its managed fields |
//! | [`convert`] | `ConversionReview` in and out around a plain conversion function |
//! | [`server`] | the HTTPS listener, the routes, logs and metrics |
//!
//! Routes (kubebuilder's naming, which the webhook configurations in
//! `config/webhook/manifests.yaml` name): `/mutate-<group-with-dashes>-<version>-<kind>`
//! and `/validate-…` for each kind, `/convert` for CRD conversion. Every
//! request and answer is an `admission.k8s.io/v1` `AdmissionReview` or an
//! `apiextensions.k8s.io/v1` `ConversionReview`; a request the server cannot
//! read is answered `200` with a refused review (code 400), as
//! controller-runtime does.
//!
//! Invariants:
//! - the server never calls Proxmox; the validating webhooks read at most a
//!   CAPI `Cluster` and a `ProxmoxCluster` (no side effects, `sideEffects: None`);
//! - every refusal names the field path (`spec.network.networkDevices[0].vlan`)
//!   and says what to write instead; the problems come from
//!   [`crate::api::validation`], so the checks the reconciler makes before any
//!   Proxmox call and the ones the API server makes at admission are the same;
//! - on update, a spec that did not change is not validated again (a
//!   finalizer removal on an object written before the webhook existed
//!   must not be refused);
//! - HTTP/1.1 only (CAPI serves its webhooks without HTTP/2 since
//!   CVE-2023-44487).

pub mod certs;
pub mod convert;
pub mod decide;
pub mod immutable;
pub mod lookup;
pub mod reviewed;
pub mod server;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub use convert::Convert;
pub use server::{WebhookServer, serve};

/// controller-runtime's default certificate directory (the mount point of
/// the cert-manager Secret in `config/manager/manager.yaml`).
pub const DEFAULT_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";

/// How often the certificate files are re-read for rotation
/// (controller-runtime's certificate watcher polls every 10 s as well).
pub const CERT_RELOAD_PERIOD: Duration = Duration::from_secs(10);

/// Where and how the webhook server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookOptions {
    /// Listen address (`0.0.0.0:9443` in a cluster; port 0 picks a free one).
    pub addr: SocketAddr,
    /// Directory of the serving certificate and key.
    pub cert_dir: PathBuf,
    /// File name of the PEM certificate chain in `cert_dir` (`tls.crt`).
    pub cert_name: String,
    /// File name of the PEM private key in `cert_dir` (`tls.key`).
    pub key_name: String,
    /// How often the files are re-read; a changed, readable pair replaces
    /// the served certificate for new connections.
    pub reload_period: Duration,
}

/// The four kinds the webhooks serve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `ProxmoxCluster`.
    ProxmoxCluster,
    /// `ProxmoxClusterTemplate`.
    ProxmoxClusterTemplate,
    /// `ProxmoxMachine`.
    ProxmoxMachine,
    /// `ProxmoxMachineTemplate`.
    ProxmoxMachineTemplate,
}

impl Kind {
    /// Every kind, in the order the routes are listed.
    pub const ALL: [Kind; 4] = [
        Kind::ProxmoxCluster,
        Kind::ProxmoxClusterTemplate,
        Kind::ProxmoxMachine,
        Kind::ProxmoxMachineTemplate,
    ];

    /// The kind's name (`ProxmoxMachine`), also the metric label.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::ProxmoxCluster => "ProxmoxCluster",
            Kind::ProxmoxClusterTemplate => "ProxmoxClusterTemplate",
            Kind::ProxmoxMachine => "ProxmoxMachine",
            Kind::ProxmoxMachineTemplate => "ProxmoxMachineTemplate",
        }
    }

    /// The kind named `name`, if it is one of ours.
    pub fn from_name(name: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    fn path_suffix(self) -> String {
        format!(
            "{}-{}-{}",
            crate::api::GROUP.replace('.', "-"),
            crate::api::VERSION,
            self.as_str().to_lowercase()
        )
    }

    /// Path of the defaulting webhook, e.g.
    /// `/mutate-infrastructure-cluster-x-k8s-io-v1alpha3-proxmoxmachine`.
    pub fn mutate_path(self) -> String {
        format!("/mutate-{}", self.path_suffix())
    }

    /// Path of the validating webhook, e.g.
    /// `/validate-infrastructure-cluster-x-k8s-io-v1alpha3-proxmoxmachine`.
    pub fn validate_path(self) -> String {
        format!("/validate-{}", self.path_suffix())
    }
}

/// Path of the conversion webhook (`spec.conversion.webhook.clientConfig.service.path`).
pub const CONVERT_PATH: &str = "/convert";

/// Why the webhook server could not start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// The certificate or key could not be read or used.
    #[error(transparent)]
    Certs(#[from] certs::CertError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr} (--webhook-addr): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_follow_kubebuilder_naming() {
        assert_eq!(
            Kind::ProxmoxMachine.validate_path(),
            "/validate-infrastructure-cluster-x-k8s-io-v1alpha3-proxmoxmachine"
        );
        assert_eq!(
            Kind::ProxmoxClusterTemplate.mutate_path(),
            "/mutate-infrastructure-cluster-x-k8s-io-v1alpha3-proxmoxclustertemplate"
        );
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.as_str()), Some(k));
        }
        assert_eq!(Kind::from_name("Pod"), None);
    }
}
