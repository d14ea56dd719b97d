//! The remaining endpoints: VM create (claims the VMID at once), convert to
//! template, `feature`, pools, task lists and per-node task tables,
//! `/access/permissions`, node network, volume allocation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, enc, fast_config, start};
use serde_json::json;

#[tokio::test]
async fn create_claims_the_vmid_synchronously() {
    let cfg = fast_config().with_timings(|t| t.create = 1e6);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a2/qemu",
            &[
                ("vmid", "100"),
                ("name", "new1"),
                ("scsi0", "local-lvm:4"),
                ("net0", "virtio,bridge=vmbr0"),
                ("memory", "1024"),
            ],
        )
        .await;
    let upid = r.upid();
    assert!(
        upid.starts_with("UPID:pve-a2:") && upid.contains(":qmcreate:100:"),
        "{upid}"
    );
    // the VMID is taken at once: nextid skips it, a second create is refused
    assert_eq!(c.vm(100).unwrap().lock.as_deref(), Some("create"));
    assert_eq!(a.get("/cluster/nextid").await.body, json!({"data": "101"}));
    let r = a.post("/nodes/pve-a1/qemu", &[("vmid", "100")]).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            500,
            "unable to create VM 100 - VM 100 already exists on node 'pve-a2'"
        )
    );
    let r = a.post("/nodes/pve-a1/qemu", &[("vmid", "9000")]).await;
    assert_eq!(
        r.reason,
        "unable to create VM 9000 - VM 9000 already exists on node 'pve-a1'"
    );
    // interrupting the create removes it
    a.delete(&format!("/nodes/pve-a2/tasks/{}", enc(&upid)))
        .await;
    assert_eq!(
        a.task_result("pve-a2", &upid).await["exitstatus"],
        "received interrupt"
    );
    assert!(c.vm(100).is_none());
}

#[tokio::test]
async fn create_then_template_and_features() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a2/qemu",
            &[
                ("vmid", "100"),
                ("name", "img"),
                ("scsi0", "ceph:4"),
                ("net0", "virtio,bridge=vmbr0"),
                ("ide2", "ceph:cloudinit"),
                ("start", "1"),
            ],
        )
        .await;
    assert_eq!(a.run("pve-a2", r).await, "OK");
    let vm = c.vm(100).unwrap();
    assert_eq!(vm.lock, None);
    assert_eq!(vm.status, "running", "start=1");
    assert_eq!(vm.config["scsi0"], "ceph:vm-100-disk-0,size=4G");
    assert_eq!(vm.config["ide2"], "ceph:vm-100-cloudinit,media=cdrom");
    assert!(vm.config["net0"].starts_with("virtio=BC:24:11:"));
    let f = a.get("/nodes/pve-a2/qemu/100/feature?feature=clone").await;
    assert_eq!(f.data()["hasFeature"], json!(0), "not a base volume yet");
    let r = a.post("/nodes/pve-a2/qemu/100/template", &[]).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "you can't convert a VM to template if VM is running")
    );
    a.run(
        "pve-a2",
        a.post("/nodes/pve-a2/qemu/100/status/stop", &[]).await,
    )
    .await;
    let r = a.post("/nodes/pve-a2/qemu/100/template", &[]).await;
    assert_eq!(a.run("pve-a2", r).await, "OK");
    let vm = c.vm(100).unwrap();
    assert!(vm.template);
    assert_eq!(vm.config["scsi0"], "ceph:base-100-disk-0,size=4G");
    let f = a.get("/nodes/pve-a2/qemu/100/feature?feature=clone").await;
    assert_eq!(f.data()["hasFeature"], json!(1));
    assert_eq!(
        f.data()["nodes"].as_array().unwrap().len(),
        4,
        "shared storage: every node"
    );
    let r = a.post("/nodes/pve-a2/qemu/100/template", &[]).await;
    assert_eq!(r.reason, "you can't convert a template to a template");
    // and it clones like the built-in template
    let r = a
        .post("/nodes/pve-a2/qemu/100/clone", &[("newid", "101")])
        .await;
    assert_eq!(a.run("pve-a2", r).await, "OK");
    assert_eq!(
        c.vm(101).unwrap().config["scsi0"],
        "ceph:base-100-disk-0/vm-101-disk-0,size=4G"
    );
}

#[tokio::test]
async fn pools_and_clone_into_a_pool() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    assert_eq!(
        a.post("/pools", &[("poolid", "capi"), ("comment", "provider")])
            .await
            .status,
        200
    );
    let r = a.post("/pools", &[("poolid", "capi")]).await;
    assert_eq!(r.reason, "pool 'capi' already exists");
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("pool", "capi")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let p = a.get("/pools?poolid=capi").await;
    assert_eq!(p.data()[0]["comment"], "provider");
    assert_eq!(p.data()[0]["members"][0]["vmid"], json!(101));
    let res = a.get("/cluster/resources?type=vm").await;
    assert_eq!(
        res.data()
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["vmid"] == 101)
            .unwrap()["pool"],
        "capi"
    );
    let r = a.delete("/pools?poolid=capi").await;
    assert_eq!(r.reason, "pool 'capi' is not empty");
    assert_eq!(
        a.put(
            "/pools",
            &[("poolid", "capi"), ("vms", "101"), ("delete", "1")]
        )
        .await
        .status,
        200
    );
    assert_eq!(a.delete("/pools/capi").await.status, 200);
}

