//! ProxmoxMachine, field by field (also the `spec.template.spec` of a
//! ProxmoxMachineTemplate).
//!
//! Most fields have the same name and meaning in both versions. The
//! network differs: in `v1alpha2` the device with `defaultIPv4` /
//! `defaultIPv6` (the Go provider's webhook sets both on `net0`) gets the
//! cluster's pools, before its own `ipPoolRef`s; in `v1alpha3` `net0`
//! without `ipPoolRef` gets the instance's (= the cluster's) pools and a
//! device with `ipPoolRef` only those. So the flags convert when they say
//! what `v1alpha3` does anyway, and are refused otherwise; the way down,
//! `net0` without `ipPoolRef` gets both flags. Refused as
//! well: `network.zone`, `network.vrfs`, and per device `routes`,
//! `routingPolicy`, `linkMtu`, `queues`.

use crate::api::common::{IpPoolReference, MatchPolicy, TemplateSelector, VmIdRange};
use crate::api::machine::{
    DeviceAddresses, DiskFormat, DiskSize, Disks, MachineAddress, NetworkDevice, NetworkSpec,
    NetworkStatus, NicModel,
};
use crate::api::v1alpha2::common as v2common;
use crate::api::v1alpha2::machine as v2;
use crate::api::{
    Checks, Initialization, MetadataSettings, ProxmoxMachineSpec, ProxmoxMachineStatus,
};

use super::cluster::{conditions_down, conditions_up};
use super::fields::{item, join, opt_u32, refuse, to_i32, to_u16, to_u32};
use super::{Body, ConversionError, emit, parse};

/// `v1alpha2` → `v1alpha3` body.
pub(super) fn up(body: &Body) -> Result<Body, ConversionError> {
    let (spec, status) = parse::<v2::ProxmoxMachineSpec, v2::ProxmoxMachineStatus>(body)?;
    let spec = spec_up(&spec, "spec")?;
    emit(&spec, status.as_ref().map(status_up).as_ref())
}

/// `v1alpha3` → `v1alpha2` body.
pub(super) fn down(body: &Body) -> Result<Body, ConversionError> {
    let (spec, status) = parse::<ProxmoxMachineSpec, ProxmoxMachineStatus>(body)?;
    emit(&spec_down(&spec), status.as_ref().map(status_down).as_ref())
}

/// A `v1alpha2` ProxmoxMachine spec found at `at`, as `v1alpha3`.
///
/// # Errors
/// [`ConversionError`] naming a refused field (module doc) or a number
/// outside the `v1alpha3` type.
pub(super) fn spec_up(
    s: &v2::ProxmoxMachineSpec,
    at: &str,
) -> Result<ProxmoxMachineSpec, ConversionError> {
    Ok(ProxmoxMachineSpec {
        ha: None,
        provider_id: s.provider_id.clone(),
        instance: None,
        virtual_machine_id: s
            .virtual_machine_id
            .map(|v| to_u32(v, &join(at, "virtualMachineID")))
            .transpose()?,
        source_node: s.source_node.clone(),
        template_id: opt_u32(s.template_id, &join(at, "templateID"))?,
        template_selector: s
            .template_selector
            .as_ref()
            .map(|t| selector_up(t, &join(at, "templateSelector")))
            .transpose()?,
        target: None,
        full: s.full,
        storage: s.storage.clone(),
        format: s
            .format
            .as_deref()
            .map(|f| format_up(f, &join(at, "format")))
            .transpose()?,
        pool: s.pool.clone(),
        snap_name: s.snap_name.clone(),
        description: s.description.clone(),
        num_sockets: opt_u32(s.num_sockets, &join(at, "numSockets"))?,
        num_cores: opt_u32(s.num_cores, &join(at, "numCores"))?,
        memory_mib: opt_u32(s.memory_mib, &join(at, "memoryMiB"))?,
        disks: s
            .disks
            .as_ref()
            .map(|d| {
                Ok::<_, ConversionError>(Disks {
                    boot_volume: d
                        .boot_volume
                        .as_ref()
                        .map(|b| {
                            Ok::<_, ConversionError>(DiskSize {
                                disk: b.disk.clone(),
                                size_gb: to_u32(b.size_gb, &join(at, "disks.bootVolume.sizeGb"))?,
                            })
                        })
                        .transpose()?,
                    additional_volumes: Vec::new(),
                })
            })
            .transpose()?,
        network: s
            .network
            .as_ref()
            .map(|n| network_up(n, &join(at, "network")))
            .transpose()?,
        vm_id_range: s
            .vm_id_range
            .map(|r| {
                Ok::<_, ConversionError>(VmIdRange {
                    start: to_u32(r.start, &join(at, "vmIDRange.start"))?,
                    end: to_u32(r.end, &join(at, "vmIDRange.end"))?,
                })
            })
            .transpose()?,
        allowed_nodes: s.allowed_nodes.clone(),
        tags: s.tags.clone(),
        checks: s.checks.map(|c| Checks {
            skip_cloud_init_status: c.skip_cloud_init_status,
            skip_qemu_guest_agent: c.skip_qemu_guest_agent,
        }),
        metadata_settings: s.metadata_settings.map(|m| MetadataSettings {
            provider_id_injection: m.provider_id_injection,
        }),
        on_boot: None,
        startup: None,
        boot_order: None,
        cpu: None,
        bootstrap_media: None,
        pci_devices: Vec::new(),
    })
}

