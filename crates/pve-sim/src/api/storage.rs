//! Storage listing, status, content, volume allocation and deletion, and
//! uploads (`POST …/upload`, multipart; the bytes are kept so tests can read
//! the cloud-init ISO back).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::clock::epoch_now;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::props;
use crate::state::ClusterState;
use crate::state::storage::{StorageState, Volume, split_volid};
use crate::worker::{self, TaskOk, TaskSpec};

fn storage_json(s: &StorageState, node: &str) -> Value {
    let total = s.capacity();
    let used = s.used(node);
    let mut content = s.cfg.content.clone();
    content.sort();
    json!({
        "storage": s.cfg.name,
        "type": s.cfg.kind.as_str(),
        "content": content.join(","),
        "shared": u8::from(s.cfg.shared),
        "active": u8::from(s.active_on(node)),
        "enabled": u8::from(s.enabled_on(node)),
        "total": total,
        "used": used,
        "avail": total.saturating_sub(used),
        "used_fraction": if total > 0 { used as f64 / total as f64 } else { 0.0 },
    })
}

fn storage_on<'a>(
    st: &'a ClusterState,
    name: &str,
    node: &str,
) -> Result<&'a StorageState, ApiError> {
    let s = st
        .storages
        .get(name)
        .ok_or_else(|| ApiError::internal(format!("storage '{name}' does not exist")))?;
    s.check_active(node).map_err(ApiError::internal)?;
    Ok(s)
}

