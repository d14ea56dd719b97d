//! Fault injection and unreachable nodes (docs/proxmox-semantics.md §4, §9, §22.12;
//! docs/field-cases.md B04(c), B25): injected errors, next-N budgets, seeded
//! probabilities, dropped connections, task failures/warnings/lock timeouts,
//! 595 for offline nodes, `unknown` status in the cluster view, quorum loss,
//! and the lag of `/cluster/resources`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, fast_config, start};
use pve_sim::{Fault, FaultKind};
use serde_json::json;

fn fault(method: &str, path: &str, kind: FaultKind) -> Fault {
    Fault {
        method: Some(method.into()),
        path: Some(path.into()),
        node: None,
        probability: 1.0,
        count: None,
        kind,
    }
}

#[tokio::test]
async fn injected_error_for_the_next_call_only() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let mut f = fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/clone",
        FaultKind::Error {
            status: 500,
            message: "cluster not ready - no quorum?".into(),
        },
    );
    f.count = Some(1);
    c.add_fault(f);
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "101")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "cluster not ready - no quorum?")
    );
    assert_eq!(
        r.body,
        json!({"data": null, "message": "cluster not ready - no quorum?\n"})
    );
    assert!(c.faults().is_empty(), "budget spent");
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "101")])
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

#[tokio::test]
async fn task_faults_warnings_failure_lock_timeout() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "101")])
        .await;
    a.run("pve-a1", r).await;
    let start = "/nodes/{node}/qemu/{vmid}/status/start";
    let id = c.add_fault(fault("POST", start, FaultKind::TaskWarnings { count: 1 }));
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "WARNINGS: 1",
        "B04(c): success with warnings"
    );
    assert_eq!(c.vm(101).unwrap().status, "running");
    assert!(c.remove_fault(id));
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await,
    )
    .await;

    let id = c.add_fault(fault(
        "POST",
        start,
        FaultKind::TaskFailure {
            message: "start failed: QEMU exited with code 1".into(),
        },
    ));
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "start failed: QEMU exited with code 1"
    );
    assert_eq!(
        c.vm(101).unwrap().status,
        "stopped",
        "a failed task changes nothing"
    );
    c.remove_fault(id);

    c.add_fault(fault("POST", start, FaultKind::LockTimeout));
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout"
    );
    // synchronous calls get the lock timeout as 500
    c.clear_faults();
    c.add_fault(fault(
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        FaultKind::LockTimeout,
    ));
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("cores", "2")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            500,
            "can't lock file '/var/lock/qemu-server/lock-101.conf' - got timeout"
        )
    );
}

#[tokio::test]
async fn connection_reset_and_latency() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let mut f = fault("GET", "/version", FaultKind::ConnectionReset);
    f.count = Some(1);
    c.add_fault(f);
    let err = a
        .client
        .get(a.url("/version"))
        .header("Authorization", a.auth.clone().unwrap())
        .send()
        .await
        .unwrap_err();
    assert!(!err.is_status() && !err.is_timeout(), "{err:?}");
    c.add_fault(fault(
        "GET",
        "/version",
        FaultKind::Latency { seconds: 1.0 },
    ));
    assert_eq!(
        a.get("/version").await.status,
        200,
        "latency delays but answers"
    );
    assert_eq!(c.faults()[0].fired, 1);
}

#[tokio::test]
async fn seeded_probabilities_repeat() {
    async fn pattern() -> Vec<u16> {
        let sim = start(fast_config()).await;
        let c = sim.cluster("dc-a").unwrap();
        let mut f = fault(
            "GET",
            "/version",
            FaultKind::Error {
                status: 503,
                message: "busy".into(),
            },
        );
        f.probability = 0.5;
        c.add_fault(f);
        let a = Api::new(c);
        let mut out = Vec::new();
        for _ in 0..24 {
            out.push(a.get("/version").await.status);
        }
        out
    }
    let (p1, p2) = (pattern().await, pattern().await);
    assert_eq!(p1, p2, "same seed, same faults");
    assert!(p1.contains(&503) && p1.contains(&200), "{p1:?}");
}

#[tokio::test]
async fn offline_node_595_unknown_status_and_quorum() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("target", "pve-a2")],
        )
        .await;
    a.run("pve-a1", r).await;
    assert!(c.set_node_online("pve-a2", false));
    let r = a.get("/nodes/pve-a2/qemu/101/status/current").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            595,
            "Errors during connection establishment, proxy handshake: No route to host"
        )
    );
    let res = a.get("/cluster/resources").await;
    let items = res.data().as_array().unwrap();
    let vm = items.iter().find(|x| x["id"] == "qemu/101").unwrap();
    assert_eq!(vm["status"], "unknown");
    assert!(vm.get("name").is_none() && vm.get("maxmem").is_none());
    assert_eq!(
        items.iter().find(|x| x["id"] == "node/pve-a2").unwrap()["status"],
        "offline"
    );
    let st = a.get("/cluster/status").await;
    let n2 = st
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "pve-a2")
        .unwrap()
        .clone();
    assert_eq!(n2["online"], json!(0));
    assert_eq!(st.data()[0]["quorate"], json!(1));
    // the rest of the cluster works
    assert_eq!(
        a.get("/nodes/pve-a1/qemu/9000/status/current").await.status,
        200
    );
    // with half the nodes gone there is no quorum for writes
    c.set_node_online("pve-a3", false);
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "102")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "cluster not ready - no quorum?")
    );
    assert_eq!(
        a.get("/cluster/status").await.data()[0]["quorate"],
        json!(0)
    );
    c.set_node_online("pve-a2", true);
    c.set_node_online("pve-a3", true);
    assert_eq!(
        a.get("/nodes/pve-a2/qemu/101/status/current").await.status,
        200
    );
}

#[tokio::test]
async fn resources_lag_behind_writes_b29() {
    let cfg = fast_config().with_timings(|t| t.resources_lag = 1e7);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    // existing VMs are visible with their status
    let res = a.get("/cluster/resources?type=vm").await;
    assert_eq!(res.data()[0]["status"], "stopped");
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("name", "w1")],
        )
        .await;
    a.run("pve-a1", r).await;
    let res = a.get("/cluster/resources?type=vm").await;
    let vm = res
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["vmid"] == 101)
        .unwrap()
        .clone();
    // listed at once (pmxcfs), but without status data from pvestatd
    assert_eq!(
        vm,
        json!({"id": "qemu/101", "type": "qemu", "vmid": 101, "node": "pve-a1", "status": "unknown",
                          "tags": "capmox;ubuntu-24.04"})
    );
    // per-VM status is live
    assert_eq!(
        a.get("/nodes/pve-a1/qemu/101/status/current").await.data()["name"],
        "w1"
    );
}
