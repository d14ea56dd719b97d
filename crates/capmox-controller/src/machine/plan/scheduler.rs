//! Which node of the instance a new VM goes to.
//!
//! Candidates: the instance's allowed nodes ∩ the machine's `allowedNodes`
//! (an empty list allows every node), online only, and — when the template's
//! disks or the requested target storage are node-local — only the nodes the
//! clone can reach (docs/field-cases.md B05), and only the nodes where every
//! storage the VM needs is enabled and active (the storage filter below,
//! docs/field-cases.md B37). An explicit `spec.target` must be among them.
//!
//! Memory (docs/field-cases.md B26): a node's capacity is its memory ×
//! `schedulerHints.memoryAdjustment` % (100 = exact, above 100 = overcommit,
//! 0 = ignore memory). **Templates never count**; every other VM counts with
//! its **configured** memory (`maxmem`), running or stopped — a stopped VM
//! may start again, so this is the safe choice. VMs this process is creating
//! count at once, before Proxmox lists them with their memory (a fresh clone
//! shows up in `/cluster/resources` without `maxmem` for up to ~10 s,
//! docs/proxmox-semantics.md §9).
//!
//! Order: fewest machines of this cluster on the node (spread), then most
//! free memory, then node name.

use std::collections::{BTreeMap, BTreeSet};

use super::storage::StorageNeeds;

/// A node as `/cluster/resources` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeFacts {
    /// Node name.
    pub name: String,
    /// Whether it is online.
    pub online: bool,
    /// Memory, **bytes**.
    pub maxmem: u64,
}

/// A VM as `/cluster/resources` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VmLoad {
    /// VMID.
    pub vmid: u32,
    /// Node.
    pub node: String,
    /// Configured memory, **bytes** (absent right after a clone).
    pub maxmem: Option<u64>,
    /// Template flag (templates never count).
    pub template: bool,
}

/// A VM this process is creating: it counts before Proxmox lists its memory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingVm {
    /// VMID.
    pub vmid: u32,
    /// Node it goes to.
    pub node: String,
    /// Memory, **bytes**.
    pub memory: u64,
}

/// Nodes a clone can reach when storage is node-local, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Locality {
    /// The reachable nodes.
    pub nodes: BTreeSet<String>,
    /// Why only those (e.g. `template 9000 has scsi0 on local-lvm, which is not shared`).
    pub why: String,
}

/// What to place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Request {
    /// Memory of the new VM, **bytes**.
    pub memory: u64,
    /// The instance's allowed nodes (empty = all).
    pub instance_nodes: Vec<String>,
    /// The machine's `allowedNodes` (empty = all).
    pub machine_nodes: Vec<String>,
    /// `spec.target`, if set.
    pub target: Option<String>,
    /// `schedulerHints.memoryAdjustment` in percent (100 when unset).
    pub memory_adjustment: u32,
    /// Machines of this cluster per node (spread).
    pub cluster_machines: BTreeMap<String, u32>,
    /// Storage locality restriction.
    pub locality: Option<Locality>,
    /// The storages the VM needs and where they are enabled and active;
    /// `None`: no storage filter.
    pub storage: Option<StorageFilter>,
}

/// Memory figures of one node, **bytes** (signed: `free` may be negative
/// when overcommitted).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeMemory {
    /// Node name.
    pub node: String,
    /// Physical memory.
    pub total: u64,
    /// `total × adjustment / 100`.
    pub capacity: u64,
    /// Configured memory of its non-template VMs plus pending ones.
    pub reserved: u64,
    /// `capacity − reserved`.
    pub free: i128,
}

/// The chosen node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Node name.
    pub node: String,
    /// Its memory figures before this VM.
    pub memory: NodeMemory,
}

/// Why no node fits.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// No node is online and allowed.
    #[error("no online node is allowed: {0}")]
    NoCandidates(String),
    /// `spec.target` names a node that is not a candidate.
    #[error("target node {target} cannot be used: {why}")]
    Target {
        /// The target.
        target: String,
        /// Why.
        why: String,
    },
    /// No candidate has every storage the VM needs enabled and active.
    #[error(
        "no node has every storage this VM needs enabled and active: {}",
        per_node(nodes)
    )]
    Storage {
        /// Each candidate and what it lacks.
        nodes: Vec<(String, String)>,
    },
    /// Every candidate lacks memory.
    #[error("no node has {} free for this VM (memoryAdjustment {adjustment}%): {}", human(*requested), describe(nodes))]
    InsufficientMemory {
        /// Requested, bytes.
        requested: u64,
        /// The adjustment in percent.
        adjustment: u32,
        /// Each candidate's figures.
        nodes: Vec<NodeMemory>,
    },
}

