//! Shared helpers of the integration tests: start a simulator, talk to it
//! with plain reqwest over HTTPS with the cluster's CA pinned.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use pve_sim::{SimCluster, SimConfig, Simulator};
use serde_json::Value;

/// The built-in default at time scale 0.001 (a 60 s clone takes 60 ms),
/// seed 7, without schema validation (the conformance suite adds the
/// official schema: `conformance.rs`).
pub fn fast_config() -> SimConfig {
    SimConfig::builtin_default()
        .with_time_scale(0.001)
        .with_seed(7)
        .with_schema_path(None)
}

/// Starts a simulator.
pub async fn start(cfg: SimConfig) -> Simulator {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Simulator::start(cfg).await.expect("simulator starts")
}

/// A response as the tests look at it.
#[derive(Debug, Clone)]
pub struct Resp {
    pub status: u16,
    /// The HTTP/1 reason phrase as sent.
    pub reason: String,
    /// Parsed JSON body (`Null` if empty).
    pub body: Value,
    /// The raw body.
    pub raw: Vec<u8>,
    /// `Connection: close` was sent.
    pub close: bool,
}

impl Resp {
    pub fn data(&self) -> &Value {
        &self.body["data"]
    }

    /// The `data` as a UPID string.
    pub fn upid(&self) -> String {
        assert_eq!(self.status, 200, "expected 200, got {self:?}");
        self.body["data"]
            .as_str()
            .unwrap_or_else(|| panic!("no UPID in {self:?}"))
            .to_string()
    }
}

/// A client for one cluster.
#[derive(Clone)]
pub struct Api {
    pub client: reqwest::Client,
    pub base: String,
    pub auth: Option<String>,
    pub cluster: SimCluster,
}

/// A reqwest client trusting only `ca_pem`.
pub fn client_for(ca_pem: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert = reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap();
    reqwest::Client::builder()
        .tls_certs_only([cert])
        .http1_only()
        .build()
        .unwrap()
}

impl Api {
    /// Token-authenticated client for a cluster.
    pub fn new(c: &SimCluster) -> Api {
        Api {
            client: client_for(&c.ca_pem()),
            base: format!("{}/api2/json", c.url()),
            auth: Some(format!("PVEAPIToken={}={}", c.token_id(), c.token_secret())),
            cluster: c.clone(),
        }
    }

    /// The same client with another `Authorization` header (or none).
    pub fn with_auth(&self, auth: Option<String>) -> Api {
        Api {
            auth,
            ..self.clone()
        }
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Resp {
        let req = match &self.auth {
            Some(a) => req.header("Authorization", a),
            None => req,
        };
        let r = req.send().await.expect("request sent");
        let status = r.status().as_u16();
        let reason = r
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|p| String::from_utf8_lossy(p.as_bytes()).into_owned())
            .unwrap_or_else(|| r.status().canonical_reason().unwrap_or("").to_string());
        let close = r.headers().get("connection").is_some_and(|v| v == "close");
        let raw = r.bytes().await.expect("body").to_vec();
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Resp {
            status,
            reason,
            body,
            raw,
            close,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.send(self.client.get(self.url(path))).await
    }

    pub async fn delete(&self, path: &str) -> Resp {
        self.send(self.client.delete(self.url(path))).await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Resp {
        self.send(self.client.post(self.url(path)).form(form)).await
    }

    pub async fn put(&self, path: &str, form: &[(&str, &str)]) -> Resp {
        self.send(self.client.put(self.url(path)).form(form)).await
    }

    pub async fn post_json(&self, path: &str, body: Value) -> Resp {
        self.send(self.client.post(self.url(path)).json(&body))
            .await
    }

    /// Waits (event-driven, inside the simulator) for a task, then reads its
    /// status over HTTP.
    pub async fn task_result(&self, node: &str, upid: &str) -> Value {
        self.cluster.wait_task(upid).await.expect("known task");
        let enc = percent_encoding::utf8_percent_encode(upid, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
        let r = self.get(&format!("/nodes/{node}/tasks/{enc}/status")).await;
        assert_eq!(r.status, 200, "{r:?}");
        r.body["data"].clone()
    }

    /// Runs a call that returns a UPID and waits for its exit status.
    pub async fn run(&self, node: &str, resp: Resp) -> String {
        let upid = resp.upid();
        let t = self.task_result(node, &upid).await;
        t["exitstatus"].as_str().unwrap_or("").to_string()
    }
}

/// Builds a NoCloud seed ISO the way the provider does (hadris-iso, label
/// `cidata`, Rock Ridge + Joliet).
pub fn seed_iso(user_data: &str, meta_data: &str, network_config: Option<&str>) -> Vec<u8> {
    use hadris_iso::read::PathSeparator;
    use hadris_iso::write::options::{CreationFeatures, IsoFormatOptions};
    use hadris_iso::write::{File as IsoFile, InputFiles, IsoImageWriter};
    let mut files = vec![
        IsoFile::File {
            name: Arc::new("user-data".into()),
            contents: user_data.as_bytes().to_vec(),
        },
        IsoFile::File {
            name: Arc::new("meta-data".into()),
            contents: meta_data.as_bytes().to_vec(),
        },
    ];
    if let Some(nc) = network_config {
        files.push(IsoFile::File {
            name: Arc::new("network-config".into()),
            contents: nc.as_bytes().to_vec(),
        });
    }
    let options = IsoFormatOptions {
        volume_name: "cidata".into(),
        system_id: None,
        volume_set_id: None,
        publisher_id: None,
        preparer_id: None,
        application_id: None,
        sector_size: 2048,
        path_separator: PathSeparator::ForwardSlash,
        features: CreationFeatures::extensions(),
        strict_charset: false,
    };
    let input = InputFiles {
        path_separator: PathSeparator::ForwardSlash,
        files,
    };
    let mut buf = std::io::Cursor::new(Vec::new());
    IsoImageWriter::create(&mut buf, input, options).expect("write seed ISO");
    buf.into_inner()
}

/// Percent-encodes a UPID for a URL path.
pub fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
