//! The claim objects: how they are built and whose they are, and which
//! addresses collide in one layer-2 domain (pure).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use super::plan::{MACHINE_LABEL, WantedClaim};
use crate::api::ProxmoxMachine;
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::ipam::{IPAddressClaim, IpAddressClaimSpec};
use crate::error::Error;

/// One address in one layer-2 domain: `(address, bridge, VLAN)`; the
/// Proxmox cluster is compared by the caller.
pub type L2Address = (IpAddr, String, Option<u16>);

/// Addresses of `ours` that another machine (`(name, its addresses)`)
/// already holds in the same layer-2 domain (bridge and VLAN), with that
/// machine's name — docs/field-cases.md B16: overlapping pools of different IPAM
/// providers can hand out one address twice. The same address on another
/// VLAN or bridge is fine.
pub fn duplicates(
    ours: &[L2Address],
    others: &[(String, Vec<L2Address>)],
) -> Vec<(IpAddr, String)> {
    let mut out = Vec::new();
    for (addr, bridge, vlan) in ours {
        for (name, theirs) in others {
            if theirs
                .iter()
                .any(|(a, b, v)| a == addr && b == bridge && v == vlan)
            {
                out.push((*addr, name.clone()));
            }
        }
    }
    out
}

/// The owner reference to the ProxmoxMachine (controller,
/// `blockOwnerDeletion`: the claim moves and is collected with it).
///
/// # Errors
/// [`Error::Precondition`] when the machine has no UID (not stored yet).
pub fn owner_ref(machine: &ProxmoxMachine) -> Result<OwnerReference, Error> {
    let mut o = machine
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Precondition("ProxmoxMachine has no uid".into()))?;
    o.block_owner_deletion = Some(true);
    Ok(o)
}

/// The claim object for `wanted`.
///
/// # Errors
/// As [`owner_ref`].
pub fn claim_object(
    machine: &ProxmoxMachine,
    cluster_name: &str,
    wanted: &WantedClaim,
) -> Result<IPAddressClaim, Error> {
    let labels: BTreeMap<String, String> = [
        (CLUSTER_NAME_LABEL.to_string(), cluster_name.to_string()),
        (
            MACHINE_LABEL.to_string(),
            crate::names::label_value(&machine.name_any()),
        ),
    ]
    .into();
    Ok(IPAddressClaim {
        metadata: ObjectMeta {
            name: Some(wanted.name.clone()),
            namespace: machine.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref(machine)?]),
            ..ObjectMeta::default()
        },
        spec: IpAddressClaimSpec {
            cluster_name: Some(cluster_name.to_string()),
            pool_ref: wanted.pool.clone(),
        },
        status: None,
    })
}

/// Whether `claim` is owned by `machine` (by UID).
pub fn owned_by(claim: &IPAddressClaim, machine: &ProxmoxMachine) -> bool {
    let uid = machine.uid().unwrap_or_default();
    claim
        .owner_references()
        .iter()
        .any(|o| o.uid == uid && o.kind == ProxmoxMachine::kind(&()))
}
