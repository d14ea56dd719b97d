//! Finding a machine's VM (docs/field-cases.md B41): from its recorded
//! (instance, VMID), with `/cluster/resources` and that VM's own config —
//! never by reading other VMs' configs. An offline node elsewhere (with a
//! template on it that answers 595) costs the machine nothing; with its own
//! node offline nothing is re-created. (The case also expects a condition
//! naming the offline node; a provisioned machine does not read its VM on
//! every reconcile, so it does not notice yet — not covered here.)
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use pve_sim::{Fault, FaultKind};
use support::*;

/// Every call routed to `node` fails as an unreachable node does (595);
/// the rule's `fired` counts them.
fn unreachable(node: &str) -> Fault {
    Fault {
        method: None,
        path: None,
        node: Some(node.into()),
        probability: 1.0,
        count: None,
        kind: FaultKind::NodeUnreachable,
    }
}

fn fired(w: &World, id: pve_sim::FaultId) -> u64 {
    w.pve("dc-a")
        .faults()
        .iter()
        .find(|f| f.id == id)
        .map_or(0, |f| f.fired)
}

#[tokio::test]
async fn b41_an_offline_node_elsewhere_is_never_asked_and_the_own_node_offline_recreates_nothing() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w.provision("m1").await;
    let vmid = m.spec.virtual_machine_id.unwrap();
    let own = w.pve("dc-a").vm(vmid).unwrap().node;
    let other = w
        .pve("dc-a")
        .nodes()
        .into_iter()
        .map(|n| n.name)
        .find(|n| *n != own)
        .unwrap();
    // A template on another node, which goes offline: its config answers 595.
    w.pve("dc-a")
        .create_vm(
            serde_json::from_value(serde_json::json!({
                "vmid": 9050, "name": "old-template", "node": other, "storage": "ceph",
                "tags": "capmox;ubuntu-20.04",
            }))
            .unwrap(),
            true,
        )
        .unwrap();
    assert!(w.pve("dc-a").set_node_online(&other, false));
    let elsewhere = w.pve("dc-a").add_fault(unreachable(&other));
    let configs_before = w
        .pve("dc-a")
        .calls()
        .count("GET", "/nodes/{node}/qemu/{vmid}/config");
    for _ in 0..5 {
        w.reconcile("m1").await.unwrap().unwrap();
    }
    let m = w.get("m1").await.unwrap();
    assert_eq!(condition(&m, "Ready").unwrap().0, "True", "{:?}", m.status);
    assert_eq!(fired(&w, elsewhere), 0, "no request went to {other}");
    let configs = w
        .pve("dc-a")
        .calls()
        .count("GET", "/nodes/{node}/qemu/{vmid}/config")
        - configs_before;
    assert!(
        configs <= 5,
        "at most the machine's own config per reconcile: {configs} reads in 5 reconciles"
    );

    // Its own node offline: it waits, naming the node; nothing is re-created.
    assert!(w.pve("dc-a").set_node_online(&own, false));
    let own_fault = w.pve("dc-a").add_fault(unreachable(&own));
    let clones = || {
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone")
    };
    let clones_before = clones();
    for _ in 0..3 {
        let _ = w.reconcile("m1").await.unwrap();
    }
    let m = w.get("m1").await.unwrap();
    assert_eq!(clones(), clones_before, "nothing re-created");
    assert_eq!(w.vms("dc-a").len(), 1);
    assert_eq!(m.spec.virtual_machine_id, Some(vmid));
    assert_eq!(fired(&w, elsewhere), 0, "still nothing to {other}");

    // Back online: ready again, the same VM.
    w.pve("dc-a").remove_fault(own_fault);
    assert!(w.pve("dc-a").set_node_online(&own, true));
    let m = w
        .drive("m1", 50, |m| {
            m.and_then(|m| condition(m, "Ready"))
                .is_some_and(|c| c.0 == "True")
        })
        .await
        .unwrap();
    assert_eq!(m.spec.virtual_machine_id, Some(vmid));
    assert_eq!(w.vms("dc-a").len(), 1);
}
