//! Power: `status/start`, `status/stop`, `status/shutdown`, `status/reboot`.
//!
//! All four return a task. For HA-managed VMs the task is an HA request
//! (`hastart`, `hastop`) that ends almost at once; poll
//! [`crate::PveClient::vm_status`] for the real state (docs/proxmox-semantics.md §16).

use super::vm_path;
use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;
use crate::types::{NodeName, Upid, VmId};

/// Options of `POST …/status/start`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StartOptions {
    /// Start timeout in **seconds** (server default: max(30, memory in GiB)).
    pub timeout_secs: Option<u64>,
}

/// Options of `POST …/status/stop` (hard stop).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StopOptions {
    /// Wait at most this many **seconds** for QEMU to quit before killing it.
    pub timeout_secs: Option<u64>,
    /// `overrule-shutdown=1`: abort running `qmshutdown` tasks first.
    pub overrule_shutdown: bool,
}

/// Options of `POST …/status/shutdown` (ACPI / guest agent).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ShutdownOptions {
    /// Wait at most this many **seconds** (server default 60, or the
    /// `startup` `down=` value).
    pub timeout_secs: Option<u64>,
    /// `forceStop=1`: hard-stop when the timeout passes instead of failing
    /// with `VM quit/powerdown failed - got timeout`.
    pub force_stop: bool,
}

impl PveClient {
    /// `POST /nodes/{node}/qemu/{vmid}/status/start`: returns the `qmstart`
    /// task. The task fails if the VM is already running, is a template or is
    /// locked.
    ///
    /// # Errors
    /// [`PveError::NotFound`]; `Locked`; transport errors.
    pub async fn start_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StartOptions,
    ) -> Result<Upid, PveError> {
        let mut f = Form::new();
        f.push_opt("timeout", options.timeout_secs);
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/status/start",
            vm_path(node, vmid, "/status/start"),
            f,
        ))
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/stop`: hard stop, like pulling
    /// the plug. Succeeds (as a task) when already stopped.
    ///
    /// # Errors
    /// [`PveError::NotFound`]; `Locked`; transport errors.
    pub async fn stop_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: StopOptions,
    ) -> Result<Upid, PveError> {
        let mut f = Form::new();
        f.push_opt("timeout", options.timeout_secs);
        if options.overrule_shutdown {
            f.push_bool("overrule-shutdown", true);
        }
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/status/stop",
            vm_path(node, vmid, "/status/stop"),
            f,
        ))
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/shutdown`: clean shutdown via
    /// ACPI or the guest agent. Succeeds when already stopped.
    ///
    /// # Errors
    /// [`PveError::NotFound`]; `Locked`; transport errors. A timeout without
    /// `force_stop` is a `TaskFailed` when waiting for the task.
    pub async fn shutdown_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: ShutdownOptions,
    ) -> Result<Upid, PveError> {
        let mut f = Form::new();
        f.push_opt("timeout", options.timeout_secs);
        if options.force_stop {
            f.push_bool("forceStop", true);
        }
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/status/shutdown",
            vm_path(node, vmid, "/status/shutdown"),
            f,
        ))
        .await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/status/reboot`: shutdown then start,
    /// applying pending changes. `timeout_secs` bounds the shutdown.
    ///
    /// # Errors
    /// [`PveError::Conflict`] (`VM <id> not running`) for a stopped VM;
    /// `NotFound`; transport errors.
    pub async fn reboot_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        timeout_secs: Option<u64>,
    ) -> Result<Upid, PveError> {
        let mut f = Form::new();
        f.push_opt("timeout", timeout_secs);
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/status/reboot",
            vm_path(node, vmid, "/status/reboot"),
            f,
        ))
        .await
    }
}
