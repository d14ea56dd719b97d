//! Storage content and the cloud-init seed ISO path (docs/proxmox-semantics.md §13; field
//! case B20): multipart upload, listing, kept bytes readable with
//! `iso::read_nocloud`, attach as cdrom, the guest taking its static
//! addresses from `network-config`, local storage visible only on its node,
//! deletion, capacity accounting.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, fast_config, seed_iso, start};
use serde_json::json;

async fn upload(
    a: &Api,
    node: &str,
    storage: &str,
    filename: &str,
    bytes: Vec<u8>,
    content: &str,
) -> common::Resp {
    let form = reqwest::multipart::Form::new()
        .text("content", content.to_string())
        .part(
            "filename",
            reqwest::multipart::Part::bytes(bytes).file_name(filename.to_string()),
        );
    a.send(
        a.client
            .post(a.url(&format!("/nodes/{node}/storage/{storage}/upload")))
            .multipart(form),
    )
    .await
}

const NETWORK_V2: &str = r#"version: 2
ethernets:
  eth0:
    match:
      macaddress: "MAC0"
    set-name: eth0
    addresses:
      - 10.10.0.21/24
      - 2001:db8:10::21/64
    routes:
      - to: default
        via: 10.10.0.1
    nameservers:
      addresses: [10.10.0.1]
  eth1:
    match:
      macaddress: "MAC1"
    set-name: eth1
    dhcp4: true
"#;

#[tokio::test]
async fn upload_list_read_back_and_delete() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let iso = seed_iso(
        "#cloud-config\nhostname: w1\n",
        "instance-id: w1\nlocal-hostname: w1\n",
        Some("version: 2\n"),
    );
    let r = upload(
        &a,
        "pve-a1",
        "cephfs",
        "user-data-101.iso",
        iso.clone(),
        "iso",
    )
    .await;
    let upid = r.upid();
    assert!(upid.contains(":imgcopy::capmox@pve!capi:"), "{upid}");
    assert_eq!(a.task_result("pve-a1", &upid).await["exitstatus"], "OK");
    // shared storage: the same file from every node
    let list = a
        .get("/nodes/pve-a3/storage/cephfs/content?content=iso")
        .await;
    let item = &list.data()[0];
    assert_eq!(item["volid"], "cephfs:iso/user-data-101.iso");
    assert_eq!(item["format"], "iso");
    assert_eq!(item["content"], "iso");
    assert_eq!(item["size"], json!(iso.len()));
    let bytes = c
        .iso_bytes("pve-a2", "cephfs:iso/user-data-101.iso")
        .unwrap();
    assert_eq!(bytes, iso);
    let seed = pve_sim::iso::read_nocloud(&bytes).unwrap();
    assert_eq!(seed.volume_label, "cidata");
    assert_eq!(seed.user_data, "#cloud-config\nhostname: w1\n");
    assert_eq!(seed.meta_data, "instance-id: w1\nlocal-hostname: w1\n");
    assert_eq!(seed.network_config.as_deref(), Some("version: 2\n"));
    // storage status accounts the bytes
    let st = a.get("/nodes/pve-a1/storage/cephfs/status").await;
    assert_eq!(st.data()["used"], json!(iso.len()));
    assert_eq!(st.data()["total"], json!(1024u64 << 30));
    // delete, then the volume is gone; deleting again fails
    let r = a
        .delete("/nodes/pve-a1/storage/cephfs/content/cephfs:iso/user-data-101.iso")
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert!(
        c.iso_bytes("pve-a1", "cephfs:iso/user-data-101.iso")
            .is_none()
    );
    let r = a
        .delete("/nodes/pve-a1/storage/cephfs/content/iso%2Fuser-data-101.iso")
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "volume 'cephfs:iso/user-data-101.iso' does not exist")
    );
}

#[tokio::test]
async fn upload_rules() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = upload(&a, "pve-a1", "cephfs", "seed.txt", b"x".to_vec(), "iso").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"filename": "wrong file extension"})
    );
    let r = upload(&a, "pve-a1", "local-lvm", "seed.iso", b"x".to_vec(), "iso").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "storage 'local-lvm' does not support 'iso' content")
    );
    // names are normalised
    let r = upload(
        &a,
        "pve-a1",
        "cephfs",
        "my seed (1).iso",
        b"x".to_vec(),
        "iso",
    )
    .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert!(
        sim.cluster("dc-a")
            .unwrap()
            .iso_bytes("pve-a1", "cephfs:iso/my_seed__1_.iso")
            .is_some()
    );
}

#[tokio::test]
async fn local_iso_is_only_on_its_node_b20() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = upload(
        &a,
        "pve-a1",
        "local",
        "user-data-107.iso",
        seed_iso("u", "m", None),
        "iso",
    )
    .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "107"), ("target", "pve-a2")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert!(
        a.get("/nodes/pve-a2/storage/local/content")
            .await
            .data()
            .as_array()
            .unwrap()
            .is_empty()
    );
    let r = a
        .put(
            "/nodes/pve-a2/qemu/107/config",
            &[("ide2", "local:iso/user-data-107.iso,media=cdrom")],
        )
        .await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "volume 'local:iso/user-data-107.iso' does not exist")
    );
}

