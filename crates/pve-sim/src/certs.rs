//! Per-cluster TLS material: a CA named like Proxmox's cluster CA and a
//! leaf certificate for the API endpoint (SANs `localhost`, `127.0.0.1`,
//! `::1` and the node names), docs/proxmox-semantics.md §20. Keys are ECDSA P-256
//! (rcgen's default; Proxmox uses RSA, which clients do not care about).

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use crate::error::SimError;

/// TLS material of one simulated cluster.
#[derive(Clone)]
pub(crate) struct ClusterCerts {
    /// CA certificate, PEM (`pve-root-ca.pem`).
    pub ca_pem: String,
    /// SHA-256 fingerprint of the CA certificate.
    pub ca_fingerprint: String,
    /// Leaf certificate, PEM.
    pub leaf_pem: String,
    /// Leaf certificate, DER.
    pub leaf_der: Vec<u8>,
    /// Leaf private key, PKCS#8 DER.
    pub leaf_key_der: Vec<u8>,
    /// SHA-256 of the leaf DER, `AA:BB:…` upper-case as Proxmox shows it.
    pub fingerprint: String,
}

impl std::fmt::Debug for ClusterCerts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterCerts")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// Generates a CA and a leaf for `cluster` whose SANs include `extra_names`.
pub(crate) fn generate(cluster: &str, extra_names: &[String]) -> Result<ClusterCerts, SimError> {
    let tls = |e: rcgen::Error| SimError::Tls(format!("cluster '{cluster}': {e}"));

    let ca_key = KeyPair::generate().map_err(tls)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(tls)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "Proxmox Virtual Environment");
    dn.push(DnType::OrganizationName, "PVE Cluster Manager CA");
    dn.push(DnType::OrganizationalUnitName, cluster);
    ca_params.distinguished_name = dn;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_cert = ca_params.self_signed(&ca_key).map_err(tls)?;
    let issuer = Issuer::new(ca_params, ca_key);

    let mut sans = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    sans.extend(extra_names.iter().cloned());
    let leaf_key = KeyPair::generate().map_err(tls)?;
    let mut leaf_params = CertificateParams::new(sans).map_err(tls)?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("{cluster}.pve-sim"));
    dn.push(DnType::OrganizationName, "PVE Cluster Node");
    leaf_params.distinguished_name = dn;
    leaf_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    leaf_params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).map_err(tls)?;

    let leaf_der = leaf.der().to_vec();
    Ok(ClusterCerts {
        ca_pem: ca_cert.pem(),
        ca_fingerprint: sha256_fingerprint(ca_cert.der()),
        leaf_pem: leaf.pem(),
        fingerprint: sha256_fingerprint(&leaf_der),
        leaf_der,
        leaf_key_der: leaf_key.serialize_der(),
    })
}

/// Colon-separated upper-case SHA-256 hex of `der`.
pub(crate) fn sha256_fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// The rustls server configuration for one cluster (HTTP/1.1 only, like pveproxy).
pub(crate) fn server_config(certs: &ClusterCerts) -> Result<rustls::ServerConfig, SimError> {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let chain = vec![CertificateDer::from(certs.leaf_der.clone())];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(certs.leaf_key_der.clone()));
    let mut cfg = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| SimError::Tls(e.to_string()))?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| SimError::Tls(e.to_string()))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_format() {
        let fp = sha256_fingerprint(b"abc");
        assert_eq!(
            fp,
            "BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD"
        );
    }

    #[test]
    fn generates_distinct_material() {
        let a = generate("dc-a", &["pve-a1".into()]).unwrap();
        let b = generate("dc-b", &[]).unwrap();
        assert!(a.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert_ne!(a.ca_pem, b.ca_pem);
        assert_eq!(a.fingerprint, sha256_fingerprint(&a.leaf_der));
        assert!(server_config(&a).is_ok());
    }
}
