//! What scenarios and the demo look at: one row per Machine (joined with
//! its ProxmoxMachine), and the state of the simulated datacenters (VMs and
//! uploaded ISOs).

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use pve_sim::{SimCluster, Simulator, VmSnapshot, VolumeSnapshot};
use serde_json::Value;

use crate::crds::Machine;
use crate::error::Result;
use crate::standin::meta::CONTROL_PLANE_LABEL;

/// The ProxmoxMachine API resource (`infrastructure.cluster.x-k8s.io/v1alpha3`).
pub fn proxmox_machine_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        crate::crds::INFRASTRUCTURE_GROUP,
        "v1alpha3",
        "ProxmoxMachine",
    ))
}

/// The ProxmoxCluster API resource (`infrastructure.cluster.x-k8s.io/v1alpha3`).
pub fn proxmox_cluster_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        crate::crds::INFRASTRUCTURE_GROUP,
        "v1alpha3",
        "ProxmoxCluster",
    ))
}

/// One Machine as the demo table and the scenarios see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineRow {
    /// Machine name.
    pub name: String,
    /// Whether KubeadmControlPlane owns it.
    pub control_plane: bool,
    /// `Machine.spec.failureDomain` (requested).
    pub failure_domain: Option<String>,
    /// `ProxmoxMachine.spec.instance` (where the VM is).
    pub instance: Option<String>,
    /// `ProxmoxMachine.spec.virtualMachineID`.
    pub vmid: Option<u32>,
    /// `ProxmoxMachine.status.proxmoxNode`.
    pub proxmox_node: Option<String>,
    /// `Machine.status.nodeRef.name` (the Kubernetes Node).
    pub node: Option<String>,
    /// First `InternalIP` of the Machine (else of the ProxmoxMachine).
    pub address: Option<String>,
    /// `Machine.status.phase`.
    pub phase: String,
    /// `ProxmoxMachine.status.initialization.provisioned`.
    pub provisioned: bool,
    /// `Machine.spec.providerID`.
    pub provider_id: Option<String>,
    /// The ProxmoxMachine's `Ready` condition reason (why it waits).
    pub reason: Option<String>,
    /// Being deleted.
    pub deleting: bool,
}

impl MachineRow {
    /// Provisioned, and (when `need_node`) its Node has joined.
    pub fn up(&self, need_node: bool) -> bool {
        self.provisioned && (!need_node || self.node.is_some())
    }

    /// `control-plane` or `worker`.
    pub fn role(&self) -> &'static str {
        if self.control_plane {
            "control-plane"
        } else {
            "worker"
        }
    }
}

fn internal_ip(addresses: Option<&Value>) -> Option<String> {
    addresses?
        .as_array()?
        .iter()
        .find(|a| a.get("type").and_then(Value::as_str) == Some("InternalIP"))
        .and_then(|a| a.get("address").and_then(Value::as_str))
        .map(str::to_string)
}

/// Every Machine of `namespace` joined with its ProxmoxMachine, by name.
///
/// # Errors
/// [`crate::E2eError::Kube`].
pub async fn machine_rows(client: &kube::Client, namespace: &str) -> Result<Vec<MachineRow>> {
    let machines = Api::<Machine>::namespaced(client.clone(), namespace)
        .list(&ListParams::default())
        .await?
        .items;
    let pxms: BTreeMap<String, DynamicObject> = Api::<DynamicObject>::namespaced_with(
        client.clone(),
        namespace,
        &proxmox_machine_resource(),
    )
    .list(&ListParams::default())
    .await?
    .items
    .into_iter()
    .map(|p| (p.name_any(), p))
    .collect();
    let mut rows: Vec<MachineRow> = machines
        .iter()
        .map(|m| {
            let p = pxms.get(&m.spec.infrastructure_ref.name);
            let pf = |ptr: &str| p.and_then(|p| p.data.pointer(ptr));
            let machine_status = serde_json::to_value(&m.status).unwrap_or(Value::Null);
            MachineRow {
                name: m.name_any(),
                control_plane: m.labels().contains_key(CONTROL_PLANE_LABEL),
                failure_domain: m.failure_domain().map(str::to_string),
                instance: pf("/spec/instance")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                vmid: pf("/spec/virtualMachineID")
                    .and_then(Value::as_u64)
                    .and_then(|v| u32::try_from(v).ok()),
                proxmox_node: pf("/status/proxmoxNode")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                node: m.node_name().map(str::to_string),
                address: internal_ip(machine_status.get("addresses"))
                    .or_else(|| internal_ip(pf("/status/addresses"))),
                phase: m.phase().to_string(),
                provisioned: pf("/status/initialization/provisioned").and_then(Value::as_bool)
                    == Some(true),
                provider_id: m.spec.provider_id.clone(),
                reason: pf("/status/conditions")
                    .and_then(Value::as_array)
                    .and_then(|cs| {
                        cs.iter()
                            .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
                            .and_then(|c| c.get("reason").and_then(Value::as_str))
                            .map(str::to_string)
                    }),
                deleting: m.metadata.deletion_timestamp.is_some(),
            }
        })
        .collect();
    rows.sort_by(|a, b| (!a.control_plane, &a.name).cmp(&(!b.control_plane, &b.name)));
    Ok(rows)
}

