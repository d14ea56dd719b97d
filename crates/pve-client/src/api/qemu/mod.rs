//! QEMU VMs: list, status, resize, delete; configuration in [`config`],
//! cloning in [`clone`], power operations in [`power`].
//!
//! Always address a VM on its **current** node: a wrong node yields
//! `NotFound` ("Configuration file … does not exist"), not a redirect; VMs move
//! (migration, HA, clone `target`), so re-resolve the node from
//! `/cluster/resources` after a `NotFound` (docs/proxmox-semantics.md §4).

pub mod clone;
pub mod config;
pub mod power;

use serde::Deserialize;

use crate::PveClient;
use crate::client::{Call, seg};
use crate::encode::Form;
use crate::error::PveError;
use crate::options::{DiskSize, DiskSlot};
use crate::types::lenient::{bool01, opt_f64, opt_lock, opt_string, opt_u32, opt_u64};
use crate::types::{NodeName, Upid, VmId, VmLock};

pub(crate) fn vm_path(node: &NodeName, vmid: VmId, rest: &str) -> String {
    format!("/nodes/{}/qemu/{}{rest}", seg(node.as_str()), vmid)
}

/// Run state of a VM (`status` of `status/current` and the VM list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VmRunState {
    /// `running` (includes paused; see `qmpstatus`).
    Running,
    /// `stopped`.
    Stopped,
    /// Anything else, e.g. `unknown` for a VM on an offline node.
    Other(String),
}

impl VmRunState {
    /// The state a `status` value names.
    pub fn parse(s: &str) -> VmRunState {
        match s {
            "running" => Self::Running,
            "stopped" => Self::Stopped,
            _ => Self::Other(s.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for VmRunState {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(VmRunState::parse(&String::deserialize(d)?))
    }
}

/// One entry of `GET /nodes/{node}/qemu`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VmListEntry {
    /// VMID.
    pub vmid: VmId,
    /// Name.
    #[serde(default, deserialize_with = "opt_string")]
    pub name: Option<String>,
    /// Run state.
    pub status: VmRunState,
    /// Template flag.
    #[serde(default, deserialize_with = "bool01")]
    pub template: bool,
    /// Config lock.
    #[serde(default, deserialize_with = "opt_lock")]
    pub lock: Option<VmLock>,
    /// Raw `;`-separated tags.
    #[serde(default, deserialize_with = "opt_string")]
    pub tags: Option<String>,
    /// Memory limit, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxmem: Option<u64>,
    /// Root disk size, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxdisk: Option<u64>,
    /// vCPUs.
    #[serde(default, deserialize_with = "opt_f64")]
    pub cpus: Option<f64>,
    /// Uptime, **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub uptime: Option<u64>,
}

/// Response of `GET /nodes/{node}/qemu/{vmid}/status/current` (live, unlike
/// `/cluster/resources`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VmStatus {
    /// Run state.
    pub status: VmRunState,
    /// QMP state: `running`, `paused`, `prelaunch`, … (running VMs).
    #[serde(default, deserialize_with = "opt_string")]
    pub qmpstatus: Option<String>,
    /// Config lock.
    #[serde(default, deserialize_with = "opt_lock")]
    pub lock: Option<VmLock>,
    /// Whether the guest agent is enabled in the config.
    #[serde(default, deserialize_with = "bool01")]
    pub agent: bool,
    /// Template flag.
    #[serde(default, deserialize_with = "bool01")]
    pub template: bool,
    /// Name.
    #[serde(default, deserialize_with = "opt_string")]
    pub name: Option<String>,
    /// Raw `;`-separated tags.
    #[serde(default, deserialize_with = "opt_string")]
    pub tags: Option<String>,
    /// Uptime, **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub uptime: Option<u64>,
    /// QEMU process id (running VMs).
    #[serde(default, deserialize_with = "opt_u32")]
    pub pid: Option<u32>,
    /// Memory limit, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxmem: Option<u64>,
    /// vCPUs.
    #[serde(default, deserialize_with = "opt_f64")]
    pub cpus: Option<f64>,
    /// HA manager state (object; `{"managed": 0}` when not HA-managed).
    #[serde(default)]
    pub ha: serde_json::Value,
}

impl VmStatus {
    /// Whether the VM is running.
    pub fn is_running(&self) -> bool {
        self.status == VmRunState::Running
    }

    /// Whether HA manages the VM (start/stop become HA requests, docs/proxmox-semantics.md §16).
    pub fn ha_managed(&self) -> bool {
        match self.ha.get("managed") {
            Some(serde_json::Value::Number(n)) => n.as_u64().unwrap_or(0) != 0,
            Some(serde_json::Value::Bool(b)) => *b,
            Some(serde_json::Value::String(s)) => s == "1",
            _ => false,
        }
    }

    /// The requested state of the VM's HA resource (`ha.state`), `None`
    /// when HA does not manage it (docs/field-cases.md B33).
    pub fn ha_state(&self) -> Option<crate::api::ha::HaState> {
        if !self.ha_managed() {
            return None;
        }
        let state = self
            .ha
            .get("state")
            .and_then(|s| s.as_str())
            .unwrap_or("started");
        crate::api::ha::HaState::parse(state).ok()
    }
}

/// Options of `DELETE /nodes/{node}/qemu/{vmid}`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeleteOptions {
    /// `purge=1`: also remove the VMID from backup and replication jobs and
    /// HA resources (needed for HA-managed VMs).
    pub purge: bool,
    /// `destroy-unreferenced-disks=1`: also free volumes named for this VMID
    /// that the config does not reference (leftovers of failed operations).
    pub destroy_unreferenced_disks: bool,
}

