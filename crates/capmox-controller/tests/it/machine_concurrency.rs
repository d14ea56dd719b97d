//! The running controller under load: 20 machines of two CAPI clusters
//! cloned from one template on one Proxmox cluster at once, with storage
//! lock contention (clones past the lock wait fail and are retried). All
//! succeed, no VMID is used twice although both ProxmoxClusters share the
//! Proxmox cluster (B01), and deleting them all leaves nothing behind.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use capmox_controller::api::{ProxmoxMachine, ProxmoxMachineSpec};
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use pve_sim::AllocLock;
use support::*;

/// How long the controller may take to provision, or to delete, all 20
/// machines (alone this takes a few seconds; on a loaded 2-core CI runner
/// far longer).
const PATIENCE: Duration = Duration::from_secs(120);

/// Polls the machines until `done` holds for the list or [`PATIENCE`]
/// passed; answers whether it held.
async fn wait_for(w: &World, done: impl Fn(&[ProxmoxMachine]) -> bool) -> bool {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let list = w
            .machines()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        if done(&list) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The fulfiller and the machine controller, running.
struct Running {
    fulfiller: tokio::task::JoinHandle<()>,
    controller: tokio::task::JoinHandle<()>,
}

impl Running {
    fn start(w: &World) -> Running {
        Running {
            fulfiller: w.spawn_fulfiller(),
            controller: {
                let (stores, writers) = capmox_controller::stores::Stores::new();
                let ctx = std::sync::Arc::new(capmox_controller::machine::Context {
                    shared: w.shared.clone(),
                    runtime: w.ctx.runtime.clone(),
                    stores,
                });
                tokio::spawn(capmox_controller::machine::controller::run(ctx, writers))
            },
        }
    }

    async fn stop(self, w: &World) {
        self.fulfiller.abort();
        w.shutdown.shutdown();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.controller).await;
    }
}

/// Waits until exactly `n` machines exist, all provisioned; fails with
/// [`explain`] after [`PATIENCE`].
async fn all_provisioned(w: &World, n: usize) {
    let done = wait_for(w, |list| {
        list.len() == n && list.iter().all(|m| provisioned(Some(m)))
    })
    .await;
    assert!(
        done,
        "not all provisioned after {PATIENCE:?}:{}",
        explain(w).await
    );
}

/// Everything that explains a machine that did not get there: its
/// `VirtualMachineProvisioned` condition (reason and full message),
/// `status.taskRef`, finalizers, deletion, and its VM as pve-sim sees it.
async fn explain(w: &World) -> String {
    let list = w
        .machines()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    let mut out = String::new();
    for m in list
        .iter()
        .filter(|m| m.metadata.deletion_timestamp.is_some() || !provisioned(Some(m)))
    {
        let vm = m
            .spec
            .virtual_machine_id
            .and_then(|v| w.pve("dc-a").vm(v))
            .map(|v| {
                format!(
                    "VM {} on {}: {} lock={:?} tags={:?}",
                    v.vmid, v.node, v.status, v.lock, v.tags
                )
            })
            .unwrap_or_else(|| "no VM".into());
        out.push_str(&format!(
            "\n- {} (vmid {:?}, deleting {}): VirtualMachineProvisioned={:?}; taskRef={:?}; finalizers={:?}; {vm}",
            m.name_any(),
            m.spec.virtual_machine_id,
            m.metadata.deletion_timestamp.is_some(),
            condition(m, "VirtualMachineProvisioned"),
            m.status.as_ref().and_then(|s| s.task_ref.clone()),
            m.finalizers(),
        ));
    }
    let running: Vec<String> = w
        .pve("dc-a")
        .tasks()
        .into_iter()
        .filter(|t| t.exitstatus.is_none())
        .map(|t| format!("{} {}", t.kind, t.id))
        .collect();
    out.push_str(&format!("\ntasks still running in dc-a: {running:?}"));
    out
}

