//! The Kubernetes client's HTTP stack: kube's default stack (rustls with the
//! kubeconfig's trust roots and client identity, its timeouts, the base URI,
//! authentication, extra headers, kube's retry of 429/503/504), with a
//! bounded connection pool.
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

/// A client for `config`.
///
/// # Errors
/// A message when the configuration names a proxy (this build has none,
/// as kube's own client without its proxy features), or when kube cannot
/// build the TLS configuration or the authentication from it (an unreadable
/// certificate, a failing `exec` plugin).
pub fn client(config: kube::Config) -> Result<kube::Client, String> {
    if let Some(proxy) = &config.proxy_url {
        return Err(format!(
            "a proxy is configured ({proxy}, from the kubeconfig's proxy-url or else HTTPS_PROXY); this build connects to the API server directly: remove proxy-url, or unset HTTPS_PROXY for the controller (NO_PROXY is not read)"
        ));
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
        .map_response(|r: http::Response<_>| r.map(managed_fields::Stripped::new))
        .service(pool);
    Ok(kube::client::ClientBuilder::new(service, config.default_namespace).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_is_refused_with_what_to_change() {
        let mut config = kube::Config::new("https://127.0.0.1:6443".parse().unwrap());
        config.proxy_url = Some("http://proxy.example:3128".parse().unwrap());
        let Err(e) = client(config) else {
            panic!("a client was built for a kubeconfig with a proxy");
        };
        assert!(e.contains("proxy.example:3128"), "{e}");
        assert!(e.contains("remove proxy-url, or unset HTTPS_PROXY"), "{e}");
    }
}
