//! The public handles: [`Simulator`] (owns the listeners) and [`SimCluster`]
//! (a cheap handle to one simulated cluster with introspection and test
//! controls), which hands out the snapshots of [`crate::snapshot`].

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{ClusterConfig, SimConfig, VmConfig};
use crate::error::SimError;
use crate::faults::{ActiveFault, Fault, FaultId};
use crate::http::{ApiService, MakeApi};
use crate::lower_bound::{self, FleetRequest, LowerBound};
use crate::schema::Schema;
use crate::secret::Secret;
use crate::snapshot::{
    HaSnapshot, NodeSnapshot, TaskSnapshot, VmSnapshot, VolumeSnapshot, snapshot, task_snapshot,
};
use crate::state::vm::AgentState;
use crate::state::{CallLog, Cluster};

/// Handle to one simulated Proxmox cluster (cheap to clone).
#[derive(Clone)]
pub struct SimCluster {
    pub(crate) inner: Arc<Cluster>,
}

impl std::fmt::Debug for SimCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimCluster")
            .field("name", &self.name())
            .field("url", &self.url())
            .finish()
    }
}

impl SimCluster {
    /// Cluster name.
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Base URL, `https://127.0.0.1:PORT` (no `/api2/json`).
    pub fn url(&self) -> String {
        self.inner.url.get().cloned().unwrap_or_default()
    }

    /// PEM of this cluster's CA (the leaf has SANs `localhost`, `127.0.0.1`, `::1`, node names).
    pub fn ca_pem(&self) -> String {
        self.inner.certs.ca_pem.clone()
    }

    /// SHA-256 fingerprint of the leaf certificate, `AA:BB:…` upper-case.
    pub fn cert_fingerprint_sha256(&self) -> String {
        self.inner.certs.fingerprint.clone()
    }

    /// The first configured token, `user@realm!tokenid`.
    pub fn token_id(&self) -> String {
        self.inner.default_token.clone().unwrap_or_default()
    }

    /// The current secret of [`SimCluster::token_id`] (empty if no token).
    pub fn token_secret(&self) -> String {
        let id = self.token_id();
        self.inner
            .lock()
            .token_secret(&id)
            .map(|s| s.expose().to_string())
            .unwrap_or_default()
    }

