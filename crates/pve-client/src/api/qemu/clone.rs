//! `POST /nodes/{node}/qemu/{vmid}/clone`.

use super::config::check_dns_name;
use super::vm_path;
use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;
use crate::types::{NodeName, PoolId, StorageId, Upid, VmId};

/// Target disk format of a full clone on file storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskFormat {
    /// `raw`.
    Raw,
    /// `qcow2`.
    Qcow2,
    /// `vmdk`.
    Vmdk,
}

impl DiskFormat {
    fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Qcow2 => "qcow2",
            Self::Vmdk => "vmdk",
        }
    }
}

/// Parameters of a clone (docs/proxmox-semantics.md §8).
///
/// `full` defaults server-side to a linked clone for templates and a full
/// copy otherwise. `storage` and `format` are only allowed for full clones
/// (the client refuses them otherwise, as the server would). `target` needs
/// every source disk on shared storage. `newid` is chosen by the caller:
/// reserve it first, never trust `nextid` alone (docs/proxmox-semantics.md §7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloneRequest {
    /// VMID of the new VM.
    pub newid: VmId,
    /// Name of the new VM (DNS name; defaults to `Copy-of-VM-<source>`).
    pub name: Option<String>,
    /// Node the new VM ends up on (the config moves there at the end of the task).
    pub target: Option<NodeName>,
    /// `true`: full copy; `false`: linked clone (templates only).
    pub full: Option<bool>,
    /// Target storage (full clones only).
    pub storage: Option<StorageId>,
    /// Target format (full clones on file storage only).
    pub format: Option<DiskFormat>,
    /// Pool to add the new VM to.
    pub pool: Option<PoolId>,
    /// Snapshot to clone from.
    pub snapname: Option<String>,
    /// Description of the new VM.
    pub description: Option<String>,
}

impl CloneRequest {
    /// A clone to `newid` with server defaults for everything else.
    pub fn new(newid: VmId) -> Self {
        Self {
            newid,
            name: None,
            target: None,
            full: None,
            storage: None,
            format: None,
            pool: None,
            snapname: None,
            description: None,
        }
    }

    /// Sets the name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Sets the target node.
    pub fn target(mut self, node: NodeName) -> Self {
        self.target = Some(node);
        self
    }

    /// Full (`true`) or linked (`false`) clone.
    pub fn full(mut self, full: bool) -> Self {
        self.full = Some(full);
        self
    }

    /// Target storage (requires `full(true)`).
    pub fn storage(mut self, storage: StorageId) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Target format (requires `full(true)`).
    pub fn format(mut self, format: DiskFormat) -> Self {
        self.format = Some(format);
        self
    }

    /// Pool.
    pub fn pool(mut self, pool: PoolId) -> Self {
        self.pool = Some(pool);
        self
    }

    /// Source snapshot.
    pub fn snapname(mut self, snap: impl Into<String>) -> Self {
        self.snapname = Some(snap.into());
        self
    }

    /// Description.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.description = Some(text.into());
        self
    }

    /// Validates and encodes.
    fn to_form(&self) -> Result<Form, String> {
        if self.full != Some(true) {
            if self.storage.is_some() {
                return Err("clone: 'storage' is only allowed with full=1 (linked clones stay on the template's storage)".into());
            }
            if self.format.is_some() {
                return Err("clone: 'format' is only allowed with full=1".into());
            }
        }
        if let Some(n) = &self.name {
            check_dns_name(n).map_err(|e| format!("clone: {e}"))?;
        }
        if let Some(s) = &self.snapname {
            let ok = s.len() <= 40
                && s.len() >= 2
                && s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !ok {
                return Err(format!("clone: invalid snapshot name '{s}'"));
            }
        }
        let mut f = Form::new();
        f.push("newid", self.newid.to_string())
            .push_opt("name", self.name.as_deref())
            .push_opt("target", self.target.as_ref())
            .push_opt_bool("full", self.full)
            .push_opt("storage", self.storage.as_ref())
            .push_opt("format", self.format.map(DiskFormat::as_str))
            .push_opt("pool", self.pool.as_ref())
            .push_opt("snapname", self.snapname.as_deref())
            .push_opt("description", self.description.as_deref());
        Ok(f)
    }
}

impl PveClient {
    /// `POST /nodes/{node}/qemu/{vmid}/clone`: clones VM/template `vmid` on
    /// `node` to `request.newid`. Returns the `qmclone` task (its UPID's id is
    /// the **source** VMID). The new VM carries `lock: clone` until the task
    /// ends; wait for `OK` before touching it (docs/proxmox-semantics.md §6). A taken
    /// `newid` fails inside the task (`TaskFailed`, kind `Conflict`), not here.
    ///
    /// # Errors
    /// [`PveError::InvalidRequest`] (nothing sent) for `storage`/`format`
    /// without `full`, a non-DNS name or bad snapshot name;
    /// `InvalidParameter`; `NotFound` for a source not on that node;
    /// `PermissionDenied` (`VM.Clone`, `VM.Allocate`, `Datastore.AllocateSpace`,
    /// `SDN.Use`); transport errors.
    pub async fn clone_vm(
        &self,
        node: &NodeName,
        vmid: VmId,
        request: &CloneRequest,
    ) -> Result<Upid, PveError> {
        let form = request.to_form().map_err(|m| self.invalid_request(m))?;
        self.call(Call::post(
            "/nodes/{node}/qemu/{vmid}/clone",
            vm_path(node, vmid, "/clone"),
            form,
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u32) -> VmId {
        VmId::new(n).unwrap()
    }

    #[test]
    fn full_clone_encoding() {
        let r = CloneRequest::new(id(131))
            .name("wl1-md-0-abcde")
            .full(true)
            .storage(StorageId::new("local-lvm").unwrap())
            .target(NodeName::new("pve-a2").unwrap())
            .description("owner=abc; cluster=wl1");
        assert_eq!(
            r.to_form().unwrap().encode(),
            "newid=131&name=wl1-md-0-abcde&target=pve-a2&full=1&storage=local-lvm&description=owner%3Dabc%3B%20cluster%3Dwl1"
        );
    }

    #[test]
    fn linked_clone_refuses_storage_and_format() {
        let e = CloneRequest::new(id(131))
            .storage(StorageId::new("ceph").unwrap())
            .to_form()
            .unwrap_err();
        assert!(e.contains("storage"), "{e}");
        let e = CloneRequest::new(id(131))
            .full(false)
            .format(DiskFormat::Qcow2)
            .to_form()
            .unwrap_err();
        assert!(e.contains("format"), "{e}");
        assert_eq!(
            CloneRequest::new(id(131))
                .full(false)
                .to_form()
                .unwrap()
                .encode(),
            "newid=131&full=0"
        );
    }

    #[test]
    fn names_and_snapshots_are_checked() {
        assert!(
            CloneRequest::new(id(131))
                .name("under_score")
                .to_form()
                .is_err()
        );
        assert!(
            CloneRequest::new(id(131))
                .snapname("1bad")
                .to_form()
                .is_err()
        );
        assert!(
            CloneRequest::new(id(131))
                .snapname("base-snap_1")
                .to_form()
                .is_ok()
        );
    }
}
