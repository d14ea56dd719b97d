//! Core wire behaviour: TLS per cluster, token and ticket auth, the Proxmox
//! envelope and error shapes, `/version`, `/nodes`, `/cluster/resources`,
//! `/cluster/nextid`, form/JSON bodies and pve-http-server's form splitting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, client_for, fast_config, start};
use serde_json::json;

#[tokio::test]
async fn version_over_pinned_https() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/version").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body["data"]["version"], "9.1.9");
    assert_eq!(r.body["data"]["release"], "9.1");
    assert!(!r.close, "success keeps the connection");
}

#[tokio::test]
async fn clusters_have_their_own_ca_ports_and_tokens() {
    let sim = start(fast_config()).await;
    let a = sim.cluster("dc-a").unwrap();
    let b = sim.cluster("dc-b").unwrap();
    assert_ne!(a.url(), b.url());
    assert_ne!(a.token_secret(), b.token_secret());
    assert_eq!(a.token_id(), "capmox@pve!capi");
    // dc-a's CA does not validate dc-b's certificate
    let wrong = client_for(&a.ca_pem());
    let err = wrong
        .get(format!("{}/api2/json/version", b.url()))
        .send()
        .await
        .unwrap_err();
    assert!(err.is_connect(), "{err:?}");
    // dc-a's token is unknown to dc-b
    let r = Api::new(b)
        .with_auth(Some(format!(
            "PVEAPIToken=capmox@pve!capi={}",
            a.token_secret()
        )))
        .get("/version")
        .await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn fingerprint_is_the_leaf_sha256() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-b").unwrap();
    let fp = c.cert_fingerprint_sha256();
    assert_eq!(fp.len(), 32 * 3 - 1);
    assert!(
        fp.chars()
            .all(|ch| ch == ':' || ch.is_ascii_hexdigit() && !ch.is_ascii_lowercase())
    );
    let r = Api::new(c).get("/nodes/pve-b1/certificates/info").await;
    let certs = r.body["data"].as_array().unwrap();
    let leaf = certs
        .iter()
        .find(|x| x["filename"] == "pve-ssl.pem")
        .unwrap();
    assert_eq!(leaf["fingerprint"], fp);
    assert_eq!(
        certs
            .iter()
            .find(|x| x["filename"] == "pve-root-ca.pem")
            .unwrap()["pem"],
        c.ca_pem()
    );
}

#[tokio::test]
async fn auth_failures_are_401_status_line_only() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.with_auth(None).get("/version").await;
    assert_eq!(
        (r.status, r.reason.as_str(), r.raw.len(), r.close),
        (401, "No ticket", 0, true)
    );
    let r = a
        .with_auth(Some("PVEAPIToken=capmox@pve!capi=wrong".into()))
        .get("/cluster/resources")
        .await;
    assert_eq!(
        (r.status, r.reason.as_str(), r.raw.len()),
        (401, "invalid token value!", 0)
    );
    let r = a
        .with_auth(Some("PVEAPIToken=nobody@pve!x=y".into()))
        .get("/version")
        .await;
    assert_eq!((r.status, r.reason.as_str()), (401, "invalid token owner!"));
    // the space form of the header is accepted too
    let c = sim.cluster("dc-a").unwrap();
    let r = a
        .with_auth(Some(format!(
            "PVEAPIToken {}={}",
            c.token_id(),
            c.token_secret()
        )))
        .get("/version")
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn token_rotation() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-c").unwrap();
    let old = Api::new(c);
    assert!(c.set_token_secret("capmox@pve!capi", "new-secret"));
    assert_eq!(old.get("/version").await.status, 401);
    assert_eq!(c.token_secret(), "new-secret");
    assert_eq!(Api::new(c).get("/version").await.status, 200);
}

