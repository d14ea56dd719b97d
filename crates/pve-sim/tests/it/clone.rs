//! Clone rules (docs/proxmox-semantics.md §6–§8; docs/field-cases.md B01, B04, B05, B29): UPIDs,
//! linked/full, shared storage for `target`, the clone lock and its
//! timeouts, storage lock contention, taken VMIDs failing inside the task.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, enc, fast_config, start};
use pve_sim::{AllocLock, SimConfig, VmConfig};
use serde_json::json;

fn vm_cfg(vmid: u32, node: &str, storage: &str, running: bool) -> VmConfig {
    VmConfig {
        vmid,
        name: format!("vm{vmid}"),
        node: node.into(),
        tags: None,
        memory_mib: 1024,
        cores: 1,
        storage: storage.into(),
        disk_gib: 8,
        disk_key: "scsi0".into(),
        efidisk: false,
        tpm: false,
        agent: true,
        bridge: "vmbr0".into(),
        vlan: None,
        cloudinit_storage: None,
        running,
        ha: false,
        extra: Default::default(),
    }
}

/// Waits until one of two tasks stops; returns (first stopped, the other).
async fn first_to_stop(c: &pve_sim::SimCluster, u1: &str, u2: &str) -> (String, String) {
    tokio::select! {
        _ = c.wait_task(u1) => (u1.to_string(), u2.to_string()),
        _ = c.wait_task(u2) => (u2.to_string(), u1.to_string()),
    }
}

fn is_upper_hex8(s: &str) -> bool {
    s.len() == 8
        && s.chars()
            .all(|c| c.is_ascii_digit() || ('A'..='F').contains(&c))
}

#[tokio::test]
async fn linked_clone_of_the_template() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let tpl = c.vm(9000).unwrap();
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("name", "wl1-md-0-aaaaa")],
        )
        .await;
    let upid = r.upid();
    let f: Vec<&str> = upid.split(':').collect();
    assert_eq!(f.len(), 9, "{upid}");
    assert_eq!(
        (f[0], f[1], f[5], f[6], f[7], f[8]),
        ("UPID", "pve-a1", "qmclone", "9000", "capmox@pve!capi", "")
    );
    assert!(
        is_upper_hex8(f[2]) && is_upper_hex8(f[3]) && is_upper_hex8(f[4]),
        "{upid}"
    );

    let t = a.task_result("pve-a1", &upid).await;
    assert_eq!(t["status"], "stopped");
    assert_eq!(t["exitstatus"], "OK");
    assert_eq!(t["type"], "qmclone");
    assert_eq!(t["id"], "9000");
    assert_eq!(t["user"], "capmox@pve");
    assert_eq!(t["tokenid"], "capi");
    assert_eq!(t["node"], "pve-a1");
    assert_eq!(t["upid"], upid.as_str());
    assert!(t["pid"].is_u64() && t["pstart"].is_u64() && t["starttime"].is_u64());

    let log = a
        .get(&format!("/nodes/pve-a1/tasks/{}/log", enc(&upid)))
        .await;
    let lines = log.data().as_array().unwrap();
    assert_eq!(log.body["total"], json!(lines.len()));
    assert_eq!(lines[0]["n"], json!(1));
    assert_eq!(lines.last().unwrap()["t"], "TASK OK");

    let vm = c.vm(101).unwrap();
    assert_eq!(vm.node, "pve-a1");
    assert_eq!(vm.lock, None);
    assert!(!vm.template);
    // drives are cloned in key order (qemu-server sorts them): efidisk0 first
    assert_eq!(
        vm.config["efidisk0"],
        "ceph:base-9000-disk-1/vm-101-disk-0,efitype=4m,pre-enrolled-keys=1,size=528K"
    );
    assert_eq!(
        vm.config["scsi0"],
        "ceph:base-9000-disk-0/vm-101-disk-1,iothread=1,size=20G"
    );
    assert_eq!(vm.config["tags"], "capmox;ubuntu-24.04");
    assert_eq!(vm.config["agent"], "1");
    // fresh MAC with the datacenter prefix, fresh SMBIOS UUID and vmgenid
    assert!(
        vm.config["net0"].starts_with("virtio=BC:24:11:"),
        "{}",
        vm.config["net0"]
    );
    assert!(vm.config["net0"].ends_with(",bridge=vmbr0"));
    assert_ne!(vm.config["net0"], tpl.config["net0"]);
    assert_ne!(vm.config["smbios1"], tpl.config["smbios1"]);
    assert_ne!(vm.config["vmgenid"], tpl.config["vmgenid"]);
    let vols: Vec<String> = c
        .storage_content("pve-a1", "ceph")
        .into_iter()
        .map(|v| v.volid)
        .collect();
    assert!(
        vols.contains(&"ceph:base-9000-disk-0/vm-101-disk-1".to_string()),
        "{vols:?}"
    );

    // default name and the copy of a normal VM
    let r = a
        .post("/nodes/pve-a1/qemu/101/clone", &[("newid", "102")])
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let vm = c.vm(102).unwrap();
    assert_eq!(vm.name.as_deref(), Some("Copy-of-VM-wl1-md-0-aaaaa"));
    assert_eq!(
        vm.config["scsi0"], "ceph:vm-102-disk-1,iothread=1,size=20G",
        "a VM clones fully"
    );
}

