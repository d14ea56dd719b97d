//! The Cluster API infrastructure provider for Proxmox VE: one Kubernetes
//! cluster whose machines are spread over many Proxmox VE clusters.
//!
//! - [`api`]: the custom resources (`infrastructure.cluster.x-k8s.io/v1alpha3`,
//!   CAPI contract v1beta2), their validation and CRD generation.

pub mod api;

/// Name of the single implicit instance of a ProxmoxCluster in legacy
/// `Default` mode without `settings.instances` (credentials from
/// `spec.credentialsRef`); also its failure-domain name.
pub const DEFAULT_INSTANCE_NAME: &str = "default";