    /// The cluster's configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.inner.cfg
    }

    /// All VMs, by VMID.
    pub fn vms(&self) -> Vec<VmSnapshot> {
        let st = self.inner.lock();
        st.vms.values().map(snapshot).collect()
    }

    /// One VM.
    pub fn vm(&self, vmid: u32) -> Option<VmSnapshot> {
        self.inner.lock().vms.get(&vmid).map(snapshot)
    }

    /// Volumes of `storage` as seen from `node`.
    pub fn storage_content(&self, node: &str, storage: &str) -> Vec<VolumeSnapshot> {
        let st = self.inner.lock();
        let Some(s) = st.storages.get(storage) else {
            return vec![];
        };
        s.volumes(node)
            .map(|v| VolumeSnapshot {
                volid: format!("{storage}:{}", v.volname),
                size: v.size,
                format: v.format.clone(),
                content: v.content.clone(),
                vmid: v.vmid,
                parent: v.parent.clone(),
            })
            .collect()
    }

    /// The bytes of an uploaded file (`volid` = `storage:iso/name.iso`) as seen from `node`.
    pub fn iso_bytes(&self, node: &str, volid: &str) -> Option<Vec<u8>> {
        let st = self.inner.lock();
        st.volume(node, volid)
            .and_then(|v| v.data.as_ref().map(|d| d.as_ref().clone()))
    }

    /// API call counts per (method, path template).
    pub fn calls(&self) -> CallLog {
        self.inner
            .calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Resets the call counts.
    pub fn reset_calls(&self) {
        *self.inner.calls.lock().unwrap_or_else(|p| p.into_inner()) = CallLog::default();
    }

    /// Adds a fault rule.
    pub fn add_fault(&self, fault: Fault) -> FaultId {
        self.inner
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .add(fault)
    }

    /// Removes one fault rule; false if unknown.
    pub fn remove_fault(&self, id: FaultId) -> bool {
        self.inner
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(id)
    }

    /// Removes all fault rules.
    pub fn clear_faults(&self) {
        self.inner
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }

    /// Active fault rules.
    pub fn faults(&self) -> Vec<ActiveFault> {
        self.inner
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .list()
    }

    /// Takes a node offline (calls routed to it get 595, its VMs show
    /// `unknown`; its HA resources are recovered on another node
    /// `timings.ha_delay` later, see [`crate::ha_manager`]) or back online.
    /// Returns false for an unknown node.
    pub fn set_node_online(&self, node: &str, online: bool) -> bool {
        let mut st = self.inner.lock();
        match st.nodes.get_mut(node) {
            Some(n) => {
                n.online = online;
                drop(st);
                if !online && tokio::runtime::Handle::try_current().is_ok() {
                    crate::ha_manager::recover(&self.inner, node.to_string());
                }
                true
            }
            None => false,
        }
    }

    /// Migrates VM `vmid` to node `target` as an operator's `qm migrate`
    /// (or the HA manager's move) does: `lock: migrate` for
    /// `timings.migrate`, then the config is on `target`; a running VM keeps
    /// running. Returns when the move is done.
    ///
    /// # Errors
    /// [`SimError::Config`] with Proxmox's reason: unknown VM or node, the VM
    /// is locked or already there, a disk on storage that is not shared.
    pub async fn migrate_vm(&self, vmid: u32, target: &str) -> Result<(), SimError> {
        crate::ha_manager::migrate(&self.inner, vmid, target)
            .await
            .map_err(SimError::Config)
    }

    /// The HA resources, by VMID.
    pub fn ha_resources(&self) -> Vec<HaSnapshot> {
        self.inner
            .lock()
            .ha
            .iter()
            .map(|(vmid, h)| HaSnapshot {
                vmid: *vmid,
                state: h.state.clone(),
                group: h.group.clone(),
            })
            .collect()
    }

    /// The resources HA rule `rule` lists (`vm:<vmid>`), `None` when there
    /// is no such rule.
    pub fn ha_rule_resources(&self, rule: &str) -> Option<Vec<String>> {
        self.inner
            .lock()
            .ha_rules
            .get(rule)
            .map(|r| r.resources.clone())
    }

    /// The member VMIDs of resource pool `pool`, `None` when there is no
    /// such pool.
    pub fn pool_members(&self, pool: &str) -> Option<Vec<u32>> {
        self.inner
            .lock()
            .pools
            .get(pool)
            .map(|p| p.vms.iter().copied().collect())
    }

    /// Makes `storage` active (activation works) or inactive on `node`
    /// (`active: 0`, `/cluster/resources` status `unknown`, allocations
    /// fail with `storage '…' is not online`). Returns false for an unknown
    /// storage or node.
    pub fn set_storage_active(&self, storage: &str, node: &str, active: bool) -> bool {
        let mut st = self.inner.lock();
        if !st.nodes.contains_key(node) {
            return false;
        }
        let Some(s) = st.storages.get_mut(storage) else {
            return false;
        };
        s.cfg.inactive_on.retain(|n| n != node);
        if !active {
            s.cfg.inactive_on.push(node.to_string());
        }
        true
    }

    /// Nodes and their state.
    pub fn nodes(&self) -> Vec<NodeSnapshot> {
        self.inner
            .lock()
            .nodes
            .values()
            .map(|n| NodeSnapshot {
                name: n.cfg.name.clone(),
                online: n.online,
            })
            .collect()
    }

    /// Rotates a token's secret. Returns false for an unknown token.
    pub fn set_token_secret(&self, token_id: &str, secret: &str) -> bool {
        self.inner
            .lock()
            .auth
            .set_token_secret(token_id, Secret::new(secret))
    }

    /// Forces the guest agent behaviour of a VM. Returns false for an unknown VM.
    pub fn set_agent_state(&self, vmid: u32, state: AgentState) -> bool {
        let mut st = self.inner.lock();
        match st.vms.get_mut(&vmid) {
            Some(vm) => {
                vm.agent = state;
                true
            }
            None => false,
        }
    }

    /// Creates a VM (or template, with `template = true`) directly, as the
    /// configuration file would.
    ///
    /// # Errors
    /// [`SimError::Config`] if the VMID is taken, or the node or a storage is unknown.
    pub fn create_vm(&self, vm: VmConfig, template: bool) -> Result<(), SimError> {
        let lag = self.inner.lag();
        let mut st = self.inner.lock();
        if st.vms.contains_key(&vm.vmid) {
            return Err(SimError::Config(format!("VMID {} already exists", vm.vmid)));
        }
        if !st.nodes.contains_key(&vm.node) {
            return Err(SimError::Config(format!("unknown node '{}'", vm.node)));
        }
        let prefix = self.inner.cfg.mac_prefix.clone();
        st.add_configured_vm(&vm, template, lag, &prefix)
            .map_err(SimError::Config)?;
        if vm.running && !template {
            crate::api::power::mark_running(&self.inner, &mut st, vm.vmid);
        }
        Ok(())
    }

    /// All tasks, oldest first.
    pub fn tasks(&self) -> Vec<TaskSnapshot> {
        let st = self.inner.lock();
        st.tasks
            .order
            .iter()
            .filter_map(|u| st.tasks.get(u))
            .map(task_snapshot)
            .collect()
    }

    /// One task.
    pub fn task(&self, upid: &str) -> Option<TaskSnapshot> {
        self.inner.lock().tasks.get(upid).map(task_snapshot)
    }

    /// Waits until a task has stopped and returns it (`None` for an unknown UPID).
    pub async fn wait_task(&self, upid: &str) -> Option<TaskSnapshot> {
        crate::worker::wait_stopped(&self.inner, upid, Duration::from_secs(24 * 3600)).await?;
        self.task(upid)
    }

    /// Whether a VM's config flock is held (introspection for lock tests).
    pub fn flock_held(&self, node: &str, vmid: u32) -> bool {
        self.inner.flocks.is_held(node, vmid)
    }

    /// The lower bound of `requests` on this cluster (see [`crate::lower_bound`]).
    ///
    /// # Errors
    /// [`SimError::LowerBound`] for requests the model cannot place.
    pub fn lower_bound(&self, requests: &[FleetRequest]) -> Result<LowerBound, SimError> {
        let scale = self.inner.clock.real(1.0).as_secs_f64();
        lower_bound::compute(std::slice::from_ref(&self.inner.cfg), scale, requests)
    }
}

