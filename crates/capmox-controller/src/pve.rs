//! The one seam to Proxmox: [`ProxmoxApi`], implemented by
//! [`pve_client::PveClient`] (production and every integration test, over
//! real HTTPS against `pve-sim`) and by fakes in unit tests.
//!
//! The methods mirror `pve-client`'s, with its typed requests and responses
//! (re-exported here so reconcilers import one module); no method returns raw
//! JSON. Paths, units and errors are documented on the `PveClient` methods
//! each one forwards to; every method can also fail with the transport errors
//! listed on [`pve_client::PveClient`] (`Tls`, `Transient`, `Unauthorized`,
//! `PermissionDenied`, `NodeUnreachable`).

use std::sync::Arc;

use async_trait::async_trait;

pub use pve_client::api::agent::{ExecStatus, GuestInterface};
pub use pve_client::api::cluster::{ClusterResource, ClusterStatusEntry, ResourceType};
pub use pve_client::api::nodes::{NodeInfo, NodeStatus};
pub use pve_client::api::pools::PoolInfo;
pub use pve_client::api::qemu::clone::CloneRequest;
pub use pve_client::api::qemu::config::{ConfigUpdate, PendingEntry, VmConfig};
pub use pve_client::api::qemu::power::{ShutdownOptions, StartOptions, StopOptions};
pub use pve_client::api::qemu::{DeleteOptions, VmListEntry, VmStatus};
pub use pve_client::api::storage::{StorageInfo, StorageQuery, StorageVolume};
pub use pve_client::api::tasks::{TaskListEntry, TaskLog, TaskStatus};
pub use pve_client::api::version::VersionInfo;
pub use pve_client::options::{DiskSize, DiskSlot};
pub use pve_client::{
    NodeName, PoolId, PveClient, PveError, StorageId, TaskOutcome, Upid, VmId, WaitOptions,
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

    /// `GET /cluster/nextid[?vmid=N]` (reserves nothing).
    async fn next_vmid(&self, candidate: Option<VmId>) -> Result<VmId, PveError>;

    /// `GET /nodes`.
    async fn nodes(&self) -> Result<Vec<NodeInfo>, PveError>;

    /// `GET /nodes/{node}/status`.
    async fn node_status(&self, node: &NodeName) -> Result<NodeStatus, PveError>;

    /// `GET /pools`.
    async fn pools(&self) -> Result<Vec<PoolInfo>, PveError>;

    /// `GET /pools/{poolid}` (`None` when it does not exist).
    async fn pool(&self, poolid: &PoolId) -> Result<Option<PoolInfo>, PveError>;

    /// `POST /pools`.
    async fn create_pool(&self, poolid: &PoolId, comment: Option<&str>) -> Result<(), PveError>;

    /// `GET /nodes/{node}/storage`.
    async fn storages(
        &self,
        node: &NodeName,
        query: &StorageQuery,
    ) -> Result<Vec<StorageInfo>, PveError>;

    /// `GET /nodes/{node}/storage/{storage}/status`.
    async fn storage_status(
        &self,
        node: &NodeName,
        storage: &StorageId,
    ) -> Result<StorageInfo, PveError>;

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

    /// `GET /nodes/{node}/qemu`.
    async fn vms(&self, node: &NodeName) -> Result<Vec<VmListEntry>, PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/config` (pending values applied).
    async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError>;

    /// `GET /nodes/{node}/qemu/{vmid}/config?current=1`.
    async fn vm_config_current(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError>;

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

    /// `GET /nodes/{node}/qemu/{vmid}/pending`.
    async fn vm_pending(&self, node: &NodeName, vmid: VmId) -> Result<Vec<PendingEntry>, PveError>;

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

    /// `POST /nodes/{node}/qemu/{vmid}/status/reboot` (timeout in **seconds**).
    async fn reboot_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        timeout_secs: Option<u64>,
    ) -> Result<Upid, PveError>;

    /// `POST /nodes/{node}/qemu/{vmid}/agent/ping`.
    async fn agent_ping(&self, node: &NodeName, vmid: VmId) -> Result<(), PveError>;

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
    /// finished process once (QGA forgets it after that; SEMANTICS.md §17).
    async fn agent_exec_status(
        &self,
        node: &NodeName,
        vmid: VmId,
        pid: u64,
    ) -> Result<ExecStatus, PveError>;

    /// `GET /nodes/{node}/tasks/{upid}/status`.
    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, PveError>;

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

    /// `GET /nodes/{node}/tasks/{upid}/log?start=&limit=` (lines 0-based `start`).
    async fn task_log(&self, upid: &Upid, start: u64, limit: u64) -> Result<TaskLog, PveError>;

    /// `DELETE /nodes/{node}/tasks/{upid}`.
    async fn stop_task(&self, upid: &Upid) -> Result<(), PveError>;

    /// Polls a task until it stops or `options.deadline` passes (see
    /// `PveClient::wait_task`; `WARNINGS: n` is success).
    async fn wait_task(&self, upid: &Upid, options: WaitOptions) -> Result<TaskOutcome, PveError>;

    /// The last `lines` lines of a task log (oldest first): one call when the
    /// server reports the total, else the first page.
    async fn task_log_tail(&self, upid: &Upid, lines: u64) -> Result<Vec<String>, PveError> {
        let first = self.task_log(upid, 0, lines.max(1)).await?;
        let total = first.total.unwrap_or(0);
        let log = if total > lines {
            self.task_log(upid, total - lines, lines).await?
        } else {
            first
        };
        Ok(log.lines.into_iter().map(|l| l.t).collect())
    }
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

    async fn next_vmid(&self, candidate: Option<VmId>) -> Result<VmId, PveError> {
        PveClient::next_vmid(self, candidate).await
    }

    async fn nodes(&self) -> Result<Vec<NodeInfo>, PveError> {
        PveClient::nodes(self).await
    }

    async fn node_status(&self, node: &NodeName) -> Result<NodeStatus, PveError> {
        PveClient::node_status(self, node).await
    }

    async fn pools(&self) -> Result<Vec<PoolInfo>, PveError> {
        PveClient::pools(self).await
    }

    async fn pool(&self, poolid: &PoolId) -> Result<Option<PoolInfo>, PveError> {
        PveClient::pool(self, poolid).await
    }

    async fn create_pool(&self, poolid: &PoolId, comment: Option<&str>) -> Result<(), PveError> {
        PveClient::create_pool(self, poolid, comment).await
    }

    async fn storages(
        &self,
        node: &NodeName,
        query: &StorageQuery,
    ) -> Result<Vec<StorageInfo>, PveError> {
        PveClient::storages(self, node, query).await
    }

    async fn storage_status(
        &self,
        node: &NodeName,
        storage: &StorageId,
    ) -> Result<StorageInfo, PveError> {
        PveClient::storage_status(self, node, storage).await
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

    async fn vms(&self, node: &NodeName) -> Result<Vec<VmListEntry>, PveError> {
        PveClient::vms(self, node).await
    }

    async fn vm_config(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError> {
        PveClient::vm_config(self, node, vmid).await
    }

    async fn vm_config_current(&self, node: &NodeName, vmid: VmId) -> Result<VmConfig, PveError> {
        PveClient::vm_config_current(self, node, vmid).await
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

    async fn vm_pending(&self, node: &NodeName, vmid: VmId) -> Result<Vec<PendingEntry>, PveError> {
        PveClient::vm_pending(self, node, vmid).await
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

    async fn reboot_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        timeout_secs: Option<u64>,
    ) -> Result<Upid, PveError> {
        PveClient::reboot_vm(self, node, vmid, timeout_secs).await
    }

    async fn agent_ping(&self, node: &NodeName, vmid: VmId) -> Result<(), PveError> {
        PveClient::agent_ping(self, node, vmid).await
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

    async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, PveError> {
        PveClient::task_status(self, upid).await
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

    async fn task_log(&self, upid: &Upid, start: u64, limit: u64) -> Result<TaskLog, PveError> {
        PveClient::task_log(self, upid, start, limit).await
    }

    async fn stop_task(&self, upid: &Upid) -> Result<(), PveError> {
        PveClient::stop_task(self, upid).await
    }

    async fn wait_task(&self, upid: &Upid, options: WaitOptions) -> Result<TaskOutcome, PveError> {
        PveClient::wait_task(self, upid, options).await
    }
}

/// A shared, type-erased Proxmox API of one instance.
pub type SharedApi = Arc<dyn ProxmoxApi>;
