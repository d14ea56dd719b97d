//! Placements in flight: nodes chosen for VMs that do not show where they
//! are yet.
//!
//! Spreading counts, per node, the machines of the same CAPI cluster. A
//! machine's node is known from its `status.proxmoxNode` only once the
//! clone was issued and the status written; before that (while it waits
//! for its VMID, a clone slot, or a retry) other machines planning at the
//! same time would not see it, and concurrent scale-ups would pile onto
//! one node. So a plan is registered here the moment it is made (under the
//! per-Proxmox-cluster planning lock, so two plans never miss each other)
//! and counted until the machine is provisioned, re-planned or deleted.
//!
//! A second table holds the memory of VMs being created: Proxmox lists a
//! new VM with its memory only some time after the clone (docs/proxmox-semantics.md
//! §9), and until then its memory must still count against its node.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use crate::clients::Identity;
use crate::machine::plan::pci::PciNeed;
use crate::machine::plan::scheduler::PendingVm;
use crate::pve::NodeName;

/// One placement in flight.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    /// The CAPI cluster (`namespace/name`) of the machine.
    pub cluster: String,
    /// The node.
    pub node: NodeName,
    /// The PCI devices the VM takes there (mapping ids in this Proxmox
    /// cluster), so concurrent plans never hand out one device twice.
    pub pci: Vec<PciNeed>,
}

/// A VM being created in one Proxmox cluster.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PendingKey {
    identity: Identity,
    vmid: u32,
}

/// Placements in flight and VMs being created, per Proxmox cluster.
#[derive(Debug, Default)]
pub struct InFlight {
    placements: Mutex<HashMap<Identity, BTreeMap<String, Placement>>>,
    pending: Mutex<HashMap<PendingKey, (PendingVm, Instant)>>,
    locks: Mutex<HashMap<Identity, Arc<tokio::sync::Mutex<()>>>>,
}

/// How long a VM counts as "being created" at most (a VM that never shows
/// up in the listing must not count forever).
const PENDING_FOR: Duration = Duration::from_secs(600);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl InFlight {
    /// The planning lock of one Proxmox cluster: held while a node is chosen
    /// and the choice registered.
    pub fn planning_lock(&self, identity: &Identity) -> Arc<tokio::sync::Mutex<()>> {
        lock(&self.locks)
            .entry(identity.clone())
            .or_default()
            .clone()
    }

    /// Registers (or moves) the placement of machine `uid`.
    pub fn place(&self, identity: &Identity, uid: &str, placement: Placement) {
        let mut p = lock(&self.placements);
        for (id, m) in p.iter_mut() {
            if id != identity {
                m.remove(uid);
            }
        }
        p.entry(identity.clone())
            .or_default()
            .insert(uid.to_string(), placement);
    }

    /// The placements in flight in `identity`, by machine UID.
    pub fn placements(&self, identity: &Identity) -> BTreeMap<String, Placement> {
        lock(&self.placements)
            .get(identity)
            .cloned()
            .unwrap_or_default()
    }

    /// Machine `uid` is placed for good (provisioned) or gone: its
    /// placement stops counting here.
    pub fn settle(&self, uid: &str) {
        for m in lock(&self.placements).values_mut() {
            m.remove(uid);
        }
    }

    /// Records a VM this process is creating (its memory counts at once).
    pub fn add_pending(&self, identity: &Identity, vm: PendingVm) {
        lock(&self.pending).insert(
            PendingKey {
                identity: identity.clone(),
                vmid: vm.vmid,
            },
            (vm, Instant::now()),
        );
    }

    /// VMs being created in `identity`. Entries of VMs the listing now shows
    /// with their memory (`listed_with_memory`), and entries older than ten
    /// minutes, are dropped.
    pub fn pending(
        &self,
        identity: &Identity,
        listed_with_memory: &std::collections::BTreeSet<u32>,
    ) -> Vec<PendingVm> {
        let mut p = lock(&self.pending);
        p.retain(|k, (_, at)| {
            !(k.identity == *identity && listed_with_memory.contains(&k.vmid))
                && at.elapsed() < PENDING_FOR
        });
        p.iter()
            .filter(|(k, _)| k.identity == *identity)
            .map(|(_, (vm, _))| vm.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(n: &str) -> NodeName {
        NodeName::new(n).unwrap()
    }

    #[test]
    fn placements_count_until_settled_and_move_between_clusters() {
        let f = InFlight::default();
        let a = Identity::new("cluster:dc-a");
        let b = Identity::new("cluster:dc-b");
        f.place(
            &a,
            "u1",
            Placement {
                cluster: "ns/wl1".into(),
                node: node("pve-a1"),
                pci: Vec::new(),
            },
        );
        f.place(
            &a,
            "u2",
            Placement {
                cluster: "ns/wl1".into(),
                node: node("pve-a2"),
                pci: Vec::new(),
            },
        );
        assert_eq!(f.placements(&a).len(), 2);
        // Re-planned into another Proxmox cluster: counted there only.
        f.place(
            &b,
            "u2",
            Placement {
                cluster: "ns/wl1".into(),
                node: node("pve-b1"),
                pci: Vec::new(),
            },
        );
        assert_eq!(f.placements(&a).keys().collect::<Vec<_>>(), vec!["u1"]);
        assert_eq!(f.placements(&b)["u2"].node, node("pve-b1"));
        f.settle("u1");
        assert!(f.placements(&a).is_empty());
    }

    #[test]
    fn pending_vms_expire_when_listed() {
        let f = InFlight::default();
        let a = Identity::new("dc-a");
        let b = Identity::new("dc-b");
        let vm = |n: &str| PendingVm {
            vmid: 131,
            node: n.into(),
            memory: 1 << 30,
        };
        f.add_pending(&a, vm("pve-a1"));
        f.add_pending(&b, vm("pve-b1"));
        assert_eq!(f.pending(&a, &Default::default()).len(), 1);
        assert_eq!(f.pending(&a, &[131].into()).len(), 0);
        assert_eq!(
            f.pending(&b, &Default::default()).len(),
            1,
            "other identity untouched"
        );
    }
}
