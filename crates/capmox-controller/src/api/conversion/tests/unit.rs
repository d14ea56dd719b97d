//! Examples of each direction with the expected objects written out, every
//! refusal, the conversion data, and the ConversionReview exchange.

use serde_json::{Value, json};

use super::*;

fn annotation(o: &Value) -> Option<Value> {
    o["metadata"]["annotations"][CONVERSION_DATA_ANNOTATION]
        .as_str()
        .map(|s| serde_json::from_str(s).unwrap())
}

/// A ProxmoxCluster as the Go provider's `cluster-template.yaml` makes it,
/// after kube-apiserver's defaulting, with the status it writes.
fn capmox_cluster() -> Value {
    json!({
        "apiVersion": V1ALPHA2,
        "kind": "ProxmoxCluster",
        "metadata": {"name": "wl1", "namespace": "default", "uid": "u-1",
                     "labels": {"cluster.x-k8s.io/cluster-name": "wl1"}},
        "spec": {
            "controlPlaneEndpoint": {"host": "10.10.10.9", "port": 6443},
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.19"], "prefix": 24,
                           "gateway": "10.10.10.1", "metric": 100},
            "dnsServers": ["8.8.8.8", "8.8.4.4"],
            "allowedNodes": ["pve1", "pve2"],
            "credentialsRef": {"name": "wl1-proxmox", "namespace": "capmox-system"},
            "schedulerHints": {"memoryAdjustment": 120},
            "externalManagedControlPlane": false
        },
        "status": {
            "initialization": {"provisioned": true},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                            "lastTransitionTime": "2026-01-02T03:04:05Z"}],
            "inClusterIPPoolRef": [{"name": "wl1-v4-icip"}],
            "inClusterZoneRef": [{"zone": "default", "inClusterIPPoolRefV4": {"name": "wl1-v4-icip"}}],
            "nodeLocations": {"controlPlane": [{"machine": {"name": "wl1-cp-abcde"}, "node": "pve1"}]}
        }
    })
}

#[test]
fn a_capmox_cluster_becomes_default_mode_with_the_same_fields() {
    let v3 = convert(&capmox_cluster(), V1ALPHA3).unwrap();
    assert_eq!(v3["apiVersion"], V1ALPHA3);
    assert_eq!(
        v3["spec"],
        json!({
            "controlPlaneEndpoint": {"host": "10.10.10.9", "port": 6443},
            "externalManagedControlPlane": false,
            "credentialsRef": {"name": "wl1-proxmox", "namespace": "capmox-system"},
            "allowedNodes": ["pve1", "pve2"],
            "schedulerHints": {"memoryAdjustment": 120},
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.19"], "prefix": 24,
                           "gateway": "10.10.10.1", "metric": 100},
            "dnsServers": ["8.8.8.8", "8.8.4.4"]
        })
    );
    let typed: crate::api::ProxmoxCluster = serde_json::from_value(v3.clone()).unwrap();
    assert_eq!(typed.spec.mode(), crate::api::ClusterMode::Default);
    assert!(typed.spec.instances().is_empty());
    assert_eq!(
        v3["status"],
        json!({
            "initialization": {"provisioned": true},
            "conditions": [{"type": "Ready", "status": "True", "reason": "Ready", "message": "",
                            "lastTransitionTime": "2026-01-02T03:04:05Z"}]
        })
    );
    // The pool references and node locations v1alpha3 has no place for are kept.
    let kept = annotation(&v3).unwrap();
    assert_eq!(kept["apiVersion"], V1ALPHA2);
    assert_eq!(kept["kind"], "ProxmoxCluster");
    assert_eq!(
        kept["status"]["nodeLocations"]["controlPlane"][0]["node"],
        "pve1"
    );
    // Metadata is kept as it was, but for the annotation.
    let mut meta = v3["metadata"].clone();
    meta.as_object_mut().unwrap().remove("annotations");
    assert_eq!(meta, capmox_cluster()["metadata"]);
    // And back, exactly.
    assert_eq!(convert(&v3, V1ALPHA2).unwrap(), capmox_cluster());
}

#[test]
fn a_cluster_v1alpha2_can_hold_needs_no_conversion_data() {
    let mut c = capmox_cluster();
    c.as_object_mut().unwrap().remove("status");
    let v3 = convert(&c, V1ALPHA3).unwrap();
    assert_eq!(annotation(&v3), None);
    assert!(v3["metadata"].get("annotations").is_none());
    assert_eq!(convert(&v3, V1ALPHA2).unwrap(), c);
}

