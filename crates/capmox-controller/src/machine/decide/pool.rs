//! The machine's Proxmox resource pool (docs/field-cases.md B34).
//!
//! - The pool is the machine's `spec.pool`, else its instance's `pool`
//!   (pools are per Proxmox cluster); it is given in the clone request, so
//!   a token whose rights are granted on `/pool/<pool>` only can clone
//!   (Proxmox checks `VM.Allocate` on the pool named in the request).
//! - Before the clone the pool must exist: the ProxmoxCluster's probe says
//!   so for the instance's pool, and the machine reads it itself
//!   (`GET /pools?poolid=`, `GET /pools/{poolid}` before PVE 8.1). A
//!   missing pool is reported (`PoolNotFound`) and nothing is cloned.
//! - A token that lacks what the clone needs for this pool (the probe's
//!   `vmClone` entry, computed for the instance's pool) makes the machine
//!   wait before the clone, naming privilege and path.
//! - After the clone, before the first config write, the VM must be a
//!   member of the pool (Proxmox adds it in the clone task); a VM that is
//!   not is reported (`PoolMembershipMissing`), never moved by us.

use crate::reasons::Reason;

use super::facts::{Facts, PoolFact};
use super::step::{Observe, Step, Until, wait};

/// What blocks the clone, `None` when it may be made.
pub(super) fn before_clone(f: &Facts) -> Option<Step> {
    let instance = f.instance.as_deref().unwrap_or_default();
    let checked_by_probe = f.pool == f.instance_pool;
    if checked_by_probe && let Some(missing) = f.blocked("vmClone") {
        let hint = match &f.pool {
            Some(p) => format!("on /pool/{p} or on /vms and the storages"),
            None => "on /vms and the storages, or name the pool the token's rights are on (the instance's pool or spec.pool)".to_string(),
        };
        return Some(wait(
            Reason::MissingPrivileges(format!(
                "VM {} cannot be cloned: the token of instance {instance} lacks {missing}; grant them {hint}",
                f.vmid.unwrap_or_default()
            )),
            Until::Change,
        ));
    }
    let pool = f.pool.as_deref()?;
    if checked_by_probe && let Some(problem) = &f.pool_problem {
        return Some(wait(Reason::PoolNotFound(problem.clone()), Until::Change));
    }
    match &f.pool_members {
        None => Some(Step::Observe(Observe::Pool)),
        Some(PoolFact::Members(_)) => None,
        Some(PoolFact::Problem(m)) => Some(wait(
            Reason::PoolNotFound(format!("{m} (machine pool {pool})")),
            Until::Backoff,
        )),
        Some(PoolFact::Unreachable(r)) => Some(wait(r.clone(), Until::Backoff)),
    }
}

/// After the clone, before the first config write: the VM is a member of
/// its pool, else what is wrong. `None` when there is no pool or it is.
pub(super) fn after_clone(f: &Facts) -> Option<Step> {
    let pool = f.pool.as_deref()?;
    let vmid = f.vmid.unwrap_or_default();
    match &f.pool_members {
        None => Some(Step::Observe(Observe::Pool)),
        Some(PoolFact::Members(m)) if m.contains(&vmid) => None,
        Some(PoolFact::Members(_)) => Some(wait(
            Reason::PoolMembershipMissing(format!(
                "VM {vmid} is not a member of pool {pool} after its clone; add it (pvesh set /pools -poolid {pool} -vms {vmid}) or check who removed it"
            )),
            Until::Backoff,
        )),
        Some(PoolFact::Problem(m)) => Some(wait(Reason::PoolNotFound(m.clone()), Until::Backoff)),
        Some(PoolFact::Unreachable(r)) => Some(wait(r.clone(), Until::Backoff)),
    }
}
