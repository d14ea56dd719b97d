//! The `/_sim/` control API over HTTP (what the out-of-process benchmark
//! uses): state, call counts, faults, node state, agent state, token
//! rotation, uploaded bytes and the lower bound.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, client_for, fast_config, seed_iso, start};
use serde_json::{Value, json};

struct Ctl {
    client: reqwest::Client,
    base: String,
}

impl Ctl {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, format!("{}/_sim{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let bytes = r.bytes().await.unwrap();
        (
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }
}

#[tokio::test]
async fn control_api_round_trip() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-b").unwrap();
    let a = Api::new(c);
    let ctl = Ctl {
        client: client_for(&c.ca_pem()),
        base: c.url(),
    };

    // call counts per endpoint template (no authentication needed)
    a.get("/version").await;
    a.get("/version").await;
    a.get("/nodes/pve-b1/qemu/9100/config").await;
    a.get("/nodes/pve-b1/qemu/555/config").await;
    let (s, calls) = ctl.call(reqwest::Method::GET, "/calls", None).await;
    assert_eq!(s, 200);
    assert_eq!(calls["by_endpoint"]["GET /version"], json!(2));
    assert_eq!(
        calls["by_endpoint"]["GET /nodes/{node}/qemu/{vmid}/config"],
        json!(2)
    );
    assert_eq!(calls["total"], json!(4));
    assert_eq!(calls["errors"], json!(1));
    assert_eq!(c.calls().count("GET", "/version"), 2);
    ctl.call(reqwest::Method::DELETE, "/calls", None).await;
    assert_eq!(c.calls().total, 0);

    // faults
    let (s, id) = ctl
        .call(
            reqwest::Method::POST,
            "/faults",
            Some(json!({"method": "GET", "path": "/version", "count": 1, "kind": {"type": "error", "status": 596, "message": "tls_process_server_certificate: certificate verify failed"}})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(id["id"], json!(1));
    let (_, list) = ctl.call(reqwest::Method::GET, "/faults", None).await;
    assert_eq!(list[0]["kind"]["status"], json!(596));
    let r = a.get("/version").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            596,
            "tls_process_server_certificate: certificate verify failed"
        )
    );
    let (s, _) = ctl
        .call(
            reqwest::Method::POST,
            "/faults",
            Some(json!({"kind": {"type": "nonsense"}})),
        )
        .await;
    assert_eq!(s, 400);
    ctl.call(
        reqwest::Method::POST,
        "/faults",
        Some(json!({"kind": {"type": "no-quorum"}})),
    )
    .await;
    assert_eq!(
        a.post("/pools", &[("poolid", "x")]).await.reason,
        "cluster not ready - no quorum?"
    );
    let (s, _) = ctl.call(reqwest::Method::DELETE, "/faults", None).await;
    assert_eq!(s, 200);
    assert!(c.faults().is_empty());

    // node state
    let (s, _) = ctl
        .call(
            reqwest::Method::POST,
            "/nodes/pve-b2/online",
            Some(json!({"online": false})),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(a.get("/nodes/pve-b2/status").await.status, 595);
    let (s, _) = ctl
        .call(reqwest::Method::POST, "/nodes/pve-b2/online?online=1", None)
        .await;
    assert_eq!(s, 200);
    assert_eq!(a.get("/nodes/pve-b2/status").await.status, 200);
    assert_eq!(
        ctl.call(
            reqwest::Method::POST,
            "/nodes/nope/online",
            Some(json!({"online": true}))
        )
        .await
        .0,
        404
    );

    // agent state and token rotation
    assert_eq!(
        ctl.call(
            reqwest::Method::POST,
            "/vms/9100/agent",
            Some(json!({"state": "running"}))
        )
        .await
        .0,
        200
    );
    assert_eq!(c.vm(9100).unwrap().agent, pve_sim::AgentState::Running);
    assert_eq!(
        ctl.call(
            reqwest::Method::POST,
            "/tokens/capmox@pve!capi/secret",
            Some(json!({"secret": "rotated"}))
        )
        .await
        .0,
        200
    );
    assert_eq!(a.get("/version").await.status, 401);
    assert_eq!(c.token_secret(), "rotated");

    // state
    let (s, state) = ctl.call(reqwest::Method::GET, "/state", None).await;
    assert_eq!(s, 200);
    assert_eq!(state["cluster"], "dc-b");
    assert_eq!(state["nodes"].as_array().unwrap().len(), 3);
    assert_eq!(state["vms"][0]["vmid"], json!(9100));
    assert_eq!(state["vms"][0]["template"], json!(true));
    assert!(
        state["storages"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["storage"] == "ceph" && s["volumes"].as_array().unwrap().len() == 2)
    );
    assert_eq!(ctl.call(reqwest::Method::GET, "/bogus", None).await.0, 404);
}

#[tokio::test]
async fn control_api_iso_tasks_and_lower_bound() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-c").unwrap();
    let a = Api::new(c);
    let ctl = Ctl {
        client: client_for(&c.ca_pem()),
        base: c.url(),
    };
    let iso = seed_iso("u", "m", None);
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(iso.clone()).file_name("s.iso"),
    );
    let r = a
        .send(
            a.client
                .post(a.url("/nodes/pve-c1/storage/cephfs/upload"))
                .multipart(form),
        )
        .await;
    let upid = r.upid();
    a.task_result("pve-c1", &upid).await;
    let (s, task) = ctl
        .call(
            reqwest::Method::GET,
            &format!("/tasks/{}", common::enc(&upid)),
            None,
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(task["exitstatus"], "OK");
    let bytes = ctl
        .client
        .get(format!(
            "{}/_sim/iso?node=pve-c1&volid=cephfs:iso/s.iso",
            c.url()
        ))
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(bytes.to_vec(), iso);

    let req = json!([{"cluster": "dc-c", "template_vmid": 9200, "placements": [{"node": "pve-c2", "count": 20}]}]);
    let (s, lb) = ctl
        .call(reqwest::Method::POST, "/lower-bound", Some(req))
        .await;
    assert_eq!(s, 200, "{lb}");
    // linked clone 5 + config 1 + resize 2 + start 3 + boot 100 = 111 s, × 0.001
    assert_eq!(lb["total"], json!(0.111));
    assert_eq!(lb["clusters"]["dc-c"]["machines"], json!(20));
    let (s, e) = ctl
        .call(
            reqwest::Method::POST,
            "/lower-bound",
            Some(json!([{"cluster": "dc-a", "template_vmid": 9000, "placements": []}])),
        )
        .await;
    assert_eq!(s, 400);
    assert_eq!(
        e["error"],
        "cannot compute the lower bound: unknown cluster 'dc-a'"
    );
    // the library gives the same answer over all clusters
    let lb2 = sim
        .lower_bound(&[pve_sim::FleetRequest {
            cluster: "dc-c".into(),
            template_vmid: 9200,
            placements: vec![pve_sim::Placement {
                node: "pve-c2".into(),
                count: 20,
            }],
            full: None,
            storage: None,
            steps: pve_sim::FleetSteps::default(),
        }])
        .unwrap();
    assert_eq!(lb2.total, std::time::Duration::from_millis(111));
}
