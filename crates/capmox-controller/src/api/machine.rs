//! `ProxmoxMachine` (`infrastructure.cluster.x-k8s.io/v1alpha3`): the
//! InfraMachine of CAPI contract v1beta2, one Proxmox VM.
//!
//! There is deliberately no `spec.failureDomain`: CAPI would copy it over
//! `Machine.spec.failureDomain` (docs/capi-contract.md fact 8); the input is the owner
//! Machine's `spec.failureDomain`, the output `status.failureDomain`.

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, Initialization, IpPoolReference, TemplateSelector, VmIdRange};
pub use super::vm_shape::{BootstrapMediaSpec, CdromBus, CpuSpec, PciDeviceSpec, VmArch};

/// Desired state of a ProxmoxMachine (also the body of a ProxmoxMachineTemplate).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha3",
    kind = "ProxmoxMachine",
    plural = "proxmoxmachines",
    singular = "proxmoxmachine",
    shortname = "pxm",
    category = "cluster-api",
    namespaced,
    status = "ProxmoxMachineStatus",
    label("cluster.x-k8s.io/v1beta2", "v1alpha3"),
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']",
        description = "Owner CAPI Cluster"
    ),
    printcolumn(
        name = "Instance",
        type_ = "string",
        json_path = ".spec.instance",
        description = "Proxmox instance (failure domain)"
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".status.proxmoxNode",
        description = "Proxmox node the VM runs on"
    ),
    printcolumn(
        name = "VMID",
        type_ = "integer",
        json_path = ".spec.virtualMachineID",
        description = "Proxmox VMID"
    ),
    printcolumn(
        name = "ProviderID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "CAPI providerID"
    ),
    printcolumn(
        name = "Provisioned",
        type_ = "boolean",
        json_path = ".status.initialization.provisioned",
        description = "VM provisioned"
    ),
    printcolumn(
        name = "Reason",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        description = "Ready condition reason",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(oldSelf.instance) || (has(self.instance) && self.instance == oldSelf.instance)",
     "message": "instance is immutable once set", "fieldPath": ".instance"},
    {"rule": "!has(self.full) || self.full || (!has(self.storage) && !has(self.format))",
     "message": "storage and format are only allowed for full clones (full: true)", "fieldPath": ".storage"},
    {"rule": "!has(self.templateID) || has(self.sourceNode)",
     "message": "templateID needs sourceNode", "fieldPath": ".sourceNode"},
    {"rule": "!(has(self.templateID) && has(self.templateSelector))",
     "message": "templateID and templateSelector are mutually exclusive", "fieldPath": ".templateSelector"}
]))]
pub struct ProxmoxMachineSpec {
    /// CAPI providerID; set by the controller: `proxmox://<uuid>` or
    /// `proxmox://<instance>/<vmid>` (cluster's `providerIDFormat`).
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 512))]
    pub provider_id: Option<String>,
    /// The instance the VM lives in: set by the user to pin, else by the
    /// controller once; immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63), pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub instance: Option<String>,
    /// The VMID; set by the controller before the clone is issued.
    #[serde(
        default,
        rename = "virtualMachineID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub virtual_machine_id: Option<u32>,
    /// Node that holds the template (with `templateID`); overrides the instance's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub source_node: Option<String>,
    /// Template VMID; overrides the instance's template.
    #[serde(
        default,
        rename = "templateID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub template_id: Option<u32>,
    /// Template tag selector; overrides the instance's template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,
    /// Target node; scheduled when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub target: Option<String>,
    /// Full clone (default true); false asks for a linked clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full: Option<bool>,
    /// Target storage of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub storage: Option<String>,
    /// Disk format of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DiskFormat>,
    /// Proxmox resource pool to add the VM to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub pool: Option<String>,
    /// Snapshot of the source to clone from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 40))]
    pub snap_name: Option<String>,
    /// VM description (the controller appends its ownership marker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub description: Option<String>,
    /// CPU sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4))]
    pub num_sockets: Option<u32>,
    /// CPU cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub num_cores: Option<u32>,
    /// Memory in MiB.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 16, max = 8_388_608))]
    pub memory_mib: Option<u32>,
    /// Disks: grow the boot volume, add data volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Disks>,
    /// Network devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// VMIDs this machine may use; narrower than the instance's.
    #[serde(default, rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    pub vm_id_range: Option<VmIdRange>,
    /// Nodes this machine may use; narrower than the instance's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 63)))]
    pub allowed_nodes: Vec<String>,
    /// Tags added to the VM (Proxmox tag syntax).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(max = 32),
        inner(length(min = 1, max = 64), pattern(r"^[a-zA-Z0-9_][a-zA-Z0-9_+.\-]*$"))
    )]
    pub tags: Vec<String>,
    /// Readiness checks to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Checks>,
    /// Cloud-init metadata options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,
    /// Start the VM when its node boots (`onboot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,
    /// Startup/shutdown behaviour, Proxmox `startup` syntax: `order=N,up=S,down=S` (seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 64),
        pattern(r"^((order=\d+|up=\d+|down=\d+)(,(order=\d+|up=\d+|down=\d+))*)$")
    )]
    pub startup: Option<String>,
    /// Boot order, Proxmox `boot` syntax, e.g. `order=scsi0;net0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 256),
        pattern(r"^order=[a-z]+[0-9]+(;[a-z]+[0-9]+)*$")
    )]
    pub boot_order: Option<String>,
    /// Proxmox HA for this machine's VM; overrides the instance's `ha`
    /// (`enabled: false` turns it off).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<super::cluster::HaSettings>,
    /// CPU model and flags (`cpu`); the instance's `cpu` fills what this
    /// leaves out, and the template's value stays when neither sets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuSpec>,
    /// Where the bootstrap (cloud-init) ISO goes; the instance's
    /// `bootstrapMedia` fills what this leaves out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_media: Option<BootstrapMediaSpec>,
    /// PCI devices passed through by Proxmox resource mapping, in order
    /// `hostpci0`, `hostpci1`, … (at most 16); each mapping once. The VM
    /// goes only to a node where every mapping has a free device
    /// (docs/vm-shapes.md "PCI devices").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    pub pci_devices: Vec<PciDeviceSpec>,
}

