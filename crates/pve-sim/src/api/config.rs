//! VM config: `GET …/config` (with `digest`), `GET …/pending`, and the
//! update path shared by `POST …/config` (asynchronous, `qmconfig` task) and
//! `PUT …/config` (synchronous), docs/proxmox-semantics.md §6, §11, §14, §15.
//!
//! Values go to the `[PENDING]` section first; on a stopped VM they are
//! applied at once, on a running VM only fast/hot-pluggable options are
//! (`hotplug` default `network,disk,usb`); the rest waits for stop+start or
//! an API reboot. Replaced or deleted disks become `unusedN` unless `force`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::{check_skiplock, typed_config_value, vm_missing, vm_on};
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::locks::LockMode;
use crate::props::{self, Drive, Net};
use crate::state::vm::{Vm, is_cloudinit_key};
use crate::state::{Cluster, ClusterState};
use crate::worker::{self, TaskOk};

/// `GET /nodes/{node}/qemu/{vmid}/config[?current=1]`.
pub(crate) fn get(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let current = ctx.params.bool("current")?.unwrap_or(false);
    if let Some(s) = ctx.params.str("snapshot") {
        return Err(ApiError::internal(format!("snapshot '{s}' does not exist")));
    }
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let conf = if current {
        vm.conf.clone()
    } else {
        vm.effective_conf()
    };
    let mut out = serde_json::Map::new();
    for (k, v) in conf {
        let value = if k == "cipassword" {
            json!("**********")
        } else {
            typed_config_value(&k, &v)
        };
        out.insert(k, value);
    }
    out.insert("digest".into(), json!(vm.digest()));
    Ok(Reply::data(Value::Object(out)))
}

