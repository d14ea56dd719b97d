//! Wire-level tests of the client over real HTTPS against a scripted server:
//! status-line-only errors (older PVE), connection resets and the single GET
//! retry, exact form encoding, ticket auth with CSRF, multipart uploads, task
//! waiting, TLS trust modes, and that no secret reaches errors, `Debug` or logs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use pve_client::api::qemu::config::ConfigUpdate;
use pve_client::options::{Boot, DiskSlot, NetDevice, NetModel, Tags};
use pve_client::task::WaitOptions;
use pve_client::{
    ApiUrl, Auth, CallCounter, ClientConfig, Fingerprint, NodeName, PveClient, PveError, Secret,
    TaskFailureKind, TlsMode, TransientCause, Upid, VmId,
};
use support::{Reply, error_reply, ok_json, start};

const TOKEN_ID: &str = "capmox@pve!capi";
const SECRET: &str = "8c1f9a7e-5b2d-4e3f-9a0b-7c6d5e4f3a2b";

fn config(url: &str, tls: TlsMode) -> ClientConfig {
    ClientConfig::new(
        "dc-test",
        ApiUrl::parse(url).unwrap(),
        Auth::token(TOKEN_ID, SECRET).unwrap(),
    )
    .with_tls(tls)
}

fn client(server: &support::TestServer) -> PveClient {
    PveClient::new(config(
        &server.url,
        TlsMode::Verify {
            ca_pem: Some(server.certs.ca_pem.clone()),
        },
    ))
    .unwrap()
}

fn node() -> NodeName {
    NodeName::new("pve-a1").unwrap()
}

fn vmid(n: u32) -> VmId {
    VmId::new(n).unwrap()
}

const MISSING: &str = "Configuration file 'nodes/pve-a1/qemu-server/105.conf' does not exist";

