//! The running controller under load: 20 machines of two CAPI clusters
//! cloned from one template on one Proxmox cluster at once, with storage
//! lock contention (clones past the lock wait fail and are retried). All
//! succeed, no VMID is used twice although both ProxmoxClusters share the
//! Proxmox cluster (B01), and deleting them all leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/machine.rs"]
mod support;

use std::collections::BTreeSet;
use std::time::Duration;

use capmox_controller::api::ProxmoxMachineSpec;
use kube::api::{DeleteParams, ListParams};
use pve_sim::AllocLock;
use support::*;

#[tokio::test]
async fn twenty_machines_from_one_template_with_lock_contention() {
    let mut sim = fast_sim();
    for c in &mut sim.clusters {
        c.timings.storage_lock_timeout = 1.0;
        for s in &mut c.storages {
            if s.name == "ceph" {
                s.alloc_lock = Some(AllocLock {
                    max_parallel: 1,
                    hold: 10.0,
                });
            }
        }
    }
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    // Two CAPI clusters whose instances are the same Proxmox cluster dc-a.
    w.cluster_mapped(
        "wl1",
        multi(vec![instance("east", 10)]),
        &[("east", "dc-a")],
    )
    .await;
    w.cluster_mapped(
        "wl2",
        multi(vec![instance("west", 11)]),
        &[("west", "dc-a")],
    )
    .await;

    // All machines exist before the controller starts: 20 reconciles at once.
    let mut names = Vec::new();
    for i in 0..20 {
        let cluster = if i % 2 == 0 { "wl1" } else { "wl2" };
        let name = format!("{cluster}-md-{i}");
        w.machine(cluster, &name, ProxmoxMachineSpec::default())
            .await;
        names.push(name);
    }
    let fulfiller = w.spawn_fulfiller();
    let controller = tokio::spawn(capmox_controller::machine::controller_with(
        w.shared.clone(),
        w.ctx.runtime.clone(),
    ));

    let mut done = false;
    for _ in 0..2400 {
        let list = w
            .machines()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        if list.len() == 20 && list.iter().all(|m| provisioned(Some(m))) {
            done = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let list = w
        .machines()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        done,
        "not all provisioned: {:?}",
        list.iter()
            .map(|m| (m.metadata.name.clone(), vm_reason(Some(m))))
            .collect::<Vec<_>>()
    );

    let vmids: BTreeSet<u32> = list
        .iter()
        .map(|m| m.spec.virtual_machine_id.unwrap())
        .collect();
    assert_eq!(vmids.len(), 20, "distinct VMIDs");
    let vms = w.vms("dc-a");
    assert_eq!(vms.len(), 20);
    for m in &list {
        let vm = w
            .pve("dc-a")
            .vm(m.spec.virtual_machine_id.unwrap())
            .unwrap();
        assert_eq!(
            vm.name, m.metadata.name,
            "each VM carries its own machine's name"
        );
    }
    // There was contention, and it was retried.
    let failed_clones = w
        .pve("dc-a")
        .tasks()
        .into_iter()
        .filter(|t| t.kind == "qmclone" && t.exitstatus.as_deref().is_some_and(|e| e != "OK"))
        .count();
    assert!(
        failed_clones > 0,
        "the storage lock should have timed out some clones"
    );
    assert!(w.isos("dc-a").is_empty());

    for n in &names {
        w.machines()
            .delete(n, &DeleteParams::default())
            .await
            .unwrap();
    }
    let mut gone = false;
    for _ in 0..2400 {
        if w.machines()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
        {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        gone,
        "machines left: {:?}",
        w.machines()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .iter()
            .map(|m| (m.metadata.name.clone(), vm_reason(Some(m))))
            .collect::<Vec<_>>()
    );
    assert!(w.vms("dc-a").is_empty());
    assert!(
        w.claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert!(w.isos("dc-a").is_empty());
    fulfiller.abort();
    w.shutdown.shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(5), controller).await;
}
