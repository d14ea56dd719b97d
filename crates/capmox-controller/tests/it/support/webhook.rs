//! Test support for the webhook server: serving certificates (a CA and a
//! leaf for the webhook Service's DNS name, as cert-manager issues them),
//! the webhook configurations of `config/webhook/manifests.yaml` installed
//! with the CA injected (as cert-manager's CA injector does), and the
//! server started against a test world's kube-sim.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capmox_controller::metrics::Metrics;
use capmox_controller::webhook::{self, WebhookOptions, WebhookServer};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Api;
use kube::api::PostParams;
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::Value;

use super::cluster::Env;

/// Namespace and name of the webhook Service in `config/webhook/service.yaml`.
pub const SERVICE: (&str, &str) = ("capmox-system", "capmox-webhook-service");

/// A CA and one certificate it signed.
pub struct Pair {
    /// CA certificate (PEM).
    pub ca_pem: String,
    /// Leaf certificate (PEM).
    pub cert_pem: String,
    /// Leaf certificate (DER).
    pub cert_der: Vec<u8>,
    /// Leaf key (PEM).
    pub key_pem: String,
}

/// A fresh CA and a serving certificate for the webhook Service's DNS name.
pub fn serving_pair() -> Pair {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![format!("{}.{}.svc", SERVICE.1, SERVICE.0)])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    Pair {
        ca_pem: ca.pem(),
        cert_pem: leaf.pem(),
        cert_der: leaf.der().to_vec(),
        key_pem: leaf_key.serialize_pem(),
    }
}

/// Writes `tls.crt` and `tls.key` of `pair` into `dir` (a rotation replaces
/// them the same way).
pub fn write_pair(dir: &Path, pair: &Pair) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("tls.crt"), &pair.cert_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &pair.key_pem).unwrap();
}

/// A directory of its own under the temp directory.
pub fn temp_dir(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("capmox-{what}-{}", uuid::Uuid::new_v4().simple()))
}

/// `config/webhook/manifests.yaml` as JSON documents.
pub fn manifests() -> Vec<Value> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/webhook/manifests.yaml");
    serde_saphyr::from_multiple(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Installs the webhook configurations with `ca_pem` as every webhook's
/// `caBundle`.
pub async fn install_configurations(kube: &kube::Client, ca_pem: &str) {
    let bundle = serde_json::to_value(ByteString(ca_pem.as_bytes().to_vec())).unwrap();
    for mut doc in manifests() {
        for w in doc["webhooks"].as_array_mut().unwrap() {
            w["clientConfig"]["caBundle"] = bundle.clone();
        }
        match doc["kind"].as_str().unwrap() {
            "MutatingWebhookConfiguration" => {
                let c: MutatingWebhookConfiguration = serde_json::from_value(doc).unwrap();
                Api::all(kube.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .unwrap();
            }
            "ValidatingWebhookConfiguration" => {
                let c: ValidatingWebhookConfiguration = serde_json::from_value(doc).unwrap();
                Api::all(kube.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .unwrap();
            }
            other => panic!("unexpected {other} in config/webhook/manifests.yaml"),
        }
    }
}

/// The server options for certificates in `dir` on 127.0.0.1:0.
pub fn options(dir: &Path, reload_period: Duration) -> WebhookOptions {
    WebhookOptions {
        addr: "127.0.0.1:0".parse().unwrap(),
        cert_dir: dir.to_path_buf(),
        cert_name: "tls.crt".into(),
        key_name: "tls.key".into(),
        reload_period,
    }
}

/// The webhook server of a test world, reachable through kube-sim.
pub struct Webhooks {
    /// The running server.
    pub server: WebhookServer,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
    /// Its certificate directory.
    pub dir: PathBuf,
}

impl Webhooks {
    /// Serves the webhooks for `env` (certificates issued, configurations
    /// installed with the CA, the Service routed to the server).
    pub async fn start(env: &Env) -> Webhooks {
        let dir = temp_dir("webhook-certs");
        let pair = serving_pair();
        write_pair(&dir, &pair);
        let metrics = Arc::new(Metrics::new());
        let server = webhook::serve(
            &options(&dir, Duration::from_secs(10)),
            env.kube.clone(),
            metrics.clone(),
            capmox_controller::api::conversion::convert_object,
        )
        .await
        .unwrap();
        env.kube_sim
            .route_service(SERVICE.0, SERVICE.1, 443, server.addr);
        install_configurations(&env.kube, &pair.ca_pem).await;
        Webhooks {
            server,
            metrics,
            dir,
        }
    }

    /// Stops the server and removes its certificates.
    pub async fn stop(self) {
        self.server.shutdown(Duration::from_secs(5)).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
