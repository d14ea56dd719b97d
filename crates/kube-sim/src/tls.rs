//! A fresh CA per server and a serving certificate for `localhost`, `127.0.0.1` and `::1`
//! (plus the bind address), as a rustls server config offering HTTP/2 and HTTP/1.1.

use crate::error::KubeSimError;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::sync::Arc;

/// Generated TLS material.
pub struct Certs {
    /// The CA certificate (PEM) clients must trust.
    pub ca_pem: String,
    /// The CA certificate (DER).
    pub ca_der: Vec<u8>,
    /// The server config.
    pub server_config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Certs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Certs").finish_non_exhaustive()
    }
}

fn tls_err(e: impl std::fmt::Display) -> KubeSimError {
    KubeSimError::Tls(e.to_string())
}

/// Generates a CA and a serving certificate with the given extra subject alternative
/// names (host names or IP addresses).
pub fn generate(extra_sans: &[String]) -> Result<Certs, KubeSimError> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kube-sim CA");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_key = KeyPair::generate().map_err(tls_err)?;
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls_err)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for s in extra_sans {
        if !sans.contains(s) {
            sans.push(s.clone());
        }
    }
    let mut leaf_params = CertificateParams::new(sans).map_err(tls_err)?;
    leaf_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    leaf_params
        .extended_key_usages
        .push(rcgen::ExtendedKeyUsagePurpose::ServerAuth);
    let leaf_key = KeyPair::generate().map_err(tls_err)?;
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(tls_err)?;

    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_err)?
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone(), ca_cert.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
        )
        .map_err(tls_err)?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let ca_der: CertificateDer<'static> = ca_cert.der().clone();
    Ok(Certs {
        ca_pem: ca_cert.pem(),
        ca_der: ca_der.to_vec(),
        server_config: Arc::new(cfg),
    })
}
