//! Failure paths against pve-sim's fault injection and field cases:
//! clone lock timeouts and failures (B04), a VMID taken by someone else
//! (B01, B29), warnings as success, an unreachable instance during
//! deletion, node-local templates (B05), shrink requests (B08), memory
//! (B26), invalid specs (B07, B12) and ISO storage on the VM's node (B20).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::common::{SchedulerHints, TemplateSelector};
use capmox_controller::api::machine::{DiskSize, Disks, NetworkDevice, NetworkSpec};
use capmox_controller::api::{MatchPolicy, ProxmoxMachineSpec};
use kube::api::{Patch, PatchParams};
use pve_sim::{Fault, FaultKind};
use support::*;

fn fault(method: &str, path: &str, count: Option<u32>, kind: FaultKind) -> Fault {
    Fault {
        method: Some(method.into()),
        path: Some(path.into()),
        node: None,
        probability: 1.0,
        count,
        kind,
    }
}

fn sim_vm(
    vmid: u32,
    name: &str,
    node: &str,
    storage: &str,
    tags: Option<&str>,
) -> pve_sim::VmConfig {
    serde_json::from_value(serde_json::json!({
        "vmid": vmid, "name": name, "node": node, "storage": storage, "tags": tags,
    }))
    .unwrap()
}

#[tokio::test]
async fn b04_clone_lock_timeout_is_retried_and_leaves_one_vm() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.pve("dc-a").add_fault(fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/clone",
        Some(1),
        FaultKind::LockTimeout,
    ));
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w
        .drive("m1", 50, |m| vm_reason(m) == "CloneFailed")
        .await
        .unwrap();
    let c = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        c.2.contains("got timeout"),
        "the task's own message: {}",
        c.2
    );
    let m = w.provision("m1").await;
    assert_eq!(
        m.spec.virtual_machine_id,
        Some(100),
        "the same VMID is used again"
    );
    assert_eq!(w.vms("dc-a").len(), 1);
    let failed: Vec<_> = w
        .pve("dc-a")
        .tasks()
        .into_iter()
        .filter(|t| t.kind == "qmclone" && t.exitstatus.as_deref() != Some("OK"))
        .collect();
    assert_eq!(failed.len(), 1);
}

#[tokio::test]
async fn clone_task_failure_is_a_condition_with_the_exit_status_then_recovers() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let id = w.pve("dc-a").add_fault(fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/clone",
        None,
        FaultKind::TaskFailure {
            message: "clone failed: storage 'ceph' is full".into(),
        },
    ));
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w
        .drive("m1", 50, |m| vm_reason(m) == "CloneFailed")
        .await
        .unwrap();
    let (status, _, message) = condition(&m, "Ready").unwrap();
    assert_eq!(status, "False");
    assert!(
        message.contains("clone failed: storage 'ceph' is full"),
        "{message}"
    );
    assert!(w.vms("dc-a").is_empty());
    w.pve("dc-a").remove_fault(id);
    w.provision("m1").await;
    assert_eq!(w.vms("dc-a").len(), 1);
}

#[tokio::test]
async fn b01_b29_a_foreign_vm_at_our_vmid_is_left_alone() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    // Another tool's VM sits at the VMID the machine records (same name as
    // our machine, even).
    w.pve("dc-a")
        .create_vm(sim_vm(100, "m1", "pve-a2", "ceph", None), false)
        .unwrap();
    let before = w.pve("dc-a").vm(100).unwrap().config;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.machines()
        .patch(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"instance": "dc-a", "virtualMachineID": 100}}),
            ),
        )
        .await
        .unwrap();
    // Not read as "absent", not cloned again, not adopted: a terminal
    // condition names the VMID and what is there.
    let m = w
        .drive("m1", 30, |m| vm_reason(m) == "InvalidVMID")
        .await
        .unwrap();
    let (status, _, message) = condition(&m, "Ready").unwrap();
    assert_eq!(status, "False");
    assert!(
        message.starts_with(
            "spec.virtualMachineID 100 cannot be this machine's VM: the VM there is not this machine's (VM 100 carries no capmox marker (name m1))"
        ),
        "{message}"
    );
    let clones = |w: &World| {
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone")
    };
    assert_eq!(clones(&w), 0);
    // The operator clears the VMID: a free one is reserved.
    w.machines()
        .patch(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"virtualMachineID": null}})),
        )
        .await
        .unwrap();
    let m = w.provision("m1").await;
    assert_eq!(m.spec.virtual_machine_id, Some(101));
    assert_eq!(
        w.pve("dc-a").vm(100).unwrap().config,
        before,
        "never touched"
    );
    assert_eq!(w.pve("dc-a").vm(101).unwrap().name.as_deref(), Some("m1"));
    // Deleting our machine leaves the foreign VM alone too.
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(100).is_some());
    assert!(w.pve("dc-a").vm(101).is_none());
}

