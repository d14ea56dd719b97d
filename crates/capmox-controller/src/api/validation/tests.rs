//! Table tests: each invalid spec is refused by the Rust validation with a
//! message naming the field; the cases CEL can express are refused by the
//! CRD's CEL rules too (evaluated offline with kube-cel, the maintained
//! Kubernetes CEL library, against the generated CRD schema).

use serde_json::{Value, json};

use super::*;
use crate::api::{ProxmoxClusterSpec, ProxmoxMachineSpec, ProxmoxMachineTemplateSpec, crd};

pub(super) fn valid_cluster() -> Value {
    json!({
        "controlPlaneEndpoint": {"host": "10.10.0.5", "port": 6443},
        "dnsServers": ["1.1.1.1"],
        "settings": {
            "mode": "MultiInstance",
            "instances": [
                {"name": "dc-a", "credentialsRef": {"name": "dc-a-creds"},
                 "template": {"templateSelector": {"matchTags": ["capmox"]}},
                 "vmIDRange": {"start": 1000, "end": 1999},
                 "network": {"bridge": "vmbr0", "ipv4Config": {"addresses": ["10.10.0.100-10.10.0.200"], "prefix": 24, "gateway": "10.10.0.1"}}},
                {"name": "dc-b", "credentialsRef": {"name": "dc-b-creds"},
                 "template": {"sourceNode": "pve-b1", "templateID": 9100},
                 "network": {"ipv4Config": {"addresses": ["10.20.0.0/25"], "prefix": 24, "gateway": "10.20.0.1"}}}
            ]
        }
    })
}

pub(super) fn valid_machine() -> Value {
    json!({
        "numSockets": 1, "numCores": 2, "memoryMiB": 4096,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 40},
                  "additionalVolumes": [{"disk": "scsi1", "sizeGb": 10}]},
        "network": {"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "model": "virtio", "vlan": 4094, "mtu": 1},
            {"name": "net1", "bridge": "vmbr1", "mtu": 9000, "macAddress": "BC:24:11:00:00:01"}
        ]},
        "tags": ["capi", "ubuntu-24.04", "Debian", "k8s_1.30", "a+b"],
        "startup": "order=1,up=30",
        "bootOrder": "order=scsi0;net0"
    })
}

/// Sets `value` at a `/`-separated pointer into `doc`, creating objects as needed.
pub(super) fn set(doc: &mut Value, pointer: &str, value: Value) {
    let mut cur = doc;
    let parts: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    for (i, p) in parts.iter().enumerate() {
        let last = i == parts.len() - 1;
        cur = match cur {
            Value::Array(items) => {
                let idx: usize = p.parse().unwrap();
                if last {
                    items[idx] = value;
                    return;
                }
                &mut items[idx]
            }
            Value::Object(map) => {
                if last {
                    map.insert((*p).to_string(), value);
                    return;
                }
                map.entry((*p).to_string()).or_insert_with(|| json!({}))
            }
            other => panic!("cannot descend into {other}"),
        };
    }
}

pub(super) fn remove(doc: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').unwrap();
    let target = if parent.is_empty() {
        doc
    } else {
        doc.pointer_mut(parent).unwrap()
    };
    target.as_object_mut().unwrap().remove(key);
}

/// Where a rule is enforced besides the Rust validation.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Layer {
    /// A CEL rule of the CRD refuses it too, with a message containing this.
    Cel(&'static str),
    /// An OpenAPI constraint (pattern, range, length) of the CRD refuses it too.
    Schema,
    /// Only the Rust validation can (needs parsing, or other objects).
    Rust,
}

struct Case {
    name: &'static str,
    edit: fn(&mut Value),
    /// The field path the Rust error must name.
    path: &'static str,
    /// A word the message must contain.
    says: &'static str,
    layer: Layer,
}

