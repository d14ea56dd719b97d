//! `ProxmoxMachine` (`infrastructure.cluster.x-k8s.io/v1alpha2`): the
//! InfraMachine of the Go provider (CAPMOX v0.8, v0.9), one Proxmox VM.
//! Served for clusters made with it and converted to and from `v1alpha3`
//! (`docs/migrating-from-capmox.md`).

// `printcolumn(type_ = ...)` repeats by design; clippy mistakes it for a duplicated attribute.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{Condition, Initialization, ZONE_PATTERN, rule};

/// Proxmox tag syntax as the Go provider's schema writes it.
const TAG_PATTERN: &str = r"^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$";
/// A Proxmox network device name (`net0`, `net1`, ...).
const NET_NAME_PATTERN: &str = r"^net[0-9]+$";

/// Desired state of a `v1alpha2` ProxmoxMachine (also the body of a
/// `v1alpha2` ProxmoxMachineTemplate). A ProxmoxMachine's `spec` carries two
/// more rules than a template's, [`machine_spec_rules`].
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxMachine",
    plural = "proxmoxmachines",
    singular = "proxmoxmachine",
    category = "cluster-api",
    namespaced,
    status = "ProxmoxMachineStatus",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name",
        description = "Cluster to which this ProxmoxMachine belongs"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.initialization.provisioned",
        description = "Machine ready status"
    ),
    printcolumn(
        name = "Node",
        type_ = "string",
        json_path = ".status.proxmoxNode",
        description = "Proxmox Node that the machine was deployed on"
    ),
    printcolumn(
        name = "Provider_ID",
        type_ = "string",
        json_path = ".spec.providerID",
        description = "Provider ID"
    ),
    printcolumn(
        name = "Machine",
        type_ = "string",
        json_path = ".metadata.ownerReferences[?(@.kind==\"Machine\")].name",
        description = "Machine object which owns with this ProxmoxMachine"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"message": "Must set full=true when specifying format", "rule": "self.full || !has(self.format)"},
    {"message": "Must set full=true when specifying storage", "rule": "self.full || !has(self.storage)"},
    {"message": "Must specify either templateID or templateSelector",
     "rule": "has(self.templateSelector) || (has(self.templateID) && has(self.sourceNode))"}
]))]
pub struct ProxmoxMachineSpec {
    /// Proxmox nodes the VM may be cloned onto; the cluster's when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Vec<String>,
    /// Readiness checks to skip.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<Checks>,
    /// VM description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Disk changes applied before the first start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Storage>,
    /// Disk format of a full clone: `raw`, `qcow2` or `vmdk`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["raw", "qcow2", "vmdk"]))]
    pub format: Option<String>,
    /// Full clone; the schema defaults it to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub full: Option<bool>,
    /// Memory in MiB, a multiple of 8.
    #[serde(default, rename = "memoryMiB", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,
    /// Cloud-init metadata options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,
    /// Network devices (required by the schema; absent only in a
    /// down-converted `v1alpha3` machine without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub network: Option<NetworkSpec>,
    /// Cores per CPU socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,
    /// CPU sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,
    /// Proxmox resource pool of the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// `proxmox://<BIOS UUID>`.
    #[serde(
        default,
        rename = "providerID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(
        length(min = 46, max = 46),
        pattern(
            r"^proxmox://[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$"
        )
    )]
    pub provider_id: Option<String>,
    /// Snapshot to clone from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snap_name: Option<String>,
    /// Node holding the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub source_node: Option<String>,
    /// Storage of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Tags added to the VM.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        length(min = 1),
        inner(pattern(TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub tags: Vec<String>,
    /// VMID of the template.
    #[serde(
        default,
        rename = "templateID",
        skip_serializing_if = "Option::is_none"
    )]
    pub template_id: Option<i32>,
    /// Selects the template by its tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,
    /// The VMID.
    #[serde(
        default,
        rename = "virtualMachineID",
        skip_serializing_if = "Option::is_none"
    )]
    pub virtual_machine_id: Option<i64>,
    /// VMIDs to choose from.
    #[serde(default, rename = "vmIDRange", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "end should be greater than or equal to start", "rule": "self.end >= self.start"}
    ]))]
    pub vm_id_range: Option<VmIdRange>,
}

