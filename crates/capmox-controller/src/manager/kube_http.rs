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

/// A client for `config`. `kubeconfig_proxy` says whether the kubeconfig's
/// cluster sets `proxy-url`; kube otherwise took `config.proxy_url` from
/// `HTTPS_PROXY` or `https_proxy`. A proxy from those variables is dropped
/// when `NO_PROXY` (else `no_proxy`) covers the API server's host.
///
/// # Errors
/// A message when the configuration keeps a proxy (this build has none,
/// as kube's own client without its proxy features), naming where it came
/// from, or when kube cannot build the TLS configuration or the
/// authentication from it (an unreadable certificate, a failing `exec`
/// plugin).
pub fn client(mut config: kube::Config, kubeconfig_proxy: bool) -> Result<kube::Client, String> {
    if let Some(proxy) = &config.proxy_url {
        refuse_proxy(proxy, &config.cluster_url, kubeconfig_proxy, |name| {
            std::env::var(name).ok()
        })?;
        config.proxy_url = None;
    }
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

/// `Ok` when `proxy`, configured for the API server `server`, may be
/// skipped: it came from an environment variable (not the kubeconfig) and
/// `NO_PROXY` (else `no_proxy`), read through `env`, covers the server's
/// host.
///
/// # Errors
/// A one-line message naming the proxy's source and what to change.
fn refuse_proxy(
    proxy: &http::Uri,
    server: &http::Uri,
    kubeconfig_proxy: bool,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), String> {
    const DIRECT: &str = "this build connects to the API server directly";
    if kubeconfig_proxy {
        return Err(format!(
            "the kubeconfig's cluster sets proxy-url ({proxy}); {DIRECT}: remove proxy-url from the kubeconfig"
        ));
    }
    let nonempty = |name: &str| env(name).filter(|v| !v.trim().is_empty());
    let variable = if nonempty("HTTPS_PROXY").is_some() {
        "HTTPS_PROXY"
    } else {
        "https_proxy"
    };
    let host = server.host().unwrap_or_default();
    let port = server.port_u16().unwrap_or(443);
    if nonempty("NO_PROXY")
        .or_else(|| nonempty("no_proxy"))
        .is_some_and(|list| no_proxy_covers(&list, host, port))
    {
        return Ok(());
    }
    Err(format!(
        "{variable} is set ({proxy}) and NO_PROXY does not cover the API server's host {host}; {DIRECT}: add {host} to NO_PROXY, or unset {variable} for the controller"
    ))
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
        let Err(e) = client(config, true) else {
            panic!("a client was built for a kubeconfig with a proxy");
        };
        assert_eq!(
            e,
            "the kubeconfig's cluster sets proxy-url (http://proxy.example:3128/); this build connects to the API server directly: remove proxy-url from the kubeconfig"
        );

        let proxy: http::Uri = "http://proxy.example:3128".parse().unwrap();
        let server: http::Uri = "https://api.k8s.example:6443".parse().unwrap();
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_string())
            }
        };
        assert_eq!(
            refuse_proxy(&proxy, &server, false, env(&[("https_proxy", "x")])),
            Err("https_proxy is set (http://proxy.example:3128/) and NO_PROXY does not cover the API server's host api.k8s.example; this build connects to the API server directly: add api.k8s.example to NO_PROXY, or unset https_proxy for the controller".to_string())
        );
        let e = refuse_proxy(
            &proxy,
            &server,
            false,
            env(&[("HTTPS_PROXY", "x"), ("NO_PROXY", "other.example")]),
        )
        .unwrap_err();
        assert!(e.starts_with("HTTPS_PROXY is set"), "{e}");
        assert_eq!(
            refuse_proxy(
                &proxy,
                &server,
                false,
                env(&[("HTTPS_PROXY", "x"), ("NO_PROXY", "localhost,.k8s.example")])
            ),
            Ok(())
        );
        // no_proxy is read when NO_PROXY is unset; the kubeconfig's
        // proxy-url is never skipped.
        assert_eq!(
            refuse_proxy(&proxy, &server, false, env(&[("no_proxy", "*")])),
            Ok(())
        );
        assert!(refuse_proxy(&proxy, &server, true, env(&[("NO_PROXY", "*")])).is_err());
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
