//! Property tests: random valid objects of each kind in each version come
//! back exactly after a conversion to the other version and back, also when
//! kube-apiserver fills in the `v1alpha2` defaults in between, and an edit
//! made through `v1alpha2` survives the way back.
//!
//! `v1alpha2` objects are those the conversion accepts (no refused field,
//! module doc of `conversion`) as kube-apiserver holds them (the schema's
//! defaults filled in), with everything `v1alpha3` cannot hold
//! (CAPMOX's pool references, node locations, `retryAfter`, guest-reported
//! addresses, explicit `false` flags, ...). `v1alpha3` objects use every
//! field, numbers over their whole type where the schema leaves them open
//! (metric, MTU), so some do not fit `v1alpha2`'s `int32`.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::collection::vec;
use proptest::option::of;
use proptest::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use super::*;
use crate::api::common::{
    IpConfig, IpPoolReference, MatchPolicy, SchedulerHints, SecretRef, TemplateSelector,
    TemplateSource, VmIdRange,
};
use crate::api::machine::{
    AdditionalVolume, BootstrapMediaSpec, CdromBus, Checks, CpuSpec, DeviceAddresses, DiskFormat,
    DiskSize, Disks, MachineAddress, MetadataSettings, NetworkDevice, NetworkSpec, NetworkStatus,
    NicModel, PciDeviceSpec,
};
use crate::api::v1alpha2 as v2;
use crate::api::{
    ApiEndpoint, ClusterMode, ClusterSettings, Condition, EndpointClaimStatus, EndpointPool,
    FailureDomain, Initialization, InstanceNetwork, InstanceSpec, InstanceStatus, IpPoolStatus,
    NodeInfo, ObjectMetaTemplate, ProviderIdFormat, ProxmoxClusterSpec, ProxmoxClusterStatus,
    ProxmoxClusterTemplateResource, ProxmoxClusterTemplateSpec, ProxmoxMachineSpec,
    ProxmoxMachineStatus, ProxmoxMachineTemplateResource, ProxmoxMachineTemplateSpec,
    ProxmoxMachineTemplateStatus,
};

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        rng_seed: proptest::test_runner::RngSeed::Fixed(0x00C0_4BE7),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- shared pieces ----

fn word() -> impl Strategy<Value = String> {
    "[a-z][a-z0-9-]{0,8}"
}

fn words(max: usize) -> impl Strategy<Value = Vec<String>> {
    vec(word(), 0..=max)
}

fn ipv4() -> impl Strategy<Value = String> {
    (1u8..=254, 0u8..=255, 1u8..=254).prop_map(|(a, b, c)| format!("10.{a}.{b}.{c}"))
}

fn time() -> impl Strategy<Value = Time> {
    (0i64..4_000_000_000).prop_map(|s| Time(Timestamp::from_second(s).unwrap()))
}

fn map() -> impl Strategy<Value = BTreeMap<String, String>> {
    proptest::collection::btree_map(word(), word(), 0..3)
}

/// Elements with distinct keys (the list-map keys of the schemas).
fn unique<T, K: Ord>(items: Vec<T>, key: impl Fn(&T) -> K) -> Vec<T> {
    let mut seen = std::collections::BTreeSet::new();
    items.into_iter().filter(|i| seen.insert(key(i))).collect()
}

const CONDITION_TYPES: [&str; 5] = [
    "Ready",
    "Paused",
    "ProxmoxAvailable",
    "InstancesReady",
    "VirtualMachineProvisioned",
];

fn condition() -> BoxedStrategy<Condition> {
    (
        time(),
        "[ -~]{0,12}",
        of(0i64..1000),
        "[A-Z][A-Za-z]{0,8}",
        prop::sample::select(vec!["True", "False", "Unknown"]),
        prop::sample::select(CONDITION_TYPES.to_vec()),
    )
        .prop_map(
            |(t, message, observed_generation, reason, status, type_)| Condition {
                last_transition_time: t,
                message,
                observed_generation,
                reason,
                status: status.to_string(),
                type_: type_.to_string(),
            },
        )
        .boxed()
}

fn conditions() -> BoxedStrategy<Vec<Condition>> {
    vec(condition(), 0..4)
        .prop_map(|c| unique(c, |c| c.type_.clone()))
        .boxed()
}

/// The object around a body, with metadata a user or CAPI may have set.
fn object<S: Serialize, T: Serialize>(
    api_version: &str,
    kind: &str,
    meta: (String, BTreeMap<String, String>, BTreeMap<String, String>),
    spec: &S,
    status: Option<&T>,
) -> Value {
    let (name, labels, annotations) = meta;
    let mut metadata = json!({"name": name, "namespace": "default", "uid": "0b3a4f4e"});
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    if !annotations.is_empty() {
        metadata["annotations"] = json!(annotations);
    }
    let mut o = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata,
                       "spec": serde_json::to_value(spec).unwrap()});
    if let Some(status) = status {
        o["status"] = serde_json::to_value(status).unwrap();
    }
    o
}

fn meta() -> impl Strategy<Value = (String, BTreeMap<String, String>, BTreeMap<String, String>)> {
    (word(), map(), map())
}

// ---- v1alpha3 ----

fn secret_ref() -> impl Strategy<Value = SecretRef> {
    (word(), of(word())).prop_map(|(name, namespace)| SecretRef { name, namespace })
}

