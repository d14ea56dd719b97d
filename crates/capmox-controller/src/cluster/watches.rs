//! Mappers from watched objects to the ProxmoxClusters to reconcile. Each
//! scans the controller's ProxmoxCluster store (already filtered by
//! `--namespace` and `--watch-filter`), so it only names clusters the
//! controller manages.

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::api::{GROUP, ProxmoxCluster};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::core::Cluster;
use crate::clients::ClientMap;
use crate::instances::effective_instances;

fn object_ref(pc: &ProxmoxCluster) -> ObjectRef<ProxmoxCluster> {
    ObjectRef::new(&pc.name_any()).within(&pc.namespace().unwrap_or_default())
}

/// The clusters with an instance whose credentials are `secret` (including
/// the manager's default Secret for clusters relying on it).
pub fn clusters_using_secret(
    clusters: &[Arc<ProxmoxCluster>],
    clients: &ClientMap,
    secret: &Secret,
) -> Vec<ObjectRef<ProxmoxCluster>> {
    let target = (secret.namespace().unwrap_or_default(), secret.name_any());
    clusters
        .iter()
        .filter(|pc| {
            effective_instances(&pc.spec)
                .iter()
                .any(|i| clients.credentials_secret(pc, i.name()).ok().as_ref() == Some(&target))
        })
        .map(|pc| object_ref(pc))
        .collect()
}

/// The clusters a ProxmoxMachine belongs to: same namespace, and the
/// machine's `cluster.x-k8s.io/cluster-name` label equals the cluster's
/// label (or, without one, its name).
pub fn clusters_of_machine(
    clusters: &[Arc<ProxmoxCluster>],
    machine: &ObjectMeta,
) -> Vec<ObjectRef<ProxmoxCluster>> {
    let Some(name) = machine
        .labels
        .as_ref()
        .and_then(|l| l.get(CLUSTER_NAME_LABEL))
    else {
        return Vec::new();
    };
    let ns = machine.namespace.as_deref().unwrap_or_default();
    clusters
        .iter()
        .filter(|pc| pc.metadata.namespace.as_deref() == Some(ns))
        .filter(|pc| {
            pc.labels()
                .get(CLUSTER_NAME_LABEL)
                .map_or_else(|| pc.name_any() == *name, |l| l == name)
        })
        .map(|pc| object_ref(pc))
        .collect()
}

