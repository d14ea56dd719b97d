//! The Cluster API infrastructure provider for Proxmox VE: one Kubernetes
//! cluster whose machines are spread over many Proxmox VE clusters.
//!
//! | module | owns |
//! |---|---|
//! | [`api`] | the custom resources (`infrastructure.cluster.x-k8s.io/v1alpha3`, CAPI contract v1beta2), validation, CRD generation; the Go provider's `v1alpha2`, served, and the conversion between the two |
//! | [`capi`] | shims of the CAPI objects we read or create (Cluster, Machine, IPAM), contract labels and owner rules |
//! | [`conditions`] | merging `metav1.Condition`s |
//! | [`backoff`] | per-object retry backoff |
//! | [`error`] | the controller's error type and its categories |
//! | [`pve`] | the one seam to Proxmox (`ProxmoxApi`), implemented by `pve_client::PveClient` |
//! | [`credentials`] | credentials Secret → client configuration |
//! | [`clients`] | per-instance client cache |
//! | [`instances`] | the effective instances of a ProxmoxCluster |
//! | [`names`] | every identifier derived from Kubernetes names or user input, within its receiving limits |
//! | [`context`] | what every controller shares |
//! | [`stores`] | the watched objects reconcilers read |
//! | [`reasons`] | every condition and event reason, with its message |
//! | [`spent`] | time inside Proxmox and Kubernetes calls, per reconcile |
//! | [`metrics`], [`telemetry`], [`events`] | Prometheus metrics, logs, Kubernetes events |
//! | [`cluster`] | the ProxmoxCluster reconciler |
//! | [`machine`] | the ProxmoxMachine reconciler |
//! | [`cloudinit`] | NoCloud bootstrap data and its ISO |
//! | [`template_status`] | ProxmoxMachineTemplate `status.capacity` / `nodeInfo` |
//! | [`watch_filter`] | watch streams that pass only the changes a controller acts on |
//! | [`manager`] | the manager: flags, leader election, health and metrics servers, controllers |
//! | [`webhook`] | the HTTPS webhook server: defaulting, validating and conversion webhooks |

pub mod api;
pub mod backoff;
pub mod capi;
pub mod clients;
pub mod cloudinit;
pub mod cluster;
pub mod conditions;
pub mod context;
pub mod credentials;
pub mod error;
pub mod events;
pub mod instances;
pub mod machine;
pub mod manager;
pub mod metrics;
pub mod names;
pub mod pve;
pub mod reasons;
pub mod spent;
pub mod stores;
pub mod telemetry;
pub mod template_status;
pub mod watch_filter;
pub mod webhook;

/// Name of the single implicit instance of a ProxmoxCluster in legacy
/// `Default` mode without `settings.instances` (credentials from
/// `spec.credentialsRef`); also its failure-domain name.
pub const DEFAULT_INSTANCE_NAME: &str = "default";
