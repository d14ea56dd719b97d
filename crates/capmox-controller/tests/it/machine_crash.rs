//! Crash safety: the controller restarts (loses all memory) between any two
//! reconciles, after the VMID was written but before the clone, and after
//! the clone was issued but before its task was recorded. Each ends with
//! exactly one VM, and nothing leaked: no second VMID, ISO or IP address.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::{ProxmoxMachine, ProxmoxMachineSpec};
use capmox_controller::machine::plan::scheduler::CLONE_TARGET_ANNOTATION;
use capmox_controller::machine::vm::marker::Marker;
use kube::ResourceExt;
use kube::api::{ListParams, Patch, PatchParams};
use pve_client::api::qemu::clone::CloneRequest;
use pve_client::{ApiUrl, Auth, ClientConfig, NodeName, PveClient, TlsMode, VmId};
use pve_sim::{Fault, FaultKind};
use support::*;

fn client(w: &World, dc: &str) -> PveClient {
    let c = w.pve(dc);
    PveClient::new(
        ClientConfig::new(
            dc,
            ApiUrl::parse(&c.url()).unwrap(),
            Auth::token(&c.token_id(), c.token_secret()).unwrap(),
        )
        .with_tls(TlsMode::Verify {
            ca_pem: Some(c.ca_pem()),
        }),
    )
    .unwrap()
}

async fn nothing_leaked(w: &World, dc: &str) {
    assert!(w.isos(dc).is_empty(), "ISOs left: {:?}", w.isos(dc));
    let claims = w.claims().list(&ListParams::default()).await.unwrap().items;
    let addresses = w
        .addresses()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(claims.len(), addresses.len(), "one address per claim");
}

#[tokio::test]
async fn a_restart_before_every_reconcile_still_makes_exactly_one_vm() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w
        .drive_restarting("m1", 300, |m| {
            provisioned(m)
                && m.and_then(|m| m.status.as_ref())
                    .is_some_and(|s| s.task_ref.is_none())
        })
        .await
        .unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(100));
    let vms = w.vms("dc-a");
    assert_eq!(vms.len(), 1, "{vms:?}");
    assert_eq!(vms[0].vmid, 100);
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        1
    );
    assert_eq!(
        w.claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    nothing_leaked(&w, "dc-a").await;

    // Deletion survives restarts too.
    w.machines()
        .delete("m1", &Default::default())
        .await
        .unwrap();
    w.drive_restarting("m1", 300, |m| m.is_none()).await;
    assert!(w.vms("dc-a").is_empty());
    assert!(
        w.claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    nothing_leaked(&w, "dc-a").await;
}

#[tokio::test]
async fn a_crash_after_the_vmid_was_written_clones_with_that_vmid() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    // The previous process chose the instance and reserved VMID 140, then died.
    w.machines()
        .patch(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(
                serde_json::json!({"spec": {"instance": "dc-a", "virtualMachineID": 140}}),
            ),
        )
        .await
        .unwrap();
    let m = w.drive_restarting("m1", 300, provisioned).await.unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(140));
    let vms = w.vms("dc-a");
    assert_eq!(vms.iter().map(|v| v.vmid).collect::<Vec<_>>(), vec![140]);
}

#[tokio::test]
async fn a_crash_after_the_clone_was_issued_adopts_the_vm() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let created = w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
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
    // The previous process issued the clone (with the marker) and died before
    // recording the task.
    let marker = Marker::new(NS, "m1", &created.uid().unwrap());
    let req = CloneRequest::new(VmId::new(100).unwrap())
        .name("m1")
        .full(true)
        .description(marker.description(None));
    let upid = client(&w, "dc-a")
        .clone_vm(
            &NodeName::new("pve-a1").unwrap(),
            VmId::new(9000).unwrap(),
            &req,
        )
        .await
        .unwrap();
    let m = w.drive_restarting("m1", 300, provisioned).await.unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(100));
    let vms = w.vms("dc-a");
    assert_eq!(vms.len(), 1, "adopted, not cloned twice: {vms:?}");
    assert_eq!(
        w.pve("dc-a")
            .task(upid.as_str())
            .unwrap()
            .exitstatus
            .as_deref(),
        Some("OK")
    );
    nothing_leaked(&w, "dc-a").await;
}

