//! `capmox_machines{instance, phase}` ("machines by instance and phase",
//! bounded labels) follows the machines the machine reconciler drives: the
//! ProxmoxCluster reconciler recounts them from a fresh list on every
//! machine change (it watches ProxmoxMachine metadata), so each machine is
//! counted once, in its current phase.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::{ProxmoxCluster, ProxmoxMachineSpec};
use capmox_controller::capi::Cluster;
use capmox_controller::capi::ipam::InClusterIPPool;
use capmox_controller::cluster::{ClusterContext, reconcile_once};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Resource};
use support::*;

/// One pass of the ProxmoxCluster reconciler, then the `/metrics` text.
async fn metrics_after_cluster_reconcile(w: &World, cctx: &ClusterContext) -> String {
    let pc = Api::<ProxmoxCluster>::namespaced(w.client.clone(), NS)
        .get("wl1")
        .await
        .unwrap();
    reconcile_once(&pc, cctx).await.unwrap();
    w.shared.metrics.encode()
}

fn has(text: &str, line: &str) {
    assert!(text.contains(line), "missing {line:?} in\n{text}");
}

#[tokio::test]
async fn machines_by_instance_and_phase_follow_the_machine() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    // CAPI makes the Cluster the ProxmoxCluster's owner.
    let cluster = Api::<Cluster>::namespaced(w.client.clone(), NS)
        .get("wl1")
        .await
        .unwrap();
    let owner = cluster.controller_owner_ref(&()).unwrap();
    Api::<ProxmoxCluster>::namespaced(w.client.clone(), NS)
        .patch(
            "wl1",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "metadata": { "ownerReferences": [owner] } })),
        )
        .await
        .unwrap();
    // The ProxmoxCluster reconciler owns the IP pools it records.
    let pc = Api::<ProxmoxCluster>::namespaced(w.client.clone(), NS)
        .get("wl1")
        .await
        .unwrap();
    Api::<InClusterIPPool>::namespaced(w.client.clone(), NS)
        .patch(
            "wl1-dc-a-ipv4",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "metadata": { "ownerReferences": [pc.controller_owner_ref(&()).unwrap()] }
            })),
        )
        .await
        .unwrap();
    let cctx = ClusterContext::new(w.shared.clone(), w.ctx.stores.clone());
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;

    let text = metrics_after_cluster_reconcile(&w, &cctx).await;
    has(&text, "# TYPE capmox_machines gauge");
    has(
        &text,
        "capmox_machines{instance=\"none\",phase=\"Provisioning\"} 1",
    );

    w.provision("m1").await;
    let text = metrics_after_cluster_reconcile(&w, &cctx).await;
    has(
        &text,
        "capmox_machines{instance=\"dc-a\",phase=\"Provisioned\"} 1",
    );
    has(
        &text,
        "capmox_machines{instance=\"none\",phase=\"Provisioning\"} 0",
    );

    // Deleting: the finalizer holds the object while the VM goes.
    w.machines()
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    let text = metrics_after_cluster_reconcile(&w, &cctx).await;
    has(
        &text,
        "capmox_machines{instance=\"dc-a\",phase=\"Deleting\"} 1",
    );
    has(
        &text,
        "capmox_machines{instance=\"dc-a\",phase=\"Provisioned\"} 0",
    );

    w.drive("m1", 200, |m| m.is_none()).await;
    let text = metrics_after_cluster_reconcile(&w, &cctx).await;
    has(
        &text,
        "capmox_machines{instance=\"dc-a\",phase=\"Deleting\"} 0",
    );
    let total: i64 = text
        .lines()
        .filter(|l| l.starts_with("capmox_machines{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<i64>().unwrap())
        .sum();
    assert_eq!(total, 0, "{text}");
}
