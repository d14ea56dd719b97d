//! The CAPI contract checks that bite providers, on the generated CRDs in
//! `config/crd/bases/`: every CRD carries the contract label
//! `cluster.x-k8s.io/v1beta2` listing served versions (with ours among
//! them), `metadata.yaml` declares the same contract, and the schema of
//! every version the label lists keeps the fields CAPI reads (contract v1beta2:
//! InfraCluster, InfraMachine, InfraMachineTemplate, InfraClusterTemplate),
//! with the types CAPI expects — a field a listed version's schema lacks is
//! pruned, and CAPI waits forever for it (docs/field-cases.md B44).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox_controller::api::{CONTRACT_LABEL, VERSION};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The committed CRDs by kind.
fn crds() -> BTreeMap<String, Value> {
    let dir = root().join("config/crd/bases");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for d in docs.into_iter().filter(|d| !d.is_null()) {
            let kind = d["spec"]["names"]["kind"].as_str().unwrap().to_string();
            out.insert(kind, d);
        }
    }
    out
}

/// The schema at a dotted path (`[]` steps into list items).
fn at<'a>(schema: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = schema;
    for step in path.split('.') {
        let (name, items) = match step.strip_suffix("[]") {
            Some(n) => (n, true),
            None => (step, false),
        };
        cur = cur.get("properties")?.get(name)?;
        if items {
            cur = cur.get("items")?;
        }
    }
    Some(cur)
}

/// `(path, type)` pairs CAPI reads, by kind (contract v1beta2).
fn read_by_capi(kind: &str) -> Vec<(&'static str, &'static str)> {
    let conditions = [
        ("status.conditions", "array"),
        ("status.conditions[].type", "string"),
        ("status.conditions[].status", "string"),
        ("status.conditions[].reason", "string"),
        ("status.conditions[].message", "string"),
        ("status.conditions[].lastTransitionTime", "string"),
        ("status.conditions[].observedGeneration", "integer"),
    ];
    let template_meta = [
        ("spec.template.metadata.labels", "object"),
        ("spec.template.metadata.annotations", "object"),
        ("spec.template.spec", "object"),
    ];
    match kind {
        "ProxmoxCluster" => [
            ("spec.controlPlaneEndpoint.host", "string"),
            ("spec.controlPlaneEndpoint.port", "integer"),
            ("status.initialization.provisioned", "boolean"),
            ("status.failureDomains", "array"),
            ("status.failureDomains[].name", "string"),
            ("status.failureDomains[].controlPlane", "boolean"),
            ("status.failureDomains[].attributes", "object"),
        ]
        .into_iter()
        .chain(conditions)
        .collect(),
        "ProxmoxMachine" => [
            ("spec.providerID", "string"),
            ("status.initialization.provisioned", "boolean"),
            ("status.addresses[].type", "string"),
            ("status.addresses[].address", "string"),
            ("status.failureDomain", "string"),
        ]
        .into_iter()
        .chain(conditions)
        .collect(),
        "ProxmoxMachineTemplate" => template_meta
            .into_iter()
            .chain([
                ("status.capacity", "object"),
                ("status.nodeInfo.architecture", "string"),
                ("status.nodeInfo.operatingSystem", "string"),
            ])
            .collect(),
        "ProxmoxClusterTemplate" => template_meta
            .into_iter()
            .chain([
                ("spec.template.spec.controlPlaneEndpoint.host", "string"),
                ("spec.template.spec.controlPlaneEndpoint.port", "integer"),
            ])
            .collect(),
        other => panic!("unexpected kind {other}"),
    }
}

#[test]
fn every_crd_carries_the_contract_label_for_served_versions() {
    let crds = crds();
    assert_eq!(
        crds.keys().collect::<Vec<_>>(),
        [
            "ProxmoxCluster",
            "ProxmoxClusterTemplate",
            "ProxmoxMachine",
            "ProxmoxMachineTemplate"
        ]
    );
    for (kind, crd) in &crds {
        let served: Vec<&str> = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|v| v["served"] == true)
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        let label = crd["metadata"]["labels"][CONTRACT_LABEL.0]
            .as_str()
            .unwrap_or_else(|| panic!("{kind}: no {} label", CONTRACT_LABEL.0));
        // CAPI splits the value on `_` and uses the highest listed version.
        let listed: Vec<&str> = label.split('_').collect();
        assert!(
            listed.contains(&VERSION),
            "{kind}: {label:?} lacks {VERSION}"
        );
        for v in &listed {
            assert!(
                served.contains(v),
                "{kind}: contract label lists {v}, which is not served"
            );
        }
    }
    // clusterctl checks metadata.yaml's contract against the CRD labels.
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("metadata.yaml")).unwrap())
            .unwrap();
    let contract = CONTRACT_LABEL.0.rsplit('/').next().unwrap();
    for s in meta["releaseSeries"].as_array().unwrap() {
        assert_eq!(s["contract"], contract);
    }
}

