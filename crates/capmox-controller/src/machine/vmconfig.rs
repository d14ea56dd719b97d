//! The one config write that turns a fresh clone into the machine's VM.
//!
//! [`desired`] computes what the spec asks for; [`update`] compares it with
//! the VM's current config (`GET …/config`) and returns the
//! [`ConfigUpdate`] that changes only what differs — so a re-run after the
//! write changes nothing (level-triggered, idempotent). Everything goes in
//! one `POST …/config` with the `digest` that was read, so a concurrent edit
//! fails with a retryable conflict instead of being overwritten (field case
//! B30).
//!
//! Rules:
//! - CPU (`sockets`, `cores`) and `memory` (**MiB**) when the spec sets them.
//! - NICs `netN`: model, bridge (spec ▸ for `net0` the instance's bridge ▸
//!   the template's), VLAN `tag`, `mtu`, `firewall`, `link_down`, MAC (spec ▸
//!   the MAC the VM has: **an existing MAC is never changed**). Fields the
//!   spec leaves out keep the template's value. `net0` always exists (the
//!   default device). NICs the spec does not name are left alone.
//! - `tags`: the VM's tags without other machines' ownership tags, plus the
//!   spec's tags and this machine's marker tag (compared as sets,
//!   case-insensitively, SEMANTICS.md §15).
//! - `description` carries the marker line; `name` is the machine name.
//! - `onboot`, `startup`, `boot` order when the spec sets them; `agent: 1`
//!   unless `checks.skipQemuGuestAgent`.
//! - Additional volumes that do not exist yet: `STORAGE:SIZE_GiB` with
//!   `format`, `discard=on`, `ssd=1`, `iothread=1` as asked, on the spec's
//!   storage ▸ the boot disk's storage. Existing ones are grown by
//!   [`super::disks`], never recreated.
//! - The bootstrap ISO as a CD-ROM in the first free slot of `ide0`..`ide3`,
//!   `sata0`..`sata5` (reusing an empty CD-ROM drive).
//! - Never touched: `efidisk0`, `tpmstate0`, the cloud-init drive, `smbios1`.

use pve_client::options::{
    Boot, Disk, DiskBus, DiskSlot, MacAddr, NetDevice, NetModel, Startup, Tag, Tags,
};

use super::marker::{Marker, is_marker_tag};
use crate::api::machine::{DiskFormat, NicModel, ProxmoxMachineSpec};
use crate::pve::{ConfigUpdate, VmConfig};

/// One NIC as the spec wants it; `None` fields keep the VM's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredNic {
    /// `netN` index.
    pub index: u8,
    /// Model; `None` keeps the VM's (virtio for a new NIC).
    pub model: Option<NetModel>,
    /// Bridge.
    pub bridge: Option<String>,
    /// VLAN tag.
    pub vlan: Option<u16>,
    /// MTU (1 = inherit the bridge's).
    pub mtu: Option<u16>,
    /// Fixed MAC.
    pub mac: Option<MacAddr>,
    /// Firewall.
    pub firewall: Option<bool>,
    /// Link down.
    pub link_down: Option<bool>,
}

/// An additional data disk to create.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredVolume {
    /// Slot.
    pub slot: DiskSlot,
    /// Storage; `None` = the boot disk's storage.
    pub storage: Option<String>,
    /// Size, **GiB**.
    pub size_gib: u64,
    /// Format.
    pub format: Option<DiskFormat>,
    /// `discard=on`.
    pub discard: bool,
    /// `ssd=1`.
    pub ssd: bool,
    /// `iothread=1`.
    pub iothread: bool,
}

