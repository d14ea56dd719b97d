//! Ignition bootstrap data (`format: ignition`, docs/flatcar.md): the seed
//! ISO carries the Ignition config as `user-data`, enriched with the
//! machine's host name, `/etc/proxmox-env` and networkd units, plus a
//! version 1 `network-config` and a `vendor-data`; the simulated guest boots
//! with Ignition and the machine is provisioned. A Secret that is not a
//! usable Ignition config is refused before any Proxmox call, naming the
//! Secret and the problem, and the machine goes on once it is fixed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use percent_encoding::percent_decode_str;
use serde_json::{Value, json};
use support::*;

/// What the kubeadm bootstrap provider writes for Flatcar: spec 2.3.0.
fn cabpk_like() -> String {
    json!({
        "ignition": {"version": "2.3.0"},
        "storage": {"files": [{
            "filesystem": "root",
            "path": "/etc/kubeadm.yml",
            "mode": 384,
            "contents": {"source": "data:,kind%3A%20JoinConfiguration"}
        }]},
        "systemd": {"units": [{"name": "kubeadm.service", "enabled": true}]}
    })
    .to_string()
}

fn data_url_text(v: &Value) -> String {
    let s = v.as_str().unwrap().strip_prefix("data:,").unwrap();
    percent_decode_str(s).decode_utf8().unwrap().into_owned()
}

fn file_text(config: &Value, path: &str) -> String {
    let f = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == path)
        .unwrap_or_else(|| panic!("no {path} in {config}"));
    data_url_text(&f["contents"]["source"])
}

#[tokio::test]
async fn ignition_goes_on_the_seed_iso_enriched_and_the_guest_boots_with_it() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine_with(
        "wl1",
        "flat",
        ProxmoxMachineSpec::default(),
        None,
        false,
        false,
    )
    .await;
    w.bootstrap_secret_with("wl1", "flat", &cabpk_like(), Some("ignition"))
        .await;
    let m = w
        .drive("flat", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.bootstrap_data_provided)
                == Some(true)
        })
        .await
        .unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let uid = m.uid().unwrap();
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    let bytes = w
        .pve("dc-a")
        .iso_bytes(&vm.node, &format!("cephfs:iso/capmox-{vmid}-{uid}.iso"))
        .unwrap();
    let seed = pve_sim::iso::read_nocloud(&bytes).unwrap();
    assert_eq!(seed.volume_label, "cidata");
    let uuid = vm
        .config
        .get("smbios1")
        .and_then(|s| s.split(',').find_map(|kv| kv.strip_prefix("uuid=")))
        .unwrap()
        .to_string();
    let mac = vm
        .config
        .get("net0")
        .and_then(|n| n.split(',').next())
        .and_then(|h| h.strip_prefix("virtio="))
        .unwrap()
        .to_ascii_lowercase();

    // user-data: the Secret's config, its own entries kept, ours added.
    let config: Value = serde_json::from_str(&seed.user_data).unwrap();
    assert_eq!(config["ignition"]["version"], "2.3.0");
    assert_eq!(config["systemd"]["units"][0]["name"], "kubeadm.service");
    assert_eq!(
        file_text(&config, "/etc/kubeadm.yml"),
        "kind: JoinConfiguration"
    );
    assert_eq!(file_text(&config, "/etc/hostname"), "flat\n");
    assert_eq!(
        file_text(&config, "/etc/proxmox-env"),
        format!(
            "COREOS_CUSTOM_HOSTNAME=flat\nCOREOS_CUSTOM_ZONE=dc-a\n\
             COREOS_CUSTOM_INSTANCE_ID={uuid}\nCOREOS_CUSTOM_PROVIDER_ID=proxmox://{uuid}\n\
             COREOS_CUSTOM_NODE={}\nCOREOS_CUSTOM_PRIVATE_IPV4=10.10.0.20\n",
            vm.node
        )
    );
    let units = config["networkd"]["units"].as_array().unwrap();
    assert_eq!(units.len(), 1);
    assert_eq!(units[0]["name"], "00-eth0.network");
    assert_eq!(
        units[0]["contents"],
        format!(
            "[Match]\nMACAddress={mac}\n\n[Network]\nAddress=10.10.0.20/24\nDNS=10.10.0.53\n\n\
             [Route]\nDestination=0.0.0.0/0\nGateway=10.10.0.1\n"
        )
    );
    // meta-data as for cloud-config; network-config v1 for Afterburn.
    assert_eq!(
        seed.meta_data,
        format!("instance-id: {uuid}\nlocal-hostname: flat\n")
    );
    let net: Value = serde_saphyr::from_str(seed.network_config.as_deref().unwrap()).unwrap();
    assert_eq!(
        net,
        json!({"version": 1, "config": [
            {"type": "physical", "name": "eth0", "mac_address": mac,
             "subnets": [{"type": "static", "address": "10.10.0.20/24", "gateway": "10.10.0.1"}]},
            {"type": "nameserver", "address": ["10.10.0.53"]}
        ]})
    );
    assert_eq!(seed.vendor_data.as_deref(), Some("#cloud-config\n{}\n"));

    // The guest booted with Ignition, took the address of its networkd
    // unit, and the bootstrap sentinel said success.
    let m = w.provision("flat").await;
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    assert_eq!(vm.guest_boot.as_deref(), Some("ignition 2.3.0"));
    let addresses: Vec<String> = m
        .status
        .as_ref()
        .unwrap()
        .addresses
        .iter()
        .map(|a| a.address.clone())
        .collect();
    assert!(
        addresses.contains(&"10.10.0.20".to_string()),
        "{addresses:?}"
    );
    assert!(w.isos("dc-a").is_empty(), "ISO deleted once provisioned");
}

