//! The committed CRDs match `crdgen`, carry the CAPI contract label, and
//! kubectl-style YAML of all four kinds round-trips through the Rust types
//! without loss.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use capmox_controller::api::{
    ProxmoxCluster, ProxmoxClusterTemplate, ProxmoxMachine, ProxmoxMachineTemplate, crd,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn committed_crds_are_current() {
    for c in crd::all() {
        let name = crd::file_name(&c);
        let path = repo_root().join("config/crd/bases").join(&name);
        let committed = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run `make generate`)", path.display()));
        let generated = crd::to_yaml(&c).unwrap();
        assert!(
            committed == generated,
            "{name} is out of date: run `make generate` and commit the result"
        );
    }
    let files = std::fs::read_dir(repo_root().join("config/crd/bases"))
        .unwrap()
        .count();
    assert_eq!(
        files, 4,
        "config/crd/bases holds exactly the four generated CRDs"
    );
}

#[test]
fn crds_carry_the_contract_label_and_names() {
    let crds = crd::all();
    let names: Vec<&str> = crds
        .iter()
        .map(|c| c.metadata.name.as_deref().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "proxmoxclusters.infrastructure.cluster.x-k8s.io",
            "proxmoxclustertemplates.infrastructure.cluster.x-k8s.io",
            "proxmoxmachines.infrastructure.cluster.x-k8s.io",
            "proxmoxmachinetemplates.infrastructure.cluster.x-k8s.io",
        ]
    );
    for c in &crds {
        let labels = c.metadata.labels.as_ref().unwrap();
        // CAPI contract: the versions that meet contract v1beta2; the Go
        // provider's v1alpha2 does not.
        assert_eq!(
            labels.get("cluster.x-k8s.io/v1beta2").map(String::as_str),
            Some("v1alpha3")
        );
        assert_eq!(c.spec.scope, "Namespaced");
        assert_eq!(
            c.spec.names.categories.as_deref(),
            Some(&["cluster-api".to_string()][..])
        );
        let versions: Vec<(&str, bool, bool, Option<bool>)> = c
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.served, v.storage, v.deprecated))
            .collect();
        assert_eq!(
            versions,
            [
                ("v1alpha3", true, true, None),
                ("v1alpha2", true, false, Some(true))
            ]
        );
    }
    let status = |kind: &str| {
        crds.iter()
            .find(|c| c.spec.names.kind == kind)
            .unwrap()
            .spec
            .versions[0]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    };
    assert!(status("ProxmoxCluster"));
    assert!(status("ProxmoxMachine"));
    assert!(status("ProxmoxMachineTemplate"));
    assert!(!status("ProxmoxClusterTemplate"));
    // v1alpha2 as the Go provider serves it: templates have no status.
    let v1alpha2_status = |kind: &str| {
        crds.iter()
            .find(|c| c.spec.names.kind == kind)
            .unwrap()
            .spec
            .versions[1]
            .subresources
            .as_ref()
            .and_then(|s| s.status.as_ref())
            .is_some()
    };
    assert!(v1alpha2_status("ProxmoxCluster"));
    assert!(v1alpha2_status("ProxmoxMachine"));
    assert!(!v1alpha2_status("ProxmoxMachineTemplate"));
    assert!(!v1alpha2_status("ProxmoxClusterTemplate"));
}

#[test]
fn crds_convert_through_the_webhook() {
    for c in crd::all() {
        let kind = &c.spec.names.kind;
        assert_eq!(
            c.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("cert-manager.io/inject-ca-from"))
                .map(String::as_str),
            Some("capmox-system/capmox-serving-cert"),
            "{kind}"
        );
        let conversion = serde_json::to_value(c.spec.conversion.as_ref().unwrap()).unwrap();
        assert_eq!(
            conversion,
            serde_json::json!({
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": {"name": "capmox-webhook-service", "namespace": "capmox-system",
                                                 "path": "/convert", "port": 443}},
                    "conversionReviewVersions": ["v1"]
                }
            }),
            "{kind}"
        );
    }
}

#[tokio::test]
async fn kube_sim_installs_the_crds_and_serves_both_versions() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
        .await
        .unwrap();
    for c in crd::all() {
        kube.install_crd_yaml(&crd::to_yaml(&c).unwrap()).unwrap();
    }
    let client = kube.client().await.unwrap();
    let group = client
        .list_api_group_resources("infrastructure.cluster.x-k8s.io/v1alpha2")
        .await
        .unwrap();
    let mut kinds: Vec<String> = group
        .resources
        .iter()
        .filter(|r| !r.name.contains('/'))
        .map(|r| r.kind.clone())
        .collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "ProxmoxCluster",
            "ProxmoxClusterTemplate",
            "ProxmoxMachine",
            "ProxmoxMachineTemplate"
        ]
    );
    let groups = client.list_api_groups().await.unwrap();
    let ours = groups
        .groups
        .iter()
        .find(|g| g.name == "infrastructure.cluster.x-k8s.io")
        .unwrap();
    let versions: Vec<&str> = ours.versions.iter().map(|v| v.version.as_str()).collect();
    assert!(
        versions.contains(&"v1alpha2") && versions.contains(&"v1alpha3"),
        "{versions:?}"
    );
    assert_eq!(
        ours.preferred_version.as_ref().map(|v| v.version.as_str()),
        Some("v1alpha3")
    );
    kube.shutdown().await;
}

#[test]
fn machine_has_no_failure_domain_in_spec() {
    let c = crd::all()
        .into_iter()
        .find(|c| c.spec.names.kind == "ProxmoxMachine")
        .unwrap();
    let schema = c.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    let spec = &schema.properties.as_ref().unwrap()["spec"];
    let props = spec.properties.as_ref().unwrap();
    assert!(!props.contains_key("failureDomain"));
    assert!(props.contains_key("providerID"));
    assert!(props.contains_key("virtualMachineID"));
    let status = &schema.properties.as_ref().unwrap()["status"];
    assert!(
        status
            .properties
            .as_ref()
            .unwrap()
            .contains_key("failureDomain")
    );
}

fn round_trip<T: DeserializeOwned + Serialize>(file: &str) {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(file),
    )
    .unwrap();
    let original: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    let typed: T = serde_json::from_value(original.clone()).unwrap();
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(
        back, original,
        "{file} lost or changed data in the round trip"
    );
}

#[test]
fn yaml_round_trips_without_loss() {
    round_trip::<ProxmoxCluster>("proxmoxcluster.yaml");
    round_trip::<ProxmoxMachine>("proxmoxmachine.yaml");
    round_trip::<ProxmoxMachineTemplate>("proxmoxmachinetemplate.yaml");
    round_trip::<ProxmoxClusterTemplate>("proxmoxclustertemplate.yaml");
}

#[test]
fn unset_is_absent_not_empty() {
    let m: ProxmoxMachine = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m"},
        "spec": {}
    }))
    .unwrap();
    let v = serde_json::to_value(&m).unwrap();
    assert_eq!(v["spec"], serde_json::json!({}));
    assert!(v.get("status").is_none());
}