/// The CEL rules a ProxmoxMachine's `spec` has before the ones every
/// machine spec has: exactly one of `sourceNode` and `templateSelector`,
/// exactly one of `templateID` and `templateSelector`.
pub fn machine_spec_rules() -> Vec<ValidationRule> {
    let message = "must define either a SourceNode with a TemplateID or a TemplateSelector";
    vec![
        rule(
            "[has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)",
            message,
        ),
        rule(
            "[has(self.templateID), has(self.templateSelector)].exists_one(c, c)",
            message,
        ),
    ]
}

/// `spec.checks`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Checks {
    /// Do not wait for cloud-init.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,
    /// Do not wait for the QEMU guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// `spec.disks`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Grow the boot disk to this size; immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "Value is immutable", "rule": "self == oldSelf"}
    ]))]
    pub boot_volume: Option<DiskSize>,
}

/// A disk and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskSize {
    /// Disk slot, e.g. `scsi0`.
    #[schemars(length(min = 1))]
    pub disk: String,
    /// Size in GB.
    #[schemars(range(min = 5))]
    pub size_gb: i32,
}

/// `spec.metadataSettings`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MetadataSettings {
    /// Put `provider-id` into the cloud-init meta-data (required by the
    /// schema; absent only when down-converted from a `v1alpha3` machine
    /// without it).
    #[serde(
        rename = "providerIDInjection",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(required)]
    pub provider_id_injection: Option<bool>,
}

/// `spec.templateSelector`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSelector {
    /// `exact`, `uniqueSubset` or `bestSubset`; the schema defaults it to `exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "exact", "enum" = ["exact", "uniqueSubset", "bestSubset"]))]
    pub match_policy: Option<String>,
    /// Tags the template carries.
    #[schemars(
        length(min = 1),
        inner(pattern(TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub match_tags: Vec<String>,
}

/// `spec.vmIDRange`, inclusive.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct VmIdRange {
    /// Last VMID.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub end: i64,
    /// First VMID.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub start: i64,
}

/// `spec.network`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Network devices, keyed by `name`.
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub network_devices: Vec<NetworkDevice>,
    /// VRF devices, keyed by `name`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vrfs: Vec<VrfDevice>,
    /// The deployment zone whose pools the machine uses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(ZONE_PATTERN))]
    pub zone: Option<String>,
}

/// One NIC.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDevice {
    /// Bridge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub bridge: Option<String>,
    /// This device gets the cluster's IPv4 pool.
    #[serde(
        default,
        rename = "defaultIPv4",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_ipv4: Option<bool>,
    /// This device gets the cluster's IPv6 pool.
    #[serde(
        default,
        rename = "defaultIPv6",
        skip_serializing_if = "Option::is_none"
    )]
    pub default_ipv6: Option<bool>,
    /// Name servers of this device.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,
    /// IPAM pools to claim addresses from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ip_pool_ref: Vec<TypedLocalObjectReference>,
    /// MTU inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "invalid MTU value", "rule": "self == 1 || (self >= 576 && self <= 65520)"}
    ]))]
    pub link_mtu: Option<i32>,
    /// NIC model; the schema defaults it to `virtio`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "virtio", "enum" = ["e1000", "virtio", "rtl8139", "vmxnet3"]))]
    pub model: Option<String>,
    /// MTU of the Proxmox NIC (1 = the bridge's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"message": "invalid MTU value", "rule": "self == 1 || (self >= 576 && self <= 65520)"}
    ]))]
    pub mtu: Option<i32>,
    /// Device name; the schema defaults it to `net0`.
    #[serde(default = "default_net_name")]
    #[schemars(length(min = 4), pattern(NET_NAME_PATTERN))]
    pub name: String,
    /// Multiqueue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub queues: Option<i32>,
    /// Routes of this interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Vec<RouteSpec>,
    /// FIB rules of this interface.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routing_policy: Vec<RoutingPolicySpec>,
    /// VLAN tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<i32>,
}

