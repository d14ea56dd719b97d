//! The controller binary's start-up checks: bad input (flags, their
//! environment variables, kubeconfigs, proxies, listen addresses,
//! certificates) is refused before anything is served, in one line that
//! says what to give, and good input of the same kinds starts the manager.

use std::time::Duration;

use capmox_controller::manager;

use crate::manager_run::unreachable_kubeconfig;
use crate::support::webhook::{serving_pair, write_pair};

/// The controller binary on loopback ports (free ones), without webhooks.
pub(crate) fn loopback_controller() -> std::process::Command {
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"));
    c.args([
        "--metrics-addr=127.0.0.1:0",
        "--health-addr=127.0.0.1:0",
        "--disable-webhooks",
    ]);
    c
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
    assert!(
        e.contains("\"a/b/c\" has 3 parts separated by '/'; give name or namespace/name"),
        "{e}"
    );
    let e = run(&["--probe-period", "2days"], &[]);
    assert!(e.contains("must be at most 1 day;"), "{e}");
    // An empty namespace once meant "all namespaces"; leaving it out does.
    let e = run(&[], &[("CAPMOX_NAMESPACE", "")]);
    assert!(
        e.contains("'--namespace <NAMESPACE> (or CAPMOX_NAMESPACE)': empty; give a namespace name, or leave out --namespace (and unset CAPMOX_NAMESPACE) to watch all namespaces"),
        "{e}"
    );
    let e = run(&[], &[("POD_NAMESPACE", "")]);
    assert!(
        e.contains("(or POD_NAMESPACE)': empty; give a namespace name, or leave out --leader-election-namespace"),
        "{e}"
    );
    // A negative duration in words, not humantime's "expected number at 0".
    for (args, env) in [
        (&["--probe-period=-5s"][..], &[][..]),
        (&[][..], &[("CAPMOX_PROBE_PERIOD", "-5s")][..]),
    ] {
        let e = run(args, env);
        assert!(
            e.contains("'--probe-period <PROBE_PERIOD> (or CAPMOX_PROBE_PERIOD)': must be greater than 0; give a duration such as 60s, 500ms, 2m or 1h30m"),
            "{e}"
        );
    }
    // A boolean variable takes the usual words, and says which when not.
    let e = run(&[], &[("CAPMOX_LEADER_ELECT", "maybe")]);
    assert!(
        e.contains("'--leader-elect (or CAPMOX_LEADER_ELECT)': \"maybe\" is not true or false; give true or false (also 1 or 0, yes or no, on or off)"),
        "{e}"
    );
}

/// A boolean flag's variable takes 1/0, yes/no, on/off as well as
/// true/false (clap's own parser took only true and false: it refused
/// `CAPMOX_DISABLE_WEBHOOKS=1`).
#[test]
fn boolean_variables_take_1_yes_and_on() {
    let dir = std::env::temp_dir().join(format!("capmox-boolish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = unreachable_kubeconfig(&dir);
    let command = |disable_webhooks: &str, leader_elect: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_capmox-controller"));
        c.args([
            &format!("--kubeconfig={}", kubeconfig.display()),
            "--metrics-addr=127.0.0.1:0",
            "--health-addr=127.0.0.1:0",
            "--webhook-addr=127.0.0.1:0",
            &format!("--webhook-cert-dir={}", dir.join("no-certs").display()),
        ])
        .env("CAPMOX_DISABLE_WEBHOOKS", disable_webhooks)
        .env("CAPMOX_LEADER_ELECT", leader_elect);
        c
    };
    // No serving certificate: it starts only with the webhooks disabled.
    let started = starts(command("1", "on"));
    let out = command("0", "off").output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    started.unwrap_or_else(|lines| panic!("the manager did not start: {lines}"));
    let e = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{e}");
    assert!(e.contains("webhook server: cannot read "), "{e}");
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
        let mut c = loopback_controller();
        c.arg(format!("--kubeconfig={}", kubeconfig.display()))
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
pub(crate) fn starts(mut command: std::process::Command) -> Result<(), String> {
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
        let mut c = loopback_controller();
        c.env("KUBECONFIG", list);
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
