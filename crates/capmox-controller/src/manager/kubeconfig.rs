//! Where the Kubernetes client comes from: `--kubeconfig`, the files
//! `KUBECONFIG` names (missing ones skipped, as kubectl does), kube's
//! inference (`~/.kube/config`, the in-cluster service account), and what
//! the manager says when none of them gives a usable configuration or the
//! API server's certificate is refused.

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{ManagerError, kube_http};

/// Builds the Kubernetes client: `--kubeconfig`, else the files `KUBECONFIG`
/// names that exist (merged, missing ones skipped as kubectl does), else
/// kube's inference (`~/.kube/config`, in-cluster service account), and
/// the API server's URL (for logs).
///
/// # Errors
/// [`ManagerError::Kubeconfig`] when no usable configuration is found.
pub async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
) -> Result<(kube::Client, String), ManagerError> {
    let kubeconfig_proxy;
    let config = match kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path).map_err(|e| {
                // kube's own text repeats the path, quoted twice.
                let detail = match e {
                    kube::config::KubeconfigError::ReadConfig(io, _) => {
                        format!("cannot read the file: {io}")
                    }
                    other => other.to_string(),
                };
                ManagerError::Kubeconfig(format!("{}: {detail}", path.display()))
            })?;
            kubeconfig_proxy = sets_proxy_url(&kc);
            kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| ManagerError::Kubeconfig(format!("{}: {e}", path.display())))?
        }
        None => {
            // kube's inference refuses a `KUBECONFIG` list with a missing
            // file (kubectl skips it), naming it with its path quoted twice
            // after its in-cluster attempt: the files are read here.
            let files = match std::env::var_os("KUBECONFIG") {
                Some(v) => {
                    kubeconfig_files(&v.to_string_lossy()).map_err(ManagerError::Kubeconfig)?
                }
                None => Vec::new(),
            };
            if files.is_empty() {
                // `~/.kube/config`, else in-cluster (without proxy).
                if let Some(problem) = no_kubeconfig(
                    std::env::var_os("HOME").map(std::path::PathBuf::from),
                    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some(),
                ) {
                    return Err(ManagerError::Kubeconfig(problem));
                }
                kubeconfig_proxy = Kubeconfig::read().is_ok_and(|kc| sets_proxy_url(&kc));
                kube::Config::infer()
                    .await
                    .map_err(|e| ManagerError::Kubeconfig(e.to_string()))?
            } else {
                let kc = files
                    .iter()
                    .try_fold(Kubeconfig::default(), |merged, p| {
                        Kubeconfig::read_from(p).and_then(|c| merged.merge(c))
                    })
                    .map_err(|e| ManagerError::Kubeconfig(format!("KUBECONFIG: {e}")))?;
                kubeconfig_proxy = sets_proxy_url(&kc);
                let mut config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                        .await
                        .map_err(|e| ManagerError::Kubeconfig(format!("KUBECONFIG: {e}")))?;
                // As kube's inference does.
                config.apply_debug_overrides();
                config
            }
        }
    };
    let server = config.cluster_url.to_string();
    let client = kube_http::client(config, kubeconfig_proxy).map_err(ManagerError::Kubeconfig)?;
    Ok((client, server))
}

/// An error of a request to the API server with its causes
/// ([`crate::error::with_causes`]) and, when the server's certificate was
/// refused, what that means in the kubeconfig's terms (rustls names the
/// problem in Rust's debug form, e.g. `UnknownIssuer`).
pub fn api_error_text(e: &kube::Error) -> String {
    use rustls::CertificateError as C;
    let text = crate::error::with_causes(e);
    let hint = match crate::error::certificate_error(e) {
        None => return text,
        Some(C::NotValidForName | C::NotValidForNameContext { .. }) => {
            "the server's certificate does not name the host of the kubeconfig's server URL"
        }
        Some(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        ) => "the server's certificate is expired or not yet valid (check the clocks)",
        Some(_) => {
            "the server's certificate is not trusted by the kubeconfig's certificate-authority(-data)"
        }
    };
    format!("{text} ({hint})")
}

/// Whether the cluster of `kc`'s current context sets `proxy-url` (the
/// source kube prefers over `HTTPS_PROXY`).
fn sets_proxy_url(kc: &Kubeconfig) -> bool {
    let cluster = kc
        .contexts
        .iter()
        .find(|c| kc.current_context.as_deref() == Some(c.name.as_str()))
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.as_str());
    kc.clusters
        .iter()
        .find(|c| cluster == Some(c.name.as_str()))
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.proxy_url.as_deref())
        .is_some_and(|p| !p.is_empty())
}

