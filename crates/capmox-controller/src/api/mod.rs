//! The custom resources of `infrastructure.cluster.x-k8s.io/v1alpha3`
//! (CAPI contract v1beta2): `ProxmoxCluster`, `ProxmoxClusterTemplate`,
//! `ProxmoxMachine`, `ProxmoxMachineTemplate`, and their validation; the
//! Go provider's `v1alpha2` of the same kinds ([`v1alpha2`]), served for
//! taking over its clusters, and the conversion between the two
//! ([`conversion`]).

pub mod cluster;
pub mod common;
pub mod conversion;
pub mod crd;
pub mod machine;
pub mod templates;
pub mod v1alpha2;
pub mod validation;
pub mod vm_shape;

pub use cluster::{
    ApiEndpoint, ClusterMode, ClusterSettings, EndpointClaimStatus, EndpointPool, FailureDomain,
    HaSettings, InstanceNetwork, InstanceSpec, InstanceStatus, IpPoolStatus, MissingPrivilege,
    ProviderIdFormat, ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterStatus,
};
pub use common::{
    Condition, Initialization, IpConfig, IpPoolReference, MatchPolicy, SchedulerHints, SecretRef,
    TemplateSelector, TemplateSource, VmIdRange,
};
pub use machine::{
    AdditionalVolume, Checks, DeviceAddresses, DiskFormat, DiskSize, Disks, MachineAddress,
    MetadataSettings, NetworkDevice, NetworkSpec, NetworkStatus, NicModel, ProxmoxMachine,
    ProxmoxMachineSpec, ProxmoxMachineStatus,
};
pub use templates::{
    NodeInfo, ObjectMetaTemplate, ProxmoxClusterTemplate, ProxmoxClusterTemplateResource,
    ProxmoxClusterTemplateSpec, ProxmoxMachineTemplate, ProxmoxMachineTemplateResource,
    ProxmoxMachineTemplateSpec, ProxmoxMachineTemplateStatus,
};

/// API group of every kind here.
pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// API version of every kind here.
pub const VERSION: &str = "v1alpha3";
/// CAPI contract label stamped on every CRD: contract v1beta2 → the served
/// versions that meet that contract, `_`-separated (CAPI reads the newest).
/// Only `v1alpha3`: the Go provider's `v1alpha2` is served for taking over
/// its clusters but follows contract v1beta1 (no
/// `status.initialization.provisioned`, failure domains as a map), so CAPI
/// must never read it as v1beta2 (docs/capi-contract.md).
pub const CONTRACT_LABEL: (&str, &str) = ("cluster.x-k8s.io/v1beta2", "v1alpha3");