fn multi_instance_cluster() -> Value {
    json!({
        "apiVersion": V1ALPHA3,
        "kind": "ProxmoxCluster",
        "metadata": {"name": "wl2", "namespace": "ns"},
        "spec": {
            "controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
            "dnsServers": ["10.0.0.1"],
            "providerIDFormat": "InstanceVMID",
            "settings": {"mode": "MultiInstance", "instances": [
                {"name": "dc-a", "credentialsRef": {"name": "a"}, "nodes": ["a1"],
                 "network": {"ipv4Config": {"addresses": ["10.1.0.10-10.1.0.50"], "prefix": 24, "gateway": "10.1.0.1"}}},
                {"name": "dc-b", "credentialsRef": {"name": "b"},
                 "template": {"templateSelector": {"matchTags": ["ubuntu"]}}}
            ]}
        },
        "status": {"instancesReady": "2/2", "failureDomains": [{"name": "dc-a", "controlPlane": true}]}
    })
}

#[test]
fn a_multi_instance_cluster_is_kept_whole_when_read_as_v1alpha2() {
    let v2 = convert(&multi_instance_cluster(), V1ALPHA2).unwrap();
    assert_eq!(
        v2["spec"],
        json!({"controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443}, "dnsServers": ["10.0.0.1"]})
    );
    assert_eq!(v2["status"], json!({}));
    let kept = annotation(&v2).unwrap();
    assert_eq!(kept["apiVersion"], V1ALPHA3);
    assert_eq!(kept["spec"]["settings"]["mode"], "MultiInstance");
    assert_eq!(convert(&v2, V1ALPHA3).unwrap(), multi_instance_cluster());
}

#[test]
fn an_edit_through_v1alpha2_survives_and_keeps_what_v1alpha2_cannot_hold() {
    let mut v2 = convert(&multi_instance_cluster(), V1ALPHA2).unwrap();
    // kubectl edit through v1alpha2: kube-apiserver fills in the schema's defaults.
    v2["spec"]["dnsServers"] = json!(["10.0.0.2", "10.0.0.3"]);
    v2["spec"]["externalManagedControlPlane"] = json!(false);
    let v3 = convert(&v2, V1ALPHA3).unwrap();
    let mut want = multi_instance_cluster();
    want["spec"]["dnsServers"] = json!(["10.0.0.2", "10.0.0.3"]);
    assert_eq!(v3, want);
}

/// A ProxmoxMachine as the Go provider writes it (its webhook sets both
/// default flags on net0; kube-apiserver's defaults filled in).
fn capmox_machine() -> Value {
    json!({
        "apiVersion": V1ALPHA2,
        "kind": "ProxmoxMachine",
        "metadata": {"name": "wl1-md-0-x7k2p", "namespace": "default"},
        "spec": {
            "sourceNode": "pve1", "templateID": 9000, "format": "qcow2", "full": true,
            "numSockets": 2, "numCores": 4, "memoryMiB": 16384,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}},
            "network": {"networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true, "defaultIPv6": true,
                 "dnsServers": ["8.8.8.8"]},
                {"name": "net1", "bridge": "vmbr1", "model": "virtio", "vlan": 20,
                 "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "shared"}]}
            ]},
            "providerID": "proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191",
            "virtualMachineID": 104,
            "vmIDRange": {"start": 100, "end": 199},
            "tags": ["k8s"],
            "metadataSettings": {"providerIDInjection": true},
            "checks": {"skipCloudInitStatus": false}
        },
        "status": {
            "proxmoxNode": "pve1", "vmStatus": "ready", "bootstrapDataProvided": true,
            "addresses": [{"type": "Hostname", "address": "wl1-md-0-x7k2p"}, {"type": "InternalIP", "address": "10.10.10.11"}],
            "ipAddresses": [{"net": "default", "ipv4": ["10.10.10.11"]}, {"net": "net0", "ipv4": ["10.10.10.11"]}],
            "network": [{"connected": true, "macAddr": "BC:24:11:00:00:01", "networkName": "net0", "ipAddrs": ["10.10.10.11"]}],
            "retryAfter": "2026-01-02T03:04:05Z"
        }
    })
}

