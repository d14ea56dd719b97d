//! Kubelets for the Proxmox simulator's VMs: a `Node` per ProxmoxMachine
//! whose VM has booted, with the providerID kubelet (or the Proxmox cloud
//! controller manager) would set.
//!
//! A small polling loop (the simulator has no watch): for every ProxmoxMachine
//! with `spec.instance` and `spec.virtualMachineID`, it finds the simulated
//! cluster behind the instance (the instance's credentials Secret `url`),
//! and while the VM runs it takes `instance-id` from the `meta-data` of the
//! NoCloud seed the guest read when it booted (what cloud-init hands
//! kubelet; the simulator keeps it after the controller ejects and deletes
//! the ISO, as a real guest keeps what it read). Once the guest agent answers — probed over
//! the real API with the simulator's token, first at the end of the cluster's
//! configured boot time — it registers a Node named after the machine with
//! `spec.providerID`:
//! - `proxmox://<instance-id>` (providerIDFormat `UUID`, kubelet's
//!   `--provider-id=proxmox://{{ ds.meta_data.instance_id }}`), or
//! - `proxmox://<instance>/<vmid>` (`InstanceVMID`, the Proxmox CCM's form,
//!   which also sets `topology.kubernetes.io/region` = instance and `zone` =
//!   Proxmox node).
//!
//! An Ignition guest (Flatcar) takes its providerID from
//! `COREOS_CUSTOM_PROVIDER_ID` in the `/etc/proxmox-env` its config writes
//! (the flatcar flavor's kubelet `--provider-id`); without it, or when the
//! guest could not use its bootstrap data, no Node registers.
//!
//! Nodes are never deleted here: CAPI's Machine controller does that when the
//! Machine goes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus, Secret};
use kube::ResourceExt;
use kube::api::{Api, DynamicObject, ObjectMeta};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use pve_sim::boot::GuestBoot;
use pve_sim::{AgentState, NoCloudSeed, SimCluster, VmSnapshot};
use serde_json::Value;
use tokio::task::JoinHandle;

use super::kinds::Kinds;
use super::meta::{self, CLUSTER_NAME_LABEL};
use super::workload::WorkloadNodes;
use crate::crds::{Cluster, INFRASTRUCTURE_GROUP};
use crate::error::{E2eError, Result};

/// How the kubelet stand-in runs.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Watch only this namespace (`None`: all).
    pub namespace: Option<String>,
    /// Poll period.
    pub poll: Duration,
    /// The simulator's time scale (its boot time is multiplied by it).
    pub time_scale: f64,
    /// The manager's default credentials Secret `(namespace, name)`, for
    /// ProxmoxClusters without `spec.credentialsRef`.
    pub default_credentials: Option<(String, String)>,
}

/// A NoCloud seed as the VM booted with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeenSeed {
    /// The instance (failure domain) of the VM.
    pub instance: String,
    /// VMID.
    pub vmid: u32,
    /// The ISO volume (`storage:iso/<file>.iso`).
    pub volid: String,
    /// The seed's files.
    pub seed: NoCloudSeed,
}

/// The seeds the kubelets booted with, by machine name (shared).
pub type Seeds = Arc<Mutex<BTreeMap<String, SeenSeed>>>;

/// What the stand-in knows about one machine.
#[derive(Debug, Default)]
struct Seen {
    vmid: u32,
    target: Option<Target>,
    first_running: Option<Instant>,
    instance_id: Option<String>,
    /// How the guest took its seed.
    boot: Option<GuestBoot>,
    /// For an Ignition guest: `COREOS_CUSTOM_PROVIDER_ID` of the
    /// `/etc/proxmox-env` its config writes (the Flatcar flavor's kubelet
    /// `--provider-id`).
    ignition_provider_id: Option<String>,
    registered: bool,
}

/// The running kubelet stand-in.
pub struct NodeStandIn {
    task: Option<JoinHandle<()>>,
    seeds: Seeds,
}

