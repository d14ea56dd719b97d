//! The Go provider (CAPMOX v0.9) as it ran before a takeover: what it
//! writes onto the objects of one namespace and the VMs of one simulated
//! datacenter (docs/migrating-from-capmox.md, "What CAPMOX writes on VMs
//! and objects"), so a scenario can hand a cluster it made to this
//! provider.
//!
//! A polling loop over the namespace, reading and writing our kinds through
//! `infrastructure.cluster.x-k8s.io/v1alpha2` (CAPMOX's version, so every
//! request goes through the conversion webhook):
//! - each ProxmoxCluster gets CAPMOX's finalizer, its `InClusterIPPool`
//!   `<name>-v4-icip` (controller-owned, annotated with the IP family and
//!   gateway metric, labelled `topology.kubernetes.io/proxmox-zone:
//!   default`), `status.inClusterIPPoolRef` and
//!   `status.initialization.provisioned`;
//! - each ProxmoxMachine whose CAPI Machine has bootstrap data gets
//!   CAPMOX's finalizer and zone label, the `IPAddressClaim`
//!   `<machine>-net0-00-inet` (controller-owned, annotated
//!   `pool-ref-counter: "0"` and `default-gateway: "true"`), and once the
//!   address is allocated a VM at the next free VMID on the template's
//!   node: named after the machine, the template's tags plus
//!   `ip_net0_<address>`, no ownership marker, running, `ide0` emptied (the
//!   bootstrap ISO already removed, as CAPMOX does once the Node joined).
//!   Then `spec.virtualMachineID`, `spec.providerID = proxmox://<SMBIOS
//!   uuid>` and the status CAPMOX writes (provisioned, node, addresses,
//!   `vmStatus: ready`), and the workload cluster's Node (what kubelet
//!   registers with `--provider-id=proxmox://<instance-id>`).
//!
//! VMs are made with the simulator's configuration-file path
//! ([`SimCluster::create_vm`]), not through its API: the takeover counts
//! API calls, and CAPMOX's own calls are not part of it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, ObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use pve_sim::{SimCluster, VmConfig};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::crds::Machine;
use crate::error::{E2eError, Result};
use crate::scenario;
use crate::standin::workload::WorkloadNodes;

/// CAPMOX's API version.
pub const V1ALPHA2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
/// CAPMOX's ProxmoxCluster finalizer.
pub const CLUSTER_FINALIZER: &str = "proxmoxcluster.infrastructure.cluster.x-k8s.io";
/// CAPMOX's ProxmoxMachine finalizer.
pub const MACHINE_FINALIZER: &str = "proxmoxmachine.infrastructure.cluster.x-k8s.io";
/// CAPMOX's zone label (on machines, pools and claims).
pub const ZONE_LABEL: &str = "topology.kubernetes.io/proxmox-zone";

/// CAPMOX's pool of the cluster-level `ipv4Config`
/// (`InClusterPoolFormat`: `<proxmoxcluster>-v4-icip`).
pub fn pool_name(cluster: &str) -> String {
    format!("{cluster}-v4-icip")
}

/// CAPMOX's claim of `net0` from the default pool (`IPAddressFormat`:
/// `<machine>-<device>-<offset, 2 digits>-inet`).
pub fn claim_name(machine: &str) -> String {
    format!("{machine}-net0-00-inet")
}

/// A VM CAPMOX made.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MadeVm {
    /// VMID (`spec.virtualMachineID`).
    pub vmid: u32,
    /// Proxmox node.
    pub node: String,
    /// SMBIOS UUID (`spec.providerID` = `proxmox://<uuid>`).
    pub uuid: String,
    /// `net0`'s IPv4 address from the claim.
    pub address: String,
}

/// The running CAPMOX stand-in.
pub struct CapmoxStandIn {
    task: Option<JoinHandle<()>>,
    made: Arc<Mutex<BTreeMap<String, MadeVm>>>,
}

impl std::fmt::Debug for CapmoxStandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapmoxStandIn").finish_non_exhaustive()
    }
}