/// docs/field-cases.md B34: a clone naming a pool that does not exist (here
/// one just deleted) is refused at once as Proxmox's `check_pool_exist`
/// refuses it — a permission exception, 403 — and creates nothing.
#[tokio::test]
async fn a_clone_into_a_missing_pool_is_refused_with_403() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    assert_eq!(a.post("/pools", &[("poolid", "gone")]).await.status, 200);
    assert_eq!(a.delete("/pools/gone").await.status, 200);
    let tasks = c.tasks().len();
    for pool in ["gone", "nope"] {
        let r = a
            .post(
                "/nodes/pve-a1/qemu/9000/clone",
                &[("newid", "102"), ("pool", pool)],
            )
            .await;
        let want = format!("Permission check failed (pool '{pool}' does not exist)");
        assert_eq!((r.status, r.reason.as_str()), (403, want.as_str()), "{r:?}");
    }
    assert!(c.vm(102).is_none());
    assert_eq!(c.tasks().len(), tasks, "no task started");
    assert_eq!(c.pool_members("gone"), None);
    // The VMID is still free: the same clone without the pool works.
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "102")])
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

#[tokio::test]
async fn task_lists_are_per_node() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let upid = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "101")])
        .await
        .upid();
    a.task_result("pve-a1", &upid).await;
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    a.run("pve-a1", r).await;
    // a UPID queried on another node is unknown there
    let r = a
        .get(&format!("/nodes/pve-a2/tasks/{}/status", enc(&upid)))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"], json!({"upid": "no such task"}));
    let l = a.get("/nodes/pve-a1/tasks?vmid=101").await;
    let kinds: Vec<&str> = l
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["qmstart"],
        "filtered by task id (a clone's id is its source)"
    );
    let l = a.get("/nodes/pve-a1/tasks?typefilter=qmclone").await;
    assert_eq!(l.body["total"], json!(1));
    assert_eq!(l.data()[0]["status"], "OK");
    assert_eq!(l.data()[0]["upid"], upid.as_str());
    assert!(
        a.get("/nodes/pve-a2/tasks")
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        a.get("/cluster/tasks")
            .await
            .data()
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[tokio::test]
async fn permissions_network_and_volume_allocation() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let p = a.get("/access/permissions?path=/vms/101").await;
    let privs = p.data()["/vms/101"].as_object().unwrap();
    assert_eq!(privs["VM.Clone"], json!(1));
    assert!(!privs.contains_key("Sys.Modify"));
    let n = a.get("/nodes/pve-a3/network?type=bridge").await;
    assert_eq!(n.data()[0]["iface"], "vmbr0");
    assert_eq!(n.data().as_array().unwrap().len(), 1);
    let r = a
        .post(
            "/nodes/pve-a1/storage/local-lvm/content",
            &[
                ("vmid", "300"),
                ("filename", "vm-300-disk-0"),
                ("size", "2G"),
            ],
        )
        .await;
    assert_eq!(r.body, json!({"data": "local-lvm:vm-300-disk-0"}));
    let v = a
        .get("/nodes/pve-a1/storage/local-lvm/content/vm-300-disk-0")
        .await;
    assert_eq!(v.data()["size"], json!(2u64 << 30));
    let r = a
        .post(
            "/nodes/pve-a1/storage/local-lvm/content",
            &[
                ("vmid", "300"),
                ("filename", "vm-301-disk-0"),
                ("size", "2G"),
            ],
        )
        .await;
    assert_eq!(r.status, 400);
}

#[tokio::test]
async fn pci_mappings_are_listed_with_their_node_entries() {
    let mut cfg = fast_config();
    cfg.cluster_mut("dc-a").unwrap().pci_mappings = vec![pve_sim::config::PciMappingConfig {
        id: "nvidia-a100".into(),
        description: Some("A100".into()),
        map: vec![
            "node=pve-a1,path=0000:01:00.0,id=10de:20b0".into(),
            "node=pve-a2,path=0000:01:00.0,id=10de:20b0".into(),
        ],
        mdev: false,
    }];
    let sim = start(cfg).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/cluster/mapping/pci").await;
    assert_eq!(
        r.body,
        json!({"data": [{"id": "nvidia-a100", "description": "A100", "map": [
            "node=pve-a1,path=0000:01:00.0,id=10de:20b0",
            "node=pve-a2,path=0000:01:00.0,id=10de:20b0"
        ]}]})
    );
    let b = Api::new(sim.cluster("dc-b").unwrap());
    assert_eq!(
        b.get("/cluster/mapping/pci").await.body,
        json!({"data": []})
    );
}
