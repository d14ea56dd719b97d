//! The conformance suite of the Proxmox client: the client-against-simulator
//! tests (`tests/it/sim.rs`) run once more with the simulator validating
//! every request against the official Proxmox VE API schema
//! (`apidoc.json`), so a parameter, type or format Proxmox would refuse
//! fails the test.
//!
//! The schema is reference data kept beside the repository
//! (`../shared/pve-api/`), not in it; see the README's "Two test suites".
//! `make test` does not build this binary (`test = false` in Cargo.toml);
//! `make conformance` runs it, and each test fails naming the missing path
//! when the schema is absent.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../it/sim.rs"]
mod sim;

use std::path::PathBuf;

/// `<repo>/../shared/pve-api/apidoc.json`, the official API schema.
///
/// # Panics
/// When the file is absent, naming it.
fn pve_schema() -> Option<PathBuf> {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let repo = repo.canonicalize().unwrap_or(repo);
    let path = repo
        .parent()
        .unwrap_or(&repo)
        .join("shared/pve-api/apidoc.json");
    assert!(
        path.is_file(),
        "conformance: the official Proxmox API schema {} is missing (reference data beside the repository; `make test` does not need it)",
        path.display()
    );
    Some(path)
}