/// `GET /nodes/{node}/qemu/{vmid}/pending`: `[{key, value?, pending?, delete?}]`
/// (`delete` 1 = pending delete, 2 = forced).
pub(crate) fn pending(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let keys: BTreeSet<&String> = vm
        .conf
        .keys()
        .chain(vm.pending.keys())
        .chain(vm.pending_delete.keys())
        .collect();
    let out: Vec<Value> = keys
        .into_iter()
        .map(|k| {
            let mut e = json!({"key": k});
            if let Some(v) = vm.conf.get(k) {
                e["value"] = typed_config_value(k, v);
            }
            if let Some(v) = vm.pending.get(k) {
                e["pending"] = typed_config_value(k, v);
            }
            if let Some(force) = vm.pending_delete.get(k) {
                e["delete"] = json!(if *force { 2 } else { 1 });
            }
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// Whether `key` is a qemu config option (`PVE::QemuServer::option_exists`).
pub(crate) fn option_exists(key: &str) -> bool {
    const KEYS: &[&str] = &[
        "acpi",
        "affinity",
        "agent",
        "allow-ksm",
        "amd-sev",
        "arch",
        "args",
        "audio0",
        "autostart",
        "balloon",
        "bios",
        "boot",
        "bootdisk",
        "cdrom",
        "cicustom",
        "cipassword",
        "citype",
        "ciupgrade",
        "ciuser",
        "cores",
        "cpu",
        "cpulimit",
        "cpuunits",
        "description",
        "efidisk0",
        "freeze",
        "hookscript",
        "hotplug",
        "hugepages",
        "intel-tdx",
        "ivshmem",
        "keephugepages",
        "keyboard",
        "kvm",
        "localtime",
        "lock",
        "machine",
        "memory",
        "meta",
        "migrate_downtime",
        "migrate_speed",
        "name",
        "nameserver",
        "numa",
        "onboot",
        "ostype",
        "protection",
        "reboot",
        "rng0",
        "scsihw",
        "searchdomain",
        "shares",
        "smbios1",
        "smp",
        "sockets",
        "spice_enhancements",
        "sshkeys",
        "startdate",
        "startup",
        "tablet",
        "tags",
        "tdf",
        "template",
        "tpmstate0",
        "vcpus",
        "vga",
        "vmgenid",
        "vmstatestorage",
        "watchdog",
        "running-nets-host-mtu",
        "runningcpu",
        "runningmachine",
        "vmstate",
    ];
    KEYS.contains(&key)
        || props::is_drive_key(key)
        || props::is_unused_key(key)
        || props::is_net_key(key)
        || [
            ("ipconfig", 31),
            ("serial", 3),
            ("parallel", 2),
            ("usb", 13),
            ("hostpci", 15),
            ("numa", 7),
            ("virtiofs", 9),
        ]
        .iter()
        .any(|(p, m)| props::indexed(key, p, *m))
}

/// Parameters of the config API that are not config keys.
const NON_CONFIG: &[&str] = &[
    "node",
    "vmid",
    "digest",
    "skiplock",
    "delete",
    "revert",
    "force",
    "background_delay",
    "import-working-storage",
    "skip_cloud_init",
    "archive",
    "pool",
    "start",
    "unique",
    "storage",
    "live-restore",
    "bwlimit",
    "ha-managed",
];

/// A validated update request.
#[derive(Clone, Debug, Default)]
pub(crate) struct Update {
    pub settings: BTreeMap<String, String>,
    pub delete: Vec<String>,
    pub revert: Vec<String>,
    pub force: bool,
}

/// `true` for `STORAGE:SIZE` new-disk values (`NEW_DISK_RE`).
pub(crate) fn new_disk_size(file: &str) -> Option<(String, f64)> {
    let (storage, size) = file.split_once(':')?;
    if storage.is_empty() || storage.contains('/') {
        return None;
    }
    let ok = !size.is_empty()
        && size.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        && size.matches('.').count() <= 1;
    if !ok {
        return None;
    }
    size.parse::<f64>().ok().map(|s| (storage.to_string(), s))
}

/// Collects and normalises the settings of a config/create request: `cdrom`
/// alias, `delete`/`revert` rules (400s with qemu-server's texts), drive
/// syntax, MACs for new NICs, `vmgenid=1`.
pub(crate) fn prepare(ctx: &Ctx, mac_prefix: &str) -> Result<Update, ApiError> {
    let mut settings = BTreeMap::new();
    for (k, v) in &ctx.params.map {
        if NON_CONFIG.contains(&k.as_str()) {
            continue;
        }
        let Some(s) = crate::http::params::value_as_string(v) else {
            continue;
        };
        settings.insert(k.clone(), s);
    }
    if let Some(v) = settings.remove("cdrom") {
        let v = if v.contains("media=") {
            v
        } else {
            format!("{v},media=cdrom")
        };
        settings.insert("ide2".into(), v);
    }
    let revert: Vec<String> = props::split_list(&ctx.params.str("revert").unwrap_or_default())
        .into_iter()
        .map(String::from)
        .collect();
    for opt in &revert {
        if !option_exists(opt) {
            return Err(ApiError::param("revert", format!("unknown option '{opt}'")));
        }
        if settings.contains_key(opt) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{opt}' and -revert {opt}' at the same time"),
            ));
        }
    }
    let mut delete = Vec::new();
    for opt in props::split_list(&ctx.params.str("delete").unwrap_or_default()) {
        let opt = if opt == "cdrom" { "ide2" } else { opt };
        if settings.contains_key(opt) {
            return Err(ApiError::param(
                "delete",
                format!("you can't use '-{opt}' and -delete {opt}' at the same time"),
            ));
        }
        if revert.iter().any(|r| r == opt) {
            return Err(ApiError::param(
                "revert",
                format!("you can't use '-delete {opt}' and -revert {opt}' at the same time"),
            ));
        }
        if !option_exists(opt) {
            return Err(ApiError::param("delete", format!("unknown option '{opt}'")));
        }
        delete.push(opt.to_string());
    }
    let force = ctx.params.bool("force")?.unwrap_or(false);
    let mut rng_needed: Vec<String> = Vec::new();
    for (k, v) in settings.iter_mut() {
        if props::is_drive_key(k) {
            let d = Drive::parse(v)
                .map_err(|_| ApiError::param(k.clone(), "unable to parse drive options"))?;
            if d.file.contains(":iso/") && !d.is_cdrom() {
                return Err(ApiError::param(
                    k.clone(),
                    "explicit 'media=cdrom' is required for iso images",
                ));
            }
            *v = d.print();
        } else if props::is_net_key(k) {
            let n = Net::parse(v)
                .map_err(|e| ApiError::param(k.clone(), format!("invalid format - {e}")))?;
            if n.macaddr.is_none() {
                rng_needed.push(k.clone());
            }
            *v = n.print();
        } else if !option_exists(k) {
            return Err(ApiError::param(
                k.clone(),
                "property is not defined in schema and the schema does not allow additional properties",
            ));
        }
    }
    if !rng_needed.is_empty() || settings.get("vmgenid").is_some_and(|v| v == "1") {
        let mut st = ctx.cluster.lock();
        for k in rng_needed {
            if let Some(v) = settings.get_mut(&k)
                && let Ok(mut n) = Net::parse(v)
            {
                n.macaddr = Some(st.mac(mac_prefix));
                *v = n.print();
            }
        }
        if settings.get("vmgenid").is_some_and(|v| v == "1") {
            let u = st.uuid();
            settings.insert("vmgenid".into(), u);
        }
    }
    Ok(Update {
        settings,
        delete,
        revert,
        force,
    })
}

