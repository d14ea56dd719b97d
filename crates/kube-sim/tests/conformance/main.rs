//! The conformance suite of kube-sim: it is checked against the real CAPI
//! and IPAM CRDs (reference data kept beside the repository, in
//! `../shared/capi-crds/`, not in it; see the README's "Two test suites").
//! `make test` does not build this binary (`test = false` in Cargo.toml);
//! `make conformance` runs it, and each test fails naming the missing path
//! when the data is absent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../sim/common.rs"]
#[allow(dead_code)]
mod common;

use common::*;
use serde_json::json;
use std::path::PathBuf;

/// `<repo>/../shared/<sub>`, the reference data beside the repository.
///
/// # Panics
/// When it is absent, naming the path.
fn reference(sub: &str) -> PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let path = repo.parent().unwrap_or(&repo).join("shared").join(sub);
    assert!(
        path.exists(),
        "conformance: reference data {} is missing (it lives beside the repository; `make test` does not need it)",
        path.display()
    );
    path
}

/// The real CAPI and IPAM CRDs install, and their schemas accept and refuse
/// objects as the API server would.
#[tokio::test]
async fn capi_crds_load_and_validate_objects() {
    let dir = reference("capi-crds");
    let (sim, c) = start().await;
    let n = sim.install_crds_from_dir(&dir).unwrap();
    assert_eq!(n, 12);
    let cluster = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c1"},
        "spec": {
            "clusterNetwork": {"pods": {"cidrBlocks": ["10.244.0.0/16"]}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxCluster", "name": "c1"},
            "controlPlaneRef": {"apiGroup": "controlplane.cluster.x-k8s.io", "kind": "KubeadmControlPlane", "name": "c1-cp"}
        }
    });
    let r = call_json(
        &c,
        "POST",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters",
        "application/json",
        &cluster,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    let mut bad = cluster.clone();
    bad["spec"]["infrastructureRef"] = json!({"kind": "ProxmoxCluster"});
    bad["metadata"]["name"] = json!("c2");
    let r = call_json(
        &c,
        "POST",
        "/apis/cluster.x-k8s.io/v1beta2/namespaces/default/clusters",
        "application/json",
        &bad,
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let claim = json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
        "metadata": {"name": "m1-0"},
        "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pool"}}
    });
    let r = call_json(
        &c,
        "POST",
        "/apis/ipam.cluster.x-k8s.io/v1beta2/namespaces/default/ipaddressclaims",
        "application/json",
        &claim,
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
}
