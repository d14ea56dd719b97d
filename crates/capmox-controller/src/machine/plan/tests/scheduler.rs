//! The scheduler's rules, case by case.

use super::*;

const GIB: u64 = 1 << 30;

fn node(name: &str, gib: u64, online: bool) -> NodeFacts {
    NodeFacts {
        name: name.into(),
        online,
        maxmem: gib * GIB,
    }
}

fn vm(vmid: u32, node: &str, gib: Option<u64>, template: bool) -> VmLoad {
    VmLoad {
        vmid,
        node: node.into(),
        maxmem: gib.map(|g| g * GIB),
        template,
    }
}

/// Field case B26: node-a 16 GiB with a 64 GiB template and a 4 GiB VM,
/// node-b 16 GiB with an 8 GiB stopped VM.
fn b26() -> (Vec<NodeFacts>, Vec<VmLoad>) {
    (
        vec![node("node-a", 16, true), node("node-b", 16, true)],
        vec![
            vm(9000, "node-a", Some(64), true),
            vm(201, "node-a", Some(4), false),
            vm(202, "node-b", Some(8), false),
        ],
    )
}

fn req(mib: u64, adjustment: u32) -> Request {
    Request {
        memory: mib << 20,
        machine_nodes: vec!["node-a".into(), "node-b".into()],
        memory_adjustment: adjustment,
        ..Request::default()
    }
}

#[test]
fn b26_templates_do_not_count_and_most_headroom_wins() {
    let (nodes, vms) = b26();
    let p = choose_node(&req(2048, 100), &nodes, &vms, &[]).unwrap();
    assert_eq!(p.node, "node-a");
    assert_eq!(p.memory.free, 12 * i128::from(GIB));
    assert_eq!(p.memory.reserved, 4 * GIB);
}

#[test]
fn b26_too_big_names_each_node() {
    let (nodes, vms) = b26();
    let e = choose_node(&req(20480, 100), &nodes, &vms, &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no node has 20 GiB free for this VM (memoryAdjustment 100%): \
         node-a: capacity 16 GiB (of 16 GiB), reserved 4 GiB, free 12 GiB; \
         node-b: capacity 16 GiB (of 16 GiB), reserved 8 GiB, free 8 GiB"
    );
}

#[test]
fn b26_adjustment_zero_ignores_memory_and_300_overcommits() {
    let (nodes, vms) = b26();
    let p = choose_node(&req(20480, 0), &nodes, &vms, &[]).unwrap();
    assert_eq!(p.node, "node-a");
    let p = choose_node(&req(20480, 300), &nodes, &vms, &[]).unwrap();
    // node-a: 48 − 4 = 44 GiB free; node-b: 48 − 8 = 40 GiB free.
    assert_eq!(p.node, "node-a");
    assert_eq!(p.memory.capacity, 48 * GIB);
}

#[test]
fn pending_vms_count_until_listed_with_memory() {
    let (nodes, mut vms) = b26();
    // This process is cloning a 10 GiB VM 300 onto node-a; Proxmox lists it without maxmem.
    vms.push(vm(300, "node-a", None, false));
    let pending = vec![PendingVm {
        vmid: 300,
        node: "node-a".into(),
        memory: 10 * GIB,
    }];
    let p = choose_node(&req(2048, 100), &nodes, &vms, &pending).unwrap();
    // node-a now has 2 GiB free, node-b 8 GiB.
    assert_eq!(p.node, "node-b");
    // Once listed with maxmem it counts once, not twice.
    vms.pop();
    vms.push(vm(300, "node-a", Some(10), false));
    let m = memory_by_node(&nodes, &vms, &pending, 100);
    assert_eq!(m["node-a"].reserved, 14 * GIB);
}

#[test]
fn spread_beats_memory() {
    let (nodes, vms) = b26();
    let mut r = req(2048, 100);
    r.cluster_machines.insert("node-a".into(), 2);
    r.cluster_machines.insert("node-b".into(), 1);
    assert_eq!(choose_node(&r, &nodes, &vms, &[]).unwrap().node, "node-b");
}

#[test]
fn filters_and_their_messages() {
    let nodes = vec![
        node("a1", 64, true),
        node("a2", 64, false),
        node("a3", 64, true),
    ];
    let mut r = req(1024, 100);
    r.machine_nodes.clear();
    r.instance_nodes = vec!["a2".into()];
    assert_eq!(
        choose_node(&r, &nodes, &[], &[]).unwrap_err().to_string(),
        "no online node is allowed: none of the instance's nodes (a2) is online"
    );
    r.instance_nodes = vec!["a1".into(), "a2".into()];
    r.machine_nodes = vec!["a3".into()];
    assert_eq!(
        choose_node(&r, &nodes, &[], &[]).unwrap_err().to_string(),
        "no online node is allowed: none of the machine's allowedNodes (a3) is online and allowed in the instance"
    );
    r.machine_nodes.clear();
    assert_eq!(choose_node(&r, &nodes, &[], &[]).unwrap().node, "a1");
    let offline = vec![node("a1", 64, false)];
    assert_eq!(
        choose_node(&req(1, 100), &offline, &[], &[]).unwrap_err(),
        ScheduleError::NoCandidates("every node is offline".into())
    );
}

