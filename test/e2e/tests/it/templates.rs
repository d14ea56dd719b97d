//! Every cluster template renders with clusterctl's variable rules, every
//! variable is documented, missing variables are listed, and each of our
//! objects in the output passes the generated CRD's CEL rules and the
//! provider's own validation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox_controller::api::{
    ProxmoxCluster, ProxmoxClusterTemplate, ProxmoxMachineTemplate, crd, validation,
};
use capmox_e2e::clusterctl::{self, RenderError};
use capmox_e2e::crds::{Cluster, ClusterClass, Topology};
use capmox_e2e::standin::topology;
use serde_json::{Value, json};

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
    check_objects(template, &docs);
    // A cluster's own ProxmoxMachineTemplates (named after it; a
    // ClusterClass's shared ones are not) carry its name in the label that
    // `kubectl get proxmoxmachinetemplates` shows as CLUSTER.
    let cluster = vars["CLUSTER_NAME"].as_str();
    for doc in &docs {
        let name = doc["metadata"]["name"].as_str().unwrap_or_default();
        if doc["kind"] == "ProxmoxMachineTemplate" && name.starts_with(cluster) {
            assert_eq!(
                doc["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"], cluster,
                "{template}: ProxmoxMachineTemplate {name} has no cluster-name label"
            );
        }
    }
    docs
}

