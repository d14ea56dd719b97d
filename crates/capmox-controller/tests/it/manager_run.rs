//! The manager end to end in-process: pointed at kube-sim by a kubeconfig
//! file, it serves `/healthz`, `/readyz` and `/metrics` and the webhooks
//! (ready only once they serve), takes the leader
//! Lease, reconciles a ProxmoxCluster against pve-sim, and on stop shuts
//! the controllers down and releases the Lease.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;
use crate::support::webhook::{serving_pair, write_pair};

use std::net::SocketAddr;
use std::time::Duration;

use capmox_controller::api::{ClusterMode, ProxmoxCluster};
use capmox_controller::manager::{self, Flags};
use clap::Parser;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::runtime::wait::await_condition;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut buf = String::new();
    s.read_to_string(&mut buf).await.unwrap();
    let status = buf
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = buf
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Flags for a manager on loopback addresses (free ports) with
/// `kubeconfig`, a serving certificate written to `dir/certs`, and `more`.
fn local_flags(dir: &std::path::Path, kubeconfig: &std::path::Path, more: &[&str]) -> Flags {
    let certs = dir.join("certs");
    write_pair(&certs, &serving_pair());
    let mut args = vec![
        "capmox-controller".to_string(),
        format!("--kubeconfig={}", kubeconfig.display()),
        "--metrics-addr=127.0.0.1:0".into(),
        "--health-addr=127.0.0.1:0".into(),
        "--webhook-addr=127.0.0.1:0".into(),
        format!("--webhook-cert-dir={}", certs.display()),
    ];
    args.extend(more.iter().map(|a| (*a).to_string()));
    Flags::try_parse_from(args).unwrap()
}

/// Writes `dir/kubeconfig`, naming an API server on a local port nobody
/// listens on (connections are refused at once).
pub(crate) fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    kubeconfig_for_port(dir, port)
}

