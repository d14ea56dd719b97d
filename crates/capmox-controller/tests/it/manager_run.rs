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
fn unreachable_kubeconfig(dir: &std::path::Path) -> std::path::PathBuf {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    kubeconfig_for_port(dir, port)
}

/// Writes `dir/kubeconfig`, naming an API server at `127.0.0.1:port`.
fn kubeconfig_for_port(dir: &std::path::Path, port: u16) -> std::path::PathBuf {
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

/// A kubeconfig that cannot be read is the operator's input at fault: the
/// binary says so in one plain line (no log record) and exits with 2, as
/// for a bad flag; nothing is served.
#[test]
fn an_unreadable_kubeconfig_is_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
        .args(["--kubeconfig", "/nonexistent/capmox-kc"])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("capmox-controller: kubeconfig: /nonexistent/capmox-kc: "),
        "{stderr}"
    );
    assert!(!stderr.contains("ERROR"), "{stderr}");
}

/// Leader timings that do not nest are refused before anything starts,
/// as a usage error (exit status 2).
#[test]
fn leader_timings_that_do_not_nest_are_a_usage_error() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
        .args([
            "--kubeconfig",
            "/nonexistent/capmox-kc",
            "--leader-lease-duration",
            "10s",
            "--leader-renew-deadline",
            "15s",
        ])
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "--leader-renew-deadline (15s) must be shorter than --leader-lease-duration (10s)"
        ),
        "{stderr}"
    );
    assert!(!stderr.contains("kubeconfig"), "checked first: {stderr}");
}

/// A bad value is refused before anything starts, as a usage error (exit
/// status 2), whether it came from a flag or from its environment
/// variable; the message names both.
#[test]
fn bad_values_from_flags_and_variables_are_usage_errors() {
    let run = |args: &[&str], env: &[(&str, &str)]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
            .args(["--kubeconfig", "/nonexistent/capmox-kc"])
            .args(args)
            .envs(env.iter().copied())
            .env_remove("KUBECONFIG")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(!stderr.contains("kubeconfig"), "checked first: {stderr}");
        stderr
    };
    let e = run(&[], &[("CAPMOX_CONCURRENCY", "0")]);
    assert!(
        e.contains("invalid value '0' for '--concurrency <CONCURRENCY> (or CAPMOX_CONCURRENCY)'"),
        "{e}"
    );
    let e = run(&[], &[("CAPMOX_NAMESPACE", "Bad_NS!")]);
    assert!(
        e.contains("(or CAPMOX_NAMESPACE)': \"Bad_NS!\" is not a namespace name"),
        "{e}"
    );
    let e = run(&["--watch-filter", "a b,c"], &[]);
    assert!(e.contains("\"a b,c\" is not a label value"), "{e}");
    let e = run(&["--default-credentials-secret", "a/b/c"], &[]);
    assert!(e.contains("\"b/c\" is not a Secret name"), "{e}");
    let e = run(&["--probe-period", "2days"], &[]);
    assert!(e.contains("must be at most 1 day;"), "{e}");
}