#[tokio::test]
async fn guest_takes_static_addresses_from_the_seed_iso() {
    let cfg = fast_config().with_timings(|t| t.boot = 0.0);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("name", "w1")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    a.put(
        "/nodes/pve-a1/qemu/101/config",
        &[("net1", "virtio,bridge=vmbr0")],
    )
    .await;
    let vm = c.vm(101).unwrap();
    let mac = |k: &str| vm.config[k].split(['=', ',']).nth(1).unwrap().to_string();
    let nc = NETWORK_V2
        .replace("MAC0", &mac("net0").to_ascii_lowercase())
        .replace("MAC1", &mac("net1"));
    let iso = seed_iso("#cloud-config\n", "instance-id: w1\n", Some(&nc));
    let r = upload(&a, "pve-a1", "cephfs", "w1.iso", iso, "iso").await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide2", "cephfs:iso/w1.iso,media=cdrom")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(
        c.vm(101).unwrap().config["ide2"],
        "cephfs:iso/w1.iso,media=cdrom"
    );
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await
        )
        .await,
        "OK"
    );
    let r = a
        .get("/nodes/pve-a1/qemu/101/agent/network-get-interfaces")
        .await;
    let ifs = r.data()["result"].as_array().unwrap();
    let eth0 = ifs.iter().find(|i| i["name"] == "eth0").unwrap();
    assert_eq!(
        eth0["hardware-address"],
        mac("net0").to_ascii_lowercase().as_str()
    );
    let ips: Vec<&str> = eth0["ip-addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["ip-address"].as_str().unwrap())
        .collect();
    assert_eq!(ips[..2], ["10.10.0.21", "2001:db8:10::21"]);
    assert!(ips[2].starts_with("fe80::"));
    let eth1 = ifs.iter().find(|i| i["name"] == "eth1").unwrap();
    assert_eq!(
        eth1["ip-addresses"][0]["ip-address"], "10.10.0.100",
        "dhcp4 NIC gets a lease"
    );
    // detaching and deleting the ISO afterwards (provider cleanup)
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/config",
            &[("ide2", "none,media=cdrom")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(
        c.vm(101).unwrap().config["ide2"],
        "none,media=cdrom",
        "cdrom media changes apply live"
    );
    let r = a
        .delete("/nodes/pve-a1/storage/cephfs/content/cephfs:iso/w1.iso")
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    // the guest keeps what it read at boot, as cloud-init does
    let (volid, seed) = c.vm(101).unwrap().boot_seed.expect("seed read at boot");
    assert_eq!(volid, "cephfs:iso/w1.iso");
    assert_eq!(seed.meta_data, "instance-id: w1\n");
    assert!(c.iso_bytes("pve-a1", "cephfs:iso/w1.iso").is_none());
    let r = a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(
        c.vm(101).unwrap().boot_seed,
        None,
        "a stopped guest has none"
    );
}

#[tokio::test]
async fn proxmox_cloudinit_ipconfig_and_dump() {
    let cfg = fast_config().with_timings(|t| t.boot = 0.0);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("name", "w1")],
        )
        .await;
    a.run("pve-a1", r).await;
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[
                ("ide2", "ceph:cloudinit"),
                ("ipconfig0", "ip=10.10.0.50/24,gw=10.10.0.1"),
                ("nameserver", "10.10.0.1"),
                ("ciuser", "capi"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let dump = a
        .get("/nodes/pve-a1/qemu/101/cloudinit/dump?type=network")
        .await;
    let text = dump.data().as_str().unwrap();
    assert!(
        text.contains(
            "address: '10.10.0.50'\n        netmask: '255.255.255.0'\n        gateway: '10.10.0.1'"
        ),
        "{text}"
    );
    let user = a
        .get("/nodes/pve-a1/qemu/101/cloudinit/dump?type=user")
        .await;
    assert!(user.data().as_str().unwrap().contains("user: capi\n"));
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await,
    )
    .await;
    assert_eq!(
        c.vm(101).unwrap().guest_addresses["ens18"][0],
        "10.10.0.50/24"
    );
    // a change on the running VM is pending for cloud-init until regenerated
    a.put("/nodes/pve-a1/qemu/101/config", &[("ciuser", "other")])
        .await;
    let ci = a.get("/nodes/pve-a1/qemu/101/cloudinit").await;
    let u = ci
        .data()
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["key"] == "ciuser")
        .unwrap()
        .clone();
    assert_eq!(u["value"], "capi");
    assert_eq!(u["pending"], "other");
}