/// A `v1alpha3` ProxmoxMachine spec as `v1alpha2`; `instance`, `target`,
/// `onBoot`, `startup`, `bootOrder`, additional volumes and the device
/// fields `v1alpha2` lacks have no place there.
pub(super) fn spec_down(s: &ProxmoxMachineSpec) -> v2::ProxmoxMachineSpec {
    v2::ProxmoxMachineSpec {
        allowed_nodes: s.allowed_nodes.clone(),
        checks: s.checks.map(|c| v2::Checks {
            skip_cloud_init_status: c.skip_cloud_init_status,
            skip_qemu_guest_agent: c.skip_qemu_guest_agent,
        }),
        description: s.description.clone(),
        disks: s.disks.as_ref().map(|d| v2::Storage {
            boot_volume: d.boot_volume.as_ref().and_then(|b| {
                Some(v2::DiskSize {
                    disk: b.disk.clone(),
                    size_gb: to_i32(b.size_gb)?,
                })
            }),
        }),
        format: s.format.map(|f| f.as_str().to_string()),
        full: s.full,
        memory_mib: s.memory_mib.and_then(to_i32),
        metadata_settings: s.metadata_settings.map(|m| v2::MetadataSettings {
            provider_id_injection: m.provider_id_injection,
        }),
        network: s.network.as_ref().map(network_down),
        num_cores: s.num_cores.and_then(to_i32),
        num_sockets: s.num_sockets.and_then(to_i32),
        pool: s.pool.clone(),
        provider_id: s.provider_id.clone(),
        snap_name: s.snap_name.clone(),
        source_node: s.source_node.clone(),
        storage: s.storage.clone(),
        tags: s.tags.clone(),
        template_id: s.template_id.and_then(to_i32),
        template_selector: s.template_selector.as_ref().map(|t| v2::TemplateSelector {
            match_policy: t.match_policy.map(|p| policy_name(p).to_string()),
            match_tags: t.match_tags.clone(),
        }),
        virtual_machine_id: s.virtual_machine_id.map(i64::from),
        vm_id_range: s.vm_id_range.map(|r| v2::VmIdRange {
            end: i64::from(r.end),
            start: i64::from(r.start),
        }),
    }
}

fn selector_up(t: &v2::TemplateSelector, at: &str) -> Result<TemplateSelector, ConversionError> {
    let match_policy = match t.match_policy.as_deref() {
        None => None,
        Some("exact") => Some(MatchPolicy::Exact),
        Some("uniqueSubset") => Some(MatchPolicy::UniqueSubset),
        Some("bestSubset") => Some(MatchPolicy::BestSubset),
        Some(other) => {
            return Err(ConversionError::new(
                join(at, "matchPolicy"),
                format!("{other:?} is not one of exact, uniqueSubset, bestSubset"),
            ));
        }
    };
    Ok(TemplateSelector {
        match_tags: t.match_tags.clone(),
        match_policy,
    })
}

fn policy_name(p: MatchPolicy) -> &'static str {
    match p {
        MatchPolicy::Exact => "exact",
        MatchPolicy::UniqueSubset => "uniqueSubset",
        MatchPolicy::BestSubset => "bestSubset",
    }
}