#[test]
fn target_must_be_a_candidate() {
    let nodes = vec![
        node("a1", 64, true),
        node("a2", 64, false),
        node("a3", 64, true),
    ];
    let mut r = req(1024, 100);
    r.machine_nodes.clear();
    r.target = Some("a3".into());
    assert_eq!(choose_node(&r, &nodes, &[], &[]).unwrap().node, "a3");
    r.target = Some("a2".into());
    assert_eq!(
        choose_node(&r, &nodes, &[], &[]).unwrap_err().to_string(),
        "target node a2 cannot be used: it is offline"
    );
    r.target = Some("zz".into());
    assert!(matches!(
        choose_node(&r, &nodes, &[], &[]),
        Err(ScheduleError::Target { .. })
    ));
}

#[test]
fn b05_local_storage_restricts_to_the_template_node() {
    let nodes = vec![node("node-a", 64, true), node("node-b", 64, true)];
    let loc = Locality {
        nodes: ["node-a".to_string()].into(),
        why: "template 9000 has scsi0 on local-lvm, which is not shared".into(),
    };
    let mut r = req(1024, 100);
    r.locality = Some(loc);
    // node-b has more free memory but cannot be reached.
    let vms = vec![vm(1, "node-a", Some(32), false)];
    assert_eq!(choose_node(&r, &nodes, &vms, &[]).unwrap().node, "node-a");
    r.target = Some("node-b".into());
    assert_eq!(
        choose_node(&r, &nodes, &vms, &[]).unwrap_err().to_string(),
        "target node node-b cannot be used: template 9000 has scsi0 on local-lvm, which is not shared"
    );
    r.target = None;
    let only_b = vec![node("node-a", 64, false), node("node-b", 64, true)];
    assert_eq!(
        choose_node(&r, &only_b, &[], &[]).unwrap_err().to_string(),
        "no online node is allowed: template 9000 has scsi0 on local-lvm, which is not shared; it can only be cloned to node-a"
    );
}

/// Field case B37: local-lvm on every node, fast-a only on node-a,
/// ceph-rbd shared but not active on node-c; cephfs holds ISOs.
fn b37(needs: &[(&str, &str)], machine_nodes: &[&str]) -> Request {
    let mut on_nodes = Vec::new();
    for n in ["node-a", "node-b", "node-c"] {
        let mut add = |storage: &str, active: bool, iso: bool| {
            on_nodes.push(NodeStorage {
                node: n.into(),
                storage: storage.into(),
                active,
                iso,
            })
        };
        add("local-lvm", true, false);
        add("cephfs", true, true);
        add("ceph-rbd", n != "node-c", false);
        if n == "node-a" {
            add("fast-a", true, false);
        }
    }
    Request {
        memory: 1 << 30,
        machine_nodes: machine_nodes.iter().map(|n| n.to_string()).collect(),
        memory_adjustment: 100,
        storage: Some(StorageFilter {
            needs: StorageNeeds {
                named: needs
                    .iter()
                    .map(|(s, why)| super::super::storage::Need {
                        storage: s.to_string(),
                        needed_by: why.to_string(),
                    })
                    .collect(),
                iso: true,
            },
            on_nodes,
        }),
        ..Request::default()
    }
}

fn three() -> Vec<NodeFacts> {
    vec![
        node("node-a", 64, true),
        node("node-b", 64, true),
        node("node-c", 64, true),
    ]
}

#[test]
fn b37_only_nodes_with_the_storage_enabled_and_active() {
    // node-b and node-c have more free memory than node-a.
    let vms = vec![vm(1, "node-a", Some(32), false)];
    let m1 = b37(
        &[("fast-a", "spec.storage (clone target)")],
        &["node-a", "node-b", "node-c"],
    );
    assert_eq!(
        choose_node(&m1, &three(), &vms, &[]).unwrap().node,
        "node-a"
    );
    let m2 = b37(
        &[("ceph-rbd", "spec.storage (clone target)")],
        &["node-b", "node-c"],
    );
    assert_eq!(choose_node(&m2, &three(), &[], &[]).unwrap().node, "node-b");
    let m3 = b37(
        &[("fast-a", "spec.storage (clone target)")],
        &["node-b", "node-c"],
    );
    let e = choose_node(&m3, &three(), &[], &[]).unwrap_err();
    assert_eq!(
        e,
        ScheduleError::Storage {
            nodes: vec![
                (
                    "node-b".into(),
                    "fast-a (spec.storage (clone target)) is not enabled there".into()
                ),
                (
                    "node-c".into(),
                    "fast-a (spec.storage (clone target)) is not enabled there".into()
                ),
            ]
        }
    );
    assert!(
        e.to_string().starts_with(
            "no node has every storage this VM needs enabled and active: node-b: fast-a"
        )
    );
}

