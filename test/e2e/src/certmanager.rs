//! What cert-manager does for the provider on a real management cluster,
//! done here for the simulated one: issue the webhook's serving certificate
//! (`config/certmanager/certificate.yaml`: a self-signed issuer, DNS names of
//! the webhook Service) into the files the controller reads
//! (`tls.crt`, `tls.key`, `ca.crt`, as the Certificate's Secret mounted as a
//! volume holds them), and inject the CA into the objects annotated
//! `cert-manager.io/inject-ca-from` (cert-manager's CA injector): every
//! webhook of a webhook configuration, and the conversion webhook of a CRD.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::Value;

use crate::error::{E2eError, Result};

/// The annotation cert-manager's CA injector acts on.
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";

/// Namespace and name of the webhook Service (`config/webhook/service.yaml`).
pub const WEBHOOK_SERVICE: (&str, &str) = ("capmox-system", "capmox-webhook-service");

/// An issued serving certificate.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The directory holding `tls.crt`, `tls.key` and `ca.crt`.
    pub dir: PathBuf,
    /// The CA certificate (PEM) to inject.
    pub ca_pem: String,
}

fn tls(e: rcgen::Error) -> E2eError {
    E2eError::Contract(format!("cannot issue the webhook certificate: {e}"))
}

/// The DNS names of the Certificate in `config/certmanager/certificate.yaml`.
pub fn webhook_dns_names() -> Vec<String> {
    let (ns, name) = WEBHOOK_SERVICE;
    vec![
        format!("{name}.{ns}.svc"),
        format!("{name}.{ns}.svc.cluster.local"),
    ]
}

/// Issues a CA and a serving certificate for `dns_names` into `dir`.
///
/// # Errors
/// [`E2eError::Contract`] when the certificate cannot be made,
/// [`E2eError::Io`] when the files cannot be written.
pub fn issue(dir: &Path, dns_names: &[String]) -> Result<Issued> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "capmox-selfsigned-issuer");
    let ca_key = KeyPair::generate().map_err(tls)?;
    let ca = ca_params.self_signed(&ca_key).map_err(tls)?;
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().map_err(tls)?;
    let mut leaf_params = CertificateParams::new(dns_names.to_vec()).map_err(tls)?;
    leaf_params
        .distinguished_name
        .push(DnType::OrganizationName, "k8s-sig-cluster-lifecycle");
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(tls)?;
    let io = |path: PathBuf| move |source| E2eError::Io { path, source };
    std::fs::create_dir_all(dir).map_err(io(dir.to_path_buf()))?;
    for (file, text) in [
        ("tls.crt", leaf.pem()),
        ("tls.key", leaf_key.serialize_pem()),
        ("ca.crt", ca.pem()),
    ] {
        let path = dir.join(file);
        std::fs::write(&path, text).map_err(io(path.clone()))?;
    }
    Ok(Issued {
        dir: dir.to_path_buf(),
        ca_pem: ca.pem(),
    })
}

/// Puts `ca_pem` into `doc` where cert-manager's CA injector would, when
/// `doc` carries [`INJECT_CA_FROM`]: each `webhooks[].clientConfig.caBundle`
/// of a webhook configuration, `spec.conversion.webhook.clientConfig.caBundle`
/// of a CRD converting by webhook. Returns whether anything was injected.
pub fn inject_ca(doc: &mut Value, ca_pem: &str) -> bool {
    if doc
        .pointer(&format!(
            "/metadata/annotations/{}",
            INJECT_CA_FROM.replace('/', "~1")
        ))
        .is_none()
    {
        return false;
    }
    let bundle = Value::String(crate::env::base64(ca_pem.as_bytes()));
    let mut injected = false;
    if let Some(hooks) = doc.get_mut("webhooks").and_then(Value::as_array_mut) {
        for w in hooks {
            if let Some(cc) = w.get_mut("clientConfig").and_then(Value::as_object_mut) {
                cc.insert("caBundle".into(), bundle.clone());
                injected = true;
            }
        }
    }
    if doc
        .pointer("/spec/conversion/strategy")
        .and_then(Value::as_str)
        == Some("Webhook")
        && let Some(cc) = doc
            .pointer_mut("/spec/conversion/webhook/clientConfig")
            .and_then(Value::as_object_mut)
    {
        cc.insert("caBundle".into(), bundle);
        injected = true;
    }
    injected
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_ca_goes_where_the_injector_puts_it() {
        let annotated =
            json!({"annotations": {INJECT_CA_FROM: "capmox-system/capmox-serving-cert"}});
        let mut hooks = json!({"kind": "ValidatingWebhookConfiguration", "metadata": annotated.clone(),
            "webhooks": [{"clientConfig": {"service": {"name": "s"}}}, {"clientConfig": {"url": "https://x"}}]});
        assert!(inject_ca(&mut hooks, "PEM"));
        assert_eq!(hooks["webhooks"][0]["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(hooks["webhooks"][1]["clientConfig"]["caBundle"], "UEVN");
        let mut crd = json!({"kind": "CustomResourceDefinition", "metadata": annotated,
            "spec": {"conversion": {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "s"}}}}}});
        assert!(inject_ca(&mut crd, "PEM"));
        assert_eq!(
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"],
            "UEVN"
        );
        let mut plain =
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": "x"}, "spec": {}});
        assert!(!inject_ca(&mut plain, "PEM"), "no annotation, no injection");
    }

    #[test]
    fn issued_files_are_a_chain_for_the_service_names() {
        let dir = std::env::temp_dir().join(format!(
            "capmox-e2e-issue-{}",
            uuid::Uuid::new_v4().simple()
        ));
        let issued = issue(&dir, &webhook_dns_names()).unwrap();
        for f in ["tls.crt", "tls.key", "ca.crt"] {
            let text = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(text.starts_with("-----BEGIN"), "{f}");
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("ca.crt")).unwrap(),
            issued.ca_pem
        );
        assert_eq!(
            webhook_dns_names(),
            [
                "capmox-webhook-service.capmox-system.svc",
                "capmox-webhook-service.capmox-system.svc.cluster.local"
            ]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