fn ip_config() -> BoxedStrategy<IpConfig> {
    (vec(ipv4(), 1..3), 0u8..=128, of(ipv4()), of(any::<u32>()))
        .prop_map(|(addresses, prefix, gateway, metric)| IpConfig {
            addresses,
            prefix,
            gateway,
            metric,
        })
        .boxed()
}

fn hints() -> impl Strategy<Value = SchedulerHints> {
    of(0u32..=10_000).prop_map(|memory_adjustment| SchedulerHints { memory_adjustment })
}

fn selector() -> BoxedStrategy<TemplateSelector> {
    (
        vec("[a-z0-9_][a-z0-9_.-]{0,6}", 1..3),
        of(prop::sample::select(vec![
            MatchPolicy::Exact,
            MatchPolicy::UniqueSubset,
            MatchPolicy::BestSubset,
        ])),
    )
        .prop_map(|(match_tags, match_policy)| TemplateSelector {
            match_tags,
            match_policy,
        })
        .boxed()
}

fn template_source() -> BoxedStrategy<TemplateSource> {
    prop_oneof![
        (word(), 100u32..=999_999_999).prop_map(|(n, id)| TemplateSource {
            source_node: Some(n),
            template_id: Some(id),
            template_selector: None,
        }),
        selector().prop_map(|s| TemplateSource {
            template_selector: Some(s),
            ..TemplateSource::default()
        }),
    ]
    .boxed()
}

fn vm_id_range() -> impl Strategy<Value = VmIdRange> {
    (100u32..=999_999_999, 0u32..10_000).prop_map(|(start, len)| VmIdRange {
        start,
        end: start.saturating_add(len).min(999_999_999),
    })
}

fn instance() -> BoxedStrategy<InstanceSpec> {
    (
        word(),
        secret_ref(),
        words(2),
        of(template_source()),
        of(vm_id_range()),
        of(any::<bool>()),
        of((
            of(ip_config()),
            of(ip_config()),
            vec(ipv4(), 0..2),
            of(word()),
        )),
        (
            of(hints()),
            of(cpu_spec()),
            of(media_spec()),
            prop::collection::btree_map(word(), word(), 0..2),
        ),
    )
        .prop_map(
            |(
                name,
                credentials_ref,
                nodes,
                template,
                vm_id_range,
                control_plane,
                net,
                (scheduler_hints, cpu, bootstrap_media, pci_mappings),
            )| {
                InstanceSpec {
                    pci_mappings,
                    ha: None,
                    arch: None,
                    // A pool on every other name length: both shapes round-trip.
                    pool: (name.len() % 2 == 0).then(|| format!("{name}-pool")),
                    cpu,
                    bootstrap_media,
                    name,
                    credentials_ref,
                    nodes,
                    template,
                    vm_id_range,
                    control_plane,
                    network: net.map(|(ipv4_config, ipv6_config, dns_servers, bridge)| {
                        InstanceNetwork {
                            ipv4_config,
                            ipv6_config,
                            dns_servers,
                            bridge,
                        }
                    }),
                    scheduler_hints,
                }
            },
        )
        .boxed()
}

fn cluster_spec_v3() -> BoxedStrategy<ProxmoxClusterSpec> {
    (
        of((word(), 1i32..=65535).prop_map(|(host, port)| ApiEndpoint { host, port })),
        of(any::<bool>()),
        of(secret_ref()),
        words(3),
        of(hints()),
        of(ip_config()),
        of(ip_config()),
        vec(ipv4(), 0..3),
        of(prop::sample::select(vec![
            ProviderIdFormat::Uuid,
            ProviderIdFormat::InstanceVmid,
        ])),
        of((
            of(prop::sample::select(vec![
                ClusterMode::Default,
                ClusterMode::SingleInstance,
                ClusterMode::MultiInstance,
            ])),
            vec(instance(), 0..3),
        )),
        // Rare: most objects should convert without conversion data.
        proptest::option::weighted(0.1, endpoint_pool()),
    )
        .prop_map(
            |(
                endpoint,
                external,
                credentials_ref,
                allowed_nodes,
                scheduler_hints,
                ipv4_config,
                ipv6_config,
                dns_servers,
                provider_id_format,
                settings,
                control_plane_endpoint_pool,
            )| {
                ProxmoxClusterSpec {
                    control_plane_endpoint_pool,
                    control_plane_endpoint: endpoint,
                    external_managed_control_plane: external,
                    credentials_ref,
                    allowed_nodes,
                    scheduler_hints,
                    ipv4_config,
                    ipv6_config,
                    dns_servers,
                    provider_id_format,
                    settings: settings.map(|(mode, instances)| ClusterSettings {
                        mode,
                        instances: unique(instances, |i| i.name.clone()),
                    }),
                }
            },
        )
        .boxed()
}

fn pool_reference() -> BoxedStrategy<IpPoolReference> {
    (word(), word(), word())
        .prop_map(|(api_group, kind, name)| IpPoolReference {
            api_group,
            kind,
            name,
        })
        .boxed()
}

fn endpoint_pool() -> BoxedStrategy<EndpointPool> {
    (
        of(pool_reference()),
        vec(ipv4(), 0..3),
        of(0u8..=128),
        of(1i32..=65535),
    )
        .prop_map(|(pool_ref, addresses, prefix, port)| EndpointPool {
            pool_ref,
            addresses,
            prefix,
            port,
        })
        .boxed()
}

