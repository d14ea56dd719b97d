//! Every cluster template renders with clusterctl's variable rules, every
//! variable is documented, missing variables are listed, and each of our
//! objects in the output passes the generated CRD's CEL rules and the
//! provider's own validation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox_controller::api::{ProxmoxCluster, ProxmoxMachineTemplate, crd, validation};
use capmox_e2e::clusterctl::{self, RenderError};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap()
}

fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect()
}

fn single_vars() -> BTreeMap<String, String> {
    vars(&[
        ("CLUSTER_NAME", "wl1"),
        ("NAMESPACE", "default"),
        ("KUBERNETES_VERSION", "v1.33.4"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.0.5"),
        ("PROXMOX_URL", "https://pve-a1.example:8006"),
        ("PROXMOX_TOKEN", "capmox@pve!capi"),
        ("PROXMOX_SECRET", "0b3a4f4e-9f3c-4a55-9a35-5d1c0e6f1a2b"),
        ("PROXMOX_SOURCENODE", "pve-a1"),
        ("TEMPLATE_VMID", "9000"),
        ("NODE_IP_RANGES", "[10.10.0.100-10.10.0.200]"),
        ("GATEWAY", "10.10.0.1"),
    ])
}

fn multi_vars() -> BTreeMap<String, String> {
    let mut v = vars(&[
        ("CLUSTER_NAME", "wl1"),
        ("NAMESPACE", "default"),
        ("KUBERNETES_VERSION", "v1.33.4"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.0.5"),
    ]);
    for (i, net) in [(1, "10"), (2, "20"), (3, "30")] {
        v.insert(
            format!("PROXMOX_{i}_URL"),
            format!("https://127.0.0.1:{}", 8000 + i),
        );
        v.insert(format!("PROXMOX_{i}_TOKEN"), "capmox@pve!capi".into());
        v.insert(
            format!("PROXMOX_{i}_SECRET"),
            "0b3a4f4e-9f3c-4a55-9a35-5d1c0e6f1a2b".into(),
        );
        v.insert(
            format!("PROXMOX_{i}_NODE_IP_RANGES"),
            format!("[10.{net}.0.100-10.{net}.0.200]"),
        );
        v.insert(format!("PROXMOX_{i}_GATEWAY"), format!("10.{net}.0.1"));
    }
    v
}

fn schema_of(kind: &str) -> Value {
    let c = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == kind)
        .unwrap();
    let s = c.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    serde_json::to_value(s).unwrap()
}

/// Renders, parses and checks every object of our group; returns the documents.
fn render_and_check(template: &str, vars: &BTreeMap<String, String>) -> Vec<Value> {
    let text = clusterctl::render(&read(template), vars).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let cel = kube_cel::Validator::new();
    for doc in &docs {
        let kind = doc["kind"].as_str().unwrap();
        if kind == "Secret" {
            // clusterctl move takes a Secret along only when it is labelled
            // (docs/capi-contract.md fact 19).
            assert_eq!(
                doc["metadata"]["labels"]["clusterctl.cluster.x-k8s.io/move"], "",
                "{template}: Secret {} would stay behind on clusterctl move",
                doc["metadata"]["name"]
            );
        }
        let api = doc["apiVersion"].as_str().unwrap();
        if !api.starts_with("infrastructure.cluster.x-k8s.io/") {
            continue;
        }
        assert_eq!(api, "infrastructure.cluster.x-k8s.io/v1alpha3");
        if let Err(errs) = cel.validate(&schema_of(kind), doc, None) {
            panic!("{template}: {kind} refused by CEL: {:?}", errs.into_vec());
        }
        let problems = match kind {
            "ProxmoxCluster" => {
                let c: ProxmoxCluster = serde_json::from_value(doc.clone()).unwrap();
                validation::validate_cluster(&c.spec)
            }
            "ProxmoxMachineTemplate" => {
                let t: ProxmoxMachineTemplate = serde_json::from_value(doc.clone()).unwrap();
                validation::validate_machine_template(&t.spec)
            }
            other => panic!("unexpected kind {other}"),
        };
        assert!(problems.is_empty(), "{template}: {kind}: {problems:?}");
        // Nothing in our objects was dropped by the types (unknown fields).
        let back = match kind {
            "ProxmoxCluster" => {
                serde_json::to_value(serde_json::from_value::<ProxmoxCluster>(doc.clone()).unwrap())
            }
            _ => serde_json::to_value(
                serde_json::from_value::<ProxmoxMachineTemplate>(doc.clone()).unwrap(),
            ),
        }
        .unwrap();
        let mut original = doc["spec"].clone();
        prune_empty(&mut original);
        assert_eq!(
            back["spec"], original,
            "{template}: {kind} has fields the API does not know"
        );
    }
    docs
}

/// Empty lists mean "unset", which the types serialise as absent.
fn prune_empty(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, child| !matches!(child, Value::Array(a) if a.is_empty()));
            map.values_mut().for_each(prune_empty);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_empty),
        _ => {}
    }
}

