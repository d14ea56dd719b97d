//! What wakes a ProxmoxMachine reconcile, and what does not.
//!
//! A reconcile is cheap but not free (four Kubernetes reads, often a
//! Proxmox call), and at a few hundred machines the naive triggers are
//! quadratic: every ProxmoxCluster status write (its machine counts change
//! as machines are placed) and every new bootstrap Secret of a cluster would
//! wake every unprovisioned machine of that cluster. So each watched kind
//! passes only the changes the machine reconciler reads (hashes over those
//! fields, see [`crate::watch_filter`]):
//!
//! | kind | wakes on |
//! |---|---|
//! | ProxmoxMachine | metadata (spec via generation, labels, annotations, finalizers, owners, deletion) — never its own status writes; task progress comes from the requeue the reconcile asked for |
//! | Machine | metadata and spec (bootstrap data secret name, failure domain) |
//! | Cluster | pause, `infrastructureRef`, `initialization`, deletion |
//! | ProxmoxCluster | spec, metadata, instance health (`ready`, `selected`, `message`), IP pools, failure domains, `initialization` — not machine counts |
//! | Secret (bootstrap) | any change, but only the machine whose CAPI Machine names it (`spec.bootstrap.dataSecretName`) and only while it waits for bootstrap data |

use crate::api::{ProxmoxCluster, ProxmoxMachine};
use crate::capi::core::Cluster;
use crate::conditions;
use crate::reasons::Reason;
use crate::watch_filter::{hash_json, hash_of, metadata_hash};

/// Relevance hash of a CAPI Cluster.
pub fn cluster_hash(c: &Cluster) -> u64 {
    hash_of(&(
        metadata_hash(c),
        c.spec.paused,
        hash_json(&c.spec.infrastructure_ref),
        hash_json(&c.status.as_ref().and_then(|s| s.initialization.as_ref())),
    ))
}

/// Relevance hash of a ProxmoxCluster: everything but the machine counts,
/// conditions' timestamps and `instancesReady` text.
pub fn proxmox_cluster_hash(pc: &ProxmoxCluster) -> u64 {
    let st = pc.status.as_ref();
    let instances: Vec<_> = st
        .map(|s| {
            s.instances
                .iter()
                .map(|i| (&i.name, i.ready, i.selected, &i.message, &i.nodes))
                .collect()
        })
        .unwrap_or_default();
    hash_of(&(
        metadata_hash(pc),
        instances,
        hash_json(&st.map(|s| &s.ip_pools)),
        hash_json(&st.map(|s| &s.failure_domains)),
        hash_json(&st.and_then(|s| s.initialization.as_ref())),
    ))
}

/// Whether a bootstrap Secret change concerns this machine: it is not
/// provisioned and waits for bootstrap data (or has no status yet).
pub fn waits_for_bootstrap_data(m: &ProxmoxMachine) -> bool {
    let Some(st) = m.status.as_ref() else {
        return true;
    };
    if st.initialization.as_ref().and_then(|i| i.provisioned) == Some(true) {
        return false;
    }
    conditions::get(&st.conditions, conditions::VM_PROVISIONED)
        .is_none_or(|c| c.reason == Reason::WaitingForBootstrapData(String::new()).code())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{InstanceStatus, ProxmoxClusterSpec, ProxmoxClusterStatus};

    fn pc(machines: u32, ready: bool) -> ProxmoxCluster {
        let mut pc = ProxmoxCluster::new("pc", ProxmoxClusterSpec::default());
        pc.metadata.generation = Some(1);
        pc.status = Some(ProxmoxClusterStatus {
            instances: vec![InstanceStatus {
                name: "dc-a".into(),
                ready,
                machines,
                ..InstanceStatus::default()
            }],
            ..ProxmoxClusterStatus::default()
        });
        pc
    }

    #[test]
    fn machine_counts_do_not_wake_machines_health_does() {
        assert_eq!(
            proxmox_cluster_hash(&pc(1, true)),
            proxmox_cluster_hash(&pc(7, true))
        );
        assert_ne!(
            proxmox_cluster_hash(&pc(1, true)),
            proxmox_cluster_hash(&pc(1, false))
        );
    }

    fn with_reason(reason: &str) -> ProxmoxMachine {
        let mut m = ProxmoxMachine::new("m", Default::default());
        m.status = Some(crate::api::ProxmoxMachineStatus {
            conditions: vec![crate::api::Condition {
                type_: conditions::VM_PROVISIONED.into(),
                status: "False".into(),
                reason: reason.into(),
                message: String::new(),
                observed_generation: None,
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
            }],
            ..Default::default()
        });
        m
    }

    #[test]
    fn only_machines_waiting_for_bootstrap_data_follow_secrets() {
        let m = ProxmoxMachine::new("m", Default::default());
        assert!(waits_for_bootstrap_data(&m), "no status yet");
        assert!(waits_for_bootstrap_data(&with_reason(
            "WaitingForBootstrapData"
        )));
        assert!(!waits_for_bootstrap_data(&with_reason("Cloning")));
    }
}