/// Disk image format of a full clone (Proxmox `format`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiskFormat {
    /// Raw image.
    Raw,
    /// QEMU copy-on-write image.
    Qcow2,
    /// VMware disk image.
    Vmdk,
}

impl DiskFormat {
    /// The Proxmox parameter value.
    pub fn as_str(self) -> &'static str {
        match self {
            DiskFormat::Raw => "raw",
            DiskFormat::Qcow2 => "qcow2",
            DiskFormat::Vmdk => "vmdk",
        }
    }
}

/// `spec.disks`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disks {
    /// Grow the template's boot disk to this size (never shrink).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_volume: Option<DiskSize>,
    /// Extra data disks, keyed by `disk`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 16))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["disk"]))]
    pub additional_volumes: Vec<AdditionalVolume>,
}

/// A disk slot and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskSize {
    /// Disk slot, e.g. `scsi0`, `virtio0`, `sata0`, `ide0`.
    #[schemars(pattern(r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5]|ide[0-3])$"))]
    pub disk: String,
    /// Size in GiB.
    #[schemars(range(min = 1, max = 131072))]
    pub size_gb: u32,
}

/// An extra data disk.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalVolume {
    /// Disk slot, e.g. `scsi1`.
    #[schemars(pattern(r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5]|ide[0-3])$"))]
    pub disk: String,
    /// Size in GiB.
    #[schemars(range(min = 1, max = 131072))]
    pub size_gb: u32,
    /// Storage for the disk; the boot disk's storage when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub storage: Option<String>,
    /// Image format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<DiskFormat>,
    /// Pass discard/trim requests to the storage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<bool>,
    /// Present the disk as an SSD to the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssd: Option<bool>,
    /// Use a dedicated IO thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iothread: Option<bool>,
}

/// `spec.network`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Network devices keyed by `name` (`net0`..`net31`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub network_devices: Vec<NetworkDevice>,
}

/// NIC model (Proxmox `net[n]` model key).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NicModel {
    /// VirtIO (paravirtualised), the default; the only model that supports `mtu`.
    #[default]
    Virtio,
    /// Intel E1000.
    E1000,
    /// Intel E1000E.
    E1000e,
    /// Realtek RTL8139.
    Rtl8139,
    /// VMware vmxnet3.
    Vmxnet3,
}

impl NicModel {
    /// The Proxmox model name.
    pub fn as_str(self) -> &'static str {
        match self {
            NicModel::Virtio => "virtio",
            NicModel::E1000 => "e1000",
            NicModel::E1000e => "e1000e",
            NicModel::Rtl8139 => "rtl8139",
            NicModel::Vmxnet3 => "vmxnet3",
        }
    }
}