impl std::fmt::Debug for NodeStandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStandIn").finish_non_exhaustive()
    }
}

impl NodeStandIn {
    /// Starts the loop over the simulator's `clusters`.
    pub fn start(
        client: kube::Client,
        clusters: Vec<SimCluster>,
        nodes: Arc<WorkloadNodes>,
        opts: NodeOptions,
    ) -> NodeStandIn {
        let seeds: Seeds = Arc::new(Mutex::new(BTreeMap::new()));
        let mut state = Loop {
            seeds: seeds.clone(),
            kinds: Kinds::new(client.clone()),
            client,
            clusters,
            nodes,
            opts,
            seen: HashMap::new(),
            pve: HashMap::new(),
            machines: None,
        };
        let task = tokio::spawn(async move {
            loop {
                if let Err(e) = state.tick().await {
                    tracing::debug!(error = %e, "kubelet stand-in tick failed");
                }
                tokio::time::sleep(state.opts.poll).await;
            }
        });
        NodeStandIn {
            task: Some(task),
            seeds,
        }
    }

    /// The seeds the VMs booted with, by machine name.
    pub fn seeds(&self) -> Seeds {
        self.seeds.clone()
    }

    /// Stops the loop.
    pub async fn shutdown(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for NodeStandIn {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// A ProxmoxMachine store kept by a reflector task, aborted with it.
struct Watched {
    store: Store<DynamicObject>,
    task: JoinHandle<()>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Loop {
    client: kube::Client,
    kinds: Kinds,
    /// The ProxmoxMachines, watched (started on the first tick: the kind
    /// must be installed).
    machines: Option<Watched>,
    clusters: Vec<SimCluster>,
    nodes: Arc<WorkloadNodes>,
    opts: NodeOptions,
    /// Keyed by ProxmoxMachine UID.
    seen: HashMap<String, Seen>,
    /// A client per simulated cluster, with the token secret it was built with.
    pve: HashMap<String, (String, pve_client::PveClient)>,
    /// Seeds seen, by machine name.
    seeds: Seeds,
}

/// What the Node of one machine looks like.
#[derive(Clone, Debug)]
struct Target {
    instance: String,
    sim: SimCluster,
    provider_format: String,
}

impl Loop {
    /// The ProxmoxMachines as the watch last delivered them; the first call
    /// starts the watch and waits for its initial list.
    async fn machines(&mut self) -> Result<Vec<Arc<DynamicObject>>> {
        if self.machines.is_none() {
            let ar = self
                .kinds
                .resolve(INFRASTRUCTURE_GROUP, "ProxmoxMachine")
                .await?;
            let api: Api<DynamicObject> = match &self.opts.namespace {
                Some(ns) => Api::namespaced_with(self.client.clone(), ns, &ar),
                None => Api::all_with(self.client.clone(), &ar),
            };
            let writer = reflector::store::Writer::new(ar);
            let store = writer.as_reader();
            let stream = reflector::reflector(
                writer,
                watcher::watcher(api, watcher::Config::default()).default_backoff(),
            );
            let task = tokio::spawn(stream.for_each(|_| async {}));
            self.machines = Some(Watched { store, task });
        }
        let Some(watched) = &self.machines else {
            return Ok(Vec::new());
        };
        watched
            .store
            .wait_until_ready()
            .await
            .map_err(|e| E2eError::Contract(format!("ProxmoxMachine watch ended: {e}")))?;
        Ok(watched.store.state())
    }

    async fn tick(&mut self) -> Result<()> {
        let machines = self.machines().await?;
        let live: Vec<String> = machines
            .iter()
            .filter_map(|m| m.metadata.uid.clone())
            .collect();
        self.seen.retain(|uid, _| live.contains(uid));
        for m in machines {
            if let Err(e) = self.machine(&m).await {
                tracing::debug!(machine = %m.name_any(), error = %e, "kubelet stand-in");
            }
        }
        Ok(())
    }

    async fn machine(&mut self, m: &DynamicObject) -> Result<()> {
        let uid = m.metadata.uid.clone().unwrap_or_default();
        let (Some(instance), Some(vmid)) = (
            m.data.pointer("/spec/instance").and_then(Value::as_str),
            m.data
                .pointer("/spec/virtualMachineID")
                .and_then(Value::as_u64)
                .and_then(|v| u32::try_from(v).ok()),
        ) else {
            return Ok(());
        };
        if meta::is_deleting(&m.metadata) {
            return Ok(());
        }
        let seen = self.seen.entry(uid.clone()).or_default();
        if seen.registered && seen.vmid == vmid {
            return Ok(());
        }
        if seen.vmid != vmid {
            *seen = Seen {
                vmid,
                ..Seen::default()
            };
        }
        let target = match seen.target.clone() {
            Some(t) => t,
            None => {
                let t = self.target(m, instance).await?;
                if let Some(s) = self.seen.get_mut(&uid) {
                    s.target = Some(t.clone());
                }
                t
            }
        };
        let Some(vm) = target
            .sim
            .vm(vmid)
            .filter(|v| !v.template && v.status == "running")
        else {
            return Ok(());
        };
        let boot = target.sim.config().timings.boot * self.opts.time_scale;
        let seen = self.seen.entry(uid.clone()).or_default();
        let first = *seen.first_running.get_or_insert_with(Instant::now);
        if seen.instance_id.is_none()
            && let Some((volid, seed)) = vm.boot_seed.clone()
        {
            seen.instance_id = instance_id(&seed.meta_data);
            seen.boot = Some(pve_sim::boot::classify(&seed.user_data));
            seen.ignition_provider_id =
                pve_sim::boot::ignition_file(&seed.user_data, "/etc/proxmox-env")
                    .and_then(|env| env_value(&env, "COREOS_CUSTOM_PROVIDER_ID"));
            let record = SeenSeed {
                instance: instance.to_string(),
                vmid,
                volid,
                seed,
            };
            self.seeds
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(m.name_any(), record);
        }
        let Some(instance_id) = seen.instance_id.clone() else {
            return Ok(());
        };
        let agent_due = match vm.agent {
            AgentState::NotRunning => false,
            AgentState::Running => true,
            AgentState::Auto => first.elapsed() >= Duration::from_secs_f64(boot.max(0.0)),
        };
        if !agent_due {
            return Ok(());
        }
        // A guest that could not use its bootstrap data never starts kubelet;
        // an Ignition guest's kubelet takes its providerID from the config.
        let provider_id = match (&seen.boot, &seen.ignition_provider_id) {
            (Some(GuestBoot::Failed(_)), _) | (Some(GuestBoot::Ignition(_)), None) => {
                return Ok(());
            }
            (Some(GuestBoot::Ignition(_)), Some(p)) => p.clone(),
            _ => provider_id(&target.provider_format, &instance_id, instance, vmid),
        };
        let addresses = self.agent_addresses(&target.sim, &vm).await?;
        let node = build_node(&m.name_any(), &provider_id, &target, &vm, &addresses);
        self.nodes.create(node).await?;
        if let Some(s) = self.seen.get_mut(&uid) {
            s.registered = true;
        }
        tracing::info!(machine = %m.name_any(), %provider_id, "kubelet registered its Node");
        Ok(())
    }

    /// The simulated cluster and providerID format behind a machine's instance.
    async fn target(&self, m: &DynamicObject, instance: &str) -> Result<Target> {
        let ns = m.namespace().unwrap_or_default();
        let cluster_name = meta::label(&m.metadata, CLUSTER_NAME_LABEL).ok_or_else(|| {
            E2eError::Contract(format!("{} has no cluster-name label", m.name_any()))
        })?;
        let cluster = Api::<Cluster>::namespaced(self.client.clone(), &ns)
            .get(cluster_name)
            .await?;
        let infra_ref = cluster.spec.infrastructure_ref.ok_or_else(|| {
            E2eError::Contract(format!("Cluster {cluster_name} has no infrastructureRef"))
        })?;
        let pxc = self
            .kinds
            .api(&ns, &infra_ref.api_group, &infra_ref.kind)
            .await?
            .get(&infra_ref.name)
            .await?;
        let instances = pxc
            .data
            .pointer("/spec/settings/instances")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let secret_ref = instances
            .iter()
            .find(|i| i.get("name").and_then(Value::as_str) == Some(instance))
            .and_then(|i| i.get("credentialsRef"))
            .or_else(|| pxc.data.pointer("/spec/credentialsRef"));
        let (secret_ns, secret_name) = match secret_ref {
            Some(r) => (
                r.get("namespace")
                    .and_then(Value::as_str)
                    .unwrap_or(&ns)
                    .to_string(),
                r.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            ),
            None => self.opts.default_credentials.clone().ok_or_else(|| {
                E2eError::Contract(format!("instance {instance} has no credentials"))
            })?,
        };
        let secret = Api::<Secret>::namespaced(self.client.clone(), &secret_ns)
            .get(&secret_name)
            .await?;
        let url = secret_value(&secret, "url").unwrap_or_default();
        let sim = self
            .clusters
            .iter()
            .find(|c| same_origin(&c.url(), &url))
            .cloned()
            .ok_or_else(|| E2eError::Sim(format!("no simulated cluster serves {url}")))?;
        let provider_format = pxc
            .data
            .pointer("/spec/providerIDFormat")
            .and_then(Value::as_str)
            .unwrap_or("UUID")
            .to_string();
        Ok(Target {
            instance: instance.to_string(),
            sim,
            provider_format,
        })
    }

    /// The guest's global addresses, from the agent (errors while it boots).
    async fn agent_addresses(&mut self, sim: &SimCluster, vm: &VmSnapshot) -> Result<Vec<String>> {
        let secret = sim.token_secret();
        let stale = self.pve.get(sim.name()).is_none_or(|(s, _)| *s != secret);
        if stale {
            let client = pve_client_for(sim, &secret)?;
            self.pve.insert(sim.name().to_string(), (secret, client));
        }
        let (_, client) = self
            .pve
            .get(sim.name())
            .ok_or_else(|| E2eError::Sim("client cache".into()))?;
        let node =
            pve_client::NodeName::new(vm.node.clone()).map_err(|e| E2eError::Sim(e.to_string()))?;
        let vmid = pve_client::VmId::new(vm.vmid).map_err(|e| E2eError::Sim(e.to_string()))?;
        let ifaces = client
            .agent_network_interfaces(&node, vmid)
            .await
            .map_err(|e| E2eError::Sim(e.to_string()))?;
        Ok(ifaces
            .iter()
            .flat_map(|i| i.ip_addresses.iter())
            .filter(|a| a.is_global())
            .filter_map(|a| a.addr().map(|a| a.to_string()))
            .collect())
    }
}

fn pve_client_for(sim: &SimCluster, secret: &str) -> Result<pve_client::PveClient> {
    let err = |e: String| E2eError::Sim(e);
    let url = pve_client::ApiUrl::parse(&sim.url()).map_err(|e| err(e.to_string()))?;
    let auth = pve_client::Auth::token(&sim.token_id(), secret.to_string())
        .map_err(|e| err(e.to_string()))?;
    let config = pve_client::ClientConfig::new(sim.name(), url, auth).with_tls(
        pve_client::TlsMode::Verify {
            ca_pem: Some(sim.ca_pem()),
        },
    );
    pve_client::PveClient::new(config).map_err(|e| err(e.to_string()))
}

/// A Secret key as text (from `data`, or `stringData` on servers that keep it).
pub fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|ByteString(b)| String::from_utf8_lossy(b).into_owned())
        .or_else(|| {
            secret
                .string_data
                .as_ref()
                .and_then(|d| d.get(key).cloned())
        })
}

/// Whether two URLs have the same scheme, host and port (paths ignored).
pub fn same_origin(a: &str, b: &str) -> bool {
    fn origin(u: &str) -> &str {
        let rest = u.find("://").map_or(0, |i| i + 3);
        u[rest..].find('/').map_or(u, |i| &u[..rest + i])
    }
    !a.is_empty() && origin(a).eq_ignore_ascii_case(origin(b))
}

/// `instance-id` from NoCloud `meta-data` (YAML).
pub fn instance_id(meta_data: &str) -> Option<String> {
    let doc: Value = serde_saphyr::from_str(meta_data).ok()?;
    doc.get("instance-id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// The value of `key` in an environment file (`KEY=value` lines).
pub fn env_value(env: &str, key: &str) -> Option<String> {
    env.lines()
        .filter_map(|l| l.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The providerID kubelet (`UUID`) or the Proxmox CCM (`InstanceVMID`) sets.
pub fn provider_id(format: &str, instance_id: &str, instance: &str, vmid: u32) -> String {
    if format == "InstanceVMID" {
        format!("proxmox://{instance}/{vmid}")
    } else {
        format!("proxmox://{instance_id}")
    }
}

fn build_node(
    name: &str,
    provider_id: &str,
    target: &Target,
    vm: &VmSnapshot,
    addresses: &[String],
) -> Node {
    let mut labels = BTreeMap::from([
        ("kubernetes.io/hostname".to_string(), name.to_string()),
        ("kubernetes.io/os".to_string(), "linux".to_string()),
    ]);
    if target.provider_format == "InstanceVMID" {
        labels.insert(
            "topology.kubernetes.io/region".into(),
            target.instance.clone(),
        );
        labels.insert("topology.kubernetes.io/zone".into(), vm.node.clone());
    }
    let mut node_addresses: Vec<NodeAddress> = addresses
        .iter()
        .map(|a| NodeAddress {
            type_: "InternalIP".into(),
            address: a.clone(),
        })
        .collect();
    node_addresses.push(NodeAddress {
        type_: "Hostname".into(),
        address: name.to_string(),
    });
    Node {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.to_string()),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            addresses: Some(node_addresses),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                message: Some("kubelet stand-in: the VM booted".into()),
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
    fn provider_ids_as_kubelet_and_ccm_write_them() {
        assert_eq!(
            provider_id("UUID", "3f2a0c1e-0000-4000-8000-000000000001", "dc-a", 1000),
            "proxmox://3f2a0c1e-0000-4000-8000-000000000001"
        );
        assert_eq!(
            provider_id("InstanceVMID", "x", "dc-b", 1042),
            "proxmox://dc-b/1042"
        );
    }

    #[test]
    fn environment_file_values() {
        let env = "COREOS_CUSTOM_HOSTNAME=m1\nCOREOS_CUSTOM_PROVIDER_ID=proxmox://dc-a/1000\nCOREOS_CUSTOM_PRIVATE_IPV4=\n";
        assert_eq!(
            env_value(env, "COREOS_CUSTOM_PROVIDER_ID").as_deref(),
            Some("proxmox://dc-a/1000")
        );
        assert_eq!(env_value(env, "COREOS_CUSTOM_PRIVATE_IPV4"), None);
        assert_eq!(env_value(env, "NOPE"), None);
    }

    #[test]
    fn instance_id_from_meta_data() {
        assert_eq!(
            instance_id("instance-id: 3f2a0c1e-aaaa\nlocal-hostname: m1\n").as_deref(),
            Some("3f2a0c1e-aaaa")
        );
        assert_eq!(instance_id("local-hostname: m1\n"), None);
        assert_eq!(instance_id("{{{"), None);
    }

    #[test]
    fn origins() {
        assert!(same_origin(
            "https://127.0.0.1:8006",
            "https://127.0.0.1:8006/"
        ));
        assert!(same_origin(
            "https://127.0.0.1:8006",
            "https://127.0.0.1:8006/api2/json"
        ));
        assert!(!same_origin(
            "https://127.0.0.1:8006",
            "https://127.0.0.1:8007"
        ));
        assert!(!same_origin("", ""));
    }
}
