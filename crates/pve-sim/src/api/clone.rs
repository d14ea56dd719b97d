//! `POST /nodes/{node}/qemu/{vmid}/clone` (qemu-server `clone_vm`,
//! docs/proxmox-semantics.md §6–§8).
//!
//! In the request: the early checks (storage, lock property, linked/full
//! rules, shared storage for `target`, `newid` config on this node). In the
//! `qmclone` task (id = source VMID): the source flock (shared if stopped,
//! exclusive if running) and the new VM's flock, both with the clone timeout
//! (1 s); the temporary config `lock: clone` (which fails if `newid` exists
//! on another node); storage allocation (with the optional storage lock
//! model); the copy time; the final config (fresh MACs, SMBIOS UUID and
//! vmgenid; `template` dropped; pending changes discarded with a warning),
//! moved to `target` at the very end. A failed or interrupted clone leaves
//! nothing behind.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::json;

use super::vm_on;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::locks::{LockMode, storage_lock_message};
use crate::props::{self, Drive, Net};
use crate::state::vm::Vm;
use crate::state::{Cluster, ClusterState};
use crate::worker::{self, TaskCtx, TaskOk};

/// One disk to clone.
#[derive(Clone, Debug)]
struct DiskPlan {
    key: String,
    drive: Drive,
    /// Target storage.
    storage: String,
    /// Full copy (else linked clone of a base volume).
    full: bool,
    size: u64,
}

/// Everything the task needs from the early checks.
#[derive(Clone, Debug)]
struct Plan {
    running: bool,
    full: bool,
    disks: Vec<DiskPlan>,
}

struct Args {
    node: String,
    vmid: u32,
    newid: u32,
    pool: Option<String>,
    storage: Option<String>,
    format: Option<String>,
    target: Option<String>,
    full: Option<bool>,
    name: Option<String>,
    description: Option<String>,
    snapname: Option<String>,
}

fn is_base_volume(volid: &str) -> bool {
    volid.split_once(':').is_some_and(|(_, v)| {
        let last = v.rsplit('/').next().unwrap_or(v);
        last.starts_with("base-") && !v.contains("/vm-")
    })
}