fn cluster_cases() -> Vec<Case> {
    vec![
        Case {
            name: "duplicate instance names",
            edit: |v| set(v, "/settings/instances/1/name", json!("dc-a")),
            path: "spec.settings.instances[1].name",
            says: "duplicate",
            layer: Layer::Cel("names must be unique"),
        },
        Case {
            name: "MultiInstance without instances",
            edit: |v| remove(v, "/settings/instances"),
            path: "spec.settings.instances",
            says: "at least one instance",
            layer: Layer::Cel("at least one instance"),
        },
        Case {
            name: "SingleInstance without instances",
            edit: |v| {
                set(v, "/settings/mode", json!("SingleInstance"));
                set(v, "/settings/instances", json!([]));
            },
            path: "spec.settings.instances",
            says: "SingleInstance",
            layer: Layer::Cel("at least one instance"),
        },
        Case {
            name: "template with neither ID nor selector",
            edit: |v| set(v, "/settings/instances/0/template", json!({})),
            path: "spec.settings.instances[0].template",
            says: "templateID",
            layer: Layer::Cel("a template needs templateID"),
        },
        Case {
            name: "templateID without sourceNode",
            edit: |v| remove(v, "/settings/instances/1/template/sourceNode"),
            path: "spec.settings.instances[1].template.sourceNode",
            says: "sourceNode",
            layer: Layer::Cel("sourceNode"),
        },
        Case {
            name: "vmIDRange inverted",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/vmIDRange",
                    json!({"start": 2000, "end": 1000}),
                )
            },
            path: "spec.settings.instances[0].vmIDRange",
            says: "greater than end",
            layer: Layer::Cel("must not be greater"),
        },
        Case {
            name: "vmIDRange below Proxmox's range",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/vmIDRange",
                    json!({"start": 99, "end": 1000}),
                )
            },
            path: "spec.settings.instances[0].vmIDRange.start",
            says: "VMID range",
            layer: Layer::Schema,
        },
        Case {
            name: "instance name not a DNS label",
            edit: |v| set(v, "/settings/instances/0/name", json!("DC_A")),
            path: "spec.settings.instances[0].name",
            says: "DNS-1123",
            layer: Layer::Schema,
        },
        Case {
            name: "gateway outside its prefix",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/network/ipv4Config/gateway",
                    json!("10.11.0.1"),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.gateway",
            says: "10.11.0.1",
            layer: Layer::Rust,
        },
        Case {
            name: "IPv6 address in ipv4Config",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/network/ipv4Config/addresses",
                    json!(["2001:db8::10"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            says: "IPv",
            layer: Layer::Rust,
        },
        Case {
            name: "ipv4 prefix above 32",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/network/ipv4Config/prefix",
                    json!(33),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.prefix",
            says: "33",
            layer: Layer::Cel("between 0 and 32"),
        },
        Case {
            name: "reversed address range",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/network/ipv4Config/addresses",
                    json!(["10.10.0.200-10.10.0.100"]),
                )
            },
            path: "spec.settings.instances[0].network.ipv4Config.addresses[0]",
            says: "reversed",
            layer: Layer::Rust,
        },
        Case {
            name: "overlapping pools of two instances",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/1/network/ipv4Config",
                    json!({"addresses": ["10.10.0.150-10.10.0.160"], "prefix": 24, "gateway": "10.10.0.1"}),
                );
            },
            path: "spec.settings.instances[1].network.ipv4Config",
            says: "overlaps",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint inside a node pool",
            edit: |v| set(v, "/controlPlaneEndpoint/host", json!("10.10.0.150")),
            path: "spec.controlPlaneEndpoint.host",
            says: "node pool",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint missing without external control plane",
            edit: |v| remove(v, "/controlPlaneEndpoint"),
            path: "spec.controlPlaneEndpoint",
            says: "required",
            layer: Layer::Cel("controlPlaneEndpoint is required"),
        },
        Case {
            name: "endpoint pool with both poolRef and addresses",
            edit: |v| {
                remove(v, "/controlPlaneEndpoint");
                set(
                    v,
                    "/controlPlaneEndpointPool",
                    json!({"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "vips"},
                           "addresses": ["10.10.0.5"], "prefix": 24}),
                );
            },
            path: "spec.controlPlaneEndpointPool",
            says: "not both",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint pool with neither poolRef nor addresses",
            edit: |v| {
                remove(v, "/controlPlaneEndpoint");
                set(v, "/controlPlaneEndpointPool", json!({"port": 6443}));
            },
            path: "spec.controlPlaneEndpointPool",
            says: "poolRef",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint pool addresses without prefix",
            edit: |v| {
                remove(v, "/controlPlaneEndpoint");
                set(
                    v,
                    "/controlPlaneEndpointPool",
                    json!({"addresses": ["10.10.0.5"]}),
                );
            },
            path: "spec.controlPlaneEndpointPool.prefix",
            says: "required",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint pool overlapping a node pool",
            edit: |v| {
                remove(v, "/controlPlaneEndpoint");
                set(
                    v,
                    "/controlPlaneEndpointPool",
                    json!({"addresses": ["10.10.0.195-10.10.0.210"], "prefix": 24}),
                );
            },
            path: "spec.controlPlaneEndpointPool.addresses",
            says: "settings.instances[0].network.ipv4Config",
            layer: Layer::Rust,
        },
        Case {
            name: "endpoint pool with an external control plane",
            edit: |v| {
                remove(v, "/controlPlaneEndpoint");
                set(v, "/externalManagedControlPlane", json!(true));
                set(
                    v,
                    "/controlPlaneEndpointPool",
                    json!({"addresses": ["10.10.0.5"], "prefix": 24}),
                );
            },
            path: "spec.controlPlaneEndpointPool",
            says: "externalManagedControlPlane",
            layer: Layer::Rust,
        },
        Case {
            name: "dns server not an address",
            edit: |v| set(v, "/dnsServers", json!(["dns.example"])),
            path: "spec.dnsServers[0]",
            says: "dns.example",
            layer: Layer::Rust,
        },
        Case {
            name: "bad template tag",
            edit: |v| {
                set(
                    v,
                    "/settings/instances/0/template/templateSelector/matchTags",
                    json!(["-lead"]),
                )
            },
            path: "spec.settings.instances[0].template.templateSelector.matchTags[0]",
            says: "tag",
            layer: Layer::Schema,
        },
        Case {
            name: "credentialsRef without name",
            edit: |v| set(v, "/settings/instances/0/credentialsRef/name", json!("")),
            path: "spec.settings.instances[0].credentialsRef.name",
            says: "Secret",
            layer: Layer::Schema,
        },
    ]
}

