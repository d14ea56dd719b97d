//! The Kubernetes client's HTTP stack: kube's default stack (rustls with the
//! kubeconfig's trust roots and client identity, its timeouts, the base URI,
//! authentication, extra headers, kube's retry of 429/503/504), with a
//! bounded connection pool, and responses read without their managed fields
//! ([`super::managed_fields`]).
//!
//! Why not kube's own (`kube::Client::try_from(Config)`): its pool keeps
//! every connection it ever opened for 90 s, without a limit. The admission
//! webhook reads two objects per request it answers, and a burst of writes
//! (a scale-up by hundreds of machines) opened one connection per
//! concurrent read: 74 connections at 300 machines, each with TLS state
//! and read and write buffers, most of them idle afterwards. Here at most
//! [`MAX_IDLE`] idle connections stay, for [`IDLE_TIMEOUT`], and one
//! connection's read buffer grows to at most [`MAX_READ_BUFFER`]
//! (docs/benchmarks.md, "Issue 25, ninth round").
//!
//! Not carried over from kube's stack: its `tracing` layer, which logged
//! every failed request at ERROR without the server's address (the
//! controller logs the errors it gets, with the object they concern), and
//! the client's expiry date for a client certificate from an `exec` plugin
//! (kube computes it internally; a certificate that expires fails the
//! request as before).

use std::time::Duration;

use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use kube::client::ConfigExt;
use kube::client::retry::RetryPolicy;
use tower::retry::RetryLayer;
use tower::{BoxError, ServiceBuilder};

use super::managed_fields;

/// Idle connections kept to the API server (the machine controller's
/// default `--concurrency`, so a steady stream of reconciles reuses them).
pub const MAX_IDLE: usize = 32;

/// How long an idle connection is kept, seconds.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(15);

/// The largest read buffer of one connection, bytes (hyper's default is
/// about 400 KiB). A watch's initial list of thousands of objects is read
/// in pieces of this size.
pub const MAX_READ_BUFFER: usize = 64 * 1024;

/// Where a client's configuration came from, for its proxy rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A kubeconfig; `proxy_url`: its cluster sets `proxy-url`.
    Kubeconfig {
        /// The kubeconfig's cluster sets `proxy-url`.
        proxy_url: bool,
    },
    /// The pod's service account: the proxy variables are not read.
    InCluster,
}

/// A client for `config`. From a kubeconfig ([`Source::Kubeconfig`]), a
/// proxy applies when its cluster sets `proxy-url` (then
/// `config.proxy_url`), else when the environment sets one for the API
/// server's URL scheme, as curl chooses it: `HTTPS_PROXY` (else
/// `https_proxy`) for `https://`, `HTTP_PROXY` (else `http_proxy`) for
/// `http://`, else `ALL_PROXY` (else `all_proxy`); kube reads only
/// `HTTPS_PROXY`, for either scheme. One from the environment is dropped
/// when `NO_PROXY` (else `no_proxy`) covers the API server's host. In a
/// pod ([`Source::InCluster`]) the variables are not read.
///
/// # Errors
/// A message when a proxy applies (this build has none, as kube's own
/// client without its proxy features), naming where it came from, or when
/// kube cannot build the TLS configuration or the authentication from it
/// (an unreadable certificate, a failing `exec` plugin).
pub fn client(mut config: kube::Config, source: Source) -> Result<kube::Client, String> {
    if let Source::Kubeconfig { proxy_url } = source {
        let from_kubeconfig = config.proxy_url.as_ref().filter(|_| proxy_url);
        refuse_proxy(from_kubeconfig, &config.cluster_url, |name| {
            std::env::var(name).ok()
        })?;
    }
    config.proxy_url = None;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    let https = config
        .rustls_https_connector_with_connector(http)
        .map_err(|e| format!("TLS configuration: {e}"))?;
    let mut connector = TimeoutConnector::new(https);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let pool = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(MAX_IDLE)
        .pool_idle_timeout(IDLE_TIMEOUT)
        .http1_max_buf_size(MAX_READ_BUFFER)
        .build(connector);
    let auth = config
        .auth_layer()
        .map_err(|e| format!("authentication: {e}"))?;
    let headers = config
        .extra_headers_layer()
        .map_err(|e| format!("extra headers: {e}"))?;
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(auth)
        .layer(headers)
        .map_err(BoxError::from)
        .map_response(|mut r: http::Response<_>| {
            // The body is rewritten: its length is no longer the header's.
            r.headers_mut().remove(http::header::CONTENT_LENGTH);
            r.map(managed_fields::Stripped::new)
        })
        .service(pool);
    Ok(kube::client::ClientBuilder::new(service, config.default_namespace).build())
}

