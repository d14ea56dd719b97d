//! Integration tests: the real client over real HTTPS against `pve-sim`
//! (in-process, one simulator per test on 127.0.0.1:0, its self-signed CA
//! pinned by the client, time scaled down so tasks take milliseconds).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use pve_client::api::cluster::ResourceType;
use pve_client::api::qemu::DeleteOptions;
use pve_client::api::qemu::clone::CloneRequest;
use pve_client::api::qemu::config::ConfigUpdate;
use pve_client::api::qemu::power::{ShutdownOptions, StartOptions, StopOptions};
use pve_client::api::storage::StorageQuery;
use pve_client::options::{DiskSize, DiskSlot, IpConfig, Ipv4Config, Tag, Tags};
use pve_client::task::WaitOptions;
use pve_client::{
    ApiUrl, Auth, CallCounter, ClientConfig, Fingerprint, NodeName, PoolId, PveClient, PveError,
    Secret, StorageId, TaskFailureKind, TlsMode, VmId, VmLock,
};
use pve_sim::{AgentState, Fault, FaultKind, SimCluster, SimConfig, Simulator};

/// The built-in three clusters with every duration × 0.001 (a 60 s full clone
/// takes 60 ms, the 3 s delay of a 401 takes 3 ms), without schema validation
/// (parsing the 2 MB schema takes seconds in a debug build).
async fn start_sim() -> Simulator {
    Simulator::start(
        SimConfig::builtin_default()
            .with_time_scale(0.001)
            .with_schema_path(None),
    )
    .await
    .unwrap()
}

/// Like [`start_sim`], with the schema of `crate::pve_schema`: none in
/// `make test`; the official PVE schema (`apidoc.json`) in the conformance
/// suite, which runs this file again (`tests/conformance/main.rs`), so there
/// every request the client sends is checked and a parameter Proxmox would
/// refuse fails the test.
async fn start_sim_validating() -> Simulator {
    let cfg = SimConfig::builtin_default()
        .with_time_scale(0.001)
        .with_schema_path(crate::pve_schema());
    Simulator::start(cfg).await.unwrap()
}

fn config(c: &SimCluster, tls: TlsMode) -> ClientConfig {
    ClientConfig::new(
        c.name(),
        ApiUrl::parse(&c.url()).unwrap(),
        Auth::token(&c.token_id(), c.token_secret()).unwrap(),
    )
    .with_tls(tls)
}

fn pinned(c: &SimCluster) -> PveClient {
    PveClient::new(config(
        c,
        TlsMode::Verify {
            ca_pem: Some(c.ca_pem()),
        },
    ))
    .unwrap()
}

fn wait() -> WaitOptions {
    WaitOptions {
        deadline: Duration::from_secs(30),
        initial_interval: Duration::from_millis(2),
        max_interval: Duration::from_millis(20),
    }
}

fn node(n: &str) -> NodeName {
    NodeName::new(n).unwrap()
}

fn vmid(n: u32) -> VmId {
    VmId::new(n).unwrap()
}

