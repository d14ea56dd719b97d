//! VMID reservation: never "read `/cluster/nextid`, then clone"
//! (docs/field-cases.md B01, B03).
//!
//! `GET /cluster/nextid` reserves nothing (docs/proxmox-semantics.md §7), so two machines
//! reconciled at once would get the same answer. This table hands out VMIDs
//! inside a range, skipping the ids that are live in the Proxmox cluster and
//! the ids reserved in flight by this process, and remembers who holds each.
//!
//! Invariants:
//! - Reservations are kept per Proxmox cluster **identity** (cluster name from
//!   `/cluster/status`, else the API origin), not per instance name: two
//!   ProxmoxClusters may point at the same Proxmox cluster, and VMIDs of two
//!   different Proxmox clusters never collide with each other.
//! - A VMID is held by at most one owner (a ProxmoxMachine UID) at a time.
//! - A reservation is tentative: the caller releases it when the clone lost
//!   the race ("already exists") or the machine is deleted, and takes the next
//!   one.
//! - Thread-safe; the lock is never held across an `await`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;

use crate::api::VmIdRange;
use crate::api::common::{VMID_MAX, VMID_MIN};
use crate::clients::Identity;

/// Annotation on a ProxmoxMachine naming the VMID the controller reserved
/// for it (written with `spec.virtualMachineID`, in one patch): a VMID the
/// controller reserved and lost to someone else before its clone is
/// replaced; a VMID a user wrote is never replaced.
pub const RESERVED_ANNOTATION: &str =
    "proxmoxmachine.infrastructure.cluster.x-k8s.io/reserved-vmid";

/// Why no VMID could be reserved.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VmidError {
    /// Every id of the range is live or reserved.
    #[error(
        "no free VMID in {start}-{end}: {live} live in the Proxmox cluster, {reserved} reserved by machines being created"
    )]
    Exhausted {
        /// First id of the range.
        start: u32,
        /// Last id of the range.
        end: u32,
        /// Ids of the range that are live.
        live: u64,
        /// Ids of the range reserved in this process (and not live).
        reserved: u64,
    },
    /// The id is reserved by another machine.
    #[error("VMID {vmid} is reserved by another machine (uid {owner})")]
    HeldByOther {
        /// The id.
        vmid: u32,
        /// The UID holding it.
        owner: String,
    },
}

/// The whole VMID space Proxmox accepts (`pve-vmid`, 100..=999999999).
pub const WHOLE_SPACE: VmIdRange = VmIdRange {
    start: VMID_MIN,
    end: VMID_MAX,
};

/// The effective range of a machine: its own `vmIDRange` ▸ its instance's ▸
/// the whole space.
pub fn effective_range(machine: Option<VmIdRange>, instance: Option<VmIdRange>) -> VmIdRange {
    machine.or(instance).unwrap_or(WHOLE_SPACE)
}

/// In-flight VMID reservations of this process, per Proxmox cluster identity.
#[derive(Debug, Default)]
pub struct VmidTable {
    by_identity: Mutex<HashMap<Identity, BTreeMap<u32, String>>>,
}

impl VmidTable {
    /// An empty table.
    pub fn new() -> VmidTable {
        VmidTable::default()
    }

    fn with<R>(&self, identity: &Identity, f: impl FnOnce(&mut BTreeMap<u32, String>) -> R) -> R {
        let mut map = self
            .by_identity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(map.entry(identity.clone()).or_default())
    }

