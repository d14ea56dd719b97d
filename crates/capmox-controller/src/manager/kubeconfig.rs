//! Where the Kubernetes client comes from: `--kubeconfig`, the files
//! `KUBECONFIG` names (missing ones skipped, as kubectl does), kube's
//! inference (`~/.kube/config`, the in-cluster service account), and what
//! the manager says when none of them gives a usable configuration (or the
//! one read selects no context), when the API server's certificate is
//! refused, or when the server answers without TLS.

use kube::config::{KubeConfigOptions, Kubeconfig};

use super::{ManagerError, kube_http};

/// Builds the Kubernetes client: `--kubeconfig`, else the files `KUBECONFIG`
/// names that exist (merged, missing ones skipped as kubectl does), else
/// kube's inference (`~/.kube/config`, in-cluster service account), and
/// the API server's URL (for logs).
///
/// # Errors
/// [`ManagerError::Kubeconfig`] when no usable configuration is found,
/// when the kubeconfig read sets no `current-context`, or when a proxy
/// applies ([`kube_http::client`]).
pub async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
) -> Result<(kube::Client, String), ManagerError> {
    let (config, source) = match kubeconfig {
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
            let use_context = format!("kubectl --kubeconfig {} config use-context", path.display());
            if let Some(problem) =
                no_current_context(&kc, &path.display().to_string(), &use_context)
            {
                return Err(ManagerError::Kubeconfig(problem));
            }
            let source = kube_http::Source::Kubeconfig {
                proxy_url: sets_proxy_url(&kc),
            };
            let config = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                .await
                .map_err(|e| ManagerError::Kubeconfig(format!("{}: {e}", path.display())))?;
            (config, source)
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
                let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
                let in_cluster = std::env::var_os("KUBERNETES_SERVICE_HOST").is_some();
                if let Some(problem) = no_kubeconfig(home.clone(), in_cluster) {
                    return Err(ManagerError::Kubeconfig(problem));
                }
                if let Some(path) = home.map(|h| h.join(".kube").join("config"))
                    && !in_cluster
                    && let Ok(kc) = Kubeconfig::read_from(&path)
                    && let Some(problem) = no_current_context(
                        &kc,
                        &path.display().to_string(),
                        "kubectl config use-context",
                    )
                {
                    return Err(ManagerError::Kubeconfig(problem));
                }
                inferred().await.map_err(ManagerError::Kubeconfig)?
            } else {
                let kc = files
                    .iter()
                    .try_fold(Kubeconfig::default(), |merged, p| {
                        Kubeconfig::read_from(p).and_then(|c| merged.merge(c))
                    })
                    .map_err(|e| ManagerError::Kubeconfig(format!("KUBECONFIG: {e}")))?;
                let named: Vec<_> = files.iter().map(|p| p.display().to_string()).collect();
                if let Some(problem) = no_current_context(
                    &kc,
                    &format!("KUBECONFIG ({})", named.join(", ")),
                    "kubectl config use-context",
                ) {
                    return Err(ManagerError::Kubeconfig(problem));
                }
                let source = kube_http::Source::Kubeconfig {
                    proxy_url: sets_proxy_url(&kc),
                };
                let mut config =
                    kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
                        .await
                        .map_err(|e| ManagerError::Kubeconfig(format!("KUBECONFIG: {e}")))?;
                // As kube's inference does.
                config.apply_debug_overrides();
                (config, source)
            }
        }
    };
    let server = config.cluster_url.to_string();
    let client = kube_http::client(config, source).map_err(ManagerError::Kubeconfig)?;
    Ok((client, server))
}

