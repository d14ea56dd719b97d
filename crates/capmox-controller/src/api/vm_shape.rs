//! The VM-shape parts of a machine and instance spec: bootstrap media,
//! CD-ROM bus, architecture and CPU (docs/vm-shapes.md). Re-exported from
//! [`super::machine`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where the bootstrap ISO goes (docs/vm-shapes.md, docs/field-cases.md
/// B39).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapMediaSpec {
    /// Proxmox storage the ISO is uploaded to: it must hold content `iso`
    /// and be available on the VM's node. Absent: the first available
    /// `iso` storage of that node, shared ones first, then by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 64), pattern(r"^[a-z][a-z0-9._-]*[a-z0-9]$"))]
    pub storage: Option<String>,
    /// Bus of the CD-ROM drive: `ide`, `sata` or `scsi`. Absent: `ide`
    /// (then `sata` when IDE is full) on x86_64, `scsi` (then `sata`) on
    /// aarch64, which has no IDE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdrom_bus: Option<CdromBus>,
}

/// A CD-ROM bus.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum CdromBus {
    /// IDE (`ide0`..`ide3`; not on aarch64).
    Ide,
    /// SATA (`sata0`..`sata5`).
    Sata,
    /// SCSI (`scsi0`..`scsi30`).
    Scsi,
}

impl CdromBus {
    /// `ide`, `sata` or `scsi`.
    pub fn as_str(self) -> &'static str {
        match self {
            CdromBus::Ide => "ide",
            CdromBus::Sata => "sata",
            CdromBus::Scsi => "scsi",
        }
    }

    /// The Proxmox bus.
    pub fn disk_bus(self) -> pve_client::options::DiskBus {
        use pve_client::options::DiskBus;
        match self {
            CdromBus::Ide => DiskBus::Ide,
            CdromBus::Sata => DiskBus::Sata,
            CdromBus::Scsi => DiskBus::Scsi,
        }
    }
}

/// A VM's processor architecture, in Proxmox's words (`arch`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum VmArch {
    /// 64-bit x86 (Kubernetes `amd64`).
    #[serde(rename = "x86_64")]
    X86_64,
    /// 64-bit ARM (Kubernetes `arm64`).
    #[serde(rename = "aarch64")]
    Aarch64,
}

impl VmArch {
    /// The Proxmox architecture.
    pub fn arch(self) -> pve_client::options::Arch {
        match self {
            VmArch::X86_64 => pve_client::options::Arch::X86_64,
            VmArch::Aarch64 => pve_client::options::Arch::Aarch64,
        }
    }
}

/// The emulated CPU of a VM (Proxmox `cpu`, format `pve-vm-cpu-conf` of
/// `/nodes/{node}/qemu/{vmid}/config`); see docs/vm-shapes.md.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuSpec {
    /// CPU model: a Proxmox built-in (`host`, `x86-64-v2-AES`, `x86-64-v3`,
    /// `EPYC-Rome`, …) or a cluster-defined `custom-<name>`; absent keeps
    /// the template's model.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$"))]
    pub type_: Option<String>,
    /// VM-specific CPU flags, each `+name` (enable) or `-name` (disable);
    /// Proxmox allows `pcid`, `spec-ctrl`, `ibpb`, `ssbd`, `virt-ssbd`,
    /// `amd-ssbd`, `amd-no-ssb`, `pdpe1gb`, `md-clear`, `hv-tlbflush`,
    /// `hv-evmcs`, `aes`. When given they replace the template's flags;
    /// absent keeps them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 12), inner(pattern(r"^[+-][a-zA-Z0-9_.-]+$")))]
    pub flags: Vec<String>,
}

/// One PCI device passed through to the VM by a Proxmox resource mapping
/// (`hostpci[n]: mapping=<id>,…` of `/nodes/{node}/qemu/{vmid}/config`;
/// mappings are listed by `GET /cluster/mapping/pci`). The VM is placed
/// only on a node where the mapping has a free device; see
/// docs/vm-shapes.md "PCI devices".
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciDeviceSpec {
    /// The mapping's name (a Proxmox configuration id: a letter, then
    /// letters, digits, `-` and `_`). The instance's `pciMappings` may
    /// rename it to the id the mapping has in that Proxmox cluster.
    #[schemars(length(min = 1, max = 128), pattern(r"^[A-Za-z][A-Za-z0-9_-]*$"))]
    pub mapping: String,
    /// Attach on the PCI Express bus (`pcie=1`); Proxmox allows it only on
    /// the `q35` machine type, so a template of another machine type is
    /// refused before the clone (the controller never changes a VM's
    /// chipset, which would renumber the guest's devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,
    /// Whether the guest sees the device's ROM (`rombar`, Proxmox default
    /// true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rombar: Option<bool>,
    /// The device is the VM's primary GPU (`x-vga=1`). It also marks the
    /// device as a GPU for the autoscaler's capacity (`nvidia.com/gpu`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary_gpu: Option<bool>,
    /// A mediated device type (`mdev`, e.g. `nvidia-63` for a vGPU
    /// profile) instead of the whole device; the mapping must be
    /// mdev-capable. Mediated devices are shared: they are not counted
    /// per device by the scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), pattern(r"^[^/.:,;]+$"))]
    pub mdev: Option<String>,
}

impl PciDeviceSpec {
    /// Whether the device counts as a GPU for the autoscaler's capacity
    /// (`primaryGpu` or a mediated device type: vGPU profiles).
    pub fn is_gpu(&self) -> bool {
        self.primary_gpu == Some(true) || self.mdev.is_some()
    }
}