/// Checks every object of our group in `docs`: the CRD's CEL rules, the
/// provider's validation, no field unknown to the API types.
fn check_objects(template: &str, docs: &[Value]) {
    let cel = kube_cel::Validator::new();
    for doc in docs {
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
        // What the API server stores: `null`s of non-nullable fields dropped
        // (a variable left unset renders `null`).
        let mut doc = doc.clone();
        drop_nulls(&mut doc);
        let doc = &doc;
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
            "ProxmoxClusterTemplate" => {
                let t: ProxmoxClusterTemplate = serde_json::from_value(doc.clone()).unwrap();
                validation::validate_cluster_template(&t.spec)
            }
            other => panic!("unexpected kind {other}"),
        };
        assert!(problems.is_empty(), "{template}: {kind}: {problems:?}");
        // Nothing in our objects was dropped by the types (unknown fields).
        let back = match kind {
            "ProxmoxCluster" => {
                serde_json::to_value(serde_json::from_value::<ProxmoxCluster>(doc.clone()).unwrap())
            }
            "ProxmoxClusterTemplate" => serde_json::to_value(
                serde_json::from_value::<ProxmoxClusterTemplate>(doc.clone()).unwrap(),
            ),
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
}

/// Drops `null` values, as kube-apiserver drops those of non-nullable
/// fields (none of ours is nullable).
fn drop_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, child| !child.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
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

/// The `${COREOS_CUSTOM_*}` names a text reads (after clusterctl's `$$`).
fn coreos_custom_refs(text: &str) -> std::collections::BTreeSet<String> {
    text.match_indices("${COREOS_CUSTOM_")
        .map(|(i, _)| {
            let rest = &text[i + 2..];
            rest[..rest.find('}').unwrap()].to_string()
        })
        .collect()
}

#[test]
fn flatcar_template_asks_for_ignition_and_reads_only_what_the_provider_writes() {
    let docs = render_and_check("templates/cluster-template-flatcar.yaml", &multi_vars());
    // The multi-instance flavor's objects, in the same order.
    let multi = render_and_check(
        "templates/cluster-template-multi-instance.yaml",
        &multi_vars(),
    );
    assert_eq!(kinds(&docs), kinds(&multi));
    let kcp = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmControlPlane")
        .unwrap();
    let kct = docs
        .iter()
        .find(|d| d["kind"] == "KubeadmConfigTemplate")
        .unwrap();
    let written: std::collections::BTreeSet<String> =
        capmox_controller::cloudinit::ignition::PROXMOX_ENV_KEYS
            .iter()
            .map(|k| (*k).to_string())
            .collect();
    for (what, spec) in [
        ("KubeadmControlPlane", &kcp["spec"]["kubeadmConfigSpec"]),
        ("KubeadmConfigTemplate", &kct["spec"]["template"]["spec"]),
    ] {
        assert_eq!(spec["format"], "ignition", "{what}");
        assert_eq!(spec["users"][0]["name"], "core", "{what}");
        let clc = spec["ignition"]["containerLinuxConfig"]["additionalConfig"]
            .as_str()
            .unwrap();
        let clc: Value = serde_saphyr::from_str(clc).unwrap();
        let units = clc["systemd"]["units"].as_array().unwrap();
        let metadata = units
            .iter()
            .find(|u| u["name"] == "coreos-metadata.service")
            .unwrap();
        assert!(
            metadata["contents"]
                .as_str()
                .unwrap()
                .contains("EnvironmentFile=/etc/proxmox-env"),
            "{what}"
        );
        let kubeadm = units
            .iter()
            .find(|u| u["name"] == "kubeadm.service")
            .unwrap();
        assert!(
            kubeadm["dropins"][0]["contents"]
                .as_str()
                .unwrap()
                .contains("EnvironmentFile=/run/metadata/flatcar"),
            "{what}"
        );
        let join = &spec["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"][0];
        assert_eq!(join["name"], "provider-id", "{what}");
        assert_eq!(join["value"], "${COREOS_CUSTOM_PROVIDER_ID}", "{what}");
        let text = serde_json::to_string(spec).unwrap();
        let read = coreos_custom_refs(&text);
        assert!(!read.is_empty(), "{what}");
        assert!(
            read.is_subset(&written),
            "{what} reads {read:?}, the provider writes {written:?}"
        );
    }
    assert_eq!(
        kcp["spec"]["kubeadmConfigSpec"]["initConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
            [0]["value"],
        "${COREOS_CUSTOM_PROVIDER_ID}"
    );
    for t in docs
        .iter()
        .filter(|d| d["kind"] == "ProxmoxMachineTemplate")
    {
        let spec = &t["spec"]["template"]["spec"];
        assert_eq!(
            spec["templateSelector"],
            json!({"matchTags": ["capmox", "flatcar"], "matchPolicy": "bestSubset"})
        );
        assert_eq!(spec["checks"]["skipCloudInitStatus"], true);
    }
    // kube-vip: Flatcar keeps predictable interface names; empty lets
    // kube-vip take the default route's interface.
    let pod: Value = serde_saphyr::from_str(
        kcp["spec"]["kubeadmConfigSpec"]["files"][0]["content"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    let vip_interface = pod["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "vip_interface")
        .unwrap();
    assert_eq!(vip_interface["value"], "");
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
        "templates/cluster-template-topology.yaml",
        "templates/clusterclass-capmox.yaml",
        "templates/cluster-template-multi-instance-vip-pool.yaml",
        "templates/cluster-template-flatcar.yaml",
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

/// `clusterctl generate cluster --flavor topology`: the flavor plus the
/// ClusterClass it names, from `templates/clusterclass-<name>.yaml`.
fn generate_topology(vars: &BTreeMap<String, String>) -> Vec<Value> {
    let text = clusterctl::generate_cluster(
        &read("templates/cluster-template-topology.yaml"),
        |name| {
            std::fs::read_to_string(root().join(format!("templates/clusterclass-{name}.yaml"))).ok()
        },
        vars,
    )
    .unwrap();
    serde_saphyr::from_multiple(&text).unwrap()
}

fn one<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// The topology stand-in's desired state for the rendered documents.
fn topology_desired(docs: &[Value]) -> (topology::desired::Desired, Topology) {
    let class: ClusterClass =
        serde_json::from_value(one(docs, "ClusterClass", "capmox").clone()).unwrap();
    let cluster: Cluster = serde_json::from_value(one(docs, "Cluster", "wl1").clone()).unwrap();
    let topo = cluster.spec.topology.clone().unwrap();
    let tmpl =
        |r: &capmox_e2e::crds::clusterclass::TemplateRef| one(docs, &r.kind, &r.name).clone();
    let spec = &class.spec;
    let templates = topology::desired::ClassTemplates {
        infrastructure: tmpl(&spec.infrastructure.template_ref),
        control_plane: tmpl(&spec.control_plane.template_ref),
        control_plane_machine: spec
            .control_plane
            .machine_infrastructure
            .as_ref()
            .map(|m| tmpl(&m.template_ref)),
        workers: spec
            .workers
            .iter()
            .flat_map(|w| &w.machine_deployments)
            .map(|md| {
                (
                    md.class.clone(),
                    (
                        tmpl(&md.bootstrap.template_ref),
                        tmpl(&md.infrastructure.template_ref),
                    ),
                )
            })
            .collect(),
    };
    let d = topology::desired::desired("wl1", "default", &topo, spec, &templates).unwrap();
    (d, topo)
}

/// The objects the topology controller would make of our kinds, as documents.
fn topology_objects(d: &topology::desired::Desired) -> Vec<Value> {
    let mut out = vec![json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
        "kind": "ProxmoxCluster",
        "metadata": {"name": "wl1-x"},
        "spec": d.infrastructure_spec(),
    })];
    out.extend(d.control_plane_machine.iter().cloned());
    out.extend(
        d.machine_deployments
            .iter()
            .map(|m| m.infrastructure.clone()),
    );
    out
}

#[test]
fn topology_flavor_renders_with_its_cluster_class_and_validates() {
    let docs = generate_topology(&multi_vars());
    assert_eq!(
        kinds(&docs),
        [
            "ClusterClass",
            "ProxmoxClusterTemplate",
            "KubeadmControlPlaneTemplate",
            "ProxmoxMachineTemplate",
            "ProxmoxMachineTemplate",
            "KubeadmConfigTemplate",
            "Cluster",
            "Secret",
            "Secret",
            "Secret",
        ]
    );
    // The class's own templates, as applied, pass the webhooks' checks.
    check_objects("clusterclass-capmox.yaml", &docs);
    let (d, topo) = topology_desired(&docs);
    // What the topology controller makes of them passes too.
    check_objects("topology (desired)", &topology_objects(&d));

    let pc = d.infrastructure_spec();
    assert_eq!(
        pc["controlPlaneEndpoint"],
        json!({"host": "10.10.0.5", "port": 6443})
    );
    assert_eq!(pc["settings"]["mode"], "MultiInstance");
    assert_eq!(pc["providerIDFormat"], "UUID");
    assert_eq!(pc["dnsServers"], json!(["1.1.1.1", "8.8.8.8"]));
    let instances = pc["settings"]["instances"].as_array().unwrap();
    let names: Vec<&str> = instances
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["dc-a", "dc-b", "dc-c"]);
    assert_eq!(
        instances[1]["credentialsRef"]["name"],
        "wl1-dc-b-credentials"
    );
    assert_eq!(
        instances[2]["network"]["ipv4Config"],
        json!({"addresses": ["10.30.0.100-10.30.0.200"], "prefix": 24, "gateway": "10.30.0.1"})
    );
    assert_eq!(
        instances[0]["template"]["templateSelector"],
        json!({"matchTags": ["capmox"], "matchPolicy": "bestSubset"})
    );

    let cp = d.control_plane_machine.as_ref().unwrap();
    let cp_spec = &cp["spec"]["template"]["spec"];
    assert_eq!(
        (
            cp_spec["numSockets"].clone(),
            cp_spec["numCores"].clone(),
            cp_spec["memoryMiB"].clone()
        ),
        (json!(1), json!(2), json!(4096))
    );
    assert_eq!(cp_spec["disks"]["bootVolume"]["sizeGb"], 40);
    assert_eq!(cp_spec["tags"], json!(["kubernetes"]));

    let fds: Vec<(&str, &str)> = d
        .machine_deployments
        .iter()
        .map(|m| {
            (
                m.topology_name.as_str(),
                m.failure_domain.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        fds,
        [
            ("md-dc-a", "dc-a"),
            ("md-dc-b", "dc-b"),
            ("md-dc-c", "dc-c")
        ]
    );
    for m in &d.machine_deployments {
        assert_eq!(m.replicas, Some(1));
        assert_eq!(
            m.infrastructure["spec"]["template"]["spec"]["memoryMiB"],
            8192
        );
        assert_eq!(m.infrastructure["spec"]["template"]["spec"]["numCores"], 4);
    }

    // The control plane: the class's kubeadm config with the kube-vip
    // manifest announcing the endpoint, the topology's version and replicas.
    let kcp = d.control_plane_spec(
        &topo,
        Some((
            "infrastructure.cluster.x-k8s.io",
            "ProxmoxMachineTemplate",
            "t",
        )),
    );
    assert_eq!(kcp["version"], "v1.33.4");
    assert_eq!(kcp["replicas"], 3);
    let files = kcp["kubeadmConfigSpec"]["files"].as_array().unwrap();
    assert_eq!(files.len(), 1);
    assert_eq!(files[0]["path"], "/etc/kubernetes/manifests/kube-vip.yaml");
    let manifest: Value = serde_saphyr::from_str(files[0]["content"].as_str().unwrap()).unwrap();
    let env = &manifest["spec"]["containers"][0]["env"];
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "address", "value": "10.10.0.5"})),
        "{env}"
    );
    assert!(
        env.as_array()
            .unwrap()
            .contains(&json!({"name": "port", "value": "6443"})),
        "{env}"
    );
    assert_eq!(
        kcp["kubeadmConfigSpec"]["users"][0]["sshAuthorizedKeys"],
        json!([])
    );
}

#[test]
fn topology_variables_change_only_what_they_patch_and_default_from_the_class() {
    let mut v = multi_vars();
    v.insert("WORKER_MEMORY_MIB".into(), "16384".into());
    let (d, _) = topology_desired(&generate_topology(&v));
    for m in &d.machine_deployments {
        assert_eq!(
            m.infrastructure["spec"]["template"]["spec"]["memoryMiB"],
            16384
        );
    }
    let cp = d.control_plane_machine.as_ref().unwrap();
    assert_eq!(cp["spec"]["template"]["spec"]["memoryMiB"], 4096);

    // A Cluster that leaves out optional variables gets the class's schema
    // defaults (the same values as the flavor's defaults).
    let mut docs = generate_topology(&multi_vars());
    let cluster = docs.iter_mut().find(|d| d["kind"] == "Cluster").unwrap();
    let vars = cluster["spec"]["topology"]["variables"]
        .as_array_mut()
        .unwrap();
    vars.retain(|x| {
        matches!(
            x["name"].as_str(),
            Some("controlPlaneEndpoint" | "instances")
        )
    });
    for i in vars[1]["value"].as_array_mut().unwrap() {
        i.as_object_mut().unwrap().remove("controlPlane");
        i["network"].as_object_mut().unwrap().remove("bridge");
    }
    let (defaulted, _) = topology_desired(&docs);
    let (flavor, _) = topology_desired(&generate_topology(&multi_vars()));
    assert_eq!(defaulted, flavor);
}

#[test]
fn every_cluster_class_variable_is_documented() {
    let doc = read("docs/clusterclass.md");
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(&read("templates/clusterclass-capmox.yaml")).unwrap();
    let class: ClusterClass = serde_json::from_value(docs[0].clone()).unwrap();
    assert!(!class.spec.variables.is_empty());
    for v in &class.spec.variables {
        assert!(
            doc.contains(&format!("`{}`", v.name)),
            "ClusterClass variable {} is not in docs/clusterclass.md",
            v.name
        );
    }
}

/// The flavors whose machine templates carry the VM-shape variables, with
/// the variables each needs.
fn shape_flavors() -> [(&'static str, BTreeMap<String, String>); 4] {
    [
        ("templates/cluster-template.yaml", single_vars()),
        (
            "templates/cluster-template-multi-instance.yaml",
            multi_vars(),
        ),
        ("templates/cluster-template-multi-instance-vip-pool.yaml", {
            let mut v = multi_vars();
            v.remove("CONTROL_PLANE_ENDPOINT_IP");
            v.insert(
                "CONTROL_PLANE_ENDPOINT_IP_RANGES".into(),
                "[10.10.0.5-10.10.0.9]".into(),
            );
            v
        }),
        ("templates/cluster-template-flatcar.yaml", multi_vars()),
    ]
}

/// The machine spec of the ProxmoxMachineTemplate named `<cluster>-<role>`.
fn machine_spec<'a>(docs: &'a [Value], role: &str) -> &'a Value {
    &one(docs, "ProxmoxMachineTemplate", &format!("wl1-{role}"))["spec"]["template"]["spec"]
}

