//! The conformance suite of the served `v1alpha2` API: it is checked
//! against the Go provider's (CAPMOX's) own CRDs and cluster templates,
//! reference data kept beside the repository, not in it
//! (`../shared/capmox/`). A test binary of its own (`test = false`):
//! `make test` never builds it, `make conformance` runs it, and each test
//! fails naming the missing path when the data is absent.
//!
//! - Our `v1alpha2` schema of each kind equals CAPMOX's field by field:
//!   property names, types, formats, enums, bounds, patterns, defaults,
//!   required fields, list and map types, CEL rules. Descriptions are our
//!   own words and not compared; the only other differences are
//!   [`VERSION_DIFFERENCES`].
//! - Every object of CAPMOX's cluster templates (rendered as clusterctl
//!   would) converts to `v1alpha3`, passes the `v1alpha3` CEL rules, and
//!   converts back to itself.
//! - CAPMOX's Flatcar flavor works with ours and with the Ignition
//!   enrichment ([`flatcar`]).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod flatcar;

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox_controller::api::conversion::{CONVERSION_DATA_ANNOTATION, V1ALPHA2, V1ALPHA3, convert};
use capmox_controller::api::crd;
use serde_json::{Value, json};

/// What may differ between CAPMOX's `v1alpha2` entry of `spec.versions` and
/// ours, and why: everything else must be equal.
const VERSION_DIFFERENCES: [(&str, &str); 3] = [
    (
        "storage",
        "v1alpha3 is the stored version; v1alpha2 is only served",
    ),
    (
        "deprecated",
        "v1alpha2 is served for taking over CAPMOX's clusters",
    ),
    ("deprecationWarning", "tells clients to use v1alpha3"),
];

/// `<repo>/../shared/capmox/<rel>`.
///
/// # Panics
/// When it is absent, naming the path: the conformance suite never passes
/// without its reference data.
fn reference(rel: &str) -> PathBuf {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let path = repo.join("../shared/capmox").join(rel);
    assert!(
        path.exists(),
        "conformance: CAPMOX's reference data {} is missing (kept beside the repository; `make test` does not need it)",
        path.display()
    );
    path
}

fn read(path: &PathBuf) -> String {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("conformance: cannot read {}: {e}", path.display()))
}

/// The `v1alpha2` entry of a CRD's `spec.versions`, and the CRD's names.
fn v1alpha2_of(crd: &Value) -> (Value, Value) {
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "v1alpha2")
        .unwrap_or_else(|| panic!("{} serves no v1alpha2", crd["metadata"]["name"]))
        .clone();
    (version, crd["spec"]["names"].clone())
}

