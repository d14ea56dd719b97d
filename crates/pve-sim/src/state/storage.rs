//! Storages and their volumes. Local storages have one volume namespace per
//! node, shared storages one for the cluster. Capacity is accounted with
//! the virtual size of every volume (thin or not) and the bytes of ISOs.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::StorageConfig;

/// A volume on a storage.
#[derive(Clone, Debug)]
pub(crate) struct Volume {
    /// Volume name (after `storage:`), e.g. `vm-101-disk-0`,
    /// `base-9000-disk-0/vm-101-disk-0`, `101/vm-101-disk-0.qcow2`, `iso/seed.iso`.
    pub volname: String,
    /// Owner VMID (images), if any.
    pub vmid: Option<u32>,
    /// Size in bytes.
    pub size: u64,
    /// `raw`, `qcow2`, `iso`, …
    pub format: String,
    /// Content type (`images`, `iso`, `vztmpl`, …).
    pub content: String,
    /// Base volume of a linked clone.
    pub parent: Option<String>,
    /// Creation time (epoch seconds).
    pub ctime: u64,
    /// File bytes (uploads only).
    pub data: Option<Arc<Vec<u8>>>,
}

/// A storage and its volumes.
#[derive(Clone, Debug)]
pub(crate) struct StorageState {
    pub cfg: StorageConfig,
    /// Scope ("" for shared storages, else the node) → volname → volume.
    pub scopes: BTreeMap<String, BTreeMap<String, Volume>>,
}

impl StorageState {
    pub fn new(cfg: StorageConfig) -> Self {
        StorageState {
            cfg,
            scopes: BTreeMap::new(),
        }
    }

    /// Namespace key of `node` on this storage.
    pub fn scope(&self, node: &str) -> String {
        if self.cfg.shared {
            String::new()
        } else {
            node.to_string()
        }
    }

    /// Whether the storage is configured for `node` (its `nodes` list, all
    /// nodes when absent): `/nodes/{node}/storage` lists it.
    pub fn listed_on(&self, node: &str) -> bool {
        self.cfg
            .nodes
            .as_ref()
            .is_none_or(|n| n.iter().any(|x| x == node))
    }

    /// Listed on `node` and not disabled (`enabled: 1`).
    pub fn enabled_on(&self, node: &str) -> bool {
        self.listed_on(node) && !self.cfg.disabled
    }

    /// Enabled on `node` and activated there (`active: 1`).
    pub fn active_on(&self, node: &str) -> bool {
        self.enabled_on(node) && !self.cfg.inactive_on.iter().any(|n| n == node)
    }

    /// `storage_check_enabled` of pve-storage: the error a request naming
    /// the storage on `node` gets when it is not configured there or
    /// disabled.
    pub fn check_enabled(&self, node: &str) -> Result<(), String> {
        let name = &self.cfg.name;
        if !self.listed_on(node) {
            return Err(format!(
                "storage '{name}' is not available on node '{node}'"
            ));
        }
        if self.cfg.disabled {
            return Err(format!("storage '{name}' is disabled"));
        }
        Ok(())
    }

    /// [`Self::check_enabled`], then activation (what an allocation, an
    /// upload or a content listing on `node` needs).
    pub fn check_active(&self, node: &str) -> Result<(), String> {
        self.check_enabled(node)?;
        if !self.active_on(node) {
            return Err(format!("storage '{}' is not online", self.cfg.name));
        }
        Ok(())
    }

    pub fn supports(&self, content: &str) -> bool {
        self.cfg.content.iter().any(|c| c == content)
    }

    /// Capacity in bytes.
    pub fn capacity(&self) -> u64 {
        self.cfg.capacity_gib << 30
    }

    /// Bytes used in the namespace of `node`.
    pub fn used(&self, node: &str) -> u64 {
        self.scopes
            .get(&self.scope(node))
            .map(|v| v.values().map(|x| x.size).sum())
            .unwrap_or(0)
    }

    pub fn volumes(&self, node: &str) -> impl Iterator<Item = &Volume> {
        self.scopes
            .get(&self.scope(node))
            .into_iter()
            .flat_map(|m| m.values())
    }

    pub fn get(&self, node: &str, volname: &str) -> Option<&Volume> {
        self.scopes
            .get(&self.scope(node))
            .and_then(|m| m.get(volname))
    }