fn machine_cases() -> Vec<Case> {
    vec![
        Case {
            name: "VLAN 0",
            edit: |v| set(v, "/network/networkDevices/0/vlan", json!(0)),
            path: "spec.network.networkDevices[0].vlan",
            says: "1..4094",
            layer: Layer::Schema,
        },
        Case {
            name: "VLAN 4095",
            edit: |v| set(v, "/network/networkDevices/0/vlan", json!(4095)),
            path: "spec.network.networkDevices[0].vlan",
            says: "1..4094",
            layer: Layer::Schema,
        },
        Case {
            name: "MTU 575",
            edit: |v| set(v, "/network/networkDevices/0/mtu", json!(575)),
            path: "spec.network.networkDevices[0].mtu",
            says: "576",
            layer: Layer::Cel("between 576 and 65520"),
        },
        Case {
            name: "MTU 65521",
            edit: |v| set(v, "/network/networkDevices/0/mtu", json!(65521)),
            path: "spec.network.networkDevices[0].mtu",
            says: "65520",
            layer: Layer::Cel("between 576 and 65520"),
        },
        Case {
            name: "MTU with e1000",
            edit: |v| set(v, "/network/networkDevices/1/model", json!("e1000")),
            path: "spec.network.networkDevices[1].mtu",
            says: "virtio",
            layer: Layer::Cel("only supported with model virtio"),
        },
        Case {
            name: "empty bridge",
            edit: |v| set(v, "/network/networkDevices/0/bridge", json!("")),
            path: "spec.network.networkDevices[0].bridge",
            says: "bridge",
            layer: Layer::Schema,
        },
        Case {
            name: "device name net32",
            edit: |v| set(v, "/network/networkDevices/1/name", json!("net32")),
            path: "spec.network.networkDevices[1].name",
            says: "net0..net31",
            layer: Layer::Schema,
        },
        Case {
            name: "device name eth0",
            edit: |v| set(v, "/network/networkDevices/1/name", json!("eth0")),
            path: "spec.network.networkDevices[1].name",
            says: "net0..net31",
            layer: Layer::Schema,
        },
        Case {
            name: "multicast MAC",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/1/macAddress",
                    json!("01:00:5E:00:00:01"),
                )
            },
            path: "spec.network.networkDevices[1].macAddress",
            says: "unicast",
            layer: Layer::Schema,
        },
        Case {
            name: "storage without full",
            edit: |v| {
                set(v, "/full", json!(false));
                set(v, "/storage", json!("local-lvm"));
            },
            path: "spec.storage",
            says: "full",
            layer: Layer::Cel("only allowed for full clones"),
        },
        Case {
            name: "format without full",
            edit: |v| {
                set(v, "/full", json!(false));
                set(v, "/format", json!("qcow2"));
            },
            path: "spec.format",
            says: "full",
            layer: Layer::Cel("only allowed for full clones"),
        },
        Case {
            name: "tag with a leading dash",
            edit: |v| set(v, "/tags", json!(["-lead"])),
            path: "spec.tags[0]",
            says: "Proxmox tag",
            layer: Layer::Schema,
        },
        Case {
            name: "tag with a space",
            edit: |v| set(v, "/tags", json!(["has space"])),
            path: "spec.tags[0]",
            says: "Proxmox tag",
            layer: Layer::Schema,
        },
        Case {
            name: "tag with a semicolon",
            edit: |v| set(v, "/tags", json!(["semi;colon"])),
            path: "spec.tags[0]",
            says: "Proxmox tag",
            layer: Layer::Schema,
        },
        Case {
            name: "templateID and selector",
            edit: |v| {
                set(v, "/sourceNode", json!("pve-a1"));
                set(v, "/templateID", json!(9000));
                set(v, "/templateSelector", json!({"matchTags": ["capmox"]}));
            },
            path: "spec.templateSelector",
            says: "mutually exclusive",
            layer: Layer::Cel("mutually exclusive"),
        },
        Case {
            name: "templateID without sourceNode",
            edit: |v| set(v, "/templateID", json!(9000)),
            path: "spec.sourceNode",
            says: "sourceNode",
            layer: Layer::Cel("sourceNode"),
        },
        Case {
            name: "machine vmIDRange inverted",
            edit: |v| set(v, "/vmIDRange", json!({"start": 500, "end": 400})),
            path: "spec.vmIDRange",
            says: "greater than end",
            layer: Layer::Cel("must not be greater"),
        },
        Case {
            name: "disk slot scsi31",
            edit: |v| set(v, "/disks/additionalVolumes/0/disk", json!("scsi31")),
            path: "spec.disks.additionalVolumes[0].disk",
            says: "disk slot",
            layer: Layer::Schema,
        },
        Case {
            name: "additional volume on the boot slot",
            edit: |v| set(v, "/disks/additionalVolumes/0/disk", json!("scsi0")),
            path: "spec.disks.additionalVolumes[0].disk",
            says: "twice",
            layer: Layer::Rust,
        },
        Case {
            name: "bad startup",
            edit: |v| set(v, "/startup", json!("order=first")),
            path: "spec.startup",
            says: "startup",
            layer: Layer::Schema,
        },
        Case {
            name: "bad boot order",
            edit: |v| set(v, "/bootOrder", json!("scsi0,net0")),
            path: "spec.bootOrder",
            says: "boot",
            layer: Layer::Schema,
        },
        Case {
            name: "duplicate device",
            edit: |v| set(v, "/network/networkDevices/1/name", json!("net0")),
            path: "spec.network.networkDevices[1].name",
            says: "twice",
            layer: Layer::Rust,
        },
        Case {
            name: "dns server typo",
            edit: |v| {
                set(
                    v,
                    "/network/networkDevices/0/dnsServers",
                    json!(["10.0.0.1391"]),
                )
            },
            path: "spec.network.networkDevices[0].dnsServers[0]",
            says: "1391",
            layer: Layer::Rust,
        },
    ]
}

