//! VM config rules (docs/proxmox-semantics.md §6, §11, §14, §15;
//! docs/field-cases.md B07, B29, B30): GET with digest and typed values, POST
//! (task) vs PUT (sync), pending on a running VM, stable generated MACs,
//! `delete`, digest conflicts, disks becoming `unusedN`, cloud-init drives, and
//! config updates while cloning before and after qemu-server 9.1.19.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, fast_config, start};
use serde_json::json;

async fn cloned(a: &Api, newid: &str) {
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", newid), ("name", "w1")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

#[tokio::test]
async fn get_config_shape() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/nodes/pve-a1/qemu/9000/config").await;
    let d = r.data();
    assert_eq!(d["cores"], json!(2), "integers are numbers");
    assert_eq!(d["template"], json!(1), "booleans are 0/1 numbers");
    assert_eq!(d["memory"], json!("2048"), "memory is a property string");
    assert_eq!(d["agent"], json!("1"));
    assert_eq!(d["bios"], "ovmf");
    assert_eq!(d["name"], "ubuntu-2404-kube");
    let digest = d["digest"].as_str().unwrap();
    assert_eq!(digest.len(), 40);
    assert!(digest.chars().all(|c| c.is_ascii_hexdigit()));
    let net = d["net0"].as_str().unwrap();
    let mac = net
        .strip_prefix("virtio=")
        .unwrap()
        .split(',')
        .next()
        .unwrap();
    assert!(
        mac.starts_with("BC:24:11:") && mac.len() == 17 && mac == mac.to_ascii_uppercase(),
        "{net}"
    );
}

#[tokio::test]
async fn post_is_a_task_put_is_synchronous_and_macs_are_stable() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    cloned(&a, "101").await;
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[
                ("net1", "virtio,bridge=vmbr0,tag=112"),
                ("ipconfig0", "ip=10.10.0.21/24,gw=10.10.0.1"),
                ("memory", "4096"),
            ],
        )
        .await;
    let upid = r.upid();
    assert!(upid.contains(":qmconfig:101:capmox@pve!capi:"), "{upid}");
    assert_eq!(a.task_result("pve-a1", &upid).await["exitstatus"], "OK");
    let net1 = c.vm(101).unwrap().config["net1"].clone();
    assert!(
        net1.starts_with("virtio=BC:24:11:") && net1.ends_with(",bridge=vmbr0,tag=112"),
        "{net1}"
    );
    // other updates keep the generated MAC
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("cores", "4")])
        .await;
    assert_eq!((r.status, r.body.clone()), (200, json!({"data": null})));
    let vm = c.vm(101).unwrap();
    assert_eq!(vm.config["net1"], net1);
    assert_eq!(vm.config["cores"], "4");
    assert_eq!(vm.config["memory"], "4096");
    assert!(vm.pending.is_empty(), "a stopped VM applies at once");
    // an explicit MAC is kept, upper-cased, canonical order
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[(
                "net2",
                "bridge=vmbr0,model=virtio,macaddr=bc:24:11:aa:bb:cc,firewall=1",
            )],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        c.vm(101).unwrap().config["net2"],
        "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1"
    );
}

#[tokio::test]
async fn digest_protects_against_concurrent_edits() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    cloned(&a, "101").await;
    let d1 = a.get("/nodes/pve-a1/qemu/101/config").await.data()["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("cores", "3"), ("digest", &d1)],
        )
        .await;
    assert_eq!(r.status, 200);
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("cores", "5"), ("digest", &d1)],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "checksum mismatch (file change by other user?)")
    );
    let d2 = a.get("/nodes/pve-a1/qemu/101/config").await.data()["digest"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(d1, d2);
}

#[tokio::test]
async fn delete_rules_b30() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    cloned(&a, "101").await;
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide2", "none,media=cdrom"), ("delete", "ide2")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"delete": "you can't use '-ide2' and -delete ide2' at the same time"})
    );
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("delete", "bogus0x")])
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.body["errors"]["delete"], "unknown option 'bogus0x'");
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("delete", "tags,agent")])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let vm = c.vm(101).unwrap();
    assert!(!vm.config.contains_key("tags") && !vm.config.contains_key("agent"));
    // deleting a key that is not set is a warning in the task
    let r = a
        .post("/nodes/pve-a1/qemu/101/config", &[("delete", "ciuser")])
        .await;
    assert_eq!(a.run("pve-a1", r).await, "WARNINGS: 1");
    let r = a.put("/nodes/pve-a1/qemu/101/config", &[]).await;
    assert_eq!((r.status, r.reason.as_str()), (500, "no options specified"));
}