/// Whether `v` (a rendered field) is unset or empty: absent, `{}` or `[]`.
fn unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

#[test]
fn vm_shape_variables_unset_leave_the_fields_unset() {
    for (t, v) in shape_flavors() {
        let docs = render_and_check(t, &v);
        for role in ["control-plane", "worker"] {
            let spec = machine_spec(&docs, role);
            for field in ["cpu", "pciDevices", "bootstrapMedia"] {
                assert!(
                    unset(&spec[field]),
                    "{t}: {role}: {field} = {}",
                    spec[field]
                );
            }
            // And the types read them as unset.
            let typed: capmox_controller::api::ProxmoxMachineSpec =
                serde_json::from_value(spec.clone()).unwrap();
            assert_eq!(typed.cpu.unwrap_or_default(), Default::default(), "{t}");
            assert!(typed.pci_devices.is_empty(), "{t}");
            assert_eq!(
                typed.bootstrap_media.unwrap_or_default(),
                Default::default(),
                "{t}"
            );
        }
        let pc = docs.iter().find(|d| d["kind"] == "ProxmoxCluster").unwrap();
        for inst in pc["spec"]["settings"]["instances"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            for field in ["cpu", "bootstrapMedia", "arch", "pciMappings"] {
                assert!(unset(&inst[field]), "{t}: {}: {field}", inst["name"]);
            }
        }
    }
}