/// `$load_and_check` of `clone_vm`.
fn early_checks(ctx: &Ctx, st: &ClusterState, a: &Args) -> Result<Plan, ApiError> {
    let auth = |path: &str, privs: &[&str]| st.auth.check(&ctx.who, path, privs, false);
    if let Some(p) = &a.pool
        && !st.pools.contains_key(p)
    {
        // `check_pool_exist` raises a permission exception.
        return Err(ApiError::forbidden(&format!("pool '{p}' does not exist")));
    }
    if let Some(t) = &a.target
        && !st.nodes.contains_key(t)
    {
        return Err(ApiError::internal(format!("no such cluster node '{t}'")));
    }
    if let Some(s) = &a.storage {
        let sc = st
            .storages
            .get(s)
            .ok_or_else(|| ApiError::internal(format!("storage '{s}' does not exist")))?;
        sc.check_enabled(&a.node).map_err(ApiError::internal)?;
        if !sc.supports("images") {
            return Err(ApiError::param(
                "storage",
                format!("storage '{s}' does not support vm images"),
            ));
        }
        if let Some(t) = &a.target {
            sc.check_enabled(t).map_err(ApiError::internal)?;
            if !sc.cfg.shared {
                return Err(ApiError::internal(format!(
                    "can't clone to non-shared storage '{s}'"
                )));
            }
        }
    }
    let vm = vm_on(st, &a.node, a.vmid)?;
    vm.check_lock().map_err(ApiError::internal)?;
    if let Some(s) = &a.snapname {
        return Err(ApiError::internal(format!("snapshot '{s}' does not exist")));
    }
    let full = a.full.unwrap_or(!vm.is_template());
    if a.storage.is_some() && !full {
        return Err(ApiError::internal(
            "parameter 'storage' not allowed for linked clones",
        ));
    }
    if a.format.is_some() && !full {
        return Err(ApiError::internal(
            "parameter 'format' not allowed for linked clones",
        ));
    }
    let mut shared_vm = true;
    let mut disks = Vec::new();
    for (key, drive) in vm.drives() {
        if props::is_unused_key(&key) {
            continue;
        }
        if drive.file == "none" || drive.file == "cdrom" || drive.storage().is_none() {
            continue;
        }
        let Some(src_storage) = drive.storage().map(String::from) else {
            continue;
        };
        let sc = st
            .storages
            .get(&src_storage)
            .ok_or_else(|| ApiError::internal(format!("storage '{src_storage}' does not exist")))?;
        if !sc.cfg.shared {
            shared_vm = false;
        }
        if drive.is_cdrom() && !drive.is_cloudinit() {
            continue;
        }
        let target_storage = a.storage.clone().unwrap_or_else(|| src_storage.clone());
        auth(
            &format!("/storage/{target_storage}"),
            &["Datastore.AllocateSpace"],
        )?;
        let full_copy = full || drive.is_cloudinit() || key == "tpmstate0";
        if !(full_copy || sc.cfg.kind.supports_linked_clone() && is_base_volume(&drive.file)) {
            return Err(ApiError::internal(format!(
                "Linked clone feature is not supported for '{}' ({key})",
                drive.file
            )));
        }
        let size = st
            .volume(&a.node, &drive.file)
            .map(|v| v.size)
            .or(drive.size())
            .unwrap_or(0);
        disks.push(DiskPlan {
            key,
            drive,
            storage: if full_copy {
                target_storage
            } else {
                src_storage
            },
            full: full_copy,
            size,
        });
    }
    for (k, v) in &vm.conf {
        if props::is_net_key(k)
            && let Ok(n) = Net::parse(v)
            && let Some(b) = n.bridge()
        {
            let path = match n.opts.get("tag") {
                Some(t) => format!("/sdn/zones/localnetwork/{b}/{t}"),
                None => format!("/sdn/zones/localnetwork/{b}"),
            };
            auth(&path, &["SDN.Use"])?;
        }
    }
    if let Some(t) = &a.target
        && !shared_vm
    {
        return Err(ApiError::internal(format!(
            "can't clone VM to node '{t}' (VM uses local storage)"
        )));
    }
    if st.vms.get(&a.newid).is_some_and(|v| v.node == a.node) {
        return Err(ApiError::internal(format!(
            "unable to create VM {}: config file already exists",
            a.newid
        )));
    }
    Ok(Plan {
        running: vm.running(),
        full,
        disks,
    })
}

/// Removes a half-created clone unless committed.
struct CloneCleanup {
    cluster: Arc<Cluster>,
    node: String,
    newid: u32,
    created: bool,
    volumes: Vec<String>,
    committed: bool,
}

impl Drop for CloneCleanup {
    fn drop(&mut self) {
        if self.committed {
            return;
        }
        let mut st = self.cluster.lock();
        for v in &self.volumes {
            st.free_volume(&self.node, v);
        }
        if self.created
            && st
                .vms
                .get(&self.newid)
                .is_some_and(|vm| vm.node == self.node && vm.lock() == Some("clone"))
        {
            st.vms.remove(&self.newid);
        }
    }
}

/// The clone endpoint.
pub(crate) fn clone(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let newid = ctx
        .params
        .u32("newid")?
        .ok_or_else(|| ApiError::param("newid", "property is missing and it is not optional"))?;
    let target = ctx
        .params
        .str("target")
        .filter(|t| *t != node && t != "localhost");
    let a = Args {
        node: node.clone(),
        vmid,
        newid,
        pool: ctx.params.str("pool"),
        storage: ctx.params.str("storage"),
        format: ctx.params.str("format"),
        target,
        full: ctx.params.bool("full")?,
        name: ctx.params.str("name"),
        description: ctx.params.str("description"),
        snapname: ctx.params.str("snapname"),
    };
    let plan = {
        let st = ctx.cluster.lock();
        early_checks(ctx, &st, &a)?
    };
    let t = &ctx.cluster.cfg.timings;
    let copied_gib: f64 = plan
        .disks
        .iter()
        .filter(|d| d.full && !d.drive.is_cloudinit())
        .map(|d| d.size as f64 / (1u64 << 30) as f64)
        .sum();
    let duration = if plan.full {
        t.clone_full + t.clone_full_per_gib * copied_gib
    } else {
        t.clone_linked
    };
    let mut spec = super::task_spec(ctx, &node, "qmclone", vmid, duration);
    spec.lock_timeout = t.lock_timeout_clone;
    let cluster = ctx.cluster.clone();
    let upid = worker::spawn(&cluster, spec, move |tctx| run(tctx, a, plan, duration));
    Ok(Reply::data(json!(upid)))
}