fn endpoint_claim() -> BoxedStrategy<EndpointClaimStatus> {
    (word(), pool_reference(), of(ipv4()))
        .prop_map(|(name, pool_ref, address)| EndpointClaimStatus {
            name,
            pool_ref,
            address,
        })
        .boxed()
}

fn cluster_status_v3() -> BoxedStrategy<ProxmoxClusterStatus> {
    (
        of(of(any::<bool>()).prop_map(|provisioned| Initialization { provisioned })),
        conditions(),
        vec((word(), of(any::<bool>()), map()), 0..3),
        vec(
            (
                word(),
                any::<bool>(),
                0u32..50,
                words(2),
                of(word()),
                of("[ -~]{0,10}"),
                of(any::<bool>()),
            ),
            0..3,
        ),
        of("[0-9]/[0-9]"),
        vec(
            (
                of(word()),
                prop::sample::select(vec!["ipv4", "ipv6"]),
                word(),
            ),
            0..3,
        ),
        of(0i64..100),
        proptest::option::weighted(0.1, endpoint_claim()),
    )
        .prop_map(
            |(
                initialization,
                conditions,
                fds,
                instances,
                instances_ready,
                pools,
                observed_generation,
                control_plane_endpoint_claim,
            )| {
                ProxmoxClusterStatus {
                    initialization,
                    conditions,
                    failure_domains: unique(
                        fds.into_iter()
                            .map(|(name, control_plane, attributes)| FailureDomain {
                                name,
                                control_plane,
                                attributes,
                            })
                            .collect(),
                        |f| f.name.clone(),
                    ),
                    instances: unique(
                        instances
                            .into_iter()
                            .map(
                                |(name, ready, machines, nodes, version, message, selected)| {
                                    InstanceStatus {
                                        missing_privileges: Vec::new(),
                                        pool_problem: message.clone(),
                                        name,
                                        ready,
                                        machines,
                                        nodes,
                                        version,
                                        message,
                                        selected,
                                    }
                                },
                            )
                            .collect(),
                        |i| i.name.clone(),
                    ),
                    instances_ready,
                    ip_pools: pools
                        .into_iter()
                        .map(|(instance, family, name)| IpPoolStatus {
                            instance,
                            family: family.to_string(),
                            api_group: "ipam.cluster.x-k8s.io".into(),
                            kind: "InClusterIPPool".into(),
                            name,
                        })
                        .collect(),
                    observed_generation,
                    control_plane_endpoint_claim,
                }
            },
        )
        .boxed()
}

fn disk_slot() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u8..=30).prop_map(|i| format!("scsi{i}")),
        (0u8..=15).prop_map(|i| format!("virtio{i}")),
        (0u8..=5).prop_map(|i| format!("sata{i}")),
    ]
}

fn disk_format() -> impl Strategy<Value = DiskFormat> {
    prop::sample::select(vec![DiskFormat::Raw, DiskFormat::Qcow2, DiskFormat::Vmdk])
}

fn disks_v3() -> BoxedStrategy<Disks> {
    (
        of((disk_slot(), 1u32..=131_072).prop_map(|(disk, size_gb)| DiskSize { disk, size_gb })),
        vec(
            (
                disk_slot(),
                1u32..=131_072,
                of(word()),
                of(disk_format()),
                of(any::<bool>()),
                of(any::<bool>()),
                of(any::<bool>()),
            ),
            0..3,
        ),
    )
        .prop_map(|(boot_volume, extra)| Disks {
            boot_volume,
            additional_volumes: unique(
                extra
                    .into_iter()
                    .map(|(disk, size_gb, storage, format, discard, ssd, iothread)| {
                        AdditionalVolume {
                            disk,
                            size_gb,
                            storage,
                            format,
                            discard,
                            ssd,
                            iothread,
                        }
                    })
                    .collect(),
                |v| v.disk.clone(),
            ),
        })
        .boxed()
}

fn device_v3() -> BoxedStrategy<NetworkDevice> {
    (
        (0u8..=31).prop_map(|i| format!("net{i}")),
        of(word()),
        of(prop::sample::select(vec![
            NicModel::Virtio,
            NicModel::E1000,
            NicModel::E1000e,
            NicModel::Rtl8139,
            NicModel::Vmxnet3,
        ])),
        of(1u16..=4094),
        of(any::<u32>()),
        of("02(:[0-9a-f]{2}){5}"),
        (
            of(any::<bool>()),
            of(any::<bool>()),
            of(any::<bool>()),
            of(any::<bool>()),
        ),
        vec((word(), word()), 0..=2),
        vec(ipv4(), 0..2),
    )
        .prop_map(
            |(
                name,
                bridge,
                model,
                vlan,
                mtu,
                mac_address,
                (firewall, link_down, dhcp4, dhcp6),
                pools,
                dns_servers,
            )| {
                NetworkDevice {
                    name,
                    bridge,
                    model,
                    vlan,
                    mtu,
                    mac_address,
                    firewall,
                    link_down,
                    ip_pool_ref: pools
                        .into_iter()
                        .map(|(kind, name)| IpPoolReference {
                            api_group: "ipam.cluster.x-k8s.io".into(),
                            kind,
                            name,
                        })
                        .collect(),
                    dhcp4,
                    dhcp6,
                    dns_servers,
                }
            },
        )
        .boxed()
}

