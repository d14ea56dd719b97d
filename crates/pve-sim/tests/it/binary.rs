//! The `pve-sim` binary out of process: a YAML config, the CA written to the
//! state directory, URL/token/secret printed, served over HTTPS.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt, BufReader};

const CONFIG: &str = r#"
time_scale: 0.001
seed: 11
clusters:
  - name: lab
    nodes: [{name: lab1}, {name: lab2}]
    storages:
      - {name: local, type: dir, content: [iso, images]}
      - {name: shared, type: rbd, shared: true, content: [images]}
    bridges:
      - {name: vmbr0, dhcp: {start: 10.99.0.10, end: 10.99.0.20, prefix: 24}}
    templates:
      - {vmid: 9000, name: tpl, node: lab1, storage: shared, tags: "capmox"}
    users:
      - userid: capmox@pve
        acl: [{path: /, roles: [Administrator]}]
    tokens:
      - id: "capmox@pve!capi"
        secret: "lab-secret"
        privsep: false
"#;

#[tokio::test]
async fn binary_serves_a_yaml_config() {
    let dir = std::env::temp_dir().join(format!("pve-sim-binary-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("sim.yaml");
    std::fs::write(&cfg, CONFIG).unwrap();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .arg("--config")
        .arg(&cfg)
        .arg("--state-dir")
        .arg(dir.join("state"))
        .env_remove("PVE_SIM_SCHEMA")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut url, mut token, mut secret, mut ca) = (None, None, None, None);
    while let Some(line) = lines.next_line().await.unwrap() {
        let line = line.trim().to_string();
        if let Some(v) = line.strip_prefix("url:") {
            url = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("token id:") {
            token = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("token secret:") {
            secret = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("CA:") {
            ca = Some(v.trim().to_string());
        } else if line.starts_with("control API:") {
            break;
        }
    }
    let url = url.expect("url printed");
    assert!(
        url.starts_with("https://127.0.0.1:") && url.ends_with("/api2/json"),
        "{url}"
    );
    assert_eq!(token.as_deref(), Some("capmox@pve!capi"));
    assert_eq!(secret.as_deref(), Some("lab-secret"));
    let ca_pem = std::fs::read_to_string(ca.unwrap()).unwrap();
    let client = common::client_for(&ca_pem);
    let r = client
        .get(format!("{url}/cluster/resources?type=vm"))
        .header("Authorization", "PVEAPIToken=capmox@pve!capi=lab-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["data"][0]["name"], "tpl");
    assert_eq!(v["data"][0]["tags"], "capmox");
    let state = client
        .get(url.replace("/api2/json", "/_sim/state"))
        .send()
        .await
        .unwrap();
    assert_eq!(state.status(), 200);
    child.kill().await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_negative_time_scale_is_refused_by_the_config_check() {
    let dir = std::env::temp_dir().join(format!("pve-sim-negative-test-{}", std::process::id()));
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .args(["--time-scale", "-1", "--state-dir"])
        .arg(&dir)
        .env_remove("PVE_SIM_SCHEMA")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "accepted: {stderr}");
    // The config's own check, not clap taking -1 for a flag.
    assert!(
        stderr.contains("time_scale must be a finite number >= 0, got -1"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