/// qemu-server `check_vm_modify_config_perm` plus the drive, storage and
/// bridge checks of `update_vm_api`.
pub(crate) fn check_perms(
    ctx: &Ctx,
    vmid: u32,
    upd: &Update,
    current: Option<&Vm>,
) -> Result<(), ApiError> {
    let vm_path = format!("/vms/{vmid}");
    let keys = upd.settings.keys().chain(upd.delete.iter());
    for k in keys {
        let k = k.as_str();
        if props::is_drive_key(k) || props::is_unused_key(k) || k == "tags" {
            continue;
        }
        let privs: &[&str] = if matches!(
            k,
            "cores"
                | "cpu"
                | "cpulimit"
                | "cpuunits"
                | "numa"
                | "smp"
                | "sockets"
                | "vcpus"
                | "affinity"
        ) || props::indexed(k, "numa", 7)
        {
            &["VM.Config.CPU"]
        } else if matches!(k, "memory" | "balloon" | "shares" | "allow-ksm") {
            &["VM.Config.Memory"]
        } else if matches!(
            k,
            "acpi"
                | "hotplug"
                | "kvm"
                | "machine"
                | "scsihw"
                | "smbios1"
                | "tablet"
                | "vga"
                | "watchdog"
                | "audio0"
                | "rng0"
        ) || props::indexed(k, "serial", 3)
            || props::indexed(k, "usb", 13)
        {
            &["VM.Config.HWType"]
        } else if matches!(
            k,
            "agent"
                | "autostart"
                | "bios"
                | "description"
                | "keyboard"
                | "localtime"
                | "migrate_downtime"
                | "migrate_speed"
                | "name"
                | "onboot"
                | "ostype"
                | "protection"
                | "reboot"
                | "startdate"
                | "startup"
                | "tdf"
                | "template"
        ) {
            &["VM.Config.Options"]
        } else if k == "freeze" {
            &["VM.PowerMgmt"]
        } else if matches!(k, "boot" | "bootdisk" | "vmstatestorage") {
            &["VM.Config.Disk"]
        } else if props::is_net_key(k) {
            &["VM.Config.Network"]
        } else if is_cloudinit_key(k) {
            ctx.check(
                &vm_path,
                &["VM.Config.Cloudinit", "VM.Config.Network"],
                true,
            )?;
            continue;
        } else if props::indexed(k, "hostpci", 15) && !ctx.who.is_root() {
            // qemu-server: a mapped device needs Mapping.Use on its
            // mapping and VM.Config.HWType; a raw host address only root.
            let mapping = ctx.params.str(k).and_then(|v| crate::pci::mapping_of(&v));
            let Some(id) = mapping else {
                return Err(ApiError::internal(format!(
                    "only root can set '{k}' config for non-mapped devices"
                )));
            };
            ctx.check(&format!("/mapping/pci/{id}"), &["Mapping.Use"], false)?;
            &["VM.Config.HWType"]
        } else if !ctx.who.is_root() {
            return Err(ApiError::internal(format!(
                "only root can set '{k}' config"
            )));
        } else {
            continue;
        };
        ctx.check(&vm_path, privs, false)?;
        if k == "startup" {
            ctx.check("/", &["Sys.Modify"], false)?;
        }
    }
    let drive_perm = |value: &str| -> Result<(), ApiError> {
        let Ok(d) = Drive::parse(value) else {
            return Ok(());
        };
        if d.is_cloudinit() {
            ctx.check(&vm_path, &["VM.Config.Cloudinit", "VM.Config.CDROM"], false)
        } else if d.is_cdrom() {
            ctx.check(&vm_path, &["VM.Config.CDROM"], false)
        } else {
            ctx.check(&vm_path, &["VM.Config.Disk"], false)
        }
    };
    for (k, v) in &upd.settings {
        if !props::is_drive_key(k) {
            continue;
        }
        if let Some(old) = current.and_then(|vm| vm.conf.get(k)) {
            drive_perm(old)?;
        }
        drive_perm(v)?;
        let d = Drive::parse(v)
            .map_err(|_| ApiError::param(k.clone(), "unable to parse drive options"))?;
        if let Some((storage, _)) = new_disk_size(&d.file) {
            ctx.check(
                &format!("/storage/{storage}"),
                &["Datastore.AllocateSpace"],
                false,
            )?;
            let st = ctx.cluster.lock();
            match st.storage_cfg(&storage) {
                None => {
                    return Err(ApiError::internal(format!(
                        "storage '{storage}' does not exist"
                    )));
                }
                Some(s) if !s.content.iter().any(|c| c == "images") => {
                    return Err(ApiError::param(
                        "storage",
                        format!("storage '{storage}' does not support vm images"),
                    ));
                }
                _ => {}
            }
        } else if let Some((storage, vol)) = d.file.split_once(':')
            && (vol.starts_with("iso/") || vol.starts_with("vztmpl/") || vol.starts_with("import/"))
        {
            ctx.check(
                &format!("/storage/{storage}"),
                &["Datastore.AllocateSpace", "Datastore.Audit"],
                true,
            )?;
        }
    }
    for k in &upd.delete {
        if (props::is_drive_key(k) || props::is_unused_key(k))
            && let Some(old) = current.and_then(|vm| vm.conf.get(k).or(vm.pending.get(k)))
        {
            if props::is_unused_key(k) {
                ctx.check(&vm_path, &["VM.Config.Disk"], false)?;
            } else {
                drive_perm(old)?;
            }
        }
    }
    for (k, v) in &upd.settings {
        if props::is_net_key(k)
            && let Ok(n) = Net::parse(v)
            && let Some(b) = n.bridge()
        {
            check_bridge(ctx, b, n.opts.get("tag").map(String::as_str))?;
        }
    }
    Ok(())
}