fn machine_spec_v3() -> BoxedStrategy<ProxmoxMachineSpec> {
    (
        (
            of("proxmox://[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
            of(word()),
            of(100u32..=999_999_999),
            of(template_source()),
            of(word()),
            of(any::<bool>()),
            of(word()),
            of(disk_format()),
        ),
        (
            of(word()),
            of(word()),
            of("[ -~]{0,20}"),
            of(1u32..=4),
            of(1u32..=256),
            of(16u32..=8_388_608),
            of(disks_v3()),
            of(vec(device_v3(), 0..4).prop_map(|d| NetworkSpec {
                network_devices: unique(d, |d| d.name.clone()),
            })),
        ),
        (
            of(vm_id_range()),
            words(2),
            vec("[a-z0-9_][a-z0-9_.-]{0,6}", 0..3),
            of((of(any::<bool>()), of(any::<bool>()))),
            of(of(any::<bool>())),
            of(any::<bool>()),
            of("order=[0-9],up=[0-9]{1,3}"),
            of("order=scsi0(;net0)?"),
        ),
        (of(cpu_spec()), of(media_spec()), vec(pci_device(), 0..3)),
    )
        .prop_map(|(a, b, c, (cpu, bootstrap_media, pci_devices))| {
            let (
                provider_id,
                instance,
                virtual_machine_id,
                template,
                target,
                full,
                storage,
                format,
            ) = a;
            let (pool, snap_name, description, num_sockets, num_cores, memory_mib, disks, network) =
                b;
            let (
                vm_id_range,
                allowed_nodes,
                tags,
                checks,
                metadata_settings,
                on_boot,
                startup,
                boot_order,
            ) = c;
            let template = template.unwrap_or_default();
            ProxmoxMachineSpec {
                pci_devices,
                ha: None,
                provider_id,
                instance,
                virtual_machine_id,
                source_node: template.source_node,
                template_id: template.template_id,
                template_selector: template.template_selector,
                target,
                full,
                storage,
                format,
                pool,
                snap_name,
                description,
                num_sockets,
                num_cores,
                memory_mib,
                disks,
                network,
                vm_id_range,
                allowed_nodes,
                tags,
                checks: checks.map(|(skip_cloud_init_status, skip_qemu_guest_agent)| Checks {
                    skip_cloud_init_status,
                    skip_qemu_guest_agent,
                }),
                metadata_settings: metadata_settings.map(|provider_id_injection| {
                    MetadataSettings {
                        provider_id_injection,
                    }
                }),
                on_boot,
                startup,
                boot_order,
                cpu,
                bootstrap_media,
            }
        })
        .boxed()
}

fn machine_status_v3() -> BoxedStrategy<ProxmoxMachineStatus> {
    (
        of(of(any::<bool>()).prop_map(|provisioned| Initialization { provisioned })),
        conditions(),
        of(word()),
        of(word()),
        of(prop::sample::select(vec!["running", "stopped"])),
        vec(
            (prop::sample::select(vec!["Hostname", "InternalIP"]), ipv4()),
            0..3,
        ),
        vec(
            (
                (0u8..4).prop_map(|i| format!("net{i}")),
                vec(ipv4(), 0..2),
                vec("fd00::[0-9a-f]{1,4}", 0..2),
            ),
            0..3,
        ),
        vec(
            (
                (0u8..4).prop_map(|i| format!("net{i}")),
                of("BC(:[0-9A-F]{2}){5}"),
                of(word()),
                of(1u16..=4094),
                of(any::<u32>()),
            ),
            0..3,
        ),
        (
            of("UPID:[a-z0-9:]{4,12}"),
            of(any::<bool>()),
            of(0i64..100),
            of(
                (word(), word()).prop_map(|(node, file)| crate::api::machine::BootstrapMedia {
                    node,
                    volume: format!("local:iso/{file}.iso"),
                }),
            ),
        ),
    )
        .prop_map(
            |(
                initialization,
                conditions,
                failure_domain,
                proxmox_node,
                vm_status,
                addresses,
                ips,
                network,
                (task_ref, bootstrap_data_provided, observed_generation, bootstrap_media),
            )| {
                ProxmoxMachineStatus {
                    ha_resource: None,
                    bootstrap_media_deleted: None,
                    initialization,
                    conditions,
                    failure_domain,
                    proxmox_node,
                    vm_status: vm_status.map(str::to_string),
                    addresses: addresses
                        .into_iter()
                        .map(|(t, address)| MachineAddress {
                            type_: t.to_string(),
                            address,
                        })
                        .collect(),
                    ip_addresses: unique(
                        ips.into_iter()
                            .map(|(net, ipv4, ipv6)| DeviceAddresses { net, ipv4, ipv6 })
                            .collect(),
                        |a| a.net.clone(),
                    ),
                    network: network
                        .into_iter()
                        .map(|(name, mac_address, bridge, vlan, mtu)| NetworkStatus {
                            name,
                            mac_address,
                            bridge,
                            vlan,
                            mtu,
                        })
                        .collect(),
                    task_ref,
                    bootstrap_data_provided,
                    bootstrap_media,
                    observed_generation,
                }
            },
        )
        .boxed()
}

fn template_meta_v3() -> impl Strategy<Value = Option<ObjectMetaTemplate>> {
    of(
        (map(), map()).prop_map(|(labels, annotations)| ObjectMetaTemplate {
            labels,
            annotations,
        }),
    )
}

fn machine_template_status_v3() -> BoxedStrategy<ProxmoxMachineTemplateStatus> {
    (
        proptest::collection::btree_map(
            prop::sample::select(vec!["cpu".to_string(), "memory".to_string()]),
            "[1-9][0-9]{0,3}(Mi)?".prop_map(Quantity),
            0..=2,
        ),
        of((
            of(prop::sample::select(vec!["amd64", "arm64"])),
            of(Just("linux")),
        )),
    )
        .prop_map(|(capacity, node_info)| ProxmoxMachineTemplateStatus {
            capacity,
            node_info: node_info.map(|(a, o)| NodeInfo {
                architecture: a.map(str::to_string),
                operating_system: o.map(str::to_string),
            }),
        })
        .boxed()
}

/// A random valid `v1alpha3` object of each kind.
fn any_v1alpha3() -> BoxedStrategy<Value> {
    prop_oneof![
        (meta(), cluster_spec_v3(), of(cluster_status_v3())).prop_map(|(m, s, st)| object(
            V1ALPHA3,
            "ProxmoxCluster",
            m,
            &s,
            st.as_ref()
        )),
        (meta(), template_meta_v3(), cluster_spec_v3()).prop_map(|(m, metadata, spec)| {
            let s = ProxmoxClusterTemplateSpec {
                template: ProxmoxClusterTemplateResource { metadata, spec },
            };
            object::<_, NoStatus>(V1ALPHA3, "ProxmoxClusterTemplate", m, &s, None)
        }),
        (meta(), machine_spec_v3(), of(machine_status_v3())).prop_map(|(m, s, st)| object(
            V1ALPHA3,
            "ProxmoxMachine",
            m,
            &s,
            st.as_ref()
        )),
        (
            meta(),
            template_meta_v3(),
            machine_spec_v3(),
            of(machine_template_status_v3())
        )
            .prop_map(|(m, metadata, spec, st)| {
                let s = ProxmoxMachineTemplateSpec {
                    template: ProxmoxMachineTemplateResource { metadata, spec },
                };
                object(V1ALPHA3, "ProxmoxMachineTemplate", m, &s, st.as_ref())
            }),
    ]
    .boxed()
}

// ---- v1alpha2 (what the conversion accepts) ----

fn ip_config_v2() -> BoxedStrategy<v2::cluster::IpConfig> {
    (vec(ipv4(), 1..3), ipv4(), 0i32..=i32::MAX, 1i32..=128)
        .prop_map(
            |(addresses, gateway, metric, prefix)| v2::cluster::IpConfig {
                addresses,
                gateway: Some(gateway),
                metric: Some(metric),
                prefix,
            },
        )
        .boxed()
}

fn cluster_spec_v2() -> BoxedStrategy<v2::ProxmoxClusterSpec> {
    (
        words(3),
        of((word(), 1i32..=65535)),
        of((word(), of(word()))),
        vec(ipv4(), 1..3),
        any::<bool>(),
        of(ip_config_v2()),
        of(ip_config_v2()),
        of(of(0i64..=u32::MAX.into())),
    )
        .prop_map(
            |(
                allowed_nodes,
                endpoint,
                credentials,
                dns_servers,
                external,
                ipv4_config,
                ipv6_config,
                hints,
            )| {
                v2::ProxmoxClusterSpec {
                    allowed_nodes,
                    control_plane_endpoint: endpoint.map(|(h, p)| v2::cluster::ApiEndpoint {
                        host: Some(h),
                        port: Some(p),
                    }),
                    credentials_ref: credentials.map(|(n, ns)| v2::cluster::SecretReference {
                        name: Some(n),
                        namespace: ns,
                    }),
                    dns_servers,
                    external_managed_control_plane: Some(external),
                    ipv4_config,
                    ipv6_config,
                    scheduler_hints: hints
                        .map(|memory_adjustment| v2::cluster::SchedulerHints { memory_adjustment }),
                    zone_configs: Vec::new(),
                }
            },
        )
        .boxed()
}

fn condition_v2() -> BoxedStrategy<v2::common::Condition> {
    condition()
        .prop_map(|c| v2::common::Condition {
            last_transition_time: c.last_transition_time,
            message: c.message,
            observed_generation: c.observed_generation,
            reason: c.reason,
            status: c.status,
            type_: c.type_,
        })
        .boxed()
}

fn conditions_v2() -> BoxedStrategy<Vec<v2::common::Condition>> {
    vec(condition_v2(), 0..4)
        .prop_map(|c| unique(c, |c| c.type_.clone()))
        .boxed()
}

fn local_ref() -> impl Strategy<Value = v2::common::LocalObjectReference> {
    word().prop_map(|name| v2::common::LocalObjectReference { name })
}

fn location() -> BoxedStrategy<v2::cluster::NodeLocation> {
    (local_ref(), word(), of(word()))
        .prop_map(|(machine, node, zone)| v2::cluster::NodeLocation {
            machine,
            node,
            zone,
        })
        .boxed()
}

fn cluster_status_v2() -> BoxedStrategy<v2::ProxmoxClusterStatus> {
    (
        conditions_v2(),
        vec(local_ref(), 0..3),
        vec((of(local_ref()), of(local_ref()), word()), 0..3),
        of(of(any::<bool>()).prop_map(|provisioned| v2::common::Initialization { provisioned })),
        of((vec(location(), 0..3), vec(location(), 0..3))),
    )
        .prop_map(|(conditions, pools, zones, initialization, locations)| {
            v2::ProxmoxClusterStatus {
                conditions,
                in_cluster_ip_pool_ref: pools,
                in_cluster_zone_ref: unique(
                    zones
                        .into_iter()
                        .map(|(v4, v6, zone)| v2::cluster::InClusterZoneRef {
                            in_cluster_ip_pool_ref_v4: v4,
                            in_cluster_ip_pool_ref_v6: v6,
                            zone,
                        })
                        .collect(),
                    |z| z.zone.clone(),
                ),
                initialization,
                node_locations: locations.map(|(control_plane, workers)| {
                    v2::cluster::NodeLocations {
                        control_plane,
                        workers,
                    }
                }),
            }
        })
        .boxed()
}

/// Devices `net0`, `net1`, ... with the default flags the conversion accepts
/// for each (module doc of `conversion::machine`).
fn devices_v2() -> BoxedStrategy<Vec<v2::machine::NetworkDevice>> {
    let device = (
        of(word()),
        (of(any::<bool>()), of(any::<bool>())),
        vec(ipv4(), 0..2),
        vec((word(), word()), 0..=2),
        prop::sample::select(vec!["e1000", "virtio", "rtl8139", "vmxnet3"]),
        of(0i32..=65520),
        of(1i32..=4094),
    );
    vec(device, 0..4)
        .prop_map(|devices| {
            devices
                .into_iter()
                .enumerate()
                .map(
                    |(i, (bridge, (f4, f6), dns_servers, pools, model, mtu, vlan))| {
                        let ip_pool_ref: Vec<_> = pools
                            .into_iter()
                            .map(|(kind, name)| v2::machine::TypedLocalObjectReference {
                                api_group: Some("ipam.cluster.x-k8s.io".into()),
                                kind,
                                name,
                            })
                            .collect();
                        // net0 without pools: unset or true; anywhere else: unset or false.
                        let accepted = |f: Option<bool>| match f {
                            Some(v) if i == 0 && ip_pool_ref.is_empty() => Some(true).filter(|_| v),
                            Some(v) => Some(false).filter(|_| !v),
                            None => None,
                        };
                        v2::machine::NetworkDevice {
                            bridge,
                            default_ipv4: accepted(f4),
                            default_ipv6: accepted(f6),
                            dns_servers,
                            ip_pool_ref,
                            model: Some(model.to_string()),
                            mtu,
                            name: format!("net{i}"),
                            vlan,
                            ..v2::machine::NetworkDevice::default()
                        }
                    },
                )
                .collect()
        })
        .boxed()
}

fn machine_spec_v2() -> BoxedStrategy<v2::ProxmoxMachineSpec> {
    (
        (
            words(2),
            of((of(any::<bool>()), of(any::<bool>()))),
            of("[ -~]{0,20}"),
            of(of((word(), 5i32..=131_072))),
            of(prop::sample::select(vec!["raw", "qcow2", "vmdk"])),
            any::<bool>(),
            of((0i32..=1_048_576).prop_map(|m| m * 8)),
            of(of(any::<bool>())),
        ),
        (
            of(devices_v2()),
            of(1i32..=256),
            of(1i32..=4),
            of(word()),
            of("proxmox://[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"),
            of(word()),
            of(word()),
        ),
        (
            vec("[a-z0-9_][a-z0-9_.-]{0,6}", 0..3),
            prop_oneof![
                (word(), 0i32..=i32::MAX).prop_map(|(n, id)| (Some(n), Some(id), None)),
                (
                    vec("[a-z0-9_][a-z0-9_.-]{0,6}", 1..3),
                    prop::sample::select(vec!["exact", "uniqueSubset", "bestSubset"])
                )
                    .prop_map(|(match_tags, p)| (
                        None,
                        None,
                        Some(v2::machine::TemplateSelector {
                            match_policy: Some(p.to_string()),
                            match_tags
                        })
                    )),
            ],
            of(0i64..=u32::MAX.into()),
            of((100i64..=999_999_999, 0i64..1000)),
        ),
    )
        .prop_map(|(a, b, c)| {
            let (
                allowed_nodes,
                checks,
                description,
                disks,
                format,
                full,
                memory_mib,
                metadata_settings,
            ) = a;
            let (network, num_cores, num_sockets, pool, provider_id, snap_name, storage) = b;
            let (tags, (source_node, template_id, template_selector), virtual_machine_id, range) =
                c;
            v2::ProxmoxMachineSpec {
                allowed_nodes,
                checks: checks.map(|(skip_cloud_init_status, skip_qemu_guest_agent)| {
                    v2::machine::Checks {
                        skip_cloud_init_status,
                        skip_qemu_guest_agent,
                    }
                }),
                description,
                disks: disks.map(|b| v2::machine::Storage {
                    boot_volume: b.map(|(disk, size_gb)| v2::machine::DiskSize { disk, size_gb }),
                }),
                format: format.map(str::to_string),
                full: Some(full),
                memory_mib,
                metadata_settings: metadata_settings.map(|provider_id_injection| {
                    v2::machine::MetadataSettings {
                        provider_id_injection,
                    }
                }),
                network: network.map(|network_devices| v2::machine::NetworkSpec {
                    network_devices,
                    ..v2::machine::NetworkSpec::default()
                }),
                num_cores,
                num_sockets,
                pool,
                provider_id,
                snap_name,
                source_node,
                storage,
                tags,
                template_id,
                template_selector,
                virtual_machine_id,
                vm_id_range: range.map(|(start, len)| v2::machine::VmIdRange {
                    start,
                    end: (start + len).min(999_999_999),
                }),
            }
        })
        .boxed()
}

fn machine_status_v2() -> BoxedStrategy<v2::ProxmoxMachineStatus> {
    let net = prop_oneof![
        Just("default".to_string()),
        (0u8..4).prop_map(|i| format!("net{i}"))
    ];
    (
        vec(
            (
                ipv4(),
                prop::sample::select(vec!["Hostname", "InternalIP", "ExternalIP"]),
            ),
            0..3,
        ),
        of(any::<bool>()),
        conditions_v2(),
        of(of(any::<bool>()).prop_map(|provisioned| v2::common::Initialization { provisioned })),
        vec(
            (net, vec(ipv4(), 0..2), vec("fd00::[0-9a-f]{1,4}", 0..2)),
            0..3,
        ),
        vec(
            (
                of(any::<bool>()),
                vec(ipv4(), 0..2),
                of("BC(:[0-9A-F]{2}){5}"),
                of(prop_oneof![
                    Just(String::new()),
                    (0u8..4).prop_map(|i| format!("net{i}"))
                ]),
            ),
            0..3,
        ),
        (
            of(word()),
            of(time()),
            of("UPID:[a-z0-9:]{4,12}"),
            of(prop::sample::select(vec!["notfound", "pending", "ready"])),
        ),
    )
        .prop_map(
            |(
                addresses,
                bootstrap_data_provided,
                conditions,
                initialization,
                ips,
                network,
                (proxmox_node, retry_after, task_ref, vm_status),
            )| {
                v2::ProxmoxMachineStatus {
                    addresses: addresses
                        .into_iter()
                        .map(|(address, t)| v2::machine::MachineAddress {
                            address,
                            type_: t.to_string(),
                        })
                        .collect(),
                    bootstrap_data_provided,
                    conditions,
                    initialization,
                    ip_addresses: unique(
                        ips.into_iter()
                            .map(|(net, ipv4, ipv6)| v2::machine::IpAddresses { ipv4, ipv6, net })
                            .collect(),
                        |a| a.net.clone(),
                    ),
                    network: network
                        .into_iter()
                        .map(|(connected, ip_addrs, mac_addr, network_name)| {
                            v2::machine::NetworkStatus {
                                connected,
                                ip_addrs,
                                mac_addr,
                                network_name,
                            }
                        })
                        .collect(),
                    proxmox_node,
                    retry_after,
                    task_ref,
                    vm_status: vm_status.map(str::to_string),
                }
            },
        )
        .boxed()
}

fn template_meta_v2() -> impl Strategy<Value = Option<v2::common::ObjectMeta>> {
    of(
        (map(), map()).prop_map(|(labels, annotations)| v2::common::ObjectMeta {
            annotations,
            labels,
        }),
    )
}

/// A random `v1alpha2` object of each kind that the conversion accepts.
fn any_v1alpha2() -> BoxedStrategy<Value> {
    prop_oneof![
        (meta(), cluster_spec_v2(), of(cluster_status_v2())).prop_map(|(m, s, st)| object(
            V1ALPHA2,
            "ProxmoxCluster",
            m,
            &s,
            st.as_ref()
        )),
        (meta(), template_meta_v2(), cluster_spec_v2()).prop_map(|(m, metadata, spec)| {
            let s = v2::ProxmoxClusterTemplateSpec {
                template: v2::templates::ProxmoxClusterTemplateResource { metadata, spec },
            };
            object::<_, NoStatus>(V1ALPHA2, "ProxmoxClusterTemplate", m, &s, None)
        }),
        (meta(), machine_spec_v2(), of(machine_status_v2())).prop_map(|(m, s, st)| object(
            V1ALPHA2,
            "ProxmoxMachine",
            m,
            &s,
            st.as_ref()
        )),
        (meta(), template_meta_v2(), machine_spec_v2()).prop_map(|(m, metadata, spec)| {
            let s = v2::ProxmoxMachineTemplateSpec {
                template: v2::templates::ProxmoxMachineTemplateResource { metadata, spec },
            };
            object::<_, NoStatus>(V1ALPHA2, "ProxmoxMachineTemplate", m, &s, None)
        }),
    ]
    .boxed()
}

/// What kube-apiserver does to a `v1alpha2` object it is given: fill in the
/// schema's defaults.
fn apiserver_defaults(o: &Value) -> Value {
    let kind = Kind::parse(o["kind"].as_str().unwrap()).unwrap();
    let body: Body = o
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k == "spec" || *k == "status")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut out = o.clone();
    for (k, v) in defaults::apply(kind, &body).unwrap() {
        out[k] = v;
    }
    out
}

