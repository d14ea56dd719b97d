//! Instance placement over the three simulated Proxmox clusters: spread in
//! MultiInstance mode, failure domains, pins, unhealthy and unknown
//! instances, control-plane eligibility, VMIDs per instance (B03).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use kube::ResourceExt;
use support::*;

fn three() -> capmox_controller::api::ProxmoxClusterSpec {
    multi(vec![
        instance("dc-a", 10),
        instance("dc-b", 20),
        instance("dc-c", 30),
    ])
}

fn has_instance(m: Option<&capmox_controller::api::ProxmoxMachine>) -> bool {
    m.is_some_and(|m| m.spec.instance.is_some())
}

#[tokio::test]
async fn multi_instance_spreads_and_vmids_are_per_instance() {
    let w = world().await;
    w.cluster("wl1", three()).await;
    let mut chosen = Vec::new();
    for i in 0..3 {
        let name = format!("wl1-md-{i}");
        w.machine("wl1", &name, ProxmoxMachineSpec::default()).await;
        let m = w.drive(&name, 20, has_instance).await.unwrap();
        chosen.push(m.spec.instance.unwrap());
    }
    // All empty: dc-a has the most free memory (4 nodes of 128 GiB vs 3);
    // then dc-b and dc-c tie on memory and go by name.
    assert_eq!(chosen, vec!["dc-a", "dc-b", "dc-c"]);
    for i in 0..3 {
        w.provision(&format!("wl1-md-{i}")).await;
    }
    // Each Proxmox cluster has its own VMID space: VM 100 everywhere (B03).
    for (i, dc) in ["dc-a", "dc-b", "dc-c"].iter().enumerate() {
        let m = w.get(&format!("wl1-md-{i}")).await.unwrap();
        assert_eq!(m.spec.virtual_machine_id, Some(100));
        let vm = w.pve(dc).vm(100).unwrap();
        assert_eq!(vm.name.as_deref(), Some(format!("wl1-md-{i}").as_str()));
        assert_eq!(m.status.unwrap().failure_domain.as_deref(), Some(*dc));
        assert_eq!(w.vms(dc).len(), 1, "{dc}");
    }
    // The next one goes to the least loaded again (all have one; dc-a has
    // the most free memory).
    w.machine("wl1", "wl1-md-3", ProxmoxMachineSpec::default())
        .await;
    let m = w.drive("wl1-md-3", 20, has_instance).await.unwrap();
    assert_eq!(m.spec.instance.as_deref(), Some("dc-a"));
}

#[tokio::test]
async fn failure_domain_and_pins() {
    let w = world().await;
    w.cluster("wl1", three()).await;
    // KubeadmControlPlane / MachineDeployment failure domain.
    w.machine_with(
        "wl1",
        "cp-0",
        ProxmoxMachineSpec::default(),
        Some("dc-c"),
        true,
        true,
    )
    .await;
    let m = w.drive("cp-0", 20, has_instance).await.unwrap();
    assert_eq!(m.spec.instance.as_deref(), Some("dc-c"));
    assert_eq!(
        condition(&m, "InstanceSelected").unwrap().1,
        "FailureDomain"
    );

    // A pin that contradicts the failure domain: a condition, no VM anywhere.
    let pinned = ProxmoxMachineSpec {
        instance: Some("dc-a".into()),
        ..ProxmoxMachineSpec::default()
    };
    w.machine_with("wl1", "odd", pinned, Some("dc-b"), false, true)
        .await;
    let m = w
        .drive("odd", 5, |m| {
            m.is_some_and(|m| condition(m, "InstanceSelected").is_some())
        })
        .await
        .unwrap();
    let c = condition(&m, "InstanceSelected").unwrap();
    assert_eq!(
        (c.0.as_str(), c.1.as_str()),
        ("False", "FailureDomainMismatch")
    );
    assert_eq!(
        c.2,
        "spec.instance is \"dc-a\" but the owner Machine's failureDomain is \"dc-b\""
    );
    assert_eq!(m.spec.virtual_machine_id, None);
    for dc in ["dc-a", "dc-b"] {
        assert_eq!(
            w.pve(dc)
                .calls()
                .count("POST", "/nodes/{node}/qemu/{vmid}/clone"),
            0
        );
    }

    // A pin that agrees is followed.
    let pinned = ProxmoxMachineSpec {
        instance: Some("dc-b".into()),
        ..ProxmoxMachineSpec::default()
    };
    w.machine_with("wl1", "pinned", pinned, Some("dc-b"), false, true)
        .await;
    let m = w.provision("pinned").await;
    assert_eq!(m.status.unwrap().failure_domain.as_deref(), Some("dc-b"));
    assert_eq!(
        condition(&w.get("pinned").await.unwrap(), "InstanceSelected")
            .unwrap()
            .0,
        "True"
    );
}