#[tokio::test]
async fn tls_pinned_ca_fingerprints_and_insecure() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let b = sim.cluster("dc-b").unwrap();

    // The cluster's own CA verifies.
    assert!(!pinned(a).version().await.unwrap().release.is_empty());

    // Another cluster's CA: a TLS error that names the instance URL.
    let e = PveClient::new(config(
        a,
        TlsMode::Verify {
            ca_pem: Some(b.ca_pem()),
        },
    ))
    .unwrap()
    .version()
    .await
    .unwrap_err();
    match &e {
        PveError::Tls {
            url,
            instance,
            message,
        } => {
            assert_eq!(url, &a.url());
            assert_eq!(instance, "dc-a");
            assert!(message.starts_with("invalid peer certificate"), "{message}");
        }
        other => panic!("expected Tls, got {other:?}"),
    }
    assert!(e.to_string().contains(&a.url()), "{e}");
    assert!(!e.is_retryable());

    // The right fingerprint (as the simulator prints it, and lower-case) connects.
    let fp = a.cert_fingerprint_sha256();
    for spelling in [fp.clone(), fp.to_lowercase()] {
        let tls = TlsMode::Fingerprints(vec![Fingerprint::parse(&spelling).unwrap()]);
        PveClient::new(config(a, tls))
            .unwrap()
            .version()
            .await
            .unwrap();
    }

    // dc-b's fingerprint pinned for dc-a: a TLS error naming dc-a's URL and
    // the fingerprint actually seen.
    let wrong = TlsMode::Fingerprints(vec![
        Fingerprint::parse(&b.cert_fingerprint_sha256()).unwrap(),
    ]);
    let e = PveClient::new(config(a, wrong))
        .unwrap()
        .version()
        .await
        .unwrap_err();
    assert_eq!(e.category(), "tls");
    let text = e.to_string();
    assert!(text.contains(&a.url()), "{text}");
    assert!(text.contains(&fp), "the seen fingerprint is named: {text}");

    // Insecure connects.
    PveClient::new(config(a, TlsMode::Insecure))
        .unwrap()
        .version()
        .await
        .unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn authentication_token_rotation_and_ticket() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();

    let bad = ClientConfig::new(
        "dc-a",
        ApiUrl::parse(&a.url()).unwrap(),
        Auth::token(&a.token_id(), "00000000-0000-0000-0000-000000000000").unwrap(),
    )
    .with_tls(TlsMode::Verify {
        ca_pem: Some(a.ca_pem()),
    });
    let e = PveClient::new(bad).unwrap().nodes().await.unwrap_err();
    assert_eq!(e.category(), "unauthorized", "{e:?}");

    // Rotating the secret invalidates the old client.
    let c = pinned(a);
    c.nodes().await.unwrap();
    assert!(a.set_token_secret(&a.token_id(), "11111111-2222-3333-4444-555555555555"));
    assert_eq!(c.nodes().await.unwrap_err().category(), "unauthorized");

    // Ticket auth with CSRF works for reads and writes.
    let ticket = ClientConfig::new(
        "dc-a",
        ApiUrl::parse(&a.url()).unwrap(),
        Auth::Ticket {
            username: "root@pam".into(),
            password: Secret::new("pve-sim"),
        },
    )
    .with_tls(TlsMode::Verify {
        ca_pem: Some(a.ca_pem()),
    });
    let t = PveClient::new(ticket).unwrap();
    assert_eq!(t.nodes().await.unwrap().len(), 4);
    t.create_pool(&PoolId::new("ticket-made").unwrap(), Some("via ticket"))
        .await
        .unwrap();
    assert!(
        t.pools()
            .await
            .unwrap()
            .iter()
            .any(|p| p.poolid == "ticket-made")
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn inventory_endpoints() {
    let sim = start_sim_validating().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);

    let v = c.version().await.unwrap();
    assert!(
        v.major_minor().is_some_and(|(major, _)| major >= 8),
        "{v:?}"
    );

    let status = c.cluster_status().await.unwrap();
    let cluster = status.iter().find(|e| !e.is_node()).unwrap();
    assert_eq!(cluster.name, "dc-a");
    assert!(cluster.quorate);
    let mut online: Vec<&str> = status
        .iter()
        .filter(|e| e.is_node() && e.online)
        .map(|e| e.name.as_str())
        .collect();
    online.sort_unstable();
    assert_eq!(online, ["pve-a1", "pve-a2", "pve-a3", "pve-a4"]);

    let nodes = c.nodes().await.unwrap();
    assert_eq!(nodes.len(), 4);
    assert!(
        nodes
            .iter()
            .all(|n| n.is_online() && n.maxmem == Some(128 << 30))
    );
    let ns = c.node_status(&node("pve-a2")).await.unwrap();
    assert_eq!(ns.memory.total, Some(128 << 30));

    let vms = c.cluster_resources(Some(ResourceType::Vm)).await.unwrap();
    let tpl = vms.iter().find(|r| r.vmid == Some(vmid(9000))).unwrap();
    assert!(tpl.template && tpl.is_qemu());
    assert_eq!(tpl.node.as_ref().map(NodeName::as_str), Some("pve-a1"));
    assert!(
        tpl.tags()
            .unwrap()
            .contains_all(&Tags::parse("capmox;ubuntu-24.04").unwrap())
    );
    let storages = c
        .cluster_resources(Some(ResourceType::Storage))
        .await
        .unwrap();
    assert!(
        storages
            .iter()
            .any(|s| s.storage.as_deref() == Some("ceph") && s.shared)
    );

    let on_a1 = c
        .storages(
            &node("pve-a1"),
            &StorageQuery {
                content: Some("images".into()),
                ..StorageQuery::default()
            },
        )
        .await
        .unwrap();
    let mut names: Vec<&str> = on_a1
        .iter()
        .filter_map(|s| s.storage.as_ref().map(StorageId::as_str))
        .collect();
    names.sort_unstable();
    assert_eq!(names, ["ceph", "local", "local-lvm"]);
    let ceph = c
        .storage_status(&node("pve-a1"), &StorageId::new("ceph").unwrap())
        .await
        .unwrap();
    assert!(ceph.shared && ceph.total == Some(20 << 40));

    let list = c.vms(&node("pve-a1")).await.unwrap();
    assert!(list.iter().any(|v| v.vmid == vmid(9000) && v.template));

    // nextid: the lowest free id, and a taken id refused with the errors map.
    assert_eq!(c.next_vmid(None).await.unwrap(), vmid(100));
    match c.next_vmid(Some(vmid(9000))).await.unwrap_err() {
        PveError::InvalidParameter { errors, .. } => {
            assert_eq!(
                errors.get("vmid").map(String::as_str),
                Some("VM 9000 already exists")
            );
        }
        other => panic!("{other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn vm_lifecycle_clone_configure_resize_power_delete() {
    let sim = start_sim_validating().await;
    let a = sim.cluster("dc-a").unwrap();
    let counter = Arc::new(CallCounter::new());
    let c = pinned(a).with_observer(counter.clone());
    let (n1, n2) = (node("pve-a1"), node("pve-a2"));
    let new = vmid(131);

    // Linked clone of the template onto another node (shared storage).
    let req = CloneRequest::new(new)
        .name("wl1-md-0-abcde")
        .full(false)
        .target(n2.clone());
    let upid = c.clone_vm(&n1, vmid(9000), &req).await.unwrap();
    assert_eq!(upid.worker_type(), "qmclone");
    assert_eq!(upid.id(), "9000", "a clone task's id is the source VMID");
    assert_eq!(upid.node(), &n1);
    let done = c.wait_task(&upid, wait()).await.unwrap();
    assert_eq!((done.exitstatus.as_str(), done.warnings), ("OK", 0));

    // The clone lives on the target node; the source node does not know it.
    let cfg = c.vm_config(&n2, new).await.unwrap();
    assert_eq!(cfg.name.as_deref(), Some("wl1-md-0-abcde"));
    assert_eq!(cfg.lock, None);
    let mac = cfg.nets[&0].macaddr.expect("clones get a fresh MAC");
    assert_eq!(mac.0[..3], [0xBC, 0x24, 0x11], "default PVE MAC prefix");
    let scsi0 = DiskSlot::parse("scsi0").unwrap();
    assert_eq!(cfg.disks[&scsi0].size, Some(DiskSize::from_gib(20)));
    assert!(cfg.smbios1.as_ref().and_then(|s| s.uuid).is_some());
    let digest = cfg.digest.clone().expect("config GET carries a digest");
    let e = c.vm_config(&n1, new).await.unwrap_err();
    assert!(
        matches!(&e, PveError::NotFound { message, .. } if message.contains("does not exist")),
        "{e:?}"
    );

    // Config update through the async POST, with digest, tags, ipconfig, sshkeys.
    let mut tags = cfg.tags.clone();
    tags.insert(Tag::new("cluster-wl1").unwrap());
    let ip = IpConfig {
        ip: Some(Ipv4Config::Static {
            addr: "10.10.0.21".parse().unwrap(),
            prefix: 24,
        }),
        gw: Some("10.10.0.1".parse().unwrap()),
        ..IpConfig::default()
    };
    let update = ConfigUpdate::new()
        .digest(digest.clone())
        .memory_mib(4096)
        .cores(4)
        .tags(&tags)
        .ipconfig(0, &ip)
        .sshkeys("ssh-ed25519 AAAAC3Nza capi@wl1")
        .description("capmox owner=6f1c; cluster=wl1");
    if let Some(u) = c.update_vm_config_async(&n2, new, &update).await.unwrap() {
        c.wait_task(&u, wait()).await.unwrap();
    }
    let cfg2 = c.vm_config(&n2, new).await.unwrap();
    assert_eq!(cfg2.memory_mib, Some(4096));
    assert_eq!(cfg2.cores, Some(4));
    assert_eq!(cfg2.tags, tags, "tags compare as sets");
    assert_eq!(cfg2.ipconfigs.get(&0), Some(&ip));
    assert_eq!(
        cfg2.sshkeys.as_deref(),
        Some("ssh-ed25519 AAAAC3Nza capi@wl1")
    );
    assert_eq!(
        cfg2.description.as_deref(),
        Some("capmox owner=6f1c; cluster=wl1")
    );
    assert_ne!(cfg2.digest.as_deref(), Some(digest.as_str()));

    // A stale digest is a conflict; the same key set and deleted never leaves.
    let stale = ConfigUpdate::new().digest(digest).cores(2);
    let e = c.update_vm_config_sync(&n2, new, &stale).await.unwrap_err();
    assert_eq!(e.category(), "conflict", "{e:?}");
    let before = a.calls().total;
    let both = ConfigUpdate::new().cores(2).delete("cores");
    assert_eq!(
        c.update_vm_config_sync(&n2, new, &both)
            .await
            .unwrap_err()
            .category(),
        "invalid_request"
    );
    assert_eq!(a.calls().total, before, "refused locally, nothing sent");

    // With the official schema loaded (the conformance suite), the simulator
    // refuses what Proxmox refuses: an unknown key is a 400 with the
    // per-parameter message.
    if sim.config().schema_path.is_some() {
        let e = c
            .update_vm_config_sync(&n2, new, &ConfigUpdate::new().set("no-such-option", "1"))
            .await
            .unwrap_err();
        match &e {
            PveError::InvalidParameter { errors, .. } => {
                assert!(errors.contains_key("no-such-option"), "{errors:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    // Synchronous PUT with a delete.
    c.update_vm_config_sync(
        &n2,
        new,
        &ConfigUpdate::new().onboot(true).delete("description"),
    )
    .await
    .unwrap();
    let cfg3 = c.vm_config(&n2, new).await.unwrap();
    assert_eq!(cfg3.onboot, Some(true));
    assert_eq!(cfg3.description, None);
    assert!(
        c.vm_pending(&n2, new)
            .await
            .unwrap()
            .iter()
            .all(|p| !p.is_pending())
    );

    // Resize: grow with an absolute size; shrinking fails in the task.
    let grow = c
        .resize_disk(&n2, new, scsi0, DiskSize::from_gib(40))
        .await
        .unwrap()
        .expect("PVE 8+ returns a task");
    c.wait_task(&grow, wait()).await.unwrap();
    let cfg4 = c.vm_config(&n2, new).await.unwrap();
    assert_eq!(cfg4.disks[&scsi0].size, Some(DiskSize::from_gib(40)));
    let shrink = c
        .resize_disk(&n2, new, scsi0, DiskSize::from_gib(20))
        .await
        .unwrap()
        .unwrap();
    match c.wait_task(&shrink, wait()).await.unwrap_err() {
        PveError::TaskFailed {
            exitstatus,
            kind,
            log_tail,
            ..
        } => {
            assert!(
                exitstatus.contains("shrinking disks is not supported"),
                "{exitstatus}"
            );
            assert_eq!(
                kind,
                TaskFailureKind::Conflict(pve_client::ConflictKind::Unsupported)
            );
            assert!(!log_tail.is_empty());
        }
        other => panic!("{other:?}"),
    }

    // Start; the agent answers only once the guest is up.
    a.set_agent_state(new.get(), AgentState::NotRunning);
    let st = c.start_vm(&n2, new, StartOptions::default()).await.unwrap();
    c.wait_task(&st, wait()).await.unwrap();
    let status = c.vm_status(&n2, new).await.unwrap();
    assert!(status.is_running() && status.agent);
    let e = c.agent_ping(&n2, new).await.unwrap_err();
    assert!(
        matches!(&e, PveError::AgentUnavailable { message, .. } if message == "QEMU guest agent is not running"),
        "{e:?}"
    );
    assert!(e.is_retryable());
    a.set_agent_state(new.get(), AgentState::Running);
    c.agent_ping(&n2, new).await.unwrap();
    let ifaces = c.agent_network_interfaces(&n2, new).await.unwrap();
    let eth = ifaces
        .iter()
        .find(|i| i.mac() == Some(mac))
        .expect("the NIC with the config's MAC");
    assert!(eth.ip_addresses.iter().any(|a| a.is_global()), "{eth:?}");

    // Reboot (applies pending changes); the current config has no pending part.
    let rb = c.reboot_vm(&n2, new, Some(60)).await.unwrap();
    c.wait_task(&rb, wait()).await.unwrap();
    assert!(c.vm_status(&n2, new).await.unwrap().is_running());
    assert_eq!(
        c.vm_config_current(&n2, new).await.unwrap().memory_mib,
        Some(4096)
    );

    // A running VM cannot be deleted.
    let e = c
        .delete_vm(&n2, new, DeleteOptions::default())
        .await
        .unwrap_err();
    assert_eq!(e.category(), "conflict", "{e:?}");

    // Shutdown, stop (a no-op when stopped), delete with purge.
    let sd = c
        .shutdown_vm(
            &n2,
            new,
            ShutdownOptions {
                timeout_secs: Some(30),
                force_stop: true,
            },
        )
        .await
        .unwrap();
    c.wait_task(&sd, wait()).await.unwrap();
    let stop = c.stop_vm(&n2, new, StopOptions::default()).await.unwrap();
    c.wait_task(&stop, wait()).await.unwrap();
    assert!(!c.vm_status(&n2, new).await.unwrap().is_running());
    let del = c
        .delete_vm(
            &n2,
            new,
            DeleteOptions {
                purge: true,
                destroy_unreferenced_disks: true,
            },
        )
        .await
        .unwrap();
    c.wait_task(&del, wait()).await.unwrap();
    let e = c.vm_config(&n2, new).await.unwrap_err();
    assert_eq!(e.category(), "not_found");
    assert!(a.vm(new.get()).is_none());

    // The observer saw exactly what the simulator counted.
    let sim_calls = a.calls();
    for (method, template) in [
        ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        ("GET", "/nodes/{node}/qemu/{vmid}/config"),
        ("POST", "/nodes/{node}/qemu/{vmid}/config"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config"),
        ("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
        ("GET", "/nodes/{node}/tasks/{upid}/status"),
        ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping"),
        ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ] {
        assert_eq!(
            counter.count(method, template),
            sim_calls.count(method, template),
            "{method} {template}"
        );
        assert!(counter.count(method, template) > 0, "{method} {template}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn a_lock_timeout_in_the_clone_task_is_retryable() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);
    a.add_fault(Fault {
        method: Some("POST".into()),
        path: Some("/nodes/{node}/qemu/{vmid}/clone".into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: FaultKind::LockTimeout,
    });
    let upid = c
        .clone_vm(&node("pve-a1"), vmid(9000), &CloneRequest::new(vmid(140)))
        .await
        .unwrap();
    let e = c.wait_task(&upid, wait()).await.unwrap_err();
    match &e {
        PveError::TaskFailed {
            exitstatus, kind, ..
        } => {
            assert!(exitstatus.contains("got timeout"), "{exitstatus}");
            assert_eq!(kind, &TaskFailureKind::LockTimeout);
        }
        other => panic!("{other:?}"),
    }
    assert!(e.is_retryable(), "B04(a): requeue with backoff");
    // The fault is spent: the retry succeeds.
    let upid = c
        .clone_vm(&node("pve-a1"), vmid(9000), &CloneRequest::new(vmid(140)))
        .await
        .unwrap();
    c.wait_task(&upid, wait()).await.unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn task_warnings_are_success() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);
    let n1 = node("pve-a1");
    let up = c
        .clone_vm(&n1, vmid(9000), &CloneRequest::new(vmid(150)))
        .await
        .unwrap();
    c.wait_task(&up, wait()).await.unwrap();
    a.add_fault(Fault {
        method: Some("POST".into()),
        path: Some("/nodes/{node}/qemu/{vmid}/status/start".into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: FaultKind::TaskWarnings { count: 1 },
    });
    let st = c
        .start_vm(&n1, vmid(150), StartOptions::default())
        .await
        .unwrap();
    let out = c.wait_task(&st, wait()).await.unwrap();
    assert_eq!((out.exitstatus.as_str(), out.warnings), ("WARNINGS: 1", 1));
    sim.shutdown().await;
}

#[tokio::test]
async fn a_reset_connection_is_retried_once_for_gets() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let counter = Arc::new(CallCounter::new());
    let c = pinned(a).with_observer(counter.clone());
    a.add_fault(Fault {
        method: Some("GET".into()),
        path: Some("/nodes".into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: FaultKind::ConnectionReset,
    });
    assert_eq!(c.nodes().await.unwrap().len(), 4);
    assert_eq!(counter.count("GET", "/nodes"), 2);
    sim.shutdown().await;
}

#[tokio::test]
async fn node_offline_and_injected_errors_are_classified() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);

    assert!(a.set_node_online("pve-a3", false));
    let e = c.node_status(&node("pve-a3")).await.unwrap_err();
    assert!(
        matches!(e, PveError::NodeUnreachable { status: 595, .. }),
        "{e:?}"
    );
    assert!(e.is_retryable());
    // The rest of the cluster keeps working.
    c.node_status(&node("pve-a1")).await.unwrap();
    let status = c.cluster_status().await.unwrap();
    assert!(status.iter().any(|s| s.name == "pve-a3" && !s.online));

    a.add_fault(Fault {
        method: Some("POST".into()),
        path: Some("/nodes/{node}/qemu/{vmid}/clone".into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: FaultKind::NoQuorum,
    });
    let e = c
        .clone_vm(&node("pve-a1"), vmid(9000), &CloneRequest::new(vmid(160)))
        .await
        .unwrap_err();
    assert_eq!(e.category(), "transient", "{e:?}");
    assert!(e.to_string().contains("no quorum"), "{e}");

    // A VM that does not exist: Proxmox's 500 "… does not exist" is NotFound.
    let e = c.vm_status(&node("pve-a1"), vmid(777)).await.unwrap_err();
    assert_eq!(e.category(), "not_found", "{e:?}");
    // An unknown node.
    let e = c.node_status(&node("pve-zz")).await.unwrap_err();
    assert_eq!(e.category(), "not_found", "{e:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn iso_upload_list_and_delete() {
    let sim = start_sim_validating().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);
    let (n1, cephfs) = (node("pve-a1"), StorageId::new("cephfs").unwrap());
    let bytes: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let upid = c
        .upload_iso(&n1, &cephfs, "capmox-131-seed.iso", bytes.clone())
        .await
        .unwrap()
        .unwrap();
    c.wait_task(&upid, wait()).await.unwrap();
    let volid = "cephfs:iso/capmox-131-seed.iso";
    let listed = c
        .storage_content(&n1, &cephfs, Some("iso"), None)
        .await
        .unwrap();
    let vol = listed
        .iter()
        .find(|v| v.volid == volid)
        .expect("uploaded ISO is listed");
    assert_eq!(vol.size, Some(70_000));
    assert_eq!(a.iso_bytes("pve-a1", volid), Some(bytes));
    // Shared storage: visible from another node too.
    let from_a2 = c
        .storage_content(&node("pve-a2"), &cephfs, Some("iso"), None)
        .await
        .unwrap();
    assert!(from_a2.iter().any(|v| v.volid == volid));

    if let Some(u) = c.delete_volume(&n1, &cephfs, volid).await.unwrap() {
        c.wait_task(&u, wait()).await.unwrap();
    }
    let after = c
        .storage_content(&n1, &cephfs, Some("iso"), None)
        .await
        .unwrap();
    assert!(after.iter().all(|v| v.volid != volid));
    sim.shutdown().await;
}

#[tokio::test]
async fn pools_and_clone_into_pool() {
    let sim = start_sim().await;
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);
    let pool = PoolId::new("capmox-wl1").unwrap();
    c.create_pool(&pool, Some("workload cluster wl1"))
        .await
        .unwrap();
    let up = c
        .clone_vm(
            &node("pve-a1"),
            vmid(9000),
            &CloneRequest::new(vmid(170)).pool(pool.clone()),
        )
        .await
        .unwrap();
    c.wait_task(&up, wait()).await.unwrap();
    let listed = c.pools().await.unwrap();
    assert!(
        listed
            .iter()
            .any(|p| p.poolid == "capmox-wl1"
                && p.comment.as_deref() == Some("workload cluster wl1"))
    );
    let one = c.pool(&pool).await.unwrap().expect("pool exists");
    assert!(
        one.members.iter().any(|m| m.vmid == Some(vmid(170))),
        "{one:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn touching_a_vm_while_it_is_being_cloned() {
    // Slow clones so the new VM is still locked when we touch it.
    let sim = Simulator::start(
        SimConfig::builtin_default()
            .with_time_scale(0.001)
            .with_timings(|t| t.clone_linked = 5_000.0),
    )
    .await
    .unwrap();
    let a = sim.cluster("dc-a").unwrap();
    let c = pinned(a);
    let n1 = node("pve-a1");
    let upid = c
        .clone_vm(&n1, vmid(9000), &CloneRequest::new(vmid(180)))
        .await
        .unwrap();
    // Wait until the new VM's config exists (it appears inside the task).
    let mut seen_lock = None;
    for _ in 0..2000 {
        if let Some(vm) = a.vm(180) {
            seen_lock = vm.lock.clone();
            break;
        }
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert_eq!(seen_lock.as_deref(), Some("clone"));
    let e = c.vm_config(&n1, vmid(180)).await.map(|cfg| cfg.lock);
    assert_eq!(e.unwrap(), Some(VmLock::Clone));
    let e = c
        .update_vm_config_sync(&n1, vmid(180), &ConfigUpdate::new().cores(4))
        .await
        .unwrap_err();
    assert!(matches!(e.category(), "locked" | "lock_timeout"), "{e:?}");
    assert!(e.is_retryable());
    c.stop_task(&upid).await.unwrap();
    sim.shutdown().await;
}