#[tokio::test]
async fn twenty_machines_from_one_template_with_lock_contention() {
    let mut sim = fast_sim();
    for c in &mut sim.clusters {
        c.timings.storage_lock_timeout = 1.0;
        for s in &mut c.storages {
            if s.name == "ceph" {
                // Each allocation holds the lock for 0.1 s of real time
                // (`SCALE`) and a waiter gives up after 5 ms: clones the
                // window lets out together overlap even when a loaded
                // machine spreads their requests over 50 ms.
                s.alloc_lock = Some(AllocLock {
                    max_parallel: 1,
                    hold: 20.0,
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
    let running = Running::start(&w);

    all_provisioned(&w, 20).await;
    let list = w
        .machines()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;

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
    let gone = wait_for(&w, <[ProxmoxMachine]>::is_empty).await;
    assert!(
        gone,
        "machines left after {PATIENCE:?}:{}",
        explain(&w).await
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
    running.stop(&w).await;
}

/// Eight machines, two clone slots per template: the six refused a slot wait
/// in line and are woken when a clone ends — their own re-check is set far
/// beyond the test's patience, so only the wakes can get them through.
#[tokio::test]
async fn machines_in_line_for_a_clone_slot_are_woken_when_one_frees() {
    let w = world_with(WorldOptions {
        machine: capmox_controller::machine::MachineOptions {
            clone_concurrency: 2,
            // 10^6 s scaled by 0.005: 5,000 s real, far past PATIENCE.
            slot_recheck: Duration::from_secs(1_000_000),
            ..Default::default()
        },
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    for i in 0..8 {
        w.machine("wl1", &format!("m{i}"), ProxmoxMachineSpec::default())
            .await;
    }
    let running = Running::start(&w);
    all_provisioned(&w, 8).await;
    let clones = w
        .pve("dc-a")
        .tasks()
        .into_iter()
        .filter(|t| t.kind == "qmclone")
        .count();
    assert_eq!(clones, 8, "one clone per machine");
    running.stop(&w).await;
}

/// A bootstrap Secret that appears after its Machine names it wakes that
/// machine — and only it: waiting machines do not re-check on their own
/// here (resync far beyond the test's patience), and a machine whose
/// Secret never comes keeps waiting.
#[tokio::test]
async fn a_new_bootstrap_secret_wakes_the_machine_that_uses_it() {
    let w = world_with(WorldOptions {
        machine: capmox_controller::machine::MachineOptions {
            resync: Duration::from_secs(1_000_000),
            ..Default::default()
        },
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    for name in ["early", "late", "never"] {
        w.machine_with(
            "wl1",
            name,
            ProxmoxMachineSpec::default(),
            None,
            false,
            name == "early",
        )
        .await;
    }
    let running = Running::start(&w);
    let waiting = |m: &ProxmoxMachine| {
        condition(m, "VirtualMachineProvisioned")
            .is_some_and(|(_, reason, _)| reason == "WaitingForBootstrapData")
    };
    let by_name =
        |list: &[ProxmoxMachine], n: &str| list.iter().find(|m| m.name_any() == n).cloned();
    let settled = wait_for(&w, |list| {
        provisioned(by_name(list, "early").as_ref())
            && by_name(list, "late").is_some_and(|m| waiting(&m))
            && by_name(list, "never").is_some_and(|m| waiting(&m))
    })
    .await;
    assert!(
        settled,
        "early provisioned, the others waiting:{}",
        explain(&w).await
    );
    w.bootstrap_secret("wl1", "late").await;
    let woken = wait_for(&w, |list| provisioned(by_name(list, "late").as_ref())).await;
    assert!(
        woken,
        "late not provisioned after its Secret appeared:{}",
        explain(&w).await
    );
    let never = w.get("never").await.unwrap();
    assert!(waiting(&never), "never still waits for its bootstrap data");
    running.stop(&w).await;
}