/// `Ok` when no proxy applies to the API server `server`: the kubeconfig
/// sets none (`kubeconfig_proxy`), and the environment (read through
/// `env`) sets none for the server's URL scheme ([`env_proxy`]) or
/// `NO_PROXY` (else `no_proxy`) covers the server's host.
///
/// # Errors
/// A one-line message naming the proxy's source and what to change.
fn refuse_proxy(
    kubeconfig_proxy: Option<&http::Uri>,
    server: &http::Uri,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    const DIRECT: &str = "this build connects to the API server directly";
    if let Some(proxy) = kubeconfig_proxy {
        return Err(format!(
            "the kubeconfig's cluster sets proxy-url ({proxy}); {DIRECT}: remove proxy-url from the kubeconfig"
        ));
    }
    let Some((variable, proxy)) = env_proxy(server, &env) else {
        return Ok(());
    };
    let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let host = server.host().unwrap_or_default();
    let http = server.scheme_str() == Some("http");
    let port = server.port_u16().unwrap_or(if http { 80 } else { 443 });
    if nonempty("NO_PROXY")
        .or_else(|| nonempty("no_proxy"))
        .is_some_and(|list| no_proxy_covers(&list, host, port))
    {
        return Ok(());
    }
    // As kube shows a proxy URL (`http://proxy:3128/`), when it is one.
    let proxy = proxy
        .trim()
        .parse::<http::Uri>()
        .map_or_else(|_| proxy.trim().to_string(), |u| u.to_string());
    Err(format!(
        "{variable} is set ({proxy}) and NO_PROXY does not cover the API server's host {host}; {DIRECT}: add {host} to NO_PROXY, or unset {variable} for the controller"
    ))
}

/// The proxy variable that applies to `server` and its value, as curl
/// chooses it: the first non-empty of `HTTPS_PROXY`, `https_proxy` (an
/// `https://` server) or `HTTP_PROXY`, `http_proxy` (an `http://` one),
/// then `ALL_PROXY`, `all_proxy`.
fn env_proxy(
    server: &http::Uri,
    env: &impl Fn(&str) -> Option<String>,
) -> Option<(&'static str, String)> {
    let scheme = if server.scheme_str() == Some("http") {
        ["HTTP_PROXY", "http_proxy"]
    } else {
        ["HTTPS_PROXY", "https_proxy"]
    };
    scheme
        .into_iter()
        .chain(["ALL_PROXY", "all_proxy"])
        .find_map(|name| {
            env(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (name, v))
        })
}