/// The VM as the spec wants it.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// `name` (the machine name).
    pub name: String,
    /// `description` with the marker line.
    pub description: String,
    /// Sockets.
    pub sockets: Option<u32>,
    /// Cores per socket.
    pub cores: Option<u32>,
    /// Memory, **MiB**.
    pub memory_mib: Option<u64>,
    /// NICs.
    pub nics: Vec<DesiredNic>,
    /// Tags the VM must carry (spec tags and the marker).
    pub tags: Tags,
    /// `onboot`.
    pub onboot: Option<bool>,
    /// `startup`.
    pub startup: Option<Startup>,
    /// `boot`.
    pub boot: Option<Boot>,
    /// Data disks.
    pub volumes: Vec<DesiredVolume>,
    /// Whether `agent: 1` is required.
    pub agent: bool,
    /// Slot of the boot disk (`disks.bootVolume.disk`), if the spec names one.
    pub boot_disk: Option<DiskSlot>,
}

/// Why the spec cannot be turned into a config.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct VmConfigError(pub String);

fn model(m: NicModel) -> NetModel {
    match m {
        NicModel::Virtio => NetModel::Virtio,
        NicModel::E1000 => NetModel::E1000,
        NicModel::E1000e => NetModel::E1000e,
        NicModel::Rtl8139 => NetModel::Rtl8139,
        NicModel::Vmxnet3 => NetModel::Vmxnet3,
    }
}

fn net_index(name: &str) -> Result<u8, VmConfigError> {
    name.strip_prefix("net")
        .and_then(|n| n.parse::<u8>().ok())
        .filter(|n| *n <= 31)
        .ok_or_else(|| VmConfigError(format!("{name} is not a network device name net0..net31")))
}

/// What the spec asks for. `instance_bridge` is the instance's
/// `network.bridge` (the default bridge of `net0`).
///
/// # Errors
/// [`VmConfigError`] for values that do not parse (device names, MACs, tags,
/// `startup`, `bootOrder`, disk slots) — validation refuses them first.
pub fn desired(
    spec: &ProxmoxMachineSpec,
    machine_name: &str,
    marker: &Marker,
    instance_bridge: Option<&str>,
) -> Result<Desired, VmConfigError> {
    let err = |e: pve_client::ParseError| VmConfigError(e.to_string());
    let devices = spec
        .network
        .as_ref()
        .map(|n| n.network_devices.clone())
        .unwrap_or_default();
    let mut nics = Vec::new();
    if !devices.iter().any(|d| d.name == "net0") {
        nics.push(DesiredNic {
            index: 0,
            model: None,
            bridge: instance_bridge.map(str::to_string),
            vlan: None,
            mtu: None,
            mac: None,
            firewall: None,
            link_down: None,
        });
    }
    for d in &devices {
        let index = net_index(&d.name)?;
        let bridge = d.bridge.clone().or_else(|| {
            (index == 0)
                .then(|| instance_bridge.map(str::to_string))
                .flatten()
        });
        let mtu = d
            .mtu
            .map(|m| {
                u16::try_from(m)
                    .map_err(|_| VmConfigError(format!("{}: mtu {m} is out of range", d.name)))
            })
            .transpose()?;
        nics.push(DesiredNic {
            index,
            model: d.model.map(model),
            bridge,
            vlan: d.vlan,
            mtu,
            mac: d
                .mac_address
                .as_deref()
                .map(MacAddr::parse)
                .transpose()
                .map_err(err)?,
            firewall: d.firewall,
            link_down: d.link_down,
        });
    }
    nics.sort_by_key(|n| n.index);

    let mut tags = Tags::new();
    for t in &spec.tags {
        tags.insert(Tag::new(t.clone()).map_err(err)?);
    }
    tags.insert(marker.tag());

    let mut volumes = Vec::new();
    let mut boot_disk = None;
    if let Some(disks) = &spec.disks {
        if let Some(b) = &disks.boot_volume {
            boot_disk = Some(DiskSlot::parse(&b.disk).map_err(err)?);
        }
        for v in &disks.additional_volumes {
            volumes.push(DesiredVolume {
                slot: DiskSlot::parse(&v.disk).map_err(err)?,
                storage: v.storage.clone(),
                size_gib: u64::from(v.size_gb),
                format: v.format,
                discard: v.discard.unwrap_or(false),
                ssd: v.ssd.unwrap_or(false),
                iothread: v.iothread.unwrap_or(false),
            });
        }
    }

    Ok(Desired {
        name: machine_name.to_string(),
        description: marker.description(spec.description.as_deref()),
        sockets: spec.num_sockets,
        cores: spec.num_cores,
        memory_mib: spec.memory_mib.map(u64::from),
        nics,
        tags,
        onboot: spec.on_boot,
        startup: spec
            .startup
            .as_deref()
            .map(Startup::parse)
            .transpose()
            .map_err(err)?,
        boot: spec
            .boot_order
            .as_deref()
            .map(Boot::parse)
            .transpose()
            .map_err(err)?,
        volumes,
        agent: !spec
            .checks
            .and_then(|c| c.skip_qemu_guest_agent)
            .unwrap_or(false),
        boot_disk,
    })
}

