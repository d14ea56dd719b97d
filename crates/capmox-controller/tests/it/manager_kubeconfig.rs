//! The binary's start-up checks of where the Kubernetes client comes from:
//! a kubeconfig that selects no context, the proxy variables of the API
//! server's URL scheme (and `ALL_PROXY`), and a server that answers
//! without TLS.

use std::time::Duration;

use capmox_controller::manager;

use crate::manager_run::kubeconfig_for_port;
use crate::manager_startup::{loopback_controller, starts};

/// Every proxy variable, removed from a command before it sets its own.
const PROXY_VARIABLES: [&str; 8] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
    "NO_PROXY",
    "no_proxy",
];

/// `loopback_controller()` without the environment's kubeconfig and proxy
/// variables, with `env` set.
fn controller(env: &[(&str, &str)]) -> std::process::Command {
    let mut c = loopback_controller();
    c.env_remove("KUBECONFIG");
    for v in PROXY_VARIABLES {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    c
}

/// Runs `command` and returns its stderr, asserting that it refused to
/// start as a usage error (exit status 2, one line) within 20 s (a
/// manager that starts instead runs until it is killed).
fn refused(mut command: std::process::Command) -> String {
    use std::io::Read;
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut e = String::new();
    let _ = child.stderr.take().unwrap().read_to_string(&mut e);
    let status = status.unwrap_or_else(|| panic!("it started instead of refusing: {e}"));
    assert_eq!(status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    e
}

/// A kubeconfig whose `current-context` is missing or empty is refused
/// naming the file and how to choose a context (kube's own text, "failed
/// to determine current context", named neither), whether it came from
/// `--kubeconfig`, `KUBECONFIG` or `~/.kube/config`.
#[test]
fn a_kubeconfig_without_current_context_says_how_to_choose_one() {
    let dir = std::env::temp_dir().join(format!("capmox-no-context-{}", std::process::id()));
    std::fs::create_dir_all(dir.join(".kube")).unwrap();
    let contexts = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\ncontexts:\n- name: dev\n  context: {cluster: c, user: u}\n- name: prod\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t}\n";
    let no_current = dir.join("no-current");
    std::fs::write(&no_current, contexts).unwrap();
    let empty_current = dir.join("empty-current");
    std::fs::write(&empty_current, format!("{contexts}current-context: \"\"\n")).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, "").unwrap();
    std::fs::write(dir.join(".kube").join("config"), contexts).unwrap();

    for file in [&no_current, &empty_current] {
        let mut c = controller(&[]);
        c.arg(format!("--kubeconfig={}", file.display()));
        let e = refused(c);
        assert!(
            e.ends_with(&format!(
                "kubeconfig: {0}: no current-context is set; choose one of its contexts (dev, prod) with `kubectl --kubeconfig {0} config use-context <name>`, or give --kubeconfig a kubeconfig that sets one\n",
                file.display()
            )),
            "{e}"
        );
    }
    let mut c = controller(&[]);
    c.arg(format!("--kubeconfig={}", empty.display()));
    let e = refused(c);
    assert!(
        e.ends_with(&format!(
            "kubeconfig: {}: no current-context is set, and there is no context to choose; give --kubeconfig a kubeconfig with a cluster, a user, a context and current-context\n",
            empty.display()
        )),
        "{e}"
    );
    let listed = no_current.display().to_string();
    let e = refused(controller(&[("KUBECONFIG", &listed)]));
    assert!(
        e.contains(&format!(
            "kubeconfig: KUBECONFIG ({listed}): no current-context is set; choose one of its contexts (dev, prod) with `kubectl config use-context <name>`"
        )),
        "{e}"
    );
    let home = dir.display().to_string();
    let mut c = controller(&[("HOME", &home)]);
    c.env_remove("KUBERNETES_SERVICE_HOST");
    let e = refused(c);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        e.contains(&format!(
            "kubeconfig: {home}/.kube/config: no current-context is set; choose one of its contexts (dev, prod) with `kubectl config use-context <name>`"
        )),
        "{e}"
    );
}

