//! What tests see of the simulator's state: VMs, volumes, tasks, HA
//! resources and nodes as plain values ([`crate::SimCluster`] hands them out).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::iso::NoCloudSeed;
use crate::state::tasks::TaskStatus;
use crate::state::vm::AgentState;

/// A VM as tests see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct VmSnapshot {
    /// VMID.
    pub vmid: u32,
    /// Node the config lives on.
    pub node: String,
    /// `name`.
    pub name: Option<String>,
    /// `template: 1`.
    pub template: bool,
    /// `running` or `stopped`.
    pub status: String,
    /// `lock` property.
    pub lock: Option<String>,
    /// Tags, split.
    pub tags: Vec<String>,
    /// Current config (as stored, without `digest`).
    pub config: BTreeMap<String, String>,
    /// Pending values.
    pub pending: BTreeMap<String, String>,
    /// Pending deletions.
    pub pending_delete: Vec<String>,
    /// Guest agent behaviour.
    pub agent: AgentState,
    /// Addresses the guest agent reports (interface name → `ip/prefix`), empty when stopped.
    pub guest_addresses: BTreeMap<String, Vec<String>>,
    /// How the running guest took its seed (`cloud-init`, `ignition 3.4.0`,
    /// `no seed`, `failed: …`); `None` when stopped.
    pub guest_boot: Option<String>,
    /// The NoCloud seed ISO the running guest read when it booted
    /// (`storage:iso/<file>`, contents), kept after the ISO is ejected or
    /// deleted, as cloud-init keeps what it read; `None` when stopped or
    /// booted without one.
    pub boot_seed: Option<(String, NoCloudSeed)>,
}

/// A volume as tests see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeSnapshot {
    /// `storage:volname`.
    pub volid: String,
    /// Bytes.
    pub size: u64,
    /// `raw`, `qcow2`, `iso`, …
    pub format: String,
    /// Content type.
    pub content: String,
    /// Owner VMID.
    pub vmid: Option<u32>,
    /// Base volume of a linked clone.
    pub parent: Option<String>,
}

/// A task as tests see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSnapshot {
    /// UPID.
    pub upid: String,
    /// Node.
    pub node: String,
    /// Worker type.
    pub kind: String,
    /// Task id.
    pub id: String,
    /// Owner.
    pub owner: String,
    /// `running` or `stopped`.
    pub status: String,
    /// Exit status once stopped.
    pub exitstatus: Option<String>,
    /// Log lines.
    pub log: Vec<String>,
}

/// An HA resource as tests see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaSnapshot {
    /// VMID (`vm:<vmid>`).
    pub vmid: u32,
    /// Requested state.
    pub state: String,
    /// HA group (PVE 8).
    pub group: Option<String>,
}

/// A node as tests see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    /// Name.
    pub name: String,
    /// Online.
    pub online: bool,
}

pub(crate) fn snapshot(vm: &crate::state::vm::Vm) -> VmSnapshot {
    VmSnapshot {
        vmid: vm.vmid,
        node: vm.node.clone(),
        name: vm.name().map(String::from),
        template: vm.is_template(),
        status: if vm.running() { "running" } else { "stopped" }.into(),
        lock: vm.lock().map(String::from),
        tags: vm
            .conf
            .get("tags")
            .map(|t| t.split(';').map(String::from).collect())
            .unwrap_or_default(),
        config: vm.conf.clone(),
        pending: vm.pending.clone(),
        pending_delete: vm.pending_delete.keys().cloned().collect(),
        agent: vm.agent,
        guest_addresses: vm
            .run
            .iter()
            .flat_map(|r| r.ifaces.iter())
            .map(|i| {
                (
                    i.name.clone(),
                    i.addrs.iter().map(|(a, p)| format!("{a}/{p}")).collect(),
                )
            })
            .collect(),
        guest_boot: vm.run.as_ref().map(|r| r.boot.to_string()),
        boot_seed: vm.run.as_ref().and_then(|r| r.seed.clone()),
    }
}

pub(crate) fn task_snapshot(t: &crate::state::tasks::Task) -> TaskSnapshot {
    let (status, exitstatus) = match &t.status {
        TaskStatus::Running => ("running".to_string(), None),
        TaskStatus::Stopped { exitstatus, .. } => ("stopped".to_string(), Some(exitstatus.clone())),
    };
    TaskSnapshot {
        upid: t.upid.clone(),
        node: t.node.clone(),
        kind: t.kind.clone(),
        id: t.id.clone(),
        owner: t.owner.clone(),
        status,
        exitstatus,
        log: t.log.clone(),
    }
}
