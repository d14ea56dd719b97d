//! Resource pools (docs/field-cases.md B34) against pve-sim and kube-sim:
//! a token whose rights are granted on `/pool/k8s` only (plus `Sys.*` and
//! `SDN.Use` on `/`). With the instance's pool the VM is cloned into the
//! pool (`pool=` in the clone request), found there after the clone, and
//! provisioned; deletion leaves the pool without it. The same token
//! without a pool is refused by Proxmox at the clone: the condition names
//! the privilege and the path, and the clone is retried with growing
//! backoff, not in a hot loop.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use support::*;

const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";

/// dc-a's token holds its VM and datastore rights on `/pool/k8s` only.
fn pool_scoped() -> WorldOptions {
    let mut sim = fast_sim();
    crate::support::scope_to_pool(sim.cluster_mut("dc-a").unwrap(), "k8s");
    WorldOptions {
        sim,
        ..WorldOptions::default()
    }
}

fn pinned() -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        instance: Some("dc-a".into()),
        ..ProxmoxMachineSpec::default()
    }
}

#[tokio::test]
async fn a_pool_scoped_token_provisions_into_its_pool() {
    let w = world_with(pool_scoped()).await;
    let dc_a = capmox_controller::api::InstanceSpec {
        pool: Some("k8s".into()),
        ..instance("dc-a", 10)
    };
    w.cluster("wl1", multi(vec![dc_a])).await;
    w.machine("wl1", "m1", pinned()).await;
    let m = w.provision("m1").await;
    let vmid = m.spec.virtual_machine_id.unwrap();
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", CLONE), 1, "{:?}", calls.by_endpoint);
    let members = w.pve("dc-a").pool_members("k8s").unwrap();
    assert!(members.contains(&vmid), "{members:?}");
    // Read before the clone and once after it; never written.
    assert_eq!(calls.count("GET", "/pools"), 2, "{:?}", calls.by_endpoint);
    assert_eq!(calls.count("PUT", "/pools"), 0);
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(vmid).is_none());
    assert!(!w.pve("dc-a").pool_members("k8s").unwrap().contains(&vmid));
}

#[tokio::test]
async fn without_the_pool_the_clone_is_refused_naming_privilege_and_path() {
    let w = world_with(pool_scoped()).await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", pinned()).await;
    let m = w
        .drive("m1", 40, |m| {
            m.is_some_and(|m| vm_reason(Some(m)) == "CloneFailed")
        })
        .await
        .expect("the clone is refused");
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    assert!(message.contains("VM.Allocate"), "{message}");
    assert!(message.contains(&format!("/vms/{vmid}")), "{message}");
    // Forty more reconciles at once: the growing backoff lets few through.
    for _ in 0..40 {
        let _ = w.reconcile("m1").await;
    }
    let clones = w.pve("dc-a").calls().count("POST", CLONE);
    assert!((1..=3).contains(&clones), "clone calls: {clones}");
    assert!(w.pve("dc-a").vms().iter().all(|v| v.vmid != vmid));
}
