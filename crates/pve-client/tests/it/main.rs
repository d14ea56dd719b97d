//! Integration tests of the Proxmox VE client.
//!
//! One test binary for all of the crate's integration tests: each module
//! below was its own binary, and every binary linked the whole dependency
//! tree again (about 100 MB and several seconds of linking each).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod sim;
mod wire;

/// The Proxmox API schema the simulator validates requests against in
/// `sim.rs`: none here. The conformance suite (`tests/conformance/main.rs`)
/// runs `sim.rs` again with the official schema.
fn pve_schema() -> Option<std::path::PathBuf> {
    None
}