#[tokio::test]
async fn unknown_and_unhealthy_instances_are_conditions() {
    let w = world().await;
    w.cluster("wl1", three()).await;
    w.machine_with(
        "wl1",
        "fd-x",
        ProxmoxMachineSpec::default(),
        Some("dc-x"),
        false,
        true,
    )
    .await;
    let m = w
        .drive("fd-x", 5, |m| {
            m.is_some_and(|m| condition(m, "InstanceSelected").is_some())
        })
        .await
        .unwrap();
    let c = condition(&m, "InstanceSelected").unwrap();
    assert_eq!(c.1, "UnknownFailureDomain");
    assert_eq!(
        c.2,
        "the owner Machine's failureDomain \"dc-x\" is not an instance of the ProxmoxCluster (known: dc-a, dc-b, dc-c)"
    );

    // dc-b is unhealthy: a machine pinned there by its failure domain waits.
    w.set_instance_ready("wl1", "dc-b", false).await;
    w.machine_with(
        "wl1",
        "fd-b",
        ProxmoxMachineSpec::default(),
        Some("dc-b"),
        false,
        true,
    )
    .await;
    let m = w
        .drive("fd-b", 5, |m| {
            m.is_some_and(|m| condition(m, "InstanceSelected").is_some())
        })
        .await
        .unwrap();
    let c = condition(&m, "InstanceSelected").unwrap();
    assert_eq!((c.0.as_str(), c.1.as_str()), ("False", "InstanceNotReady"));
    assert_eq!(
        c.2,
        "instance \"dc-b\" is not ready: 401 authentication failure"
    );
    assert!(w.vms("dc-b").is_empty());
    // Without a failure domain, unhealthy dc-b is skipped.
    w.machine("wl1", "free", ProxmoxMachineSpec::default())
        .await;
    w.drive("free", 20, has_instance).await;
    w.machine("wl1", "free2", ProxmoxMachineSpec::default())
        .await;
    w.machine("wl1", "free3", ProxmoxMachineSpec::default())
        .await;
    let a = w.drive("free2", 20, has_instance).await.unwrap();
    let b = w.drive("free3", 20, has_instance).await.unwrap();
    let mut got = vec![a.spec.instance.unwrap(), b.spec.instance.unwrap()];
    got.sort();
    assert!(!got.contains(&"dc-b".to_string()), "{got:?}");
    // It recovers: the waiting machine goes on.
    w.set_instance_ready("wl1", "dc-b", true).await;
    let m = w.provision("fd-b").await;
    assert_eq!(m.spec.instance.as_deref(), Some("dc-b"));
}

#[tokio::test]
async fn control_plane_machines_skip_non_control_plane_instances() {
    let w = world().await;
    let mut a = instance("dc-a", 10);
    a.control_plane = Some(false);
    w.cluster("wl1", multi(vec![a, instance("dc-b", 20)])).await;
    // Even though dc-a has more free memory, a control-plane machine goes to dc-b.
    w.machine_with(
        "wl1",
        "cp-0",
        ProxmoxMachineSpec::default(),
        None,
        true,
        true,
    )
    .await;
    let m = w.drive("cp-0", 20, has_instance).await.unwrap();
    assert_eq!(m.spec.instance.as_deref(), Some("dc-b"));
    // A worker still may go to dc-a.
    w.machine_with(
        "wl1",
        "w-0",
        ProxmoxMachineSpec::default(),
        None,
        false,
        true,
    )
    .await;
    let m = w.drive("w-0", 20, has_instance).await.unwrap();
    assert_eq!(m.spec.instance.as_deref(), Some("dc-a"));
}