impl Default for NetworkDevice {
    fn default() -> Self {
        NetworkDevice {
            bridge: None,
            default_ipv4: None,
            default_ipv6: None,
            dns_servers: Vec::new(),
            ip_pool_ref: Vec::new(),
            link_mtu: None,
            model: None,
            mtu: None,
            name: default_net_name(),
            queues: None,
            routes: Vec::new(),
            routing_policy: Vec::new(),
            vlan: None,
        }
    }
}

fn default_net_name() -> String {
    "net0".to_string()
}

/// A `corev1.TypedLocalObjectReference` to an IPAM pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend(
    "x-kubernetes-map-type" = "atomic",
    "x-kubernetes-validations" = [
        {"message": "ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io",
         "rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'"},
        {"message": "ipPoolRef allows either InClusterIPPool or GlobalInClusterIPPool",
         "rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'"}
    ]
))]
pub struct TypedLocalObjectReference {
    /// API group of the pool kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// Pool kind.
    pub kind: String,
    /// Pool name.
    pub name: String,
}

/// A route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RouteSpec {
    /// The route is IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,
    /// Route priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub metric: Option<i32>,
    /// Routing table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,
    /// Destination subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A Linux FIB rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RoutingPolicySpec {
    /// Source subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The rule is IPv6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,
    /// Rule priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        range(max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [
            {"message": "Cowardly refusing to insert FIB rule matching kernel rules",
             "rule": "(self > 0 && self < 32765) || (self > 32766)"}
        ])
    )]
    pub priority: Option<i64>,
    /// Routing table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,
    /// Destination subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A VRF device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VrfDevice {
    /// The NICs in this VRF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(
        inner(length(min = 4), pattern(NET_NAME_PATTERN)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub interfaces: Vec<String>,
    /// Device name.
    #[schemars(length(min = 3))]
    pub name: String,
    /// Routes of this VRF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Vec<RouteSpec>,
    /// FIB rules of this VRF.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routing_policy: Vec<RoutingPolicySpec>,
    /// Routing table of the l3mdev device.
    #[schemars(
        range(min = 1, max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [
            {"message": "Cowardly refusing to insert l3mdev rules into kernel tables",
             "rule": "(self > 0 && self < 254) || (self > 255)"}
        ])
    )]
    pub table: i32,
}

/// Observed state of a `v1alpha2` ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineStatus {
    /// Machine addresses for CAPI.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Vec<MachineAddress>,
    /// The bootstrap data was attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,
    /// `Ready`, `VirtualMachineProvisioned`, `Paused`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// CAPI contract v1beta2 `status.initialization`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<Initialization>,
    /// Addresses per device (`net0`, ... and the synthetic `default`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["net"]))]
    pub ip_addresses: Vec<IpAddresses>,
    /// Devices as the guest agent reports them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub network: Vec<NetworkStatus>,
    /// Node the VM runs on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,
    /// When a task may be queued again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
    /// UPID of the task in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// `notfound`, `pending` or `ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
}

/// A CAPI `MachineAddress`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct MachineAddress {
    /// The address.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
    /// `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    #[schemars(extend("enum" = ["Hostname", "ExternalIP", "InternalIP", "ExternalDNS", "InternalDNS"]))]
    pub type_: String,
}

/// Addresses of one device.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct IpAddresses {
    /// IPv4 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv4: Vec<String>,
    /// IPv6 addresses.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv6: Vec<String>,
    /// Device name, or `default`.
    #[schemars(length(min = 4), pattern(r"^(net[0-9]+|default)$"))]
    pub net: String,
}

/// One device as reported by the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Whether the device is connected (required by the schema; absent
    /// only when down-converted from `v1alpha3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(required)]
    pub connected: Option<bool>,
    /// Addresses reported by the guest.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ip_addrs: Vec<String>,
    /// MAC address (required by the schema; absent only when
    /// down-converted from `v1alpha3`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(
        required,
        length(min = 17, max = 17),
        pattern(r"^([0-9A-Fa-f]{2}[:]){5}([0-9A-Fa-f]{2})$")
    )]
    pub mac_addr: Option<String>,
    /// Device name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 4), pattern(NET_NAME_PATTERN))]
    pub network_name: Option<String>,
}
