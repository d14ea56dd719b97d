//! The cluster's `InClusterIPPool`s (in-cluster IPAM provider,
//! `ipam.cluster.x-k8s.io/v1alpha2`): which should exist (pure), and making
//! it so (create/update by server-side apply, delete what is no longer
//! wanted, all of them on cluster deletion).
//!
//! One pool per (ProxmoxCluster, instance, family) for instances with their
//! own `network.ipv4Config` / `ipv6Config`
//! (`<proxmoxcluster>-<instance>-ipv4-<hash>`, or the name recorded in
//! `status.ipPools`),
//! and one shared cluster-wide pool per family from the cluster-level config
//! (`<proxmoxcluster>-ipv4`) for every instance in use without its own — see
//! [`crate::instances`] for why the cluster-level pool is shared; names longer
//! than an object name may be are cut ([`crate::names::pool_name`]). Pools are
//! controller-owned by the ProxmoxCluster (so `clusterctl move` carries them
//! and garbage collection removes them), labelled with the CAPI cluster name
//! and [`POOL_OWNER_LABEL`] (the ProxmoxCluster's name as a label value,
//! [`crate::names::label_value`]), and recorded in `status.ipPools`.
//!
//! Pools owned by another object are never touched; a name clash is an error.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::decide::instances_to_probe;
use crate::api::{IpConfig, IpPoolStatus, ProxmoxCluster, ProxmoxClusterSpec};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::ipam::{IN_CLUSTER_POOL_KIND, IPAM_GROUP, InClusterIPPool, InClusterIpPoolSpec};
use crate::context::FIELD_MANAGER;
use crate::error::Error;
use crate::instances::{IpFamily, PoolSource};
use crate::names::{capmox_pool_name, label_value, pool_name};

/// Label naming the ProxmoxCluster a pool belongs to (for listing).
pub const POOL_OWNER_LABEL: &str = "infrastructure.cluster.x-k8s.io/proxmoxcluster";

/// A pool that should exist.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredPool {
    /// Pool name.
    pub name: String,
    /// The instance with its own config, or `None` for the cluster-wide pool.
    pub instance: Option<String>,
    /// Address family.
    pub family: IpFamily,
    /// The pool of `spec.controlPlaneEndpointPool.addresses`
    /// ([`super::endpoint::desired_pool`]): not a node pool, so not listed
    /// in `status.ipPools`.
    pub endpoint: bool,
    /// Pool spec.
    pub spec: InClusterIpPoolSpec,
}

impl DesiredPool {
    /// The `status.ipPools` entry.
    pub fn status(&self) -> IpPoolStatus {
        IpPoolStatus {
            instance: self.instance.clone(),
            family: self.family.as_str().to_string(),
            api_group: IPAM_GROUP.to_string(),
            kind: IN_CLUSTER_POOL_KIND.to_string(),
            name: self.name.clone(),
        }
    }
}

fn pool_spec(c: &IpConfig) -> InClusterIpPoolSpec {
    InClusterIpPoolSpec {
        addresses: c.addresses.clone(),
        prefix: i32::from(c.prefix),
        gateway: c.gateway.clone(),
        excluded_addresses: Vec::new(),
        allocate_reserved_ip_addresses: None,
    }
}

