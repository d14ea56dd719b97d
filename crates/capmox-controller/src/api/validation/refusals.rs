//! The early-refusal table: values that parse but cannot work, one row per
//! mistake, each with the field path and the whole message written out. A
//! row passes when the validation reports exactly that problem (among
//! others the same edit may cause).

use serde_json::{Value, json};

use super::tests::{remove, set, valid_cluster, valid_machine};
use super::*;
use crate::api::{ProxmoxClusterSpec, ProxmoxClusterTemplateSpec, ProxmoxMachineSpec};

struct Row {
    name: &'static str,
    edit: fn(&mut Value),
    path: &'static str,
    message: &'static str,
}

fn v4(addresses: Value, prefix: u8, gateway: &str) -> Value {
    json!({"addresses": addresses, "prefix": prefix, "gateway": gateway})
}

const A_V4: &str = "/settings/instances/0/network/ipv4Config";

fn cluster_rows() -> Vec<Row> {
    vec![
        Row {
            name: "pool in the loopback block",
            edit: |v| {
                set(
                    v,
                    A_V4,
                    v4(json!(["127.0.0.10-127.0.0.20"]), 8, "127.0.0.1"),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            message: "\"127.0.0.10-127.0.0.20\" includes addresses of the loopback block 127.0.0.0/8, which no host can have: write addresses of the node subnet",
        },
        Row {
            name: "gateway in the loopback block",
            edit: |v| {
                set(
                    v,
                    A_V4,
                    v4(json!(["127.0.0.10-127.0.0.20"]), 8, "127.0.0.1"),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.gateway",
            message: "127.0.0.1 cannot be the gateway: it lies in the loopback block 127.0.0.0/8; write the router's address in the subnet",
        },
        Row {
            name: "pool in the link-local block",
            edit: |v| set(v, A_V4, v4(json!(["169.254.10.0/24"]), 24, "169.254.10.1")),
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            message: "\"169.254.10.0/24\" includes addresses of the link-local block 169.254.0.0/16, which no host can have: write addresses of the node subnet",
        },
        Row {
            name: "IPv6 pool in the multicast block",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/network/ipv6Config",
                    json!({"addresses": ["ff05::10-ff05::20"], "prefix": 64}),
                )
            },
            path: "spec.settings.instances[1].network.ipv6Config.addresses[0]",
            message: "\"ff05::10-ff05::20\" includes addresses of the multicast block ff00::/8, which no host can have: write addresses of the node subnet",
        },
        Row {
            name: "only the network address",
            edit: |v| set(v, &format!("{A_V4}/addresses"), json!(["10.10.0.0"])),
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            message: "\"10.10.0.0\" gives no address to a machine: it is the network address; remove it or list host addresses",
        },
        Row {
            name: "the broadcast address as an entry",
            edit: |v| {
                set(
                    v,
                    &format!("{A_V4}/addresses"),
                    json!(["10.10.0.100-10.10.0.200", "10.10.0.255"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[1]",
            message: "\"10.10.0.255\" gives no address to a machine: it is the broadcast address; remove it or list host addresses",
        },
        Row {
            name: "the gateway as a pool address",
            edit: |v| {
                set(
                    v,
                    &format!("{A_V4}/addresses"),
                    json!(["10.10.0.100-10.10.0.200", "10.10.0.1"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[1]",
            message: "\"10.10.0.1\" gives no address to a machine: it is the gateway; remove it or list host addresses",
        },
        Row {
            name: "overlapping ranges in one pool",
            edit: |v| {
                set(
                    v,
                    &format!("{A_V4}/addresses"),
                    json!(["10.10.0.100-10.10.0.200", "10.10.0.150-10.10.0.250"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[1]",
            message: "\"10.10.0.150-10.10.0.250\" overlaps spec.settings.instances[0].network.ipv4Config.addresses[0] at 10.10.0.150-10.10.0.200: list each address once",
        },
        Row {
            name: "range crossing the subnet",
            edit: |v| {
                set(
                    v,
                    &format!("{A_V4}/addresses"),
                    json!(["10.10.0.100-10.10.1.20"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            message: "\"10.10.0.100-10.10.1.20\" is outside 10.10.0.0/24: keep every entry in the subnet of the lowest address, or use a shorter prefix",
        },
        Row {
            name: "gateway outside its subnet",
            edit: |v| set(v, &format!("{A_V4}/gateway"), json!("10.11.0.1")),
            path: "spec.settings.instances[0].network.ipv4Config.gateway",
            message: "10.11.0.1 is outside 10.10.0.0/24: write the router's address in 10.10.0.0/24",
        },
        Row {
            name: "gateway is the network address",
            edit: |v| set(v, &format!("{A_V4}/gateway"), json!("10.10.0.0")),
            path: "spec.settings.instances[0].network.ipv4Config.gateway",
            message: "10.10.0.0 cannot be the gateway: it is the network address of 10.10.0.0/24; write the router's address in the subnet",
        },
        Row {
            name: "gateway is the broadcast address",
            edit: |v| set(v, &format!("{A_V4}/gateway"), json!("10.10.0.255")),
            path: "spec.settings.instances[0].network.ipv4Config.gateway",
            message: "10.10.0.255 cannot be the gateway: it is the broadcast address of 10.10.0.0/24; write the router's address in the subnet",
        },
        Row {
            name: "pools of two instances overlap",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/network/ipv4Config",
                    v4(json!(["10.10.0.150-10.10.0.160"]), 24, "10.10.0.1"),
                )
            },
            path: "spec.settings.instances[1].network.ipv4Config",
            message: "overlaps spec.settings.instances[0].network.ipv4Config (both can hand out 10.10.0.150-10.10.0.160): pools of different instances must be disjoint, give each instance its own addresses",
        },
        Row {
            name: "endpoint inside a node pool",
            edit: |v| set(v, "/controlPlaneEndpoint/host", json!("10.10.0.150")),
            path: "spec.controlPlaneEndpoint.host",
            message: "10.10.0.150 lies inside the node pool spec.settings.instances[0].network.ipv4Config, so a machine could get it: pick an address outside the pools",
        },
        Row {
            name: "endpoint is a gateway",
            edit: |v| set(v, "/controlPlaneEndpoint/host", json!("10.10.0.1")),
            path: "spec.controlPlaneEndpoint.host",
            message: "10.10.0.1 is the gateway of spec.settings.instances[0].network.ipv4Config: write the API server's own address",
        },
        Row {
            name: "endpoint is a subnet's broadcast address",
            edit: |v| set(v, "/controlPlaneEndpoint/host", json!("10.10.0.255")),
            path: "spec.controlPlaneEndpoint.host",
            message: "10.10.0.255 is the broadcast address of 10.10.0.0/24 (spec.settings.instances[0].network.ipv4Config): write a host address",
        },
        Row {
            name: "endpoint on loopback",
            edit: |v| set(v, "/controlPlaneEndpoint/host", json!("127.0.0.1")),
            path: "spec.controlPlaneEndpoint.host",
            message: "127.0.0.1 cannot be the API endpoint: it lies in the loopback block 127.0.0.0/8, which other machines cannot reach; write the address the API server is reached at (e.g. a kube-vip address)",
        },
        Row {
            name: "unspecified name server",
            edit: |v| set(v, "/dnsServers", json!(["0.0.0.0"])),
            path: "spec.dnsServers[0]",
            message: "0.0.0.0 cannot be a name server: it lies in the \"this network\" block 0.0.0.0/8; write the resolver's address (e.g. 1.1.1.1)",
        },
        Row {
            name: "multicast name server of an instance",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/network/dnsServers",
                    json!(["224.0.0.251"]),
                )
            },
            path: "spec.settings.instances[0].network.dnsServers[0]",
            message: "224.0.0.251 cannot be a name server: it lies in the multicast block 224.0.0.0/4; write the resolver's address (e.g. 1.1.1.1)",
        },
        Row {
            name: "one Proxmox cluster twice, sharing a node",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/credentialsRef",
                    json!({"name": "dc-a-creds"}),
                );
                set(
                    v,
                    "/settings/instances/0/nodes",
                    json!(["pve-a1", "pve-a2"]),
                );
                set(v, "/settings/instances/1/nodes", json!(["pve-a2"]));
            },
            path: "spec.settings.instances[1].nodes",
            message: "instance \"dc-b\" uses the same credentials Secret as instance \"dc-a\" (the same Proxmox cluster) and shares node \"pve-a2\" with it: give each instance its own nodes, or its own Proxmox cluster",
        },
        Row {
            name: "one Proxmox cluster twice, every node",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/credentialsRef",
                    json!({"name": "dc-a-creds"}),
                )
            },
            path: "spec.settings.instances[1].nodes",
            message: "instance \"dc-b\" uses the same credentials Secret as instance \"dc-a\" (the same Proxmox cluster) and shares every node with it (an empty nodes list means every node): give each instance its own nodes, or its own Proxmox cluster",
        },
        Row {
            name: "one Proxmox cluster twice, overlapping VMID ranges",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/credentialsRef",
                    json!({"name": "dc-a-creds"}),
                );
                set(v, "/settings/instances/0/nodes", json!(["pve-a1"]));
                set(v, "/settings/instances/1/nodes", json!(["pve-a2"]));
                set(
                    v,
                    "/settings/instances/1/vmIDRange",
                    json!({"start": 1500, "end": 2500}),
                );
            },
            path: "spec.settings.instances[1].vmIDRange",
            message: "1500-2500 overlaps instance \"dc-a\"'s vmIDRange 1000-1999; both use the same credentials Secret, so both take VMIDs from one Proxmox cluster: make the ranges disjoint",
        },
        Row {
            name: "MultiInstance without a control-plane instance",
            edit: |v| {
                set(v, "/settings/instances/0/controlPlane", json!(false));
                set(v, "/settings/instances/1/controlPlane", json!(false));
            },
            path: "spec.settings.instances",
            message: "no instance takes control-plane machines (controlPlane is false on every one): set controlPlane: true on at least one, or set externalManagedControlPlane",
        },
        Row {
            name: "MultiInstance without instances",
            edit: |v| remove(v, "/settings/instances"),
            path: "spec.settings.instances",
            message: "settings.mode MultiInstance needs at least one instance: list the Proxmox clusters under settings.instances, or set settings.mode to Default",
        },
        Row {
            name: "selector without tags",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/template/templateSelector/matchTags",
                    json!([]),
                )
            },
            path: "spec.settings.instances[0].template.templateSelector.matchTags",
            message: "must list at least one tag: a selector without tags matches no template (e.g. matchTags: [capmox])",
        },
        Row {
            name: "selector tag no VM can carry",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/template/templateSelector/matchTags",
                    json!(["ubuntu 24.04"]),
                )
            },
            path: "spec.settings.instances[0].template.templateSelector.matchTags[0]",
            message: "\"ubuntu 24.04\" is not a Proxmox tag: character ' ' is not allowed; a tag starts with a letter, digit or '_' and goes on with letters, digits, '_', '+', '.' or '-'",
        },
    ]
}

fn machine_rows() -> Vec<Row> {
    vec![
        Row {
            name: "multicast MAC",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/1/macAddress",
                    json!("01:00:5E:00:00:01"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            message: "\"01:00:5E:00:00:01\" is a multicast address (its first octet is odd); a NIC needs a unicast address, e.g. BC:24:11:00:00:01",
        },
        Row {
            name: "broadcast MAC",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/1/macAddress",
                    json!("ff:ff:ff:ff:ff:ff"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            message: "\"ff:ff:ff:ff:ff:ff\" is the broadcast address; a NIC needs a unicast address, e.g. BC:24:11:00:00:01",
        },
        Row {
            name: "all-zero MAC",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/1/macAddress",
                    json!("00:00:00:00:00:00"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            message: "\"00:00:00:00:00:00\" cannot be a NIC's address: the all-zero address is not a station address (the guest replaces it with a random one); a NIC needs a unicast address, e.g. BC:24:11:00:00:01",
        },
        Row {
            name: "five-octet MAC",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/1/macAddress",
                    json!("BC:24:11:00:00"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            message: "\"BC:24:11:00:00\" is not a MAC address of six hex pairs XX:XX:XX:XX:XX:XX; a NIC needs a unicast address, e.g. BC:24:11:00:00:01",
        },
        Row {
            name: "one MAC on two NICs",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/0/macAddress",
                    json!("bc:24:11:00:00:01"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            message: "BC:24:11:00:00:01 is also the MAC address of networkDevices[0]: each NIC needs its own address",
        },
        Row {
            name: "VLAN 0",
            edit: |v| set(v, "/network/networkDevices/0/vlan", json!(0)),
            path: "spec.network.networkDevices[0].vlan",
            message: "VLAN tag 0 is outside 1..4094: write the VLAN ID, or leave vlan out for untagged traffic",
        },
        Row {
            name: "VLAN 4095",
            edit: |v| set(v, "/network/networkDevices/0/vlan", json!(4095)),
            path: "spec.network.networkDevices[0].vlan",
            message: "VLAN tag 4095 is outside 1..4094: write the VLAN ID, or leave vlan out for untagged traffic",
        },
        Row {
            name: "MTU below the IP minimum",
            edit: |v| set(v, "/network/networkDevices/0/mtu", json!(575)),
            path: "spec.network.networkDevices[0].mtu",
            message: "575 must be 1 (inherit the bridge MTU) or between 576 and 65520",
        },
        Row {
            name: "MTU above Proxmox's maximum",
            edit: |v| set(v, "/network/networkDevices/0/mtu", json!(65521)),
            path: "spec.network.networkDevices[0].mtu",
            message: "65521 must be 1 (inherit the bridge MTU) or between 576 and 65520",
        },
        Row {
            name: "MTU on an e1000 NIC",
            edit: |v| set(v, "/network/networkDevices/1/model", json!("e1000")),
            path: "spec.network.networkDevices[1].mtu",
            message: "mtu is only supported with model virtio, not e1000: remove mtu or use virtio",
        },
        Row {
            name: "one pool referenced twice",
            edit: |v| {
                let r = json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"});
                set(v, "/network/networkDevices/0/ipPoolRef", json!([r, r]));
            },
            path: "spec.network.networkDevices[0].ipPoolRef[1]",
            message: "the same pool as ipPoolRef[0]: a device gets one address per pool, list each pool once",
        },
        Row {
            name: "multicast name server of a device",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/0/dnsServers",
                    json!(["ff02::fb"]),
                )
            },
            path: "spec.network.networkDevices[0].dnsServers[0]",
            message: "ff02::fb cannot be a name server: it lies in the multicast block ff00::/8; write the resolver's address (e.g. 1.1.1.1)",
        },
        Row {
            name: "machine selector without tags",
            edit: |v| set(v, "/templateSelector", json!({"matchTags": []})),
            path: "spec.templateSelector.matchTags",
            message: "must list at least one tag: a selector without tags matches no template (e.g. matchTags: [capmox])",
        },
        Row {
            name: "machine tag with a leading dash",
            edit: |v| set(v, "/tags", json!(["capi", "-lead"])),
            path: "spec.tags[1]",
            message: "\"-lead\" is not a Proxmox tag: must not start with '-'; a tag starts with a letter, digit or '_' and goes on with letters, digits, '_', '+', '.' or '-'",
        },
        Row {
            name: "target outside allowedNodes",
            edit: |v| {
                set(v, "/allowedNodes", json!(["pve-a1", "pve-a2"]));
                set(v, "/target", json!("pve-a3"));
            },
            path: "spec.target",
            message: "node \"pve-a3\" is not among spec.allowedNodes (pve-a1, pve-a2): add it there or pick one of them",
        },
        Row {
            name: "virtualMachineID outside vmIDRange",
            edit: |v| {
                set(v, "/vmIDRange", json!({"start": 1000, "end": 1999}));
                set(v, "/virtualMachineID", json!(2500));
            },
            path: "spec.virtualMachineID",
            message: "2500 is outside spec.vmIDRange 1000-1999: remove virtualMachineID (the controller picks one) or widen the range",
        },
    ]
}

/// Rows of a machine against the reference cluster (`valid_cluster`).
fn machine_in_cluster_rows() -> Vec<Row> {
    vec![
        Row {
            name: "unpinned machine range outside an instance's range",
            edit: |v| set(v, "/vmIDRange", json!({"start": 1500, "end": 2500})),
            path: "spec.vmIDRange",
            message: "1500-2500 is not inside instance \"dc-a\"'s vmIDRange 1000-1999: machines there may only use that range; narrow spec.vmIDRange to it, or set spec.instance to an instance whose range holds it",
        },
        Row {
            name: "pinned machine range outside its instance's range",
            edit: |v| {
                set(v, "/instance", json!("dc-a"));
                set(v, "/vmIDRange", json!({"start": 900, "end": 1100}));
            },
            path: "spec.vmIDRange",
            message: "900-1100 is not inside instance \"dc-a\"'s vmIDRange 1000-1999: machines there may only use that range; narrow spec.vmIDRange to it",
        },
        Row {
            name: "pinned to an instance the cluster does not list",
            edit: |v| set(v, "/instance", json!("dc-z")),
            path: "spec.instance",
            message: "instance \"dc-z\" does not exist in the ProxmoxCluster (known: dc-a, dc-b)",
        },
    ]
}

fn check(rows: &[Row], base: &Value, validate: impl Fn(Value) -> Vec<FieldError>) {
    for row in rows {
        let mut v = base.clone();
        (row.edit)(&mut v);
        let errs = validate(v);
        assert!(
            errs.iter()
                .any(|e| e.path == row.path && e.message == row.message),
            "{}: expected\n  {}: {}\ngot\n  {}",
            row.name,
            row.path,
            row.message,
            errs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("\n  ")
        );
    }
}

#[test]
fn values_that_cannot_work_are_refused_with_the_field_named() {
    let cluster =
        |v: Value| validate_cluster(&serde_json::from_value::<ProxmoxClusterSpec>(v).unwrap());
    let rows = cluster_rows();
    assert!(rows.len() >= 25);
    check(&rows, &valid_cluster(), cluster);

    let machine =
        |v: Value| validate_machine(&serde_json::from_value::<ProxmoxMachineSpec>(v).unwrap());
    check(&machine_rows(), &valid_machine(), machine);

    let pc: ProxmoxClusterSpec = serde_json::from_value(valid_cluster()).unwrap();
    let in_cluster = |v: Value| {
        validate_machine_for_cluster(
            &serde_json::from_value::<ProxmoxMachineSpec>(v).unwrap(),
            &pc,
        )
    };
    check(&machine_in_cluster_rows(), &valid_machine(), in_cluster);
}

#[test]
fn the_reference_specs_are_valid_together() {
    let pc: ProxmoxClusterSpec = serde_json::from_value(valid_cluster()).unwrap();
    let m: ProxmoxMachineSpec = serde_json::from_value(valid_machine()).unwrap();
    assert_eq!(validate_machine_for_cluster(&m, &pc), vec![]);
    assert_eq!(cluster_warnings(&pc), vec![]);
    // Two instances on one Proxmox cluster with their own nodes and ranges
    // are fine.
    let mut v = valid_cluster();
    set(
        &mut v,
        "/settings/instances/1/credentialsRef",
        json!({"name": "dc-a-creds"}),
    );
    set(&mut v, "/settings/instances/0/nodes", json!(["pve-a1"]));
    set(&mut v, "/settings/instances/1/nodes", json!(["pve-a2"]));
    set(
        &mut v,
        "/settings/instances/1/vmIDRange",
        json!({"start": 2000, "end": 2999}),
    );
    let spec: ProxmoxClusterSpec = serde_json::from_value(v).unwrap();
    assert_eq!(validate_cluster(&spec), vec![]);
}

#[test]
fn default_mode_with_several_instances_is_a_warning() {
    let mut v = valid_cluster();
    set(&mut v, "/settings/mode", json!("Default"));
    let spec: ProxmoxClusterSpec = serde_json::from_value(v).unwrap();
    assert_eq!(validate_cluster(&spec), vec![]);
    assert_eq!(
        cluster_warnings(&spec),
        vec![FieldError::new(
            "spec.settings.mode",
            "settings.mode Default uses only the first instance (\"dc-a\"); \"dc-b\" is never used: set settings.mode to MultiInstance to spread machines over them, or remove them"
        )]
    );
}

#[test]
fn cluster_template_paths_are_nested() {
    let mut c = valid_cluster();
    set(
        &mut c,
        "/settings/instances/0/network/ipv4Config/gateway",
        json!("10.10.0.0"),
    );
    let t: ProxmoxClusterTemplateSpec =
        serde_json::from_value(json!({"template": {"spec": c}})).unwrap();
    assert_eq!(
        validate_cluster_template(&t),
        vec![FieldError::new(
            "spec.template.spec.settings.instances[0].network.ipv4Config.gateway",
            "10.10.0.0 cannot be the gateway: it is the network address of 10.10.0.0/24; write the router's address in the subnet"
        )]
    );
}
