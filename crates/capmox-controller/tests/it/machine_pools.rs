//! Resource pools (docs/field-cases.md B34) against pve-sim and kube-sim:
//! a token whose rights are granted on `/pool/k8s` only (plus `Sys.*` and
//! `SDN.Use` on `/`). With the instance's pool the VM is cloned into the
//! pool (`pool=` in the clone request), found there after the clone, and
//! provisioned; deletion leaves the pool without it. The same token
//! without a pool is refused by Proxmox at the clone: the condition names
//! the privilege and the path, and the clone is retried with growing
//! backoff, not in a hot loop. A pool deleted between the read before the
//! clone and the clone itself is reported as `PoolNotFound`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::time::Duration;

use capmox_controller::api::ProxmoxMachineSpec;
use support::*;
use tokio::time::Instant;

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
    // Read before the clone and after it until the first config write (one
    // read per reconcile in between); never written.
    let reads = calls.count("GET", "/pools");
    assert!((2..=4).contains(&reads), "{:?}", calls.by_endpoint);
    assert_eq!(calls.count("PUT", "/pools"), 0);
    w.delete_and_drive("m1").await;
    assert!(w.pve("dc-a").vm(vmid).is_none());
    assert!(!w.pve("dc-a").pool_members("k8s").unwrap().contains(&vmid));
}

/// Ten minutes on tokio's paused clock (as `machine_backoff`): the clone
/// Proxmox refuses is tried with the growing backoff (1 s × 2^(n-1)), about
/// ten times, however often the machine is reconciled in between.
#[tokio::test(start_paused = true)]
async fn without_the_pool_the_clone_is_refused_naming_privilege_and_path() {
    let mut opts = pool_scoped();
    opts.sim = opts.sim.with_time_scale(1.0).with_timings(|t| t.boot = 0.0);
    opts.time_scale = 1.0;
    let w = world_with(opts).await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", pinned()).await;
    let clones = || w.pve("dc-a").calls().count("POST", CLONE);
    let poll = Duration::from_secs(15);
    let start = Instant::now();
    let end = start + Duration::from_secs(600);
    let mut next_poll = start + poll;
    let mut reconciles = 0u32;
    while Instant::now() < end {
        w.fulfil_claims().await;
        let requeue = w.reconcile("m1").await.unwrap().unwrap();
        reconciles += 1;
        let wake = Instant::now() + requeue.unwrap_or(Duration::from_secs(300));
        let next = if next_poll <= wake {
            let at = next_poll;
            next_poll += poll;
            at
        } else {
            wake
        };
        tokio::time::sleep_until(next).await;
    }
    let m = w.get("m1").await.unwrap();
    let (_, reason, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    assert_eq!(reason, "CloneFailed", "{message}");
    assert!(
        message.contains(&format!("VM.Allocate on /vms/{vmid}")),
        "{message}"
    );
    assert!(message.contains("named no pool"), "{message}");
    // 1+2+4+…+256 = 511 s (+ ≤10 % jitter): ten attempts fit in ten minutes.
    let n = clones();
    println!("{reconciles} reconciles, {n} clone calls in 10 simulated minutes");
    assert!((8..=10).contains(&n), "{n} clone calls");
    assert!(reconciles as u64 > 3 * n, "{reconciles} reconciles");
    assert!(w.pve("dc-a").vm(vmid).is_none());
}

/// The pool is read before the clone and deleted before Proxmox handles
/// the clone (held back by a latency fault): Proxmox refuses the clone with
/// `403 Permission check failed (pool 'k8s' does not exist)`. The machine
/// says `PoolNotFound` (naming pool and instance), not a missing
/// privilege; no VM is made, and the pool is read again before any other
/// clone, so none is tried while the pool is missing.
#[tokio::test]
async fn a_pool_deleted_before_the_clone_is_reported_as_not_found() {
    let mut sim = fast_sim();
    sim.cluster_mut("dc-a")
        .unwrap()
        .pools
        .push(pve_sim::PoolConfig {
            poolid: "k8s".into(),
            comment: None,
            members: vec![],
            storage: vec![],
        });
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    let dc_a = capmox_controller::api::InstanceSpec {
        pool: Some("k8s".into()),
        ..instance("dc-a", 10)
    };
    w.cluster("wl1", multi(vec![dc_a])).await;
    w.machine("wl1", "m1", pinned()).await;
    let sim = w.pve("dc-a").clone();
    // 400 simulated seconds: 2 s at the test scale.
    sim.add_fault(pve_sim::Fault {
        method: Some("POST".into()),
        path: Some(CLONE.into()),
        node: None,
        probability: 1.0,
        count: Some(1),
        kind: pve_sim::FaultKind::Latency { seconds: 400.0 },
    });
    let clones = || sim.calls().count("POST", CLONE);
    let drive = async {
        for _ in 0..100 {
            if clones() > 0 {
                return;
            }
            w.fulfil_claims().await;
            let _ = w.reconcile("m1").await;
        }
        panic!("no clone was tried");
    };
    let delete_pool = async {
        // The fault is spent when the clone request arrives.
        while !sim.faults().is_empty() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert!(sim.remove_pool("k8s"));
    };
    tokio::join!(drive, delete_pool);
    let m = w.get("m1").await.unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let (_, reason, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert_eq!(reason, "PoolNotFound", "{message}");
    // The condition names the pool and the instance; the reason code
    // carries the meaning (no wording is matched).
    assert!(
        message.contains("k8s") && message.contains("dc-a"),
        "{message}"
    );
    assert!(sim.vm(vmid).is_none());
    // Later reconciles read the pool first and clone nothing.
    for _ in 0..5 {
        let _ = w.reconcile("m1").await;
    }
    let m = w.get("m1").await.unwrap();
    let (_, reason, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert_eq!(reason, "PoolNotFound", "{message}");
    assert_eq!(clones(), 1);
    assert!(sim.vm(vmid).is_none());
}
