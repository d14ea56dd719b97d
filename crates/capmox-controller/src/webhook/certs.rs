//! The serving certificate: a PEM chain and key from two files (what a
//! cert-manager `Certificate` Secret mounted as a volume provides: `tls.crt`,
//! `tls.key`, `ca.crt`), turned into a rustls server configuration, and
//! re-read when the files change (cert-manager renews before expiry; the
//! kubelet swaps the volume's files atomically).
//!
//! A pair that cannot be read or parsed keeps the previous certificate
//! served (a half-written rotation heals at the next poll); at start it is
//! an error.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum_server::tls_rustls::RustlsConfig;
use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Why a certificate pair cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file holds no usable PEM certificate or key.
    #[error("{path}: {message}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("cannot use the certificate {cert} with the key {key}: {message}")]
    Tls {
        /// Certificate file.
        cert: PathBuf,
        /// Key file.
        key: PathBuf,
        /// rustls's reason.
        message: String,
    },
}

/// The two files of a serving certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFiles {
    /// PEM certificate chain (leaf first).
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

impl CertFiles {
    /// `dir/cert_name` and `dir/key_name`.
    pub fn in_dir(dir: &Path, cert_name: &str, key_name: &str) -> CertFiles {
        CertFiles {
            cert: dir.join(cert_name),
            key: dir.join(key_name),
        }
    }

    fn read(&self) -> Result<(Vec<u8>, Vec<u8>), CertError> {
        let read = |p: &Path| {
            std::fs::read(p).map_err(|source| CertError::Read {
                path: p.to_path_buf(),
                source,
            })
        };
        Ok((read(&self.cert)?, read(&self.key)?))
    }
}

/// The file contents a configuration was built from (to notice rotation).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loaded {
    cert_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

/// A rustls server configuration for the pair's contents: ring provider,
/// TLS 1.2 and 1.3, no client authentication, ALPN `http/1.1` only.
///
/// # Errors
/// [`CertError::Pem`] when a file holds no certificate or key,
/// [`CertError::Tls`] when rustls refuses the pair.
pub fn server_config(
    files: &CertFiles,
    cert_pem: &[u8],
    key_pem: &[u8],
) -> Result<Arc<ServerConfig>, CertError> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| CertError::Pem {
            path: files.cert.clone(),
            message: e.to_string(),
        })?;
    if chain.is_empty() {
        return Err(CertError::Pem {
            path: files.cert.clone(),
            message: "no PEM certificate in the file".into(),
        });
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| CertError::Pem {
        path: files.key.clone(),
        message: format!("no usable PEM private key: {e}"),
    })?;
    let tls = |e: rustls::Error| CertError::Tls {
        cert: files.cert.clone(),
        key: files.key.clone(),
        message: e.to_string(),
    };
    let mut cfg =
        ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(tls)?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(tls)?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Reads the pair and builds its configuration.
///
/// # Errors
/// As [`server_config`], and [`CertError::Read`].
pub fn load(files: &CertFiles) -> Result<(Arc<ServerConfig>, Loaded), CertError> {
    let (cert_pem, key_pem) = files.read()?;
    let cfg = server_config(files, &cert_pem, &key_pem)?;
    Ok((cfg, Loaded { cert_pem, key_pem }))
}

/// Re-reads the pair every `period` until `stop` resolves; a changed pair
/// that builds replaces the configuration of `served` (connections already
/// open keep theirs). Logs each replacement and each unusable pair.
pub async fn watch(
    files: CertFiles,
    served: RustlsConfig,
    mut current: Loaded,
    period: Duration,
    stop: impl std::future::Future<Output = ()>,
) {
    tokio::pin!(stop);
    // The last unusable pair, warned about once.
    let mut bad: Option<Loaded> = None;
    loop {
        tokio::select! {
            () = &mut stop => return,
            () = tokio::time::sleep(period) => {}
        }
        let (cert_pem, key_pem) = match files.read() {
            Ok(pair) => pair,
            Err(e) => {
                tracing::warn!(error = %e, "webhook certificate not readable; still serving the previous one");
                continue;
            }
        };
        let read = Loaded { cert_pem, key_pem };
        if read == current || bad.as_ref() == Some(&read) {
            continue;
        }
        match server_config(&files, &read.cert_pem, &read.key_pem) {
            Ok(cfg) => {
                served.reload_from_config(cfg);
                current = read;
                bad = None;
                tracing::info!(cert = %files.cert.display(), "webhook serving certificate reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "new webhook certificate not usable; still serving the previous one");
                bad = Some(read);
            }
        }
    }
}
