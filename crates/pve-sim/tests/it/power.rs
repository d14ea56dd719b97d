//! Power state, destroy and the guest agent (docs/proxmox-semantics.md §10, §16, §17;
//! docs/field-cases.md B18, B21): start/stop tasks, `status/current`, refusing to
//! delete running/protected/HA/locked VMs, purge, linked clones blocking a
//! template's destroy, the three agent errors and the agent's interfaces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::common;

use common::{Api, fast_config, start};
use pve_sim::AgentState;
use serde_json::json;

async fn clone_101(a: &Api) {
    let r = a
        .post(
            "/nodes/pve-a1/qemu/9000/clone",
            &[("newid", "101"), ("name", "w1")],
        )
        .await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
}

#[tokio::test]
async fn start_stop_and_status() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    clone_101(&a).await;
    let s = a.get("/nodes/pve-a1/qemu/101/status/current").await;
    assert_eq!(s.data()["status"], "stopped");
    assert_eq!(s.data()["qmpstatus"], "stopped");
    assert_eq!(s.data()["agent"], json!(1));
    assert_eq!(s.data()["ha"], json!({"managed": 0}));
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    assert!(r.upid().contains(":qmstart:101:"));
    assert_eq!(a.run("pve-a1", r).await, "OK");
    let s = a.get("/nodes/pve-a1/qemu/101/status/current").await;
    assert_eq!(
        (s.data()["status"].clone(), s.data()["qmpstatus"].clone()),
        (json!("running"), json!("running"))
    );
    assert!(s.data()["pid"].is_u64());
    assert_eq!(s.data()["maxmem"], json!(2048u64 << 20));
    let r = a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await;
    assert_eq!(a.run("pve-a1", r).await, "VM 101 already running");
    let r = a.post("/nodes/pve-a1/qemu/9000/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "you can't start a vm if it's a template"
    );
    // start of a missing VM fails in the task
    let r = a.post("/nodes/pve-a1/qemu/777/status/start", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "Configuration file 'nodes/pve-a1/qemu-server/777.conf' does not exist"
    );
    let r = a.post("/nodes/pve-a1/qemu/101/status/shutdown", &[]).await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(c.vm(101).unwrap().status, "stopped");
    let r = a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "OK",
        "stopping a stopped VM is a no-op"
    );
    let r = a.post("/nodes/pve-a1/qemu/101/status/reboot", &[]).await;
    assert_eq!((r.status, r.reason.as_str()), (500, "VM 101 not running"));
}

