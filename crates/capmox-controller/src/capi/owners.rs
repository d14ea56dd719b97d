//! Contract labels and annotations, owner lookup and pause rules.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::core::Cluster;

/// Label naming the owning Cluster (set by CAPI on every object of a cluster).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label KubeadmControlPlane puts on control-plane Machines (value empty).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Annotation pausing reconciliation of one object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Annotation marking an InfraCluster as managed by something else: we skip it.
pub const MANAGED_BY_ANNOTATION: &str = "cluster.x-k8s.io/managed-by";

/// The owner reference of `kind` in `group` (any version), matched by kind and
/// group, not by the `controller` flag (CAPI sets `controller: false` on the
/// Cluster → InfraCluster reference unless ClusterClass is used; docs/capi-contract.md fact 6).
pub fn owner_of_kind<'a>(
    meta: &'a ObjectMeta,
    group: &str,
    kind: &str,
) -> Option<&'a OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .find(|o| {
            o.kind == kind
                && o.api_version
                    .split_once('/')
                    .map_or(o.api_version.as_str(), |(g, _)| g)
                    == group
        })
}

/// Whether reconciliation is paused: the Cluster's `spec.paused`, or the
/// `cluster.x-k8s.io/paused` annotation on the object itself.
pub fn is_paused(cluster: Option<&Cluster>, meta: &ObjectMeta) -> bool {
    cluster.is_some_and(|c| c.spec.paused == Some(true))
        || meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
}

/// Whether the InfraCluster carries the `cluster.x-k8s.io/managed-by` annotation.
pub fn is_externally_managed(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(MANAGED_BY_ANNOTATION))
}

/// Whether the labels mark a control-plane machine.
pub fn is_control_plane(meta: &ObjectMeta) -> bool {
    meta.labels
        .as_ref()
        .is_some_and(|l| l.contains_key(CONTROL_PLANE_LABEL))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(api_version: &str, kind: &str, controller: Option<bool>) -> OwnerReference {
        OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: "x".into(),
            uid: "u".into(),
            controller,
            block_owner_deletion: None,
        }
    }

    #[test]
    fn owner_found_by_group_and_kind_not_controller_flag() {
        let meta = ObjectMeta {
            owner_references: Some(vec![
                owner("apps/v1", "Cluster", Some(true)),
                owner("cluster.x-k8s.io/v1beta2", "Cluster", Some(false)),
            ]),
            ..ObjectMeta::default()
        };
        let o = owner_of_kind(&meta, "cluster.x-k8s.io", "Cluster").unwrap();
        assert_eq!(o.api_version, "cluster.x-k8s.io/v1beta2");
        assert!(owner_of_kind(&meta, "cluster.x-k8s.io", "Machine").is_none());
        // Any version of the group counts (v1beta1 owners during upgrades).
        let meta = ObjectMeta {
            owner_references: Some(vec![owner("cluster.x-k8s.io/v1beta1", "Cluster", None)]),
            ..ObjectMeta::default()
        };
        assert!(owner_of_kind(&meta, "cluster.x-k8s.io", "Cluster").is_some());
    }

    #[test]
    fn pause_by_cluster_or_annotation() {
        let mut c = Cluster::new("c", super::super::core::ClusterSpec::default());
        let plain = ObjectMeta::default();
        assert!(!is_paused(Some(&c), &plain));
        c.spec.paused = Some(true);
        assert!(is_paused(Some(&c), &plain));
        let annotated = ObjectMeta {
            annotations: Some([(PAUSED_ANNOTATION.to_string(), String::new())].into()),
            ..ObjectMeta::default()
        };
        assert!(is_paused(None, &annotated));
    }
}
