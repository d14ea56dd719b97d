//! The conformance suite of the end-to-end crate: the CAPI-core and IPAM
//! stand-in tests (`tests/it/standin_capi.rs`, `tests/it/standin_ipam.rs`)
//! run once more with the real CAPI and IPAM CRDs instead of the stand-in's
//! own, so every object the stand-in writes must pass the real schemas.
//!
//! The real CRDs are reference data kept beside the repository
//! (`../shared/capi-crds/`), not in it; see the README's "Two test suites".
//! `make test` does not build this binary (`test = false` in Cargo.toml);
//! `make conformance` runs it, and each test fails naming the missing path
//! when the data is absent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../it/standin_capi.rs"]
mod standin_capi;
#[path = "../it/standin_ipam.rs"]
mod standin_ipam;

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// `<repo>/../shared/capi-crds`, the real CAPI and IPAM CRDs.
///
/// # Panics
/// When the folder is absent, naming it.
fn real_capi_crds_dir() -> PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let dir = repo.parent().unwrap_or(&repo).join("shared/capi-crds");
    assert!(
        dir.is_dir(),
        "conformance: the real CAPI CRDs {} are missing (reference data beside the repository; `make test` does not need them)",
        dir.display()
    );
    dir
}

/// The CAPI core and IPAM CRDs the included stand-in tests install: the
/// real ones, at least the twelve CRDs of CAPI core, kubeadm and in-cluster
/// IPAM.
fn capi_crds() -> Vec<CustomResourceDefinition> {
    let crds = capmox_e2e::setup::crds_from_dir(&real_capi_crds_dir()).unwrap();
    assert!(crds.len() >= 12, "only {} CRDs found", crds.len());
    crds
}
