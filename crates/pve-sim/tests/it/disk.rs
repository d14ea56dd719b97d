//! Disk resize (docs/proxmox-semantics.md §12; docs/field-cases.md B08, B10): grow only, absolute
//! or `+N`, equal size is a no-op, shrinking fails with Proxmox's message,
//! cdrom and EFI disks refused, storage capacity accounted; PVE 7 answered
//! synchronously.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, fast_config, start};
use serde_json::json;

async fn setup(a: &Api) {
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("full", "1"), ("storage", "local-lvm")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

fn scsi0(c: &pve_sim::SimCluster) -> String {
    c.vm(101).unwrap().config["scsi0"].clone()
}

#[tokio::test]
async fn grow_absolute_relative_and_equal() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    setup(&a).await;
    assert_eq!(scsi0(c), "local-lvm:vm-101-disk-1,iothread=1,size=20G");
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "40G")],
        )
        .await;
    assert!(r.upid().contains(":resize:101:"));
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(scsi0(c), "local-lvm:vm-101-disk-1,iothread=1,size=40G");
    let vol = c
        .storage_content("pve-a1", "local-lvm")
        .into_iter()
        .find(|v| v.volid == "local-lvm:vm-101-disk-1")
        .unwrap();
    assert_eq!(vol.size, 40 << 30);
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "+512M")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(scsi0(c), "local-lvm:vm-101-disk-1,iothread=1,size=41472M");
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "41472M")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK", "equal size is a no-op");
}

#[tokio::test]
async fn shrinking_fails_with_proxmox_message() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    setup(&a).await;
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "10G")],
        )
        .await;
    let upid = r.upid();
    let t = a.task_result("pve-a1", &upid).await;
    assert_eq!(t["exitstatus"], "shrinking disks is not supported");
    let log = a
        .get(&format!("/nodes/pve-a1/tasks/{}/log", common::enc(&upid)))
        .await;
    assert_eq!(
        log.data().as_array().unwrap().last().unwrap()["t"],
        "TASK ERROR: shrinking disks is not supported"
    );
    assert_eq!(
        scsi0(c),
        "local-lvm:vm-101-disk-1,iothread=1,size=20G",
        "unchanged"
    );
}

#[tokio::test]
async fn pve7_resize_is_synchronous_500() {
    let mut cfg = fast_config();
    cfg.cluster_mut("dc-a").unwrap().qemu_server_version = "7.4.3".into();
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    setup(&a).await;
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "10G")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "shrinking disks is not supported")
    );
    assert_eq!(
        r.body,
        json!({"data": null, "message": "shrinking disks is not supported\n"})
    );
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "30G")],
        )
        .await;
    assert_eq!(r.body, json!({"data": null}));
    assert_eq!(scsi0(c), "local-lvm:vm-101-disk-1,iothread=1,size=30G");
}

#[tokio::test]
async fn refused_disks_and_capacity() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    setup(&a).await;
    a.put(
        "/nodes/pve-a1/qemu/101/config",
        &[("ide2", "none,media=cdrom")],
    )
    .await;
    for (disk, size, msg) in [
        ("ide2", "1G", "you can't resize a cdrom"),
        ("efidisk0", "1M", "resizing of efidisks is not supported"),
        ("scsi5", "1G", "disk 'scsi5' does not exist"),
    ] {
        let r = a
            .put(
                "/nodes/pve-a1/qemu/101/resize",
                &[("disk", disk), ("size", size)],
            )
            .await;
        assert_eq!(a.run("pve-a1", r).await, msg);
    }
    // local-lvm has 800 GiB per node
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/resize",
            &[("disk", "scsi0"), ("size", "2T")],
        )
        .await;
    let s = a.run("pve-a1", r).await;
    assert!(
        s.starts_with("storage 'local-lvm' has not enough free space"),
        "{s}"
    );
    // A negative size is refused by the schema's pattern: `conformance.rs`.
}
