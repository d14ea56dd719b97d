//! `/cluster/resources` snapshots, shared by every machine of one Proxmox
//! cluster (keyed by identity) and kept for a short time, so scheduling many
//! machines costs one listing, not one per machine.
//!
//! Freshness: a caller that must not see a listing older than some instant
//! (e.g. "is the VMID gone after the destroy task ended?") passes
//! `not_before`; concurrent callers share one fetch (single flight).
//!
//! Caveat (docs/proxmox-semantics.md §9): VMIDs, nodes, `lock` and `tags` in the listing
//! are current; status, `name`, `template` and memory lag up to ~10 s. The
//! views below use it accordingly.

use crate::clients::Identity;
use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::machine::plan::scheduler::{NodeFacts, VmLoad};
use crate::machine::plan::template::TemplateVm;
pub use crate::machine::vm::media::StorageView;
use crate::pve::{ClusterResource, ProxmoxApi, PveError};
use pve_client::options::Tags;

/// One listing.
#[derive(Debug)]
pub struct Snapshot {
    /// When it was fetched.
    pub fetched: Instant,
    /// The entries.
    pub resources: Vec<ClusterResource>,
    /// Index into `resources` of each QEMU VM's entry, by VMID (the first
    /// one), so [`Snapshot::vm`] is a lookup: the scheduler asks it for
    /// every machine of a cluster on every plan.
    by_vmid: HashMap<u32, usize>,
}

impl Snapshot {
    /// A listing fetched at `fetched`.
    pub fn new(fetched: Instant, resources: Vec<ClusterResource>) -> Snapshot {
        let mut by_vmid = HashMap::new();
        for (i, r) in resources.iter().enumerate() {
            if r.is_qemu()
                && let Some(v) = r.vmid
            {
                by_vmid.entry(u32::from(v)).or_insert(i);
            }
        }
        Snapshot {
            fetched,
            resources,
            by_vmid,
        }
    }

    /// QEMU VM entries.
    pub fn vms(&self) -> impl Iterator<Item = &ClusterResource> {
        self.resources
            .iter()
            .filter(|r| r.is_qemu() && r.vmid.is_some())
    }

    /// The VM entry of `vmid`.
    pub fn vm(&self, vmid: u32) -> Option<&ClusterResource> {
        self.by_vmid.get(&vmid).map(|&i| &self.resources[i])
    }

    /// Every VMID in use (VMs and containers: the VMID space is shared).
    pub fn live_vmids(&self) -> BTreeSet<u32> {
        self.resources
            .iter()
            .filter_map(|r| r.vmid.map(u32::from))
            .collect()
    }

    /// Nodes for the scheduler.
    pub fn nodes(&self) -> Vec<NodeFacts> {
        self.resources
            .iter()
            .filter(|r| r.kind == "node")
            .filter_map(|r| {
                let name = r.node.as_ref().map(|n| n.as_str().to_string())?;
                Some(NodeFacts {
                    name,
                    online: r.status.as_deref() == Some("online"),
                    maxmem: r.maxmem.unwrap_or(0),
                })
            })
            .collect()
    }

    /// VM memory loads for the scheduler.
    pub fn loads(&self) -> Vec<VmLoad> {
        self.vms()
            .filter_map(|r| {
                Some(VmLoad {
                    vmid: r.vmid.map(u32::from)?,
                    node: r.node.as_ref()?.as_str().to_string(),
                    maxmem: r.maxmem,
                    template: r.template,
                })
            })
            .collect()
    }

    /// Every VM with its tags, for template resolution (entries whose tags do
    /// not parse are skipped).
    pub fn template_candidates(&self) -> Vec<TemplateVm> {
        self.vms()
            .filter_map(|r| {
                Some(TemplateVm {
                    vmid: r.vmid.map(u32::from)?,
                    node: r.node.as_ref()?.as_str().to_string(),
                    name: r.name.clone(),
                    tags: r.tags().unwrap_or_else(|_| Tags::new()),
                    template: r.template,
                })
            })
            .collect()
    }

    /// Storages per node.
    pub fn storages(&self) -> Vec<StorageView> {
        self.resources
            .iter()
            .filter(|r| r.kind == "storage")
            .filter_map(|r| {
                Some(StorageView {
                    storage: r.storage.clone()?,
                    node: r.node.as_ref()?.as_str().to_string(),
                    shared: r.shared,
                    content: r
                        .content
                        .as_deref()
                        .unwrap_or_default()
                        .split(',')
                        .map(|c| c.trim().to_string())
                        .filter(|c| !c.is_empty())
                        .collect(),
                    available: r.status.as_deref().is_none_or(|s| s == "available"),
                })
            })
            .collect()
    }

    /// Whether storage `id` is shared (as listed on any node).
    pub fn is_shared(&self, id: &str) -> Option<bool> {
        self.storages()
            .into_iter()
            .find(|s| s.storage == id)
            .map(|s| s.shared)
    }
}

