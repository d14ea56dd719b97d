//! `GET /nodes`, `GET /nodes/{node}/status`.

use serde::Deserialize;

use crate::PveClient;
use crate::client::{Call, seg};
use crate::error::PveError;
use crate::options::Arch;
use crate::types::NodeName;
use crate::types::lenient::{opt_f64, opt_string, opt_u32, opt_u64};

/// One entry of `GET /nodes`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NodeInfo {
    /// Node name.
    pub node: NodeName,
    /// `online`, `offline` or `unknown`.
    pub status: String,
    /// CPU utilisation (fraction).
    #[serde(default, deserialize_with = "opt_f64")]
    pub cpu: Option<f64>,
    /// Logical CPUs.
    #[serde(default, deserialize_with = "opt_u32")]
    pub maxcpu: Option<u32>,
    /// Memory used, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub mem: Option<u64>,
    /// Memory total, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxmem: Option<u64>,
    /// Uptime, **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub uptime: Option<u64>,
    /// SHA-256 fingerprint of the node certificate (`AA:BB:…`).
    #[serde(default, deserialize_with = "opt_string")]
    pub ssl_fingerprint: Option<String>,
}

impl NodeInfo {
    /// Whether the node reports `online`.
    pub fn is_online(&self) -> bool {
        self.status == "online"
    }
}

/// `memory` of `GET /nodes/{node}/status`, all **bytes**.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodeMemory {
    /// Total.
    #[serde(default, deserialize_with = "opt_u64")]
    pub total: Option<u64>,
    /// Used.
    #[serde(default, deserialize_with = "opt_u64")]
    pub used: Option<u64>,
    /// Free.
    #[serde(default, deserialize_with = "opt_u64")]
    pub free: Option<u64>,
    /// Available (free plus reclaimable caches; PVE ≥ 8.2).
    #[serde(default, deserialize_with = "opt_u64")]
    pub available: Option<u64>,
}

/// `cpuinfo` of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodeCpuInfo {
    /// Logical threads.
    #[serde(default, deserialize_with = "opt_u32")]
    pub cpus: Option<u32>,
    /// Physical cores.
    #[serde(default, deserialize_with = "opt_u32")]
    pub cores: Option<u32>,
    /// Sockets.
    #[serde(default, deserialize_with = "opt_u32")]
    pub sockets: Option<u32>,
    /// CPU model name.
    #[serde(default, deserialize_with = "opt_string")]
    pub model: Option<String>,
}

/// `current-kernel` of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct NodeKernel {
    /// Hardware (architecture) type, e.g. `x86_64`, `aarch64`.
    #[serde(default, deserialize_with = "opt_string")]
    pub machine: Option<String>,
    /// Kernel release.
    #[serde(default, deserialize_with = "opt_string")]
    pub release: Option<String>,
}

/// Response of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct NodeStatus {
    /// CPU utilisation (fraction).
    #[serde(default, deserialize_with = "opt_f64")]
    pub cpu: Option<f64>,
    /// Memory figures.
    #[serde(default)]
    pub memory: NodeMemory,
    /// CPU details.
    #[serde(default)]
    pub cpuinfo: NodeCpuInfo,
    /// Uptime, **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub uptime: Option<u64>,
    /// pve-manager version string.
    #[serde(default, deserialize_with = "opt_string")]
    pub pveversion: Option<String>,
    /// Load averages (1, 5, 15 min) as Proxmox sends them (strings).
    #[serde(default)]
    pub loadavg: Vec<serde_json::Value>,
    /// The running kernel (PVE ≥ 8.1).
    #[serde(default, rename = "current-kernel")]
    pub current_kernel: NodeKernel,
}

impl NodeStatus {
    /// The node's architecture, from `current-kernel.machine` (`None` when
    /// the server does not report it or reports one Proxmox VMs cannot
    /// have).
    pub fn arch(&self) -> Option<Arch> {
        self.current_kernel
            .machine
            .as_deref()
            .and_then(|m| Arch::parse(m).ok())
    }
}

impl PveClient {
    /// `GET /nodes`: every node of the cluster with status and capacity.
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, PveError> {
        self.call(Call::get("/nodes", "/nodes".to_owned())).await
    }

    /// `GET /nodes/{node}/status`: live CPU, memory (bytes) and uptime of one
    /// node (proxied to that node).
    ///
    /// # Errors
    /// [`PveError::NotFound`] for an unknown node (`hostname lookup … failed`),
    /// [`PveError::NodeUnreachable`] (595) when it is offline; transport errors.
    pub async fn node_status(&self, node: &NodeName) -> Result<NodeStatus, PveError> {
        self.call(Call::get(
            "/nodes/{node}/status",
            format!("/nodes/{}/status", seg(node.as_str())),
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_nodes_and_status() {
        let n: Vec<NodeInfo> = serde_json::from_str(
            r#"[{"node":"pve-a1","status":"online","maxcpu":32,"maxmem":137438953472,"mem":"1073741824","uptime":10},
                {"node":"pve-a2","status":"offline"}]"#,
        )
        .unwrap();
        assert!(n[0].is_online() && !n[1].is_online());
        assert_eq!(n[0].mem, Some(1 << 30));
        let s: NodeStatus = serde_json::from_str(
            r#"{"cpu":0.1,"memory":{"total":137438953472,"used":1073741824,"free":136365211648},
                "cpuinfo":{"cpus":32,"cores":16,"sockets":1,"model":"x"},"uptime":99,"pveversion":"pve-manager/9.1.4",
                "loadavg":["0.10","0.20","0.30"]}"#,
        )
        .unwrap();
        assert_eq!(s.memory.total, Some(128 << 30));
        assert_eq!(s.cpuinfo.cpus, Some(32));
        assert_eq!(s.uptime, Some(99));
        assert_eq!(s.arch(), None);
        let s: NodeStatus = serde_json::from_str(
            r#"{"current-kernel":{"machine":"aarch64","release":"6.8.12","sysname":"Linux"}}"#,
        )
        .unwrap();
        assert_eq!(s.arch(), Some(Arch::Aarch64));
    }
}
