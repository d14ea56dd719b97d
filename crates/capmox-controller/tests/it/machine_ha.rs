//! Proxmox HA per instance (docs/field-cases.md B33) against pve-sim and
//! kube-sim: a PVE 8 instance with an HA group and a PVE 9 instance with a
//! node-affinity rule. Each provisioned VM becomes an HA resource (recorded
//! first), a VM moved to another node during and after provisioning is
//! followed without a second clone, and deletion leaves no HA resource (and
//! never deletes the operator's rule).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::{HaSettings, ProxmoxMachine, ProxmoxMachineSpec};
use pve_sim::{HaGroupConfig, HaRuleConfig};
use support::*;

const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";

fn options() -> WorldOptions {
    let mut sim = fast_sim()
        .with_pve_version("dc-a", "8.4.1")
        .with_timings(|t| {
            t.ha_delay = 1.0;
            t.migrate = 2.0;
        });
    let a = sim.cluster_mut("dc-a").unwrap();
    a.ha_groups.push(HaGroupConfig {
        group: "capmox".into(),
        nodes: (1..=4).map(|i| format!("pve-a{i}")).collect(),
        restricted: false,
    });
    let b = sim.cluster_mut("dc-b").unwrap();
    // The operator's rule names a VM that is no HA resource any more.
    b.ha_rules.push(HaRuleConfig {
        rule: "capmox".into(),
        nodes: (1..=3).map(|i| format!("pve-b{i}")).collect(),
        strict: false,
        resources: vec![9999],
    });
    WorldOptions {
        sim,
        ..WorldOptions::default()
    }
}

fn with_ha(name: &str, subnet: u8) -> capmox_controller::api::InstanceSpec {
    capmox_controller::api::InstanceSpec {
        ha: Some(HaSettings {
            group: Some("capmox".into()),
            rule: Some("capmox".into()),
            enabled: None,
        }),
        ..instance(name, subnet)
    }
}

fn pinned(instance: &str) -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        instance: Some(instance.into()),
        ..ProxmoxMachineSpec::default()
    }
}

fn ha_recorded(m: Option<&ProxmoxMachine>) -> bool {
    m.and_then(|m| m.status.as_ref())
        .is_some_and(|s| s.ha_resource.is_some())
}

/// The ProxmoxCluster's status says dc-a runs PVE 8 (as the cluster
/// reconciler's probe would write from `GET /version`).
async fn dc_a_is_pve8(w: &World) {
    let pcs: kube::Api<capmox_controller::api::ProxmoxCluster> =
        kube::Api::namespaced(w.client.clone(), "default");
    let mut st = pcs.get("wl1").await.unwrap().status.unwrap();
    for i in &mut st.instances {
        if i.name == "dc-a" {
            i.version = Some("8.4.1".into());
        }
    }
    w.set_cluster_status("wl1", &st).await;
}

#[tokio::test]
async fn ha_resources_per_version_followed_when_moved_removed_on_deletion() {
    let w = world_with(options()).await;
    w.cluster("wl1", multi(vec![with_ha("dc-a", 10), with_ha("dc-b", 20)]))
        .await;
    dc_a_is_pve8(&w).await;
    w.machine("wl1", "m-a", pinned("dc-a")).await;
    w.machine("wl1", "m-b", pinned("dc-b")).await;

    // dc-a: moved by an operator while it is being provisioned.
    let mut moved_during = None;
    for _ in 0..200 {
        let m = w.get("m-a").await.unwrap();
        if provisioned(Some(&m)) {
            break;
        }
        if moved_during.is_none()
            && let Some(vmid) = m.spec.virtual_machine_id
            && let Some(vm) = w.pve("dc-a").vm(vmid)
            && vm.lock.is_none()
        {
            let target = if vm.node == "pve-a4" {
                "pve-a3"
            } else {
                "pve-a4"
            };
            if w.pve("dc-a").migrate_vm(vmid, target).await.is_ok() {
                moved_during = Some(target.to_string());
            }
        }
        w.fulfil_claims().await;
        let _ = w.reconcile("m-a").await;
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let moved_during = moved_during.expect("the VM was moved during provisioning");
    let a = w.drive("m-a", 200, ha_recorded).await.unwrap();
    let vmid_a = a.spec.virtual_machine_id.unwrap();
    let b = w.drive("m-b", 300, ha_recorded).await.unwrap();
    let vmid_b = b.spec.virtual_machine_id.unwrap();
    assert_eq!(
        a.status.as_ref().unwrap().proxmox_node.as_deref(),
        Some(moved_during.as_str())
    );

    // PVE 8: the resource is in the group; PVE 9: no group, listed in the
    // rule, the stale entry dropped.
    let ha_a = w.pve("dc-a").ha_resources();
    assert_eq!(ha_a.len(), 1, "{ha_a:?}");
    assert_eq!(ha_a[0].vmid, vmid_a);
    assert_eq!(ha_a[0].group.as_deref(), Some("capmox"));
    assert_eq!(a.status.unwrap().ha_resource, Some(format!("vm:{vmid_a}")));
    let ha_b = w.pve("dc-b").ha_resources();
    assert_eq!(ha_b.len(), 1, "{ha_b:?}");
    assert_eq!((ha_b[0].vmid, ha_b[0].group.as_deref()), (vmid_b, None));
    assert_eq!(
        w.pve("dc-b").ha_rule_resources("capmox"),
        Some(vec![format!("vm:{vmid_b}")])
    );

    // After provisioning: moved again (as HA recovery or an operator
    // would); the machine follows, nothing is cloned again.
    let node_b = w.pve("dc-b").vm(vmid_b).unwrap().node;
    let target = if node_b == "pve-b3" {
        "pve-b2"
    } else {
        "pve-b3"
    };
    w.pve("dc-b").migrate_vm(vmid_b, target).await.unwrap();
    let b = w
        .drive("m-b", 100, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.proxmox_node.as_deref())
                == Some(target)
        })
        .await
        .unwrap();
    assert!(provisioned(Some(&b)));
    assert_eq!(w.pve("dc-a").calls().count("POST", CLONE), 1);
    assert_eq!(w.pve("dc-b").calls().count("POST", CLONE), 1);

    // Deletion: the HA resource goes, the VM goes, the rule stays.
    w.delete_and_drive("m-a").await;
    w.delete_and_drive("m-b").await;
    assert!(w.pve("dc-a").ha_resources().is_empty());
    assert!(w.pve("dc-b").ha_resources().is_empty());
    assert!(w.pve("dc-a").vm(vmid_a).is_none());
    assert!(w.pve("dc-b").vm(vmid_b).is_none());
    assert!(
        w.pve("dc-b").ha_rule_resources("capmox").is_some(),
        "the operator's rule is kept"
    );
}
