//! The one seam to Proxmox: [`ProxmoxApi`], implemented by
//! [`pve_client::PveClient`] (production and every integration test, over
//! real HTTPS against `pve-sim`) and by the in-memory [`fake`] Proxmox of
//! the per-step unit tests. It has exactly the methods the reconcilers call.
//!
//! The methods mirror `pve-client`'s, with its typed requests and responses
//! (re-exported here so reconcilers import one module); no method returns raw
//! JSON. Paths, units and errors are documented on the `PveClient` methods
//! each one forwards to; every method can also fail with the transport errors
//! listed on [`pve_client::PveClient`] (`Tls`, `Transient`, `Unauthorized`,
//! `PermissionDenied`, `NodeUnreachable`).

use std::sync::Arc;

use async_trait::async_trait;

#[cfg(test)]
pub mod fake;

pub use pve_client::api::access::Permissions;
pub use pve_client::api::agent::{ExecStatus, GuestInterface};
pub use pve_client::api::cluster::{ClusterResource, ClusterStatusEntry, ResourceType};
pub use pve_client::api::ha::{HaResource, HaResourceRequest, HaRule, HaSid, HaState};
pub use pve_client::api::mapping::PciMapping;
pub use pve_client::api::pools::PoolInfo;
pub use pve_client::api::qemu::clone::CloneRequest;
pub use pve_client::api::qemu::config::{ConfigUpdate, VmConfig};
pub use pve_client::api::qemu::power::{ShutdownOptions, StartOptions, StopOptions};
pub use pve_client::api::qemu::{DeleteOptions, VmStatus};
pub use pve_client::api::storage::StorageVolume;
pub use pve_client::api::tasks::TaskListEntry;
pub use pve_client::api::version::VersionInfo;
pub use pve_client::options::{DiskSize, DiskSlot};
pub use pve_client::{
    ConfigId, Missing, NodeName, PoolId, PveClient, PveError, StorageId, TaskOutcome, Upid, VmId,
    VmLock, WaitOptions,
};