#[tokio::test]
async fn destroy_preconditions_b21() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    clone_101(&a).await;
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await
        )
        .await,
        "OK"
    );
    let r = a.delete("/nodes/pve-a1/qemu/101").await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "VM 101 is running - destroy failed")
    );
    assert_eq!(
        r.body,
        json!({"data": null, "message": "VM 101 is running - destroy failed\n"})
    );
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await
        )
        .await,
        "OK"
    );
    // protection
    a.put("/nodes/pve-a1/qemu/101/config", &[("protection", "1")])
        .await;
    let r = a.delete("/nodes/pve-a1/qemu/101").await;
    assert_eq!(r.reason, "can't remove VM 101 - protection mode enabled");
    a.put("/nodes/pve-a1/qemu/101/config", &[("delete", "protection")])
        .await;
    // HA without purge (the provider token holds Sys.Console on `/`: the
    // provider makes HA resources, docs/field-cases.md B33)
    let r = a
        .post(
            "/cluster/ha/resources",
            &[("sid", "vm:101"), ("state", "stopped")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let r = a.delete("/nodes/pve-a1/qemu/101").await;
    assert_eq!(
        r.reason,
        "unable to remove VM 101 - used in HA resources and purge parameter not set."
    );
    // a template with linked clones cannot go
    let r = a.delete("/nodes/pve-a1/qemu/9000").await;
    assert_eq!(
        a.run("pve-a1", r).await,
        "base volume 'ceph:base-9000-disk-0' is still in use by linked cloned VM 101"
    );
    // purge + destroy-unreferenced-disks
    let r = a
        .delete("/nodes/pve-a1/qemu/101?purge=1&destroy-unreferenced-disks=1")
        .await;
    assert!(r.upid().contains(":qmdestroy:101:"));
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert!(c.vm(101).is_none());
    assert!(
        c.storage_content("pve-a1", "ceph")
            .iter()
            .all(|v| v.vmid != Some(101))
    );
    assert_eq!(a.get("/cluster/ha/resources").await.status, 200);
    let r = a.get("/nodes/pve-a1/qemu/101/status/current").await;
    assert_eq!(
        r.reason,
        "Configuration file 'nodes/pve-a1/qemu-server/101.conf' does not exist"
    );
}

#[tokio::test]
async fn a_locked_vm_fails_the_destroy_task() {
    let sim = start(fast_config()).await;
    let c = sim.cluster("dc-a").unwrap();
    let mut vm = pve_sim::VmConfig {
        vmid: 103,
        name: "old".into(),
        node: "pve-a1".into(),
        tags: None,
        memory_mib: 1024,
        cores: 1,
        storage: "ceph".into(),
        disk_gib: 4,
        disk_key: "scsi0".into(),
        efidisk: false,
        tpm: false,
        agent: true,
        bridge: "vmbr0".into(),
        vlan: None,
        cloudinit_storage: None,
        running: false,
        ha: false,
        extra: Default::default(),
    };
    vm.extra.insert("lock".into(), "backup".into());
    c.create_vm(vm, false).unwrap();
    let a = Api::new(c);
    let r = a.delete("/nodes/pve-a1/qemu/103").await;
    assert_eq!(a.run("pve-a1", r).await, "VM is locked (backup)");
    let r = a.delete("/nodes/pve-a1/qemu/103?skiplock=1").await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.body["errors"],
        json!({"skiplock": "Only root may use this option."})
    );
}

#[tokio::test]
async fn agent_errors_in_proxmox_order() {
    let cfg = fast_config().with_timings(|t| t.boot = 1e7);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    clone_101(&a).await;
    let path = "/nodes/pve-a1/qemu/101/agent/network-get-interfaces";
    let r = a.get(path).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "VM 101 is not running")
    );
    // the `agent` key is checked first, even on a stopped VM
    a.put("/nodes/pve-a1/qemu/101/config", &[("delete", "agent")])
        .await;
    assert_eq!(a.get(path).await.reason, "No QEMU guest agent configured");
    // `agent: 0` still reaches the ping
    a.put("/nodes/pve-a1/qemu/101/config", &[("agent", "0")])
        .await;
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await
        )
        .await,
        "OK"
    );
    assert_eq!(a.get(path).await.reason, "QEMU guest agent is not running");
    // enabled, but the guest is still booting
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await,
    )
    .await;
    a.put(
        "/nodes/pve-a1/qemu/101/config",
        &[("agent", "enabled=1,fstrim_cloned_disks=1")],
    )
    .await;
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await,
    )
    .await;
    let r = a.get(path).await;
    assert_eq!(
        (r.status, r.reason.as_str()),
        (500, "QEMU guest agent is not running"),
        "booting"
    );
    assert_eq!(
        a.post("/nodes/pve-a1/qemu/101/agent/ping", &[])
            .await
            .reason,
        "QEMU guest agent is not running"
    );
    assert!(c.set_agent_state(101, AgentState::Running));
    assert_eq!(a.get(path).await.status, 200);
    assert_eq!(
        a.post("/nodes/pve-a1/qemu/101/agent/ping", &[]).await.body,
        json!({"data": {"result": {}}})
    );
    assert!(c.set_agent_state(101, AgentState::NotRunning));
    assert_eq!(a.get(path).await.reason, "QEMU guest agent is not running");
}

