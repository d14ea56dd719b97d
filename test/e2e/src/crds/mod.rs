//! Minimal CRDs for the CAPI kinds the stand-in serves: typed with kube's
//! `CustomResource` derive, v1beta2 field names and shapes as in the real
//! CRDs of a CAPI release (the conformance suite runs the stand-in against
//! those), but only the fields the stand-in and the
//! provider read or write. Unknown fields are pruned by these schemas, except
//! in the parts kept verbatim ([`meta::Opaque`]).
//!
//! Every CRD carries the contract label `cluster.x-k8s.io/v1beta2` as the
//! released CAPI manifests do, so a contract-version lookup (what CAPI does
//! for every referenced kind) finds the served version.

pub mod bootstrap;
pub mod cluster;
pub mod clusterclass;
pub mod controlplane;
pub mod ipam;
pub mod machine;
pub mod machineset;
pub mod meta;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use bootstrap::{KubeadmConfig, KubeadmConfigSpec, KubeadmConfigTemplate};
pub use cluster::{ApiEndpoint, Cluster, ClusterSpec};
pub use clusterclass::{ClusterClass, KubeadmControlPlaneTemplate, Topology};
pub use controlplane::{KubeadmControlPlane, KubeadmControlPlaneSpec};
pub use ipam::{IPAddress, IPAddressClaim, InClusterIPPool, PoolRef};
pub use machine::{Machine, MachineSpec};
pub use machineset::{MachineDeployment, MachineSet};

/// API group of CAPI core.
pub const CLUSTER_GROUP: &str = "cluster.x-k8s.io";
/// API group of the kubeadm control-plane provider.
pub const CONTROL_PLANE_GROUP: &str = "controlplane.cluster.x-k8s.io";
/// API group of the kubeadm bootstrap provider.
pub const BOOTSTRAP_GROUP: &str = "bootstrap.cluster.x-k8s.io";
/// API group of infrastructure providers (ours).
pub const INFRASTRUCTURE_GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// Every minimal CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        Cluster::crd(),
        ClusterClass::crd(),
        Machine::crd(),
        MachineSet::crd(),
        MachineDeployment::crd(),
        KubeadmControlPlane::crd(),
        KubeadmControlPlaneTemplate::crd(),
        KubeadmConfig::crd(),
        KubeadmConfigTemplate::crd(),
        IPAddressClaim::crd(),
        IPAddress::crd(),
        InClusterIPPool::crd(),
    ]
}

/// The CRDs as one multi-document YAML stream.
///
/// # Errors
/// [`crate::E2eError::Yaml`] if serialisation fails.
pub fn yaml() -> crate::Result<String> {
    let mut out = String::new();
    for crd in all() {
        let text = serde_saphyr::to_string(&crd).map_err(|e| crate::E2eError::Yaml {
            what: crd.metadata.name.clone().unwrap_or_default(),
            message: e.to_string(),
        })?;
        out.push_str("---\n");
        out.push_str(&text);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract_plural_rule_and_carry_the_label() {
        let names: Vec<String> = all()
            .iter()
            .map(|c| c.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [
                "clusters.cluster.x-k8s.io",
                "clusterclasses.cluster.x-k8s.io",
                "machines.cluster.x-k8s.io",
                "machinesets.cluster.x-k8s.io",
                "machinedeployments.cluster.x-k8s.io",
                "kubeadmcontrolplanes.controlplane.cluster.x-k8s.io",
                "kubeadmcontrolplanetemplates.controlplane.cluster.x-k8s.io",
                "kubeadmconfigs.bootstrap.cluster.x-k8s.io",
                "kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",
                "ipaddressclaims.ipam.cluster.x-k8s.io",
                "ipaddresses.ipam.cluster.x-k8s.io",
                "inclusterippools.ipam.cluster.x-k8s.io",
            ]
        );
        for c in all() {
            let labels = c.metadata.labels.clone().unwrap_or_default();
            assert!(
                labels.contains_key("cluster.x-k8s.io/v1beta2"),
                "{:?} lacks the contract label",
                c.metadata.name
            );
            assert!(
                c.spec
                    .names
                    .categories
                    .clone()
                    .unwrap_or_default()
                    .contains(&"cluster-api".to_string())
            );
        }
    }

    #[test]
    fn kept_verbatim_parts_preserve_unknown_fields() {
        let kcp = serde_json::to_value(KubeadmControlPlane::crd()).unwrap();
        let spec = &kcp["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["properties"]["kubeadmConfigSpec"]["x-kubernetes-preserve-unknown-fields"],
            true
        );
        let cfg = serde_json::to_value(KubeadmConfig::crd()).unwrap();
        let spec = &cfg["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            cfg["spec"]["versions"][0]["subresources"]["status"],
            serde_json::json!({})
        );
    }

    #[test]
    fn scale_subresources_for_scalable_kinds() {
        for crd in [
            MachineDeployment::crd(),
            MachineSet::crd(),
            KubeadmControlPlane::crd(),
        ] {
            let v = serde_json::to_value(&crd).unwrap();
            assert_eq!(
                v["spec"]["versions"][0]["subresources"]["scale"],
                serde_json::json!({
                    "specReplicasPath": ".spec.replicas",
                    "statusReplicasPath": ".status.replicas",
                    "labelSelectorPath": ".status.selector"
                }),
                "{:?}",
                crd.metadata.name
            );
        }
    }
}