impl CapmoxStandIn {
    /// Starts playing CAPMOX in `namespace` on the simulated datacenter
    /// `sim`, cloning from its first template, looking every `poll`.
    pub fn start(
        client: kube::Client,
        namespace: String,
        sim: SimCluster,
        nodes: Arc<WorkloadNodes>,
        poll: Duration,
    ) -> CapmoxStandIn {
        let made = Arc::new(Mutex::new(BTreeMap::new()));
        let mut state = Loop {
            client,
            namespace,
            sim,
            nodes,
            made: made.clone(),
        };
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = state.tick().await {
                    tracing::debug!(error = %e, "CAPMOX stand-in tick failed");
                }
                tokio::time::sleep(poll).await;
            }
        });
        CapmoxStandIn {
            task: Some(task),
            made,
        }
    }

    /// The VMs made so far, by machine name.
    pub fn made(&self) -> BTreeMap<String, MadeVm> {
        self.made.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Stops the loop (CAPMOX's Deployment is deleted).
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for CapmoxStandIn {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// The `v1alpha2` resource of one of our kinds.
pub fn resource(kind: &str) -> ApiResource {
    let gvk = GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1alpha2", kind);
    ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()))
}

struct Loop {
    client: kube::Client,
    namespace: String,
    sim: SimCluster,
    nodes: Arc<WorkloadNodes>,
    made: Arc<Mutex<BTreeMap<String, MadeVm>>>,
}

fn owner_ref(api_version: &str, kind: &str, meta: &ObjectMeta) -> Value {
    json!({
        "apiVersion": api_version, "kind": kind,
        "name": meta.name, "uid": meta.uid,
        "controller": true, "blockOwnerDeletion": true,
    })
}

fn with_finalizer(meta: &ObjectMeta, finalizer: &str) -> Option<Vec<String>> {
    let mut f = meta.finalizers.clone().unwrap_or_default();
    if f.iter().any(|x| x == finalizer) {
        return None;
    }
    f.push(finalizer.to_string());
    Some(f)
}

impl Loop {
    fn api(&self, kind: &str) -> Api<DynamicObject> {
        Api::namespaced_with(self.client.clone(), &self.namespace, &resource(kind))
    }

    async fn tick(&mut self) -> Result<()> {
        for pc in self
            .api("ProxmoxCluster")
            .list(&ListParams::default())
            .await?
        {
            self.cluster(&pc).await?;
        }
        for pm in self
            .api("ProxmoxMachine")
            .list(&ListParams::default())
            .await?
        {
            if let Err(e) = self.machine(&pm).await {
                tracing::debug!(machine = %pm.name_any(), error = %e, "CAPMOX stand-in");
            }
        }
        Ok(())
    }

    async fn cluster(&self, pc: &DynamicObject) -> Result<()> {
        if pc.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let name = pc.name_any();
        let api = self.api("ProxmoxCluster");
        let pp = PatchParams::default();
        if let Some(f) = with_finalizer(&pc.metadata, CLUSTER_FINALIZER) {
            api.patch(
                &name,
                &pp,
                &Patch::Merge(json!({"metadata": {"finalizers": f}})),
            )
            .await?;
        }
        let v4 = pc
            .data
            .pointer("/spec/ipv4Config")
            .cloned()
            .ok_or_else(|| E2eError::Contract(format!("ProxmoxCluster {name}: no ipv4Config")))?;
        let pool = json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
            "metadata": {
                "name": pool_name(&name),
                "annotations": {
                    "ipam.capmox.cluster.x-k8s.io/ip-family": "ipv4",
                    "ipam.capmox.cluster.x-k8s.io/gateway-metric": "",
                },
                "labels": {ZONE_LABEL: "default"},
                "ownerReferences": [owner_ref(V1ALPHA2, "ProxmoxCluster", &pc.metadata)],
            },
            "spec": {"addresses": v4["addresses"], "prefix": v4["prefix"], "gateway": v4["gateway"]},
        });
        scenario::apply_value(&self.client, &self.namespace, pool).await?;
        if pc.data.pointer("/status/initialization/provisioned") != Some(&json!(true)) {
            let status = json!({"status": {
                "initialization": {"provisioned": true},
                "inClusterIPPoolRef": [{"name": pool_name(&name)}],
            }});
            api.patch_status(&name, &pp, &Patch::Merge(status)).await?;
        }
        Ok(())
    }

    async fn machine(&self, pm: &DynamicObject) -> Result<()> {
        let name = pm.name_any();
        if pm.metadata.deletion_timestamp.is_some()
            || pm.data.pointer("/spec/virtualMachineID").is_some()
        {
            return Ok(());
        }
        let Some(owner) = pm
            .owner_references()
            .iter()
            .find(|o| o.kind == "Machine")
            .map(|o| o.name.clone())
        else {
            return Ok(());
        };
        let machine = Api::<Machine>::namespaced(self.client.clone(), &self.namespace)
            .get(&owner)
            .await?;
        if machine.spec.bootstrap.data_secret_name.is_none() {
            return Ok(());
        }
        let cluster = machine.spec.cluster_name.clone();
        let api = self.api("ProxmoxMachine");
        let pp = PatchParams::default();
        if let Some(f) = with_finalizer(&pm.metadata, MACHINE_FINALIZER) {
            api.patch(
                &name,
                &pp,
                &Patch::Merge(
                    json!({"metadata": {"finalizers": f, "labels": {ZONE_LABEL: "default"}}}),
                ),
            )
            .await?;
        }
        let Some(address) = self.claimed_address(pm, &cluster).await? else {
            return Ok(());
        };
        let made = self.make_vm(pm, &address)?;
        // Spec first (CAPMOX's VM lookup), then the status it reports.
        let spec = json!({"spec": {
            "virtualMachineID": made.vmid,
            "providerID": format!("proxmox://{}", made.uuid),
        }});
        api.patch(&name, &pp, &Patch::Merge(spec)).await?;
        let status = json!({"status": {
            "initialization": {"provisioned": true},
            "bootstrapDataProvided": true,
            "proxmoxNode": made.node,
            "vmStatus": "ready",
            "ipAddresses": [{"net": "net0", "ipv4": [made.address]}],
            "addresses": [
                {"type": "Hostname", "address": name},
                {"type": "InternalIP", "address": made.address},
            ],
        }});
        api.patch_status(&name, &pp, &Patch::Merge(status)).await?;
        self.nodes.create(node(&name, &made)).await?;
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, made);
        Ok(())
    }

    /// Makes sure the claim exists; its address once allocated.
    async fn claimed_address(&self, pm: &DynamicObject, cluster: &str) -> Result<Option<String>> {
        let name = pm.name_any();
        let pc = pm
            .labels()
            .get("cluster.x-k8s.io/cluster-name")
            .cloned()
            .unwrap_or_else(|| cluster.to_string());
        let claims: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &ApiResource::from_gvk(&GroupVersionKind::gvk(
                "ipam.cluster.x-k8s.io",
                "v1beta2",
                "IPAddressClaim",
            )),
        );
        let claim = match claims.get_opt(&claim_name(&name)).await? {
            Some(c) => c,
            None => {
                let doc = json!({
                    "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
                    "metadata": {
                        "name": claim_name(&name),
                        "labels": {"cluster.x-k8s.io/cluster-name": cluster, ZONE_LABEL: "default"},
                        "annotations": {
                            "ipam.capmox.cluster.x-k8s.io/pool-ref-counter": "0",
                            "ipam.capmox.cluster.x-k8s.io/default-gateway": "true",
                        },
                        "ownerReferences": [owner_ref(V1ALPHA2, "ProxmoxMachine", &pm.metadata)],
                    },
                    "spec": {"poolRef": {
                        "apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool",
                        "name": pool_name(&pc),
                    }},
                });
                scenario::apply_value(&self.client, &self.namespace, doc).await?;
                return Ok(None);
            }
        };
        let Some(addr_name) = claim
            .data
            .pointer("/status/addressRef/name")
            .and_then(Value::as_str)
        else {
            return Ok(None);
        };
        let addresses: Api<DynamicObject> = Api::namespaced_with(
            self.client.clone(),
            &self.namespace,
            &ApiResource::from_gvk(&GroupVersionKind::gvk(
                "ipam.cluster.x-k8s.io",
                "v1beta2",
                "IPAddress",
            )),
        );
        Ok(addresses.get_opt(addr_name).await?.and_then(|a| {
            a.data
                .pointer("/spec/address")?
                .as_str()
                .map(str::to_string)
        }))
    }

    /// The VM CAPMOX leaves for `pm` (made once per machine name).
    fn make_vm(&self, pm: &DynamicObject, address: &str) -> Result<MadeVm> {
        let name = pm.name_any();
        if let Some(m) = self
            .made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&name)
        {
            return Ok(m.clone());
        }
        let template = self
            .sim
            .config()
            .templates
            .first()
            .cloned()
            .ok_or_else(|| E2eError::Sim(format!("{} has no template", self.sim.name())))?;
        let spec = |p: &str| {
            pm.data
                .pointer(&format!("/spec/{p}"))
                .and_then(Value::as_u64)
        };
        // `/cluster/nextid`: the lowest free VMID from 100.
        let taken: Vec<u32> = self.sim.vms().iter().map(|v| v.vmid).collect();
        let vmid = (100..)
            .find(|id| !taken.contains(id))
            .ok_or_else(|| E2eError::Sim("no free VMID".into()))?;
        let mut tags = template.tags.clone().unwrap_or_default();
        tags.push_str(&format!(";ip_net0_{address}"));
        let mut extra = template.extra.clone();
        extra.insert(
            "sockets".into(),
            spec("numSockets").unwrap_or(1).to_string(),
        );
        extra.insert("ide0".into(), "none,media=cdrom".into());
        extra.insert("boot".into(), "order=scsi0;ide0".into());
        let vm = VmConfig {
            vmid,
            name: name.clone(),
            node: template.node.clone(),
            tags: Some(tags),
            memory_mib: spec("memoryMiB").unwrap_or(template.memory_mib),
            cores: spec("numCores")
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or(template.cores),
            disk_gib: spec("disks/bootVolume/sizeGb").unwrap_or(template.disk_gib),
            running: true,
            extra,
            ..template
        };
        self.sim
            .create_vm(vm, false)
            .map_err(|e| E2eError::Sim(e.to_string()))?;
        let made_vm = self
            .sim
            .vm(vmid)
            .ok_or_else(|| E2eError::Sim(format!("VM {vmid} vanished")))?;
        let uuid = made_vm
            .config
            .get("smbios1")
            .and_then(|s| s.strip_prefix("uuid="))
            .map(str::to_string)
            .ok_or_else(|| E2eError::Sim(format!("VM {vmid} has no SMBIOS uuid")))?;
        let made = MadeVm {
            vmid,
            node: made_vm.node,
            uuid,
            address: address.to_string(),
        };
        self.made
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name, made.clone());
        Ok(made)
    }
}