#[tokio::test]
async fn agent_reports_macs_and_dhcp_addresses_after_boot() {
    let cfg = fast_config().with_timings(|t| t.boot = 0.0);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    clone_101(&a).await;
    a.put(
        "/nodes/pve-a1/qemu/101/config",
        &[("net1", "virtio,bridge=vmbr1")],
    )
    .await;
    assert_eq!(
        a.run(
            "pve-a1",
            a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await
        )
        .await,
        "OK"
    );
    let vm = c.vm(101).unwrap();
    let mac0 = vm.config["net0"]
        .split(['=', ','])
        .nth(1)
        .unwrap()
        .to_ascii_lowercase();
    let mac1 = vm.config["net1"]
        .split(['=', ','])
        .nth(1)
        .unwrap()
        .to_ascii_lowercase();
    let r = a
        .get("/nodes/pve-a1/qemu/101/agent/network-get-interfaces")
        .await;
    let ifs = r.data()["result"].as_array().unwrap();
    assert_eq!(ifs.len(), 3);
    assert_eq!(ifs[0]["name"], "lo");
    assert_eq!(
        ifs[0]["ip-addresses"],
        json!([{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
               {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128}])
    );
    assert_eq!(ifs[1]["name"], "ens18");
    assert_eq!(ifs[1]["hardware-address"], mac0.as_str());
    let addrs = ifs[1]["ip-addresses"].as_array().unwrap();
    assert_eq!(
        addrs[0],
        json!({"ip-address": "10.10.0.100", "ip-address-type": "ipv4", "prefix": 24}),
        "lowest free lease"
    );
    assert!(
        addrs[1]["ip-address"]
            .as_str()
            .unwrap()
            .starts_with("fe80::")
    );
    // vmbr1 has no DHCP: only the link-local address
    assert_eq!(ifs[2]["hardware-address"], mac1.as_str());
    assert_eq!(ifs[2]["ip-addresses"].as_array().unwrap().len(), 1);
    // the lease is stable across restarts and released on destroy
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await,
    )
    .await;
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await,
    )
    .await;
    assert_eq!(
        c.vm(101).unwrap().guest_addresses["ens18"][0],
        "10.10.0.100/24"
    );
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "102")])
        .await;
    a.run("pve-a1", r).await;
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/102/status/start", &[]).await,
    )
    .await;
    assert_eq!(
        c.vm(102).unwrap().guest_addresses["ens18"][0],
        "10.10.0.101/24"
    );
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await,
    )
    .await;
    assert_eq!(
        a.run("pve-a1", a.delete("/nodes/pve-a1/qemu/101").await)
            .await,
        "OK"
    );
    let r = a
        .post("/nodes/pve-a1/qemu/9000/clone", &[("newid", "103")])
        .await;
    a.run("pve-a1", r).await;
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/103/status/start", &[]).await,
    )
    .await;
    assert_eq!(
        c.vm(103).unwrap().guest_addresses["ens18"][0],
        "10.10.0.100/24",
        "freed lease reused"
    );
}

