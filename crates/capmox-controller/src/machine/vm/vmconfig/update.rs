//! The one config write: what differs, and the config after it.

use pve_client::options::{Disk, DiskSlot, MacAddr};

use super::desired::{Desired, VmConfigError};
use super::nics::{boot_slot, generated_mac, merged_tags, nic_device};
use crate::machine::vm::marker::Marker;
use crate::pve::{ConfigUpdate, VmConfig};

/// The config change that brings `observed` to `desired` (plus the ISO
/// CD-ROM when `iso` is given). Empty when nothing differs. Carries the
/// observed `digest`.
///
/// # Errors
/// [`VmConfigError`] when a NIC would have no bridge, a new volume has no
/// storage, or a value fails the client's validation.
pub fn update(
    desired: &Desired,
    observed: &VmConfig,
    marker: &Marker,
    iso: Option<(DiskSlot, &str)>,
) -> Result<ConfigUpdate, VmConfigError> {
    let mut u = ConfigUpdate::new();
    if observed.name.as_deref() != Some(desired.name.as_str()) {
        u = u.name(&desired.name);
    }
    let have_desc = observed
        .description
        .as_deref()
        .map(str::trim_end)
        .unwrap_or("");
    if have_desc != desired.description.trim_end() {
        u = u.description(&desired.description);
    }
    if let Some(s) = desired.sockets
        && observed.sockets != Some(s)
    {
        u = u.sockets(s);
    }
    if let Some(c) = desired.cores
        && observed.cores != Some(c)
    {
        u = u.cores(c);
    }
    if let Some(want) = &desired.cpu
        && let Some(cpu) = super::cpu::cpu_value(want, observed.cpu.as_ref())
    {
        u = u.cpu(&cpu);
    }
    for (i, dev) in desired.hostpci.iter().enumerate() {
        let index = u8::try_from(i).unwrap_or(u8::MAX);
        if observed.hostpcis.get(&index) != Some(dev) {
            u = u.hostpci(index, dev);
        }
    }
    if let Some(m) = desired.memory_mib
        && observed.memory_mib != Some(m)
    {
        u = u.memory_mib(m);
    }
    for nic in &desired.nics {
        let have = observed.nets.get(&nic.index);
        let want = nic_device(nic, have, marker)?;
        if have != Some(&want) {
            u = u.net(nic.index, &want);
        }
    }
    let tags = merged_tags(desired, &observed.tags, marker);
    if tags != observed.tags {
        u = u.tags(&tags);
    }
    if let Some(on) = desired.onboot
        && observed.onboot.unwrap_or(false) != on
    {
        u = u.onboot(on);
    }
    if let Some(s) = &desired.startup
        && observed.startup.as_ref() != Some(s)
    {
        u = u.startup(s);
    }
    if let Some(b) = &desired.boot
        && observed.boot.as_ref().map(|o| &o.order) != Some(&b.order)
    {
        u = u.boot(b);
    }
    if desired.agent && !observed.agent.as_ref().is_some_and(|a| a.enabled) {
        u = u.agent(&pve_client::options::AgentOption::enabled(true));
    }
    let boot_storage = boot_slot(desired, observed)
        .and_then(|s| observed.disks.get(&s))
        .and_then(|d| d.storage().map(str::to_string));
    for v in &desired.volumes {
        if observed.disks.contains_key(&v.slot) {
            continue;
        }
        let storage = v
            .storage
            .clone()
            .or_else(|| boot_storage.clone())
            .ok_or_else(|| {
                VmConfigError(format!(
                    "additional volume {} has no storage and the boot disk's storage is unknown",
                    v.slot
                ))
            })?;
        let mut d = Disk::new_volume(&storage, v.size_gib);
        if let Some(f) = v.format {
            d.options.insert("format".into(), f.as_str().into());
        }
        if v.discard {
            d.options.insert("discard".into(), "on".into());
        }
        if v.ssd {
            d.options.insert("ssd".into(), "1".into());
        }
        if v.iothread {
            d.options.insert("iothread".into(), "1".into());
        }
        u = u.disk(v.slot, &d);
    }
    let arch = crate::machine::vm::arch::effective(observed.arch, desired.arch);
    let fw = crate::machine::vm::arch::firmware(arch, observed, boot_slot(desired, observed))
        .map_err(VmConfigError)?;
    if let Some(b) = fw.bios {
        u = u.bios(b);
    }
    if let Some(m) = &fw.machine {
        u = u.machine(m);
    }
    if let Some(d) = &fw.efidisk {
        u = u.efidisk(d);
    }
    if let Some((slot, volid)) = iso {
        let attached = observed
            .disks
            .get(&slot)
            .is_some_and(|d| d.file == volid && d.is_cdrom());
        if !attached {
            u = u.disk(slot, &Disk::cdrom(volid));
        }
    }
    if let Some(d) = &observed.digest
        && !u.is_empty()
    {
        u = u.digest(d.clone());
    }
    Ok(u)
}

/// The MAC of every desired NIC once the config is written.
///
/// # Errors
/// As [`nic_device`].
pub fn nic_macs(
    desired: &Desired,
    observed: &VmConfig,
    marker: &Marker,
) -> Result<Vec<(u8, MacAddr)>, VmConfigError> {
    desired
        .nics
        .iter()
        .map(|n| {
            let dev = nic_device(n, observed.nets.get(&n.index), marker)?;
            Ok((
                n.index,
                dev.macaddr
                    .unwrap_or_else(|| generated_mac(marker.uid(), n.index)),
            ))
        })
        .collect()
}

/// The config as it is after `update` succeeded (for the machine's memo, so
/// the next step needs no second read): keys set verbatim, deletions
/// dropped, new volumes (`STORAGE:SIZE`) recorded with their size, the
/// digest forgotten.
pub fn apply_update(config: &VmConfig, update: &ConfigUpdate) -> VmConfig {
    let mut map = config.raw.clone();
    for (k, v) in update.changes() {
        let mut value = v.clone();
        if (DiskSlot::parse(k).is_ok() || k == "efidisk0")
            && let Some((storage, rest)) = v.split_once(':')
        {
            let (size, opts) = rest.split_once(',').map_or((rest, ""), |(a, b)| (a, b));
            if !size.is_empty() && size.bytes().all(|b| b.is_ascii_digit()) {
                value = format!("{storage}:new-{k},size={size}G");
                if !opts.is_empty() {
                    value.push(',');
                    value.push_str(opts);
                }
            }
        }
        map.insert(k.clone(), serde_json::Value::String(value));
    }
    for k in update.deletions() {
        map.remove(k);
    }
    map.remove("digest");
    VmConfig::from_map(map.clone()).unwrap_or_else(|_| VmConfig {
        raw: map,
        ..config.clone()
    })
}

/// The change that ejects the bootstrap ISO (`<slot>: none,media=cdrom`;
/// an eject applies to a running VM at once, a removal would stay pending
/// until a reboot). `None` when the ISO is not attached.
pub fn eject(observed: &VmConfig, volid: &str) -> Option<ConfigUpdate> {
    let (slot, _) = observed.disks.iter().find(|(_, d)| d.file == volid)?;
    Some(ConfigUpdate::new().disk(*slot, &Disk::empty_cdrom()))
}