fn assert_refused(errs: &[FieldError], case: &Case) {
    assert!(
        errs.iter()
            .any(|e| e.path == case.path && e.message.contains(case.says)),
        "case {:?}: expected an error at {} saying {:?}, got {:?}",
        case.name,
        case.path,
        case.says,
        errs
    );
}

#[test]
fn valid_specs_pass() {
    let c: ProxmoxClusterSpec = serde_json::from_value(valid_cluster()).unwrap();
    assert_eq!(validate_cluster(&c), vec![]);
    let m: ProxmoxMachineSpec = serde_json::from_value(valid_machine()).unwrap();
    assert_eq!(validate_machine(&m), vec![]);
}

#[test]
fn invalid_cluster_specs_name_the_field() {
    let cases = cluster_cases();
    assert!(cases.len() >= 15);
    for case in &cases {
        let mut v = valid_cluster();
        (case.edit)(&mut v);
        let spec: ProxmoxClusterSpec = serde_json::from_value(v).unwrap();
        assert_refused(&validate_cluster(&spec), case);
    }
}

#[test]
fn invalid_machine_specs_name_the_field() {
    let cases = machine_cases();
    assert!(cases.len() >= 20);
    for case in &cases {
        let mut v = valid_machine();
        (case.edit)(&mut v);
        let spec: ProxmoxMachineSpec = serde_json::from_value(v).unwrap();
        assert_refused(&validate_machine(&spec), case);
    }
}

