//! NICs, MACs, tags and slots: how the desired VM meets the observed config.

use pve_client::options::{DiskBus, DiskSlot, MacAddr, NetDevice, NetModel, Tags};

use super::desired::{Desired, DesiredNic, VmConfigError};
use crate::machine::vm::marker::{Marker, is_marker_tag};
use crate::pve::VmConfig;

/// `scsi0`, `virtio0`, `sata0`, `ide0` that is a disk.
/// The boot disk's slot: the spec's `bootVolume.disk`, else the first of
pub fn boot_slot(desired: &Desired, observed: &VmConfig) -> Option<DiskSlot> {
    desired.boot_disk.or_else(|| {
        ["scsi0", "virtio0", "sata0", "ide0"]
            .iter()
            .filter_map(|s| DiskSlot::parse(s).ok())
            .find(|s| observed.disks.get(s).is_some_and(|d| !d.is_cdrom()))
    })
}

/// The slot for the bootstrap ISO `volid`: where it is attached already,
/// else the first slot on `buses` (in that order; see
/// [`crate::machine::vm::media::cdrom_buses`]) that is free or an empty
/// CD-ROM drive.
///
/// # Errors
/// [`VmConfigError`] when every slot of those buses is taken.
pub fn iso_slot(
    observed: &VmConfig,
    volid: &str,
    buses: &[DiskBus],
) -> Result<DiskSlot, VmConfigError> {
    if let Some((slot, _)) = observed.disks.iter().find(|(_, d)| d.file == volid) {
        return Ok(*slot);
    }
    let candidates = buses
        .iter()
        .flat_map(|b| (0..=b.max_index()).filter_map(|i| DiskSlot::new(*b, i).ok()));
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
    let names: Vec<&str> = buses.iter().map(|b| b.as_str()).collect();
    Err(VmConfigError(format!(
        "no free slot on the {} bus for the bootstrap CD-ROM",
        names.join("/")
    )))
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