    /// Reserves the lowest VMID of `range` that is neither in `taken` (ids
    /// live in the Proxmox cluster, plus any the caller knows to be in use)
    /// nor reserved by another owner. If `owner` already holds a free id of
    /// the range, that one is returned again (idempotent).
    ///
    /// # Errors
    /// [`VmidError::Exhausted`] when every id of the range is taken.
    pub fn reserve(
        &self,
        identity: &Identity,
        range: VmIdRange,
        taken: &BTreeSet<u32>,
        owner: &str,
    ) -> Result<u32, VmidError> {
        self.with(identity, |held| {
            if let Some((&id, _)) = held
                .iter()
                .find(|(id, o)| o.as_str() == owner && range.contains(**id) && !taken.contains(id))
            {
                return Ok(id);
            }
            let mut id = range.start;
            while id <= range.end {
                if !taken.contains(&id) && !held.contains_key(&id) {
                    held.insert(id, owner.to_string());
                    return Ok(id);
                }
                if id == u32::MAX {
                    break;
                }
                id += 1;
            }
            let live = taken.range(range.start..=range.end).count() as u64;
            let reserved = held
                .range(range.start..=range.end)
                .filter(|(id, _)| !taken.contains(id))
                .count() as u64;
            Err(VmidError::Exhausted {
                start: range.start,
                end: range.end,
                live,
                reserved,
            })
        })
    }

    /// Records that `owner` holds `vmid` (after a restart, for a machine whose
    /// `spec.virtualMachineID` is set but whose clone has not finished).
    ///
    /// # Errors
    /// [`VmidError::HeldByOther`] when another owner holds it.
    pub fn hold(&self, identity: &Identity, vmid: u32, owner: &str) -> Result<(), VmidError> {
        self.with(identity, |held| match held.get(&vmid) {
            Some(o) if o != owner => Err(VmidError::HeldByOther {
                vmid,
                owner: o.clone(),
            }),
            _ => {
                held.insert(vmid, owner.to_string());
                Ok(())
            }
        })
    }

    /// Releases `vmid` if `owner` holds it. Returns whether it did.
    pub fn release(&self, identity: &Identity, vmid: u32, owner: &str) -> bool {
        self.with(identity, |held| {
            if held.get(&vmid).is_some_and(|o| o == owner) {
                held.remove(&vmid);
                true
            } else {
                false
            }
        })
    }

    /// Releases every id `owner` holds under `identity`.
    pub fn release_owner(&self, identity: &Identity, owner: &str) {
        self.with(identity, |held| held.retain(|_, o| o != owner));
    }

    /// Releases every id `owner` holds under any identity (the machine is gone).
    pub fn release_everywhere(&self, owner: &str) {
        let mut map = self
            .by_identity
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for held in map.values_mut() {
            held.retain(|_, o| o != owner);
        }
    }

    /// Who holds `vmid`, if anyone.
    pub fn holder(&self, identity: &Identity, vmid: u32) -> Option<String> {
        self.with(identity, |held| held.get(&vmid).cloned())
    }

