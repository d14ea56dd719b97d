//! Client configuration for the simulator: a `kube::Config` and a kubeconfig file
//! (cluster, user with the bearer token, context `kube-sim`, namespace `default`).

use crate::error::KubeSimError;
use base64::Engine as _;
use serde_json::{Value, json};
use std::path::Path;

/// A `kube::Config` trusting `ca_der` and sending `token`.
pub fn kube_config(url: &str, ca_der: &[u8], token: &str) -> kube::Config {
    let uri = url
        .parse::<axum::http::Uri>()
        .unwrap_or_else(|_| axum::http::Uri::from_static("https://127.0.0.1"));
    let mut cfg = kube::Config::new(uri);
    cfg.root_cert = Some(vec![ca_der.to_vec()]);
    cfg.default_namespace = "default".to_string();
    if let Ok(auth) = serde_json::from_value::<kube::config::AuthInfo>(json!({"token": token})) {
        cfg.auth_info = auth;
    }
    cfg
}

/// The kubeconfig document.
pub fn document(url: &str, ca_pem: &str, token: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "kube-sim", "cluster": {"server": url, "certificate-authority-data": ca}}],
        "users": [{"name": "kube-sim", "user": {"token": token}}],
        "contexts": [{"name": "kube-sim", "context": {"cluster": "kube-sim", "user": "kube-sim", "namespace": "default"}}],
        "current-context": "kube-sim",
        "preferences": {}
    })
}

/// Writes the kubeconfig (mode 0600 on Unix, since it holds the token).
pub fn write(path: &Path, url: &str, ca_pem: &str, token: &str) -> Result<(), KubeSimError> {
    let io = |source| KubeSimError::Io {
        path: path.to_path_buf(),
        source,
    };
    let text = serde_saphyr::to_string(&document(url, ca_pem, token)).map_err(|e| {
        KubeSimError::Parse {
            what: "kubeconfig".into(),
            message: e.to_string(),
        }
    })?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    use std::io::Write;
    let mut f = opts.open(path).map_err(io)?;
    f.write_all(text.as_bytes()).map_err(io)
}