/// The boot disk's slot: the spec's `bootVolume.disk`, else the first of
/// `scsi0`, `virtio0`, `sata0`, `ide0` that is a disk.
pub fn boot_slot(desired: &Desired, observed: &VmConfig) -> Option<DiskSlot> {
    desired.boot_disk.or_else(|| {
        ["scsi0", "virtio0", "sata0", "ide0"]
            .iter()
            .filter_map(|s| DiskSlot::parse(s).ok())
            .find(|s| observed.disks.get(s).is_some_and(|d| !d.is_cdrom()))
    })
}

/// The slot for the bootstrap ISO `volid`: where it is attached already,
/// else the first of `ide0`..`ide3`, `sata0`..`sata5` that is free or an
/// empty CD-ROM drive.
///
/// # Errors
/// [`VmConfigError`] when every slot is taken.
pub fn iso_slot(observed: &VmConfig, volid: &str) -> Result<DiskSlot, VmConfigError> {
    if let Some((slot, _)) = observed.disks.iter().find(|(_, d)| d.file == volid) {
        return Ok(*slot);
    }
    let candidates = (0..=DiskBus::Ide.max_index())
        .filter_map(|i| DiskSlot::new(DiskBus::Ide, i).ok())
        .chain(
            (0..=DiskBus::Sata.max_index()).filter_map(|i| DiskSlot::new(DiskBus::Sata, i).ok()),
        );
    for slot in candidates {
        match observed.disks.get(&slot) {
            None => return Ok(slot),
            Some(d)
                if d.is_cdrom()
                    && !d.is_cloudinit()
                    && matches!(d.file.as_str(), "none" | "cdrom") =>
            {
                return Ok(slot);
            }
            Some(_) => {}
        }
    }
    Err(VmConfigError(
        "no free IDE or SATA slot for the bootstrap CD-ROM (ide0-ide3, sata0-sata5 are taken)"
            .into(),
    ))
}

/// A stable, locally administered unicast MAC for a NIC the spec adds
/// without one (`02:…`, from the machine UID and the device index, FNV-1a).
/// Choosing it here, not letting Proxmox generate it, means the
/// cloud-init network config (written before the config write) can match
/// the device by MAC.
pub fn generated_mac(uid: &str, index: u8) -> MacAddr {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in uid.bytes().chain(std::iter::once(index)) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let b = h.to_be_bytes();
    MacAddr([0x02, b[0], b[1], b[2], b[3], b[4]])
}