/// Everything the reconcilers ask of one Proxmox VE cluster.
///
/// Object-safe (`Arc<dyn ProxmoxApi>`); each method is documented on the
/// `PveClient` method of the same name.
#[async_trait]
pub trait ProxmoxApi: Send + Sync + 'static {
    /// Instance name this client was built for (logs, errors, metrics).
    fn instance(&self) -> &str;

    /// `https://host[:port]` of the API (for messages; never secret).
    fn origin(&self) -> &str;

    /// `GET /version`.
    async fn version(&self) -> Result<VersionInfo, PveError>;

    /// `GET /cluster/status`: cluster name and quorum, nodes and their online flag.
    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, PveError>;

    /// `GET /cluster/resources[?type=…]`.
    async fn cluster_resources(
        &self,
        kind: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, PveError>;

    /// `GET /nodes/{node}/storage/{storage}/content[?content=…&vmid=…]`.
    async fn storage_content(
        &self,
        node: &NodeName,
        storage: &StorageId,
        content: Option<&str>,
        vmid: Option<VmId>,
    ) -> Result<Vec<StorageVolume>, PveError>;

    /// `POST /nodes/{node}/storage/{storage}/upload` (multipart ISO upload).
    async fn upload_iso(
        &self,
        node: &NodeName,
        storage: &StorageId,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<Option<Upid>, PveError>;

    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`.
    async fn delete_volume(
        &self,
        node: &NodeName,
        storage: &StorageId,
        volid: &str,
    ) -> Result<Option<Upid>, PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/config` (pending values applied).
    async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/config` (async; a UPID when a task ran).
    async fn update_vm_config_async(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, PveError>;

    /// `PUT /nodes/{node}/qemu/{vmid}/config` (synchronous).
    async fn update_vm_config_sync(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<(), PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/status/current`.
    async fn vm_status(&self, node: &NodeName, vmid: VmId) -> Result<VmStatus, PveError>;

    /// `PUT /nodes/{node}/qemu/{vmid}/resize` (grow only).
    async fn resize_disk(
        &self,
        node: &NodeName,
        vmid: VmId,
        disk: DiskSlot,
        size: DiskSize,
    ) -> Result<Option<Upid>, PveError>;

    /// `DELETE /nodes/{node}/qemu/{vmid}`.
    async fn delete_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: DeleteOptions,
    ) -> Result<Upid, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/clone`.
    async fn clone_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        request: &CloneRequest,
    ) -> Result<Upid, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/status/start`.
    async fn start_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StartOptions,
    ) -> Result<Upid, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/status/stop`.
    async fn stop_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StopOptions,
    ) -> Result<Upid, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/status/shutdown`.
    async fn shutdown_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: ShutdownOptions,
    ) -> Result<Upid, PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces`.
    async fn agent_network_interfaces(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<Vec<GuestInterface>, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/agent/exec`: starts `command`
    /// (program and arguments) in the guest; the guest PID.
    async fn agent_exec(
        &self,
        node: &NodeName,
        vmid: VmId,
        command: &[&str],
    ) -> Result<u64, PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/agent/exec-status?pid=`: read a
    /// finished process once (QGA forgets it after that; docs/proxmox-semantics.md §17).
    async fn agent_exec_status(
        &self,
        node: &NodeName,
        vmid: VmId,
        pid: u64,
    ) -> Result<ExecStatus, PveError>;

    /// `GET /nodes/{node}/tasks?source=all&since=&limit=` (see
    /// `PveClient::node_tasks`; `since` in Unix epoch seconds).
    async fn node_tasks(
        &self,
        node: &NodeName,
        since: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TaskListEntry>, PveError>;

    /// What a stopped task's exit status means (see
    /// `PveClient::task_ended`: success, or `TaskFailed` with the log tail).
    async fn task_ended(&self, upid: &Upid, exitstatus: String) -> Result<TaskOutcome, PveError>;

    /// Polls a task until it stops or `options.deadline` passes (see
    /// `PveClient::wait_task`; `WARNINGS: n` is success).
    async fn wait_task(&self, upid: &Upid, options: WaitOptions) -> Result<TaskOutcome, PveError>;
    /// `GET /access/permissions[?path=…]`: the token's effective privileges.
    async fn permissions(&self, path: Option<&str>) -> Result<Permissions, PveError>;

    /// `GET /cluster/ha/resources`: every HA resource.
    async fn ha_resources(&self) -> Result<Vec<HaResource>, PveError>;

    /// `GET /cluster/ha/resources/{sid}`, `None` when the VM is not an HA resource.
    async fn ha_resource(&self, sid: HaSid) -> Result<Option<HaResource>, PveError>;

    /// `POST /cluster/ha/resources`.
    async fn create_ha_resource(&self, request: &HaResourceRequest) -> Result<(), PveError>;

    /// `DELETE /cluster/ha/resources/{sid}[?purge=…]`.
    async fn delete_ha_resource(&self, sid: HaSid, purge: Option<bool>) -> Result<(), PveError>;

    /// `GET /cluster/ha/rules/{rule}` (PVE 9), `None` when there is no such rule.
    async fn ha_rule(&self, rule: &ConfigId) -> Result<Option<HaRule>, PveError>;

    /// `PUT /cluster/ha/rules/{rule}` with the whole `resources` list and the
    /// `digest` read with the rule.
    async fn set_ha_rule_resources(
        &self,
        rule: &ConfigId,
        kind: &str,
        resources: &[String],
        digest: Option<&str>,
    ) -> Result<(), PveError>;

    /// `GET /pools?poolid={pool}` (PVE ≥ 8.1): one pool with its members.
    async fn pool(&self, pool: &PoolId) -> Result<Option<PoolInfo>, PveError>;

    /// `GET /pools/{pool}` (PVE < 8.1): one pool with its members.
    async fn pool_by_path(&self, pool: &PoolId) -> Result<PoolInfo, PveError>;

    /// `GET /cluster/mapping/pci`: the PCI resource mappings the token may
    /// see, each with its per-node devices ([`PciMapping::devices_per_node`]).
    async fn pci_mappings(&self) -> Result<Vec<PciMapping>, PveError>;
}

#[async_trait]
impl ProxmoxApi for PveClient {
    fn instance(&self) -> &str {
        PveClient::instance(self)
    }

    fn origin(&self) -> &str {
        self.url().origin()
    }

    async fn version(&self) -> Result<VersionInfo, PveError> {
        PveClient::version(self).await
    }

    async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, PveError> {
        PveClient::cluster_status(self).await
    }

    async fn cluster_resources(
        &self,
        kind: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, PveError> {
        PveClient::cluster_resources(self, kind).await
    }

    async fn storage_content(
        &self,
        node: &NodeName,
        storage: &StorageId,
        content: Option<&str>,
        vmid: Option<VmId>,
    ) -> Result<Vec<StorageVolume>, PveError> {
        PveClient::storage_content(self, node, storage, content, vmid).await
    }

    async fn upload_iso(
        &self,
        node: &NodeName,
        storage: &StorageId,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<Option<Upid>, PveError> {
        PveClient::upload_iso(self, node, storage, filename, bytes).await
    }

    async fn delete_volume(
        &self,
        node: &NodeName,
        storage: &StorageId,
        volid: &str,
    ) -> Result<Option<Upid>, PveError> {
        PveClient::delete_volume(self, node, storage, volid).await
    }

    async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError> {
        PveClient::vm_config(self, node, vmid).await
    }

    async fn update_vm_config_async(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, PveError> {
        PveClient::update_vm_config_async(self, node, vmid, update).await
    }

    async fn update_vm_config_sync(
        &self,
        node: &NodeName,
        vmid: VmId,
        update: &ConfigUpdate,
    ) -> Result<(), PveError> {
        PveClient::update_vm_config_sync(self, node, vmid, update).await
    }

    async fn vm_status(&self, node: &NodeName, vmid: VmId) -> Result<VmStatus, PveError> {
        PveClient::vm_status(self, node, vmid).await
    }

    async fn resize_disk(
        &self,
        node: &NodeName,
        vmid: VmId,
        disk: DiskSlot,
        size: DiskSize,
    ) -> Result<Option<Upid>, PveError> {
        PveClient::resize_disk(self, node, vmid, disk, size).await
    }

    async fn delete_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: DeleteOptions,
    ) -> Result<Upid, PveError> {
        PveClient::delete_vm(self, node, vmid, options).await
    }

    async fn clone_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        request: &CloneRequest,
    ) -> Result<Upid, PveError> {
        PveClient::clone_vm(self, node, vmid, request).await
    }

    async fn start_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StartOptions,
    ) -> Result<Upid, PveError> {
        PveClient::start_vm(self, node, vmid, options).await
    }

    async fn stop_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StopOptions,
    ) -> Result<Upid, PveError> {
        PveClient::stop_vm(self, node, vmid, options).await
    }

    async fn shutdown_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: ShutdownOptions,
    ) -> Result<Upid, PveError> {
        PveClient::shutdown_vm(self, node, vmid, options).await
    }

    async fn agent_network_interfaces(
        &self,
        node: &NodeName,
        vmid: VmId,
    ) -> Result<Vec<GuestInterface>, PveError> {
        PveClient::agent_network_interfaces(self, node, vmid).await
    }

    async fn agent_exec(
        &self,
        node: &NodeName,
        vmid: VmId,
        command: &[&str],
    ) -> Result<u64, PveError> {
        PveClient::agent_exec(self, node, vmid, command).await
    }

    async fn agent_exec_status(
        &self,
        node: &NodeName,
        vmid: VmId,
        pid: u64,
    ) -> Result<ExecStatus, PveError> {
        PveClient::agent_exec_status(self, node, vmid, pid).await
    }

    async fn node_tasks(
        &self,
        node: &NodeName,
        since: Option<u64>,
        limit: u32,
    ) -> Result<Vec<TaskListEntry>, PveError> {
        PveClient::node_tasks(self, node, since, limit).await
    }

    async fn task_ended(&self, upid: &Upid, exitstatus: String) -> Result<TaskOutcome, PveError> {
        PveClient::task_ended(self, upid, exitstatus).await
    }

    async fn wait_task(&self, upid: &Upid, options: WaitOptions) -> Result<TaskOutcome, PveError> {
        PveClient::wait_task(self, upid, options).await
    }

    async fn permissions(&self, path: Option<&str>) -> Result<Permissions, PveError> {
        PveClient::permissions(self, path).await
    }

    async fn ha_resources(&self) -> Result<Vec<HaResource>, PveError> {
        PveClient::ha_resources(self).await
    }

    async fn ha_resource(&self, sid: HaSid) -> Result<Option<HaResource>, PveError> {
        PveClient::ha_resource(self, sid).await
    }

    async fn create_ha_resource(&self, request: &HaResourceRequest) -> Result<(), PveError> {
        PveClient::create_ha_resource(self, request).await
    }

    async fn delete_ha_resource(&self, sid: HaSid, purge: Option<bool>) -> Result<(), PveError> {
        PveClient::delete_ha_resource(self, sid, purge).await
    }

    async fn ha_rule(&self, rule: &ConfigId) -> Result<Option<HaRule>, PveError> {
        PveClient::ha_rule(self, rule).await
    }

    async fn set_ha_rule_resources(
        &self,
        rule: &ConfigId,
        kind: &str,
        resources: &[String],
        digest: Option<&str>,
    ) -> Result<(), PveError> {
        PveClient::set_ha_rule_resources(self, rule, kind, resources, digest).await
    }

    async fn pool(&self, pool: &PoolId) -> Result<Option<PoolInfo>, PveError> {
        PveClient::pool(self, pool).await
    }

    async fn pool_by_path(&self, pool: &PoolId) -> Result<PoolInfo, PveError> {
        PveClient::pool_by_path(self, pool).await
    }

    async fn pci_mappings(&self) -> Result<Vec<PciMapping>, PveError> {
        PveClient::pci_mappings(self).await
    }
}

/// A shared, type-erased Proxmox API of one instance.
pub type SharedApi = Arc<dyn ProxmoxApi>;