/// The running simulator: one HTTPS (or HTTP) listener per cluster.
/// Dropping it or calling [`Simulator::shutdown`] stops the listeners.
pub struct Simulator {
    clusters: Vec<SimCluster>,
    handles: Vec<axum_server::Handle<SocketAddr>>,
    joins: Vec<tokio::task::JoinHandle<()>>,
    config: SimConfig,
}

impl std::fmt::Debug for Simulator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulator")
            .field("clusters", &self.clusters)
            .finish()
    }
}

impl Simulator {
    /// Validates the configuration, loads the schema (if configured), builds
    /// every cluster with its own CA and starts its listener on
    /// `bind_address:port` (`127.0.0.1:0` by default).
    ///
    /// # Errors
    /// [`SimError::Config`], [`SimError::Schema`], [`SimError::Tls`], [`SimError::Bind`].
    pub async fn start(config: SimConfig) -> Result<Simulator, SimError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        config.validate()?;
        let schema: Option<Arc<Schema>> = match &config.schema_path {
            Some(p) => Some(Schema::load(p)?),
            None => None,
        };
        let mut clusters = Vec::new();
        let mut handles = Vec::new();
        let mut joins = Vec::new();
        for (i, c) in config.clusters.iter().enumerate() {
            let cluster = Arc::new(Cluster::build(
                i,
                c.clone(),
                config.seed,
                config.time_scale,
                schema.clone(),
            )?);
            let addr = SocketAddr::new(config.bind_address, c.port);
            let listener = std::net::TcpListener::bind(addr).map_err(|source| SimError::Bind {
                addr: addr.to_string(),
                source,
            })?;
            listener
                .set_nonblocking(true)
                .map_err(|source| SimError::Bind {
                    addr: addr.to_string(),
                    source,
                })?;
            let local = listener.local_addr().map_err(|source| SimError::Bind {
                addr: addr.to_string(),
                source,
            })?;
            let scheme = if config.tls { "https" } else { "http" };
            let host = match local.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            };
            let _ = cluster
                .url
                .set(format!("{scheme}://{host}:{}", local.port()));
            let handle = axum_server::Handle::new();
            let svc = MakeApi(ApiService {
                cluster: cluster.clone(),
            });
            let join = if config.tls {
                let tls = crate::certs::server_config(&cluster.certs)?;
                let rustls = axum_server::tls_rustls::RustlsConfig::from_config(Arc::new(tls));
                let server = axum_server::from_tcp_rustls(listener, rustls)
                    .map_err(|source| SimError::Bind {
                        addr: addr.to_string(),
                        source,
                    })?
                    .http1_only()
                    .handle(handle.clone());
                tokio::spawn(async move {
                    if let Err(e) = server.serve(svc).await {
                        tracing::error!(error = %e, "pve-sim listener stopped");
                    }
                })
            } else {
                let server = axum_server::from_tcp(listener)
                    .map_err(|source| SimError::Bind {
                        addr: addr.to_string(),
                        source,
                    })?
                    .http1_only()
                    .handle(handle.clone());
                tokio::spawn(async move {
                    if let Err(e) = server.serve(svc).await {
                        tracing::error!(error = %e, "pve-sim listener stopped");
                    }
                })
            };
            handles.push(handle);
            joins.push(join);
            clusters.push(SimCluster { inner: cluster });
        }
        Ok(Simulator {
            clusters,
            handles,
            joins,
            config,
        })
    }

    /// All clusters, in configuration order.
    pub fn clusters(&self) -> &[SimCluster] {
        &self.clusters
    }

    /// A cluster by name.
    pub fn cluster(&self, name: &str) -> Option<&SimCluster> {
        self.clusters.iter().find(|c| c.name() == name)
    }

    /// The configuration the simulator runs with.
    pub fn config(&self) -> &SimConfig {
        &self.config
    }

    /// The lower bound of a fleet over all clusters (see [`crate::lower_bound`]).
    ///
    /// # Errors
    /// [`SimError::LowerBound`] for requests the model cannot place.
    pub fn lower_bound(&self, requests: &[FleetRequest]) -> Result<LowerBound, SimError> {
        lower_bound::compute(&self.config.clusters, self.config.time_scale, requests)
    }

    /// Stops all listeners and waits for them.
    pub async fn shutdown(mut self) {
        for h in &self.handles {
            h.shutdown();
        }
        for j in std::mem::take(&mut self.joins) {
            let _ = j.await;
        }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        for h in &self.handles {
            h.shutdown();
        }
    }
}
