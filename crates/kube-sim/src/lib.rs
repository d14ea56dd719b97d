//! `kube-sim`: an in-memory Kubernetes API server for tests, the end-to-end suite and
//! demos, served over HTTPS with a generated CA and bearer-token authentication.
//!
//! It serves any CRD (posted as a `CustomResourceDefinition` or loaded from files) and the
//! built-in kinds the provider and its end-to-end suite use (Namespace, Secret, ConfigMap,
//! Event in `v1` and `events.k8s.io/v1`, Lease, Node), with kube-apiserver's semantics for
//! CRUD, label and field selectors, pagination, watches with bookmarks and `410 Gone`,
//! `resourceVersion` conflicts, the status subresource, the scale subresource of custom
//! resources (`autoscaling/v1` `Scale`), JSON/merge/strategic-merge patches, server-side
//! apply with managed fields, finalizers, owner-reference garbage collection, schema and
//! CEL validation, admission webhooks (mutating and validating) and CRD conversion
//! webhooks called over HTTPS, discovery, OpenAPI v3 and Table output for `kubectl`.
//!
//! Where it is knowingly simpler than kube-apiserver, or answers differently, is listed in
//! `SIMPLIFICATIONS.md` beside this crate's `Cargo.toml`. kube-apiserver's name and label
//! rules are public in [`validation`], for other crates' tests of the values they derive.
//!
//! ```no_run
//! # async fn demo() -> Result<(), kube_sim::KubeSimError> {
//! let sim = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default()).await?;
//! let client = sim.client().await?;
//! # let _ = client;
//! sim.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod api_error;
mod clock;
mod engine;
mod error;
mod fields;
mod gc;
mod http;
mod json;
mod jsonpath;
mod kubeconfig;
mod patch;
mod resource;
mod schema;
mod selector;
mod sim;
mod store;
mod tls;
pub mod validation;
mod webhook;

pub use error::KubeSimError;
pub use sim::{KubeSim, KubeSimOptions};