/// `SDN.Use` on `/sdn/zones/localnetwork/<bridge>[/<tag>]`.
pub(crate) fn check_bridge(ctx: &Ctx, bridge: &str, tag: Option<&str>) -> Result<(), ApiError> {
    let path = match tag {
        Some(t) => format!("/sdn/zones/localnetwork/{bridge}/{t}"),
        None => format!("/sdn/zones/localnetwork/{bridge}"),
    };
    ctx.check(&path, &["SDN.Use"], false)
}

/// qemu-server `$load_and_check_config`: exists, digest, lock.
fn load_and_check(
    st: &ClusterState,
    node: &str,
    vmid: u32,
    digest: Option<&str>,
    skiplock: bool,
) -> Result<(), String> {
    let vm = st
        .vms
        .get(&vmid)
        .filter(|v| v.node == node)
        .ok_or_else(|| vm_missing(node, vmid))?;
    if let Some(d) = digest
        && !d.is_empty()
        && d != vm.digest()
    {
        return Err("checksum mismatch (file change by other user?)".into());
    }
    if !skiplock {
        vm.check_lock()?;
    }
    Ok(())
}

/// `POST` (`sync = false`) and `PUT` (`sync = true`) `…/config`.
pub(crate) async fn update(ctx: &Ctx, sync: bool) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let skiplock = check_skiplock(ctx)?;
    let digest = ctx.params.str("digest");
    let background_delay = if sync {
        None
    } else {
        ctx.params.int("background_delay")?
    };
    let upd = prepare(ctx, &ctx.cluster.cfg.mac_prefix)?;
    if upd.settings.is_empty() && upd.delete.is_empty() && upd.revert.is_empty() {
        return Err(ApiError::internal("no options specified"));
    }
    let current = ctx
        .cluster
        .lock()
        .vms
        .get(&vmid)
        .filter(|v| v.node == node)
        .cloned();
    check_perms(ctx, vmid, &upd, current.as_ref())?;

    let cluster = ctx.cluster.clone();
    let timings = &cluster.cfg.timings;
    let lock_timeout = cluster.clock.real(timings.lock_timeout_default);
    let forks_first = cluster.cfg.config_forks_before_lock();
    if let Some(crate::faults::FaultKind::LockTimeout) = &ctx.task_fault
        && (sync || !forks_first)
    {
        cluster.clock.sleep(timings.lock_timeout_default).await;
        return Err(ApiError::internal(crate::locks::flock_timeout_message(
            vmid,
        )));
    }

    // early checks before forking/locking (qemu-server >= 9.1.19)
    if forks_first {
        load_and_check(&cluster.lock(), &node, vmid, digest.as_deref(), skiplock)
            .map_err(ApiError::internal)?;
    }
    // up to 9.1.18 both methods take the flock inside the request; PUT always does
    let request_guard = if sync || !forks_first {
        let g = cluster
            .flocks
            .acquire(&node, vmid, LockMode::Exclusive, lock_timeout)
            .await
            .map_err(ApiError::internal)?;
        load_and_check(&cluster.lock(), &node, vmid, digest.as_deref(), skiplock)
            .map_err(ApiError::internal)?;
        Some(g)
    } else {
        None
    };

    if sync {
        let mut st = cluster.lock();
        apply(&cluster, &mut st, &node, vmid, &upd).map_err(ApiError::internal)?;
        drop(request_guard);
        return Ok(Reply::null());
    }

    let secs = timings.config;
    let mut spec = super::task_spec(ctx, &node, "qmconfig", vmid, secs);
    if request_guard.is_some() {
        // the flock was already taken in the request; a lock fault has fired there
        spec.fault = spec
            .fault
            .filter(|f| !matches!(f, crate::faults::FaultKind::LockTimeout));
    }
    let params_log = upd
        .settings
        .iter()
        .map(|(k, v)| format!("-{k} {v}"))
        .collect::<Vec<_>>()
        .join(" ");
    let digest_task = digest.clone();
    let upid = worker::spawn(&cluster, spec, move |t| async move {
        let _guard = match request_guard {
            Some(g) => g,
            None => {
                let g = t
                    .cluster
                    .flocks
                    .acquire(&t.node, vmid, LockMode::Exclusive, lock_timeout)
                    .await?;
                load_and_check(
                    &t.cluster.lock(),
                    &t.node,
                    vmid,
                    digest_task.as_deref(),
                    skiplock,
                )?;
                g
            }
        };
        t.log(format!("update VM {vmid}: {params_log}"));
        t.sleep(secs).await;
        let warnings = {
            let mut st = t.cluster.lock();
            apply(&t.cluster, &mut st, &t.node, vmid, &upd)?
        };
        for w in &warnings {
            t.log(format!("WARN: {w}"));
        }
        Ok(TaskOk {
            warnings: warnings.len() as u32,
        })
    });
    if let Some(d) = background_delay.filter(|d| *d > 0) {
        let max = cluster.clock.real(d as f64);
        if let Some(status) = worker::wait_stopped(&cluster, &upid, max).await {
            if status == "OK" || status.starts_with("WARNINGS") {
                return Ok(Reply::null());
            }
            return Err(ApiError::internal(format!(
                "failed to update VM {vmid}: {status}"
            )));
        }
    }
    Ok(Reply::data(json!(upid)))
}

