//! What the spec asks of the VM ([`desired`]).

use std::collections::BTreeMap;

use pve_client::options::{Arch, Boot, DiskSlot, HostPci, MacAddr, NetModel, Startup, Tag, Tags};

use super::cpu::{DesiredCpu, desired_cpu};
use crate::api::machine::{
    BootstrapMediaSpec, CdromBus, CpuSpec, DiskFormat, NicModel, PciDeviceSpec, ProxmoxMachineSpec,
};
use crate::machine::vm::marker::Marker;

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
    /// CPU model and flags; `None` keeps the template's.
    pub cpu: Option<DesiredCpu>,
    /// Storage of the bootstrap ISO (machine ▸ instance); `None`: chosen
    /// by [`crate::machine::vm::media::iso_storage`].
    pub media_storage: Option<String>,
    /// Bus of its CD-ROM (machine ▸ instance); `None`: by architecture.
    pub cdrom_bus: Option<CdromBus>,
    /// The instance's `arch`; the template's own `arch` wins
    /// ([`crate::machine::vm::arch`]).
    pub arch: Option<Arch>,
    /// `hostpci0`.. in order: the PCI devices by resource mapping, the
    /// mapping ids translated by the instance's `pciMappings`
    /// ([`crate::machine::plan::pci::mapping_id`]).
    pub hostpci: Vec<HostPci>,
}

/// What the machine's instance (`spec.settings.instances[]`) contributes.
#[derive(Clone, Copy, Debug, Default)]
pub struct InstanceDefaults<'a> {
    /// `network.bridge`: the default bridge of `net0`.
    pub bridge: Option<&'a str>,
    /// `cpu`: the default CPU model and flags.
    pub cpu: Option<&'a CpuSpec>,
    /// `bootstrapMedia`: the default ISO storage and CD-ROM bus.
    pub media: Option<&'a BootstrapMediaSpec>,
    /// `arch`: the architecture of the instance's VMs.
    pub arch: Option<Arch>,
    /// `pciMappings`: mapping renames in this instance.
    pub pci_mappings: Option<&'a BTreeMap<String, String>>,
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

/// What the spec asks for, with the defaults of the machine's instance.
///
/// # Errors
/// [`VmConfigError`] for values that do not parse (device names, MACs, tags,
/// `startup`, `bootOrder`, disk slots) — validation refuses them first.
pub fn desired(
    spec: &ProxmoxMachineSpec,
    machine_name: &str,
    marker: &Marker,
    instance: InstanceDefaults<'_>,
) -> Result<Desired, VmConfigError> {
    let instance_bridge = instance.bridge;
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
        cpu: desired_cpu(spec.cpu.as_ref(), instance.cpu)?,
        hostpci: hostpci(&spec.pci_devices, instance.pci_mappings),
        media_storage: [spec.bootstrap_media.as_ref(), instance.media]
            .into_iter()
            .flatten()
            .find_map(|m| m.storage.clone()),
        cdrom_bus: [spec.bootstrap_media.as_ref(), instance.media]
            .into_iter()
            .flatten()
            .find_map(|m| m.cdrom_bus),
        arch: instance.arch,
    })
}

/// The `hostpci[n]` values of `devices`: `mapping=<id>[,mdev=<type>]
/// [,pcie=1][,rombar=0][,x-vga=1]`, the id translated by `renames`.
fn hostpci(devices: &[PciDeviceSpec], renames: Option<&BTreeMap<String, String>>) -> Vec<HostPci> {
    let none = BTreeMap::new();
    let renames = renames.unwrap_or(&none);
    devices
        .iter()
        .map(|d| HostPci {
            pcie: d.pcie,
            rombar: d.rombar,
            x_vga: d.primary_gpu,
            mdev: d.mdev.clone(),
            ..HostPci::mapped(crate::machine::plan::pci::mapping_id(&d.mapping, renames))
        })
        .collect()
}