fn format_up(f: &str, at: &str) -> Result<DiskFormat, ConversionError> {
    [DiskFormat::Raw, DiskFormat::Qcow2, DiskFormat::Vmdk]
        .into_iter()
        .find(|d| d.as_str() == f)
        .ok_or_else(|| ConversionError::new(at, format!("{f:?} is not one of raw, qcow2, vmdk")))
}

fn model_up(m: &str, at: &str) -> Result<NicModel, ConversionError> {
    [
        NicModel::Virtio,
        NicModel::E1000,
        NicModel::E1000e,
        NicModel::Rtl8139,
        NicModel::Vmxnet3,
    ]
    .into_iter()
    .find(|n| n.as_str() == m)
    .ok_or_else(|| {
        ConversionError::new(
            at,
            format!("{m:?} is not one of virtio, e1000, e1000e, rtl8139, vmxnet3"),
        )
    })
}

fn network_up(n: &v2::NetworkSpec, at: &str) -> Result<NetworkSpec, ConversionError> {
    if n.zone.is_some() {
        return refuse(
            &join(at, "zone"),
            "zones (the ProxmoxCluster's zoneConfig) are not converted; a machine uses its instance's pools",
        );
    }
    if !n.vrfs.is_empty() {
        return refuse(
            &join(at, "vrfs"),
            "VRF devices are not configured by this provider",
        );
    }
    let at = join(at, "networkDevices");
    Ok(NetworkSpec {
        network_devices: n
            .network_devices
            .iter()
            .enumerate()
            .map(|(i, d)| device_up(d, &item(&at, i)))
            .collect::<Result<_, _>>()?,
    })
}

fn device_up(d: &v2::NetworkDevice, at: &str) -> Result<NetworkDevice, ConversionError> {
    if d.queues.is_some() {
        return refuse(
            &join(at, "queues"),
            "multiqueue is not set by this provider",
        );
    }
    if d.link_mtu.is_some() {
        return refuse(
            &join(at, "linkMtu"),
            "the MTU inside the guest is not set by this provider (mtu sets the Proxmox NIC's)",
        );
    }
    if !d.routes.is_empty() {
        return refuse(
            &join(at, "routes"),
            "routes are not written into the guest's network configuration",
        );
    }
    if !d.routing_policy.is_empty() {
        return refuse(
            &join(at, "routingPolicy"),
            "routing policies are not written into the guest's network configuration",
        );
    }
    for (flag, name) in [
        (d.default_ipv4, "defaultIPv4"),
        (d.default_ipv6, "defaultIPv6"),
    ] {
        default_flag_up(flag, d, &join(at, name))?;
    }
    Ok(NetworkDevice {
        name: d.name.clone(),
        bridge: d.bridge.clone(),
        model: d
            .model
            .as_deref()
            .map(|m| model_up(m, &join(at, "model")))
            .transpose()?,
        vlan: d.vlan.map(|v| to_u16(v, &join(at, "vlan"))).transpose()?,
        mtu: opt_u32(d.mtu, &join(at, "mtu"))?,
        mac_address: None,
        firewall: None,
        link_down: None,
        ip_pool_ref: d
            .ip_pool_ref
            .iter()
            .enumerate()
            .map(|(i, r)| pool_up(r, &item(&join(at, "ipPoolRef"), i)))
            .collect::<Result<_, _>>()?,
        dhcp4: None,
        dhcp6: None,
        dns_servers: d.dns_servers.clone(),
    })
}

/// `defaultIPv4` / `defaultIPv6` of a device: accepted where `v1alpha3`
/// addresses the device the same way (module doc).
fn default_flag_up(
    flag: Option<bool>,
    d: &v2::NetworkDevice,
    at: &str,
) -> Result<(), ConversionError> {
    let net0 = d.name == "net0";
    match flag {
        None => Ok(()),
        Some(true) if !net0 => refuse(
            at,
            "the cluster's pools go to net0 in v1alpha3; give this device an ipPoolRef instead",
        ),
        Some(true) if !d.ip_pool_ref.is_empty() => refuse(
            at,
            "net0 with ipPoolRef claims only from those pools in v1alpha3, not also from the cluster's",
        ),
        Some(false) if net0 && d.ip_pool_ref.is_empty() => refuse(
            at,
            "net0 without ipPoolRef always gets the cluster's pools in v1alpha3 (or DHCP with dhcp4/dhcp6)",
        ),
        Some(_) => Ok(()),
    }
}