/// The Node kubelet registered for a CAPMOX machine.
fn node(name: &str, made: &MadeVm) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name.to_string()),
                ("kubernetes.io/os".to_string(), "linux".to_string()),
            ])),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(format!("proxmox://{}", made.uuid)),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: made.address.clone(),
                },
                NodeAddress {
                    type_: "Hostname".into(),
                    address: name.to_string(),
                },
            ]),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("CAPMOX stand-in: the VM booted".into()),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_capmox_formats() {
        // InClusterPoolFormat / IPAddressFormat of CAPMOX v0.9.
        assert_eq!(pool_name("wl1"), "wl1-v4-icip");
        assert_eq!(
            claim_name("wl1-control-plane-abcde"),
            "wl1-control-plane-abcde-net0-00-inet"
        );
    }

    #[test]
    fn finalizer_added_once() {
        let meta = ObjectMeta {
            finalizers: Some(vec!["a".into()]),
            ..ObjectMeta::default()
        };
        assert_eq!(
            with_finalizer(&meta, "b"),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(with_finalizer(&meta, "a"), None);
    }

    #[test]
    fn v1alpha2_resources_are_plural_lowercase() {
        let r = resource("ProxmoxMachine");
        assert_eq!(r.plural, "proxmoxmachines");
        assert_eq!(r.api_version, V1ALPHA2);
    }
}