#[tokio::test]
async fn full_clone_to_another_node_on_shared_storage() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[
                ("newid", "110"),
                ("full", "1"),
                ("target", "pve-a3"),
                ("storage", "ceph"),
            ],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let vm = c.vm(110).unwrap();
    assert_eq!(vm.node, "pve-a3", "config moved to the target at the end");
    assert_eq!(vm.config["scsi0"], "ceph:vm-110-disk-1,iothread=1,size=20G");
    assert_eq!(a.get("/nodes/pve-a3/qemu/110/config").await.status, 200);
    assert_eq!(a.get("/nodes/pve-a1/qemu/110/config").await.status, 500);
}

#[tokio::test]
async fn local_storage_rules_for_other_nodes() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    // B05: a full clone to another node onto non-shared storage
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[
                ("newid", "111"),
                ("full", "1"),
                ("target", "pve-a2"),
                ("storage", "local-lvm"),
            ],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "can't clone to non-shared storage 'local-lvm'")
    );
    // a template on local storage cannot be cloned to another node at all
    let mut tpl = vm_cfg(8000, "pve-a1", "local-lvm", false);
    tpl.name = "local-tpl".into();
    c.create_vm(tpl, true).unwrap();
    let r = a
        .post(
            "/nodes/pve-a1/qemu/8000/clone",
            &[("newid", "112"), ("target", "pve-a2")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            500,
            "can't clone VM to node 'pve-a2' (VM uses local storage)"
        )
    );
    // storage/format only for full clones
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "113"), ("storage", "ceph")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "parameter 'storage' not allowed for linked clones")
    );
    // linked clones only from base volumes
    c.create_vm(vm_cfg(100, "pve-a1", "ceph", false), false)
        .unwrap();
    let r = a
        .post(
            "/nodes/pve-a1/qemu/100/clone",
            &[("newid", "114"), ("full", "0")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            500,
            "Linked clone feature is not supported for 'ceph:vm-100-disk-0' (scsi0)"
        )
    );
    // the clone call must go to the template's node
    let r = a
        .post("/nodes/pve-a2/qemu/9000/clone", &[("newid", "115")])
        .await;
    assert_eq!(
        r.reason,
        "Configuration file 'nodes/pve-a2/qemu-server/9000.conf' does not exist"
    );
    assert!(c.vm(111).is_none() && c.vm(112).is_none() && c.vm(114).is_none());
}