/// `ALL_PROXY` applies as `HTTPS_PROXY` does when no proxy of the
/// server's scheme is set (curl's rule; it was ignored, and the controller
/// connected directly where curl and kubectl would not): refused naming
/// it, unless `NO_PROXY` covers the API server.
#[test]
fn all_proxy_is_refused_unless_no_proxy_covers_the_server() {
    let dir = std::env::temp_dir().join(format!("capmox-all-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = crate::manager_run::unreachable_kubeconfig(&dir);
    let command = |env: &[(&str, &str)]| {
        let mut c = controller(env);
        c.arg(format!("--kubeconfig={}", kubeconfig.display()));
        c
    };
    let e = refused(command(&[("ALL_PROXY", "socks5://proxy.invalid:1080")]));
    assert!(
        e.contains("ALL_PROXY is set (socks5://proxy.invalid:1080/) and NO_PROXY does not cover the API server's host 127.0.0.1; this build connects to the API server directly: add 127.0.0.1 to NO_PROXY, or unset ALL_PROXY for the controller"),
        "{e}"
    );
    let e = refused(command(&[("all_proxy", "http://proxy.invalid:3128")]));
    assert!(e.contains("all_proxy is set"), "{e}");
    let started = starts(command(&[
        ("ALL_PROXY", "socks5://proxy.invalid:1080"),
        ("NO_PROXY", "127.0.0.1"),
    ]));
    std::fs::remove_dir_all(&dir).unwrap();
    started.unwrap_or_else(|lines| panic!("the manager did not start: {lines}"));
}

/// For an `http://` API server `HTTP_PROXY` applies, not `HTTPS_PROXY`
/// (kube reads `HTTPS_PROXY` for either scheme, and the controller refused
/// it for a server it would not proxy, while `HTTP_PROXY` was ignored).
#[test]
fn an_http_server_takes_http_proxy_not_https_proxy() {
    let dir = std::env::temp_dir().join(format!("capmox-http-proxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: plain\n  cluster: {{server: \"http://127.0.0.1:{port}\"}}\ncontexts:\n- name: plain\n  context: {{cluster: plain, user: u}}\ncurrent-context: plain\nusers:\n- name: u\n  user: {{token: t}}\n"
        ),
    )
    .unwrap();
    let command = |env: &[(&str, &str)]| {
        let mut c = controller(env);
        c.arg(format!("--kubeconfig={}", kubeconfig.display()));
        c
    };
    for variable in ["HTTP_PROXY", "http_proxy"] {
        let e = refused(command(&[(variable, "http://proxy.invalid:3128")]));
        assert!(
            e.contains(&format!(
                "{variable} is set (http://proxy.invalid:3128/) and NO_PROXY does not cover the API server's host 127.0.0.1"
            )),
            "{e}"
        );
    }
    let started = starts(command(&[("HTTPS_PROXY", "http://proxy.invalid:3128")]));
    std::fs::remove_dir_all(&dir).unwrap();
    started.unwrap_or_else(|lines| panic!("the manager did not start: {lines}"));
}

/// An `https://` server URL whose port serves plain HTTP: rustls reports
/// `InvalidContentType` ("received corrupt message"), and the error says
/// what that means: the server answered without TLS.
#[tokio::test]
async fn a_server_without_tls_is_explained() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = conn.read(&mut buf).await;
                let _ = conn
                    .write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    .await;
                let _ = conn.shutdown().await;
            });
        }
    });
    let dir = std::env::temp_dir().join(format!("capmox-no-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = kubeconfig_for_port(&dir, port);
    let (client, _) = manager::kube_client(Some(&kubeconfig)).await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(20), client.apiserver_version())
        .await
        .unwrap()
        .unwrap_err();
    server.abort();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = manager::api_error_text(&e);
    assert!(text.contains("InvalidContentType"), "{text}");
    assert!(
        text.ends_with(
            " (the server answered without TLS: check the scheme and port of the kubeconfig's server URL (https:// to a port that serves plain HTTP?))"
        ),
        "{text}"
    );
}
