//! Where the bootstrap ISO goes: the storage it is uploaded to and the bus
//! of the CD-ROM drive it is attached on (docs/field-cases.md B39,
//! docs/vm-shapes.md).
//!
//! Rules:
//! - Storage: the machine's `bootstrapMedia.storage` ▸ the instance's ▸ the
//!   first available storage with content `iso` on the VM's node, shared
//!   ones first, then by name. A named storage must be listed on the VM's
//!   node (`/cluster/resources`, type `storage`), be `available` there and
//!   hold content `iso`; the choice is made once and recorded as the exact
//!   volume ID in `status.bootstrapMedia` before the upload, so cleanup
//!   never works it out again.
//! - Bus: the machine's `bootstrapMedia.cdromBus` ▸ the instance's ▸ by
//!   architecture: IDE (then SATA when IDE is full) on x86_64, SCSI (then
//!   SATA) on aarch64, which has no IDE. An explicit `ide` on aarch64 is
//!   refused.

use pve_client::options::{Arch, DiskBus};

use crate::api::machine::CdromBus;

/// A storage as seen from one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageView {
    /// Storage id.
    pub storage: String,
    /// Node.
    pub node: String,
    /// Shared between nodes.
    pub shared: bool,
    /// Content types.
    pub content: Vec<String>,
    /// `available` (listed status).
    pub available: bool,
}

/// Why the ISO has no storage.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IsoStorageError {
    /// No storage with content `iso` is available on the node.
    #[error(
        "no available storage with content 'iso' on node {node}; the bootstrap ISO cannot be attached"
    )]
    NoneOnNode {
        /// The VM's node.
        node: String,
    },
    /// The named storage is not listed on the node (not configured for it).
    #[error(
        "storage {storage:?} (bootstrapMedia.storage) is not reachable from node {node}: configure it for that node or name another"
    )]
    NotOnNode {
        /// The named storage.
        storage: String,
        /// The VM's node.
        node: String,
    },
    /// The named storage is on the node but not available now.
    #[error("storage {storage:?} (bootstrapMedia.storage) is not available on node {node}")]
    Unavailable {
        /// The named storage.
        storage: String,
        /// The VM's node.
        node: String,
    },
    /// The named storage does not hold ISO images.
    #[error(
        "storage {storage:?} (bootstrapMedia.storage) does not accept iso content (it holds: {content}); name a storage with content 'iso'"
    )]
    NoIsoContent {
        /// The named storage.
        storage: String,
        /// Its content types.
        content: String,
    },
}

impl IsoStorageError {
    /// Whether only a change of the spec or of the Proxmox storage
    /// configuration resolves it (no retry on a timer).
    pub fn terminal(&self) -> bool {
        matches!(self, Self::NoIsoContent { .. })
    }
}

fn holds_iso(s: &StorageView) -> bool {
    s.content.iter().any(|c| c == "iso")
}

/// The storage the ISO of a VM on `node` goes to, among `storages` (every
/// storage as listed per node), honouring `requested`.
///
/// # Errors
/// [`IsoStorageError`] as the module rules say.
pub fn iso_storage(
    storages: &[StorageView],
    node: &str,
    requested: Option<&str>,
) -> Result<StorageView, IsoStorageError> {
    let on_node = storages.iter().filter(|s| s.node == node);
    if let Some(want) = requested {
        let Some(s) = on_node.clone().find(|s| s.storage == want) else {
            return Err(IsoStorageError::NotOnNode {
                storage: want.to_string(),
                node: node.to_string(),
            });
        };
        if !holds_iso(s) {
            return Err(IsoStorageError::NoIsoContent {
                storage: want.to_string(),
                content: s.content.join(","),
            });
        }
        if !s.available {
            return Err(IsoStorageError::Unavailable {
                storage: want.to_string(),
                node: node.to_string(),
            });
        }
        return Ok(s.clone());
    }
    let mut v: Vec<&StorageView> = on_node.filter(|s| s.available && holds_iso(s)).collect();
    v.sort_by(|a, b| b.shared.cmp(&a.shared).then(a.storage.cmp(&b.storage)));
    v.first()
        .map(|s| (*s).clone())
        .ok_or_else(|| IsoStorageError::NoneOnNode {
            node: node.to_string(),
        })
}

