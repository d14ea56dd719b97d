//! The status outside a normal reconcile: paused, waiting for the owner
//! Cluster, deleting.

use k8s_openapi::jiff::Timestamp;

use super::{MachineCounts, set};
use crate::api::ProxmoxClusterStatus;
use crate::conditions::{Desired, PAUSED, READY, Status};
use crate::reasons::Reason;

/// Status while reconciliation is paused: only `Paused=True` changes.
pub fn decide_paused(
    previous: &ProxmoxClusterStatus,
    generation: Option<i64>,
    now: Timestamp,
) -> ProxmoxClusterStatus {
    let mut st = previous.clone();
    set(
        &mut st,
        Desired::new(PAUSED, Status::True, &Reason::Paused),
        generation,
        now,
    );
    st
}

/// Status while the owner Cluster is missing: `Ready=False` with `message`.
pub fn decide_waiting_for_owner(
    previous: &ProxmoxClusterStatus,
    generation: Option<i64>,
    now: Timestamp,
    message: &str,
) -> ProxmoxClusterStatus {
    let mut st = previous.clone();
    set(
        &mut st,
        Desired::new(
            READY,
            Status::False,
            &Reason::ClusterWaitingForOwner(message.to_string()),
        ),
        generation,
        now,
    );
    st
}

/// Status during deletion: waiting for the cluster's machines (how many,
/// which), or removing the IP pools.
pub fn decide_deleting(
    previous: &ProxmoxClusterStatus,
    generation: Option<i64>,
    now: Timestamp,
    machines: &MachineCounts,
) -> ProxmoxClusterStatus {
    let mut st = previous.clone();
    let total = machines.total();
    let d = if total > 0 {
        let mut shown: Vec<String> = machines.names.iter().take(5).cloned().collect();
        if machines.names.len() > 5 {
            shown.push(format!("… {} more", machines.names.len() - 5));
        }
        Desired::new(
            READY,
            Status::False,
            &Reason::WaitingForMachines(format!(
                "deleting: waiting for {total} ProxmoxMachine{} of this cluster to be deleted ({})",
                if total == 1 { "" } else { "s" },
                shown.join(", ")
            )),
        )
    } else {
        Desired::new(
            READY,
            Status::False,
            &Reason::Deleting("deleting: removing IP pools and the finalizer".into()),
        )
    };
    set(&mut st, d, generation, now);
    st
}
