//! CAPMOX's Flatcar flavor (`templates/cluster-template-flatcar.yaml` of
//! the reference data) against ours and against what the provider writes
//! into Ignition configs (docs/flatcar.md):
//!
//! - every `COREOS_CUSTOM_*` variable its KubeadmConfigs read is one the
//!   provider writes to `/etc/proxmox-env`, with a value, so CAPMOX's
//!   KubeadmConfig specs work unchanged;
//! - its KubeadmConfigs ask for `format: ignition` as ours do, and its
//!   machine templates skip the cloud-init status check as ours do;
//! - every variable a user sets for it is one our flavor takes or one
//!   docs/flatcar.md maps.

use std::collections::BTreeSet;
use std::path::PathBuf;

use capmox_controller::cloudinit::Interface;
use capmox_controller::cloudinit::ignition::{self, Enrichment, PROXMOX_ENV_KEYS};
use percent_encoding::percent_decode_str;
use pve_client::options::MacAddr;
use serde_json::Value;

use super::{read, reference, render, template_vars};

fn ours(rel: &str) -> String {
    read(
        &PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(rel),
    )
}

/// The variable names of a clusterctl template (`${NAME}`, `${ NAME }`,
/// `${NAME:=x}`; `$${NAME}` is a literal, not a variable).
fn variables(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] == b'$' && bytes[i + 1] == b'$' {
            i += 2;
            continue;
        }
        if bytes[i] == b'$' && bytes[i + 1] == b'{' {
            let rest = text[i + 2..].trim_start();
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.insert(name);
        }
        i += 1;
    }
    out
}