#[test]
fn vm_shape_variables_set_carry_exactly_their_values() {
    let shape = [
        ("CONTROL_PLANE_CPU", "{type: x86-64-v3}"),
        ("WORKER_CPU", "{type: host, flags: [+aes, -pcid]}"),
        (
            "WORKER_PCI_DEVICES",
            "[{mapping: gpu, pcie: true, primaryGpu: true}, {mapping: vgpu, mdev: nvidia-63}]",
        ),
        ("BOOTSTRAP_MEDIA", "{storage: nfs-iso, cdromBus: sata}"),
        (
            "PROXMOX_2_BOOTSTRAP_MEDIA",
            "{storage: cephfs, cdromBus: scsi}",
        ),
    ];
    let gpus = json!([
        {"mapping": "gpu", "pcie": true, "primaryGpu": true},
        {"mapping": "vgpu", "mdev": "nvidia-63"}
    ]);
    for (t, mut v) in shape_flavors() {
        let single = t == "templates/cluster-template.yaml";
        v.extend(
            shape
                .iter()
                .map(|(k, x)| ((*k).to_string(), (*x).to_string())),
        );
        let docs = render_and_check(t, &v);
        let cp = machine_spec(&docs, "control-plane");
        let worker = machine_spec(&docs, "worker");
        assert_eq!(cp["cpu"], json!({"type": "x86-64-v3"}), "{t}");
        assert!(unset(&cp["pciDevices"]), "{t}");
        assert_eq!(
            worker["cpu"],
            json!({"type": "host", "flags": ["+aes", "-pcid"]}),
            "{t}"
        );
        assert_eq!(worker["pciDevices"], gpus, "{t}");
        let media = json!({"storage": "nfs-iso", "cdromBus": "sata"});
        let pc = docs.iter().find(|d| d["kind"] == "ProxmoxCluster").unwrap();
        if single {
            assert_eq!(cp["bootstrapMedia"], media, "{t}");
            assert_eq!(worker["bootstrapMedia"], media, "{t}");
        } else {
            // Per datacenter: only dc-b's is set; machines take the
            // instance's.
            let per_instance: Vec<&Value> = pc["spec"]["settings"]["instances"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| &i["bootstrapMedia"])
                .collect();
            assert_eq!(
                per_instance,
                [
                    &Value::Null,
                    &json!({"storage": "cephfs", "cdromBus": "scsi"}),
                    &Value::Null
                ],
                "{t}"
            );
            assert!(unset(&cp["bootstrapMedia"]) && unset(&worker["bootstrapMedia"]));
        }
    }
}