#[tokio::test]
async fn taken_vmids_fail_inside_the_task() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    c.create_vm(vm_cfg(104, "pve-a2", "ceph", false), false)
        .unwrap();
    // nextid does not know about the pending clone; a VMID taken on another node
    // is only detected by the worker (B01)
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "104"), ("name", "wl2")],
        )
        .await;
    let status = a.run("pve-a1", r).await;
    assert_eq!(
        status,
        "close (rename) atomic file '/etc/pve/nodes/pve-a1/qemu-server/104.conf' failed: File exists"
    );
    assert_eq!(
        c.vm(104).unwrap().name.as_deref(),
        Some("vm104"),
        "the other VM is untouched"
    );
    // on the same node the request itself refuses
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "9000")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "unable to create VM 9000: config file already exists")
    );
}

#[tokio::test]
async fn parallel_clones_of_a_template_share_its_lock() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let mut upids = Vec::new();
    for id in 200..210u32 {
        let r = a
            .post(
                "/nodes/pve-a1/qemu/9000/clone",
                &[("newid", &id.to_string())],
            )
            .await;
        upids.push(r.upid());
    }
    for u in upids {
        assert_eq!(a.task_result("pve-a1", &u).await["exitstatus"], "OK");
    }
    assert_eq!(c.vms().len(), 11);
}

/// Two clones of one running VM on one node: the first holds the source's
/// flock exclusively for the whole copy, the second's 1 s lock wait is
/// shorter, so it ends with the lock-timeout exit status.
#[tokio::test]
async fn clones_of_a_running_vm_serialize_on_its_flock() {
    let cfg = fast_config().with_timings(|t| {
        t.clone_full = 1e6;
        t.lock_timeout_clone = 1.0;
    });
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    c.create_vm(vm_cfg(100, "pve-a1", "ceph", true), false)
        .unwrap();
    let a = Api::new(c);
    let u1 = a
        .post("/nodes/pve-a1/qemu/100/clone", &[("newid", "301")])
        .await
        .upid();
    let u2 = a
        .post("/nodes/pve-a1/qemu/100/clone", &[("newid", "302")])
        .await
        .upid();
    let (loser, winner) = first_to_stop(c, &u1, &u2).await;
    assert_eq!(
        a.task_result("pve-a1", &loser).await["exitstatus"],
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout"
    );
    let running = a
        .get(&format!("/nodes/pve-a1/tasks/{}/status", enc(&winner)))
        .await;
    assert_eq!(running.data()["status"], "running", "still copying");
    assert!(c.flock_held("pve-a1", 100));
    a.delete(&format!("/nodes/pve-a1/tasks/{}", enc(&winner)))
        .await;
    assert_eq!(
        a.task_result("pve-a1", &winner).await["exitstatus"],
        "received interrupt"
    );
    assert!(
        c.vm(301).is_none() && c.vm(302).is_none(),
        "nothing left behind"
    );
    assert!(!c.flock_held("pve-a1", 100));
}

#[tokio::test]
async fn template_busy_with_a_config_update_makes_a_clone_time_out() {
    // the asynchronous config update holds the template's exclusive flock for its
    // whole (long) task; a clone started meanwhile fails after its 1 s lock wait
    let cfg = fast_config().with_timings(|t| {
        t.config = 1e6;
        t.lock_timeout_clone = 1.0;
    });
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let cfg_task = a
        .post(
            "/nodes/pve-a1/qemu/9000/config",
            &[("description", "rebuilt")],
        )
        .await
        .upid();
    let clone = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "150")])
        .await;
    assert_eq!(
        a.run("pve-a1", clone).await,
        "can't lock file '/var/lock/qemu-server/lock-9000.conf' - got timeout"
    );
    assert!(c.vm(150).is_none());
    a.delete(&format!("/nodes/pve-a1/tasks/{}", enc(&cfg_task)))
        .await;
    assert_eq!(
        a.task_result("pve-a1", &cfg_task).await["exitstatus"],
        "received interrupt"
    );
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "150")])
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK", "the lock is free again");
}