/// An edit of a field both versions hold (per kind) to a value made of
/// `words`: its path and the value.
fn edit(kind: &str, words: &[String]) -> (&'static [&'static str], Value) {
    match kind {
        "ProxmoxCluster" => (&["spec", "dnsServers"], json!(words)),
        "ProxmoxClusterTemplate" => (&["spec", "template", "spec", "allowedNodes"], json!(words)),
        "ProxmoxMachine" => (&["spec", "description"], json!(words.join("-"))),
        _ => (
            &["spec", "template", "spec", "pool"],
            json!(words.join("-")),
        ),
    }
}

fn set(o: &mut Value, path: &[&str], v: Value) {
    let mut at = o;
    for p in &path[..path.len() - 1] {
        at = &mut at[*p];
    }
    at[path[path.len() - 1]] = v;
}

/// `o` converted to `there`, edited there (kube-apiserver's `v1alpha2`
/// defaults filled in when `there` is `v1alpha2`), converted back; and `o`
/// with the same edit.
fn edited_round_trip(
    o: &Value,
    there: &str,
    words: &[String],
) -> Result<(Value, Value), TestCaseError> {
    let back_to = o["apiVersion"].as_str().unwrap().to_string();
    let (path, value) = edit(o["kind"].as_str().unwrap(), words);
    let mut other = convert(o, there).map_err(|e| TestCaseError::fail(e.to_string()))?;
    set(&mut other, path, value.clone());
    if there == V1ALPHA2 {
        other = apiserver_defaults(&other);
    }
    let back = convert(&other, &back_to).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let mut want = o.clone();
    set(&mut want, path, value);
    Ok((back, want))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn v1alpha2_to_v1alpha3_and_back_is_identity(o in any_v1alpha2()) {
        let v3 = convert(&o, V1ALPHA3).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&v3["apiVersion"], V1ALPHA3);
        let back = convert(&v3, V1ALPHA2).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, o);
    }

    #[test]
    fn v1alpha3_to_v1alpha2_and_back_is_identity(o in any_v1alpha3()) {
        let v2 = convert(&o, V1ALPHA2).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&v2["apiVersion"], V1ALPHA2);
        let back = convert(&v2, V1ALPHA3).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, o);
    }

    #[test]
    fn v1alpha3_survives_the_v1alpha2_defaults(o in any_v1alpha3()) {
        let v2 = convert(&o, V1ALPHA2).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let back = convert(&apiserver_defaults(&v2), V1ALPHA3).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back, o);
    }

    #[test]
    fn an_edit_through_v1alpha2_wins_and_the_rest_comes_back(o in any_v1alpha3(), words in vec(word(), 1..3)) {
        let (back, want) = edited_round_trip(&o, V1ALPHA2, &words)?;
        prop_assert_eq!(back, want);
    }

    #[test]
    fn an_edit_through_v1alpha3_wins_and_what_only_v1alpha2_holds_comes_back(o in any_v1alpha2(), words in vec(word(), 1..3)) {
        let (back, want) = edited_round_trip(&o, V1ALPHA3, &words)?;
        prop_assert_eq!(back, want);
    }

}