/// `4 GiB`, `1536 MiB`, `100 bytes`: the largest binary unit that divides
/// `bytes` exactly.
pub fn human(bytes: u64) -> String {
    const GIB: u64 = 1 << 30;
    const MIB: u64 = 1 << 20;
    if bytes != 0 && bytes.is_multiple_of(GIB) {
        format!("{} GiB", bytes / GIB)
    } else if bytes != 0 && bytes.is_multiple_of(MIB) {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} bytes")
    }
}

fn human_signed(v: i128) -> String {
    let abs = u64::try_from(v.unsigned_abs()).unwrap_or(u64::MAX);
    if v < 0 {
        format!("-{}", human(abs))
    } else {
        human(abs)
    }
}

fn per_node(nodes: &[(String, String)]) -> String {
    nodes
        .iter()
        .map(|(n, why)| format!("{n}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn describe(nodes: &[NodeMemory]) -> String {
    nodes
        .iter()
        .map(|n| {
            format!(
                "{}: capacity {} (of {}), reserved {}, free {}",
                n.node,
                human(n.capacity),
                human(n.total),
                human(n.reserved),
                human_signed(n.free)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// Memory figures per node: configured memory of non-template VMs, plus
/// pending VMs not yet listed with their memory.
pub fn memory_by_node(
    nodes: &[NodeFacts],
    vms: &[VmLoad],
    pending: &[PendingVm],
    adjustment: u32,
) -> BTreeMap<String, NodeMemory> {
    let listed: BTreeSet<u32> = vms
        .iter()
        .filter(|v| v.maxmem.is_some())
        .map(|v| v.vmid)
        .collect();
    nodes
        .iter()
        .map(|n| {
            let vm_mem: u64 = vms
                .iter()
                .filter(|v| v.node == n.name && !v.template)
                .filter_map(|v| v.maxmem)
                .sum();
            let pending_mem: u64 = pending
                .iter()
                .filter(|p| p.node == n.name && !listed.contains(&p.vmid))
                .map(|p| p.memory)
                .sum();
            let reserved = vm_mem + pending_mem;
            let capacity = u64::try_from(u128::from(n.maxmem) * u128::from(adjustment) / 100)
                .unwrap_or(u64::MAX);
            (
                n.name.clone(),
                NodeMemory {
                    node: n.name.clone(),
                    total: n.maxmem,
                    capacity,
                    reserved,
                    free: i128::from(capacity) - i128::from(reserved),
                },
            )
        })
        .collect()
}

/// Picks the node for a new VM.
///
/// # Errors
/// [`ScheduleError::NoCandidates`] when no node is online and allowed (the
/// message says which filter emptied the list), [`ScheduleError::Target`]
/// for an unusable `spec.target`, [`ScheduleError::InsufficientMemory`]
/// naming every candidate's capacity and reservation.
pub fn choose_node(
    request: &Request,
    nodes: &[NodeFacts],
    vms: &[VmLoad],
    pending: &[PendingVm],
) -> Result<Placement, ScheduleError> {
    let allowed = |name: &str, list: &[String]| list.is_empty() || list.iter().any(|n| n == name);
    let online: Vec<&NodeFacts> = nodes.iter().filter(|n| n.online).collect();
    let in_instance: Vec<&NodeFacts> = online
        .iter()
        .copied()
        .filter(|n| allowed(&n.name, &request.instance_nodes))
        .collect();
    let in_machine: Vec<&NodeFacts> = in_instance
        .iter()
        .copied()
        .filter(|n| allowed(&n.name, &request.machine_nodes))
        .collect();
    let reachable: Vec<&NodeFacts> = in_machine
        .iter()
        .copied()
        .filter(|n| {
            request
                .locality
                .as_ref()
                .is_none_or(|l| l.nodes.contains(&n.name))
        })
        .collect();

    let stored: Vec<&NodeFacts> = reachable
        .iter()
        .copied()
        .filter(|n| storage_problem(request.storage.as_ref(), &n.name).is_none())
        .collect();

    if let Some(target) = &request.target {
        let why = if !nodes.iter().any(|n| &n.name == target) {
            Some("it is not a node of this Proxmox cluster".to_string())
        } else if !online.iter().any(|n| &n.name == target) {
            Some("it is offline".to_string())
        } else if !in_instance.iter().any(|n| &n.name == target) {
            Some(format!(
                "it is not among the instance's nodes ({})",
                request.instance_nodes.join(", ")
            ))
        } else if !in_machine.iter().any(|n| &n.name == target) {
            Some(format!(
                "it is not among the machine's allowedNodes ({})",
                request.machine_nodes.join(", ")
            ))
        } else if !reachable.iter().any(|n| &n.name == target) {
            request.locality.as_ref().map(|l| l.why.clone())
        } else if !stored.iter().any(|n| &n.name == target) {
            storage_problem(request.storage.as_ref(), target)
        } else {
            None
        };
        if let Some(why) = why {
            return Err(ScheduleError::Target {
                target: target.clone(),
                why,
            });
        }
    }

    if reachable.is_empty() {
        let why = if online.is_empty() {
            "every node is offline".to_string()
        } else if in_instance.is_empty() {
            format!(
                "none of the instance's nodes ({}) is online",
                request.instance_nodes.join(", ")
            )
        } else if in_machine.is_empty() {
            format!(
                "none of the machine's allowedNodes ({}) is online and allowed in the instance",
                request.machine_nodes.join(", ")
            )
        } else {
            match &request.locality {
                Some(l) => format!(
                    "{}; it can only be cloned to {}",
                    l.why,
                    l.nodes.iter().cloned().collect::<Vec<_>>().join(", ")
                ),
                None => "no candidate".to_string(),
            }
        };
        return Err(ScheduleError::NoCandidates(why));
    }
    if stored.is_empty() {
        return Err(ScheduleError::Storage {
            nodes: reachable
                .iter()
                .filter_map(|n| {
                    storage_problem(request.storage.as_ref(), &n.name).map(|w| (n.name.clone(), w))
                })
                .collect(),
        });
    }

    let candidates: Vec<&NodeFacts> = match &request.target {
        Some(t) => stored.into_iter().filter(|n| &n.name == t).collect(),
        None => stored,
    };
    let ignore_memory = request.memory_adjustment == 0;
    let figures_adj = if ignore_memory {
        100
    } else {
        request.memory_adjustment
    };
    let owned: Vec<NodeFacts> = candidates.iter().map(|n| (*n).clone()).collect();
    let memory = memory_by_node(&owned, vms, pending, figures_adj);
    let mut fitting: Vec<&NodeMemory> = memory
        .values()
        .filter(|m| ignore_memory || m.free >= i128::from(request.memory))
        .collect();
    if fitting.is_empty() {
        return Err(ScheduleError::InsufficientMemory {
            requested: request.memory,
            adjustment: request.memory_adjustment,
            nodes: memory.into_values().collect(),
        });
    }
    fitting.sort_by(|a, b| {
        let ma = request.cluster_machines.get(&a.node).copied().unwrap_or(0);
        let mb = request.cluster_machines.get(&b.node).copied().unwrap_or(0);
        ma.cmp(&mb)
            .then(b.free.cmp(&a.free))
            .then(a.node.cmp(&b.node))
    });
    let best = fitting[0].clone();
    Ok(Placement {
        node: best.node.clone(),
        memory: best,
    })
}

// ---- storage filter (docs/field-cases.md B37) ------------------------------
//
// A node is a candidate only when every storage the VM needs
// (`super::storage::needs`) is enabled and active on it. The facts come from
// `/cluster/resources` (type `storage`, `machine/observe/storage.rs`): a
// storage is listed for a node only when it is configured for that node and
// enabled, and its status is `available` only when it is active there. So a
// clone never asks for a storage Proxmox would refuse with "storage '…' is
// not available on node '…'" or fail to activate.

/// One storage as `/cluster/resources` lists it for one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeStorage {
    /// Node.
    pub node: String,
    /// Storage id.
    pub storage: String,
    /// Its status there is `available` (enabled and activated).
    pub active: bool,
    /// Its content types include `iso`.
    pub iso: bool,
}

/// The storage filter's input.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StorageFilter {
    /// What the VM needs.
    pub needs: StorageNeeds,
    /// Every storage of every node, as listed.
    pub on_nodes: Vec<NodeStorage>,
}

/// What `node` lacks of what `filter` needs (`None`: nothing, or no filter),
/// e.g. `fast-a (spec.storage (clone target)) is not enabled there; ceph
/// (template 9000 scsi0) is not active there (status unknown)`.
pub fn storage_problem(filter: Option<&StorageFilter>, node: &str) -> Option<String> {
    let f = filter?;
    let here: Vec<&NodeStorage> = f.on_nodes.iter().filter(|s| s.node == node).collect();
    let mut missing = Vec::new();
    for need in &f.needs.named {
        match here.iter().find(|s| s.storage == need.storage) {
            None => missing.push(format!(
                "{} ({}) is not enabled there",
                need.storage, need.needed_by
            )),
            Some(s) if !s.active => missing.push(format!(
                "{} ({}) is not active there (status unknown)",
                need.storage, need.needed_by
            )),
            Some(_) => {}
        }
    }
    if f.needs.iso && !here.iter().any(|s| s.active && s.iso) {
        missing.push("no active storage with content iso for the bootstrap ISO".to_string());
    }
    (!missing.is_empty()).then(|| missing.join("; "))
}

#[cfg(test)]
mod tests {
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
        assert!(e.to_string().starts_with(
            "no node has every storage this VM needs enabled and active: node-b: fast-a"
        ));
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
}
