//! The webhook server's TLS: the certificate from the files is served, a
//! rotated certificate is served without a restart, HTTP/1.1 only, and a
//! missing certificate stops the start with the file named.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_controller::metrics::Metrics;
use capmox_controller::webhook::{self, WebhookError};
use serde_json::{Value, json};

use crate::support::webhook::{Pair, SERVICE, options, serving_pair, temp_dir, write_pair};

/// A client that is never used (the `/convert` route reads nothing).
fn unused_kube() -> kube::Client {
    let cfg = kube::Config::new("https://127.0.0.1:1".parse().unwrap());
    kube::Client::try_from(cfg).unwrap()
}

/// One `/convert` call on a new connection trusting every CA in `cas`: the
/// certificate the server presented, the HTTP version and the answer.
async fn call(addr: SocketAddr, cas: &[&Pair]) -> (Vec<u8>, reqwest::Version, Value) {
    let host = format!("{}.{}.svc", SERVICE.1, SERVICE.0);
    let roots = cas
        .iter()
        .flat_map(|p| reqwest::Certificate::from_pem_bundle(p.ca_pem.as_bytes()).unwrap())
        .collect::<Vec<_>>();
    let client = reqwest::Client::builder()
        .tls_certs_only(roots)
        .resolve(&host, addr)
        .tls_info(true)
        .no_proxy()
        .build()
        .unwrap();
    let review = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "u-1", "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "objects": []}});
    let resp = client
        .post(format!("https://{host}:{}/convert", addr.port()))
        .json(&review)
        .send()
        .await
        .unwrap();
    let cert = resp
        .extensions()
        .get::<reqwest::tls::TlsInfo>()
        .and_then(|i| i.peer_certificate())
        .unwrap()
        .to_vec();
    let version = resp.version();
    (cert, version, resp.json().await.unwrap())
}

#[tokio::test]
async fn a_rotated_certificate_is_served_without_a_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = temp_dir("webhook-rotation");
    let first = serving_pair();
    write_pair(&dir, &first);
    let server = webhook::serve(
        &options(&dir, Duration::from_millis(20)),
        unused_kube(),
        Arc::new(Metrics::new()),
        capmox_controller::api::conversion::convert_object,
    )
    .await
    .unwrap();
    let (cert, version, answer) = call(server.addr, &[&first]).await;
    assert_eq!(cert, first.cert_der);
    assert_eq!(version, reqwest::Version::HTTP_11, "no HTTP/2");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["result"]["status"], "Success");

    // cert-manager renews: new files, another CA.
    let second = serving_pair();
    write_pair(&dir, &second);
    let start = Instant::now();
    loop {
        let (cert, _, _) = call(server.addr, &[&first, &second]).await;
        if cert == second.cert_der {
            break;
        }
        assert_eq!(cert, first.cert_der, "only the old or the new certificate");
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the new certificate was never served"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.shutdown(Duration::from_secs(5)).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test]
async fn a_missing_certificate_stops_the_start_naming_the_file() {
    let dir = temp_dir("webhook-missing");
    let e = webhook::serve(
        &options(&dir, Duration::from_secs(10)),
        unused_kube(),
        Arc::new(Metrics::new()),
        capmox_controller::api::conversion::convert_object,
    )
    .await
    .unwrap_err();
    assert!(matches!(e, WebhookError::Certs(_)), "{e}");
    assert!(
        e.to_string()
            .contains(&dir.join("tls.crt").display().to_string()),
        "{e}"
    );
}