#[tokio::test]
async fn preconditions_wait_with_a_reason() {
    let w = world().await;
    w.cluster("wl1", three()).await;
    // No bootstrap Secret yet (workers wait for the control plane).
    w.machine_with(
        "wl1",
        "early",
        ProxmoxMachineSpec::default(),
        None,
        false,
        false,
    )
    .await;
    let m = w
        .drive("early", 5, |m| vm_reason(m) == "WaitingForBootstrapData")
        .await
        .unwrap();
    assert_eq!(
        m.spec.instance, None,
        "nothing chosen before the data is there"
    );
    assert!(
        m.finalizers()
            .iter()
            .any(|f| f == "proxmoxmachine.infrastructure.cluster.x-k8s.io")
    );
    w.bootstrap_secret("wl1", "early").await;
    w.provision("early").await;
}

/// docs/field-cases.md B37 against pve-sim: `fast-b` exists only on pve-a2,
/// the template's shared `ceph` cannot be activated on pve-a3. A machine
/// with a data disk on `fast-b` goes to pve-a2; one confined to the other
/// nodes gets a condition naming each node and what it lacks, and no clone
/// is issued for it; one without `fast-b` avoids pve-a3.
#[tokio::test]
async fn b37_nodes_without_the_needed_storage_are_not_candidates() {
    use capmox_controller::api::machine::{AdditionalVolume, Disks};
    let mut sim = fast_sim();
    let dc = sim.clusters.iter_mut().find(|c| c.name == "dc-a").unwrap();
    let mut fast = dc
        .storages
        .iter()
        .find(|s| s.name == "local-lvm")
        .unwrap()
        .clone();
    fast.name = "fast-b".into();
    fast.nodes = Some(vec!["pve-a2".into()]);
    dc.storages.push(fast);
    dc.storages
        .iter_mut()
        .find(|s| s.name == "ceph")
        .unwrap()
        .inactive_on = vec!["pve-a3".into()];
    let w = world_with(WorldOptions {
        sim,
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let data_on_fast_b = |allowed: &[&str]| ProxmoxMachineSpec {
        allowed_nodes: allowed.iter().map(|n| n.to_string()).collect(),
        disks: Some(Disks {
            boot_volume: None,
            additional_volumes: vec![AdditionalVolume {
                disk: "scsi1".into(),
                size_gb: 5,
                storage: Some("fast-b".into()),
                ..AdditionalVolume::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m3", data_on_fast_b(&["pve-a1", "pve-a3"]))
        .await;
    let m = w
        .drive("m3", 10, |m| vm_reason(m) == "StorageNotAvailable")
        .await
        .unwrap();
    assert_eq!(
        without_retry(&condition(&m, "VirtualMachineProvisioned").unwrap().2),
        "no node has every storage this VM needs enabled and active: \
         pve-a1: fast-b (disks.additionalVolumes[0] (scsi1)) is not enabled there; \
         pve-a3: ceph (template 9000 scsi0, template 9000 efidisk0) is not active there (status unknown); \
         fast-b (disks.additionalVolumes[0] (scsi1)) is not enabled there"
    );
    assert_eq!(m.spec.virtual_machine_id, None, "no VMID reserved");
    let clones = || {
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone")
    };
    assert_eq!(clones(), 0);

    w.machine("wl1", "m1", data_on_fast_b(&[])).await;
    let m1 = w.provision("m1").await;
    assert_eq!(
        m1.status.as_ref().unwrap().proxmox_node.as_deref(),
        Some("pve-a2")
    );
    let vm = w
        .pve("dc-a")
        .vm(m1.spec.virtual_machine_id.unwrap())
        .unwrap();
    assert!(vm.config["scsi1"].starts_with("fast-b:"), "{:?}", vm.config);

    w.machine(
        "wl1",
        "m2",
        ProxmoxMachineSpec {
            allowed_nodes: vec!["pve-a3".into(), "pve-a1".into()],
            ..ProxmoxMachineSpec::default()
        },
    )
    .await;
    let m2 = w.provision("m2").await;
    assert_eq!(
        m2.status.as_ref().unwrap().proxmox_node.as_deref(),
        Some("pve-a1"),
        "pve-a3 cannot activate ceph"
    );
    assert_eq!(clones(), 2, "m3 never cloned");
}