#[tokio::test]
async fn status_line_only_error_is_classified_from_the_reason_phrase() {
    let server = start(Arc::new(|_, _| {
        error_reply(500, MISSING, r#"{"data":null}"#)
    }))
    .await;
    let err = client(&server)
        .vm_config(&node(), vmid(105))
        .await
        .unwrap_err();
    match &err {
        PveError::NotFound {
            ctx,
            message,
            missing: pve_client::Missing::Vm,
        } => {
            assert_eq!(message, MISSING);
            assert_eq!(ctx.method, "GET");
            assert_eq!(ctx.path, "/nodes/pve-a1/qemu/105/config");
            assert_eq!(ctx.instance, "dc-test");
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    // Not retried: a response arrived.
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn json_message_and_errors_map() {
    let server = start(Arc::new(|req, _| {
        if req.target.starts_with("/api2/json/cluster/nextid") {
            error_reply(
                400,
                "Parameter verification failed.",
                r#"{"data":null,"errors":{"vmid":"VM 105 already exists\n"},"message":"Parameter verification failed.\n"}"#,
            )
        } else {
            error_reply(
                500,
                "can't lock file '/var/lock/qemu-server/lock-105.conf' - got timeout",
                r#"{"data":null,"message":"can't lock file '/var/lock/qemu-server/lock-105.conf' - got timeout\n"}"#,
            )
        }
    }))
    .await;
    let c = client(&server);
    match c.next_vmid(Some(vmid(105))).await.unwrap_err() {
        PveError::InvalidParameter { errors, .. } => {
            assert_eq!(
                errors.get("vmid").map(String::as_str),
                Some("VM 105 already exists")
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        server.requests()[0].target,
        "/api2/json/cluster/nextid?vmid=105"
    );
    let e = c
        .update_vm_config_sync(&node(), vmid(105), &ConfigUpdate::new().cores(2))
        .await
        .unwrap_err();
    assert_eq!(e.category(), "lock_timeout");
    assert!(e.is_retryable());
}

#[tokio::test]
async fn get_is_retried_once_after_the_server_hangs_up() {
    let server = start(Arc::new(|_, n| {
        if n == 0 {
            Reply::HangUp
        } else {
            ok_json(r#"{"version":"9.1.4","release":"9.1","repoid":"a1b2c3d4"}"#)
        }
    }))
    .await;
    let counter = Arc::new(CallCounter::new());
    let c = client(&server).with_observer(counter.clone());
    let v = c.version().await.unwrap();
    assert_eq!(v.release, "9.1");
    assert_eq!(server.requests().len(), 2);
    assert_eq!(
        counter.count("GET", "/version"),
        2,
        "each attempt is one call record"
    );
}

#[tokio::test]
async fn get_is_retried_only_once() {
    let server = start(Arc::new(|_, _| Reply::HangUp)).await;
    let e = client(&server).version().await.unwrap_err();
    assert!(
        matches!(
            e,
            PveError::Transient {
                cause: TransientCause::ConnectionLost,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(!e.outcome_unknown(), "a GET changes nothing");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn post_is_never_retried_and_its_outcome_is_unknown() {
    let server = start(Arc::new(|_, _| Reply::HangUp)).await;
    let req = pve_client::api::qemu::clone::CloneRequest::new(vmid(131)).full(false);
    let e = client(&server)
        .clone_vm(&node(), vmid(9000), &req)
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            PveError::Transient {
                cause: TransientCause::ConnectionLost,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.outcome_unknown());
    assert!(e.is_retryable());
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn per_call_timeout() {
    let server = start(Arc::new(|_, _| Reply::Stall)).await;
    let c = client(&server).with_timeout(Duration::from_millis(200));
    let e = c.version().await.unwrap_err();
    assert!(
        matches!(
            e,
            PveError::Transient {
                cause: TransientCause::Timeout,
                ..
            }
        ),
        "{e:?}"
    );
}

#[tokio::test]
async fn form_body_is_encoded_as_proxmox_parses_it() {
    let server = start(Arc::new(|_, _| {
        ok_json(r#""UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmconfig:105:capmox@pve!capi:""#)
    }))
    .await;
    let mut net = NetDevice::new(NetModel::Virtio);
    net.bridge = Some("vmbr0".into());
    net.tag = Some(12);
    let update = ConfigUpdate::new()
        .digest("3f2a")
        .tags(&Tags::parse("capmox;wl1").unwrap())
        .boot(&Boot::order(["scsi0", "net0"]).unwrap())
        .net(0, &net)
        .onboot(false)
        .sshkeys("ssh-ed25519 AAAA me@host")
        .delete("ide3");
    let upid = client(&server)
        .update_vm_config_async(&node(), vmid(105), &update)
        .await
        .unwrap();
    assert_eq!(upid.unwrap().worker_type(), "qmconfig");
    let req = &server.requests()[0];
    assert_eq!(req.method, "POST");
    assert_eq!(req.target, "/api2/json/nodes/pve-a1/qemu/105/config");
    assert_eq!(
        req.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(
        req.header("authorization"),
        Some(format!("PVEAPIToken={TOKEN_ID}={SECRET}").as_str())
    );
    assert_eq!(
        req.body_str(),
        "boot=order%3Dscsi0%3Bnet0&net0=virtio%2Cbridge%3Dvmbr0%2Ctag%3D12&onboot=0\
         &sshkeys=ssh-ed25519%2520AAAA%2520me%2540host&tags=capmox%3Bwl1&delete=ide3&digest=3f2a"
    );
}

#[tokio::test]
async fn config_post_accepts_null_instead_of_a_upid() {
    let server = start(Arc::new(|_, _| ok_json("null"))).await;
    let r = client(&server)
        .update_vm_config_async(&node(), vmid(105), &ConfigUpdate::new().cores(4))
        .await;
    assert_eq!(r.unwrap(), None);
}

#[tokio::test]
async fn refused_requests_send_nothing() {
    let server = start(Arc::new(|_, _| ok_json("null"))).await;
    let c = client(&server);
    let both = ConfigUpdate::new()
        .disk(
            DiskSlot::parse("ide2").unwrap(),
            &pve_client::options::Disk::empty_cdrom(),
        )
        .delete("ide2");
    let e = c
        .update_vm_config_async(&node(), vmid(105), &both)
        .await
        .unwrap_err();
    assert_eq!(e.category(), "invalid_request");
    let linked = pve_client::api::qemu::clone::CloneRequest::new(vmid(131))
        .storage(pve_client::StorageId::new("local-lvm").unwrap());
    let e = c.clone_vm(&node(), vmid(9000), &linked).await.unwrap_err();
    assert_eq!(e.category(), "invalid_request");
    let e = c
        .upload_iso(
            &node(),
            &pve_client::StorageId::new("local").unwrap(),
            "seed.txt",
            vec![1],
        )
        .await
        .unwrap_err();
    assert_eq!(e.category(), "invalid_request");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn iso_upload_is_multipart_with_the_file_part_named_filename() {
    let server = start(Arc::new(|_, _| {
        ok_json(r#""UPID:pve-a1:00001234:00005678:6754A3B2:imgcopy::capmox@pve!capi:""#)
    }))
    .await;
    let bytes = b"CD001-fake-iso-bytes".to_vec();
    let upid = client(&server)
        .upload_iso(
            &node(),
            &pve_client::StorageId::new("nfs-iso").unwrap(),
            "capmox-105.iso",
            bytes.clone(),
        )
        .await
        .unwrap();
    assert_eq!(upid.unwrap().worker_type(), "imgcopy");
    let req = &server.requests()[0];
    assert_eq!(req.target, "/api2/json/nodes/pve-a1/storage/nfs-iso/upload");
    assert!(
        req.header("content-type")
            .unwrap()
            .starts_with("multipart/form-data; boundary=")
    );
    let body = req.body_str();
    let content_at = body.find("name=\"content\"").expect("content part");
    let file_at = body
        .find("name=\"filename\"; filename=\"capmox-105.iso\"")
        .expect("file part");
    assert!(content_at < file_at, "content comes before the file");
    assert!(body.contains("\r\n\r\niso\r\n"));
    assert!(body.contains("CD001-fake-iso-bytes"));
}

#[tokio::test]
async fn wait_task_polls_until_stopped_and_counts_warnings() {
    let server = start(Arc::new(|_, n| {
        if n < 2 {
            ok_json(r#"{"status":"running","type":"qmstart"}"#)
        } else {
            ok_json(r#"{"status":"stopped","exitstatus":"WARNINGS: 2","type":"qmstart"}"#)
        }
    }))
    .await;
    let upid =
        Upid::parse("UPID:pve-a2:000A1B2C:0132F4E5:6754A3B2:qmstart:105:capmox@pve!capi:").unwrap();
    let opts = WaitOptions {
        deadline: Duration::from_secs(30),
        initial_interval: Duration::from_millis(1),
        max_interval: Duration::from_millis(4),
    };
    let out = client(&server).wait_task(&upid, opts).await.unwrap();
    assert_eq!(out.warnings, 2);
    assert_eq!(out.exitstatus, "WARNINGS: 2");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r.target
        == "/api2/json/nodes/pve-a2/tasks/UPID%3Apve-a2%3A000A1B2C%3A0132F4E5%3A6754A3B2%3Aqmstart%3A105%3Acapmox%40pve%21capi%3A/status"));
}

#[tokio::test]
async fn wait_task_reports_failure_with_log_tail() {
    let exit =
        "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout";
    let server = start(Arc::new(move |req, _| {
        if req.target.contains("/status") {
            ok_json(&format!(r#"{{"status":"stopped","exitstatus":"{exit}"}}"#))
        } else if req.target.ends_with("start=0&limit=1") {
            Reply::Raw(http_200(r#"{"data":[{"n":1,"t":"create full clone of drive scsi0"}],"total":3}"#))
        } else {
            assert!(req.target.ends_with("/log?start=0&limit=10"), "{}", req.target);
            Reply::Raw(http_200(&format!(
                r#"{{"data":[{{"n":1,"t":"create full clone of drive scsi0"}},{{"n":2,"t":"transferred 0 of 20G"}},{{"n":3,"t":"TASK ERROR: {exit}"}}],"total":3}}"#
            )))
        }
    }))
    .await;
    let upid = Upid::parse("UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:capmox@pve!capi:")
        .unwrap();
    let e = client(&server)
        .wait_task(&upid, WaitOptions::default())
        .await
        .unwrap_err();
    match &e {
        PveError::TaskFailed {
            upid: u,
            exitstatus,
            log_tail,
            kind,
            instance,
        } => {
            assert_eq!(u, &upid);
            assert_eq!(exitstatus, exit);
            assert_eq!(kind, &TaskFailureKind::LockTimeout);
            assert_eq!(instance, "dc-test");
            assert_eq!(log_tail.len(), 3);
            assert_eq!(log_tail[2], format!("TASK ERROR: {exit}"));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        e.is_retryable(),
        "B04: a lock-timeout clone failure is transient"
    );
}

#[tokio::test]
async fn wait_task_gives_up_at_the_deadline() {
    let server = start(Arc::new(|_, _| ok_json(r#"{"status":"running"}"#))).await;
    let upid = Upid::parse("UPID:pve-a1:000A1B2C:0132F4E5:6754A3B2:qmclone:9000:capmox@pve!capi:")
        .unwrap();
    let opts = WaitOptions {
        deadline: Duration::from_millis(30),
        initial_interval: Duration::from_millis(5),
        max_interval: Duration::from_millis(10),
    };
    let e = client(&server).wait_task(&upid, opts).await.unwrap_err();
    assert!(matches!(e, PveError::TaskPending { .. }), "{e:?}");
    assert_eq!(e.category(), "task_pending");
}

fn http_200(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[tokio::test]
async fn ticket_auth_sends_cookie_and_csrf_and_logs_in_again_after_401() {
    let server = start(Arc::new(|req, n| {
        if req.target == "/api2/json/access/ticket" {
            let n = if req.body_str().contains("password=pw%3Bx%26y") { "1" } else { "bad" };
            return ok_json(&format!(
                r#"{{"ticket":"PVE:root@pam:6754A3B2::sig{n}/+=","CSRFPreventionToken":"6754A3B2:csrf{n}","username":"root@pam"}}"#
            ));
        }
        // The first authenticated request is refused to force a re-login.
        if n == 1 {
            return error_reply(401, "No ticket", r#"{"data":null}"#);
        }
        ok_json("null")
    }))
    .await;
    let cfg = ClientConfig::new(
        "dc-test",
        ApiUrl::parse(&server.url).unwrap(),
        Auth::Ticket {
            username: "root@pam".into(),
            password: Secret::new("pw;x&y"),
        },
    )
    .with_tls(TlsMode::Verify {
        ca_pem: Some(server.certs.ca_pem.clone()),
    });
    let c = PveClient::new(cfg).unwrap();
    c.update_vm_config_sync(&node(), vmid(105), &ConfigUpdate::new().cores(2))
        .await
        .unwrap();
    let reqs = server.requests();
    let methods: Vec<(&str, &str)> = reqs
        .iter()
        .map(|r| (r.method.as_str(), r.target.as_str()))
        .collect();
    assert_eq!(
        methods,
        vec![
            ("POST", "/api2/json/access/ticket"),
            ("PUT", "/api2/json/nodes/pve-a1/qemu/105/config"),
            ("POST", "/api2/json/access/ticket"),
            ("PUT", "/api2/json/nodes/pve-a1/qemu/105/config"),
        ]
    );
    assert_eq!(
        reqs[0].body_str(),
        "username=root%40pam&password=pw%3Bx%26y"
    );
    assert!(reqs[0].header("authorization").is_none() && reqs[0].header("cookie").is_none());
    let put = &reqs[3];
    assert_eq!(
        put.header("cookie"),
        Some("PVEAuthCookie=PVE%3Aroot%40pam%3A6754A3B2%3A%3Asig1%2F%2B%3D")
    );
    assert_eq!(put.header("csrfpreventiontoken"), Some("6754A3B2:csrf1"));
    assert!(put.header("authorization").is_none());
}

#[tokio::test]
async fn tls_trust_modes() {
    let server = start(Arc::new(|_, _| {
        ok_json(r#"{"version":"9.1.4","release":"9.1","repoid":"a1b2c3d4"}"#)
    }))
    .await;

    // The right CA, the right fingerprint (any accepted spelling), insecure: all connect.
    client(&server).version().await.unwrap();
    let fp = server.fingerprint();
    for spelling in [fp.clone(), fp.to_lowercase(), fp.replace(':', "")] {
        let tls = TlsMode::Fingerprints(vec![
            Fingerprint([1; 32]),
            Fingerprint::parse(&spelling).unwrap(),
        ]);
        PveClient::new(config(&server.url, tls))
            .unwrap()
            .version()
            .await
            .unwrap();
    }
    PveClient::new(config(&server.url, TlsMode::Insecure))
        .unwrap()
        .version()
        .await
        .unwrap();

    // Another cluster's CA (same subject, as on real PVE clusters) and an
    // unrelated CA: both are TLS errors naming the URL, not retryable.
    for (other_ca, reason) in [
        (support::make_certs().ca_pem, "BadSignature"),
        (
            support::make_certs_named("Some Other CA").ca_pem,
            "UnknownIssuer",
        ),
    ] {
        let e = PveClient::new(config(
            &server.url,
            TlsMode::Verify {
                ca_pem: Some(other_ca),
            },
        ))
        .unwrap()
        .version()
        .await
        .unwrap_err();
        match &e {
            PveError::Tls {
                url,
                message,
                instance,
            } => {
                assert_eq!(url, &server.url);
                assert_eq!(instance, "dc-test");
                assert_eq!(message, &format!("invalid peer certificate: {reason}"));
            }
            other => panic!("{other:?}"),
        }
        assert!(e.to_string().contains(&server.url));
        assert!(!e.is_retryable());
    }

    // A wrong fingerprint: a TLS error naming the URL and the fingerprint seen.
    let e = PveClient::new(config(
        &server.url,
        TlsMode::Fingerprints(vec![Fingerprint([7; 32])]),
    ))
    .unwrap()
    .version()
    .await
    .unwrap_err();
    let text = e.to_string();
    assert_eq!(e.category(), "tls");
    assert!(text.contains(&server.url) && text.contains(&fp), "{text}");

    // The right CA but a host name not in the SANs.
    let by_name = server.url.replace("127.0.0.1", "localhost");
    PveClient::new(config(
        &by_name,
        TlsMode::Verify {
            ca_pem: Some(server.certs.ca_pem.clone()),
        },
    ))
    .unwrap()
    .version()
    .await
    .unwrap();
}

mod log_capture {
    //! A minimal tracing subscriber that writes every event and span field
    //! into a string, to prove secrets never reach logs.

    use std::fmt::Write;
    use std::sync::{Arc, Mutex};

    use tracing::field::{Field, Visit};
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Metadata, Subscriber};

    #[derive(Clone, Default)]
    pub struct Capture(pub Arc<Mutex<String>>);

    struct V<'a>(&'a mut String);
    impl Visit for V<'_> {
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, " {}={:?}", field.name(), value);
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, _: &Metadata<'_>) -> bool {
            true
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            let mut s = self.0.lock().unwrap();
            s.push_str(span.metadata().name());
            span.record(&mut V(&mut s));
            s.push('\n');
            Id::from_u64(1)
        }
        fn record(&self, _: &Id, values: &Record<'_>) {
            values.record(&mut V(&mut self.0.lock().unwrap()));
        }
        fn record_follows_from(&self, _: &Id, _: &Id) {}
        fn event(&self, event: &Event<'_>) {
            let mut s = self.0.lock().unwrap();
            event.record(&mut V(&mut s));
            s.push('\n');
        }
        fn enter(&self, _: &Id) {}
        fn exit(&self, _: &Id) {}
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_token_secret_never_appears_in_debug_errors_or_logs() {
    let capture = log_capture::Capture::default();
    let _guard = tracing::subscriber::set_default(capture.clone());

    let server = start(Arc::new(|req, _| {
        if req.target.contains("/status/current") {
            error_reply(
                401,
                "authentication failure",
                r#"{"data":null,"message":"authentication failure\n"}"#,
            )
        } else if req.target.contains("/version") {
            Reply::HangUp
        } else {
            error_reply(
                403,
                "Permission check failed (/vms/105, VM.Audit)",
                r#"{"data":null}"#,
            )
        }
    }))
    .await;
    let mut texts: Vec<String> = Vec::new();

    // Every type that holds the secret.
    let secret = Secret::new(SECRET);
    let auth = Auth::token(TOKEN_ID, SECRET).unwrap();
    let cfg = config(
        &server.url,
        TlsMode::Verify {
            ca_pem: Some(server.certs.ca_pem.clone()),
        },
    );
    let c = PveClient::new(cfg.clone()).unwrap();
    texts.extend([
        format!("{secret:?}"),
        format!("{secret}"),
        format!("{auth:?}"),
        format!("{cfg:?}"),
        format!("{c:?}"),
    ]);
    let ticket = Auth::Ticket {
        username: "root@pam".into(),
        password: Secret::new(SECRET),
    };
    texts.push(format!("{ticket:?}"));

    // Errors of every kind the server can provoke, plus TLS and config errors.
    let errors = vec![
        c.vm_status(&node(), vmid(105)).await.unwrap_err(),
        c.version().await.unwrap_err(),
        c.vm_config(&node(), vmid(105)).await.unwrap_err(),
        PveClient::new(config(
            &server.url,
            TlsMode::Fingerprints(vec![Fingerprint([7; 32])]),
        ))
        .unwrap()
        .version()
        .await
        .unwrap_err(),
        PveClient::new(config(
            &server.url,
            TlsMode::Verify {
                ca_pem: Some("garbage".into()),
            },
        ))
        .unwrap_err(),
    ];
    let categories: Vec<&str> = errors.iter().map(PveError::category).collect();
    assert_eq!(
        categories,
        vec![
            "unauthorized",
            "transient",
            "permission_denied",
            "tls",
            "invalid_config"
        ]
    );
    for e in &errors {
        texts.push(format!("{e}"));
        texts.push(format!("{e:?}"));
    }
    // Parse errors of credentials never echo the secret either.
    texts.push(format!(
        "{:?}",
        Auth::token(&format!("{TOKEN_ID}={SECRET}"), "x").unwrap_err()
    ));
    texts.push(format!(
        "{:?}",
        Auth::token(TOKEN_ID, format!("{SECRET} x")).unwrap_err()
    ));
    // Token id and secret swapped by mistake.
    texts.push(format!("{}", Auth::token(SECRET, TOKEN_ID).unwrap_err()));

    let logs = capture.0.lock().unwrap().clone();
    assert!(
        logs.contains("pve api call"),
        "the capture must see the client's events: {logs}"
    );
    assert!(
        logs.contains("/nodes/{node}/qemu/{vmid}/status/current"),
        "{logs}"
    );
    texts.push(logs);

    // The secret is still on the wire where it belongs.
    assert!(server.requests().iter().any(|r| {
        r.header("authorization")
            .is_some_and(|h| h.contains(SECRET))
    }));
    for t in &texts {
        assert!(!t.contains(SECRET), "secret leaked in: {t}");
        assert!(!t.contains("8c1f9a7e"), "part of the secret leaked in: {t}");
    }
}

#[tokio::test]
async fn failed_ticket_login_is_not_repeated() {
    let server = start(Arc::new(|_, _| {
        error_reply(401, "authentication failure", r#"{"data":null}"#)
    }))
    .await;
    let cfg = ClientConfig::new(
        "dc-test",
        ApiUrl::parse(&server.url).unwrap(),
        Auth::Ticket {
            username: "root@pam".into(),
            password: Secret::new("wrong"),
        },
    )
    .with_tls(TlsMode::Verify {
        ca_pem: Some(server.certs.ca_pem.clone()),
    });
    let e = PveClient::new(cfg).unwrap().version().await.unwrap_err();
    assert_eq!(e.category(), "unauthorized");
    assert_eq!(e.context().map(|c| c.path.as_str()), Some("/access/ticket"));
    assert_eq!(
        server.requests().len(),
        1,
        "Proxmox delays each 401 by 3 s: one login attempt only"
    );
}

#[tokio::test]
async fn a_host_name_outside_the_certificate_sans_is_a_tls_error() {
    // PVE node certificates carry the node name and IP; connecting through
    // another name (a VIP, a load balancer) fails hostname verification.
    let certs = support::make_certs_for("Test PVE Cluster Manager CA", &["pve-a1.example"]);
    let server = support::start_with_certs(
        Arc::new(|_, _| ok_json(r#"{"version":"9.1.4","release":"9.1","repoid":"a1b2c3d4"}"#)),
        certs,
    )
    .await;
    let e = client(&server).version().await.unwrap_err();
    match &e {
        PveError::Tls { url, message, .. } => {
            assert_eq!(url, &server.url);
            assert_eq!(
                message,
                r#"invalid peer certificate: certificate not valid for name "127.0.0.1"; certificate is only valid for DnsName("pve-a1.example")"#
            );
        }
        other => panic!("{other:?}"),
    }
    // Pinning the fingerprint instead accepts it (the name is not checked).
    let tls = TlsMode::Fingerprints(vec![Fingerprint::parse(&server.fingerprint()).unwrap()]);
    PveClient::new(config(&server.url, tls))
        .unwrap()
        .version()
        .await
        .unwrap();
}