/// The node pools `cluster_name`'s spec asks for, sorted by name: per
/// instance in use with its own config, plus the shared cluster-wide pool
/// when an instance in use relies on the cluster-level config. A pool
/// recorded in `recorded` (`status.ipPools`) for the same instance and
/// family keeps its recorded name (pools made before
/// [`crate::names::pool_name`] added its hash stay where their addresses
/// are); others are named by [`crate::names::pool_name`].
pub fn desired_pools(
    cluster_name: &str,
    spec: &ProxmoxClusterSpec,
    recorded: &[IpPoolStatus],
) -> Vec<DesiredPool> {
    let mut out: BTreeMap<String, DesiredPool> = BTreeMap::new();
    for inst in instances_to_probe(spec) {
        for family in IpFamily::ALL {
            let Some(source) = inst.network.pool(family) else {
                continue;
            };
            let instance = match source {
                PoolSource::Instance(_) => Some(inst.name().to_string()),
                PoolSource::Cluster(_) => None,
            };
            let name = recorded
                .iter()
                .find(|r| {
                    r.instance == instance
                        && r.family == family.as_str()
                        && r.api_group == IPAM_GROUP
                        && r.kind == IN_CLUSTER_POOL_KIND
                })
                .map(|r| r.name.clone())
                .unwrap_or_else(|| pool_name(cluster_name, instance.as_deref(), family));
            out.entry(name.clone()).or_insert_with(|| DesiredPool {
                name,
                instance,
                family,
                endpoint: false,
                spec: pool_spec(source.config()),
            });
        }
    }
    out.into_values().collect()
}

/// The cluster-wide pools the Go provider (CAPMOX) left for `pc`, as
/// `status.ipPools` entries to add to `recorded`: for each family with a
/// cluster-level config (`spec.ipv4Config` / `ipv6Config`) and no recorded
/// cluster-wide pool, CAPMOX's `<cluster>-v4-icip` / `-v6-icip`
/// ([`capmox_pool_name`]) when it exists and `pc` is its controller owner
/// (CAPMOX sets itself so). Recorded, it keeps handing out the addresses of
/// one range, so a new machine never gets an address an adopted machine
/// holds (a second pool over the same range would; docs/migrating-from-capmox.md,
/// step 7).
///
/// # Errors
/// [`Error::Kube`] when reading a pool fails other than with 404 (a
/// missing pool or IPAM kind means there is nothing to adopt).
pub async fn capmox_pools(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    recorded: &[IpPoolStatus],
) -> Result<Vec<IpPoolStatus>, Error> {
    let ns = pc.namespace().unwrap_or_default();
    let uid = pc.uid().unwrap_or_default();
    let api: Api<InClusterIPPool> = Api::namespaced(kube.clone(), &ns);
    let mut out = Vec::new();
    for (family, config) in [
        (IpFamily::V4, &pc.spec.ipv4_config),
        (IpFamily::V6, &pc.spec.ipv6_config),
    ] {
        let known = recorded
            .iter()
            .any(|r| r.instance.is_none() && r.family == family.as_str());
        if config.is_none() || known {
            continue;
        }
        let name = capmox_pool_name(&pc.name_any(), family);
        let pool = match api.get_opt(&name).await {
            Ok(p) => p,
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => return Err(Error::Kube(e)),
        };
        if pool.is_some_and(|p| owned_by(&p, &uid)) {
            tracing::info!(pool = %name, "adopting the Go provider's InClusterIPPool");
            out.push(IpPoolStatus {
                instance: None,
                family: family.as_str().to_string(),
                api_group: IPAM_GROUP.to_string(),
                kind: IN_CLUSTER_POOL_KIND.to_string(),
                name,
            });
        }
    }
    Ok(out)
}

fn owner_ref(pc: &ProxmoxCluster) -> Option<OwnerReference> {
    let mut r = pc.controller_owner_ref(&())?;
    r.block_owner_deletion = Some(true);
    Some(r)
}

fn owned_by(pool: &InClusterIPPool, uid: &str) -> bool {
    pool.owner_references()
        .iter()
        .any(|o| o.uid == uid && o.controller == Some(true))
}