/// Applies an update to the VM under the state lock (qemu-server `$updatefn`):
/// writes pending values, then applies pending changes (all if stopped,
/// hot-pluggable ones if running). Returns the warnings.
pub(crate) fn apply(
    cluster: &Arc<Cluster>,
    st: &mut ClusterState,
    node: &str,
    vmid: u32,
    upd: &Update,
) -> Result<Vec<String>, String> {
    let lag = cluster.lag();
    let mut warnings = Vec::new();
    let vm = st
        .vms
        .get(&vmid)
        .filter(|v| v.node == node)
        .cloned()
        .ok_or_else(|| vm_missing(node, vmid))?;
    let mut vm = vm;

    // boot order must name existing devices
    if let Some(boot) = upd.settings.get("boot")
        && let Ok(pairs) = props::split_pairs(boot, Some("legacy"))
        && let Some((_, order)) = pairs.iter().find(|(k, _)| k == "order")
    {
        for dev in props::split_list(order) {
            let exists = vm.conf.contains_key(dev)
                || vm.pending.contains_key(dev)
                || upd.settings.contains_key(dev);
            if !exists || upd.delete.iter().any(|d| d == dev) {
                return Err(format!("invalid bootorder: device '{dev}' does not exist'"));
            }
        }
    }

    for opt in &upd.revert {
        vm.pending.remove(opt);
        vm.pending_delete.remove(opt);
    }

    for opt in &upd.delete {
        let Some(val) = vm.conf.get(opt).or(vm.pending.get(opt)).cloned() else {
            warnings.push(format!(
                "cannot delete '{opt}' - not set in current configuration!"
            ));
            continue;
        };
        let was_pending = vm.pending.remove(opt).is_some();
        if props::is_unused_key(opt) {
            if vm.conf.get("protection").is_some_and(|p| p == "1") {
                return Err(format!(
                    "can't remove unused disk '{val}' - protection mode enabled"
                ));
            }
            if let Ok(d) = Drive::parse(&val) {
                st.free_volume(node, &d.file);
            }
            vm.conf.remove(opt);
        } else if opt == "tags" {
            vm.conf.remove(opt);
        } else if props::is_drive_key(opt) {
            if vm.conf.get("protection").is_some_and(|p| p == "1") {
                return Err(format!(
                    "can't remove drive '{opt}' - protection mode enabled"
                ));
            }
            if was_pending {
                register_unused(&mut vm, &val);
            }
            if vm.conf.contains_key(opt) {
                vm.pending_delete.insert(opt.clone(), upd.force);
            }
        } else {
            vm.pending_delete.insert(opt.clone(), upd.force);
        }
    }

    for (opt, val) in &upd.settings {
        if vm.pending.get(opt) == Some(val) {
            continue;
        }
        let value = if props::is_drive_key(opt) {
            let v = create_drive(st, node, &mut vm, opt, val)?;
            if let Some(old) = vm.pending.get(opt).cloned() {
                register_unused(&mut vm, &old);
            }
            v
        } else if opt == "tags" {
            props::normalize_tags(val)
        } else {
            val.clone()
        };
        vm.pending.insert(opt.clone(), value);
        vm.pending_delete.remove(opt);
    }

    // drop pending values equal to the current ones
    let same: Vec<String> = vm
        .pending
        .iter()
        .filter(|(k, v)| vm.conf.get(*k) == Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    for k in same {
        vm.pending.remove(&k);
    }

    if vm.running() {
        hotplug_pending(st, node, &mut vm);
    } else {
        apply_pending(st, node, &mut vm);
    }
    vm.record_status(lag);
    st.vms.insert(vmid, vm);
    Ok(warnings)
}

/// Allocates new disks (`STORAGE:SIZE`, `STORAGE:cloudinit`) and checks
/// referenced volumes; returns the canonical drive string.
fn create_drive(
    st: &mut ClusterState,
    node: &str,
    vm: &mut Vm,
    opt: &str,
    val: &str,
) -> Result<String, String> {
    let mut d = Drive::parse(val).map_err(|_| format!("{opt}: unable to parse drive options"))?;
    if let Some((storage, gib)) = new_disk_size(&d.file) {
        if d.is_cdrom() {
            return Err(format!("{opt}: cannot allocate a new volume as cdrom"));
        }
        let size = if opt == "efidisk0" {
            528 << 10
        } else if opt == "tpmstate0" {
            4 << 20
        } else {
            (gib * (1u64 << 30) as f64) as u64
        };
        let volid = st.alloc_image(
            &storage,
            node,
            vm.vmid,
            size,
            d.opts.get("format").map(String::as_str),
            None,
        )?;
        d.file = volid;
        d.opts.insert("size".into(), props::format_size(size));
        return Ok(d.print());
    }
    if let Some((storage, vol)) = d.file.split_once(':')
        && vol == "cloudinit"
    {
        let existing = vm
            .conf
            .iter()
            .chain(vm.pending.iter())
            .find(|(k, v)| {
                *k != opt
                    && props::is_drive_key(k)
                    && Drive::parse(v).is_ok_and(|x| x.is_cloudinit())
            })
            .map(|(k, _)| k.clone());
        if let Some(k) = existing {
            return Err(format!(
                "{opt} - cloud-init drive is already attached at '{k}'"
            ));
        }
        let storage = storage.to_string();
        d.file = st.alloc_cloudinit(&storage, node, vm.vmid)?;
        d.opts.insert("media".into(), "cdrom".into());
        return Ok(d.print());
    }
    if d.file != "none" && d.file != "cdrom" && !d.file.starts_with('/') {
        let size = st
            .volume(node, &d.file)
            .map(|v| v.size)
            .ok_or_else(|| format!("volume '{}' does not exist", d.file))?;
        if !d.is_cdrom() && !d.opts.contains_key("size") {
            d.opts.insert("size".into(), props::format_size(size));
        }
    }
    Ok(d.print())
}

/// Keeps a replaced disk as `unusedN` (cdroms and `none` are dropped).
fn register_unused(vm: &mut Vm, old_value: &str) {
    let Ok(d) = Drive::parse(old_value) else {
        return;
    };
    if d.is_cdrom() || d.file == "none" || d.storage().is_none() {
        return;
    }
    let referenced = vm
        .conf
        .values()
        .chain(vm.pending.values())
        .any(|v| Drive::parse(v).is_ok_and(|x| x.file == d.file) && v != old_value);
    if referenced {
        return;
    }
    let key = vm.free_unused_key();
    vm.conf.insert(key, d.file);
}

fn replace_drive(
    st: &mut ClusterState,
    node: &str,
    vm: &mut Vm,
    key: &str,
    new: Option<&str>,
    force: bool,
) {
    let Some(old) = vm.conf.get(key).cloned() else {
        return;
    };
    let Ok(od) = Drive::parse(&old) else { return };
    let same = new
        .and_then(|n| Drive::parse(n).ok())
        .is_some_and(|nd| nd.file == od.file);
    if same || od.is_cdrom() || od.storage().is_none() {
        return;
    }
    if od.is_cloudinit() || force {
        st.free_volume(node, &od.file);
    } else {
        vm.conf.remove(key);
        register_unused(vm, &old);
    }
}

/// Applies all pending changes (stopped VM, `vmconfig_apply_pending`).
pub(crate) fn apply_pending(st: &mut ClusterState, node: &str, vm: &mut Vm) {
    let deletes: Vec<(String, bool)> = vm
        .pending_delete
        .iter()
        .map(|(k, f)| (k.clone(), *f))
        .collect();
    for (k, force) in deletes {
        if props::is_drive_key(&k) {
            replace_drive(st, node, vm, &k, None, force);
        }
        vm.conf.remove(&k);
    }
    vm.pending_delete.clear();
    let pending: Vec<(String, String)> = std::mem::take(&mut vm.pending).into_iter().collect();
    for (k, v) in pending {
        if props::is_drive_key(&k) {
            replace_drive(st, node, vm, &k, Some(&v), false);
        }
        vm.conf.insert(k, v);
    }
}

/// Applies what can change on a running VM (`vmconfig_hotplug_pending`):
/// fast options and cloud-init options always, NICs/disks per `hotplug`
/// (default `network,disk,usb`), cdrom media changes; CPU and memory stay pending.
fn hotplug_pending(st: &mut ClusterState, node: &str, vm: &mut Vm) {
    const FAST: &[&str] = &[
        "description",
        "hookscript",
        "lock",
        "migrate_downtime",
        "migrate_speed",
        "name",
        "onboot",
        "protection",
        "shares",
        "startup",
        "tags",
        "vmstatestorage",
    ];
    let hotplug = vm
        .conf
        .get("hotplug")
        .cloned()
        .unwrap_or_else(|| "network,disk,usb".into());
    let features: BTreeSet<&str> = if hotplug == "1" {
        ["network", "disk", "usb"].into_iter().collect()
    } else if hotplug == "0" {
        BTreeSet::new()
    } else {
        hotplug.split(',').collect()
    };
    let can = |k: &str, value: Option<&str>| -> bool {
        if FAST.contains(&k) {
            return true;
        }
        if props::is_net_key(k) {
            return features.contains("network");
        }
        if props::is_drive_key(k) {
            let cdrom = value
                .and_then(|v| Drive::parse(v).ok())
                .is_some_and(|d| d.is_cdrom());
            return cdrom
                || (features.contains("disk")
                    && !k.starts_with("ide")
                    && k != "efidisk0"
                    && k != "tpmstate0");
        }
        if matches!(k, "memory" | "balloon") {
            return features.contains("memory") && k == "memory" || k == "balloon";
        }
        if matches!(k, "cores" | "sockets" | "vcpus") {
            return features.contains("cpu");
        }
        if is_cloudinit_key(k) {
            // saved at once; the guest sees it when the drive is regenerated
            // (`GET …/cloudinit` shows it as pending until then)
            return true;
        }
        false
    };
    let deletes: Vec<(String, bool)> = vm
        .pending_delete
        .iter()
        .map(|(k, f)| (k.clone(), *f))
        .collect();
    for (k, force) in deletes {
        let cur = vm.conf.get(&k).cloned();
        if can(&k, cur.as_deref()) {
            if props::is_drive_key(&k) {
                replace_drive(st, node, vm, &k, None, force);
            }
            vm.conf.remove(&k);
            vm.pending_delete.remove(&k);
        }
    }
    let pending: Vec<(String, String)> = vm
        .pending
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in pending {
        if can(&k, Some(&v)) {
            if props::is_drive_key(&k) {
                replace_drive(st, node, vm, &k, Some(&v), false);
            }
            vm.conf.insert(k.clone(), v);
            vm.pending.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_disk_syntax() {
        assert_eq!(
            new_disk_size("local-lvm:32"),
            Some(("local-lvm".into(), 32.0))
        );
        assert_eq!(new_disk_size("ceph:0.5"), Some(("ceph".into(), 0.5)));
        assert_eq!(new_disk_size("ceph:vm-100-disk-0"), None);
        assert_eq!(new_disk_size("ceph:cloudinit"), None);
        assert_eq!(new_disk_size("/dev/sdb:1"), None);
    }

    #[test]
    fn options() {
        assert!(option_exists("net31") && option_exists("ipconfig0") && option_exists("tags"));
        assert!(!option_exists("net32") && !option_exists("bogus"));
    }
}