async fn run(t: TaskCtx, a: Args, plan: Plan, duration: f64) -> Result<TaskOk, String> {
    let cluster = t.cluster.clone();
    let timings = &cluster.cfg.timings;
    let lock_timeout = cluster.clock.real(timings.lock_timeout_clone);
    let mode = if plan.running {
        LockMode::Exclusive
    } else {
        LockMode::Shared
    };
    let _src = cluster
        .flocks
        .acquire(&a.node, a.vmid, mode, lock_timeout)
        .await?;
    let _dst = cluster
        .flocks
        .acquire(&a.node, a.newid, LockMode::Exclusive, lock_timeout)
        .await?;
    let mut cleanup = CloneCleanup {
        cluster: cluster.clone(),
        node: a.node.clone(),
        newid: a.newid,
        created: false,
        volumes: vec![],
        committed: false,
    };
    {
        let mut st = cluster.lock();
        let vm = st
            .vms
            .get(&a.vmid)
            .filter(|v| v.node == a.node)
            .ok_or_else(|| super::vm_missing(&a.node, a.vmid))?;
        vm.check_lock()?;
        if let Some(other) = st.vms.get(&a.newid) {
            if other.node == a.node {
                return Err(format!(
                    "unable to create VM {}: config file already exists",
                    a.newid
                ));
            }
            return Err(format!(
                "close (rename) atomic file '/etc/pve/nodes/{}/qemu-server/{}.conf' failed: File exists",
                a.node, a.newid
            ));
        }
        let vm = Vm::new(
            a.newid,
            &a.node,
            BTreeMap::from([("lock".to_string(), "clone".to_string())]),
        );
        st.vms.insert(a.newid, vm);
        cleanup.created = true;
    }
    t.log(format!(
        "create {} clone of VM {} with ID {}",
        if plan.full { "full" } else { "linked" },
        a.vmid,
        a.newid
    ));

    let mut new_drives: BTreeMap<String, String> = BTreeMap::new();
    for d in &plan.disks {
        t.log(format!(
            "create {} clone of drive {} ({})",
            if d.full { "full" } else { "linked" },
            d.key,
            d.drive.file
        ));
        let (alloc_lock, shared) = {
            let st = cluster.lock();
            let sc = st.storage_cfg(&d.storage);
            (sc.and_then(|s| s.alloc_lock), sc.is_some_and(|s| s.shared))
        };
        let _permit = match alloc_lock {
            Some(l) => {
                let key = if shared {
                    d.storage.clone()
                } else {
                    format!("{}@{}", d.storage, a.node)
                };
                let timeout = cluster.clock.real(timings.storage_lock_timeout);
                let p = cluster
                    .storage_locks
                    .acquire(&key, l.max_parallel, timeout)
                    .await;
                let Some(p) = p else {
                    return Err(format!(
                        "clone failed: {}",
                        storage_lock_message(&d.storage, shared)
                    ));
                };
                t.sleep(l.hold).await;
                Some(p)
            }
            None => None,
        };
        let volid = {
            let mut st = cluster.lock();
            if d.drive.is_cloudinit() {
                st.alloc_cloudinit(&d.storage, &a.node, a.newid)
            } else if d.full {
                st.alloc_image(
                    &d.storage,
                    &a.node,
                    a.newid,
                    d.size,
                    a.format.as_deref(),
                    None,
                )
            } else {
                let parent = d.drive.file.split_once(':').map(|(_, v)| v.to_string());
                st.alloc_image(
                    &d.storage,
                    &a.node,
                    a.newid,
                    d.size,
                    None,
                    parent.as_deref(),
                )
            }
            .map_err(|e| format!("clone failed: {e}"))?
        };
        cleanup.volumes.push(volid.clone());
        let mut nd = d.drive.clone();
        nd.file = volid;
        new_drives.insert(d.key.clone(), nd.print());
    }

    t.sleep(duration).await;

    let mut warnings = 0;
    {
        let mut st = cluster.lock();
        let src = st
            .vms
            .get(&a.vmid)
            .cloned()
            .ok_or_else(|| format!("clone failed: {}", super::vm_missing(&a.node, a.vmid)))?;
        let prefix = cluster.cfg.mac_prefix.clone();
        let mut conf: BTreeMap<String, String> = BTreeMap::new();
        for (k, v) in &src.conf {
            let skip = matches!(
                k.as_str(),
                "snapshots"
                    | "parent"
                    | "snaptime"
                    | "vmstate"
                    | "snapstate"
                    | "runningcpu"
                    | "runningmachine"
                    | "running-nets-host-mtu"
                    | "template"
                    | "lock"
            ) || props::is_unused_key(k);
            if skip {
                continue;
            }
            if props::is_net_key(k) {
                let mut n = Net::parse(v).map_err(|e| format!("clone failed: {k}: {e}"))?;
                n.macaddr = Some(st.mac(&prefix));
                conf.insert(k.clone(), n.print());
            } else if let Some(nd) = new_drives.get(k) {
                conf.insert(k.clone(), nd.clone());
            } else {
                conf.insert(k.clone(), v.clone());
            }
        }
        let mut smbios: Vec<(String, String)> = conf
            .get("smbios1")
            .and_then(|s| props::split_pairs(s, None).ok())
            .unwrap_or_default()
            .into_iter()
            .filter(|(k, _)| k != "uuid")
            .collect();
        smbios.insert(0, ("uuid".into(), st.uuid()));
        conf.insert(
            "smbios1".into(),
            smbios
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(","),
        );
        if conf.contains_key("vmgenid") {
            let g = st.uuid();
            conf.insert("vmgenid".into(), g);
        }
        let name = a.name.clone().unwrap_or_else(|| {
            format!(
                "Copy-of-VM-{}",
                src.name().map(String::from).unwrap_or(a.vmid.to_string())
            )
        });
        conf.insert("name".into(), name);
        if let Some(d) = &a.description {
            conf.insert("description".into(), d.clone());
        }
        if !src.pending.is_empty() || !src.pending_delete.is_empty() {
            let keys: Vec<&String> = src
                .pending
                .keys()
                .chain(src.pending_delete.keys())
                .collect();
            let msg = format!(
                "WARN: found pending changes for '{}', discarding for clone",
                keys.iter()
                    .map(|k| k.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            );
            warnings += 1;
            if let Some(task) = st.tasks.get_mut(&t.upid) {
                task.log.push(msg);
            }
        }
        let Some(vm) = st.vms.get_mut(&a.newid) else {
            return Err(format!("clone failed: config of VM {} vanished", a.newid));
        };
        vm.conf = conf;
        if let Some(target) = &a.target {
            vm.node = target.clone();
        }
        vm.record_status(cluster.lag());
        if let Some(p) = &a.pool
            && let Some(pool) = st.pools.get_mut(p)
        {
            pool.vms.insert(a.newid);
        }
        st.sync_pool_acl();
        cleanup.committed = true;
    }
    if let Some(target) = &a.target {
        t.log(format!(
            "moving config of VM {} to node '{target}'",
            a.newid
        ));
    }
    Ok(TaskOk { warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_volumes() {
        assert!(is_base_volume("ceph:base-9000-disk-0"));
        assert!(is_base_volume("local:9000/base-9000-disk-0.raw"));
        assert!(!is_base_volume("ceph:vm-100-disk-0"));
        assert!(!is_base_volume("ceph:base-9000-disk-0/vm-101-disk-0"));
    }
}