#[tokio::test]
async fn ticket_login_cookie_and_csrf() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap()).with_auth(None);
    let r = a
        .post(
            "/access/ticket",
            &[("username", "root@pam"), ("password", "nope")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (401, "authentication failure")
    );
    let r = a
        .post(
            "/access/ticket",
            &[
                ("username", "root"),
                ("realm", "pam"),
                ("password", "pve-sim"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let d = r.data();
    assert_eq!(d["username"], "root@pam");
    assert_eq!(d["clustername"], "dc-a");
    let ticket = d["ticket"].as_str().unwrap().to_string();
    let csrf = d["CSRFPreventionToken"].as_str().unwrap().to_string();
    assert!(ticket.starts_with("PVE:root@pam:"));
    let cookie = format!("PVEAuthCookie={}", common::enc(&ticket));
    let r = a
        .send(
            a.client
                .get(a.url("/cluster/status"))
                .header("Cookie", &cookie),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.data()[0]["name"], "dc-a");
    // a write without CSRF token is refused
    let r = a
        .send(
            a.client
                .post(a.url("/pools"))
                .header("Cookie", &cookie)
                .form(&[("poolid", "p1")]),
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (401, "Permission denied - invalid csrf token")
    );
    let r = a
        .send(
            a.client
                .post(a.url("/pools"))
                .header("Cookie", &cookie)
                .header("CSRFPreventionToken", &csrf)
                .form(&[("poolid", "p1")]),
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(r.body, json!({"data": null}));
    // renewal: the ticket as password
    let r = a
        .post(
            "/access/ticket",
            &[("username", "root@pam"), ("password", &ticket)],
        )
        .await;
    assert_eq!(r.status, 200);
}

#[tokio::test]
async fn missing_vm_and_unknown_paths() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/nodes/pve-a1/qemu/105/config").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.reason,
        "Configuration file 'nodes/pve-a1/qemu-server/105.conf' does not exist"
    );
    assert_eq!(
        r.body,
        json!({"data": null, "message": "Configuration file 'nodes/pve-a1/qemu-server/105.conf' does not exist\n"})
    );
    assert!(r.close, "errors close the connection");
    // the template lives on pve-a1; asking pve-a2 does not redirect
    let r = a.get("/nodes/pve-a2/qemu/9000/config").await;
    assert_eq!(
        r.reason,
        "Configuration file 'nodes/pve-a2/qemu-server/9000.conf' does not exist"
    );
    let r = a.get("/nodes/pve-a1/lxc").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (501, "Method 'GET /nodes/pve-a1/lxc' not implemented")
    );
    let r = a.send(a.client.patch(a.url("/version"))).await;
    assert_eq!(r.reason, "Method 'PATCH /version' not implemented");
    let r = a
        .send(
            a.client
                .get(format!("{}/cluster/resources", a.cluster.url())),
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (501, "no such file '/cluster/resources'")
    );
    let r = a.get("/nodes/pve-x9/qemu/100/config").await;
    assert_eq!(r.status, 500);
    assert!(
        r.reason.starts_with("hostname lookup 'pve-x9' failed"),
        "{}",
        r.reason
    );
}

#[tokio::test]
async fn nodes_and_resources() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let nodes = a.get("/nodes").await;
    let names: Vec<&str> = nodes
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["node"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["pve-a1", "pve-a2", "pve-a3", "pve-a4"]);
    assert_eq!(nodes.data()[0]["maxmem"], json!(128u64 << 30));
    assert_eq!(nodes.data()[0]["maxcpu"], json!(32));

    let r = a.get("/cluster/resources?type=vm").await;
    let vms = r.data().as_array().unwrap();
    assert_eq!(vms.len(), 1);
    let t = &vms[0];
    assert_eq!(t["id"], "qemu/9000");
    assert_eq!(t["vmid"], json!(9000));
    assert_eq!(t["node"], "pve-a1");
    assert_eq!(t["name"], "ubuntu-2404-kube");
    assert_eq!(t["template"], json!(1));
    assert_eq!(t["tags"], "capmox;ubuntu-24.04");
    assert_eq!(t["status"], "stopped");
    assert_eq!(t["maxmem"], json!(2048u64 << 20));
    assert_eq!(t["maxdisk"], json!(20u64 << 30));

    let r = a.get("/cluster/resources?type=storage").await;
    let st = r.data().as_array().unwrap();
    assert_eq!(st.len(), 16, "4 storages on 4 nodes");
    let ceph = st
        .iter()
        .find(|s| s["id"] == "storage/pve-a2/ceph")
        .unwrap();
    assert_eq!(
        (ceph["shared"].clone(), ceph["plugintype"].clone()),
        (json!(1), json!("rbd"))
    );
    let r = a.get("/cluster/resources?type=node").await;
    assert_eq!(r.data()[3]["status"], "online");
    let r = a.get("/cluster/resources?type=pool").await;
    // Without the schema parameters are not validated; the unknown type
    // lists nothing (with it, a 400: `conformance.rs`).
    assert_eq!(
        (r.status, r.data().as_array().map(Vec::len)),
        (200, Some(0))
    );
}

#[tokio::test]
async fn nextid_reserves_nothing() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-b").unwrap());
    assert_eq!(a.get("/cluster/nextid").await.body, json!({"data": "100"}));
    assert_eq!(a.get("/cluster/nextid").await.body, json!({"data": "100"}));
    let r = a.get("/cluster/nextid?vmid=9100").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!({"vmid": "VM 9100 already exists"}));
    assert_eq!(r.reason, "Parameter verification failed.");
    assert_eq!(
        a.get("/cluster/nextid?vmid=123").await.body,
        json!({"data": "123"})
    );
}

#[tokio::test]
async fn next_id_range_is_honoured() {
    let mut cfg = fast_config();
    cfg.cluster_mut("dc-a").unwrap().next_id = Some(pve_sim::NextIdRange {
        lower: 9000,
        upper: 9002,
    });
    let sim = start(cfg).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    assert_eq!(a.get("/cluster/nextid").await.body, json!({"data": "9001"}));
    assert_eq!(
        a.get("/cluster/options").await.data()["next-id"],
        json!({"lower": 9000, "upper": 9002})
    );
}

#[tokio::test]
async fn privileges_are_checked_per_path() {
    let mut cfg = fast_config();
    let dc = cfg.cluster_mut("dc-a").unwrap();
    dc.users.push(pve_sim::UserConfig {
        userid: "ro@pve".into(),
        password: None,
        enable: true,
        acl: vec![pve_sim::AclEntry {
            path: "/".into(),
            roles: vec!["PVEAuditor".into()],
            privileges: vec![],
            propagate: true,
        }],
    });
    dc.tokens.push(pve_sim::TokenConfig {
        id: "ro@pve!t".into(),
        secret: Some(pve_sim::Secret::new("s")),
        privsep: false,
        expire: 0,
        acl: vec![],
    });
    let sim = start(cfg).await;
    let a = Api::new(sim.cluster("dc-a").unwrap()).with_auth(Some("PVEAPIToken=ro@pve!t=s".into()));
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "130")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (403, "Permission check failed (/vms/9000, VM.Clone)")
    );
    assert_eq!(
        r.body["message"],
        "Permission check failed (/vms/9000, VM.Clone)\n"
    );
    // permission checks run before the handler: a missing VM is also 403
    let r = a.delete("/nodes/pve-a1/qemu/777").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (403, "Permission check failed (/vms/777, VM.Allocate)")
    );
    // auditing works
    assert_eq!(a.get("/nodes/pve-a1/qemu/9000/config").await.status, 200);
}