#[tokio::test]
async fn b04_task_warnings_are_success() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.pve("dc-a").add_fault(fault(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/start",
        None,
        FaultKind::TaskWarnings { count: 1 },
    ));
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.provision("m1").await;
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
        1,
        "not retried"
    );
}

#[tokio::test]
async fn deletion_in_an_unreachable_instance_says_so_and_retries() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.provision("m1").await;
    let id = w.pve("dc-a").add_fault(Fault {
        method: None,
        path: None,
        node: None,
        probability: 1.0,
        count: None,
        kind: FaultKind::Error {
            status: 503,
            message: "service unavailable".into(),
        },
    });
    w.machines()
        .delete("m1", &Default::default())
        .await
        .unwrap();
    let m = w
        .drive("m1", 10, |m| vm_reason(m) == "DeletionFailed")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        message.starts_with("cannot delete VM 100 in instance dc-a: "),
        "{message}"
    );
    assert!(message.contains("service unavailable"), "{message}");
    assert_eq!(w.vms("dc-a").len(), 1, "nothing happened");
    assert!(
        w.claims().get_opt("m1-net0-ipv4").await.unwrap().is_some(),
        "the address is kept"
    );
    w.pve("dc-a").remove_fault(id);
    w.drive("m1", 100, |m| m.is_none()).await;
    assert!(w.vms("dc-a").is_empty());
}

#[tokio::test]
async fn b05_node_local_template_is_cloned_on_its_node() {
    let w = world().await;
    // A template on local-lvm (not shared) of pve-a2, tagged differently.
    w.pve("dc-a")
        .create_vm(
            sim_vm(
                9010,
                "local-tpl",
                "pve-a2",
                "local-lvm",
                Some("capmox;local"),
            ),
            true,
        )
        .unwrap();
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let selector = Some(TemplateSelector {
        match_tags: vec!["capmox".into(), "local".into()],
        match_policy: Some(MatchPolicy::Exact),
    });
    // Confined to other nodes: refused before any clone, saying why.
    let elsewhere = ProxmoxMachineSpec {
        template_selector: selector.clone(),
        allowed_nodes: vec!["pve-a1".into(), "pve-a3".into()],
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "far", elsewhere).await;
    let m = w
        .drive("far", 10, |m| vm_reason(m) == "NoNodeAvailable")
        .await
        .unwrap();
    assert_eq!(
        without_retry(&condition(&m, "VirtualMachineProvisioned").unwrap().2),
        "no online node is allowed: template 9010 has scsi0 on local-lvm, which is not shared; it can only be cloned to pve-a2",
        "the reason, then when it is tried again"
    );
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        0
    );
    // Free to choose: it lands next to the template.
    let near = ProxmoxMachineSpec {
        template_selector: selector,
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "near", near).await;
    let m = w.provision("near").await;
    assert_eq!(m.status.unwrap().proxmox_node.as_deref(), Some("pve-a2"));
}