#[tokio::test]
async fn storage_listing_filters() {
    let sim = start(fast_config()).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());
    let r = a.get("/nodes/pve-a2/storage?content=iso").await;
    let names: Vec<&str> = r
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storage"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cephfs", "local"]);
    let r = a
        .get("/nodes/pve-a2/storage?content=images&target=pve-a3")
        .await;
    let names: Vec<&str> = r
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["storage"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ceph"],
        "only shared image storages reach another node"
    );
    let ceph = a.get("/nodes/pve-a2/storage/ceph/status").await;
    assert_eq!(ceph.data()["type"], "rbd");
    assert_eq!(ceph.data()["shared"], json!(1));
    assert_eq!(
        ceph.data()["used"],
        json!((20u64 << 30) + (528u64 << 10)),
        "the template's disks"
    );
    let content = a.get("/nodes/pve-a2/storage/ceph/content?vmid=9000").await;
    let vols: Vec<&str> = content
        .data()
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["volid"].as_str().unwrap())
        .collect();
    assert_eq!(vols, ["ceph:base-9000-disk-0", "ceph:base-9000-disk-1"]);
}

/// docs/field-cases.md B37: a storage restricted to one node, a shared
/// storage that cannot be activated on one node, and a disabled one, as
/// `/nodes/{node}/storage`, `/cluster/resources` and an allocation see them.
#[tokio::test]
async fn storage_enabled_and_active_per_node_b37() {
    let mut cfg = fast_config();
    let dc = cfg.clusters.iter_mut().find(|c| c.name == "dc-a").unwrap();
    let mut fast = dc.storages[1].clone();
    fast.name = "fast-a".into();
    fast.nodes = Some(vec!["pve-a1".into()]);
    let mut old = dc.storages[1].clone();
    old.name = "old-nfs".into();
    old.disabled = true;
    dc.storages.push(fast);
    dc.storages.push(old);
    let ceph = dc.storages.iter_mut().find(|s| s.name == "ceph").unwrap();
    ceph.inactive_on = vec!["pve-a3".into()];
    let sim = start(cfg).await;
    let a = Api::new(sim.cluster("dc-a").unwrap());

    let listed = |r: &common::Resp| -> Vec<(String, u64, u64)> {
        r.data()
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["storage"].as_str().unwrap().to_string(),
                    s["enabled"].as_u64().unwrap(),
                    s["active"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let a3 = listed(&a.get("/nodes/pve-a3/storage?content=images").await);
    assert_eq!(
        a3,
        [
            ("ceph".to_string(), 1, 0),
            ("local".to_string(), 1, 1),
            ("local-lvm".to_string(), 1, 1),
            ("old-nfs".to_string(), 0, 0),
        ],
        "fast-a is not configured for pve-a3; ceph does not activate there; old-nfs is disabled"
    );
    let enabled_only = listed(
        &a.get("/nodes/pve-a3/storage?content=images&enabled=1")
            .await,
    );
    assert!(enabled_only.iter().all(|(s, _, _)| s != "old-nfs"));
    let a1 = listed(&a.get("/nodes/pve-a1/storage?content=images").await);
    assert!(a1.contains(&("fast-a".to_string(), 1, 1)));

    let resources = a.get("/cluster/resources?type=storage").await;
    let status = |node: &str, storage: &str| -> Option<String> {
        resources
            .data()
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["node"] == node && e["storage"] == storage)
            .map(|e| e["status"].as_str().unwrap().to_string())
    };
    assert_eq!(status("pve-a1", "ceph").as_deref(), Some("available"));
    assert_eq!(status("pve-a3", "ceph").as_deref(), Some("unknown"));
    assert_eq!(status("pve-a1", "fast-a").as_deref(), Some("available"));
    assert_eq!(status("pve-a2", "fast-a"), None);
    assert_eq!(status("pve-a1", "old-nfs"), None, "disabled: not listed");

    let alloc = |node: &'static str, storage: &'static str| {
        let a = a.clone();
        async move {
            a.post(
                &format!("/nodes/{node}/storage/{storage}/content"),
                &[
                    ("vmid", "777"),
                    ("filename", "vm-777-disk-0"),
                    ("size", "1G"),
                ],
            )
            .await
        }
    };
    let r = alloc("pve-a3", "ceph").await;
    assert_eq!(r.status, 500, "{r:?}");
    assert_eq!(r.reason, "storage 'ceph' is not online");
    let r = alloc("pve-a2", "fast-a").await;
    assert_eq!(
        r.reason,
        "storage 'fast-a' is not available on node 'pve-a2'"
    );
    let r = alloc("pve-a1", "old-nfs").await;
    assert_eq!(r.reason, "storage 'old-nfs' is disabled");
    assert_eq!(alloc("pve-a1", "fast-a").await.status, 200);

    // Activation comes back at run time.
    assert!(
        sim.cluster("dc-a")
            .unwrap()
            .set_storage_active("ceph", "pve-a3", true)
    );
    assert_eq!(alloc("pve-a3", "ceph").await.status, 200);
}