#[test]
fn b37_inactive_storage_and_missing_iso_storage_are_named() {
    let mut r = b37(&[("ceph-rbd", "template 9000 scsi0")], &["node-c"]);
    if let Some(f) = &mut r.storage {
        f.on_nodes
            .retain(|s| !(s.node == "node-c" && s.storage == "cephfs"));
    }
    assert_eq!(
        choose_node(&r, &three(), &[], &[]).unwrap_err().to_string(),
        "no node has every storage this VM needs enabled and active: node-c: \
         ceph-rbd (template 9000 scsi0) is not active there (status unknown); \
         no active storage with content iso for the bootstrap ISO"
    );
    r.machine_nodes.clear();
    r.target = Some("node-c".into());
    assert_eq!(
        choose_node(&r, &three(), &[], &[]).unwrap_err(),
        ScheduleError::Target {
            target: "node-c".into(),
            why: "ceph-rbd (template 9000 scsi0) is not active there (status unknown); \
                  no active storage with content iso for the bootstrap ISO"
                .into()
        }
    );
    r.target = None;
    assert_eq!(choose_node(&r, &three(), &[], &[]).unwrap().node, "node-a");
}

#[test]
fn human_units() {
    assert_eq!(human(GIB), "1 GiB");
    assert_eq!(human(1536 << 20), "1536 MiB");
    assert_eq!(human(100), "100 bytes");
    assert_eq!(human(0), "0 bytes");
    assert_eq!(human_signed(-2 * i128::from(GIB)), "-2 GiB");
}

/// A mapping `gpu` with one device on node-a and node-b, none on node-c.
fn gpu_request(in_use: &[&str], target: Option<&str>) -> Request {
    use crate::machine::plan::pci::{InUse, PciNeed, hold};
    let needs = vec![PciNeed {
        field: "spec.pciDevices[0]".into(),
        mapping: "gpu".into(),
        mediated: false,
    }];
    let mut held = InUse::new();
    for n in in_use {
        hold(&mut held, &needs, n);
    }
    Request {
        memory: 1 << 30,
        memory_adjustment: 100,
        target: target.map(str::to_string),
        pci: Some(PciFilter {
            needs,
            devices: [(
                "gpu".to_string(),
                [("node-a".to_string(), 1), ("node-b".to_string(), 1)].into(),
            )]
            .into(),
            in_use: held,
        }),
        ..Request::default()
    }
}

fn abc() -> Vec<NodeFacts> {
    vec![
        node("node-a", 16, true),
        node("node-b", 16, true),
        node("node-c", 64, true),
    ]
}

#[test]
fn pci_only_nodes_with_a_free_device() {
    // node-c has the most memory but no device of the mapping.
    let p = choose_node(&gpu_request(&[], None), &abc(), &[], &[]).unwrap();
    assert_eq!(p.node, "node-a");
    let p = choose_node(&gpu_request(&["node-a"], None), &abc(), &[], &[]).unwrap();
    assert_eq!(p.node, "node-b");
    let e = choose_node(&gpu_request(&["node-a", "node-b"], None), &abc(), &[], &[]).unwrap_err();
    assert!(matches!(e, ScheduleError::PciDevicesExhausted { .. }));
    assert_eq!(
        e.to_string(),
        "no node has a free device of every PCI mapping this VM needs: node-a: mapping gpu: 1 of 1 devices in use; node-b: mapping gpu: 1 of 1 devices in use; node-c: mapping gpu has no device there"
    );
}

#[test]
fn pci_target_and_missing_mapping_are_named() {
    let e = choose_node(&gpu_request(&[], Some("node-c")), &abc(), &[], &[]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "target node node-c cannot be used: mapping gpu has no device there"
    );
    let mut r = gpu_request(&[], None);
    if let Some(f) = r.pci.as_mut() {
        f.devices.clear();
    }
    let e = choose_node(&r, &abc(), &[], &[]).unwrap_err();
    assert!(matches!(e, ScheduleError::PciMappingNotFound { .. }));
    assert!(
        e.to_string().starts_with(
            "PCI resource mapping \"gpu\" (spec.pciDevices[0].mapping) does not exist"
        ),
        "{e}"
    );
}