/// Writes `dir/kubeconfig`, naming an API server at `127.0.0.1:port`.
pub(crate) fn kubeconfig_for_port(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: gone\n  cluster: {{server: \"https://127.0.0.1:{port}\", insecure-skip-tls-verify: true}}\ncontexts:\n- name: gone\n  context: {{cluster: gone, user: u}}\ncurrent-context: gone\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    kubeconfig
}

/// Starts the manager with `flags` (a `--shutdown-timeout` of 60 s), lets
/// its controllers and lease requests start and fail a few times (500 ms),
/// stops it and asserts that it ends within 15 s, without error.
async fn stops_promptly(flags: Flags) {
    let (stop_tx, started_rx, manager) = start(flags);
    started_rx.await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop_tx.send(()).unwrap();
    let stopped = tokio::time::timeout(Duration::from_secs(15), manager)
        .await
        .expect("the manager waited out its 60 s shutdown timeout");
    stopped.unwrap().unwrap();
}

/// Runs the manager with `flags` until the returned sender is used or
/// dropped; the receiver gets what it bound, the handle its result.
fn start(
    flags: Flags,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::sync::oneshot::Receiver<manager::http::Bound>,
    tokio::task::JoinHandle<Result<(), manager::ManagerError>>,
) {
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let manager = tokio::spawn(manager::run_with(
        flags,
        async move {
            let _ = stop_rx.await;
        },
        Some(started_tx),
    ));
    (stop_tx, started_rx, manager)
}

#[tokio::test]
async fn manager_serves_leads_reconciles_and_stops() {
    let env = Env::start().await;
    env.put_all_credentials().await;
    let dir = std::env::temp_dir().join(format!("capmox-manager-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    env.kube_sim.write_kubeconfig(&kubeconfig).unwrap();
    let flags = local_flags(
        &dir,
        &kubeconfig,
        &[
            "--leader-elect",
            "--leader-election-namespace=default",
            "--leader-election-id=capmox-run-test",
            "--leader-lease-duration=2s",
            "--leader-renew-deadline=1s",
            "--leader-retry-period=100ms",
            "--probe-period=10m",
            "--shutdown-timeout=10s",
        ],
    );
    let (stop_tx, started_rx, manager) = start(flags);
    let bound = started_rx.await.unwrap();
    assert!(
        bound.webhook.is_some(),
        "the webhook server is up before the manager reports"
    );
    assert_eq!(
        http_get(bound.health, "/healthz").await,
        (200, "ok".to_string())
    );

    let leases: Api<Lease> = Api::namespaced(env.kube.clone(), "default");
    let held = await_condition(leases.clone(), "capmox-run-test", |l: Option<&Lease>| {
        l.and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_ref())
            .is_some()
    });
    tokio::time::timeout(Duration::from_secs(30), held)
        .await
        .unwrap()
        .unwrap();

    env.create_cluster(
        "run",
        spec(
            ClusterMode::MultiInstance,
            vec![instance("dc-a"), instance("dc-c")],
        ),
    )
    .await;
    let done = await_condition(env.pcs(), "run", |pc: Option<&ProxmoxCluster>| {
        pc.is_some_and(|pc| failure_domains(pc) == ["dc-a", "dc-c"] && provisioned(pc))
    });
    tokio::time::timeout(Duration::from_secs(60), done)
        .await
        .expect("the manager reconciled the ProxmoxCluster")
        .unwrap();

    // Ready once connected (the manager polls the API server version).
    let mut ready = http_get(bound.health, "/readyz").await;
    for _ in 0..100 {
        if ready.0 == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        ready = http_get(bound.health, "/readyz").await;
    }
    assert_eq!(ready, (200, "ok".to_string()));
    let (code, metrics) = http_get(bound.metrics, "/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("capmox_leader 1"), "{metrics}");
    assert!(metrics.contains("capmox_pve_requests_total{instance=\"dc-a\",method=\"GET\",endpoint=\"/version\",status=\"200\"}"), "{metrics}");

    stop_tx.send(()).unwrap();
    let result = tokio::time::timeout(Duration::from_secs(30), manager)
        .await
        .expect("manager stops")
        .unwrap();
    assert!(result.is_ok(), "{result:?}");
    let lease = leases.get("capmox-run-test").await.unwrap();
    assert_eq!(
        lease.spec.unwrap().holder_identity,
        None,
        "lease released on shutdown"
    );
    let _ = std::fs::remove_dir_all(&dir);
    env.stop().await;
}

/// With the API server unreachable since the start, no reconcile ever runs,
/// and a stop does not wait out `--shutdown-timeout` (kube-runtime's
/// runner waits for a store that never fills; the manager stops once no
/// reconcile is in flight).
#[tokio::test]
async fn a_stop_with_the_api_server_unreachable_does_not_wait_out_the_timeout() {
    let dir = std::env::temp_dir().join(format!("capmox-unreachable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let flags = local_flags(&dir, &kubeconfig, &["--shutdown-timeout=60s"]);
    stops_promptly(flags).await;
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A closed stderr (`capmox-controller … 2>&1 | head`) does not end the
/// process: log lines that cannot be written are dropped.
#[test]
fn a_closed_stderr_does_not_crash_the_manager() {
    let dir = std::env::temp_dir().join(format!("capmox-closed-stderr-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let certs = dir.join("certs");
    write_pair(&certs, &serving_pair());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--webhook-addr=127.0.0.1:0",
            &format!("--webhook-cert-dir={}", certs.display()),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Close the read end: every later log line fails to be written. The
    // manager logs a warning every 2 s while the API server is unreachable.
    drop(child.stderr.take());
    std::thread::sleep(Duration::from_secs(5));
    let status = child.try_wait().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(status, None, "the manager ended: {status:?}");
}

/// With leader election on and an API server that accepts connections but
/// never answers, a stop ends the pending lease request: the manager does
/// not wait out `--shutdown-timeout` (nor the client's connect timeout).
#[tokio::test]
async fn a_stop_while_the_lease_request_hangs_does_not_wait_out_the_timeout() {
    let dir = std::env::temp_dir().join(format!("capmox-hung-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    // Accepts every connection and never answers (nor closes it).
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for c in listener.incoming().flatten() {
            held.push(c);
        }
    });
    let kubeconfig = kubeconfig_for_port(&dir, port);
    let flags = local_flags(
        &dir,
        &kubeconfig,
        &[
            "--leader-elect",
            "--leader-election-namespace=default",
            "--shutdown-timeout=60s",
        ],
    );
    stops_promptly(flags).await;
    std::fs::remove_dir_all(&dir).unwrap();
}