/// The `COREOS_CUSTOM_*` names a rendered text reads (`${COREOS_CUSTOM_X}`
/// or `$COREOS_CUSTOM_X`).
fn coreos_custom_reads(text: &str) -> BTreeSet<String> {
    text.match_indices("COREOS_CUSTOM_")
        .map(|(i, _)| {
            text[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

fn reference_docs() -> Vec<Value> {
    let text = render(
        &read(&reference("templates/cluster-template-flatcar.yaml")),
        &template_vars(),
    );
    serde_saphyr::from_multiple(&text).unwrap()
}

/// `/etc/proxmox-env` as the provider writes it for one static device.
fn written_env() -> String {
    let devices = [Interface {
        index: 0,
        mac: MacAddr::parse("BC:24:11:00:00:01").unwrap(),
        addresses: vec![("10.10.10.20".parse().unwrap(), 24)],
        gateway4: Some("10.10.10.1".parse().unwrap()),
        gateway6: None,
        metric: None,
        dns: vec![],
        dhcp4: false,
        dhcp6: false,
    }];
    let e = Enrichment {
        hostname: "wl1-worker-x7k2p",
        instance_id: "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
        provider_id: "proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
        zone: "dc-a",
        node: "pve1",
        interfaces: &devices,
    };
    let out = ignition::enrich(br#"{"ignition":{"version":"2.3.0"}}"#, &e).unwrap();
    let config: Value = serde_json::from_slice(&out).unwrap();
    let source = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == ignition::PROXMOX_ENV_PATH)
        .unwrap()["contents"]["source"]
        .as_str()
        .unwrap()
        .to_string();
    percent_decode_str(source.strip_prefix("data:,").unwrap())
        .decode_utf8()
        .unwrap()
        .into_owned()
}

#[test]
fn capmox_flatcar_kubeadm_configs_read_only_what_the_provider_writes() {
    let docs = reference_docs();
    let configs: Vec<&Value> = docs
        .iter()
        .filter_map(|d| match d["kind"].as_str() {
            Some("KubeadmControlPlane") => Some(&d["spec"]["kubeadmConfigSpec"]),
            Some("KubeadmConfigTemplate") => Some(&d["spec"]["template"]["spec"]),
            _ => None,
        })
        .collect();
    assert_eq!(
        configs.len(),
        2,
        "a KubeadmControlPlane and a KubeadmConfigTemplate"
    );
    let env = written_env();
    for spec in configs {
        assert_eq!(spec["format"], "ignition");
        let read = coreos_custom_reads(&serde_json::to_string(spec).unwrap());
        assert!(read.contains("COREOS_CUSTOM_INSTANCE_ID"), "{read:?}");
        for name in &read {
            assert!(
                PROXMOX_ENV_KEYS.contains(&name.as_str()),
                "CAPMOX's Flatcar flavor reads {name}, which the provider does not write"
            );
            let line = env
                .lines()
                .find_map(|l| l.strip_prefix(&format!("{name}=")))
                .unwrap_or_else(|| panic!("{name} not in {env}"));
            assert!(!line.is_empty(), "{name} is empty in {env}");
        }
        // Its providerID (`proxmox://<instance-id>`) is ours in format UUID
        // (the rendered text keeps clusterctl's `$$`).
        let text = serde_json::to_string(spec).unwrap();
        if text.contains("provider-id") {
            assert!(text.contains("proxmox://'$"), "{text}");
            assert!(text.contains("{COREOS_CUSTOM_INSTANCE_ID}'"), "{text}");
            assert!(env.contains(
                "COREOS_CUSTOM_PROVIDER_ID=proxmox://3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f\n"
            ));
        }
    }
}

#[test]
fn our_flatcar_flavor_sets_what_capmoxs_sets() {
    let theirs = reference_docs();
    let mine: Vec<Value> =
        serde_saphyr::from_multiple(&ours("templates/cluster-template-flatcar.yaml")).unwrap();
    let formats = |docs: &[Value]| -> Vec<String> {
        docs.iter()
            .filter_map(|d| match d["kind"].as_str() {
                Some("KubeadmControlPlane") => d["spec"]["kubeadmConfigSpec"]["format"].as_str(),
                Some("KubeadmConfigTemplate") => d["spec"]["template"]["spec"]["format"].as_str(),
                _ => None,
            })
            .map(String::from)
            .collect()
    };
    assert_eq!(formats(&theirs), ["ignition", "ignition"]);
    assert_eq!(formats(&mine), formats(&theirs));
    let skips = |docs: &[Value]| -> Vec<Value> {
        docs.iter()
            .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
            .map(|d| d["spec"]["template"]["spec"]["checks"]["skipCloudInitStatus"].clone())
            .collect()
    };
    assert_eq!(skips(&theirs), [Value::Bool(true), Value::Bool(true)]);
    assert_eq!(skips(&mine), skips(&theirs));
    // Both register the kubelet through coreos-metadata.service from
    // /etc/proxmox-env.
    for docs in [&theirs, &mine] {
        let text = serde_json::to_string(docs).unwrap();
        assert!(text.contains("coreos-metadata.service"));
        assert!(text.contains("EnvironmentFile=/etc/proxmox-env"));
    }
}

#[test]
fn every_capmox_flatcar_variable_is_ours_or_mapped() {
    let theirs = variables(&read(&reference("templates/cluster-template-flatcar.yaml")));
    let mine = variables(&ours("templates/cluster-template-flatcar.yaml"));
    let doc = ours("docs/flatcar.md");
    let unmapped: Vec<&String> = theirs
        .iter()
        .filter(|v| !mine.contains(*v) && !doc.contains(&format!("`{v}`")))
        .collect();
    assert!(
        unmapped.is_empty(),
        "CAPMOX's Flatcar flavor variables neither in ours nor mapped in docs/flatcar.md: {unmapped:?}"
    );
    assert!(theirs.contains("TEMPLATE_VMID"), "{theirs:?}");
}

#[test]
fn the_variable_scanner_skips_literals() {
    let v = variables("a: ${A} b: $${COREOS_CUSTOM_X} c: ${ B } d: ${C:=x}");
    assert_eq!(
        v,
        BTreeSet::from(["A".to_string(), "B".to_string(), "C".to_string()])
    );
}