impl PveClient {
    /// `GET /nodes/{node}/qemu`: VMs on one node with live run state.
    ///
    /// # Errors
    /// [`PveError::NotFound`] for an unknown node; `NodeUnreachable` for an
    /// offline node; transport errors.
    pub async fn vms(&self, node: &NodeName) -> Result<Vec<VmListEntry>, PveError> {
        self.call(Call::get(
            "/nodes/{node}/qemu",
            format!("/nodes/{}/qemu", seg(node.as_str())),
        ))
        .await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/status/current`: live state of one VM.
    ///
    /// # Errors
    /// [`PveError::NotFound`] when the VM is not on that node (or does not
    /// exist); transport errors.
    pub async fn vm_status(&self, node: &NodeName, vmid: VmId) -> Result<VmStatus, PveError> {
        self.call(Call::get(
            "/nodes/{node}/qemu/{vmid}/status/current",
            vm_path(node, vmid, "/status/current"),
        ))
        .await
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/resize` with an **absolute** size
    /// (`disk=scsi0&size=40G`), never a relative `+N`, so a repeat after a
    /// timeout cannot grow the disk twice (docs/field-cases.md B08). Only growing works;
    /// an equal size is a no-op. Returns the `resize` task (PVE ≥ 8.0), or
    /// `None` when the server answered `null` (PVE 7).
    ///
    /// Compare sizes first: on PVE 8+ a smaller size fails in the task
    /// (`TaskFailed` "shrinking disks is not supported"), on PVE 7
    /// synchronously (`Conflict`).
    ///
    /// # Errors
    /// [`PveError::NotFound`] (no such VM on the node), `InvalidParameter`
    /// (unknown disk), `Conflict` (PVE 7 shrink), `Locked`/`LockTimeout`;
    /// transport errors.
    pub async fn resize_disk(
        &self,
        node: &NodeName,
        vmid: VmId,
        disk: DiskSlot,
        size: DiskSize,
    ) -> Result<Option<Upid>, PveError> {
        let mut f = Form::new();
        f.push("disk", disk.to_string())
            .push("size", size.to_string());
        self.call(Call::put(
            "/nodes/{node}/qemu/{vmid}/resize",
            vm_path(node, vmid, "/resize"),
            f,
        ))
        .await
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}[?purge=1][&destroy-unreferenced-disks=1]`:
    /// destroys a **stopped** VM (a running VM is refused, never stopped
    /// implicitly). Returns the `qmdestroy` task; the VM disappears when it
    /// ends. ISOs and volumes owned by other VMIDs are left alone.
    ///
    /// # Errors
    /// [`PveError::NotFound`] when the VM is not there; `Conflict` for a
    /// running VM (`VM 105 is running - destroy failed`), protection mode, or
    /// HA without `purge`; `Locked`/`LockTimeout`; transport errors.
    pub async fn delete_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        options: DeleteOptions,
    ) -> Result<Upid, PveError> {
        let mut q = Form::new();
        if options.purge {
            q.push_bool("purge", true);
        }
        if options.destroy_unreferenced_disks {
            q.push_bool("destroy-unreferenced-disks", true);
        }
        self.call(Call::delete(
            "/nodes/{node}/qemu/{vmid}",
            vm_path(node, vmid, ""),
            q,
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_vm_list_and_status() {
        let l: Vec<VmListEntry> = serde_json::from_str(
            r#"[{"vmid":9000,"name":"tpl","status":"stopped","template":1,"maxmem":2147483648},
                {"vmid":"131","status":"running","lock":"clone","cpus":2,"uptime":"55"}]"#,
        )
        .unwrap();
        assert!(l[0].template && l[0].status == VmRunState::Stopped);
        assert_eq!(l[1].lock, Some(VmLock::Clone));
        assert_eq!(l[1].uptime, Some(55));
        let s: VmStatus = serde_json::from_str(
            r#"{"status":"running","qmpstatus":"running","agent":1,"ha":{"managed":0},"pid":1234,"name":"m1","uptime":3}"#,
        )
        .unwrap();
        assert!(s.is_running() && s.agent && !s.ha_managed() && !s.template);
        let s: VmStatus =
            serde_json::from_str(r#"{"status":"unknown","ha":{"managed":1,"state":"started"}}"#)
                .unwrap();
        assert_eq!(s.status, VmRunState::Other("unknown".into()));
        assert!(s.ha_managed());
        assert_eq!(s.ha_state(), Some(crate::api::ha::HaState::Started));
    }

    #[test]
    fn paths() {
        let n = NodeName::new("pve-a1").unwrap();
        let v = VmId::new(105).unwrap();
        assert_eq!(vm_path(&n, v, "/config"), "/nodes/pve-a1/qemu/105/config");
        assert_eq!(vm_path(&n, v, ""), "/nodes/pve-a1/qemu/105");
    }
}