#[test]
fn a_capmox_machine_keeps_its_fields_in_v1alpha3() {
    let v3 = convert(&capmox_machine(), V1ALPHA3).unwrap();
    assert_eq!(
        v3["spec"],
        json!({
            "sourceNode": "pve1", "templateID": 9000, "format": "qcow2", "full": true,
            "numSockets": 2, "numCores": 4, "memoryMiB": 16384,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}},
            "network": {"networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "model": "virtio", "dnsServers": ["8.8.8.8"]},
                {"name": "net1", "bridge": "vmbr1", "model": "virtio", "vlan": 20,
                 "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": "shared"}]}
            ]},
            "providerID": "proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191",
            "virtualMachineID": 104,
            "vmIDRange": {"start": 100, "end": 199},
            "tags": ["k8s"],
            "metadataSettings": {"providerIDInjection": true},
            "checks": {"skipCloudInitStatus": false}
        })
    );
    assert_eq!(
        v3["status"],
        json!({
            "proxmoxNode": "pve1", "vmStatus": "ready", "bootstrapDataProvided": true,
            "addresses": [{"type": "Hostname", "address": "wl1-md-0-x7k2p"}, {"type": "InternalIP", "address": "10.10.10.11"}],
            "ipAddresses": [{"net": "default", "ipv4": ["10.10.10.11"]}, {"net": "net0", "ipv4": ["10.10.10.11"]}],
            "network": [{"name": "net0", "macAddress": "BC:24:11:00:00:01"}]
        })
    );
    let kept = annotation(&v3).unwrap();
    assert_eq!(kept["status"]["retryAfter"], "2026-01-02T03:04:05Z");
    assert_eq!(convert(&v3, V1ALPHA2).unwrap(), capmox_machine());
}

#[test]
fn net0_without_pool_refs_reads_as_the_default_device_in_v1alpha2() {
    let m = json!({"apiVersion": V1ALPHA3, "kind": "ProxmoxMachine", "metadata": {"name": "m"},
        "spec": {"network": {"networkDevices": [{"name": "net0"}, {"name": "net1", "bridge": "vmbr1"}]}}});
    let v2 = convert(&m, V1ALPHA2).unwrap();
    assert_eq!(
        v2["spec"]["network"],
        json!({"networkDevices": [{"name": "net0", "defaultIPv4": true, "defaultIPv6": true},
                                  {"name": "net1", "bridge": "vmbr1"}]})
    );
    assert_eq!(convert(&v2, V1ALPHA3).unwrap(), m);
    // kube-apiserver would fill in `full: true` and `model: virtio` on a
    // write through v1alpha2: the original is kept to undo that.
    assert_eq!(annotation(&v2).unwrap()["spec"], m["spec"]);
    let mut written = v2.clone();
    written["spec"]["full"] = json!(true);
    written["spec"]["network"]["networkDevices"][0]["model"] = json!("virtio");
    written["spec"]["network"]["networkDevices"][1]["model"] = json!("virtio");
    assert_eq!(convert(&written, V1ALPHA3).unwrap(), m);
    // With those set in v1alpha3 there is nothing to keep.
    let mut explicit = m.clone();
    explicit["spec"]["full"] = json!(true);
    explicit["spec"]["network"]["networkDevices"][0]["model"] = json!("virtio");
    explicit["spec"]["network"]["networkDevices"][1]["model"] = json!("virtio");
    assert_eq!(annotation(&convert(&explicit, V1ALPHA2).unwrap()), None);
}

#[test]
fn what_only_v1alpha3_machines_have_comes_back() {
    let m = json!({"apiVersion": V1ALPHA3, "kind": "ProxmoxMachine", "metadata": {"name": "m", "namespace": "n"},
        "spec": {
            "instance": "dc-b", "target": "b2", "onBoot": true, "bootOrder": "order=scsi0;net0",
            "templateSelector": {"matchTags": ["ubuntu"], "matchPolicy": "bestSubset"},
            "disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 50, "ssd": true}]},
            "network": {"networkDevices": [{"name": "net0", "model": "e1000e", "macAddress": "02:00:00:00:00:01", "dhcp6": true}]}
        },
        "status": {"failureDomain": "dc-b", "observedGeneration": 3}});
    let v2 = convert(&m, V1ALPHA2).unwrap();
    assert_eq!(
        v2["spec"],
        json!({
            "templateSelector": {"matchTags": ["ubuntu"], "matchPolicy": "bestSubset"},
            "disks": {},
            "network": {"networkDevices": [{"name": "net0", "model": "e1000e", "defaultIPv4": true, "defaultIPv6": true}]}
        })
    );
    assert_eq!(convert(&v2, V1ALPHA3).unwrap(), m);
}

