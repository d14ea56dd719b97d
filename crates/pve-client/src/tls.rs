//! Builds the rustls client configuration for a [`TlsMode`], including the
//! fingerprint-pinning verifier.
//!
//! Trust roots for [`TlsMode::Verify`] come from `rustls-native-certs` (the OS
//! store, loaded once per process) plus the configured PEM bundle. The crypto
//! provider is always rustls's `ring` provider, passed explicitly.

use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::config::{Fingerprint, TlsMode};

/// Installs rustls's `ring` provider as the process default if none is set
/// (reqwest's `rustls-no-provider` requires one). Safe to call repeatedly.
pub(crate) fn install_ring_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Builds the rustls config for `mode`. Errors are human-readable reasons
/// (the caller wraps them in `PveError::InvalidConfig`).
pub(crate) fn client_config(mode: &TlsMode) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let mut config = match mode {
        TlsMode::Verify { ca_pem } => {
            let roots = root_store(ca_pem.as_deref())?;
            builder.with_root_certificates(roots).with_no_client_auth()
        }
        TlsMode::Fingerprints(pins) => {
            if pins.is_empty() {
                return Err("fingerprint mode needs at least one fingerprint".into());
            }
            let v = PinnedVerifier {
                pins: Some(pins.clone()),
                algs: provider.signature_verification_algorithms,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(v))
                .with_no_client_auth()
        }
        TlsMode::Insecure => {
            let v = PinnedVerifier {
                pins: None,
                algs: provider.signature_verification_algorithms,
            };
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(v))
                .with_no_client_auth()
        }
    };
    // pveproxy speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Parses every certificate of a PEM bundle (one or more blocks, e.g.
/// intermediate + root). Non-certificate blocks are ignored.
pub(crate) fn parse_pem_bundle(pem: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("CA bundle is not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("CA bundle contains no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs)
}

fn native_roots() -> &'static [CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let res = rustls_native_certs::load_native_certs();
        for e in &res.errors {
            tracing::debug!(error = %e, "could not load some system CA certificates");
        }
        res.certs
    })
}

fn root_store(ca_pem: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    if let Some(pem) = ca_pem {
        for (i, der) in parse_pem_bundle(pem)?.into_iter().enumerate() {
            roots.add(der).map_err(|e| {
                format!(
                    "CA bundle certificate #{} is not usable as a trust anchor: {e}",
                    i + 1
                )
            })?;
        }
    }
    let (_added, _ignored) = roots.add_parsable_certificates(native_roots().iter().cloned());
    if roots.is_empty() {
        return Err(
            "no trust roots: the system CA store is empty and no CA bundle was given".into(),
        );
    }
    Ok(roots)
}

/// Accepts a server certificate whose SHA-256 fingerprint is pinned (or any
/// certificate when `pins` is `None`, i.e. insecure mode), and always verifies
/// the handshake signature with the certificate's key, so the peer must hold
/// the private key of the certificate it presents.
#[derive(Debug)]
struct PinnedVerifier {
    pins: Option<Vec<Fingerprint>>,
    algs: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(pins) = &self.pins else {
            return Ok(ServerCertVerified::assertion());
        };
        let seen = Fingerprint::of_der(end_entity.as_ref());
        if pins.contains(&seen) {
            Ok(ServerCertVerified::assertion())
        } else {
            Err(rustls::Error::General(format!(
                "server certificate fingerprint {seen} matches none of the {} pinned SHA-256 fingerprint(s)",
                pins.len()
            )))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algs.supported_schemes()
    }
}

/// The default provider's algorithms, for tests.
#[cfg(test)]
fn ring_algs() -> WebPkiSupportedAlgorithms {
    let p: rustls::crypto::CryptoProvider = rustls::crypto::ring::default_provider();
    p.signature_verification_algorithms
}

#[cfg(test)]
mod tests {
    use super::*;

    fn self_signed() -> (String, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), cert.der().to_vec())
    }

    #[test]
    fn pem_bundle_with_two_blocks() {
        let (a, _) = self_signed();
        let (b, _) = self_signed();
        let bundle = format!("{a}\n# comment lines between blocks are fine\n{b}");
        assert_eq!(parse_pem_bundle(&bundle).unwrap().len(), 2);
        assert!(root_store(Some(&bundle)).unwrap().len() >= 2);
    }

    #[test]
    fn garbage_pem_is_an_error() {
        let e = parse_pem_bundle("not a certificate").unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let e = parse_pem_bundle("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n")
            .unwrap_err();
        assert!(e.contains("not valid PEM"), "{e}");
        assert!(
            client_config(&TlsMode::Verify {
                ca_pem: Some("garbage".into())
            })
            .is_err()
        );
    }

    #[test]
    fn empty_pin_list_is_refused() {
        assert!(client_config(&TlsMode::Fingerprints(vec![])).is_err());
        assert!(client_config(&TlsMode::Insecure).is_ok());
    }

    #[test]
    fn pinned_verifier_compares_leaf_sha256() {
        let (_, der) = self_signed();
        let fp = Fingerprint::of_der(&der);
        let v = PinnedVerifier {
            pins: Some(vec![fp]),
            algs: ring_algs(),
        };
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let cert = CertificateDer::from(der.clone());
        assert!(
            v.verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
                .is_ok()
        );

        let other = PinnedVerifier {
            pins: Some(vec![Fingerprint([7; 32])]),
            algs: ring_algs(),
        };
        let e = other
            .verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
            .unwrap_err();
        assert!(e.to_string().contains(&fp.to_string()), "{e}");

        let insecure = PinnedVerifier {
            pins: None,
            algs: ring_algs(),
        };
        assert!(
            insecure
                .verify_server_cert(&cert, &[], &name, &[], UnixTime::now())
                .is_ok()
        );
    }
}
