//! End-to-end machinery for the Proxmox CAPI provider: clusterctl's template
//! rules, the CAPI-core stand-in, the scenarios and the demo.
//!
//! | module | owns |
//! |---|---|
//! | [`bench`] | `make bench`: the scale benchmark |
//! | [`capmox`] | the Go provider (CAPMOX v0.9) before a takeover: its objects and VMs |
//! | [`certmanager`] | what cert-manager does here: the webhook's serving certificate, CA injection |
//! | [`clusterctl`] | clusterctl's template variable rules |
//! | [`controller`] | the controller binary as a child process |
//! | [`crds`] | minimal CRDs of the CAPI kinds the stand-in serves |
//! | [`demo`] | `make demo` |
//! | [`env`] | the environment: pve-sim + kube-sim + stand-in, or a real cluster |
//! | [`error`] | the crate's error type |
//! | [`leaks`] | what a deleted cluster must not leave behind |
//! | [`observe`] | machine rows, VMs and ISOs of the simulated datacenters |
//! | [`scenario`] | applying YAML, bounded waits, listing |
//! | [`setup`] | CRDs and namespaces on an API server |
//! | [`standin`] | the CAPI-core stand-in controllers, IPAM fulfilment, kubelets |
//! | [`table`] | the demo's tables |

pub mod bench;
pub mod capmox;
pub mod certmanager;
pub mod clusterctl;
pub mod controller;
pub mod crds;
pub mod demo;
pub mod env;
pub mod error;
pub mod leaks;
pub mod observe;
pub mod scenario;
pub mod setup;
pub mod standin;
pub mod table;
pub mod vm_templates;

pub use error::{E2eError, Result};

/// A multi-threaded Tokio runtime (all features) for the binaries' plain
/// `main`s ([`bench::run_all_blocking`], [`demo::run_blocking`]).
///
/// # Errors
/// [`E2eError::Io`] when the runtime's threads or I/O driver cannot start.
pub fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|source| E2eError::Io {
            path: "tokio runtime".into(),
            source,
        })
}