#[test]
fn a_machine_template_status_survives_v1alpha2() {
    let t = json!({"apiVersion": V1ALPHA3, "kind": "ProxmoxMachineTemplate", "metadata": {"name": "t"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"numCores": 2}}},
        "status": {"capacity": {"cpu": "2", "memory": "4096Mi"}}});
    let v2 = convert(&t, V1ALPHA2).unwrap();
    assert_eq!(
        v2["spec"],
        json!({"template": {"metadata": {"labels": {"a": "b"}}, "spec": {"numCores": 2}}})
    );
    assert!(v2.get("status").is_none());
    assert_eq!(convert(&v2, V1ALPHA3).unwrap(), t);
}

#[test]
fn numbers_v1alpha2_cannot_hold_are_kept_aside() {
    let c = json!({"apiVersion": V1ALPHA3, "kind": "ProxmoxCluster", "metadata": {"name": "c"},
        "spec": {"ipv4Config": {"addresses": ["10.0.0.10"], "prefix": 24, "gateway": "10.0.0.1", "metric": 3_000_000_000_u32}}});
    let v2 = convert(&c, V1ALPHA2).unwrap();
    assert_eq!(
        v2["spec"]["ipv4Config"],
        json!({"addresses": ["10.0.0.10"], "prefix": 24, "gateway": "10.0.0.1"})
    );
    assert_eq!(convert(&v2, V1ALPHA3).unwrap(), c);
    // kube-apiserver's default metric (100) on the way back is not a change.
    let mut written = v2.clone();
    written["spec"]["ipv4Config"]["metric"] = json!(100);
    written["spec"]["externalManagedControlPlane"] = json!(false);
    assert_eq!(convert(&written, V1ALPHA3).unwrap(), c);
    // A metric set through v1alpha2 replaces it.
    written["spec"]["ipv4Config"]["metric"] = json!(7);
    let mut want = c.clone();
    want["spec"]["ipv4Config"]["metric"] = json!(7);
    assert_eq!(convert(&written, V1ALPHA3).unwrap(), want);
}

