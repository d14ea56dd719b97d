//! `GET /cluster/mapping/pci`: the cluster-wide PCI resource mappings.
//!
//! A mapping gives one logical name (`nvidia-a100`) to physical devices on
//! the nodes: each `map` entry is a property string
//! `node=<node>,path=<addr>[;<addr>…],id=<vendor:device>[,iommugroup=N]
//! [,subsystem-id=…][,description=…]`. A node may appear in several
//! entries, one per device; the `path` of one entry lists the functions of
//! one multifunction device (`0000:01:00.0;0000:01:00.1`), all passed
//! through together. When a VM with `hostpci[n]: mapping=<id>` starts,
//! Proxmox takes the first entry of its node that no running VM uses, and
//! the start fails when there is none (docs/vm-shapes.md "PCI devices"). So
//! the devices a mapping has on a node are that node's entries. The list only shows mappings the token has `Mapping.Audit`,
//! `Mapping.Use` or `Mapping.Modify` on (`/mapping/pci/<id>`).

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::PveClient;
use crate::client::Call;
use crate::error::{ParseError, PveError};
use crate::options::propstr::split;
use crate::types::lenient::{bool01, opt_string};

const WHAT: &str = "PCI mapping entry";

/// One `map` entry: devices of a mapping on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciMapEntry {
    /// The node.
    pub node: String,
    /// The addresses (`0000:01:00.0`) of the functions of this one device
    /// (several for a multifunction device).
    pub paths: Vec<String>,
    /// `vendor:device` id, if given.
    pub id: Option<String>,
    /// Every other key (`iommugroup`, `subsystem-id`, `description`),
    /// verbatim.
    pub extra: BTreeMap<String, String>,
}

impl PciMapEntry {
    /// Parses one entry.
    ///
    /// # Errors
    /// [`ParseError`] without `node` or `path`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut node = None;
        let mut paths = Vec::new();
        let mut id = None;
        let mut extra = BTreeMap::new();
        for (k, v) in split(s, WHAT, None)? {
            match k.as_str() {
                "node" => node = Some(v),
                "path" => paths = v.split(';').map(str::to_string).collect(),
                "id" => id = Some(v),
                _ => {
                    extra.insert(k, v);
                }
            }
        }
        let node = node.ok_or_else(|| ParseError::new(WHAT, s, "node is missing"))?;
        if paths.is_empty() || paths.iter().any(String::is_empty) {
            return Err(ParseError::new(WHAT, s, "path is missing"));
        }
        Ok(Self {
            node,
            paths,
            id,
            extra,
        })
    }
}

/// One mapping as `GET /cluster/mapping/pci` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct PciMapping {
    /// The mapping id (used as `hostpci[n]: mapping=<id>`).
    pub id: String,
    /// Its description.
    #[serde(default, deserialize_with = "opt_string")]
    pub description: Option<String>,
    /// The raw `map` entries; see [`PciMapping::entries`].
    #[serde(default)]
    pub map: Vec<String>,
    /// Whether the devices provide mediated devices (when the server says).
    #[serde(default, deserialize_with = "bool01")]
    pub mdev: bool,
}

impl PciMapping {
    /// The parsed `map` entries (entries that do not parse are skipped: a
    /// device Proxmox itself could not use).
    pub fn entries(&self) -> Vec<PciMapEntry> {
        self.map
            .iter()
            .filter_map(|m| PciMapEntry::parse(m).ok())
            .collect()
    }

    /// Devices the mapping has on each node (nodes without any are
    /// absent).
    pub fn devices_per_node(&self) -> BTreeMap<String, u32> {
        let mut out = BTreeMap::new();
        for e in self.entries() {
            *out.entry(e.node).or_insert(0u32) += 1;
        }
        out
    }
}

impl PveClient {
    /// `GET /cluster/mapping/pci`: the PCI mappings the token may see.
    ///
    /// # Errors
    /// Transport errors only (an unknown or hidden mapping is simply not
    /// listed).
    pub async fn pci_mappings(&self) -> Result<Vec<PciMapping>, PveError> {
        self.call(Call::get(
            "/cluster/mapping/pci",
            "/cluster/mapping/pci".to_owned(),
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_per_node_count_entries_not_functions() {
        let m: Vec<PciMapping> = serde_json::from_str(
            r#"[{"id":"nvidia-a100","description":"A100",
                 "map":["node=pve-b1,path=0000:01:00.0,id=10de:20b0,iommugroup=12",
                        "node=pve-b1,path=0000:02:00.0,id=10de:20b0",
                        "node=pve-b2,path=0000:01:00.0;0000:41:00.0,id=10de:20b0",
                        "garbage"]},
                {"id":"empty","map":[]}]"#,
        )
        .unwrap();
        let d = m[0].devices_per_node();
        assert_eq!(d.get("pve-b1"), Some(&2));
        assert_eq!(d.get("pve-b2"), Some(&1), "one multifunction device");
        assert_eq!(d.get("pve-b3"), None);
        assert_eq!(m[0].entries()[0].extra["iommugroup"], "12");
        assert!(m[1].devices_per_node().is_empty());
        assert!(!m[0].mdev);
        assert!(PciMapEntry::parse("path=0000:01:00.0").is_err());
        assert!(PciMapEntry::parse("node=x").is_err());
    }
}
