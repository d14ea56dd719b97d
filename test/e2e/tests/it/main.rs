//! End-to-end tests: kube-sim + pve-sim + the real controller.
//!
//! One test binary for all of the crate's integration tests: each module
//! below was its own binary, and every binary linked the whole dependency
//! tree again (about 100 MB and several seconds of linking each).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod citations;
mod demo_interrupt;
mod e2e_crash;
mod e2e_credentials;
mod e2e_endpoint;
mod e2e_faults;
mod e2e_flatcar;
mod e2e_ha;
mod e2e_modes;
mod e2e_multi_instance;
mod e2e_scale;
mod e2e_shapes;
mod e2e_spread;
mod e2e_takeover;
mod e2e_topology;
mod e2e_webhooks;
mod release;
mod standin_capi;
mod standin_ipam;
mod standin_meta;
mod templates;
mod time_scale;

/// The CAPI core and IPAM CRDs the stand-in tests install: the stand-in's
/// own (`capmox_e2e::crds::all`). The conformance suite
/// (`tests/conformance/main.rs`) runs the same stand-in tests with the real
/// CRDs instead.
fn capi_crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    capmox_e2e::crds::all()
}