/// The buses the CD-ROM may go on, in order of preference, for a VM of
/// architecture `arch`.
///
/// # Errors
/// A message naming the field when `requested` is a bus the architecture
/// does not have.
pub fn cdrom_buses(requested: Option<CdromBus>, arch: Arch) -> Result<Vec<DiskBus>, String> {
    match requested {
        Some(b) => {
            let bus = b.disk_bus();
            if arch.has_bus(bus) {
                Ok(vec![bus])
            } else {
                Err(format!(
                    "bootstrapMedia.cdromBus {}: a VM of architecture {arch} has no {} bus; use sata or scsi",
                    b.as_str(),
                    b.as_str()
                ))
            }
        }
        None => Ok(vec![arch.default_cdrom_bus(), DiskBus::Sata]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(storage: &str, node: &str, shared: bool, content: &str, available: bool) -> StorageView {
        StorageView {
            storage: storage.into(),
            node: node.into(),
            shared,
            content: content.split(',').map(str::to_string).collect(),
            available,
        }
    }

    /// The storages of docs/field-cases.md B39 on node-b.
    fn b39() -> Vec<StorageView> {
        vec![
            st("local", "node-b", false, "iso,vztmpl,backup", true),
            st("nfs-iso", "node-b", true, "iso", true),
            st("local-lvm", "node-b", false, "images", true),
            st("nfs-iso", "node-a", true, "iso", true),
            st("only-a", "node-a", false, "iso", true),
        ]
    }

    #[test]
    fn field_case_b39() {
        let s = b39();
        assert_eq!(iso_storage(&s, "node-b", None).unwrap().storage, "nfs-iso");
        assert_eq!(
            iso_storage(&s, "node-b", Some("local")).unwrap().storage,
            "local"
        );
        let e = iso_storage(&s, "node-b", Some("local-lvm")).unwrap_err();
        assert!(e.terminal());
        assert!(
            matches!(&e, IsoStorageError::NoIsoContent { storage, .. } if storage == "local-lvm"),
            "{e}"
        );
        let e = iso_storage(&s, "node-b", Some("only-a")).unwrap_err();
        assert_eq!(
            e,
            IsoStorageError::NotOnNode {
                storage: "only-a".into(),
                node: "node-b".into()
            }
        );
        assert!(!e.terminal());
        assert!(matches!(
            iso_storage(&s, "node-c", None),
            Err(IsoStorageError::NoneOnNode { .. })
        ));
        let down = vec![st("nfs-iso", "node-b", true, "iso", false)];
        assert!(matches!(
            iso_storage(&down, "node-b", Some("nfs-iso")),
            Err(IsoStorageError::Unavailable { .. })
        ));
        assert!(iso_storage(&down, "node-b", None).is_err());
    }

    #[test]
    fn buses_by_architecture() {
        assert_eq!(
            cdrom_buses(None, Arch::X86_64).unwrap(),
            [DiskBus::Ide, DiskBus::Sata]
        );
        assert_eq!(
            cdrom_buses(None, Arch::Aarch64).unwrap(),
            [DiskBus::Scsi, DiskBus::Sata]
        );
        assert_eq!(
            cdrom_buses(Some(CdromBus::Sata), Arch::Aarch64).unwrap(),
            [DiskBus::Sata]
        );
        let e = cdrom_buses(Some(CdromBus::Ide), Arch::Aarch64).unwrap_err();
        assert!(e.contains("no ide bus"), "{e}");
        assert_eq!(
            cdrom_buses(Some(CdromBus::Scsi), Arch::X86_64).unwrap(),
            [DiskBus::Scsi]
        );
    }
}