    pub fn get_mut(&mut self, node: &str, volname: &str) -> Option<&mut Volume> {
        let scope = self.scope(node);
        self.scopes.get_mut(&scope).and_then(|m| m.get_mut(volname))
    }

    pub fn remove(&mut self, node: &str, volname: &str) -> Option<Volume> {
        let scope = self.scope(node);
        self.scopes.get_mut(&scope).and_then(|m| m.remove(volname))
    }

    /// Checks that `extra` more bytes fit.
    pub fn check_space(&self, node: &str, extra: u64) -> Result<(), String> {
        let used = self.used(node);
        if used.saturating_add(extra) > self.capacity() {
            return Err(format!(
                "storage '{}' has not enough free space: requested {extra} bytes, available {} bytes",
                self.cfg.name,
                self.capacity().saturating_sub(used)
            ));
        }
        Ok(())
    }

    /// Inserts a volume (after [`StorageState::check_space`]).
    pub fn insert(&mut self, node: &str, vol: Volume) {
        let scope = self.scope(node);
        self.scopes
            .entry(scope)
            .or_default()
            .insert(vol.volname.clone(), vol);
    }

    /// The name a new disk of `vmid` gets: lowest free `vm-<vmid>-disk-<n>`
    /// (`<vmid>/vm-<vmid>-disk-<n>.<fmt>` on file storages), optionally as a
    /// linked clone of `parent` (`base-…/vm-…`).
    pub fn new_disk_name(
        &self,
        node: &str,
        vmid: u32,
        format: &str,
        parent: Option<&str>,
    ) -> String {
        let taken = |n: u32| {
            let stem = format!("vm-{vmid}-disk-{n}");
            self.volumes(node).any(|v| {
                let last = v.volname.rsplit('/').next().unwrap_or(&v.volname);
                last == stem || last.split('.').next() == Some(stem.as_str())
            })
        };
        let n = (0..).find(|n| !taken(*n)).unwrap_or(0);
        let stem = format!("vm-{vmid}-disk-{n}");
        let own = if self.cfg.kind.is_file_based() {
            format!("{vmid}/{stem}.{format}")
        } else {
            stem
        };
        match parent {
            Some(p) => format!("{p}/{own}"),
            None => own,
        }
    }
}

/// Splits `storage:volname`.
pub(crate) fn split_volid(volid: &str) -> Option<(&str, &str)> {
    volid
        .split_once(':')
        .filter(|(s, v)| !s.is_empty() && !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StorageType;

    fn st(kind: StorageType, shared: bool) -> StorageState {
        StorageState::new(StorageConfig {
            disabled: false,
            inactive_on: Vec::new(),
            name: "s".into(),
            kind,
            shared,
            content: vec!["images".into(), "iso".into()],
            capacity_gib: 10,
            nodes: None,
            alloc_lock: None,
        })
    }

    fn vol(name: &str, size: u64) -> Volume {
        Volume {
            volname: name.into(),
            vmid: Some(101),
            size,
            format: "raw".into(),
            content: "images".into(),
            parent: None,
            ctime: 0,
            data: None,
        }
    }

    #[test]
    fn naming_and_scopes() {
        let mut s = st(StorageType::Lvmthin, false);
        assert_eq!(s.new_disk_name("n1", 101, "raw", None), "vm-101-disk-0");
        s.insert("n1", vol("vm-101-disk-0", 1 << 30));
        assert_eq!(s.new_disk_name("n1", 101, "raw", None), "vm-101-disk-1");
        assert_eq!(
            s.new_disk_name("n2", 101, "raw", None),
            "vm-101-disk-0",
            "local: per node"
        );
        assert_eq!(
            s.new_disk_name("n1", 101, "raw", Some("base-9000-disk-0")),
            "base-9000-disk-0/vm-101-disk-1"
        );
        let d = st(StorageType::Dir, true);
        assert_eq!(
            d.new_disk_name("n1", 7, "qcow2", None),
            "7/vm-7-disk-0.qcow2"
        );
    }

    #[test]
    fn capacity() {
        let mut s = st(StorageType::Rbd, true);
        s.insert("n1", vol("vm-101-disk-0", 8 << 30));
        assert_eq!(s.used("n2"), 8 << 30, "shared: one namespace");
        assert!(s.check_space("n1", 2 << 30).is_ok());
        assert!(s.check_space("n1", (2 << 30) + 1).is_err());
    }
}
