//! The ProxmoxCluster a machine belongs to: its CAPI `Cluster` (named by
//! the `cluster.x-k8s.io/cluster-name` label, in the machine's namespace)
//! and that Cluster's `spec.infrastructureRef` when it names a
//! ProxmoxCluster (contract v1beta2: a local reference by API group, kind and
//! name). Two GETs, no cache: the webhook answers for the API server, and a
//! stale answer could let a bad machine through.

use kube::Api;

use crate::api::{GROUP, ProxmoxCluster, ProxmoxClusterSpec};
use crate::capi::core::Cluster;

/// The spec of the ProxmoxCluster of CAPI Cluster `cluster` in `namespace`;
/// `None` when the Cluster does not exist (yet), names no infrastructure or
/// another kind, or its ProxmoxCluster does not exist.
///
/// # Errors
/// The Kubernetes client's error when a read fails for another reason.
pub async fn proxmox_cluster(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
) -> Result<Option<ProxmoxClusterSpec>, kube::Error> {
    let clusters: Api<Cluster> = Api::namespaced(client.clone(), namespace);
    let Some(c) = clusters.get_opt(cluster).await? else {
        return Ok(None);
    };
    let Some(r) = c.spec.infrastructure_ref.as_ref() else {
        return Ok(None);
    };
    if r.api_group != GROUP || r.kind != "ProxmoxCluster" || r.name.is_empty() {
        return Ok(None);
    }
    let pcs: Api<ProxmoxCluster> = Api::namespaced(client.clone(), namespace);
    Ok(pcs.get_opt(&r.name).await?.map(|pc| pc.spec))
}