/// The NIC `want` as it will be written, given what the VM has now.
///
/// # Errors
/// [`VmConfigError`] when the NIC would have no bridge.
pub fn nic_device(
    want: &DesiredNic,
    have: Option<&NetDevice>,
    marker: &Marker,
) -> Result<NetDevice, VmConfigError> {
    let mut dev = have
        .cloned()
        .unwrap_or_else(|| NetDevice::new(NetModel::Virtio));
    if dev.macaddr.is_none() {
        dev.macaddr = Some(generated_mac(marker.uid(), want.index));
    }
    if let Some(m) = want.model {
        dev.model = m;
    }
    if let Some(mac) = want.mac {
        dev.macaddr = Some(mac);
    }
    if let Some(b) = &want.bridge {
        dev.bridge = Some(b.clone());
    }
    if let Some(v) = want.vlan {
        dev.tag = Some(v);
    }
    if let Some(m) = want.mtu {
        dev.mtu = Some(m);
    }
    if let Some(f) = want.firewall {
        dev.firewall = Some(f);
    }
    if let Some(l) = want.link_down {
        dev.link_down = Some(l);
    }
    if dev.bridge.is_none() {
        return Err(VmConfigError(format!(
            "net{} has no bridge: set networkDevices[].bridge (or the instance's network.bridge)",
            want.index
        )));
    }
    Ok(dev)
}