/// Why there is no configuration at all, without `--kubeconfig` and
/// `KUBECONFIG`: `home`'s `.kube/config` does not exist and this is not a
/// pod (`in_cluster`: `KUBERNETES_SERVICE_HOST` is set). `None` when one of
/// them may give one (kube's inference then reads it and names its own
/// problems), or when there is no home directory to look in.
fn no_kubeconfig(home: Option<std::path::PathBuf>, in_cluster: bool) -> Option<String> {
    let config = home?.join(".kube").join("config");
    (!in_cluster && !config.exists()).then(|| {
        format!(
            "no kubeconfig: --kubeconfig and KUBECONFIG are not set, {} does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST is not set); give --kubeconfig <file> or set KUBECONFIG",
            config.display()
        )
    })
}

/// The files a `KUBECONFIG` value (paths separated by `:`; empty entries
/// skipped) names that exist, in order; as kubectl, a file that does not
/// exist is skipped.
///
/// # Errors
/// `KUBECONFIG names <path>: cannot read the file: <why>` for a file that
/// exists but cannot be opened, or `KUBECONFIG names no file that exists`
/// when there are entries and none exists.
fn kubeconfig_files(value: &str) -> Result<Vec<std::path::PathBuf>, String> {
    let named: Vec<_> = std::env::split_paths(value)
        .filter(|p| !p.as_os_str().is_empty())
        .collect();
    let mut found = Vec::new();
    for p in &named {
        match std::fs::File::open(p) {
            Ok(_) => found.push(p.clone()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(format!(
                    "KUBECONFIG names {}: cannot read the file: {e}",
                    p.display()
                ));
            }
        }
    }
    if found.is_empty() && !named.is_empty() {
        let list: Vec<_> = named.iter().map(|p| p.display().to_string()).collect();
        return Err(format!(
            "KUBECONFIG names no file that exists ({}); give an existing kubeconfig, or --kubeconfig",
            list.join(", ")
        ));
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_once() {
        let path = std::path::Path::new("/nonexistent/capmox-kubeconfig");
        let Err(e) = kube_client(Some(path)).await else {
            panic!("a missing kubeconfig was accepted");
        };
        let e = e.to_string();
        assert!(
            e.starts_with("kubeconfig: /nonexistent/capmox-kubeconfig: cannot read the file: "),
            "{e}"
        );
        assert_eq!(e.matches("capmox-kubeconfig").count(), 1, "{e}");
    }

    #[test]
    fn no_configuration_at_all_says_what_to_give() {
        let home = std::env::temp_dir().join(format!("capmox-no-home-{}", std::process::id()));
        assert_eq!(
            no_kubeconfig(Some(home.clone()), false),
            Some(format!(
                "no kubeconfig: --kubeconfig and KUBECONFIG are not set, {}/.kube/config does not exist, and this is not a pod (KUBERNETES_SERVICE_HOST is not set); give --kubeconfig <file> or set KUBECONFIG",
                home.display()
            ))
        );
        // In a pod, or with a home kubeconfig, kube's inference reads it.
        assert_eq!(no_kubeconfig(Some(home.clone()), true), None);
        std::fs::create_dir_all(home.join(".kube")).unwrap();
        std::fs::write(home.join(".kube").join("config"), "").unwrap();
        assert_eq!(no_kubeconfig(Some(home.clone()), false), None);
        std::fs::remove_dir_all(&home).unwrap();
        assert_eq!(no_kubeconfig(None, false), None);
    }

    #[test]
    fn missing_files_named_by_kubeconfig_are_skipped_as_kubectl_does() {
        let dir = std::env::temp_dir();
        let readable = dir.join(format!("capmox-kc-{}", std::process::id()));
        std::fs::write(&readable, "apiVersion: v1").unwrap();
        let value = format!("/nonexistent/capmox-kc::{}", readable.display());
        assert_eq!(kubeconfig_files(&value), Ok(vec![readable.clone()]));
        assert_eq!(
            kubeconfig_files("/nonexistent/a:/nonexistent/b"),
            Err("KUBECONFIG names no file that exists (/nonexistent/a, /nonexistent/b); give an existing kubeconfig, or --kubeconfig".to_string())
        );
        // A file that exists but cannot be read is named.
        let below_a_file = format!("{}/x", readable.display());
        let problem = kubeconfig_files(&below_a_file).unwrap_err();
        assert!(
            problem.starts_with(&format!(
                "KUBECONFIG names {below_a_file}: cannot read the file: "
            )),
            "{problem}"
        );
        assert_eq!(kubeconfig_files(""), Ok(vec![]));
        std::fs::remove_file(&readable).unwrap();
    }
}