/// Makes the pools of `pc` match `desired`: applies missing or changed ones,
/// deletes ones it owns that are no longer wanted. Returns the
/// `status.ipPools` entries (the node pools).
///
/// # Errors
/// [`Error::Kube`] when a call fails; [`Error::Precondition`] when a pool of
/// that name exists but belongs to something else.
pub async fn reconcile_pools(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    capi_cluster: &str,
    desired: &[DesiredPool],
) -> Result<Vec<IpPoolStatus>, Error> {
    let ns = pc.namespace().unwrap_or_default();
    let uid = pc.uid().unwrap_or_default();
    let api: Api<InClusterIPPool> = Api::namespaced(kube.clone(), &ns);
    if desired.is_empty() && pc.status.as_ref().is_none_or(|s| s.ip_pools.is_empty()) {
        // Nothing wanted and nothing recorded: no IPAM call (the IPAM kind
        // need not be installed when no pool is configured).
        return Ok(Vec::new());
    }
    let existing = list_owned(&api, pc).await?;
    let owner = owner_ref(pc)
        .ok_or_else(|| Error::Precondition("ProxmoxCluster has no uid yet".to_string()))?;
    for want in desired {
        let current = match existing.iter().find(|p| p.name_any() == want.name) {
            Some(p) => Some(p.clone()),
            // Not ours by label: check for a foreign pool of that name.
            None => api.get_opt(&want.name).await?,
        };
        if let Some(cur) = &current {
            if !owned_by(cur, &uid) {
                return Err(Error::Precondition(format!(
                    "InClusterIPPool {ns}/{} exists but is not owned by this ProxmoxCluster; rename or delete it",
                    want.name
                )));
            }
            // Equal, and labelled as ours (an adopted pool of the Go
            // provider is not yet: the apply below adds the labels).
            let labelled = cur.labels().get(POOL_OWNER_LABEL) == Some(&label_value(&pc.name_any()));
            if cur.spec == want.spec && labelled {
                continue;
            }
        }
        let body = serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
            "kind": IN_CLUSTER_POOL_KIND,
            "metadata": {
                "name": want.name,
                "namespace": ns,
                "labels": {
                    CLUSTER_NAME_LABEL: capi_cluster,
                    POOL_OWNER_LABEL: label_value(&pc.name_any()),
                },
                "ownerReferences": [owner],
            },
            "spec": want.spec,
        });
        api.patch(
            &want.name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
        tracing::info!(pool = %want.name, "applied InClusterIPPool");
    }
    for stale in existing
        .iter()
        .filter(|p| owned_by(p, &uid) && !desired.iter().any(|d| d.name == p.name_any()))
    {
        delete_pool(&api, &stale.name_any()).await?;
    }
    Ok(desired
        .iter()
        .filter(|d| !d.endpoint)
        .map(DesiredPool::status)
        .collect())
}

async fn list_owned(
    api: &Api<InClusterIPPool>,
    pc: &ProxmoxCluster,
) -> Result<Vec<InClusterIPPool>, Error> {
    let lp = ListParams::default().labels(&format!(
        "{POOL_OWNER_LABEL}={}",
        label_value(&pc.name_any())
    ));
    match api.list(&lp).await {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Err(Error::Precondition(
            "the InClusterIPPool kind (ipam.cluster.x-k8s.io/v1alpha2) is not installed: install the in-cluster IPAM provider (clusterctl init --ipam in-cluster)".to_string(),
        )),
        Err(e) => Err(Error::Kube(e)),
    }
}

async fn delete_pool(api: &Api<InClusterIPPool>, name: &str) -> Result<(), Error> {
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(pool = %name, "deleted InClusterIPPool");
            Ok(())
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::Kube(e)),
    }
}