/// The ProxmoxCluster a CAPI Cluster's `infrastructureRef` names, if managed here.
pub fn cluster_infra_ref(
    clusters: &[Arc<ProxmoxCluster>],
    cluster: &Cluster,
) -> Vec<ObjectRef<ProxmoxCluster>> {
    let Some(r) = cluster.spec.infrastructure_ref.as_ref() else {
        return Vec::new();
    };
    if r.kind != "ProxmoxCluster" || r.api_group != GROUP {
        return Vec::new();
    }
    let ns = cluster.namespace().unwrap_or_default();
    clusters
        .iter()
        .filter(|pc| pc.name_any() == r.name && pc.namespace().as_deref() == Some(ns.as_str()))
        .map(|pc| object_ref(pc))
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::{ClusterMode, ClusterSettings, InstanceSpec, ProxmoxClusterSpec, SecretRef};
    use crate::capi::core::{ClusterSpec, ContractRef};
    use crate::clients::ClientMapConfig;

    fn pc(
        ns: &str,
        name: &str,
        label: Option<&str>,
        instances: Vec<(&str, &str, Option<&str>)>,
    ) -> Arc<ProxmoxCluster> {
        let mut c = ProxmoxCluster::new(
            name,
            ProxmoxClusterSpec {
                settings: Some(ClusterSettings {
                    mode: Some(ClusterMode::MultiInstance),
                    instances: instances
                        .into_iter()
                        .map(|(n, s, sns)| InstanceSpec {
                            name: n.into(),
                            credentials_ref: SecretRef {
                                name: s.into(),
                                namespace: sns.map(str::to_string),
                            },
                            ..InstanceSpec::default()
                        })
                        .collect(),
                }),
                ..ProxmoxClusterSpec::default()
            },
        );
        c.metadata.namespace = Some(ns.into());
        c.metadata.labels =
            label.map(|l| BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), l.to_string())]));
        Arc::new(c)
    }

    fn names(refs: Vec<ObjectRef<ProxmoxCluster>>) -> Vec<String> {
        refs.into_iter()
            .map(|r| format!("{}/{}", r.namespace.unwrap_or_default(), r.name))
            .collect()
    }

    #[test]
    fn secrets_map_to_the_clusters_using_them() {
        let clusters = vec![
            pc(
                "ns1",
                "wl1",
                None,
                vec![("dc-a", "a", None), ("dc-b", "b", Some("shared"))],
            ),
            pc("ns2", "wl2", None, vec![("dc-a", "a", None)]),
            pc("ns3", "wl3", None, vec![("dc-b", "b", Some("shared"))]),
        ];
        let mut legacy = ProxmoxCluster::new("old", ProxmoxClusterSpec::default());
        legacy.metadata.namespace = Some("ns4".into());
        let mut all = clusters.clone();
        all.push(Arc::new(legacy));
        let clients = ClientMap::new(ClientMapConfig {
            default_credentials: Some(("capmox-system".into(), "default-creds".into())),
            ..ClientMapConfig::default()
        });
        let secret = |ns: &str, name: &str| {
            let mut s = Secret::default();
            s.metadata.namespace = Some(ns.into());
            s.metadata.name = Some(name.into());
            s
        };
        assert_eq!(
            names(clusters_using_secret(&all, &clients, &secret("ns1", "a"))),
            vec!["ns1/wl1"]
        );
        assert_eq!(
            names(clusters_using_secret(
                &all,
                &clients,
                &secret("shared", "b")
            )),
            vec!["ns1/wl1", "ns3/wl3"]
        );
        assert_eq!(
            names(clusters_using_secret(
                &all,
                &clients,
                &secret("capmox-system", "default-creds")
            )),
            vec!["ns4/old"]
        );
        assert!(clusters_using_secret(&all, &clients, &secret("ns1", "b")).is_empty());
    }

    #[test]
    fn machines_map_by_cluster_name_label() {
        let clusters = vec![
            pc("ns1", "wl1-pxc", Some("wl1"), vec![]),
            pc("ns1", "wl2", None, vec![]),
            pc("ns2", "wl1-pxc", Some("wl1"), vec![]),
        ];
        let meta = |ns: &str, label: Option<&str>| ObjectMeta {
            namespace: Some(ns.into()),
            labels: label
                .map(|l| BTreeMap::from([(CLUSTER_NAME_LABEL.to_string(), l.to_string())])),
            ..ObjectMeta::default()
        };
        assert_eq!(
            names(clusters_of_machine(&clusters, &meta("ns1", Some("wl1")))),
            vec!["ns1/wl1-pxc"]
        );
        assert_eq!(
            names(clusters_of_machine(&clusters, &meta("ns1", Some("wl2")))),
            vec!["ns1/wl2"]
        );
        assert!(clusters_of_machine(&clusters, &meta("ns1", None)).is_empty());
    }

    #[test]
    fn capi_clusters_map_through_infrastructure_ref() {
        let clusters = vec![pc("ns1", "wl1-pxc", None, vec![])];
        let mut c = Cluster::new(
            "wl1",
            ClusterSpec {
                infrastructure_ref: Some(ContractRef {
                    api_group: GROUP.into(),
                    kind: "ProxmoxCluster".into(),
                    name: "wl1-pxc".into(),
                }),
                ..ClusterSpec::default()
            },
        );
        c.metadata.namespace = Some("ns1".into());
        assert_eq!(names(cluster_infra_ref(&clusters, &c)), vec!["ns1/wl1-pxc"]);
        c.metadata.namespace = Some("ns2".into());
        assert!(cluster_infra_ref(&clusters, &c).is_empty());
        c.metadata.namespace = Some("ns1".into());
        if let Some(r) = c.spec.infrastructure_ref.as_mut() {
            r.kind = "VSphereCluster".into();
        }
        assert!(cluster_infra_ref(&clusters, &c).is_empty());
    }
}