/// kube's inference (`kube::Config::infer`: the kubeconfig, else the
/// pod's service account), saying which one it took: the proxy variables
/// apply to a kubeconfig only ([`kube_http::client`]).
///
/// # Errors
/// As kube's inference, when neither gives a configuration.
async fn inferred() -> Result<(kube::Config, kube_http::Source), String> {
    let (mut config, source) = match kube::Config::from_kubeconfig(&KubeConfigOptions::default())
        .await
    {
        Ok(config) => {
            let proxy_url = Kubeconfig::read().is_ok_and(|kc| sets_proxy_url(&kc));
            (config, kube_http::Source::Kubeconfig { proxy_url })
        }
        Err(kubeconfig) => match kube::Config::incluster() {
            Ok(config) => (config, kube_http::Source::InCluster),
            Err(in_cluster) => {
                // kube's `InferConfigError`, which it builds privately.
                return Err(format!(
                    "failed to infer config: in-cluster: ({in_cluster}), kubeconfig: ({kubeconfig})"
                ));
            }
        },
    };
    config.apply_debug_overrides();
    Ok((config, source))
}

/// What to do when `kc` (read from `file`) selects no context: its
/// `current-context` is missing or empty (kube's own text, "failed to
/// determine current context", names neither the file nor the fix).
/// `use_context` is the kubectl command that sets it, without the name.
fn no_current_context(kc: &Kubeconfig, file: &str, use_context: &str) -> Option<String> {
    if kc
        .current_context
        .as_deref()
        .is_some_and(|c| !c.trim().is_empty())
    {
        return None;
    }
    let names: Vec<_> = kc.contexts.iter().map(|c| c.name.as_str()).collect();
    Some(if names.is_empty() {
        format!(
            "{file}: no current-context is set, and there is no context to choose; give --kubeconfig a kubeconfig with a cluster, a user, a context and current-context"
        )
    } else {
        format!(
            "{file}: no current-context is set; choose one of its contexts ({}) with `{use_context} <name>`, or give --kubeconfig a kubeconfig that sets one",
            names.join(", ")
        )
    })
}

/// An error of a request to the API server with its causes
/// ([`crate::error::with_causes`]) and, when the TLS handshake failed,
/// what that means in the kubeconfig's terms: the server's certificate was
/// refused (rustls names the problem in Rust's debug form, e.g.
/// `UnknownIssuer`), or the server answered without TLS (rustls: "received
/// corrupt message of type InvalidContentType").
pub fn api_error_text(e: &kube::Error) -> String {
    use rustls::CertificateError as C;
    let text = crate::error::with_causes(e);
    let hint = match crate::error::tls_error(e) {
        Some(rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)) => {
            "the server answered without TLS: check the scheme and port of the kubeconfig's server URL (https:// to a port that serves plain HTTP?)"
        }
        Some(rustls::Error::InvalidCertificate(problem)) => match problem {
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the server's certificate does not name the host of the kubeconfig's server URL"
            }
            C::Expired
            | C::ExpiredContext { .. }
            | C::NotValidYet
            | C::NotValidYetContext { .. } => {
                "the server's certificate is expired or not yet valid (check the clocks)"
            }
            _ => {
                "the server's certificate is not trusted by the kubeconfig's certificate-authority(-data)"
            }
        },
        _ => return text,
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
    fn no_current_context_names_the_file_and_the_contexts() {
        let mut kc = Kubeconfig::default();
        let use_context = "kubectl config use-context";
        assert_eq!(
            no_current_context(&kc, "/kc", use_context),
            Some("/kc: no current-context is set, and there is no context to choose; give --kubeconfig a kubeconfig with a cluster, a user, a context and current-context".to_string())
        );
        kc = Kubeconfig::from_yaml("contexts:\n- name: dev\n- name: prod\n").unwrap();
        let expected = Some("/kc: no current-context is set; choose one of its contexts (dev, prod) with `kubectl config use-context <name>`, or give --kubeconfig a kubeconfig that sets one".to_string());
        assert_eq!(no_current_context(&kc, "/kc", use_context), expected);
        kc.current_context = Some(String::new());
        assert_eq!(no_current_context(&kc, "/kc", use_context), expected);
        kc.current_context = Some("dev".to_string());
        assert_eq!(no_current_context(&kc, "/kc", use_context), None);
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