/// Two concurrent clones of one template on one node whose lock wait (10 s)
/// is shorter than the time the other clone holds the storage lock: the
/// second task ends with the storage lock-timeout exit status (docs/field-cases.md B04(a)).
#[tokio::test]
async fn two_clones_of_one_template_on_one_node_storage_lock_timeout_b04a() {
    // local-lvm admits one allocation at a time, and each holds it far longer
    // than the 10 s storage lock timeout
    let mut cfg: SimConfig = fast_config();
    let dc = cfg.cluster_mut("dc-a").unwrap();
    dc.storages
        .iter_mut()
        .find(|s| s.name == "local-lvm")
        .unwrap()
        .alloc_lock = Some(AllocLock {
        max_parallel: 1,
        hold: 1e6,
    });
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let args = |id: &'static str| [("newid", id), ("full", "1"), ("storage", "local-lvm")];
    let u1 = a
        .post("/nodes/pve-a1/qemu/9000/clone", &args("131"))
        .await
        .upid();
    let u2 = a
        .post("/nodes/pve-a1/qemu/9000/clone", &args("132"))
        .await
        .upid();
    let (loser, winner) = first_to_stop(c, &u1, &u2).await;
    assert_eq!(
        a.task_result("pve-a1", &loser).await["exitstatus"],
        "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
    );
    a.delete(&format!("/nodes/pve-a1/tasks/{}", enc(&winner)))
        .await;
    assert_eq!(
        a.task_result("pve-a1", &winner).await["exitstatus"],
        "received interrupt"
    );
    assert!(
        c.storage_content("pve-a1", "local-lvm").is_empty(),
        "failed clones leave nothing"
    );
    assert!(c.vm(131).is_none() && c.vm(132).is_none());
}

#[tokio::test]
async fn interrupted_clone_cleans_up() {
    let cfg = fast_config().with_timings(|t| t.clone_linked = 1e6);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let upid = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "160")])
        .await
        .upid();
    // while the clone runs, the new VM carries lock: clone
    let running = a
        .get(&format!("/nodes/pve-a1/tasks/{}/status", enc(&upid)))
        .await;
    assert_eq!(running.data()["status"], "running");
    assert!(running.data().get("exitstatus").is_none());
    let res = a.get("/cluster/resources?type=vm").await;
    let new = res
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 160)
        .cloned()
        .unwrap();
    assert_eq!(new["lock"], "clone");
    let cfg = a.get("/nodes/pve-a1/qemu/160/config").await;
    assert_eq!(cfg.data()["lock"], "clone");
    assert_eq!(
        a.delete(&format!("/nodes/pve-a1/tasks/{}", enc(&upid)))
            .await
            .status,
        200
    );
    assert_eq!(
        a.task_result("pve-a1", &upid).await["exitstatus"],
        "received interrupt"
    );
    assert!(c.vm(160).is_none());
    assert!(
        c.storage_content("pve-a1", "ceph")
            .iter()
            .all(|v| v.vmid != Some(160))
    );
}

#[tokio::test]
async fn pending_changes_of_the_source_are_discarded_with_a_warning() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    c.create_vm(vm_cfg(100, "pve-a1", "ceph", true), false)
        .unwrap();
    let a = Api::new(c);
    let r = a
        .put("/nodes/pve-a1/qemu/100/config", &[("cores", "4")])
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(c.vm(100).unwrap().pending["cores"], "4");
    let r = a
        .post("/nodes/pve-a1/qemu/100/clone", &[("newid", "170")])
        .await;
    let upid = r.upid();
    let t = a.task_result("pve-a1", &upid).await;
    assert_eq!(t["exitstatus"], "WARNINGS: 1");
    let log = a
        .get(&format!("/nodes/pve-a1/tasks/{}/log", enc(&upid)))
        .await;
    assert!(
        log.raw
            .windows(38)
            .any(|w| w == b"found pending changes for 'cores', dis"),
        "{log:?}"
    );
    assert_eq!(c.vm(170).unwrap().config["cores"], "1");
}