#[test]
fn templates_convert_their_spec_at_spec_template_spec() {
    // CAPMOX's ClusterClass template as kube-apiserver holds it (defaults filled in).
    let t = json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxClusterTemplate", "metadata": {"name": "ct"},
        "spec": {"template": {"spec": {"dnsServers": ["8.8.8.8"], "externalManagedControlPlane": false,
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.19"], "prefix": 24, "gateway": "10.10.10.1", "metric": 100}}}}});
    let v3 = convert(&t, V1ALPHA3).unwrap();
    assert_eq!(
        v3["spec"],
        json!({"template": {"spec": {"dnsServers": ["8.8.8.8"], "externalManagedControlPlane": false,
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.19"], "prefix": 24, "gateway": "10.10.10.1", "metric": 100}}}})
    );
    assert_eq!(annotation(&v3), None);
    assert_eq!(convert(&v3, V1ALPHA2).unwrap(), t);
    let mut zoned = t.clone();
    zoned["spec"]["template"]["spec"]["zoneConfig"] =
        json!([{"zone": "z1", "dnsServers": ["1.1.1.1"]}]);
    assert_eq!(
        convert(&zoned, V1ALPHA3).unwrap_err().path,
        "spec.template.spec.zoneConfig"
    );
}

fn refused(kind: &str, spec: Value) -> ConversionError {
    let o = json!({"apiVersion": V1ALPHA2, "kind": kind, "metadata": {"name": "x"}, "spec": spec});
    convert(&o, V1ALPHA3).unwrap_err()
}

fn machine_with_device(device: Value) -> Value {
    json!({"templateSelector": {"matchTags": ["t"]}, "network": {"networkDevices": [device]}})
}

#[test]
fn every_refused_field_is_named() {
    let cluster = |extra: Value| {
        let mut s = json!({"dnsServers": ["8.8.8.8"], "ipv4Config": {"addresses": ["10.0.0.2"], "prefix": 24, "gateway": "10.0.0.1"}});
        for (k, v) in extra.as_object().unwrap() {
            s[k] = v.clone();
        }
        refused("ProxmoxCluster", s)
    };
    let cases: Vec<(ConversionError, &str)> = vec![
        (
            cluster(json!({"zoneConfig": [{"zone": "z1", "dnsServers": ["1.1.1.1"]}]})),
            "spec.zoneConfig",
        ),
        (
            cluster(json!({"controlPlaneEndpoint": {"port": 6443}})),
            "spec.controlPlaneEndpoint.host",
        ),
        (
            cluster(json!({"controlPlaneEndpoint": {"host": "h"}})),
            "spec.controlPlaneEndpoint.port",
        ),
        (
            cluster(json!({"credentialsRef": {"namespace": "n"}})),
            "spec.credentialsRef.name",
        ),
        (
            cluster(json!({"schedulerHints": {"memoryAdjustment": 5_000_000_000_i64}})),
            "spec.schedulerHints.memoryAdjustment",
        ),
        (
            cluster(
                json!({"ipv6Config": {"addresses": ["fd00::2"], "prefix": 300, "gateway": "fd00::1"}}),
            ),
            "spec.ipv6Config.prefix",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"]}, "network": {"zone": "z1", "networkDevices": []}}),
            ),
            "spec.network.zone",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"]}, "network": {"networkDevices": [], "vrfs": [{"name": "vrf-a", "table": 500}]}}),
            ),
            "spec.network.vrfs",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "queues": 4})),
            ),
            "spec.network.networkDevices[0].queues",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "linkMtu": 9000})),
            ),
            "spec.network.networkDevices[0].linkMtu",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(
                    json!({"name": "net0", "routes": [{"to": "10.2.0.0/16", "via": "10.0.0.1"}]}),
                ),
            ),
            "spec.network.networkDevices[0].routes",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "routingPolicy": [{"table": 100}]})),
            ),
            "spec.network.networkDevices[0].routingPolicy",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net1", "defaultIPv4": true})),
            ),
            "spec.network.networkDevices[0].defaultIPv4",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "defaultIPv6": true,
            "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}]})),
            ),
            "spec.network.networkDevices[0].defaultIPv6",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "defaultIPv4": false})),
            ),
            "spec.network.networkDevices[0].defaultIPv4",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(
                    json!({"name": "net0", "ipPoolRef": [{"kind": "InClusterIPPool", "name": "p"}]}),
                ),
            ),
            "spec.network.networkDevices[0].ipPoolRef[0].apiGroup",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "vlan": 70000})),
            ),
            "spec.network.networkDevices[0].vlan",
        ),
        (
            refused(
                "ProxmoxMachine",
                machine_with_device(json!({"name": "net0", "model": "ne2k_pci"})),
            ),
            "spec.network.networkDevices[0].model",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"], "matchPolicy": "subset"}}),
            ),
            "spec.templateSelector.matchPolicy",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"sourceNode": "n", "templateID": -1}),
            ),
            "spec.templateID",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"]}, "format": "vhdx"}),
            ),
            "spec.format",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"]}, "virtualMachineID": 5_000_000_000_i64}),
            ),
            "spec.virtualMachineID",
        ),
        (
            refused(
                "ProxmoxMachine",
                json!({"templateSelector": {"matchTags": ["t"]}, "vmIDRange": {"start": -5, "end": 10}}),
            ),
            "spec.vmIDRange.start",
        ),
        (
            refused(
                "ProxmoxMachineTemplate",
                json!({"template": {"spec": machine_with_device(json!({"name": "net0", "queues": 2}))}}),
            ),
            "spec.template.spec.network.networkDevices[0].queues",
        ),
    ];
    for (err, path) in cases {
        assert_eq!(err.path, path, "{err}");
    }
}

#[test]
fn refusals_say_why() {
    let e = refused(
        "ProxmoxCluster",
        json!({"dnsServers": ["8.8.8.8"], "zoneConfig": [{"zone": "z", "dnsServers": ["1.1.1.1"]}]}),
    );
    assert!(
        e.to_string()
            .starts_with("spec.zoneConfig: has no v1alpha3 equivalent: zones are address pools"),
        "{e}"
    );
    assert!(
        e.message.ends_with("(docs/migrating-from-capmox.md)"),
        "{e}"
    );
}