#[test]
fn the_generators_cover_every_kind_and_the_conversion_data() {
    // The properties above hold trivially if the generators never produce
    // what needs the conversion data; count that they do.
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::new(config());
    let mut kinds = std::collections::BTreeSet::new();
    let (mut kept_up, mut kept_down) = (0, 0);
    for _ in 0..200 {
        let o2 = any_v1alpha2().new_tree(&mut runner).unwrap().current();
        kinds.insert(format!("v2 {}", o2["kind"]));
        if convert(&o2, V1ALPHA3).unwrap()["metadata"]["annotations"]
            .get(CONVERSION_DATA_ANNOTATION)
            .is_some()
        {
            kept_up += 1;
        }
        let o3 = any_v1alpha3().new_tree(&mut runner).unwrap().current();
        kinds.insert(format!("v3 {}", o3["kind"]));
        if convert(&o3, V1ALPHA2).unwrap()["metadata"]["annotations"]
            .get(CONVERSION_DATA_ANNOTATION)
            .is_some()
        {
            kept_down += 1;
        }
    }
    assert_eq!(kinds.len(), 8, "{kinds:?}");
    assert!(
        kept_up > 20 && kept_up < 200,
        "v1alpha2 → v1alpha3 kept data {kept_up} times of 200"
    );
    assert!(
        kept_down > 20 && kept_down < 200,
        "v1alpha3 → v1alpha2 kept data {kept_down} times of 200"
    );
}