/// Record before create: the clone's target node is written (annotation
/// `…/clone-target`) before the clone is asked for, so a process that dies
/// while the clone call is in flight leaves the node the VM goes to behind
/// (the next process's scheduler counts the VM there; Proxmox lists it on
/// the template's node until the clone ends). The clone call is held for
/// 2 s here: the node must be recorded while no VM exists yet.
#[tokio::test]
async fn the_target_node_is_recorded_before_the_clone_is_asked_for() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.pve("dc-a").add_fault(Fault {
        method: Some("POST".into()),
        path: Some("/nodes/{node}/qemu/{vmid}/clone".into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: FaultKind::Latency { seconds: 400.0 },
    });
    let watch = async {
        for _ in 0..500 {
            let node = w
                .get("m1")
                .await
                .and_then(|m| m.annotations().get(CLONE_TARGET_ANNOTATION).cloned());
            if let Some(node) = node {
                return (node, w.vms("dc-a").len());
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("no clone target recorded in 5 s");
    };
    let (recorded, driven) = tokio::join!(watch, w.drive("m1", 300, provisioned));
    let (node, vms_then) = recorded;
    assert_eq!(vms_then, 0, "the node was recorded only after the clone");
    let m = driven.unwrap();
    assert_eq!(
        m.status.unwrap_or_default().proxmox_node,
        Some(node.clone())
    );
    let vms = w.vms("dc-a");
    assert_eq!(vms.len(), 1, "{vms:?}");
    assert_eq!(vms[0].node, node);
}

/// The clone target goes with the VMID: one write. Every version of the
/// machine that the API server stored with a VMID also names the node,
/// and the annotation is written once for a machine whose plan held.
#[tokio::test]
async fn the_vmid_and_the_clone_target_are_written_together() {
    use futures::StreamExt;
    use kube::api::{WatchEvent, WatchParams};
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let mut versions = w
        .machines()
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let last = w
        .drive("m1", 300, provisioned)
        .await
        .unwrap()
        .resource_version();
    let mut seen: Vec<ProxmoxMachine> = Vec::new();
    while seen.last().and_then(ResourceExt::resource_version) != last {
        let next = tokio::time::timeout(std::time::Duration::from_secs(5), versions.next())
            .await
            .expect("the watch delivers every version")
            .unwrap()
            .unwrap();
        if let WatchEvent::Added(m) | WatchEvent::Modified(m) = next {
            seen.push(m);
        }
    }
    let target = |m: &ProxmoxMachine| m.annotations().get(CLONE_TARGET_ANNOTATION).cloned();
    let with_vmid: Vec<&ProxmoxMachine> = seen
        .iter()
        .filter(|m| m.spec.virtual_machine_id.is_some())
        .collect();
    assert!(!with_vmid.is_empty(), "no version with a VMID");
    for m in &with_vmid {
        assert!(
            target(m).is_some(),
            "version {:?} has VMID {:?} but no clone target",
            m.resource_version(),
            m.spec.virtual_machine_id
        );
    }
    let changes = seen
        .windows(2)
        .filter(|p| target(&p[0]) != target(&p[1]))
        .count();
    assert_eq!(changes, 1, "the clone target was written more than once");
}

#[tokio::test]
async fn a_vm_of_another_machine_is_never_adopted() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
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
    // VM 100 was cloned for a same-named machine of another cluster.
    let other = Marker::new("wl2", "m1", "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee");
    let req = CloneRequest::new(VmId::new(100).unwrap())
        .name("m1")
        .full(true)
        .description(other.description(None));
    let upid = client(&w, "dc-a")
        .clone_vm(
            &NodeName::new("pve-a1").unwrap(),
            VmId::new(9000).unwrap(),
            &req,
        )
        .await
        .unwrap();
    w.pve("dc-a").wait_task(upid.as_str()).await.unwrap();
    let theirs = w.pve("dc-a").vm(100).unwrap().config;
    let m = w
        .drive_restarting("m1", 30, |m| vm_reason(m) == "InvalidVMID")
        .await
        .unwrap();
    assert!(
        condition(&m, "Ready").unwrap().2.contains(
            "the VM there is not this machine's (wl2/m1 uid=aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee)"
        ),
        "{:?}",
        condition(&m, "Ready")
    );
    w.machines()
        .patch(
            "m1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({"spec": {"virtualMachineID": null}})),
        )
        .await
        .unwrap();
    let m = w.drive_restarting("m1", 300, provisioned).await.unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(101));
    assert_eq!(
        w.pve("dc-a").vm(100).unwrap().config,
        theirs,
        "never touched"
    );
    assert_eq!(w.vms("dc-a").len(), 2);
}