/// `net0` without `ipPoolRef` gets the cluster's pools: in `v1alpha2` the
/// flags the Go provider's webhook sets for that.
fn default_flag_down(d: &NetworkDevice) -> Option<bool> {
    (d.name == "net0" && d.ip_pool_ref.is_empty()).then_some(true)
}

fn pool_up(
    r: &v2::TypedLocalObjectReference,
    at: &str,
) -> Result<IpPoolReference, ConversionError> {
    let Some(api_group) = &r.api_group else {
        return Err(ConversionError::new(
            join(at, "apiGroup"),
            "required (ipam.cluster.x-k8s.io)",
        ));
    };
    Ok(IpPoolReference {
        api_group: api_group.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
    })
}

fn network_down(n: &NetworkSpec) -> v2::NetworkSpec {
    v2::NetworkSpec {
        network_devices: n
            .network_devices
            .iter()
            .map(|d| v2::NetworkDevice {
                bridge: d.bridge.clone(),
                default_ipv4: default_flag_down(d),
                default_ipv6: default_flag_down(d),
                dns_servers: d.dns_servers.clone(),
                ip_pool_ref: d
                    .ip_pool_ref
                    .iter()
                    .map(|r| v2::TypedLocalObjectReference {
                        api_group: Some(r.api_group.clone()),
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                    })
                    .collect(),
                link_mtu: None,
                model: d.model.map(|m| m.as_str().to_string()),
                mtu: d.mtu.and_then(to_i32),
                name: d.name.clone(),
                queues: None,
                routes: Vec::new(),
                routing_policy: Vec::new(),
                vlan: d.vlan.map(i32::from),
            })
            .collect(),
        vrfs: Vec::new(),
        zone: None,
    }
}

fn status_up(s: &v2::ProxmoxMachineStatus) -> ProxmoxMachineStatus {
    ProxmoxMachineStatus {
        ha_resource: None,
        // The Go provider records no ISO: its deletion sweeps.
        bootstrap_media_deleted: None,
        initialization: s.initialization.as_ref().map(|i| Initialization {
            provisioned: i.provisioned,
        }),
        conditions: conditions_up(&s.conditions),
        failure_domain: None,
        proxmox_node: s.proxmox_node.clone(),
        vm_status: s.vm_status.clone(),
        addresses: s
            .addresses
            .iter()
            .map(|a| MachineAddress {
                type_: a.type_.clone(),
                address: a.address.clone(),
            })
            .collect(),
        ip_addresses: s
            .ip_addresses
            .iter()
            .map(|a| DeviceAddresses {
                net: a.net.clone(),
                ipv4: a.ipv4.clone(),
                ipv6: a.ipv6.clone(),
            })
            .collect(),
        network: s
            .network
            .iter()
            .map(|n| NetworkStatus {
                name: n.network_name.clone().unwrap_or_default(),
                mac_address: n.mac_addr.clone(),
                ..NetworkStatus::default()
            })
            .collect(),
        task_ref: s.task_ref.clone(),
        bootstrap_data_provided: s.bootstrap_data_provided,
        bootstrap_media: None,
        observed_generation: None,
    }
}

fn status_down(s: &ProxmoxMachineStatus) -> v2::ProxmoxMachineStatus {
    v2::ProxmoxMachineStatus {
        addresses: s
            .addresses
            .iter()
            .map(|a| v2::MachineAddress {
                address: a.address.clone(),
                type_: a.type_.clone(),
            })
            .collect(),
        bootstrap_data_provided: s.bootstrap_data_provided,
        conditions: conditions_down(&s.conditions),
        initialization: s.initialization.as_ref().map(|i| v2common::Initialization {
            provisioned: i.provisioned,
        }),
        ip_addresses: s
            .ip_addresses
            .iter()
            .map(|a| v2::IpAddresses {
                ipv4: a.ipv4.clone(),
                ipv6: a.ipv6.clone(),
                net: a.net.clone(),
            })
            .collect(),
        network: s
            .network
            .iter()
            .map(|n| v2::NetworkStatus {
                connected: None,
                ip_addrs: Vec::new(),
                mac_addr: n.mac_address.clone(),
                network_name: Some(n.name.clone()).filter(|n| !n.is_empty()),
            })
            .collect(),
        proxmox_node: s.proxmox_node.clone(),
        retry_after: None,
        task_ref: s.task_ref.clone(),
        vm_status: s.vm_status.clone(),
    }
}