fn cpu_spec() -> impl Strategy<Value = CpuSpec> {
    (
        of(prop::sample::select(vec![
            "host",
            "x86-64-v2-AES",
            "custom-a1",
        ])),
        prop::collection::vec("[+-](aes|pcid|md-clear)", 0..3),
    )
        .prop_map(|(t, flags)| CpuSpec {
            type_: t.map(str::to_string),
            flags,
        })
}

fn media_spec() -> impl Strategy<Value = BootstrapMediaSpec> {
    (
        of(prop::sample::select(vec!["local", "nfs-iso"])),
        of(prop::sample::select(vec![
            CdromBus::Ide,
            CdromBus::Sata,
            CdromBus::Scsi,
        ])),
    )
        .prop_map(|(s, cdrom_bus)| BootstrapMediaSpec {
            storage: s.map(str::to_string),
            cdrom_bus,
        })
}

fn pci_device() -> impl Strategy<Value = PciDeviceSpec> {
    (
        "[a-z][a-z0-9-]{0,8}",
        of(any::<bool>()),
        of(any::<bool>()),
        of(any::<bool>()),
        of("nvidia-[0-9]{2}"),
    )
        .prop_map(|(mapping, pcie, rombar, primary_gpu, mdev)| PciDeviceSpec {
            mapping,
            pcie,
            rombar,
            primary_gpu,
            mdev,
        })
}