#[test]
fn machine_template_paths_are_nested() {
    let mut m = valid_machine();
    set(&mut m, "/network/networkDevices/0/vlan", json!(4095));
    let t: ProxmoxMachineTemplateSpec =
        serde_json::from_value(json!({"template": {"spec": m}})).unwrap();
    let errs = validate_machine_template(&t);
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].path,
        "spec.template.spec.network.networkDevices[0].vlan"
    );
}

#[test]
fn pin_to_unknown_instance_is_refused() {
    let c: ProxmoxClusterSpec = serde_json::from_value(valid_cluster()).unwrap();
    let mut m = valid_machine();
    set(&mut m, "/instance", json!("dc-z"));
    let spec: ProxmoxMachineSpec = serde_json::from_value(m).unwrap();
    let errs = validate_machine_for_cluster(&spec, &c);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "spec.instance");
    assert_eq!(
        errs[0].message,
        "instance \"dc-z\" does not exist in the ProxmoxCluster (known: dc-a, dc-b)"
    );
}

#[test]
fn machine_range_must_sit_inside_the_instance_range() {
    let c: ProxmoxClusterSpec = serde_json::from_value(valid_cluster()).unwrap();
    let mut m = valid_machine();
    set(&mut m, "/instance", json!("dc-a"));
    set(&mut m, "/vmIDRange", json!({"start": 1500, "end": 2500}));
    let spec: ProxmoxMachineSpec = serde_json::from_value(m).unwrap();
    let errs = validate_machine_for_cluster(&spec, &c);
    assert_eq!(errs.len(), 1);
    assert_eq!(errs[0].path, "spec.vmIDRange");
    assert!(errs[0].message.contains("1000-1999"));
}

#[test]
fn warnings_for_ignored_fields() {
    let mut v = valid_cluster();
    set(&mut v, "/allowedNodes", json!(["pve-a1"]));
    let c: ProxmoxClusterSpec = serde_json::from_value(v).unwrap();
    assert!(validate_cluster(&c).is_empty());
    let w = cluster_warnings(&c);
    assert_eq!(w.len(), 1);
    assert_eq!(w[0].path, "spec.allowedNodes");
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let mut m = valid_machine();
    set(&mut m, "/network/networkDevices/0/vlan", json!(0));
    set(&mut m, "/tags", json!(["-x"]));
    set(&mut m, "/startup", json!("bad"));
    let spec: ProxmoxMachineSpec = serde_json::from_value(m).unwrap();
    let paths: Vec<String> = validate_machine(&spec)
        .into_iter()
        .map(|e| e.path)
        .collect();
    assert_eq!(
        paths,
        vec![
            "spec.network.networkDevices[0].vlan",
            "spec.tags[0]",
            "spec.startup"
        ]
    );
}