/// The snapshot cache.
#[derive(Debug)]
pub struct ResourceCache {
    ttl: Duration,
    snapshots: Mutex<HashMap<Identity, Arc<Snapshot>>>,
    flights: Mutex<HashMap<Identity, Arc<tokio::sync::Mutex<()>>>>,
}

impl ResourceCache {
    /// A cache keeping listings for `ttl`.
    pub fn new(ttl: Duration) -> ResourceCache {
        ResourceCache {
            ttl,
            snapshots: Mutex::new(HashMap::new()),
            flights: Mutex::new(HashMap::new()),
        }
    }

    fn cached(&self, identity: &Identity, not_before: Option<Instant>) -> Option<Arc<Snapshot>> {
        let map = self
            .snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let s = map.get(identity)?;
        let fresh = s.fetched.elapsed() <= self.ttl && not_before.is_none_or(|t| s.fetched >= t);
        fresh.then(|| s.clone())
    }

    /// A listing of `identity` younger than the TTL and not older than
    /// `not_before`, fetched through `api` when needed.
    ///
    /// # Errors
    /// The fetch's [`PveError`].
    pub async fn get(
        &self,
        identity: &Identity,
        api: &dyn ProxmoxApi,
        not_before: Option<Instant>,
    ) -> Result<Arc<Snapshot>, PveError> {
        if let Some(s) = self.cached(identity, not_before) {
            return Ok(s);
        }
        let flight = {
            let mut f = self
                .flights
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            f.entry(identity.clone()).or_default().clone()
        };
        let _guard = flight.lock().await;
        if let Some(s) = self.cached(identity, not_before) {
            return Ok(s);
        }
        let started = Instant::now();
        let resources = api.cluster_resources(None).await?;
        let snap = Arc::new(Snapshot::new(started, resources));
        self.snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(identity.clone(), snap.clone());
        Ok(snap)
    }

    /// The newest listing of `identity`, however old (no fetch).
    pub fn latest(&self, identity: &Identity) -> Option<Arc<Snapshot>> {
        self.snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(identity)
            .cloned()
    }

    /// Drops the listing of `identity` (after a change of our own that the
    /// next reader must see).
    pub fn invalidate(&self, identity: &Identity) {
        self.snapshots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(identity);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(json: &str) -> Snapshot {
        Snapshot::new(Instant::now(), serde_json::from_str(json).unwrap())
    }

    #[test]
    fn views() {
        let s = snap(
            r#"[
          {"id":"node/pve-a1","type":"node","node":"pve-a1","status":"online","maxmem":17179869184},
          {"id":"node/pve-a2","type":"node","node":"pve-a2","status":"offline","maxmem":17179869184},
          {"id":"qemu/9000","type":"qemu","vmid":9000,"node":"pve-a1","name":"tpl","template":1,"tags":"capmox;ubuntu-24.04","maxmem":2147483648},
          {"id":"qemu/131","type":"qemu","vmid":131,"node":"pve-a1","status":"running","maxmem":4294967296},
          {"id":"lxc/140","type":"lxc","vmid":140,"node":"pve-a2"},
          {"id":"storage/pve-a1/local","type":"storage","node":"pve-a1","storage":"local","content":"iso,vztmpl,images","shared":0,"status":"available"},
          {"id":"storage/pve-a1/cephfs","type":"storage","node":"pve-a1","storage":"cephfs","content":"iso","shared":1,"status":"available"},
          {"id":"storage/pve-a2/local","type":"storage","node":"pve-a2","storage":"local","content":"iso","shared":0,"status":"unknown"}
        ]"#,
        );
        assert_eq!(s.live_vmids(), [131, 140, 9000].into());
        assert_eq!(s.nodes().iter().filter(|n| n.online).count(), 1);
        let loads = s.loads();
        assert_eq!(loads.len(), 2);
        assert!(loads.iter().any(|l| l.vmid == 9000 && l.template));
        let t = s.template_candidates();
        assert!(
            t.iter()
                .any(|v| v.vmid == 9000 && v.tags.contains("capmox"))
        );
        let iso = |node| crate::machine::vm::media::iso_storage(&s.storages(), node, None);
        assert_eq!(iso("pve-a1").unwrap().storage, "cephfs");
        assert!(iso("pve-a2").is_err(), "not available");
        assert_eq!(s.is_shared("cephfs"), Some(true));
        assert_eq!(s.is_shared("local"), Some(false));
        assert_eq!(
            s.vm(131).and_then(|v| v.status.clone()).as_deref(),
            Some("running")
        );
        assert!(s.vm(140).is_none(), "a container is not a VM");
        assert!(s.vm(9000).is_some_and(|v| v.template));
        assert!(s.vm(777).is_none());
    }
}