#[tokio::test]
async fn unusable_ignition_is_refused_before_any_proxmox_call() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let cases = [
        (
            "ign-yaml",
            "#cloud-config\nruncmd: []\n",
            "the bootstrap data Secret default/ign-yaml-bootstrap (format ignition) is not a usable Ignition config: not JSON: expected value at line 1 column 1",
        ),
        (
            "ign-nover",
            "{\"storage\":{\"files\":[]}}",
            "the bootstrap data Secret default/ign-nover-bootstrap (format ignition) is not a usable Ignition config: no ignition.version (an Ignition config names its spec version)",
        ),
    ];
    for (name, value, _) in cases {
        w.machine_with(
            "wl1",
            name,
            ProxmoxMachineSpec::default(),
            None,
            false,
            false,
        )
        .await;
        w.bootstrap_secret_with("wl1", name, value, Some("ignition"))
            .await;
    }
    for (name, _, message) in cases {
        for _ in 0..3 {
            w.reconcile(name).await.unwrap().unwrap();
        }
        let m = w.get(name).await.unwrap();
        assert_eq!(
            condition(&m, "VirtualMachineProvisioned"),
            Some((
                "False".into(),
                "InvalidBootstrapData".into(),
                message.into()
            ))
        );
        assert_eq!(m.spec.instance, None, "no instance chosen");
        assert_eq!(m.spec.virtual_machine_id, None, "no VMID written");
    }
    assert_eq!(w.pve("dc-a").calls().total, 0, "no Proxmox call at all");
    assert!(w.vms("dc-a").is_empty());

    // The bootstrap provider writes a usable config: the machine goes on.
    Api::<Secret>::namespaced(w.client.clone(), NS)
        .patch(
            "ign-nover-bootstrap",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "data": {"value": ByteString(cabpk_like().into_bytes())}
            })),
        )
        .await
        .unwrap();
    let m = w.provision("ign-nover").await;
    assert!(m.spec.virtual_machine_id.is_some());
    let vm = w
        .pve("dc-a")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    assert_eq!(vm.guest_boot.as_deref(), Some("ignition 2.3.0"));
}