/// The versions of a CRD that its contract label says meet contract v1beta2
/// (the ones CAPI may read); the Go provider's v1alpha2 is served but not
/// listed.
fn contract_versions(crd: &Value) -> Vec<&Value> {
    let label = crd["metadata"]["labels"][CONTRACT_LABEL.0]
        .as_str()
        .unwrap();
    let listed: Vec<&str> = label.split('_').collect();
    let out: Vec<&Value> = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["served"] == true && listed.contains(&v["name"].as_str().unwrap()))
        .collect();
    assert!(!out.is_empty(), "no served version meets the contract");
    out
}

#[test]
fn every_contract_version_keeps_the_fields_capi_reads() {
    for (kind, crd) in crds() {
        for v in contract_versions(&crd) {
            let name = v["name"].as_str().unwrap();
            let schema = &v["schema"]["openAPIV3Schema"];
            for (path, ty) in read_by_capi(&kind) {
                let s = at(schema, path).unwrap_or_else(|| {
                    panic!("{kind} {name}: {path} is not in the schema (it would be pruned)")
                });
                assert_eq!(s["type"], ty, "{kind} {name}: {path} is not a {ty}");
            }
            if matches!(
                kind.as_str(),
                "ProxmoxCluster" | "ProxmoxMachine" | "ProxmoxMachineTemplate"
            ) {
                assert!(
                    v["subresources"]["status"].is_object(),
                    "{kind} {name}: no status subresource"
                );
            }
        }
    }
}

#[test]
fn failure_domains_are_a_list_keyed_by_name() {
    // A v1beta2 label makes CAPI unmarshal a list; a v1beta1 map would fail.
    let crds = crds();
    for v in contract_versions(&crds["ProxmoxCluster"]) {
        let fd = at(&v["schema"]["openAPIV3Schema"], "status.failureDomains").unwrap();
        assert_eq!(fd["type"], "array");
        assert_eq!(fd["x-kubernetes-list-type"], "map");
        assert_eq!(
            fd["x-kubernetes-list-map-keys"],
            serde_json::json!(["name"])
        );
    }
}

#[test]
fn readiness_is_not_status_ready_alone() {
    // Contract v1beta2 reads status.initialization.provisioned; a provider
    // that only sets status.ready leaves Machines waiting for infrastructure.
    let crds = crds();
    for kind in ["ProxmoxCluster", "ProxmoxMachine"] {
        for v in contract_versions(&crds[kind]) {
            let schema = &v["schema"]["openAPIV3Schema"];
            assert!(
                at(schema, "status.initialization.provisioned").is_some(),
                "{kind}: status.ready would be the only readiness signal"
            );
        }
    }
}

/// docs/field-cases.md B44, reproduced in kube-sim: a status field the
/// served schema lacks is pruned on write (as kube-apiserver prunes it), so
/// a provider setting only `status.ready` under a v1beta2 label would leave
/// the Machine waiting. The fields contract v1beta2 reads survive the
/// round trip through the API server: the provisioned ProxmoxMachine
/// carries `status.initialization.provisioned: true` and `spec.providerID`
/// (the ProxmoxCluster's side: `cluster_reconcile.rs`, the schemas of both
/// kinds: the tests above).
#[tokio::test]
async fn b44_contract_fields_survive_the_api_server_and_unknown_ones_are_pruned() {
    use crate::support::machine::*;
    use capmox_controller::api::ProxmoxMachineSpec;
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};

    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.provision("m1").await;
    let resource = |kind: &str| {
        ApiResource::from_gvk(&GroupVersionKind::gvk(
            capmox_controller::api::GROUP,
            VERSION,
            kind,
        ))
    };
    let raw: Api<DynamicObject> =
        Api::namespaced_with(w.client.clone(), NS, &resource("ProxmoxMachine"));
    // A field the schema does not know is pruned on write.
    raw.patch_status(
        "m1",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({"status": {"ready": true}})),
    )
    .await
    .unwrap();
    let m = raw.get("m1").await.unwrap().data;
    assert_eq!(
        m.pointer("/status/ready"),
        None,
        "pruned as kube-apiserver prunes it: {m}"
    );
    assert_eq!(
        m.pointer("/status/initialization/provisioned"),
        Some(&Value::Bool(true)),
        "{m}"
    );
    let pid = m.pointer("/spec/providerID").and_then(Value::as_str);
    assert!(pid.is_some_and(|p| p.starts_with("proxmox://")), "{m}");
}