/// The tags the VM should carry: its own, without other machines' marker
/// tags, plus `desired.tags`.
pub fn merged_tags(desired: &Desired, observed: &Tags, marker: &Marker) -> Tags {
    let mine = marker.tag();
    let mut out: Tags = observed
        .iter()
        .filter(|t| !is_marker_tag(t.as_str()) || t.eq_ignore_case(mine.as_str()))
        .cloned()
        .collect();
    for t in desired.tags.iter() {
        out.insert(t.clone());
    }
    out
}

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
        if DiskSlot::parse(k).is_ok()
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::Value;

    use super::*;
    use crate::api::machine::{
        AdditionalVolume, Checks, DiskSize as SpecDisk, Disks, NetworkDevice, NetworkSpec,
    };

    const UID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f";

    fn marker() -> Marker {
        Marker::new("wl1", "m1", UID)
    }

    /// A fresh clone of the built-in template: as Proxmox returns it.
    fn clone_config() -> VmConfig {
        let map: BTreeMap<String, Value> = [
            ("name", "m1"),
            (
                "description",
                "capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
            ),
            ("memory", "2048"),
            ("cores", "2"),
            ("sockets", "1"),
            ("agent", "1"),
            ("bios", "ovmf"),
            ("efidisk0", "ceph:vm-131-disk-1,efitype=4m,size=528K"),
            ("scsi0", "ceph:vm-131-disk-0,size=20G"),
            ("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0"),
            ("tags", "capmox;ubuntu-24.04"),
            ("smbios1", "uuid=0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"),
            ("digest", "0123456789abcdef0123456789abcdef01234567"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
        .collect();
        VmConfig::from_map(map).unwrap()
    }

    /// Applies an update to a config the way Proxmox would (test oracle:
    /// set keys verbatim, drop deletions).
    fn apply(c: &VmConfig, u: &ConfigUpdate) -> VmConfig {
        let mut map = c.raw.clone();
        for (k, v) in u.changes() {
            let v = match (k.as_str(), v.as_str()) {
                // Proxmox allocates the volume and records its size.
                ("scsi1", "ceph:50,discard=on,iothread=1,ssd=1") => {
                    "ceph:vm-131-disk-2,discard=on,iothread=1,size=50G,ssd=1".to_string()
                }
                _ => v.clone(),
            };
            map.insert(k.clone(), Value::String(v));
        }
        for k in u.deletions() {
            map.remove(k);
        }
        map.insert("digest".into(), Value::String("fedcba".into()));
        VmConfig::from_map(map).unwrap()
    }

    fn full_spec() -> ProxmoxMachineSpec {
        ProxmoxMachineSpec {
            num_sockets: Some(2),
            num_cores: Some(4),
            memory_mib: Some(8192),
            tags: vec!["k8s-wl1".into()],
            on_boot: Some(true),
            startup: Some("order=2,up=30".into()),
            boot_order: Some("order=scsi0;net0".into()),
            network: Some(NetworkSpec {
                network_devices: vec![
                    NetworkDevice {
                        name: "net0".into(),
                        vlan: Some(112),
                        mtu: Some(1),
                        ..NetworkDevice::default()
                    },
                    NetworkDevice {
                        name: "net1".into(),
                        bridge: Some("vmbr1".into()),
                        ..NetworkDevice::default()
                    },
                ],
            }),
            disks: Some(Disks {
                boot_volume: Some(SpecDisk {
                    disk: "scsi0".into(),
                    size_gb: 40,
                }),
                additional_volumes: vec![AdditionalVolume {
                    disk: "scsi1".into(),
                    size_gb: 50,
                    discard: Some(true),
                    ssd: Some(true),
                    iothread: Some(true),
                    ..AdditionalVolume::default()
                }],
            }),
            ..ProxmoxMachineSpec::default()
        }
    }

    #[test]
    fn one_write_with_everything_then_nothing() {
        let c = clone_config();
        let d = desired(&full_spec(), "m1", &marker(), Some("vmbr9")).unwrap();
        let iso = "cephfs:iso/capmox-131-3f2a9c1e.iso";
        let slot = iso_slot(&c, iso).unwrap();
        assert_eq!(slot.to_string(), "ide0");
        let u = update(&d, &c, &marker(), Some((slot, iso))).unwrap();
        let got: BTreeMap<&str, &str> = u
            .changes()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let want: BTreeMap<&str, &str> = [
            ("sockets", "2"),
            ("cores", "4"),
            ("memory", "8192"),
            // The existing MAC is kept; spec bridge absent → instance bridge for net0.
            (
                "net0",
                "virtio=BC:24:11:AA:BB:CC,bridge=vmbr9,mtu=1,tag=112",
            ),
            // A NIC the template lacks gets a stable generated MAC (FNV-1a
            // of the UID and index 1, computed by hand: 02:16:20:6C:85:85).
            ("net1", "virtio=02:16:20:6C:85:85,bridge=vmbr1"),
            (
                "tags",
                "capmox;ubuntu-24.04;k8s-wl1;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
            ),
            ("onboot", "1"),
            ("startup", "order=2,up=30"),
            ("boot", "order=scsi0;net0"),
            ("scsi1", "ceph:50,discard=on,iothread=1,ssd=1"),
            ("ide0", "cephfs:iso/capmox-131-3f2a9c1e.iso,media=cdrom"),
            ("digest", "0123456789abcdef0123456789abcdef01234567"),
        ]
        .into_iter()
        .filter(|(k, _)| *k != "digest")
        .collect();
        assert_eq!(got, want);
        assert!(u.deletions().is_empty());
        // EFI disk, smbios1, scsi0 untouched.
        for k in [
            "efidisk0",
            "smbios1",
            "scsi0",
            "name",
            "description",
            "agent",
        ] {
            assert!(!u.changes().contains_key(k), "{k} must not be written");
        }
        // Re-running against the result changes nothing — also against the
        // memo's own view of the result.
        let memo = apply_update(&c, &u);
        let again = update(
            &d,
            &memo,
            &marker(),
            Some((iso_slot(&memo, iso).unwrap(), iso)),
        )
        .unwrap();
        assert!(again.is_empty(), "{:?}", again.changes());
        assert_eq!(
            memo.disks[&DiskSlot::parse("scsi1").unwrap()].size,
            Some(pve_client::options::DiskSize::from_gib(50))
        );
        assert_eq!(
            nic_macs(&d, &memo, &marker())
                .unwrap()
                .iter()
                .map(|(i, m)| (*i, m.to_string()))
                .collect::<Vec<_>>(),
            vec![
                (0, "BC:24:11:AA:BB:CC".to_string()),
                (1, "02:16:20:6C:85:85".to_string())
            ]
        );
        let after = apply(&c, &u);
        let again = update(
            &d,
            &after,
            &marker(),
            Some((iso_slot(&after, iso).unwrap(), iso)),
        )
        .unwrap();
        assert!(again.is_empty(), "{:?}", again.changes());
    }

    #[test]
    fn spec_mac_and_foreign_marker_tags() {
        let mut c = clone_config();
        let mut map = c.raw.clone();
        map.insert(
            "tags".into(),
            Value::String("capmox;capmox-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee".into()),
        );
        c = VmConfig::from_map(map).unwrap();
        let spec = ProxmoxMachineSpec {
            network: Some(NetworkSpec {
                network_devices: vec![NetworkDevice {
                    name: "net0".into(),
                    mac_address: Some("02:00:00:00:00:01".into()),
                    ..NetworkDevice::default()
                }],
            }),
            ..ProxmoxMachineSpec::default()
        };
        let d = desired(&spec, "m1", &marker(), None).unwrap();
        let u = update(&d, &c, &marker(), None).unwrap();
        assert_eq!(u.changes()["net0"], "virtio=02:00:00:00:00:01,bridge=vmbr0");
        // The other machine's marker (inherited from the template) is dropped.
        assert_eq!(
            u.changes()["tags"],
            "capmox;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        );
    }

    #[test]
    fn agent_and_description_are_ensured() {
        let mut map = clone_config().raw;
        map.remove("agent");
        map.insert("description".into(), Value::String("hand-made".into()));
        let c = VmConfig::from_map(map).unwrap();
        let mut spec = ProxmoxMachineSpec::default();
        let d = desired(&spec, "m1", &marker(), None).unwrap();
        let u = update(&d, &c, &marker(), None).unwrap();
        assert_eq!(u.changes()["agent"], "1");
        assert_eq!(
            u.changes()["description"],
            "capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        );
        spec.checks = Some(Checks {
            skip_qemu_guest_agent: Some(true),
            skip_cloud_init_status: None,
        });
        let d = desired(&spec, "m1", &marker(), None).unwrap();
        assert!(
            !update(&d, &c, &marker(), None)
                .unwrap()
                .changes()
                .contains_key("agent")
        );
    }

    #[test]
    fn nic_without_bridge_is_refused() {
        let spec = ProxmoxMachineSpec {
            network: Some(NetworkSpec {
                network_devices: vec![NetworkDevice {
                    name: "net2".into(),
                    ..NetworkDevice::default()
                }],
            }),
            ..ProxmoxMachineSpec::default()
        };
        let d = desired(&spec, "m1", &marker(), None).unwrap();
        assert_eq!(
            update(&d, &clone_config(), &marker(), None)
                .unwrap_err()
                .to_string(),
            "net2 has no bridge: set networkDevices[].bridge (or the instance's network.bridge)"
        );
    }

    #[test]
    fn iso_slots_and_eject() {
        let mut map = clone_config().raw;
        map.insert(
            "ide0".into(),
            Value::String("local:iso/other.iso,media=cdrom".into()),
        );
        map.insert("ide1".into(), Value::String("none,media=cdrom".into()));
        map.insert(
            "ide2".into(),
            Value::String("ceph:vm-131-cloudinit,media=cdrom".into()),
        );
        let c = VmConfig::from_map(map.clone()).unwrap();
        // ide0 holds another ISO, ide1 is an empty drive: reuse it.
        assert_eq!(
            iso_slot(&c, "cephfs:iso/x.iso").unwrap().to_string(),
            "ide1"
        );
        map.insert(
            "ide1".into(),
            Value::String("cephfs:iso/x.iso,media=cdrom".into()),
        );
        let c = VmConfig::from_map(map).unwrap();
        assert_eq!(
            iso_slot(&c, "cephfs:iso/x.iso").unwrap().to_string(),
            "ide1"
        );
        let e = eject(&c, "cephfs:iso/x.iso").unwrap();
        assert_eq!(e.changes()["ide1"], "none,media=cdrom");
        assert!(eject(&c, "cephfs:iso/y.iso").is_none());
        assert_eq!(
            boot_slot(
                &desired(&ProxmoxMachineSpec::default(), "m1", &marker(), None).unwrap(),
                &c
            )
            .unwrap()
            .to_string(),
            "scsi0"
        );
    }
}