/// Deletes every pool `pc` owns (cluster deletion). Returns how many were
/// deleted. A missing IPAM kind means there is nothing to delete.
///
/// # Errors
/// [`Error::Kube`] when listing or deleting fails otherwise.
pub async fn delete_pools(kube: &kube::Client, pc: &ProxmoxCluster) -> Result<usize, Error> {
    let ns = pc.namespace().unwrap_or_default();
    let uid = pc.uid().unwrap_or_default();
    let api: Api<InClusterIPPool> = Api::namespaced(kube.clone(), &ns);
    let owned = match list_owned(&api, pc).await {
        Ok(v) => v,
        // The IPAM kind is not installed: there is nothing to delete.
        Err(Error::Precondition(_)) => return Ok(0),
        Err(e) => return Err(e),
    };
    let mut n = 0;
    for p in owned.iter().filter(|p| owned_by(p, &uid)) {
        delete_pool(&api, &p.name_any()).await?;
        n += 1;
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{ClusterMode, ClusterSettings, InstanceNetwork, InstanceSpec, SecretRef};

    fn ipc(addr: &str, prefix: u8, gw: &str) -> IpConfig {
        IpConfig {
            addresses: vec![addr.into()],
            prefix,
            gateway: Some(gw.into()),
            metric: Some(100),
        }
    }

    fn inst(name: &str, v4: Option<IpConfig>) -> InstanceSpec {
        InstanceSpec {
            name: name.into(),
            credentials_ref: SecretRef {
                name: "c".into(),
                namespace: None,
            },
            network: v4.map(|c| InstanceNetwork {
                ipv4_config: Some(c),
                ..InstanceNetwork::default()
            }),
            ..InstanceSpec::default()
        }
    }

    #[test]
    fn per_instance_and_shared_pools() {
        let spec = ProxmoxClusterSpec {
            ipv4_config: Some(ipc("10.0.0.10-10.0.0.20", 24, "10.0.0.1")),
            ipv6_config: Some(ipc("2001:db8::10-2001:db8::20", 64, "2001:db8::1")),
            settings: Some(ClusterSettings {
                mode: Some(ClusterMode::MultiInstance),
                instances: vec![
                    inst("dc-a", Some(ipc("10.1.0.0/28", 24, "10.1.0.1"))),
                    inst("dc-b", None),
                    inst("dc-c", None),
                ],
            }),
            ..ProxmoxClusterSpec::default()
        };
        let pools = desired_pools("wl1", &spec, &[]);
        let summary: Vec<(&str, Option<&str>, &str)> = pools
            .iter()
            .map(|p| (p.name.as_str(), p.instance.as_deref(), p.family.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                // FNV-1a of "wl1/dc-a/ipv4", computed apart.
                ("wl1-dc-a-ipv4-97c9bbbd1ee4075d", Some("dc-a"), "ipv4"),
                ("wl1-ipv4", None, "ipv4"),
                ("wl1-ipv6", None, "ipv6"),
            ]
        );
        assert_eq!(
            pools[0].spec,
            InClusterIpPoolSpec {
                addresses: vec!["10.1.0.0/28".into()],
                prefix: 24,
                gateway: Some("10.1.0.1".into()),
                excluded_addresses: vec![],
                allocate_reserved_ip_addresses: None,
            }
        );
        assert_eq!(
            pools[0].status(),
            IpPoolStatus {
                instance: Some("dc-a".into()),
                family: "ipv4".into(),
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "wl1-dc-a-ipv4-97c9bbbd1ee4075d".into(),
            }
        );
        // A pool recorded under its name from before the hash keeps it.
        let old = IpPoolStatus {
            name: "wl1-dc-a-ipv4".into(),
            ..pools[0].status()
        };
        let kept = desired_pools("wl1", &spec, &[old]);
        assert_eq!(kept[0].name, "wl1-dc-a-ipv4");
        assert_eq!(kept[1].name, "wl1-ipv4");
    }

    #[test]
    fn default_mode_pools_only_for_the_instance_in_use() {
        let spec = ProxmoxClusterSpec {
            settings: Some(ClusterSettings {
                mode: Some(ClusterMode::Default),
                instances: vec![
                    inst("dc-a", None),
                    inst("dc-b", Some(ipc("10.2.0.0/28", 24, "10.2.0.1"))),
                ],
            }),
            ..ProxmoxClusterSpec::default()
        };
        assert!(desired_pools("wl1", &spec, &[]).is_empty());
        // Legacy: cluster-level config → the shared pool.
        let legacy = ProxmoxClusterSpec {
            ipv4_config: Some(ipc("10.0.0.10-10.0.0.20", 24, "10.0.0.1")),
            ..ProxmoxClusterSpec::default()
        };
        let names: Vec<String> = desired_pools("old", &legacy, &[])
            .into_iter()
            .map(|p| p.name)
            .collect();
        assert_eq!(names, vec!["old-ipv4".to_string()]);
    }
}