/// Counts of rows per instance (machines with no instance yet under `-`).
pub fn per_instance(rows: &[MachineRow]) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for r in rows {
        *out.entry(r.instance.clone().unwrap_or_else(|| "-".into()))
            .or_default() += 1;
    }
    out
}

/// A one-line summary of rows for wait messages.
pub fn summary(rows: &[MachineRow]) -> String {
    if rows.is_empty() {
        return "no machines".into();
    }
    rows.iter()
        .map(|r| {
            format!(
                "{}[{} fd={} inst={} vmid={} phase={} prov={}{}]",
                r.name,
                if r.control_plane { "cp" } else { "w" },
                r.failure_domain.as_deref().unwrap_or("-"),
                r.instance.as_deref().unwrap_or("-"),
                r.vmid.map_or("-".into(), |v| v.to_string()),
                r.phase,
                r.provisioned,
                r.reason
                    .as_deref()
                    .map(|x| format!(" {x}"))
                    .unwrap_or_default()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The non-template VMs of a simulated datacenter.
pub fn vms(cluster: &SimCluster) -> Vec<VmSnapshot> {
    cluster.vms().into_iter().filter(|v| !v.template).collect()
}

/// Every ISO volume of a simulated datacenter (shared storages once).
pub fn isos(cluster: &SimCluster) -> Vec<VolumeSnapshot> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for node in cluster.nodes() {
        for storage in &cluster.config().storages {
            if !storage.content.iter().any(|c| c == "iso") {
                continue;
            }
            for v in cluster.storage_content(&node.name, &storage.name) {
                if v.content == "iso"
                    && seen.insert((
                        if storage.shared {
                            String::new()
                        } else {
                            node.name.clone()
                        },
                        v.volid.clone(),
                    ))
                {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// Non-template VMs per datacenter.
pub fn vm_counts(sim: &Simulator) -> BTreeMap<String, usize> {
    sim.clusters()
        .iter()
        .map(|c| (c.name().to_string(), vms(c).len()))
        .collect()
}

/// ISOs per datacenter.
pub fn iso_counts(sim: &Simulator) -> BTreeMap<String, usize> {
    sim.clusters()
        .iter()
        .map(|c| (c.name().to_string(), isos(c).len()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_instance_counts_and_summary() {
        let rows = vec![
            MachineRow {
                name: "a".into(),
                control_plane: true,
                instance: Some("dc-a".into()),
                phase: "Running".into(),
                ..MachineRow::default()
            },
            MachineRow {
                name: "b".into(),
                instance: Some("dc-a".into()),
                ..MachineRow::default()
            },
            MachineRow {
                name: "c".into(),
                ..MachineRow::default()
            },
        ];
        assert_eq!(
            per_instance(&rows),
            BTreeMap::from([("-".to_string(), 1), ("dc-a".to_string(), 2)])
        );
        assert!(summary(&rows).starts_with("a[cp fd=- inst=dc-a vmid=- phase=Running prov=false]"));
        assert_eq!(rows[0].role(), "control-plane");
        assert_eq!(
            internal_ip(Some(&serde_json::json!([{"type": "Hostname", "address": "h"}, {"type": "InternalIP", "address": "10.0.0.1"}])))
                .as_deref(),
            Some("10.0.0.1")
        );
    }
}