/// One NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!has(self.mtu) || !has(self.model) || self.model == 'virtio'",
     "message": "mtu is only supported with model virtio", "fieldPath": ".mtu"},
    {"rule": "!has(self.mtu) || self.mtu == 1 || (self.mtu >= 576 && self.mtu <= 65520)",
     "message": "mtu must be 1 (inherit the bridge MTU) or between 576 and 65520", "fieldPath": ".mtu"}
]))]
pub struct NetworkDevice {
    /// Device name, `net0`..`net31`; `net0` is the default device.
    #[schemars(pattern(r"^net([0-9]|[12][0-9]|3[01])$"))]
    pub name: String,
    /// Bridge, e.g. `vmbr0`; the instance's bridge (or the template's) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64))]
    pub bridge: Option<String>,
    /// NIC model; `virtio` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<NicModel>,
    /// VLAN tag, 1..=4094.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<u16>,
    /// MTU: 1 = inherit the bridge's, else 576..=65520 (virtio only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
    /// Fixed unicast MAC address (`XX:XX:XX:XX:XX:XX`); generated by Proxmox when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(r"^[0-9a-fA-F][02468aAcCeE](:[0-9a-fA-F]{2}){5}$"))]
    pub mac_address: Option<String>,
    /// Enable the Proxmox firewall on this NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,
    /// Start with the link down.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_down: Option<bool>,
    /// IP pools to claim addresses from (one per family); the instance's or the
    /// cluster's pools when absent (and no DHCP is asked for).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub ip_pool_ref: Vec<IpPoolReference>,
    /// Use DHCP for IPv4 on this device (no address claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp4: Option<bool>,
    /// Use DHCP/SLAAC for IPv6 on this device (no address claim).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dhcp6: Option<bool>,
    /// Name servers for this device (override instance/cluster ones).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8), inner(length(min = 2, max = 39)))]
    pub dns_servers: Vec<String>,
}

/// `spec.checks`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    /// Do not wait for cloud-init to report completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,
    /// Do not wait for the QEMU guest agent; use the claimed addresses instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// `spec.metadataSettings`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataSettings {
    /// Put the providerID into cloud-init meta-data (`provider-id`).
    #[serde(
        default,
        rename = "providerIDInjection",
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id_injection: Option<bool>,
}

/// Observed state of a ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineStatus {
    /// CAPI contract v1beta2 `status.initialization.provisioned`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// `Ready`, `InstanceSelected`, `VirtualMachineProvisioned`, `Paused`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The instance the VM is in (CAPI copies it to `Machine.status.failureDomain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 256))]
    pub failure_domain: Option<String>,
    /// Node the VM runs on (updated if it migrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,
    /// Proxmox power state: `running`, `stopped`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
    /// Machine addresses for CAPI (`InternalIP`, `Hostname`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addresses: Vec<MachineAddress>,
    /// Addresses per device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<DeviceAddresses>,
    /// Devices as read from Proxmox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network: Vec<NetworkStatus>,
    /// UPID of the Proxmox task in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// The bootstrap ISO was attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,
    /// The bootstrap ISO volume, recorded before its upload and removed
    /// once the volume is deleted: what the provider must delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_media: Option<BootstrapMedia>,
    /// `true`: the last ISO volume recorded in `bootstrapMedia` was deleted
    /// and its record removed (both in one write), and none was recorded
    /// since. A new record clears it. Since every upload is recorded
    /// first, it proves the machine has no ISO left, and its deletion skips
    /// the sweep of the ISO storages (which finds ISOs recorded by nothing:
    /// machines of older versions, taken over ones).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_media_deleted: Option<bool>,
    /// The HA resource made for the VM (`vm:<vmid>`), recorded before it is
    /// created and removed once it is deleted: what the provider must delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha_resource: Option<String>,
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// A bootstrap ISO volume of the machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BootstrapMedia {
    /// The node whose storage holds it.
    pub node: String,
    /// The volume ID, `storage:iso/capmox-<vmid>-<uid>.iso`.
    pub volume: String,
}

/// A CAPI `MachineAddress`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// Addresses of one device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceAddresses {
    /// Device name (`net0`, ...).
    pub net: String,
    /// IPv4 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv4: Vec<String>,
    /// IPv6 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ipv6: Vec<String>,
}

/// One device as Proxmox reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Device name (`net0`, ...).
    pub name: String,
    /// MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// Bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    /// VLAN tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<u16>,
    /// MTU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}
