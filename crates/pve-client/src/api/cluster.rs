//! `GET /cluster/status`, `GET /cluster/resources`, `GET /cluster/nextid`.

use serde::Deserialize;

use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::{ParseError, PveError};
use crate::options::Tags;
use crate::types::lenient::{bool01, opt_f64, opt_lock, opt_string, opt_u32, opt_u64};
use crate::types::{NodeName, VmId, VmLock};

/// The `type` filter of `GET /cluster/resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    /// Virtual guests (`qemu` and `lxc` entries).
    Vm,
    /// Storages (one entry per node and storage).
    Storage,
    /// Nodes.
    Node,
    /// SDN zones.
    Sdn,
}

impl ResourceType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Vm => "vm",
            Self::Storage => "storage",
            Self::Node => "node",
            Self::Sdn => "sdn",
        }
    }
}

/// One entry of `GET /cluster/resources`.
///
/// Caveat (docs/proxmox-semantics.md §9): VMIDs, nodes, `lock` and `tags` are current, but
/// `status`, `name`, `template`, `maxmem` and the counters come from a ~10 s
/// status broadcast — a fresh clone shows `status: "unknown"` without a name
/// for a while. Decide on `status/current` and `config`, not on this list.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ClusterResource {
    /// Resource id, e.g. `qemu/105`, `node/pve-a1`, `storage/pve-a1/ceph`.
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`, …
    #[serde(rename = "type")]
    pub kind: String,
    /// VMID (guests).
    #[serde(default)]
    pub vmid: Option<VmId>,
    /// Node the guest/storage is on, or the node itself.
    #[serde(default)]
    pub node: Option<NodeName>,
    /// Guest or node name (may lag or be absent right after a clone).
    #[serde(default, deserialize_with = "opt_string")]
    pub name: Option<String>,
    /// `running`/`stopped`/`unknown` (guests), `online`/`offline` (nodes),
    /// `available` (storages).
    #[serde(default, deserialize_with = "opt_string")]
    pub status: Option<String>,
    /// Whether the guest is a template.
    #[serde(default, deserialize_with = "bool01")]
    pub template: bool,
    /// Raw `;`-separated tags; see [`ClusterResource::tags`].
    #[serde(default, rename = "tags", deserialize_with = "opt_string")]
    pub tags_raw: Option<String>,
    /// The guest's config lock.
    #[serde(default, deserialize_with = "opt_lock")]
    pub lock: Option<VmLock>,
    /// Pool the guest belongs to.
    #[serde(default, deserialize_with = "opt_string")]
    pub pool: Option<String>,
    /// HA state for HA-managed guests.
    #[serde(default, deserialize_with = "opt_string")]
    pub hastate: Option<String>,
    /// Memory limit (guest) or total (node), **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxmem: Option<u64>,
    /// Memory used, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub mem: Option<u64>,
    /// CPUs (guest vCPUs or node threads).
    #[serde(default, deserialize_with = "opt_f64")]
    pub maxcpu: Option<f64>,
    /// CPU utilisation, fraction 0..=1 per CPU.
    #[serde(default, deserialize_with = "opt_f64")]
    pub cpu: Option<f64>,
    /// Storage size (storage) or root disk size (guest), **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub maxdisk: Option<u64>,
    /// Storage used, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub disk: Option<u64>,
    /// Uptime, **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub uptime: Option<u64>,
    /// Storage id (storages).
    #[serde(default, deserialize_with = "opt_string")]
    pub storage: Option<String>,
    /// Storage type, e.g. `lvmthin`, `rbd`, `dir` (storages).
    #[serde(default, deserialize_with = "opt_string")]
    pub plugintype: Option<String>,
    /// Whether the storage is shared between nodes.
    #[serde(default, deserialize_with = "bool01")]
    pub shared: bool,
    /// Content types of the storage, comma-separated (`images,iso`).
    #[serde(default, deserialize_with = "opt_string")]
    pub content: Option<String>,
}

impl ClusterResource {
    /// A VM entry's run state from its `status` (`running`, `stopped`;
    /// anything else, such as `unknown` before the VM's first status
    /// broadcast or on an offline node, as `Other`); `None` without a
    /// status, and for entries that are not QEMU VMs. It lags the VM by up
    /// to about 10 s (docs/proxmox-semantics.md §9).
    pub fn run_state(&self) -> Option<crate::api::qemu::VmRunState> {
        if !self.is_qemu() {
            return None;
        }
        self.status
            .as_deref()
            .map(crate::api::qemu::VmRunState::parse)
    }

    /// Whether this is a QEMU VM entry.
    pub fn is_qemu(&self) -> bool {
        self.kind == "qemu"
    }

    /// The tags, parsed.
    ///
    /// # Errors
    /// [`ParseError`] if the server returned a tag outside Proxmox's own
    /// character set.
    pub fn tags(&self) -> Result<Tags, ParseError> {
        Tags::parse(self.tags_raw.as_deref().unwrap_or_default())
    }
}

/// One entry of `GET /cluster/status`: the cluster itself (`type: cluster`) or
/// a node (`type: node`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ClusterStatusEntry {
    /// `cluster` or `node/<name>`.
    pub id: String,
    /// Cluster or node name.
    pub name: String,
    /// `cluster` or `node`.
    #[serde(rename = "type")]
    pub kind: String,
    /// (node) IP address of the node.
    #[serde(default, deserialize_with = "opt_string")]
    pub ip: Option<String>,
    /// (node) Whether the node is online.
    #[serde(default, deserialize_with = "bool01")]
    pub online: bool,
    /// (node) Whether this node answered the request.
    #[serde(default, deserialize_with = "bool01")]
    pub local: bool,
    /// (node) corosync node id.
    #[serde(default, deserialize_with = "opt_u32")]
    pub nodeid: Option<u32>,
    /// (cluster) Whether the cluster has quorum (writes to `/etc/pve` need it).
    #[serde(default, deserialize_with = "bool01")]
    pub quorate: bool,
    /// (cluster) Number of nodes, including offline ones.
    #[serde(default, deserialize_with = "opt_u32")]
    pub nodes: Option<u32>,
}

impl ClusterStatusEntry {
    /// Whether this is a node entry.
    pub fn is_node(&self) -> bool {
        self.kind == "node"
    }
}

impl PveClient {
    /// `GET /cluster/status`: cluster name and quorum, plus each node with its
    /// online flag. A standalone node returns only its node entry.
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]); `PermissionDenied` without
    /// `Sys.Audit`.
    pub async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, PveError> {
        self.call(Call::get("/cluster/status", "/cluster/status".to_owned()))
            .await
    }

    /// `GET /cluster/resources[?type=…]`: the cluster-wide inventory. Objects
    /// the token may not audit are silently left out. See the caveats on
    /// [`ClusterResource`].
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn cluster_resources(
        &self,
        kind: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, PveError> {
        let mut q = Form::new();
        q.push_opt("type", kind.map(ResourceType::as_str));
        self.call(Call::get("/cluster/resources", "/cluster/resources".to_owned()).with_query(q))
            .await
    }

    /// `GET /cluster/nextid[?vmid=N]`: the lowest free VMID in the datacenter's
    /// `next-id` range, or `N` itself if free. **Reserves nothing**: concurrent
    /// callers get the same answer (docs/proxmox-semantics.md §7).
    ///
    /// # Errors
    /// [`PveError::InvalidParameter`] with `errors["vmid"] = "VM N already
    /// exists"` when `N` is taken; transport errors.
    pub async fn next_vmid(&self, candidate: Option<VmId>) -> Result<VmId, PveError> {
        let mut q = Form::new();
        q.push_opt("vmid", candidate);
        self.call(Call::get("/cluster/nextid", "/cluster/nextid".to_owned()).with_query(q))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resources_decode_leniently() {
        let json = r#"[
          {"id":"qemu/9000","type":"qemu","vmid":9000,"node":"pve-a1","name":"ubuntu-2404-kube",
           "status":"stopped","template":1,"tags":"capmox;ubuntu-24.04","maxmem":4294967296,"maxcpu":2,"lock":""},
          {"id":"qemu/131","type":"qemu","vmid":"131","node":"pve-a2","status":"unknown","template":"","lock":"clone"},
          {"id":"node/pve-a1","type":"node","node":"pve-a1","status":"online","maxmem":"137438953472","mem":1024,"maxcpu":32,"cpu":0.05,"uptime":3600},
          {"id":"storage/pve-a1/ceph","type":"storage","node":"pve-a1","storage":"ceph","plugintype":"rbd","shared":1,
           "content":"images","maxdisk":1099511627776,"disk":0,"status":"available"}
        ]"#;
        let r: Vec<ClusterResource> = serde_json::from_str(json).unwrap();
        assert!(r[0].is_qemu() && r[0].template);
        assert_eq!(r[0].vmid.map(VmId::get), Some(9000));
        assert_eq!(r[0].maxmem, Some(4 * 1024 * 1024 * 1024));
        assert_eq!(r[0].lock, None);
        assert!(r[0].tags().unwrap().contains("capmox"));
        assert_eq!(r[1].vmid.map(VmId::get), Some(131));
        assert!(!r[1].template);
        assert_eq!(r[1].name, None);
        assert_eq!(r[1].lock, Some(VmLock::Clone));
        use crate::api::qemu::VmRunState;
        assert_eq!(r[0].run_state(), Some(VmRunState::Stopped));
        assert_eq!(r[1].run_state(), Some(VmRunState::Other("unknown".into())));
        assert_eq!(r[3].run_state(), None, "a storage entry");
        assert_eq!(r[2].maxmem, Some(128 * 1024 * 1024 * 1024));
        assert_eq!(r[2].vmid, None);
        assert!(r[3].shared);
        assert_eq!(r[3].plugintype.as_deref(), Some("rbd"));
    }

    #[test]
    fn cluster_status_decodes() {
        let json = r#"[
          {"id":"cluster","name":"dc-a","type":"cluster","quorate":1,"nodes":3,"version":5},
          {"id":"node/pve-a1","name":"pve-a1","type":"node","online":1,"local":1,"nodeid":1,"ip":"10.0.0.11","level":""},
          {"id":"node/pve-a2","name":"pve-a2","type":"node","online":0,"nodeid":2,"ip":"10.0.0.12"}
        ]"#;
        let s: Vec<ClusterStatusEntry> = serde_json::from_str(json).unwrap();
        assert!(s[0].quorate && !s[0].is_node());
        assert!(s[1].online && s[1].is_node() && s[1].local);
        assert!(!s[2].online);
        assert_eq!(s[2].nodeid, Some(2));
    }
}
