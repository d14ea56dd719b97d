//! Storages: list, status, content, ISO upload, volume delete.

use serde::Deserialize;

use crate::PveClient;
use crate::client::{Body, Call, seg};
use crate::encode::Form;
use crate::error::PveError;
use crate::types::lenient::{bool01, opt_f64, opt_string, opt_u64};
use crate::types::{NodeName, StorageId, Upid, VmId};

/// Filters of `GET /nodes/{node}/storage`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageQuery {
    /// Only storages supporting this content type (`images`, `iso`, …).
    pub content: Option<String>,
    /// Only enabled storages.
    pub enabled: Option<bool>,
    /// Only shared storages accessible from both `node` and this target node.
    pub target: Option<NodeName>,
}

/// One storage as seen from a node (`GET /nodes/{node}/storage`) or its
/// status (`GET /nodes/{node}/storage/{storage}/status`, where `storage` is
/// absent).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct StorageInfo {
    /// Storage id (absent in the single-storage status response).
    #[serde(default)]
    pub storage: Option<StorageId>,
    /// Storage type, e.g. `lvmthin`, `rbd`, `dir`, `nfs`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Content types, comma-separated, e.g. `images,rootdir`.
    #[serde(default)]
    pub content: String,
    /// Shared between nodes.
    #[serde(default, deserialize_with = "bool01")]
    pub shared: bool,
    /// Accessible right now.
    #[serde(default, deserialize_with = "bool01")]
    pub active: bool,
    /// Enabled in the storage configuration.
    #[serde(default, deserialize_with = "bool01")]
    pub enabled: bool,
    /// Total size, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub total: Option<u64>,
    /// Used, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub used: Option<u64>,
    /// Available, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub avail: Option<u64>,
    /// `used / total`.
    #[serde(default, deserialize_with = "opt_f64")]
    pub used_fraction: Option<f64>,
}

impl StorageInfo {
    /// Whether `content` lists the given type.
    pub fn supports(&self, content: &str) -> bool {
        self.content.split(',').any(|c| c.trim() == content)
    }
}

/// One volume of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct StorageVolume {
    /// Volume id, e.g. `local:iso/seed.iso`, `local-lvm:vm-105-disk-0`.
    pub volid: String,
    /// Content type (`iso`, `images`, …).
    #[serde(default, deserialize_with = "opt_string")]
    pub content: Option<String>,
    /// Format (`raw`, `qcow2`, `iso`, …).
    #[serde(default, deserialize_with = "opt_string")]
    pub format: Option<String>,
    /// Size, **bytes**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub size: Option<u64>,
    /// Used space, **bytes** (most storages report nothing useful).
    #[serde(default, deserialize_with = "opt_u64")]
    pub used: Option<u64>,
    /// Owner VMID.
    #[serde(default)]
    pub vmid: Option<VmId>,
    /// Creation time, Unix **seconds**.
    #[serde(default, deserialize_with = "opt_u64")]
    pub ctime: Option<u64>,
}

/// Checks an ISO upload file name: `[A-Za-z0-9_.-]+` ending in `.iso` or
/// `.img` (pve-storage refuses other extensions for `content=iso` and rewrites
/// other characters; refusing them keeps the volume id predictable).
fn check_iso_filename(name: &str) -> Result<(), String> {
    let lower = name.to_ascii_lowercase();
    if !(lower.ends_with(".iso") || lower.ends_with(".img")) || name.len() <= 4 {
        return Err(format!("ISO file name '{name}' must end in .iso or .img"));
    }
    if name.len() > 255
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    {
        return Err(format!(
            "ISO file name '{name}' may only contain letters, digits, '_', '.' and '-' (max 255)"
        ));
    }
    Ok(())
}

impl PveClient {
    /// `GET /nodes/{node}/storage`: storages usable on `node`, with capacity in
    /// **bytes**.
    ///
    /// # Errors
    /// [`PveError::NotFound`] for an unknown node; transport errors.
    pub async fn storages(
        &self,
        node: &NodeName,
        query: &StorageQuery,
    ) -> Result<Vec<StorageInfo>, PveError> {
        let mut q = Form::new();
        q.push_opt("content", query.content.as_deref())
            .push_opt_bool("enabled", query.enabled)
            .push_opt("target", query.target.as_ref());
        let path = format!("/nodes/{}/storage", seg(node.as_str()));
        self.call(Call::get("/nodes/{node}/storage", path).with_query(q))
            .await
    }

    /// `GET /nodes/{node}/storage/{storage}/status`: capacity in **bytes**.
    ///
    /// # Errors
    /// [`PveError::NotFound`] / `InvalidParameter` for an unknown storage;
    /// transport errors.
    pub async fn storage_status(
        &self,
        node: &NodeName,
        storage: &StorageId,
    ) -> Result<StorageInfo, PveError> {
        let path = format!(
            "/nodes/{}/storage/{}/status",
            seg(node.as_str()),
            seg(storage.as_str())
        );
        self.call(Call::get("/nodes/{node}/storage/{storage}/status", path))
            .await
    }