#[tokio::test]
async fn b08_shrink_is_refused_without_a_resize_call() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let spec = ProxmoxMachineSpec {
        disks: Some(Disks {
            boot_volume: Some(DiskSize {
                disk: "scsi0".into(),
                size_gb: 10,
            }),
            additional_volumes: vec![],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w
        .drive("m1", 60, |m| vm_reason(m) == "ResizeFailed")
        .await
        .unwrap();
    assert_eq!(
        condition(&m, "VirtualMachineProvisioned").unwrap().2,
        "cannot shrink scsi0 from 20GiB to 10GiB"
    );
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("PUT", "/nodes/{node}/qemu/{vmid}/resize"),
        0
    );
    assert_eq!(w.vms("dc-a")[0].status, "stopped", "never started");
}

#[tokio::test]
async fn b26_memory_accounting_and_overcommit() {
    let w = world().await;
    let mut tight = instance("dc-a", 10);
    tight.nodes = vec!["pve-a1".into()];
    w.cluster("wl1", multi(vec![tight])).await;
    // 200 GiB does not fit a 128 GiB node at 100 %.
    let big = ProxmoxMachineSpec {
        memory_mib: Some(200 * 1024),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "big", big.clone()).await;
    let m = w
        .drive("big", 10, |m| vm_reason(m) == "InsufficientMemory")
        .await
        .unwrap();
    assert_eq!(
        without_retry(&condition(&m, "VirtualMachineProvisioned").unwrap().2),
        "no node has 200 GiB free for this VM (memoryAdjustment 100%): pve-a1: capacity 128 GiB (of 128 GiB), reserved 0 bytes, free 128 GiB",
        "the reason, then when it is tried again"
    );
    // With 300 % overcommit on a second cluster it fits.
    let mut over = instance("dc-b", 20);
    over.scheduler_hints = Some(SchedulerHints {
        memory_adjustment: Some(300),
    });
    w.cluster("wl2", multi(vec![over])).await;
    w.machine("wl2", "big2", big).await;
    w.provision("big2").await;
}

#[tokio::test]
async fn b07_b12_invalid_specs_make_no_api_call() {
    let w = world().await;
    let mut dc_a = instance("dc-a", 10);
    dc_a.vm_id_range = Some(capmox_controller::api::VmIdRange {
        start: 1000,
        end: 1999,
    });
    w.cluster("wl1", multi(vec![dc_a])).await;
    // The schema refuses bad tags and VLANs at admission, naming the fields.
    let bad = ProxmoxMachineSpec {
        tags: vec!["-lead".into()],
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net0".into(),
                vlan: Some(4095),
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    let mut pm = capmox_controller::api::ProxmoxMachine::new("bad", bad);
    pm.metadata.namespace = Some(NS.into());
    let e = w
        .machines()
        .create(&Default::default(), &pm)
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("spec.tags[0]") && text.contains("spec.network.networkDevices[0].vlan"),
        "{text}"
    );
    // What only the cluster knows is the reconciler's first check.
    let outside = ProxmoxMachineSpec {
        instance: Some("dc-a".into()),
        vm_id_range: Some(capmox_controller::api::VmIdRange {
            start: 5000,
            end: 5100,
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "outside", outside).await;
    let m = w
        .drive("outside", 5, |m| vm_reason(m) == "InvalidSpec")
        .await
        .unwrap();
    assert_eq!(
        condition(&m, "VirtualMachineProvisioned").unwrap().2,
        "spec.vmIDRange: 5000-5100 is not inside instance \"dc-a\"'s vmIDRange 1000-1999: machines there may only use that range; narrow spec.vmIDRange to it"
    );
    assert_eq!(w.pve("dc-a").calls().total, 0);
}

#[tokio::test]
async fn b20_iso_goes_to_storage_on_the_vms_node() {
    // No shared ISO storage: the ISO must land on the VM's own node.
    let mut sim = fast_sim();
    for c in &mut sim.clusters {
        c.storages.retain(|s| s.name != "cephfs");
    }
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let spec = ProxmoxMachineSpec {
        target: Some("pve-a3".into()),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w
        .drive("m1", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.bootstrap_data_provided)
                == Some(true)
        })
        .await
        .unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    assert_eq!(vm.node, "pve-a3");
    let iso = vm
        .config
        .values()
        .find(|v| v.contains(".iso"))
        .unwrap()
        .clone();
    assert!(iso.starts_with("local:iso/"), "{iso}");
    let volid = iso.split(',').next().unwrap();
    assert!(
        w.pve("dc-a").iso_bytes("pve-a3", volid).is_some(),
        "uploaded to pve-a3's local storage"
    );
    w.provision("m1").await;
    assert!(
        w.pve("dc-a").iso_bytes("pve-a3", volid).is_none(),
        "deleted after provisioning"
    );
}

#[tokio::test]
async fn a_vanished_vm_makes_a_provisioned_machine_not_ready() {
    use pve_client::api::qemu::DeleteOptions;
    use pve_client::api::qemu::power::StopOptions;
    use pve_client::{ApiUrl, Auth, ClientConfig, NodeName, PveClient, TlsMode, VmId, WaitOptions};
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w.provision("m1").await;
    let node = NodeName::new(m.status.unwrap().proxmox_node.unwrap()).unwrap();
    // Someone destroys the VM behind our back.
    let c = w.pve("dc-a");
    let client = PveClient::new(
        ClientConfig::new(
            "dc-a",
            ApiUrl::parse(&c.url()).unwrap(),
            Auth::token(&c.token_id(), c.token_secret()).unwrap(),
        )
        .with_tls(TlsMode::Verify {
            ca_pem: Some(c.ca_pem()),
        }),
    )
    .unwrap();
    let id = VmId::new(100).unwrap();
    let wait = WaitOptions::default();
    let stop = client
        .stop_vm(&node, id, StopOptions::default())
        .await
        .unwrap();
    client.wait_task(&stop, wait).await.unwrap();
    let del = client
        .delete_vm(&node, id, DeleteOptions::default())
        .await
        .unwrap();
    client.wait_task(&del, wait).await.unwrap();
    let m = w
        .drive("m1", 20, |m| vm_reason(m) == "VirtualMachineNotFound")
        .await
        .unwrap();
    let (status, _, message) = condition(&m, "Ready").unwrap();
    assert_eq!(status, "False");
    assert_eq!(
        message,
        "VM 100 is gone from instance dc-a; machines are not recreated (CAPI replaces them)"
    );
    assert!(w.vms("dc-a").is_empty(), "not recreated");
    // Deleting the machine still completes.
    w.delete_and_drive("m1").await;
}
