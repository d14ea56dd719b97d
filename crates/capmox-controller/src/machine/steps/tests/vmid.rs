//! [`crate::machine::steps::vmid`]: the VMID is written before the clone.

use super::kit::{Kit, event_codes};
use crate::api::ProxmoxMachineSpec;
use crate::machine::decide::fixtures::base;
use crate::machine::decide::{Observed, VmFact};
use crate::machine::plan::vmid::RESERVED_ANNOTATION;
use crate::machine::steps::vmid;

#[tokio::test]
async fn the_reservation_avoids_live_vmids_and_is_written_with_its_annotation() {
    let kit = Kit::new().await;
    kit.pve.add_vm(100, "pve-a1", true, &[("name", "other")]);
    kit.pve.add_vm(101, "pve-a1", false, &[("template", "1")]);
    let m = kit.machine(ProxmoxMachineSpec::default()).await;
    let mut run = kit.run(&m);
    let mut facts = base();
    facts.vmid_range = (100, 110);
    let out = vmid::reserve(&mut run, &facts).await.unwrap();
    assert_eq!(out, Observed::VmidReserved(102));
    let stored = kit.stored().await;
    assert_eq!(stored.spec.virtual_machine_id, Some(102));
    assert_eq!(
        stored.metadata.annotations.unwrap()[RESERVED_ANNOTATION],
        "102"
    );
    // No Proxmox call but the listing: nothing is made before the record.
    assert_eq!(kit.pve.calls(), ["cluster_resources"]);
}

#[tokio::test]
async fn a_failed_write_gives_the_vmid_back() {
    let kit = Kit::new().await;
    let m = kit.machine(ProxmoxMachineSpec::default()).await;
    // A concurrent change: the write's resourceVersion precondition fails.
    kit.machines()
        .patch(
            "m1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    let mut facts = base();
    facts.vmid_range = (100, 110);
    let mut run = kit.run(&m);
    assert!(vmid::reserve(&mut run, &facts).await.is_err());
    assert_eq!(kit.stored().await.spec.virtual_machine_id, None);
    // The next attempt (from fresh state) gets the same, lowest VMID.
    let fresh = kit.stored().await;
    let mut run = kit.run(&fresh);
    let out = vmid::reserve(&mut run, &facts).await.unwrap();
    assert_eq!(out, Observed::VmidReserved(100));
}

#[tokio::test]
async fn a_vmid_taken_by_a_foreign_vm_is_given_up_and_the_vm_left_alone() {
    let kit = Kit::new().await;
    kit.pve.add_vm(100, "pve-a1", true, &[("name", "other")]);
    let m = kit.machine(ProxmoxMachineSpec::default()).await;
    let mut run = kit.run(&m);
    let mut facts = base();
    facts.vmid_range = (100, 110);
    assert_eq!(
        vmid::reserve(&mut run, &facts).await.unwrap(),
        Observed::VmidReserved(101)
    );
    // Someone else's VM appears at 101 before our clone.
    kit.pve
        .add_vm(101, "pve-a2", false, &[("name", "intruder")]);
    facts.vmid = Some(101);
    facts.vm = Some(VmFact::Foreign("intruder".into()));
    let out = vmid::replace(&mut run, &facts).await.unwrap();
    assert_eq!(out, Observed::VmidReplaced);
    let stored = kit.stored().await;
    assert_eq!(stored.spec.virtual_machine_id, None);
    assert!(
        !stored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(RESERVED_ANNOTATION)
    );
    assert_eq!(event_codes(&run), ["VMIDTaken"]);
    assert!(kit.pve.vm(101).is_some(), "the foreign VM is untouched");
    assert!(!kit.pve.calls().contains(&"delete_vm"));
}