    /// `GET /nodes/{node}/storage/{storage}/content[?content=…&vmid=…]`: the
    /// volumes on a storage.
    ///
    /// # Errors
    /// [`PveError::NotFound`] for an unknown node or storage; transport errors.
    pub async fn storage_content(
        &self,
        node: &NodeName,
        storage: &StorageId,
        content: Option<&str>,
        vmid: Option<VmId>,
    ) -> Result<Vec<StorageVolume>, PveError> {
        let mut q = Form::new();
        q.push_opt("content", content).push_opt("vmid", vmid);
        let path = format!(
            "/nodes/{}/storage/{}/content",
            seg(node.as_str()),
            seg(storage.as_str())
        );
        self.call(Call::get("/nodes/{node}/storage/{storage}/content", path).with_query(q))
            .await
    }

    /// `POST /nodes/{node}/storage/{storage}/upload` (multipart:
    /// `content=iso`, then the file part named `filename` carrying `filename`
    /// as its file name — the shape the PVE GUI and other clients send).
    /// The ISO becomes volume `<storage>:iso/<filename>`. Returns the UPID of
    /// the task that moves the file into place (`imgcopy`), `None` if the
    /// server answered `null`. Wait for the task before attaching the ISO.
    ///
    /// pveproxy does not forward uploads: send them to the node itself or to
    /// a node that shares the storage (docs/proxmox-semantics.md §13). Not retried.
    ///
    /// # Errors
    /// [`PveError::InvalidRequest`] (nothing sent) for a file name that does
    /// not end in `.iso`/`.img` or has other characters than
    /// `[A-Za-z0-9_.-]`; `PermissionDenied` without
    /// `Datastore.AllocateTemplate`; `InvalidParameter` when the storage does
    /// not allow ISO content; transport errors.
    pub async fn upload_iso(
        &self,
        node: &NodeName,
        storage: &StorageId,
        filename: &str,
        bytes: Vec<u8>,
    ) -> Result<Option<Upid>, PveError> {
        check_iso_filename(filename).map_err(|m| self.invalid_request(m))?;
        let part = reqwest::multipart::Part::bytes(bytes)
            .file_name(filename.to_owned())
            .mime_str("application/octet-stream")
            .map_err(|e| self.invalid_request(format!("multipart: {e}")))?;
        let form = reqwest::multipart::Form::new()
            .text("content", "iso")
            .part("filename", part);
        let path = format!(
            "/nodes/{}/storage/{}/upload",
            seg(node.as_str()),
            seg(storage.as_str())
        );
        let mut call = Call::new(
            reqwest::Method::POST,
            "/nodes/{node}/storage/{storage}/upload",
            path,
        );
        call.body = Body::Multipart(Some(form));
        self.call(call).await
    }

    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`: deletes a
    /// volume (e.g. a bootstrap ISO `nfs-iso:iso/capmox-105.iso`). Returns the
    /// UPID of the deletion task, or `None` when the server answered `null`
    /// (finished synchronously).
    ///
    /// # Errors
    /// [`PveError::NotFound`] when the volume does not exist;
    /// `PermissionDenied` without `Datastore.Allocate`; transport errors.
    pub async fn delete_volume(
        &self,
        node: &NodeName,
        storage: &StorageId,
        volid: &str,
    ) -> Result<Option<Upid>, PveError> {
        let path = format!(
            "/nodes/{}/storage/{}/content/{}",
            seg(node.as_str()),
            seg(storage.as_str()),
            seg(volid)
        );
        self.call(Call::delete(
            "/nodes/{node}/storage/{storage}/content/{volume}",
            path,
            Form::new(),
        ))
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_names() {
        assert!(check_iso_filename("capmox-105-seed.iso").is_ok());
        assert!(check_iso_filename("a.IMG").is_ok());
        for bad in ["seed.txt", ".iso", "../x.iso", "a b.iso", "x.iso/"] {
            assert!(check_iso_filename(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn decodes_storage_and_content() {
        let s: Vec<StorageInfo> = serde_json::from_str(
            r#"[{"storage":"ceph","type":"rbd","content":"images,rootdir","shared":1,"active":1,"enabled":1,
                 "total":1099511627776,"used":0,"avail":"1099511627776","used_fraction":0}]"#,
        )
        .unwrap();
        assert!(s[0].supports("images") && !s[0].supports("iso"));
        assert_eq!(s[0].avail, Some(1 << 40));
        let st: StorageInfo = serde_json::from_str(
            r#"{"type":"dir","content":"iso","total":10,"used":1,"avail":9,"active":1}"#,
        )
        .unwrap();
        assert_eq!(st.storage, None);
        let c: Vec<StorageVolume> = serde_json::from_str(
            r#"[{"volid":"local:iso/seed.iso","content":"iso","format":"iso","size":374784,"ctime":1700000000},
                {"volid":"local-lvm:vm-105-disk-0","format":"raw","size":"34359738368","vmid":"105"}]"#,
        )
        .unwrap();
        assert_eq!(c[0].size, Some(374_784));
        assert_eq!(c[1].vmid.map(VmId::get), Some(105));
    }
}