#[test]
fn bad_objects_are_refused_by_field() {
    let base = json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxMachine", "metadata": {"name": "x"}, "spec": {"numCores": "four"}});
    let e = convert(&base, V1ALPHA3).unwrap_err();
    assert_eq!(e.path, "spec.numCores");
    // Also inside the fields the Go provider inlines (`ipv4Config`, `routes`).
    let pool = json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxCluster", "metadata": {"name": "x"},
        "spec": {"dnsServers": ["8.8.8.8"], "ipv4Config": {"addresses": ["10.0.0.2"], "prefix": "24", "gateway": "10.0.0.1"}}});
    assert_eq!(
        convert(&pool, V1ALPHA3).unwrap_err().path,
        "spec.ipv4Config.prefix"
    );
    let route = json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxMachine", "metadata": {"name": "x"},
        "spec": {"network": {"networkDevices": [{"name": "net0", "routes": [{"metric": "high"}]}]}}});
    assert_eq!(
        convert(&route, V1ALPHA3).unwrap_err().path,
        "spec.network.networkDevices[0].routes[0].metric"
    );
    let mut v1 = base.clone();
    v1["apiVersion"] = json!("infrastructure.cluster.x-k8s.io/v1alpha1");
    let e = convert(&v1, V1ALPHA3).unwrap_err();
    assert_eq!(e.path, "apiVersion");
    assert!(e.message.contains("stored as v1alpha2"), "{e}");
    let mut other = base.clone();
    other["kind"] = json!("ProxmoxThing");
    assert_eq!(convert(&other, V1ALPHA3).unwrap_err().path, "kind");
    assert_eq!(convert(&base, "v1").unwrap_err().path, "desiredAPIVersion");
    let no_spec =
        json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxMachine", "metadata": {"name": "x"}});
    assert_eq!(
        convert(&no_spec, V1ALPHA3).unwrap_err(),
        ConversionError::new("spec", "required")
    );
    let status_on_template = json!({"apiVersion": V1ALPHA2, "kind": "ProxmoxClusterTemplate", "metadata": {"name": "x"},
        "spec": {"template": {"spec": {"dnsServers": []}}}, "status": {}});
    assert_eq!(
        convert(&status_on_template, V1ALPHA3).unwrap_err().path,
        "status"
    );
}

#[test]
fn conversion_data_of_the_wrong_version_is_refused() {
    let mut c = multi_instance_cluster();
    c["metadata"]["annotations"] = json!({CONVERSION_DATA_ANNOTATION: json!({"apiVersion": V1ALPHA3, "kind": "ProxmoxCluster", "spec": {}}).to_string()});
    let e = convert(&c, V1ALPHA2).unwrap_err();
    assert_eq!(e.path, stash::PATH);
    c["metadata"]["annotations"] = json!({CONVERSION_DATA_ANNOTATION: "[]"});
    assert_eq!(convert(&c, V1ALPHA2).unwrap_err().path, stash::PATH);
}

#[test]
fn the_same_version_is_returned_as_it_is() {
    let c = capmox_cluster();
    assert_eq!(convert(&c, V1ALPHA2).unwrap(), c);
    let mut odd = multi_instance_cluster();
    odd["spec"]["unknown"] = json!(1);
    assert_eq!(convert(&odd, V1ALPHA3).unwrap(), odd);
}

#[test]
fn the_webhook_converts_every_object_in_order() {
    let review = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "request": {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                    "desiredAPIVersion": V1ALPHA3,
                    "objects": [capmox_cluster(), multi_instance_cluster()]}
    });
    let body = serde_json::to_vec(&review).unwrap();
    let a = crate::webhook::convert::answer(&body, convert_object);
    let out = serde_json::to_value(a.review).unwrap();
    assert_eq!(
        out["response"]["uid"],
        "705ab4f5-6393-11e8-b7cc-42010a800002"
    );
    assert_eq!(out["response"]["result"]["status"], "Success");
    let objects = out["response"]["convertedObjects"].as_array().unwrap();
    assert_eq!(objects.len(), 2);
    assert_eq!(objects[0], convert(&capmox_cluster(), V1ALPHA3).unwrap());
    assert_eq!(objects[1], multi_instance_cluster());
}

#[test]
fn a_refused_object_is_named_with_both_versions_and_the_field() {
    let mut zoned = capmox_cluster();
    zoned["spec"]["zoneConfig"] = json!([{"zone": "z1", "dnsServers": ["1.1.1.1"]}]);
    let msg = convert_object(zoned, V1ALPHA3).unwrap_err();
    assert!(
        msg.starts_with(&format!("ProxmoxCluster default/wl1 ({V1ALPHA2} to {V1ALPHA3}): spec.zoneConfig: has no v1alpha3 equivalent")),
        "{msg}"
    );
}