// ---- the same cases against the CRD's CEL rules, evaluated offline ----

fn crd_schema(kind: &str) -> Value {
    let crd = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    let schema = crd.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(schema).unwrap()
}

fn cel_errors(kind: &str, spec: Value, old: Option<Value>) -> Vec<String> {
    let schema = crd_schema(kind);
    let obj = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": kind, "metadata": {"name": "x"}, "spec": spec});
    let old = old.map(|o| json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": kind, "metadata": {"name": "x"}, "spec": o}));
    match kube_cel::Validator::new().validate(&schema, &obj, old.as_ref()) {
        Ok(()) => vec![],
        Err(errs) => errs.into_vec().into_iter().map(|e| e.message).collect(),
    }
}

#[test]
fn an_endpoint_pool_stands_for_the_endpoint() {
    let mut v = valid_cluster();
    remove(&mut v, "/controlPlaneEndpoint");
    set(
        &mut v,
        "/controlPlaneEndpointPool",
        json!({"addresses": ["10.10.0.5-10.10.0.9"], "prefix": 24, "port": 6443}),
    );
    let spec: ProxmoxClusterSpec = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(validate_cluster(&spec), vec![]);
    assert_eq!(
        cel_errors("ProxmoxCluster", v.clone(), None),
        Vec::<String>::new()
    );
    set(
        &mut v,
        "/controlPlaneEndpointPool",
        json!({"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "vips"}}),
    );
    let spec: ProxmoxClusterSpec = serde_json::from_value(v.clone()).unwrap();
    assert_eq!(validate_cluster(&spec), vec![]);
    assert_eq!(cel_errors("ProxmoxCluster", v, None), Vec::<String>::new());
}

#[test]
fn cel_accepts_the_valid_specs() {
    assert_eq!(
        cel_errors("ProxmoxCluster", valid_cluster(), None),
        Vec::<String>::new()
    );
    assert_eq!(
        cel_errors("ProxmoxMachine", valid_machine(), None),
        Vec::<String>::new()
    );
}

#[test]
fn cel_refuses_the_cel_cases() {
    let mut checked = 0;
    for (kind, base, cases) in [
        ("ProxmoxCluster", valid_cluster(), cluster_cases()),
        ("ProxmoxMachine", valid_machine(), machine_cases()),
    ] {
        for case in &cases {
            let Layer::Cel(says) = case.layer else {
                continue;
            };
            let mut v = base.clone();
            (case.edit)(&mut v);
            let errs = cel_errors(kind, v, None);
            assert!(
                errs.iter().any(|e| e.contains(says)),
                "case {:?}: CEL should refuse with {says:?}, got {errs:?}",
                case.name
            );
            checked += 1;
        }
    }
    assert!(checked >= 15, "only {checked} CEL cases");
}

#[test]
fn cel_keeps_instance_immutable_once_set() {
    let mut old = valid_machine();
    set(&mut old, "/instance", json!("dc-a"));
    let mut new = old.clone();
    set(&mut new, "/instance", json!("dc-b"));
    let errs = cel_errors("ProxmoxMachine", new, Some(old.clone()));
    assert_eq!(errs, vec!["instance is immutable once set".to_string()]);
    // Setting it the first time is allowed.
    let mut unset = old.clone();
    remove(&mut unset, "/instance");
    assert!(cel_errors("ProxmoxMachine", old, Some(unset)).is_empty());
}

#[test]
fn cel_leaves_machine_template_immutability_to_the_webhook() {
    // A CEL `self == oldSelf` would also refuse CAPI's topology dry-run, which
    // must be allowed; the validating webhook refuses every other change.
    let old = json!({"template": {"spec": valid_machine()}});
    let mut new = old.clone();
    set(&mut new, "/template/spec/memoryMiB", json!(8192));
    assert_eq!(
        cel_errors("ProxmoxMachineTemplate", new, Some(old)),
        Vec::<String>::new()
    );
}