fn kinds(docs: &[Value]) -> Vec<String> {
    docs.iter()
        .map(|d| d["kind"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn default_template_renders_and_validates() {
    let docs = render_and_check("templates/cluster-template.yaml", &single_vars());
    assert_eq!(
        kinds(&docs),
        [
            "Cluster",
            "ProxmoxCluster",
            "Secret",
            "KubeadmControlPlane",
            "ProxmoxMachineTemplate",
            "ProxmoxMachineTemplate",
            "KubeadmConfigTemplate",
            "MachineDeployment"
        ]
    );
    let cluster = &docs[1];
    assert_eq!(
        cluster["spec"]["credentialsRef"]["name"],
        "wl1-proxmox-credentials"
    );
    assert_eq!(
        cluster["spec"]["ipv4Config"]["addresses"][0],
        "10.10.0.100-10.10.0.200"
    );
    assert_eq!(docs[4]["spec"]["template"]["spec"]["templateID"], 9000);
}

#[test]
fn multi_instance_template_renders_and_validates() {
    let docs = render_and_check(
        "templates/cluster-template-multi-instance.yaml",
        &multi_vars(),
    );
    let k = kinds(&docs);
    assert_eq!(k.iter().filter(|k| *k == "MachineDeployment").count(), 3);
    assert_eq!(k.iter().filter(|k| *k == "Secret").count(), 3);
    let pc = docs.iter().find(|d| d["kind"] == "ProxmoxCluster").unwrap();
    let names: Vec<&str> = pc["spec"]["settings"]["instances"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dc-a", "dc-b", "dc-c"]);
    assert_eq!(pc["spec"]["settings"]["mode"], "MultiInstance");
    let fds: Vec<&str> = docs
        .iter()
        .filter(|d| d["kind"] == "MachineDeployment")
        .map(|d| {
            d["spec"]["template"]["spec"]["failureDomain"]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(fds, ["dc-a", "dc-b", "dc-c"]);
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmControlPlane")
        .unwrap();
    assert_eq!(kcp["spec"]["replicas"], 3);
}

#[test]
fn vip_pool_template_claims_the_endpoint_and_kube_vip_reads_it() {
    let mut v = multi_vars();
    v.remove("CONTROL_PLANE_ENDPOINT_IP");
    v.insert(
        "CONTROL_PLANE_ENDPOINT_IP_RANGES".into(),
        "[10.10.0.5-10.10.0.9]".into(),
    );
    let docs = render_and_check(
        "templates/cluster-template-multi-instance-vip-pool.yaml",
        &v,
    );
    let pc = docs.iter().find(|d| d["kind"] == "ProxmoxCluster").unwrap();
    assert!(pc["spec"].get("controlPlaneEndpoint").is_none());
    assert_eq!(
        pc["spec"]["controlPlaneEndpointPool"],
        serde_json::json!({"addresses": ["10.10.0.5-10.10.0.9"], "prefix": 24, "port": 6443})
    );
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmControlPlane")
        .unwrap();
    let spec = &kcp["spec"]["kubeadmConfigSpec"];
    let manifest = spec["files"][0]["content"].as_str().unwrap();
    assert!(manifest.contains("{name: address, value: \"CONTROL_PLANE_ENDPOINT_HOST\"}"));
    let command = spec["preKubeadmCommands"][0].as_str().unwrap();
    assert!(
        command.contains("s/CONTROL_PLANE_ENDPOINT_HOST/"),
        "{command}"
    );
    assert!(command.contains("/run/kubeadm/kubeadm*.yaml"), "{command}");
    // The rest is the multi-instance flavor.
    assert_eq!(
        kinds(&docs),
        kinds(&render_and_check(
            "templates/cluster-template-multi-instance.yaml",
            &multi_vars(),
        ))
    );
}

#[test]
fn overlapping_pools_in_the_rendered_output_are_caught() {
    let mut v = multi_vars();
    v.insert(
        "PROXMOX_2_NODE_IP_RANGES".into(),
        "[10.10.0.150-10.10.0.160]".into(),
    );
    v.insert("PROXMOX_2_GATEWAY".into(), "10.10.0.1".into());
    let text =
        clusterctl::render(&read("templates/cluster-template-multi-instance.yaml"), &v).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let pc: ProxmoxCluster = serde_json::from_value(
        docs.into_iter()
            .find(|d| d["kind"] == "ProxmoxCluster")
            .unwrap(),
    )
    .unwrap();
    let errs = validation::validate_cluster(&pc.spec);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        errs[0].path,
        "spec.settings.instances[1].network.ipv4Config"
    );
}

#[test]
fn missing_variables_are_listed() {
    let err = clusterctl::render(&read("templates/cluster-template.yaml"), &vars(&[])).unwrap_err();
    assert_eq!(
        err,
        RenderError::Missing(
            [
                "CLUSTER_NAME",
                "CONTROL_PLANE_ENDPOINT_IP",
                "GATEWAY",
                "KUBERNETES_VERSION",
                "NAMESPACE",
                "NODE_IP_RANGES",
                "PROXMOX_SECRET",
                "PROXMOX_SOURCENODE",
                "PROXMOX_TOKEN",
                "PROXMOX_URL",
                "TEMPLATE_VMID",
            ]
            .iter()
            .map(|s| (*s).to_string())
            .collect()
        )
    );
}

#[test]
fn every_variable_is_documented() {
    let doc = read("docs/templates.md");
    for t in [
        "templates/cluster-template.yaml",
        "templates/cluster-template-multi-instance.yaml",
        "templates/cluster-template-multi-instance-vip-pool.yaml",
    ] {
        for v in clusterctl::variables(&read(t)).unwrap() {
            assert!(
                doc.contains(&format!("`{}`", v.name)),
                "{t}: variable {} is not in docs/templates.md",
                v.name
            );
        }
    }
}