/// `GET /nodes/{node}/storage[?content=][&storage=][&target=][&enabled=]`.
pub(crate) fn list(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let content = ctx.params.str("content");
    let only = ctx.params.str("storage");
    let target = ctx.params.str("target");
    let enabled = ctx.params.bool("enabled")?.unwrap_or(false);
    let st = ctx.cluster.lock();
    let out: Vec<Value> = st
        .storages
        .values()
        .filter(|s| s.listed_on(&node))
        .filter(|s| !enabled || s.enabled_on(&node))
        .filter(|s| only.as_deref().is_none_or(|o| o == s.cfg.name))
        .filter(|s| {
            content
                .as_deref()
                .is_none_or(|c| props::split_list(c).iter().any(|c| s.supports(c)))
        })
        .filter(|s| {
            target
                .as_deref()
                .is_none_or(|t| t == node || (s.cfg.shared && s.enabled_on(t)))
        })
        .filter(|s| {
            st.auth.has(
                &ctx.who,
                &format!("/storage/{}", s.cfg.name),
                &["Datastore.Audit", "Datastore.AllocateSpace"],
                true,
            )
        })
        .map(|s| storage_json(s, &node))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /nodes/{node}/storage/{storage}/status`.
pub(crate) fn status(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let st = ctx.cluster.lock();
    // The status of an enabled storage that is not active answers `active: 0`.
    let s = st
        .storages
        .get(&name)
        .ok_or_else(|| ApiError::internal(format!("storage '{name}' does not exist")))?;
    s.check_enabled(&node).map_err(ApiError::internal)?;
    let mut v = storage_json(s, &node);
    if let Some(o) = v.as_object_mut() {
        o.remove("storage");
        o.remove("used_fraction");
    }
    Ok(Reply::data(v))
}

fn volume_json(storage: &str, v: &Volume) -> Value {
    let mut e = json!({
        "volid": format!("{storage}:{}", v.volname),
        "format": v.format,
        "size": v.size,
        "content": v.content,
        "ctime": v.ctime,
    });
    if let Some(id) = v.vmid {
        e["vmid"] = json!(id);
        e["used"] = json!(v.size);
    }
    if let Some(p) = &v.parent {
        e["parent"] = json!(p);
    }
    e
}

/// `GET /nodes/{node}/storage/{storage}/content[?content=][&vmid=]`.
pub(crate) fn content(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let filter = ctx.params.str("content");
    let vmid = ctx.params.u32("vmid")?;
    let st = ctx.cluster.lock();
    let s = storage_on(&st, &name, &node)?;
    let out: Vec<Value> = s
        .volumes(&node)
        .filter(|v| filter.as_deref().is_none_or(|c| c == v.content))
        .filter(|v| vmid.is_none_or(|id| v.vmid == Some(id)))
        .map(|v| volume_json(&name, v))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `POST /nodes/{node}/storage/{storage}/content`: allocates an image
/// (`vmid`, `filename`, `size` with K/M/G/T, optional `format`); returns the volid.
pub(crate) fn alloc(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let vmid = ctx
        .params
        .u32("vmid")?
        .ok_or_else(|| ApiError::param("vmid", "property is missing and it is not optional"))?;
    let size_str = ctx.params.req_str("size")?;
    let size = props::parse_size(&size_str)
        .map(|b| {
            if size_str.bytes().all(|c| c.is_ascii_digit()) {
                b << 10
            } else {
                b
            }
        })
        .ok_or_else(|| ApiError::param("size", format!("unable to parse size '{size_str}'")))?;
    let filename = ctx.params.req_str("filename")?;
    let expected = format!("vm-{vmid}-");
    if !filename.starts_with(&expected) {
        return Err(ApiError::param(
            "filename",
            format!("name '{filename}' does not match vmid '{vmid}'"),
        ));
    }
    let mut st = ctx.cluster.lock();
    let s = storage_on(&st, &name, &node)?;
    if !s.supports("images") {
        return Err(ApiError::internal(format!(
            "storage '{name}' does not support vm images"
        )));
    }
    let volname = if s.cfg.kind.is_file_based() {
        format!("{vmid}/{filename}")
    } else {
        filename
    };
    if s.get(&node, &volname).is_some() {
        return Err(ApiError::internal(format!(
            "volume '{name}:{volname}' already exists"
        )));
    }
    s.check_space(&node, size).map_err(ApiError::internal)?;
    let format = ctx.params.str("format").unwrap_or_else(|| "raw".into());
    let st_mut = st
        .storages
        .get_mut(&name)
        .ok_or_else(|| ApiError::internal("storage vanished"))?;
    st_mut.insert(
        &node,
        Volume {
            volname: volname.clone(),
            vmid: Some(vmid),
            size,
            format,
            content: "images".into(),
            parent: None,
            ctime: epoch_now(),
            data: None,
        },
    );
    Ok(Reply::data(json!(format!("{name}:{volname}"))))
}

/// Resolves the `{volume}` path parameter (a volname or a full volid).
fn volname_param(ctx: &Ctx, storage: &str) -> Result<String, ApiError> {
    let v = ctx.params.req_str("volume")?;
    Ok(match split_volid(&v) {
        Some((s, name)) if s == storage => name.to_string(),
        Some((s, _)) => {
            return Err(ApiError::internal(format!(
                "volume storage '{s}' does not match '{storage}'"
            )));
        }
        None => v,
    })
}

/// `GET /nodes/{node}/storage/{storage}/content/{volume}`.
pub(crate) fn volume_get(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let volname = volname_param(ctx, &name)?;
    ctx.check(
        &format!("/storage/{name}"),
        &["Datastore.Audit", "Datastore.AllocateSpace"],
        true,
    )?;
    let st = ctx.cluster.lock();
    let s = storage_on(&st, &name, &node)?;
    let v = s
        .get(&node, &volname)
        .ok_or_else(|| ApiError::internal(format!("volume '{name}:{volname}' does not exist")))?;
    Ok(Reply::data(json!({
        "path": format!("/mnt/pve/{name}/{volname}"),
        "size": v.size,
        "used": v.size,
        "format": v.format,
    })))
}

/// `DELETE /nodes/{node}/storage/{storage}/content/{volume}[?delay=N]`: needs
/// `Datastore.Allocate`; runs an `imgdel` task (answers `null` if it finished
/// within `delay` seconds). Volumes referenced by a VM config are refused.
pub(crate) async fn volume_delete(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let volname = volname_param(ctx, &name)?;
    ctx.check(&format!("/storage/{name}"), &["Datastore.Allocate"], false)?;
    let volid = format!("{name}:{volname}");
    let owner = {
        let st = ctx.cluster.lock();
        let s = storage_on(&st, &name, &node)?;
        let v = s
            .get(&node, &volname)
            .ok_or_else(|| ApiError::internal(format!("volume '{volid}' does not exist")))?;
        let user = st.vms.values().find(|vm| {
            vm.conf
                .values()
                .chain(vm.pending.values())
                .any(|val| props::Drive::parse(val).is_ok_and(|d| d.file == volid))
        });
        if let Some(vm) = user
            && v.content == "images"
        {
            return Err(ApiError::internal(format!(
                "volume '{volid}' is still in use by VM {}",
                vm.vmid
            )));
        }
        v.vmid
    };
    let delay = ctx.params.int("delay")?;
    let spec = TaskSpec {
        node: node.clone(),
        kind: "imgdel",
        id: format!(
            "{}@{name}",
            owner
                .map(|o| o.to_string())
                .unwrap_or_else(|| "none".into())
        ),
        owner: ctx.who.task_owner(),
        fault: ctx.task_fault.clone(),
        nominal: ctx.cluster.cfg.timings.upload,
        lock_vmid: owner.unwrap_or(0),
        lock_timeout: ctx.cluster.cfg.timings.storage_lock_timeout,
    };
    let secs = ctx.cluster.cfg.timings.upload;
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        t.log(format!("Removing volume '{volid}'"));
        t.sleep(secs).await;
        let mut st = t.cluster.lock();
        let node = t.node.clone();
        if !st.free_volume(&node, &volid) {
            return Err(format!("volume '{volid}' does not exist"));
        }
        Ok(TaskOk::default())
    });
    finish_with_delay(ctx, upid, delay).await
}

async fn finish_with_delay(ctx: &Ctx, upid: String, delay: Option<i64>) -> ApiResult {
    if let Some(d) = delay.filter(|d| *d > 0) {
        let max = ctx.cluster.clock.real(d as f64);
        if let Some(status) = worker::wait_stopped(&ctx.cluster, &upid, max).await {
            if status == "OK" || status.starts_with("WARNINGS") {
                return Ok(Reply::null());
            }
            return Err(ApiError::internal(status));
        }
    }
    Ok(Reply::data(json!(upid)))
}

/// The name an upload of `content` (`iso`, `vztmpl`, `import`) is stored under
/// (`POST /nodes/{node}/storage/{storage}/upload`): the base name with every character
/// outside `[A-Za-z0-9_.-]` replaced by `_`.
///
/// # Errors
/// The message of the `filename` parameter error: longer than the schema's 255
/// characters, or an extension that does not fit the content type.
pub fn upload_file_name(raw: &str, content: &str) -> Result<String, String> {
    if raw.chars().count() > 255 {
        return Err("value may only be 255 characters long".to_string());
    }
    let filename = normalize_filename(raw);
    let lower = filename.to_ascii_lowercase();
    let ext_ok = match content {
        "iso" => lower.ends_with(".iso") || lower.ends_with(".img"),
        "vztmpl" => [".tar.gz", ".tar.xz", ".tar.zst", ".tgz"]
            .iter()
            .any(|e| lower.ends_with(e)),
        "import" => [".ova", ".ovf", ".qcow2", ".raw", ".vmdk", ".img"]
            .iter()
            .any(|e| lower.ends_with(e)),
        _ => false,
    };
    if ext_ok {
        Ok(filename)
    } else {
        Err("wrong file extension".to_string())
    }
}

fn normalize_filename(f: &str) -> String {
    let base = f.rsplit(['/', '\\']).next().unwrap_or(f);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn digest_hex(alg: &str, bytes: &[u8]) -> Option<String> {
    let a = match alg {
        "sha1" => &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        "sha256" => &ring::digest::SHA256,
        "sha384" => &ring::digest::SHA384,
        "sha512" => &ring::digest::SHA512,
        _ => return None,
    };
    Some(
        ring::digest::digest(a, bytes)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    )
}

/// `POST /nodes/{node}/storage/{storage}/upload` (multipart: `content`,
/// `filename`, file part). Returns the UPID of an `imgcopy` task; the volume
/// `<storage>:<content>/<filename>` exists when the task ends.
pub(crate) fn upload(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let name = ctx.params.req_str("storage")?;
    let content = ctx.params.req_str("content")?;
    let file = ctx
        .upload
        .clone()
        .ok_or_else(|| ApiError::param("filename", "missing upload file"))?;
    let raw_name = ctx
        .params
        .str("filename")
        .unwrap_or_else(|| file.filename.clone());
    let filename =
        upload_file_name(&raw_name, &content).map_err(|e| ApiError::param("filename", e))?;
    {
        let st = ctx.cluster.lock();
        let s = storage_on(&st, &name, &node)?;
        if !s.supports(&content) {
            return Err(ApiError::internal(format!(
                "storage '{name}' does not support '{content}' content"
            )));
        }
        s.check_space(&node, file.bytes.len() as u64)
            .map_err(ApiError::internal)?;
    }
    let checksum = match (
        ctx.params.str("checksum"),
        ctx.params.str("checksum-algorithm"),
    ) {
        (Some(c), Some(a)) => Some((c.to_ascii_lowercase(), a)),
        _ => None,
    };
    let volname = format!("{content}/{filename}");
    let volid = format!("{name}:{volname}");
    let secs = ctx.cluster.cfg.timings.upload;
    let spec = TaskSpec {
        node: node.clone(),
        kind: "imgcopy",
        id: String::new(),
        owner: ctx.who.task_owner(),
        fault: ctx.task_fault.clone(),
        nominal: secs,
        lock_vmid: 0,
        lock_timeout: ctx.cluster.cfg.timings.storage_lock_timeout,
    };
    let bytes = Arc::new(file.bytes);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        t.log(format!(
            "starting file import from: /var/tmp/pveupload-{:08x}",
            bytes.len()
        ));
        if let Some((expected, alg)) = &checksum {
            t.log(format!("calculating checksum of uploaded file ({alg})"));
            if let Some(got) = digest_hex(alg, &bytes)
                && got != *expected
            {
                return Err(format!(
                    "checksum mismatch: got '{got}' != expected '{expected}'"
                ));
            }
        }
        t.sleep(secs).await;
        let node = t.node.clone();
        let mut st = t.cluster.lock();
        let s = st
            .storages
            .get_mut(&name)
            .ok_or_else(|| format!("storage '{name}' does not exist"))?;
        let old = s.get(&node, &volname).map(|v| v.size).unwrap_or(0);
        s.check_space(&node, (bytes.len() as u64).saturating_sub(old))?;
        s.insert(
            &node,
            Volume {
                volname: volname.clone(),
                vmid: None,
                size: bytes.len() as u64,
                format: content.clone(),
                content: content.clone(),
                parent: None,
                ctime: epoch_now(),
                data: Some(bytes.clone()),
            },
        );
        drop(st);
        t.log(format!("target file: {volid}"));
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames() {
        assert_eq!(normalize_filename("user data (1).iso"), "user_data__1_.iso");
        assert_eq!(normalize_filename("C:\\x\\seed.iso"), "seed.iso");
        assert_eq!(digest_hex("sha256", b"abc").unwrap().len(), 64);
        assert!(digest_hex("md5", b"abc").is_none());
        assert_eq!(
            upload_file_name("capmox-100-x.iso", "iso").as_deref(),
            Ok("capmox-100-x.iso")
        );
        assert_eq!(
            upload_file_name("seed.txt", "iso"),
            Err("wrong file extension".to_string())
        );
        assert!(upload_file_name(&format!("{}.iso", "a".repeat(252)), "iso").is_err());
    }
}