/// The start-up lines say what the manager does in words: no Rust debug
/// form (`Some("…")`, `None`) for unset options, and no "leading" without
/// leader election.
#[test]
fn the_start_up_lines_name_unset_options_in_words() {
    use std::io::BufRead;
    let dir = std::env::temp_dir().join(format!("capmox-start-lines-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--disable-webhooks",
        ])
        .env_remove("CAPMOX_NAMESPACE")
        .env_remove("CAPMOX_WATCH_FILTER")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        let last = line.contains("starting controllers");
        lines.push(line);
        if last {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = lines.join("\n");
    let starting = lines
        .iter()
        .find(|l| l.contains("capmox-controller starting"))
        .unwrap_or_else(|| panic!("no start-up line: {text}"));
    assert!(
        starting.contains("webhooks=disabled namespace=\"all\" watch_filter=\"none\""),
        "{starting}"
    );
    assert!(!text.contains("Some("), "{text}");
    assert!(
        lines
            .last()
            .is_some_and(|l| l.ends_with("starting controllers (no leader election)")),
        "{text}"
    );
    assert!(!text.contains("leading"), "{text}");
}

/// A port in use is reported with the address and the flag that gave it.
#[test]
fn a_port_in_use_names_the_address_and_the_flag() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = std::env::temp_dir().join(format!("capmox-port-in-use-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let certs = dir.join("certs");
    write_pair(&certs, &serving_pair());
    let webhooks = format!("--webhook-cert-dir={}", certs.display());
    for (flag, webhooks) in [
        ("--metrics-addr", "--disable-webhooks"),
        ("--health-addr", "--disable-webhooks"),
        ("--webhook-addr", webhooks.as_str()),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
            .args([
                &format!("--kubeconfig={}", kubeconfig.display()),
                webhooks,
                &format!("{flag}={addr}"),
            ])
            // Free ports for the other two (the flag given wins).
            .env("CAPMOX_METRICS_ADDR", "127.0.0.1:0")
            .env("CAPMOX_HEALTH_ADDR", "127.0.0.1:0")
            .env("CAPMOX_WEBHOOK_ADDR", "127.0.0.1:0")
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{flag}: {e}");
        assert!(
            e.contains(&format!("cannot listen on {addr} ({flag}): ")),
            "{e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Without a serving certificate (the default start outside the cluster)
/// the error says which flags to use.
#[test]
fn a_missing_webhook_certificate_names_the_flags_to_use() {
    let dir = std::env::temp_dir().join(format!("capmox-no-cert-{}", std::process::id()));
    let certs = dir.join("certs");
    std::fs::create_dir_all(&certs).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"))
        .args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--webhook-addr=127.0.0.1:0",
            &format!("--webhook-cert-dir={}", certs.display()),
        ])
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(
        e.contains(&format!(
            "webhook server: cannot read {}/tls.crt: ",
            certs.display()
        )),
        "{e}"
    );
    assert!(
        e.contains("; put the serving certificate in --webhook-cert-dir (names: --webhook-cert-name, --webhook-key-name), or run with --disable-webhooks"),
        "{e}"
    );
}

/// A proxy from `HTTPS_PROXY` is refused naming the variable, unless
/// `NO_PROXY` covers the API server's host: the manager then connects
/// directly.
#[test]
fn a_proxy_from_the_environment_is_skipped_for_no_proxy_hosts() {
    let dir = std::env::temp_dir().join(format!("capmox-no-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let command = |no_proxy: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"));
        c.args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--disable-webhooks",
        ])
        .env("HTTPS_PROXY", "http://proxy.invalid:3128")
        .env("NO_PROXY", no_proxy)
        .env_remove("no_proxy")
        .env_remove("https_proxy");
        c
    };
    let out = command("other.example").output().unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains("HTTPS_PROXY is set (http://proxy.invalid:3128/) and NO_PROXY does not cover the API server's host 127.0.0.1"),
        "{e}"
    );

    let started = starts(command("localhost,127.0.0.0/8"));
    std::fs::remove_dir_all(&dir).unwrap();
    started.unwrap_or_else(|lines| panic!("the manager did not start: {lines}"));
}

/// Runs `command` until it logs its start-up line (which comes after the
/// kubeconfig was read and the client built), at most 20 s, then kills it.
///
/// # Errors
/// The lines it wrote, when it ended or went quiet without that line.
fn starts(mut command: std::process::Command) -> Result<(), String> {
    use std::io::BufRead;
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in stderr.lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    let mut lines = Vec::new();
    let mut started = false;
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        started = line.contains("capmox-controller starting");
        lines.push(line);
        if started {
            break;
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    if started {
        Ok(())
    } else {
        Err(lines.join("\n"))
    }
}

/// A server certificate the kubeconfig's CA did not sign is reported with
/// what it means, not only rustls's debug form (`BadSignature`: both
/// kube-sim CAs have the same name).
#[tokio::test]
async fn an_untrusted_server_certificate_is_explained() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let trusted = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    let other = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("capmox-untrusted-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    trusted.write_kubeconfig(&kubeconfig).unwrap();
    // The first server's CA, the second server's address.
    let text = std::fs::read_to_string(&kubeconfig)
        .unwrap()
        .replace(&trusted.url(), &other.url());
    std::fs::write(&kubeconfig, text).unwrap();
    let (client, _) = manager::kube_client(Some(&kubeconfig)).await.unwrap();
    let e = client.apiserver_version().await.unwrap_err();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = manager::api_error_text(&e);
    assert!(
        text.contains("invalid peer certificate: BadSignature"),
        "{text}"
    );
    assert!(
        text.ends_with(
            " (the server's certificate is not trusted by the kubeconfig's certificate-authority(-data))"
        ),
        "{text}"
    );
}

/// A `KUBECONFIG` list with a missing file is read as kubectl reads it:
/// the missing file is skipped; only a list where no file exists is
/// refused.
#[test]
fn missing_files_in_kubeconfig_are_skipped() {
    let dir = std::env::temp_dir().join(format!("capmox-kc-list-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let command = |list: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"));
        c.args([
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--disable-webhooks",
        ])
        .env("KUBECONFIG", list);
        c
    };
    let out = command("/nonexistent/capmox-a:/nonexistent/capmox-b")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{e}");
    assert!(
        e.contains(
            "KUBECONFIG names no file that exists (/nonexistent/capmox-a, /nonexistent/capmox-b)"
        ),
        "{e}"
    );

    let started = starts(command(&format!(
        "/nonexistent/capmox-a:{}",
        kubeconfig.display()
    )));
    std::fs::remove_dir_all(&dir).unwrap();
    started.unwrap_or_else(|lines| panic!("the manager did not start: {lines}"));
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
