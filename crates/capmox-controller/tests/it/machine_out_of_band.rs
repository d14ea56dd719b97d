//! What others do to our VMs, and VMIDs that cannot be ours
//! (the redesign's faults): a VM stopped outside the provider before
//! provisioning completes is started again, after it is only reported; a
//! recorded VMID that holds a template or someone else's VM is never read as
//! "absent" and cloned over.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use pve_client::api::qemu::power::StopOptions;
use pve_client::{ApiUrl, Auth, ClientConfig, NodeName, PveClient, TlsMode, VmId, WaitOptions};
use pve_sim::AgentState;
use support::*;

const START: &str = "/nodes/{node}/qemu/{vmid}/status/start";
const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";

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

/// Stops VM `vmid` as an operator would (`POST …/status/stop`), and waits
/// for the task.
async fn stop_out_of_band(w: &World, vmid: u32) {
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    let c = client(w, "dc-a");
    let node = NodeName::new(vm.node).unwrap();
    let upid = c
        .stop_vm(&node, VmId::new(vmid).unwrap(), StopOptions::default())
        .await
        .unwrap();
    c.wait_task(&upid, WaitOptions::default()).await.unwrap();
    assert_eq!(w.pve("dc-a").vm(vmid).unwrap().status, "stopped");
}

fn running(w: &World, vmid: u32) -> bool {
    w.pve("dc-a")
        .vm(vmid)
        .is_some_and(|v| v.status == "running")
}

#[tokio::test]
async fn a_vm_stopped_before_provisioning_is_started_again_and_after_it_is_reported() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    // Until the VM exists; then its guest agent stays silent, so the
    // machine waits for addresses with the VM running.
    w.drive("m1", 100, |_| w.pve("dc-a").vm(100).is_some())
        .await;
    assert!(w.pve("dc-a").set_agent_state(100, AgentState::NotRunning));
    w.drive("m1", 100, |_| running(&w, 100)).await;
    assert!(!provisioned(w.get("m1").await.as_ref()));
    assert_eq!(w.pve("dc-a").calls().count("POST", START), 1);

    stop_out_of_band(&w, 100).await;
    w.drive("m1", 100, |_| running(&w, 100)).await;
    assert_eq!(
        w.pve("dc-a").calls().count("POST", START),
        2,
        "started again, once"
    );

    assert!(w.pve("dc-a").set_agent_state(100, AgentState::Running));
    w.provision("m1").await;

    // Provisioned: a stop is the operator's (or HA's) decision. It is
    // reported, and the VM is left stopped.
    stop_out_of_band(&w, 100).await;
    let m = w
        .drive("m1", 100, |m| {
            m.and_then(|m| condition(m, "Ready"))
                .is_some_and(|c| c.1 == "VirtualMachineStopped")
        })
        .await
        .unwrap();
    let (status, _, message) = condition(&m, "Ready").unwrap();
    assert_eq!(status, "False");
    assert!(message.starts_with("VM 100 on pve-a"), "{message}");
    assert!(message.contains("not started again"), "{message}");
    for _ in 0..5 {
        w.reconcile("m1").await;
    }
    assert_eq!(w.pve("dc-a").vm(100).unwrap().status, "stopped");
    assert_eq!(w.pve("dc-a").calls().count("POST", START), 2);
    // Deletion still completes.
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(100).is_none());
}

#[tokio::test]
async fn a_recorded_vmid_that_holds_a_template_is_not_cloned_over() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let template = w
        .pve("dc-a")
        .vms()
        .into_iter()
        .find(|v| v.template)
        .unwrap()
        .vmid;
    let spec = ProxmoxMachineSpec {
        virtual_machine_id: Some(template),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let vms_before = w.vms("dc-a").len();
    let m = w
        .drive("m1", 60, |m| vm_reason(m) == "InvalidVMID")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        message.starts_with(&format!(
            "spec.virtualMachineID {template} cannot be this machine's VM: "
        )),
        "{message}"
    );
    assert!(message.contains("template"), "{message}");
    // It stays so: no clone, no other VM, the template untouched.
    for _ in 0..5 {
        w.reconcile("m1").await;
    }
    assert_eq!(w.pve("dc-a").calls().count("POST", CLONE), 0);
    assert_eq!(w.vms("dc-a").len(), vms_before);
    assert!(w.pve("dc-a").vm(template).unwrap().template);
    // Deleting the machine leaves the template alone.
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(template).unwrap().template);
}

#[tokio::test]
async fn a_recorded_vmid_that_holds_a_foreign_vm_is_reported_and_left_alone() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    // Another machine's VM at 100, and a user who writes 100 into m1's spec.
    w.machine("wl1", "other", ProxmoxMachineSpec::default())
        .await;
    w.provision("other").await;
    let theirs = w.pve("dc-a").vm(100).unwrap();
    let spec = ProxmoxMachineSpec {
        virtual_machine_id: Some(100),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w
        .drive("m1", 60, |m| vm_reason(m) == "InvalidVMID")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        message.starts_with("spec.virtualMachineID 100 cannot be this machine's VM: the VM there is not this machine's"),
        "{message}"
    );
    w.delete_and_drive("m1").await;
    let after = w.pve("dc-a").vm(100).unwrap();
    assert_eq!(
        after.name, theirs.name,
        "the other machine's VM is untouched"
    );
    assert_eq!(after.status, "running");
}
