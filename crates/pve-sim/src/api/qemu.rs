//! `/nodes/{node}/qemu`: list, create, destroy, resize, feature, template
//! (docs/proxmox-semantics.md §7, §10, §12).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::config::{self, Update};
use super::{check_skiplock, task_spec, uptime, vm_missing, vm_on};
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::locks::LockMode;
use crate::props::{self, Drive};
use crate::state::vm::Vm;
use crate::worker::{self, TaskOk};

/// `GET /nodes/{node}/qemu`: VMs on the node the caller may audit.
pub(crate) fn list(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let st = ctx.cluster.lock();
    let may_audit = st.auth.vm_audit_filter(&ctx.who);
    let out: Vec<Value> = st
        .vms
        .values()
        .filter(|v| v.node == node)
        .filter(|v| may_audit(v.vmid))
        .map(|v| {
            let maxmem = v.memory_mib() << 20;
            let mut e = json!({
                "vmid": v.vmid,
                "status": if v.running() { "running" } else { "stopped" },
                "maxmem": maxmem,
                "mem": if v.running() { maxmem / 10 * 3 } else { 0 },
                "maxdisk": v.maxdisk(),
                "disk": 0,
                "cpus": v.cpus(),
                "cpu": 0,
                "uptime": uptime(ctx, v),
                "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0,
            });
            if let Some(n) = v.name() {
                e["name"] = json!(n);
            }
            if let Some(r) = &v.run {
                e["pid"] = json!(r.pid);
                e["qmpstatus"] = json!(if r.paused { "paused" } else { "running" });
            }
            if v.is_template() {
                e["template"] = json!(1);
            }
            if let Some(t) = v.conf.get("tags") {
                e["tags"] = json!(t);
            }
            if let Some(l) = v.lock() {
                e["lock"] = json!(l);
            }
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `POST /nodes/{node}/qemu`: claims the VMID at once (config with
/// `lock: create`), then a `qmcreate` task allocates disks (`STORAGE:SIZE`,
/// `STORAGE:cloudinit`) and removes the lock; `start=1` starts it afterwards.
pub(crate) fn create(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let pool = ctx.params.str("pool");
    if ctx.params.has("archive") {
        return Err(ApiError::internal(
            "restore from a backup archive is not supported by the simulator",
        ));
    }
    let allowed = ctx.has(&format!("/vms/{vmid}"), &["VM.Allocate"], false)
        || pool
            .as_ref()
            .is_some_and(|p| ctx.has(&format!("/pool/{p}"), &["VM.Allocate"], false));
    if !allowed {
        return Err(ApiError::forbidden(&format!("/vms/{vmid}, VM.Allocate")));
    }
    let upd = config::prepare(ctx, &ctx.cluster.cfg.mac_prefix)?;
    config::check_perms(ctx, vmid, &upd, None)?;
    let start = ctx.params.bool("start")?.unwrap_or(false);
    {
        let mut st = ctx.cluster.lock();
        if let Some(p) = &pool
            && !st.pools.contains_key(p)
        {
            // `check_pool_exist` raises a permission exception.
            return Err(ApiError::forbidden(&format!("pool '{p}' does not exist")));
        }
        if let Some(existing) = st.vms.get(&vmid) {
            return Err(ApiError::internal(format!(
                "unable to create VM {vmid} - VM {vmid} already exists on node '{}'",
                existing.node
            )));
        }
        let mut conf = BTreeMap::from([("lock".to_string(), "create".to_string())]);
        let uuid = st.uuid();
        conf.insert("smbios1".into(), format!("uuid={uuid}"));
        let genid = st.uuid();
        conf.insert("vmgenid".into(), genid);
        st.vms.insert(vmid, Vm::new(vmid, &node, conf));
        if let Some(p) = &pool
            && let Some(pool) = st.pools.get_mut(p)
        {
            pool.vms.insert(vmid);
        }
    }
    let t = &ctx.cluster.cfg.timings;
    let secs = t.create;
    let mut spec = task_spec(ctx, &node, "qmcreate", vmid, secs);
    spec.lock_timeout = t.lock_timeout_create;
    let cluster = ctx.cluster.clone();
    let lock_timeout = cluster.clock.real(t.lock_timeout_create);
    let upid = worker::spawn(&cluster, spec, move |tc| async move {
        let cleanup = CreateCleanup {
            cluster: tc.cluster.clone(),
            vmid,
            node: tc.node.clone(),
            done: false,
        };
        let _g = tc
            .cluster
            .flocks
            .acquire(&tc.node, vmid, LockMode::Exclusive, lock_timeout)
            .await?;
        tc.sleep(secs).await;
        {
            let mut st = tc.cluster.lock();
            let node = tc.node.clone();
            // write everything as pending, then apply (the VM is stopped)
            let upd = Update {
                settings: upd.settings.clone(),
                delete: vec![],
                revert: vec![],
                force: false,
            };
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.conf.remove("lock");
            }
            let res = config::apply(&tc.cluster, &mut st, &node, vmid, &upd);
            if let Err(e) = res {
                if let Some(vm) = st.vms.get_mut(&vmid) {
                    vm.conf.insert("lock".into(), "create".into());
                }
                return Err(format!("unable to create VM {vmid} - {e}"));
            }
        }
        let mut cleanup = cleanup;
        cleanup.done = true;
        if start {
            let mut st = tc.cluster.lock();
            super::power::mark_running(&tc.cluster, &mut st, vmid);
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

struct CreateCleanup {
    cluster: std::sync::Arc<crate::state::Cluster>,
    vmid: u32,
    node: String,
    done: bool,
}

impl Drop for CreateCleanup {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut st = self.cluster.lock();
        if let Some(vm) = st
            .vms
            .get(&self.vmid)
            .filter(|v| v.node == self.node && v.lock() == Some("create"))
            .cloned()
        {
            for (_, d) in vm.drives() {
                if !d.is_cdrom() || d.is_cloudinit() {
                    st.free_volume(&self.node, &d.file);
                }
            }
            st.vms.remove(&self.vmid);
        }
    }
}

/// Volumes a destroy frees: every disk referenced in the config (current,
/// pending, `unusedN`), cloud-init drives included, ISOs and other VMs'
/// volumes excluded.
fn owned_volumes(vm: &Vm) -> Vec<String> {
    let mut out = Vec::new();
    let mut entries: Vec<(&String, &String)> = vm
        .conf
        .iter()
        .chain(vm.pending.iter())
        .filter(|(k, _)| props::is_drive_key(k) || props::is_unused_key(k))
        .collect();
    entries.sort_by_key(|(k, _)| drive_order(k));
    for v in entries.into_iter().map(|(_, v)| v) {
        if let Ok(d) = Drive::parse(v)
            && (!d.is_cdrom() || d.is_cloudinit())
            && d.storage().is_some()
            && owner_of(&d.file) == Some(vm.vmid)
            && !out.contains(&d.file)
        {
            out.push(d.file);
        }
    }
    out
}

/// qemu-server's `valid_drive_names` order (ide, sata, scsi, virtio, efidisk0,
/// tpmstate0), then `unusedN`.
fn drive_order(key: &str) -> (u8, u32) {
    let num = |p: &str| {
        key.strip_prefix(p)
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(0)
    };
    match key {
        k if k.starts_with("ide") => (0, num("ide")),
        k if k.starts_with("sata") => (1, num("sata")),
        k if k.starts_with("scsi") => (2, num("scsi")),
        k if k.starts_with("virtio") => (3, num("virtio")),
        "efidisk0" => (4, 0),
        "tpmstate0" => (5, 0),
        _ => (6, num("unused")),
    }
}

/// The VMID a volume name belongs to (`vm-<id>-…`, `base-<id>-…`, last path component).
fn owner_of(volid: &str) -> Option<u32> {
    let v = volid.split_once(':').map(|(_, v)| v)?;
    let last = v.rsplit('/').next()?;
    let rest = last
        .strip_prefix("vm-")
        .or_else(|| last.strip_prefix("base-"))?;
    rest.split('-').next()?.parse().ok()
}

/// `DELETE /nodes/{node}/qemu/{vmid}` (`qmdestroy`): synchronous checks
/// (exists, protection, HA without purge, running), then in the task the
/// flock, the lock property, linked clones of a template's base volumes,
/// freeing volumes, `lock: destroyed`, removal.
pub(crate) fn destroy(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = check_skiplock(ctx)?;
    let purge = ctx.params.bool("purge")?.unwrap_or(false);
    let unreferenced = ctx
        .params
        .bool("destroy-unreferenced-disks")?
        .unwrap_or(false);
    let early = move |st: &crate::state::ClusterState| -> Result<(), String> {
        let vm = st
            .vms
            .get(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| vm_missing(&node, vmid))?;
        if vm.conf.get("protection").is_some_and(|p| p == "1") {
            return Err(format!("can't remove VM {vmid} - protection mode enabled"));
        }
        if !purge && st.ha.contains_key(&vmid) {
            return Err(format!(
                "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
            ));
        }
        if vm.running() {
            return Err(format!("VM {vmid} is running - destroy failed"));
        }
        Ok(())
    };
    early(&ctx.cluster.lock()).map_err(ApiError::internal)?;
    let secs = ctx.cluster.cfg.timings.destroy;
    let node = ctx.node();
    let spec = task_spec(ctx, &node, "qmdestroy", vmid, secs);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let timeout = t
            .cluster
            .clock
            .real(t.cluster.cfg.timings.lock_timeout_default);
        let _g = t
            .cluster
            .flocks
            .acquire(&t.node, vmid, LockMode::Exclusive, timeout)
            .await?;
        let (vols, macs) = {
            let st = t.cluster.lock();
            early(&st)?;
            let vm = st.vms.get(&vmid).ok_or_else(|| vm_missing(&t.node, vmid))?;
            if !skiplock {
                vm.check_lock()?;
            }
            let vols = owned_volumes(vm);
            if vm.is_template() {
                for v in &vols {
                    let Some((s, name)) = v.split_once(':') else {
                        continue;
                    };
                    let prefix = format!("{name}/");
                    let user = st.storages.get(s).and_then(|stor| {
                        stor.scopes
                            .values()
                            .flat_map(|m| m.values())
                            .find(|x| x.volname.starts_with(&prefix))
                            .and_then(|x| x.vmid)
                    });
                    if let Some(u) = user {
                        return Err(format!(
                            "base volume '{v}' is still in use by linked cloned VM {u}"
                        ));
                    }
                }
            }
            let macs: Vec<String> = crate::guest::nics(&vm.conf)
                .into_iter()
                .map(|n| n.mac)
                .collect();
            (vols, macs)
        };
        t.sleep(secs * 0.8).await;
        {
            let mut st = t.cluster.lock();
            let node = t.node.clone();
            for v in &vols {
                st.free_volume(&node, v);
                t_log_line(
                    &mut st,
                    &t.upid,
                    format!("Removing image: 100% complete...done. ({v})"),
                );
            }
            if unreferenced {
                let names: Vec<(String, String)> = st
                    .storages
                    .iter()
                    .flat_map(|(sid, s)| {
                        s.volumes(&node)
                            .filter(|v| v.vmid == Some(vmid) && v.content == "images")
                            .map(|v| (sid.clone(), v.volname.clone()))
                            .collect::<Vec<_>>()
                    })
                    .collect();
                for (sid, name) in names {
                    st.free_volume(&node, &format!("{sid}:{name}"));
                }
            }
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.conf = BTreeMap::from([("lock".to_string(), "destroyed".to_string())]);
                vm.pending.clear();
                vm.pending_delete.clear();
            }
        }
        t.sleep(secs * 0.2).await;
        let mut st = t.cluster.lock();
        st.vms.remove(&vmid);
        st.release_leases(&macs);
        for pool in st.pools.values_mut() {
            pool.vms.remove(&vmid);
        }
        st.sync_pool_acl();
        st.exec.retain(|(id, _), _| *id != vmid);
        if purge && st.ha.remove(&vmid).is_some() {
            t_log_line(
                &mut st,
                &t.upid,
                format!("NOTE: removed VM {vmid} from HA resource configuration."),
            );
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

fn t_log_line(st: &mut crate::state::ClusterState, upid: &str, line: String) {
    if let Some(t) = st.tasks.get_mut(upid) {
        t.log.push(line);
    }
}

/// `PUT /nodes/{node}/qemu/{vmid}/resize` (`resize` task): grow only;
/// `+N` is relative; shrinking fails with `shrinking disks is not supported`;
/// equal size is a no-op; needs `Datastore.AllocateSpace` on the storage.
/// With qemu-server < 8.0 the call is synchronous (`null` or a 500), as in PVE 7.
pub(crate) async fn resize(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let args = ResizeArgs {
        vmid,
        skiplock: check_skiplock(ctx)?,
        digest: ctx.params.str("digest"),
        disk: ctx.params.req_str("disk")?,
        size: ctx.params.req_str("size")?,
        who: ctx.who.clone(),
    };
    if !crate::config::version_at_least(&ctx.cluster.cfg.qemu_server_version, [8, 0, 0]) {
        return do_resize(&ctx.cluster, &node, &args, None)
            .await
            .map(|_| Reply::null())
            .map_err(ApiError::internal);
    }
    let spec = task_spec(ctx, &node, "resize", vmid, ctx.cluster.cfg.timings.resize);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        do_resize(&t.cluster, &t.node, &args, Some(&t)).await?;
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

struct ResizeArgs {
    vmid: u32,
    skiplock: bool,
    digest: Option<String>,
    disk: String,
    size: String,
    who: crate::auth::Principal,
}

async fn do_resize(
    cluster: &std::sync::Arc<crate::state::Cluster>,
    node: &str,
    a: &ResizeArgs,
    task: Option<&worker::TaskCtx>,
) -> Result<(), String> {
    let vmid = a.vmid;
    let disk = &a.disk;
    let timeout = cluster.clock.real(cluster.cfg.timings.lock_timeout_default);
    let _g = cluster
        .flocks
        .acquire(node, vmid, LockMode::Exclusive, timeout)
        .await?;
    let (volid, current) = {
        let st = cluster.lock();
        let vm = st
            .vms
            .get(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| vm_missing(node, vmid))?;
        if let Some(d) = &a.digest
            && !d.is_empty()
            && *d != vm.digest()
        {
            return Err("checksum mismatch (file change by other user?)".into());
        }
        if !a.skiplock {
            vm.check_lock()?;
        }
        let value = vm
            .conf
            .get(disk)
            .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
        let drive =
            Drive::parse(value).map_err(|e| format!("unable to parse drive '{disk}': {e}"))?;
        if drive.file.is_empty() {
            return Err(format!("disk '{disk}' has no associated volume"));
        }
        if drive.is_cdrom() {
            return Err("you can't resize a cdrom".into());
        }
        if disk == "efidisk0" {
            return Err("resizing of efidisks is not supported".into());
        }
        let storage = drive.storage().unwrap_or("").to_string();
        st.auth
            .check(
                &a.who,
                &format!("/storage/{storage}"),
                &["Datastore.AllocateSpace"],
                false,
            )
            .map_err(|e| e.message())?;
        let current = st
            .volume(node, &drive.file)
            .map(|v| v.size)
            .or(drive.size())
            .ok_or_else(|| {
                format!(
                    "Could not determine current size of volume '{}'",
                    drive.file
                )
            })?;
        (drive.file, current)
    };
    let (relative, num) = match a.size.strip_prefix('+') {
        Some(rest) => (true, rest),
        None => (false, a.size.as_str()),
    };
    let mut new = props::parse_size(num).ok_or_else(|| "internal error".to_string())?;
    if relative {
        new += current;
    }
    if new < current {
        return Err("shrinking disks is not supported".into());
    }
    if new == current {
        return Ok(());
    }
    if let Some(t) = task {
        t.log(format!(
            "update VM {vmid}: resize --disk {disk} --size {}",
            a.size
        ));
    }
    cluster.clock.sleep(cluster.cfg.timings.resize).await;
    let mut st = cluster.lock();
    let (sid, vname) = volid
        .split_once(':')
        .map(|(x, y)| (x.to_string(), y.to_string()))
        .unwrap_or_default();
    if let Some(s) = st.storages.get_mut(&sid) {
        s.check_space(node, new - current)?;
        if let Some(v) = s.get_mut(node, &vname) {
            v.size = new;
        }
    }
    let lag = cluster.lag();
    let vm = st
        .vms
        .get_mut(&vmid)
        .ok_or_else(|| vm_missing(node, vmid))?;
    if let Some(value) = vm.conf.get(disk).cloned()
        && let Ok(mut d) = Drive::parse(&value)
    {
        d.opts.insert("size".into(), props::format_size(new));
        vm.conf.insert(disk.clone(), d.print());
    }
    vm.record_status(lag);
    Ok(())
}

/// `GET …/feature?feature=clone|copy|snapshot`: `{hasFeature, nodes}`.
pub(crate) fn feature(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let feature = ctx.params.req_str("feature")?;
    if let Some(s) = ctx.params.str("snapname") {
        return Err(ApiError::internal(format!("snapshot '{s}' does not exist")));
    }
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let mut has = true;
    let mut nodes: Vec<String> = st.nodes.keys().cloned().collect();
    for (k, d) in vm.drives() {
        if props::is_unused_key(&k) || d.file == "none" {
            continue;
        }
        let Some(sid) = d.storage() else { continue };
        let Some(s) = st.storages.get(sid) else {
            continue;
        };
        if !s.cfg.shared {
            nodes.retain(|n| *n == node);
        }
        if d.is_cdrom() {
            continue;
        }
        let base = d.file.split_once(':').is_some_and(|(_, v)| {
            v.rsplit('/').next().is_some_and(|l| l.starts_with("base-")) && !v.contains("/vm-")
        });
        has &= match feature.as_str() {
            "clone" => s.cfg.kind.supports_linked_clone() && base,
            "snapshot" => !matches!(s.cfg.kind, crate::config::StorageType::Lvm),
            _ => true,
        };
    }
    Ok(Reply::data(
        json!({"hasFeature": u8::from(has), "nodes": nodes}),
    ))
}

/// `POST …/template` (`qmtemplate`): `template: 1`, disks renamed to base volumes.
pub(crate) fn template(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let check = move |st: &crate::state::ClusterState, node: &str| -> Result<(), String> {
        let vm = st
            .vms
            .get(&vmid)
            .filter(|v| v.node == node)
            .ok_or_else(|| vm_missing(node, vmid))?;
        vm.check_lock()?;
        if vm.is_template() {
            return Err("you can't convert a template to a template".into());
        }
        if vm.running() {
            return Err("you can't convert a VM to template if VM is running".into());
        }
        Ok(())
    };
    check(&ctx.cluster.lock(), &node).map_err(ApiError::internal)?;
    let secs = ctx.cluster.cfg.timings.template;
    let spec = task_spec(ctx, &node, "qmtemplate", vmid, secs);
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        let timeout = t
            .cluster
            .clock
            .real(t.cluster.cfg.timings.lock_timeout_default);
        let _g = t
            .cluster
            .flocks
            .acquire(&t.node, vmid, LockMode::Exclusive, timeout)
            .await?;
        check(&t.cluster.lock(), &t.node)?;
        t.sleep(secs).await;
        let mut st = t.cluster.lock();
        let node = t.node.clone();
        let vm = st
            .vms
            .get(&vmid)
            .cloned()
            .ok_or_else(|| vm_missing(&node, vmid))?;
        let mut conf = vm.conf.clone();
        for (k, d) in vm.drives() {
            if d.is_cdrom() || props::is_unused_key(&k) {
                continue;
            }
            let Some((sid, vname)) = d
                .file
                .split_once(':')
                .map(|(a, b)| (a.to_string(), b.to_string()))
            else {
                continue;
            };
            let new_name = vname.replacen(&format!("vm-{vmid}-"), &format!("base-{vmid}-"), 1);
            if new_name == vname {
                continue;
            }
            if let Some(s) = st.storages.get_mut(&sid)
                && let Some(mut vol) = s.remove(&node, &vname)
            {
                vol.volname = new_name.clone();
                s.insert(&node, vol);
            }
            let mut nd = d.clone();
            nd.file = format!("{sid}:{new_name}");
            conf.insert(k, nd.print());
        }
        conf.insert("template".into(), "1".into());
        let lag = t.cluster.lag();
        if let Some(v) = st.vms.get_mut(&vmid) {
            v.conf = conf;
            v.record_status(lag);
        }
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners() {
        assert_eq!(owner_of("ceph:vm-101-disk-0"), Some(101));
        assert_eq!(owner_of("ceph:base-9000-disk-0/vm-101-disk-0"), Some(101));
        assert_eq!(owner_of("local:101/vm-101-disk-0.qcow2"), Some(101));
        assert_eq!(owner_of("ceph:base-9000-disk-1"), Some(9000));
        assert_eq!(owner_of("cephfs:iso/seed.iso"), None);
    }
}