/// Whether the `NO_PROXY` list `list` (comma-separated) covers `host` at
/// `port`, as Go's `net/http` (kubectl) reads it: `*`; an IP address or a
/// CIDR range holding the host's address; a domain, `name` or `.name`
/// (also `*.name`), matching the name itself and its subdomains; each
/// optionally with `:port`.
pub fn no_proxy_covers(list: &str, host: &str, port: u16) -> bool {
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    let host_ip = host.parse::<std::net::IpAddr>().ok();
    list.split(',')
        .map(|e| e.trim().to_ascii_lowercase())
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            if let Ok(net) = entry.parse::<ipnet::IpNet>() {
                return host_ip.is_some_and(|ip| net.contains(&ip));
            }
            if let Ok(ip) = entry.trim_start_matches('[').trim_end_matches(']').parse() {
                return host_ip == Some(ip);
            }
            // `name:port` or `[v6]:port`.
            let (name, entry_port) = match entry.rsplit_once(':') {
                Some((name, p)) => match p.parse::<u16>() {
                    Ok(p) => (name, Some(p)),
                    Err(_) => return false,
                },
                None => (entry.as_str(), None),
            };
            if entry_port.is_some_and(|p| p != port) {
                return false;
            }
            let name = name.trim_start_matches('[').trim_end_matches(']');
            if let Ok(ip) = name.parse::<std::net::IpAddr>() {
                return host_ip == Some(ip);
            }
            let domain = name.trim_start_matches('*').trim_start_matches('.');
            !domain.is_empty()
                && (host == domain
                    || host
                        .strip_suffix(domain)
                        .is_some_and(|rest| rest.ends_with('.')))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_refused_with_its_source_and_what_to_change() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
        let Err(e) = client(config, Source::Kubeconfig { proxy_url: true }) else {
            panic!("a client was built for a kubeconfig with a proxy");
        };
        assert_eq!(
            e,
            "the kubeconfig's cluster sets proxy-url (http://proxy.example:3128/); this build connects to the API server directly: remove proxy-url from the kubeconfig"
        );

        let server: http::Uri = "https://api.k8s.example:6443".parse().unwrap();
        assert_eq!(
            refuse_proxy(
                None,
                &server,
                env(&[("https_proxy", "http://proxy.example:3128")])
            ),
            Err("https_proxy is set (http://proxy.example:3128/) and NO_PROXY does not cover the API server's host api.k8s.example; this build connects to the API server directly: add api.k8s.example to NO_PROXY, or unset https_proxy for the controller".to_string())
        );
        let e = refuse_proxy(
            None,
            &server,
            env(&[("HTTPS_PROXY", "x"), ("NO_PROXY", "other.example")]),
        )
        .unwrap_err();
        assert!(e.starts_with("HTTPS_PROXY is set (x)"), "{e}");
        assert_eq!(
            refuse_proxy(
                None,
                &server,
                env(&[("HTTPS_PROXY", "x"), ("NO_PROXY", "localhost,.k8s.example")])
            ),
            Ok(())
        );
        // no_proxy is read when NO_PROXY is unset; the kubeconfig's
        // proxy-url is never skipped.
        assert_eq!(
            refuse_proxy(
                None,
                &server,
                env(&[("https_proxy", "x"), ("no_proxy", "*")])
            ),
            Ok(())
        );
        let proxy: http::Uri = "http://proxy.example:3128".parse().unwrap();
        assert!(refuse_proxy(Some(&proxy), &server, env(&[("NO_PROXY", "*")])).is_err());
        assert_eq!(refuse_proxy(None, &server, env(&[])), Ok(()));
    }

    /// A variable list for [`refuse_proxy`]'s `env`.
    fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name: &str| {
            vars.iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_string())
        }
    }

    #[test]
    fn all_proxy_applies_when_no_proxy_of_the_scheme_is_set() {
        let https: http::Uri = "https://api.example:6443".parse().unwrap();
        let e = refuse_proxy(
            None,
            &https,
            env(&[("ALL_PROXY", "socks5://s.example:1080")]),
        )
        .unwrap_err();
        assert_eq!(
            e,
            "ALL_PROXY is set (socks5://s.example:1080/) and NO_PROXY does not cover the API server's host api.example; this build connects to the API server directly: add api.example to NO_PROXY, or unset ALL_PROXY for the controller"
        );
        let e = refuse_proxy(None, &https, env(&[("all_proxy", "http://p:3128")])).unwrap_err();
        assert!(e.starts_with("all_proxy is set"), "{e}");
        // The scheme's own variable wins; NO_PROXY covers ALL_PROXY too.
        let e = refuse_proxy(
            None,
            &https,
            env(&[("ALL_PROXY", "http://a:1"), ("HTTPS_PROXY", "http://h:1")]),
        )
        .unwrap_err();
        assert!(e.starts_with("HTTPS_PROXY is set"), "{e}");
        assert_eq!(
            refuse_proxy(
                None,
                &https,
                env(&[("ALL_PROXY", "http://a:1"), ("NO_PROXY", "api.example")])
            ),
            Ok(())
        );
    }

    #[test]
    fn an_http_server_takes_http_proxy_not_https_proxy() {
        let http: http::Uri = "http://api.example:8080".parse().unwrap();
        assert_eq!(
            refuse_proxy(None, &http, env(&[("HTTPS_PROXY", "http://h:1")])),
            Ok(())
        );
        let e = refuse_proxy(None, &http, env(&[("HTTP_PROXY", "http://h:1")])).unwrap_err();
        assert!(e.starts_with("HTTP_PROXY is set (http://h:1/)"), "{e}");
        let e = refuse_proxy(None, &http, env(&[("http_proxy", "http://h:1")])).unwrap_err();
        assert!(e.starts_with("http_proxy is set"), "{e}");
        let e = refuse_proxy(None, &http, env(&[("ALL_PROXY", "http://a:1")])).unwrap_err();
        assert!(e.starts_with("ALL_PROXY is set"), "{e}");
        // NO_PROXY's ports: an http:// server without one is at port 80.
        let bare: http::Uri = "http://api.example".parse().unwrap();
        let proxied = env(&[("HTTP_PROXY", "http://h:1"), ("NO_PROXY", "api.example:80")]);
        assert_eq!(refuse_proxy(None, &bare, proxied), Ok(()));
        let https: http::Uri = "https://api.example".parse().unwrap();
        let proxied = env(&[
            ("HTTPS_PROXY", "http://h:1"),
            ("NO_PROXY", "api.example:80"),
        ]);
        assert!(refuse_proxy(None, &https, proxied).is_err());
    }

    #[test]
    fn no_proxy_entries_match_as_kubectl_reads_them() {
        let covers = |list: &str, host: &str| no_proxy_covers(list, host, 6443);
        assert!(covers("*", "api.example"));
        assert!(covers("api.example", "api.example"));
        assert!(covers("example", "api.example"));
        assert!(covers(".example", "api.example"));
        assert!(covers("*.example", "api.example"));
        assert!(covers(" other , API.Example ", "api.example"));
        assert!(!covers("pi.example", "api.example"));
        assert!(!covers(".example", "api.example.org"));
        assert!(covers("10.0.0.0/8", "10.1.2.3"));
        assert!(!covers("10.0.0.0/8", "11.1.2.3"));
        assert!(covers("192.168.1.10", "192.168.1.10"));
        assert!(!covers("192.168.1.10", "192.168.1.11"));
        assert!(covers("fd00::/8", "[fd00::1]"));
        assert!(covers("api.example:6443", "api.example"));
        assert!(!covers("api.example:443", "api.example"));
        assert!(!covers("", "api.example"));
        assert!(!covers("10.0.0.0/8", "api.example"));
    }
}
