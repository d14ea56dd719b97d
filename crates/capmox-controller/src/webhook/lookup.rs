//! The ProxmoxCluster a machine belongs to: its CAPI `Cluster` (named by
//! the `cluster.x-k8s.io/cluster-name` label, in the machine's namespace)
//! and that Cluster's `spec.infrastructureRef` when it names a
//! ProxmoxCluster (contract v1beta2: a local reference by API group, kind and
//! name). Two GETs, no cache: the webhook answers for the API server, and a
//! stale answer could let a bad machine through.
//!
//! Each answer is read for its spec only: the metadata (with its managed
//! fields) and the status are read past, not built.

use kube::Resource;
use kube::api::GetParams;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::api::{GROUP, ProxmoxCluster, ProxmoxClusterSpec};
use crate::capi::core::{Cluster, ContractRef};

/// What is read of a CAPI Cluster.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRef {
    #[serde(default)]
    spec: ClusterRefSpec,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClusterRefSpec {
    #[serde(default)]
    infrastructure_ref: Option<ContractRef>,
}

/// What is read of a ProxmoxCluster.
#[derive(Deserialize)]
struct SpecOnly {
    spec: ProxmoxClusterSpec,
}

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
    let Some(c) = get::<Cluster, ClusterRef>(client, namespace, cluster).await? else {
        return Ok(None);
    };
    let Some(r) = c.spec.infrastructure_ref else {
        return Ok(None);
    };
    if r.api_group != GROUP || r.kind != "ProxmoxCluster" || r.name.is_empty() {
        return Ok(None);
    }
    Ok(get::<ProxmoxCluster, SpecOnly>(client, namespace, &r.name)
        .await?
        .map(|pc| pc.spec))
}

/// `GET` of object `name` of kind `K` in `namespace`, read as `T`; `None`
/// on `404 Not Found` (as `Api::get_opt`).
async fn get<K, T>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<T>, kube::Error>
where
    K: Resource<DynamicType = ()>,
    T: DeserializeOwned,
{
    let url = K::url_path(&(), Some(namespace));
    let mut req = kube::core::Request::new(url)
        .get(name, &GetParams::default())
        .map_err(kube::Error::BuildRequest)?;
    req.extensions_mut().insert("get");
    match client.request::<T>(req).await {
        Ok(t) => Ok(Some(t)),
        Err(kube::Error::Api(status)) if status.is_not_found() => Ok(None),
        Err(e) => Err(e),
    }
}
