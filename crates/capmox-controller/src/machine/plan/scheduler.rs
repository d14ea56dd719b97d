//! Which node of the instance a new VM goes to.
//!
//! Candidates: the instance's allowed nodes ∩ the machine's `allowedNodes`
//! (an empty list allows every node), online only, and — when the template's
//! disks or the requested target storage are node-local — only the nodes the
//! clone can reach (docs/field-cases.md B05), and only the nodes where every
//! storage the VM needs is enabled and active (the storage filter below,
//! docs/field-cases.md B37), and only the nodes where every PCI resource
//! mapping the VM needs has a free device ([`super::pci`]). An explicit
//! `spec.target` must be among them.
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

use super::pci::PciFilter;
use super::storage::StorageNeeds;

/// Annotation on a ProxmoxMachine naming the node its clone goes to,
/// written before the clone is asked for. Until a clone to another node
/// ends, Proxmox lists the new VM on the template's node
/// (docs/proxmox-semantics.md §8), so a controller that starts while the
/// clone runs (the one that asked died before writing status) counts the VM
/// on this node. Not in `status.proxmoxNode`: that names a node where the VM
/// is, and is read there (a VM that may not exist would be looked up on it).
pub const CLONE_TARGET_ANNOTATION: &str =
    "proxmoxmachine.infrastructure.cluster.x-k8s.io/clone-target";

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
    /// The PCI devices the VM needs and where they are free; `None`: no
    /// PCI filter.
    pub pci: Option<PciFilter>,
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
    /// A PCI resource mapping the VM needs is not listed in the instance
    /// (`GET /cluster/mapping/pci`).
    #[error(
        "PCI resource mapping {} does not exist in this Proxmox cluster (or the token may not see it; it needs Mapping.Use on /mapping/pci/<id>)",
        missing.iter().map(|(f, m)| format!("{m:?} ({f}.mapping)")).collect::<Vec<_>>().join(", ")
    )]
    PciMappingNotFound {
        /// `(field, mapping id)` of each missing mapping.
        missing: Vec<(String, String)>,
    },
    /// No candidate has a free device of every mapping the VM needs.
    #[error(
        "no node has a free device of every PCI mapping this VM needs: {}",
        per_node(nodes)
    )]
    PciDevicesExhausted {
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
    let pci_problem = |node: &str| request.pci.as_ref().and_then(|f| f.problem(node));
    if let Some(f) = &request.pci {
        let missing = f.missing();
        if !missing.is_empty() {
            return Err(ScheduleError::PciMappingNotFound { missing });
        }
    }
    let with_devices: Vec<&NodeFacts> = stored
        .iter()
        .copied()
        .filter(|n| pci_problem(&n.name).is_none())
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
        } else if !with_devices.iter().any(|n| &n.name == target) {
            pci_problem(target)
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

    if with_devices.is_empty() {
        return Err(ScheduleError::PciDevicesExhausted {
            nodes: stored
                .iter()
                .filter_map(|n| pci_problem(&n.name).map(|w| (n.name.clone(), w)))
                .collect(),
        });
    }

    let candidates: Vec<&NodeFacts> = match &request.target {
        Some(t) => with_devices.into_iter().filter(|n| &n.name == t).collect(),
        None => with_devices,
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
#[path = "tests/scheduler.rs"]
mod tests;