/// Without descriptions (our own words).
fn without_descriptions(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "description")
                .map(|(k, v)| (k.clone(), without_descriptions(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

/// Every difference between `theirs` and `ours`, by path (numbers compared
/// by value: `1` and `1.0` are the same bound).
fn differences(theirs: &Value, ours: &Value, at: &str, out: &mut Vec<String>) {
    match (theirs, ours) {
        (Value::Object(t), Value::Object(o)) => {
            for k in t.keys().chain(o.keys().filter(|k| !t.contains_key(*k))) {
                let path = format!("{at}.{k}");
                match (t.get(k), o.get(k)) {
                    (Some(t), Some(o)) => differences(t, o, &path, out),
                    (Some(t), None) => out.push(format!("{path}: only CAPMOX has it: {t}")),
                    (None, Some(o)) => out.push(format!("{path}: only ours has it: {o}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(t), Value::Array(o)) if t.len() == o.len() => {
            for (i, (t, o)) in t.iter().zip(o).enumerate() {
                differences(t, o, &format!("{at}[{i}]"), out);
            }
        }
        (Value::Number(t), Value::Number(o)) if t.as_f64() == o.as_f64() => {}
        (t, o) if t == o => {}
        (t, o) => out.push(format!("{at}: CAPMOX {t}, ours {o}")),
    }
}

#[test]
fn v1alpha2_schemas_equal_capmox_field_by_field() {
    let ours: BTreeMap<String, Value> = crd::all()
        .into_iter()
        .map(|c| (crd::file_name(&c), serde_json::to_value(&c).unwrap()))
        .collect();
    let dir = reference("crds");
    let mut compared = 0;
    for file in ours.keys() {
        let theirs_path = dir.join(file);
        let theirs: Value = serde_saphyr::from_str(&read(&theirs_path))
            .unwrap_or_else(|e| panic!("conformance: {} is not YAML: {e}", theirs_path.display()));
        let (their_version, their_names) = v1alpha2_of(&theirs);
        let (our_version, our_names) = v1alpha2_of(&ours[file]);
        // The same CRD: group, kind, plural, singular, scope.
        for key in ["kind", "plural", "singular"] {
            assert_eq!(our_names[key], their_names[key], "{file}: spec.names.{key}");
        }
        assert_eq!(
            ours[file]["spec"]["group"], theirs["spec"]["group"],
            "{file}"
        );
        assert_eq!(
            ours[file]["spec"]["scope"], theirs["spec"]["scope"],
            "{file}"
        );

        let strip = |v: &Value| {
            let mut v = without_descriptions(v);
            for (key, _) in VERSION_DIFFERENCES {
                v.as_object_mut().unwrap().remove(key);
            }
            v
        };
        let mut found = Vec::new();
        differences(&strip(&their_version), &strip(&our_version), "", &mut found);
        assert!(
            found.is_empty(),
            "{file}: our v1alpha2 differs from CAPMOX's:\n{}",
            found.join("\n")
        );
        assert_eq!(our_version["served"], true, "{file}");
        assert_eq!(our_version["storage"], false, "{file}");
        compared += 1;
    }
    assert_eq!(compared, 4);
}

#[test]
#[should_panic(expected = "conformance: CAPMOX's reference data")]
fn missing_reference_data_fails_naming_it() {
    reference("no-such-file.yaml");
}

#[test]
fn the_comparison_sees_a_difference() {
    // The check above would pass on anything if `differences` saw nothing.
    let mut found = Vec::new();
    differences(
        &json!({"properties": {"a": {"type": "integer", "minimum": 1}, "b": {"enum": ["x"]}}, "required": ["a"]}),
        &json!({"properties": {"a": {"type": "integer", "minimum": 1.0}, "b": {"enum": ["y"]}, "c": {}}, "required": []}),
        "",
        &mut found,
    );
    assert_eq!(
        found,
        [
            ".properties.b.enum[0]: CAPMOX \"x\", ours \"y\"",
            ".properties.c: only ours has it: {}",
            ".required: CAPMOX [\"a\"], ours []"
        ]
    );
}

/// clusterctl's variable substitution (`${NAME}`, `${NAME:=default}`,
/// `${NAME=default}`) with the values a user would export.
fn render(text: &str, vars: &BTreeMap<&str, &str>) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..]
            .find('}')
            .map(|e| start + e)
            .expect("unclosed ${");
        let expr = rest[start + 2..end].trim();
        let (name, default) = match expr.find(":=").or_else(|| expr.find('=')) {
            Some(i) => {
                let skip = if expr[i..].starts_with(":=") { 2 } else { 1 };
                (&expr[..i], Some(expr[i + skip..].trim_matches('"')))
            }
            None => (expr, None),
        };
        let value = vars
            .get(name)
            .copied()
            .or(default)
            .unwrap_or_else(|| panic!("template variable {name} has no value"));
        out.push_str(value);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn template_vars() -> BTreeMap<&'static str, &'static str> {
    [
        ("CLUSTER_NAME", "wl1"),
        ("BRIDGE", "vmbr0"),
        ("SECONDARY_BRIDGE", "vmbr1"),
        ("TEMPLATE_VMID", "9000"),
        ("PROXMOX_SOURCENODE", "pve1"),
        ("KUBERNETES_VERSION", "v1.33.1"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.10.9"),
        ("BOOT_VOLUME_DEVICE", "scsi0"),
        ("VM_SSH_KEYS", "\"ssh-ed25519 AAAA user\""),
        ("DNS_SERVERS", "[8.8.8.8, 8.8.4.4]"),
        ("COREOS_CUSTOM_HOSTNAME", "${COREOS_CUSTOM_HOSTNAME}"),
        ("COREOS_CUSTOM_INSTANCE_ID", "${COREOS_CUSTOM_INSTANCE_ID}"),
        ("WORKER_MACHINE_COUNT", "2"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("NODE_IP_RANGES", "[10.10.10.10-10.10.10.50]"),
        ("IP_PREFIX", "24"),
        ("GATEWAY", "10.10.10.1"),
        ("SECONDARY_IP_RANGES", "[10.20.10.10-10.20.10.50]"),
        ("SECONDARY_IP_PREFIX", "24"),
        ("SECONDARY_GATEWAY", "10.20.10.1"),
        ("NODE_IPV6_RANGES", "[fd00::10-fd00::50]"),
        ("IPV6_PREFIX", "64"),
        ("IPV6_GATEWAY", "fd00::1"),
        ("ALLOWED_NODES", "[pve1, pve2]"),
    ]
    .into_iter()
    .collect()
}

/// Our kinds' objects in CAPMOX's cluster templates.
fn template_objects() -> Vec<(String, Value)> {
    let dir = reference("templates");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 5, "{files:?}");
    let vars = template_vars();
    let mut out = Vec::new();
    for f in files {
        // The Flatcar flavor's `${ VM_SSH_KEYS }` inside its Ignition text
        // is the same variable.
        let text = render(&read(&f), &vars);
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for d in docs {
            if d["apiVersion"] == V1ALPHA2 {
                let name = format!(
                    "{} {} {}",
                    f.file_name().unwrap().to_string_lossy(),
                    d["kind"].as_str().unwrap(),
                    d["metadata"]["name"].as_str().unwrap()
                );
                out.push((name, d));
            }
        }
    }
    out
}

/// Our schema of every kind and version.
fn our_schemas() -> BTreeMap<(String, String), Value> {
    let mut out = BTreeMap::new();
    for c in crd::all() {
        for v in &c.spec.versions {
            let schema = v
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap();
            out.insert(
                (c.spec.names.kind.clone(), v.name.clone()),
                serde_json::to_value(schema).unwrap(),
            );
        }
    }
    out
}

fn cel_errors(schema: &Value, object: &Value) -> Vec<String> {
    match kube_cel::Validator::new().validate(schema, object, None) {
        Ok(()) => Vec::new(),
        Err(errs) => errs.into_vec().into_iter().map(|e| e.message).collect(),
    }
}

#[test]
fn capmox_templates_convert_to_valid_v1alpha3_and_back() {
    let objects = template_objects();
    let schemas = our_schemas();
    let schema = |kind: &str, version: &str| &schemas[&(kind.to_string(), version.to_string())];
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let mut refused_by_capmox = Vec::new();
    for (name, v2) in &objects {
        let kind = v2["kind"].as_str().unwrap();
        *kinds.entry(kind.to_string()).or_default() += 1;
        let v2_errors = cel_errors(schema(kind, "v1alpha2"), v2);
        if !v2_errors.is_empty() {
            refused_by_capmox.push((name.clone(), v2_errors));
        }
        let v3 = convert(v2, V1ALPHA3).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            cel_errors(schema(kind, "v1alpha3"), &v3),
            Vec::<String>::new(),
            "{name} (v1alpha3)"
        );
        // Back exactly (what v1alpha3 lacks, the network device flags, was
        // kept on the v1alpha3 object); the conversion data the v1alpha2
        // object gets holds the v1alpha3 one.
        let mut back = convert(&v3, V1ALPHA2).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(a) = back["metadata"]
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            let kept = a.remove(CONVERSION_DATA_ANNOTATION).unwrap();
            let kept: Value = serde_json::from_str(kept.as_str().unwrap()).unwrap();
            assert_eq!(
                kept["spec"], v3["spec"],
                "{name}: the conversion data is the v1alpha3 object"
            );
            if a.is_empty() {
                back["metadata"]
                    .as_object_mut()
                    .unwrap()
                    .remove("annotations");
            }
        }
        assert_eq!(&back, v2, "{name}");
    }
    // CAPMOX's ClusterClass machine templates name no template VM (its
    // patches add one to the machines); its own CRD's rule refuses them as
    // they are, and so does our v1alpha2 schema, which is the same.
    let capmox_rule = vec!["Must specify either templateID or templateSelector".to_string()];
    assert_eq!(
        refused_by_capmox,
        [
            "cluster-class.yaml ProxmoxMachineTemplate proxmox-clusterclass-v0.2.1-control-plane-template",
            "cluster-class.yaml ProxmoxMachineTemplate proxmox-clusterclass-v0.2.1-workertemplate",
            "cluster-class.yaml ProxmoxMachineTemplate proxmox-clusterclass-v0.2.1-loadbalancer-template",
        ]
        .map(|n| (n.to_string(), capmox_rule.clone()))
    );
    assert_eq!(
        kinds,
        [
            ("ProxmoxCluster".to_string(), 4),
            ("ProxmoxClusterTemplate".to_string(), 1),
            ("ProxmoxMachineTemplate".to_string(), 11),
        ]
        .into_iter()
        .collect(),
        "the objects of CAPMOX's five templates"
    );
}

#[test]
fn capmox_cluster_template_keeps_its_fields_in_v1alpha3() {
    let (_, cluster) = template_objects()
        .into_iter()
        .find(|(n, o)| n.starts_with("cluster-template.yaml") && o["kind"] == "ProxmoxCluster")
        .unwrap();
    let v3 = convert(&cluster, V1ALPHA3).unwrap();
    assert_eq!(
        v3["spec"],
        json!({
            "controlPlaneEndpoint": {"host": "10.10.10.9", "port": 6443},
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
            "dnsServers": ["8.8.8.8", "8.8.4.4"],
            "allowedNodes": ["pve1", "pve2"]
        })
    );
    assert_eq!(v3["metadata"], cluster["metadata"]);
}