#[tokio::test]
async fn pending_on_a_running_vm() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    cloned(&a, "101").await;
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await
        )
        .await,
        "OK"
    );
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[
                ("cores", "4"),
                ("description", "now"),
                ("net0", "virtio,bridge=vmbr0,tag=5"),
            ],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let vm = c.vm(101).unwrap();
    assert_eq!(vm.config["description"], "now", "fast options apply live");
    assert!(
        vm.config["net0"].ends_with("tag=5"),
        "NICs hotplug by default"
    );
    assert_eq!(vm.config["cores"], "2");
    assert_eq!(vm.pending["cores"], "4", "cpu hotplug is off by default");
    let p = a.get("/nodes/pve-a1/qemu/101/pending").await;
    let cores = p
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "cores")
        .unwrap()
        .clone();
    assert_eq!(cores, json!({"key": "cores", "value": 2, "pending": 4}));
    assert_eq!(
        a.get("/nodes/pve-a1/qemu/101/config").await.data()["cores"],
        json!(4)
    );
    assert_eq!(
        a.get("/nodes/pve-a1/qemu/101/config?current=1")
            .await
            .data()["cores"],
        json!(2)
    );
    // a pending delete
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("delete", "cores")])
        .await;
    assert_eq!(r.status, 200);
    let p = a.get("/nodes/pve-a1/qemu/101/pending").await;
    let cores = p
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "cores")
        .unwrap()
        .clone();
    assert_eq!(cores, json!({"key": "cores", "value": 2, "delete": 1}));
    // an API reboot applies pending changes
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/reboot", &[]).await
        )
        .await,
        "OK"
    );
    let vm = c.vm(101).unwrap();
    assert!(
        !vm.config.contains_key("cores") && vm.pending.is_empty() && vm.pending_delete.is_empty()
    );
}

#[tokio::test]
async fn disks_replaced_or_added() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    cloned(&a, "101").await;
    // a new disk from STORAGE:SIZE
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("scsi1", "local-lvm:4,discard=on")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(
        c.vm(101).unwrap().config["scsi1"],
        "local-lvm:vm-101-disk-0,discard=on,size=4G"
    );
    let vol = c.storage_content("pve-a1", "local-lvm");
    assert_eq!(
        (vol[0].volid.as_str(), vol[0].size, vol[0].vmid),
        ("local-lvm:vm-101-disk-0", 4 << 30, Some(101))
    );
    // replacing it keeps the old volume as unused0
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("scsi1", "local-lvm:2")])
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let vm = c.vm(101).unwrap();
    assert_eq!(vm.config["scsi1"], "local-lvm:vm-101-disk-1,size=2G");
    assert_eq!(vm.config["unused0"], "local-lvm:vm-101-disk-0");
    // deleting unused0 frees the volume
    let r = a
        .put("/nodes/pve-a1/qemu/101/config", &[("delete", "unused0")])
        .await;
    assert_eq!(r.status, 200);
    let vols: Vec<String> = c
        .storage_content("pve-a1", "local-lvm")
        .into_iter()
        .map(|v| v.volid)
        .collect();
    assert_eq!(vols, ["local-lvm:vm-101-disk-1"]);
    // one Proxmox cloud-init drive per VM
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide2", "ceph:cloudinit")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        c.vm(101).unwrap().config["ide2"],
        "ceph:vm-101-cloudinit,media=cdrom"
    );
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide0", "ceph:cloudinit")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "ide0 - cloud-init drive is already attached at 'ide2'")
    );
    // ISOs need media=cdrom
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide0", "cephfs:iso/seed.iso")],
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"ide0": "explicit 'media=cdrom' is required for iso images"})
    );
    // an ISO that does not exist
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide0", "cephfs:iso/seed.iso,media=cdrom")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "volume 'cephfs:iso/seed.iso' does not exist")
    );
}

#[tokio::test]
async fn tags_boot_order_and_background_delay() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    cloned(&a, "101").await;
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("tags", "Debian,k8s_1.30;a+b capi")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        c.vm(101).unwrap().config["tags"],
        "a+b;capi;debian;k8s_1.30"
    );
    // Tags outside Proxmox's character set: `conformance.rs` (the schema's
    // `pve-tag` format refuses them).
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("boot", "order=scsi0;scsi9")],
        )
        .await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "invalid bootorder: device 'scsi9' does not exist'"
    );
    // background_delay: null when the task finished in time
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("description", "x"), ("background_delay", "5")],
        )
        .await;
    assert_eq!((r.status, r.body.clone()), (200, json!({"data": null})));
}

#[tokio::test]
async fn config_update_while_cloning_before_9_1_19() {
    // default qemu-server 9.1.9: the flock is taken in the request and times out
    let cfg = fast_config().with_timings(|t| t.clone_linked = 1e6);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let upid = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "131")])
        .await
        .upid();
    // wait until the worker has written the temporary config
    while c.vm(131).is_none() {
        tokio::task::yield_now().await;
    }
    let r = a
        .post("/nodes/pve-a1/qemu/131/config", &[("cores", "4")])
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (
            500,
            "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout"
        )
    );
    let r = a
        .put("/nodes/pve-a1/qemu/131/config", &[("cores", "4")])
        .await;
    assert_eq!(
        r.reason,
        "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout"
    );
    // start locks in the task: the task fails with the lock timeout
    let r = a.post("/nodes/pve-a1/qemu/131/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout"
    );
    a.delete(&format!("/nodes/pve-a1/tasks/{}", common::enc(&upid)))
        .await;
}

#[tokio::test]
async fn config_update_while_cloning_from_9_1_19() {
    let mut cfg = fast_config().with_timings(|t| t.clone_linked = 1e6);
    cfg.cluster_mut("dc-a").unwrap().qemu_server_version = "9.1.19".into();
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    a.post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "131")])
        .await
        .upid();
    while c.vm(131).is_none() {
        tokio::task::yield_now().await;
    }
    for r in [
        a.post("/nodes/pve-a1/qemu/131/config", &[("cores", "4")])
            .await,
        a.put("/nodes/pve-a1/qemu/131/config", &[("cores", "4")])
            .await,
    ] {
        assert_eq!((r.status, r.reason.as_str()), (500, "VM is locked (clone)"));
        assert_eq!(
            r.body,
            json!({"data": null, "message": "VM is locked (clone)\n"})
        );
    }
}
