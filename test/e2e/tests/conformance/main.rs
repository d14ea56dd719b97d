//! The conformance suite of the end-to-end crate: the CAPI-core and IPAM
//! stand-in tests (`tests/it/standin_capi.rs`, `tests/it/standin_ipam.rs`)
//! run once more with the real CAPI and IPAM CRDs instead of the stand-in's
//! own, so every object the stand-in writes must pass the real schemas; and
//! the CAPMOX template fixture of the takeover scenario is checked against
//! CAPMOX's file.
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

/// `rel` inside the reference-data directory kept beside the repository
/// (the Makefile's `CONFORMANCE_DATA`, read only by `make conformance`).
///
/// # Panics
/// When it is absent, naming it.
fn shared(rel: &str) -> PathBuf {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let path = repo.parent().unwrap_or(&repo).join("shared").join(rel);
    assert!(
        path.exists(),
        "conformance: the reference data {} is missing (kept beside the repository; `make test` does not need it)",
        path.display()
    );
    path
}

/// `<repo>/../shared/capi-crds`, the real CAPI and IPAM CRDs.
///
/// # Panics
/// When the folder is absent, naming it.
fn real_capi_crds_dir() -> PathBuf {
    shared("capi-crds")
}

/// The fixture `test/e2e/fixtures/capmox/cluster-template.yaml` (the
/// takeover scenario's input, `tests/it/e2e_takeover.rs`) is CAPMOX's
/// `templates/cluster-template.yaml` unchanged below its header.
#[test]
fn capmox_template_fixture_is_capmoxs_file() {
    let reference = shared("capmox/templates/cluster-template.yaml");
    let fixture = include_str!("../../fixtures/capmox/cluster-template.yaml");
    let (header, body) = fixture
        .split_once("# ---- upstream ----\n")
        .expect("the fixture's header ends with the line `# ---- upstream ----`");
    assert!(
        header.contains("CAPMOX v0.9") && header.contains("Apache-2.0"),
        "{header}"
    );
    let want = std::fs::read_to_string(&reference).unwrap();
    assert!(
        body == want,
        "test/e2e/fixtures/capmox/cluster-template.yaml differs from {} below its header: copy the file again",
        reference.display()
    );
}

#[test]
#[should_panic(expected = "conformance: the reference data")]
fn missing_reference_data_fails_naming_it() {
    shared("no-such-file.yaml");
}

/// The CAPI core and IPAM CRDs the included stand-in tests install: the
/// real ones, at least the twelve CRDs of CAPI core, kubeadm and in-cluster
/// IPAM.
fn capi_crds() -> Vec<CustomResourceDefinition> {
    let crds = capmox_e2e::setup::crds_from_dir(&real_capi_crds_dir()).unwrap();
    assert!(crds.len() >= 12, "only {} CRDs found", crds.len());
    crds
}
