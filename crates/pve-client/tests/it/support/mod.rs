//! A scripted HTTPS/1.1 server for wire-level tests: it records every request
//! and answers with exactly the bytes a test gives it — including a custom
//! status line with no JSON message (older PVE servers), or hanging up without
//! an answer (pveproxy closing a kept-alive connection).

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// 0-based index of the TCP connection it came on.
    pub conn: usize,
    pub method: String,
    /// Path and query, e.g. `/api2/json/version`.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn body_str(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What to do with a request.
pub enum Reply {
    /// Write these bytes; keep the connection open unless they say
    /// `Connection: close`.
    Raw(Vec<u8>),
    /// Close the connection without answering.
    HangUp,
    /// Never answer (the client's timeout must fire).
    Stall,
}

pub type Handler = Arc<dyn Fn(&Recorded, usize) -> Reply + Send + Sync>;

/// A `200 OK` with `{"data": <data>}`.
pub fn ok_json(data: &str) -> Reply {
    let body = format!("{{\"data\":{data}}}");
    Reply::Raw(
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// An error response with a custom status line, closing the connection like
/// pveproxy does after every status ≥ 400.
pub fn error_reply(status: u16, reason: &str, body: &str) -> Reply {
    Reply::Raw(
        format!(
            "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json;charset=UTF-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

pub struct Certs {
    pub ca_pem: String,
    pub leaf_der: Vec<u8>,
    pub leaf_pem: String,
    pub key_der: Vec<u8>,
}

/// A CA and a leaf for `localhost` / `127.0.0.1` signed by it.
pub fn make_certs() -> Certs {
    make_certs_named("Test PVE Cluster Manager CA")
}

/// Like [`make_certs`] with a chosen CA common name. Real PVE clusters all
/// use the same CA subject, so a wrong cluster CA is found by name and fails
/// on the signature rather than as an unknown issuer.
pub fn make_certs_named(ca_cn: &str) -> Certs {
    make_certs_for(ca_cn, &["localhost", "127.0.0.1"])
}

/// A CA named `ca_cn` and a leaf with the given SANs.
pub fn make_certs_for(ca_cn: &str, sans: &[&str]) -> Certs {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_cn);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf_params =
        rcgen::CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>())
            .unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    Certs {
        ca_pem: ca_cert.pem(),
        leaf_der: leaf.der().to_vec(),
        leaf_pem: leaf.pem(),
        key_der: leaf_key.serialize_der(),
    }
}

pub struct TestServer {
    pub url: String,
    pub certs: Arc<Certs>,
    pub requests: Arc<Mutex<Vec<Recorded>>>,
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// SHA-256 of the leaf certificate, `AA:BB:…`.
    pub fn fingerprint(&self) -> String {
        pve_client::Fingerprint::of_der(&self.certs.leaf_der).to_string()
    }
}

/// Starts a server on 127.0.0.1:0. `handler(request, n)` gets the 0-based
/// number of the request across all connections.
pub async fn start(handler: Handler) -> TestServer {
    start_with_certs(handler, make_certs()).await
}

/// Like [`start`] with the given certificates.
pub async fn start_with_certs(handler: Handler, certs: Certs) -> TestServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = Arc::new(certs);
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(certs.key_der.clone().into());
    let chain = vec![rustls::pki_types::CertificateDer::from(
        certs.leaf_der.clone(),
    )];
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let connections = Arc::new(AtomicUsize::new(0));
    let counter = Arc::new(AtomicUsize::new(0));
    let (reqs, conns) = (requests.clone(), connections.clone());
    let task = tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let conn = conns.fetch_add(1, Ordering::SeqCst);
            let (acceptor, handler, reqs, counter) = (
                acceptor.clone(),
                handler.clone(),
                reqs.clone(),
                counter.clone(),
            );
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let mut buf = Vec::new();
                loop {
                    let Some(mut rec) = read_request(&mut tls, &mut buf).await else {
                        return;
                    };
                    rec.conn = conn;
                    reqs.lock().unwrap().push(rec.clone());
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    match handler(&rec, n) {
                        Reply::Raw(bytes) => {
                            if tls.write_all(&bytes).await.is_err() {
                                return;
                            }
                            let _ = tls.flush().await;
                            let text = String::from_utf8_lossy(&bytes).to_ascii_lowercase();
                            if text.contains("connection: close") {
                                let _ = tls.shutdown().await;
                                return;
                            }
                        }
                        Reply::HangUp => return,
                        Reply::Stall => {
                            std::future::pending::<()>().await;
                        }
                    }
                }
            });
        }
    });
    TestServer {
        url: format!("https://127.0.0.1:{port}"),
        certs,
        requests,
        connections,
        task,
    }
}

async fn read_request<S: AsyncRead + Unpin>(s: &mut S, buf: &mut Vec<u8>) -> Option<Recorded> {
    let head_end = loop {
        if let Some(i) = find(buf, b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_owned();
    let target = first.next()?.to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let get = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    let body = if let Some(len) = get("content-length").and_then(|v| v.parse::<usize>().ok()) {
        while buf.len() < len {
            let mut chunk = [0u8; 8192];
            let n = s.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf.drain(..len).collect()
    } else if get("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(i) = find(buf, b"\r\n") {
                    break i;
                }
                let mut chunk = [0u8; 8192];
                let n = s.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            };
            let size_text = String::from_utf8_lossy(&buf[..line_end]).into_owned();
            let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
            buf.drain(..line_end + 2);
            while buf.len() < size + 2 {
                let mut chunk = [0u8; 8192];
                let n = s.read(&mut chunk).await.ok()?;
                if n == 0 {
                    return None;
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            body.extend(buf.drain(..size));
            buf.drain(..2);
            if size == 0 {
                break body;
            }
        }
    } else {
        Vec::new()
    };
    Some(Recorded {
        conn: 0,
        method,
        target,
        headers,
        body,
    })
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