#[tokio::test]
async fn agent_exec_is_one_shot() {
    let cfg = fast_config().with_timings(|t| {
        t.boot = 0.0;
        t.agent_exec = 0.0;
    });
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    clone_101(&a).await;
    a.run(
        "pve-a1",
        a.post("/nodes/pve-a1/qemu/101/status/start", &[]).await,
    )
    .await;
    let r = a
        .post(
            "/nodes/pve-a1/qemu/101/agent/exec",
            &[
                ("command", "cat"),
                ("command", "/run/cluster-api/bootstrap-success.complete"),
            ],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    let pid = r.data()["pid"].as_u64().unwrap();
    let s = a
        .get(&format!(
            "/nodes/pve-a1/qemu/101/agent/exec-status?pid={pid}"
        ))
        .await;
    assert_eq!(
        s.data(),
        &json!({"exited": 1, "exitcode": 0, "out-data": "success"})
    );
    let s = a
        .get(&format!(
            "/nodes/pve-a1/qemu/101/agent/exec-status?pid={pid}"
        ))
        .await;
    assert_eq!(
        (s.status, s.reason.as_str()),
        (500, "Agent error: Invalid parameter 'pid'")
    );
    let o = a.get("/nodes/pve-a1/qemu/101/agent/get-osinfo").await;
    assert_eq!(o.data()["result"]["id"], "ubuntu");
}

#[tokio::test]
async fn ha_managed_start_is_an_ha_task() {
    let cfg = fast_config().with_timings(|t| t.ha_delay = 0.0);
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    let mut vm = c.vm(9000).unwrap();
    vm.vmid = 0;
    let v = pve_sim::VmConfig {
        vmid: 120,
        name: "ha1".into(),
        node: "pve-a2".into(),
        tags: None,
        memory_mib: 512,
        cores: 1,
        storage: "ceph".into(),
        disk_gib: 2,
        disk_key: "scsi0".into(),
        efidisk: false,
        tpm: false,
        agent: false,
        bridge: "vmbr0".into(),
        vlan: None,
        cloudinit_storage: None,
        running: false,
        ha: true,
        extra: Default::default(),
    };
    c.create_vm(v, false).unwrap();
    let r = a.post("/nodes/pve-a2/qemu/120/status/start", &[]).await;
    assert!(r.upid().contains(":hastart:120:"), "{r:?}");
    assert_eq!(a.run("pve-a2", r).await, "OK");
    let s = a.get("/nodes/pve-a2/qemu/120/status/current").await;
    assert_eq!(s.data()["ha"]["managed"], json!(1));
    assert_eq!(s.data()["ha"]["state"], "started");
}

/// docs/vm-shapes.md "PCI devices": one map entry is one device, held by one
/// running VM at a time; the start task fails without a free one, and the
/// device is free again when the VM stops.
#[tokio::test]
async fn a_mapped_device_is_taken_by_one_running_vm_at_a_time() {
    let mut cfg = fast_config();
    cfg.cluster_mut("dc-a").unwrap().pci_mappings = vec![pve_sim::config::PciMappingConfig {
        id: "gpu".into(),
        description: None,
        map: vec!["node=pve-a1,path=0000:01:00.0;0000:01:00.1,id=10de:20b0".into()],
        mdev: false,
    }];
    let sim = start(cfg).await;
    let c = sim.cluster("dc-a").unwrap();
    let a = Api::new(c);
    for (vmid, name) in [("101", "w1"), ("102", "w2")] {
        let r = a
            .post(
                "/nodes/pve-a1/qemu/9000/clone",
                &[("newid", vmid), ("name", name)],
            )
            .await;
        assert_eq!(a.run("pve-a1", r).await, "OK");
        let r = a
            .put(
                &format!("/nodes/pve-a1/qemu/{vmid}/config"),
                &[("hostpci0", "mapping=gpu,rombar=0")],
            )
            .await;
        assert_eq!(r.status, 200, "{r:?}");
    }
    let start_vm = |vmid: &'static str| {
        let a = &a;
        async move {
            let r = a
                .post(&format!("/nodes/pve-a1/qemu/{vmid}/status/start"), &[])
                .await;
            a.run("pve-a1", r).await
        }
    };
    assert_eq!(start_vm("101").await, "OK");
    assert_eq!(
        start_vm("102").await,
        "could not find a free device for 'hostpci0'"
    );
    assert_eq!(c.vm(102).unwrap().status, "stopped");
    let r = a.post("/nodes/pve-a1/qemu/101/status/stop", &[]).await;
    assert_eq!(a.run("pve-a1", r).await, "OK");
    assert_eq!(start_vm("102").await, "OK", "the device is free again");
    // a mapping without an entry on the VM's node
    let r = a
        .put(
            "/nodes/pve-a1/qemu/101/config",
            &[("hostpci0", "mapping=other")],
        )
        .await;
    assert_eq!(r.status, 200, "{r:?}");
    assert_eq!(
        start_vm("101").await,
        "PCI device mapping not found for 'other'"
    );
}
