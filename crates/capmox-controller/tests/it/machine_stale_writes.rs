//! Spec writes carry the `resourceVersion` the reconcile read: a second
//! controller process (leader hand-over) or a user that changed the machine
//! meanwhile makes the write fail with 409 — nothing is overwritten, no VMID
//! is kept, no VM is cloned — and the next reconcile goes on from the fresh
//! object.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::sync::Arc;

use capmox_controller::api::{ProxmoxMachine, ProxmoxMachineSpec};
use capmox_controller::error::Error;
use capmox_controller::machine::reconcile::reconcile_once;
use capmox_controller::machine::report::FINALIZER;
use kube::api::{Patch, PatchParams};
use support::*;

fn is_conflict(r: &Result<Option<std::time::Duration>, Error>) -> bool {
    matches!(r, Err(Error::Kube(kube::Error::Api(s))) if s.code == 409)
}

async fn patch(w: &World, name: &str, body: serde_json::Value) -> ProxmoxMachine {
    w.machines()
        .patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_stale_instance_choice_is_refused() {
    let w = world().await;
    w.cluster(
        "wl1",
        multi(vec![instance("dc-a", 10), instance("dc-b", 11)]),
    )
    .await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    // This process read the machine (finalizer already there, no instance).
    let stale = patch(
        &w,
        "m1",
        serde_json::json!({ "metadata": { "finalizers": [FINALIZER] } }),
    )
    .await;
    // Meanwhile the other process chose dc-b.
    patch(
        &w,
        "m1",
        serde_json::json!({ "spec": { "instance": "dc-b" } }),
    )
    .await;

    w.settled().await;
    let r = reconcile_once(Arc::new(stale), w.ctx.clone()).await;
    assert!(is_conflict(&r), "{r:?}");
    let m = w.get("m1").await.unwrap();
    assert_eq!(m.spec.instance.as_deref(), Some("dc-b"), "not overwritten");
    assert_eq!(m.spec.virtual_machine_id, None);
    assert!(w.vms("dc-a").is_empty() && w.vms("dc-b").is_empty());

    // From fresh state the other process's choice stands.
    let m = w.provision("m1").await;
    assert_eq!(m.spec.instance.as_deref(), Some("dc-b"));
    assert_eq!(w.vms("dc-b").len(), 1);
    assert!(w.vms("dc-a").is_empty());
}

#[tokio::test]
async fn a_stale_vmid_write_is_refused_before_any_clone() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let stale = patch(
        &w,
        "m1",
        serde_json::json!({
            "metadata": { "finalizers": [FINALIZER] },
            "spec": { "instance": "dc-a" }
        }),
    )
    .await;
    // The other process reserved VMID 150 (and is cloning it).
    patch(
        &w,
        "m1",
        serde_json::json!({ "spec": { "virtualMachineID": 150 } }),
    )
    .await;

    w.fulfil_claims().await;
    w.settled().await;
    let r = reconcile_once(Arc::new(stale), w.ctx.clone()).await;
    assert!(
        is_conflict(&r),
        "{r:?}: {:?}",
        w.get("m1").await.and_then(|m| m.status)
    );
    let m = w.get("m1").await.unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(150), "not overwritten");
    let calls = w.pve("dc-a").calls();
    assert_eq!(
        calls.count("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        0,
        "{:?}",
        calls.by_endpoint
    );
    assert_eq!(
        w.runtime().vmids.holder(
            &capmox_controller::clients::Identity::new("cluster:dc-a"),
            100
        ),
        None,
        "the VMID reserved for the refused write is released"
    );

    let m = w.provision("m1").await;
    assert_eq!(m.spec.virtual_machine_id, Some(150));
    assert_eq!(
        w.vms("dc-a").iter().map(|v| v.vmid).collect::<Vec<_>>(),
        vec![150]
    );
}