    /// Number of reservations under `identity`.
    pub fn len(&self, identity: &Identity) -> usize {
        self.with(identity, |held| held.len())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::clients::Identity;

    fn r(start: u32, end: u32) -> VmIdRange {
        VmIdRange { start, end }
    }

    fn set(ids: &[u32]) -> BTreeSet<u32> {
        ids.iter().copied().collect()
    }

    #[test]
    fn lowest_free_skipping_live_and_reserved() {
        let t = VmidTable::new();
        let live = set(&[1000, 1001, 1003]);
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(1000, 1999), &live, "u1"),
            Ok(1002)
        );
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(1000, 1999), &live, "u2"),
            Ok(1004)
        );
        // Same owner asks again: the same id (idempotent).
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(1000, 1999), &live, "u1"),
            Ok(1002)
        );
        assert_eq!(
            t.holder(&Identity::new("dc-a"), 1004).as_deref(),
            Some("u2")
        );
        // Another Proxmox cluster has its own VMID space (B03).
        assert_eq!(
            t.reserve(
                &Identity::new("dc-b"),
                r(1000, 1999),
                &BTreeSet::new(),
                "u3"
            ),
            Ok(1000)
        );
    }

    #[test]
    fn a_held_id_that_became_live_is_not_returned_again() {
        let t = VmidTable::new();
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(100, 105), &set(&[]), "u1"),
            Ok(100)
        );
        // 100 turned out to be taken by someone else (clone: "already exists").
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(100, 105), &set(&[100]), "u1"),
            Ok(101)
        );
        assert!(t.release(&Identity::new("dc-a"), 100, "u1"));
        assert_eq!(t.len(&Identity::new("dc-a")), 1);
    }

    #[test]
    fn exhaustion_says_why() {
        let t = VmidTable::new();
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(100, 102), &set(&[100]), "u1"),
            Ok(101)
        );
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(100, 102), &set(&[100]), "u2"),
            Ok(102)
        );
        let e = t
            .reserve(&Identity::new("dc-a"), r(100, 102), &set(&[100]), "u3")
            .unwrap_err();
        assert_eq!(
            e,
            VmidError::Exhausted {
                start: 100,
                end: 102,
                live: 1,
                reserved: 2
            }
        );
        assert_eq!(
            e.to_string(),
            "no free VMID in 100-102: 1 live in the Proxmox cluster, 2 reserved by machines being created"
        );
        // Releasing one frees it for the next machine.
        assert!(t.release(&Identity::new("dc-a"), 101, "u1"));
        assert!(
            !t.release(&Identity::new("dc-a"), 102, "u1"),
            "u1 does not hold 102"
        );
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(100, 102), &set(&[100]), "u3"),
            Ok(101)
        );
    }

    #[test]
    fn hold_and_release_owner() {
        let t = VmidTable::new();
        t.hold(&Identity::new("dc-a"), 500, "u1").unwrap();
        t.hold(&Identity::new("dc-a"), 500, "u1").unwrap();
        assert_eq!(
            t.hold(&Identity::new("dc-a"), 500, "u2"),
            Err(VmidError::HeldByOther {
                vmid: 500,
                owner: "u1".into()
            })
        );
        assert_eq!(
            t.reserve(&Identity::new("dc-a"), r(500, 501), &set(&[]), "u2"),
            Ok(501)
        );
        t.release_owner(&Identity::new("dc-a"), "u1");
        assert_eq!(t.holder(&Identity::new("dc-a"), 500), None);
        assert_eq!(t.holder(&Identity::new("dc-a"), 501).as_deref(), Some("u2"));
        t.hold(&Identity::new("dc-b"), 700, "u2").unwrap();
        t.release_everywhere("u2");
        assert_eq!(
            t.len(&Identity::new("dc-a")) + t.len(&Identity::new("dc-b")),
            0
        );
    }

    #[test]
    fn ranges_and_the_whole_space() {
        assert_eq!(effective_range(Some(r(1, 2)), Some(r(3, 4))), r(1, 2));
        assert_eq!(effective_range(None, Some(r(3, 4))), r(3, 4));
        assert_eq!(effective_range(None, None), r(100, 999_999_999));
        let t = VmidTable::new();
        assert_eq!(
            t.reserve(&Identity::new("x"), WHOLE_SPACE, &set(&[100, 101]), "u"),
            Ok(102)
        );
        // The top of the space is reachable.
        let top = r(999_999_998, 999_999_999);
        assert_eq!(
            t.reserve(&Identity::new("x"), top, &set(&[999_999_998]), "v"),
            Ok(999_999_999)
        );
    }

    #[test]
    fn concurrent_reservations_never_collide() {
        let t = Arc::new(VmidTable::new());
        let handles: Vec<_> = (0..16)
            .map(|i| {
                let t = t.clone();
                std::thread::spawn(move || {
                    (0..25)
                        .map(|j| {
                            t.reserve(
                                &Identity::new("dc-a"),
                                r(100, 999),
                                &BTreeSet::new(),
                                &format!("u{i}-{j}"),
                            )
                            .unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u32> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        all.sort_unstable();
        let expected: Vec<u32> = (100..500).collect();
        assert_eq!(all, expected, "400 distinct ids, lowest first");
    }
}