#[test]
fn vm_shape_variables_with_bad_values_are_refused_with_the_field_named() {
    for (value_of, var, value, field) in [
        (
            "worker",
            "WORKER_CPU",
            r#"{type: "bad type!"}"#,
            "spec.template.spec.cpu.type",
        ),
        (
            "worker",
            "WORKER_CPU",
            "{flags: [+avx512f]}",
            "spec.template.spec.cpu.flags[0]",
        ),
        (
            "worker",
            "WORKER_PCI_DEVICES",
            "[{mapping: gpu}, {mapping: gpu}]",
            "spec.template.spec.pciDevices[1].mapping",
        ),
        (
            "control-plane",
            "BOOTSTRAP_MEDIA",
            "{storage: NFS_ISO}",
            "spec.template.spec.bootstrapMedia.storage",
        ),
    ] {
        let mut v = single_vars();
        v.insert(var.into(), value.into());
        let text = clusterctl::render(&read("templates/cluster-template.yaml"), &v).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        let t: ProxmoxMachineTemplate = serde_json::from_value(
            one(&docs, "ProxmoxMachineTemplate", &format!("wl1-{value_of}")).clone(),
        )
        .unwrap();
        let errs = validation::validate_machine_template(&t.spec);
        let paths: Vec<&str> = errs.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, [field], "{var}={value}: {errs:?}");
    }
    // A value without its braces is no mapping: the rendered YAML does not
    // parse, so nothing is applied.
    let mut v = single_vars();
    v.insert("WORKER_CPU".into(), "type: host".into());
    let text = clusterctl::render(&read("templates/cluster-template.yaml"), &v).unwrap();
    assert!(text.contains("cpu: type: host"));
    assert!(serde_saphyr::from_multiple::<Value>(&text).is_err());
}

/// Every template is valid YAML before rendering (editors, linters and
/// `yq` read them as they are), not only after.
#[test]
fn templates_are_yaml_before_rendering() {
    for t in [
        "templates/cluster-template.yaml",
        "templates/cluster-template-multi-instance.yaml",
        "templates/cluster-template-multi-instance-vip-pool.yaml",
        "templates/cluster-template-flatcar.yaml",
        "templates/cluster-template-topology.yaml",
        "templates/clusterclass-capmox.yaml",
    ] {
        if let Err(e) = serde_saphyr::from_multiple::<Value>(&read(t)) {
            panic!("{t} is not YAML before rendering: {e}");
        }
    }
}
