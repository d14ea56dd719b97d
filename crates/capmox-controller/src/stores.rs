//! The watched objects the reconcilers read, instead of one Kubernetes
//! request each: ProxmoxMachines, their owner Machines, CAPI Clusters,
//! ProxmoxClusters and bootstrap Secrets.
//!
//! The manager makes the stores ([`Stores::new`]) and hands the writers to
//! the machine controller, whose watches fill them (the same watches wake
//! its machines), and the stores to every controller that reads them (the
//! ProxmoxCluster controller counts machines from them). Tests fill them the
//! same way ([`reflect`]). Placement counts a cluster's machines without a
//! LIST (which made a scale-up of N machines cost O(N²) objects served).
//!
//! Scope: the ProxmoxMachine store holds every machine in the manager's
//! namespace scope, also those `--watch-filter` excludes from reconciling
//! (machine counts must be complete); only the controller's triggers are
//! filtered.
//!
//! Freshness: each store is filled by the same stream that wakes the
//! machine, before the wake is delivered, so a reconcile woken by a change
//! sees it. An object missing from a store is read from the API server
//! (read-through): it may be newer than the watch (just created), or a
//! bootstrap Secret without the `cluster.x-k8s.io/cluster-name` label, which
//! the Secret watch does not select.
//!
//! Bootstrap Secrets are kept without their data: only which keys exist and
//! the (short) `format` value. The bootstrap data itself is read with one
//! GET when the ISO is built ([`bootstrap_value`]), so the controller does
//! not hold every machine's cloud-init in memory.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Client, ResourceExt};

use crate::api::{ProxmoxCluster, ProxmoxMachine};
use crate::capi::{CLUSTER_NAME_LABEL, Cluster, Machine};
use crate::context::Shared;
use crate::error::Error;

/// The key of a bootstrap data Secret holding the data (CAPI bootstrap
/// provider contract).
pub const BOOTSTRAP_VALUE_KEY: &str = "value";
/// The key naming the bootstrap data's format (`cloud-config`, `ignition`).
pub const BOOTSTRAP_FORMAT_KEY: &str = "format";

/// Reflector stores of the kinds a reconcile reads. Cloning is cheap (the
/// stores are shared).
#[derive(Clone)]
pub struct Stores {
    /// ProxmoxMachines (every change, including status).
    pub machines: Store<ProxmoxMachine>,
    /// CAPI Machines (owners).
    pub owners: Store<Machine>,
    /// CAPI Clusters.
    pub clusters: Store<Cluster>,
    /// ProxmoxClusters.
    pub proxmox_clusters: Store<ProxmoxCluster>,
    /// Bootstrap Secrets labelled with a cluster name, data stripped by
    /// [`strip_secret`].
    pub secrets: Store<Secret>,
    /// Set once every store holds its initial list. A store's own
    /// `wait_until_ready` wakes only its last waiter (a oneshot receiver
    /// shared by all), so concurrent reconciles wait here instead: one
    /// of them waits for the stores, the others for this cell.
    ready: Arc<tokio::sync::OnceCell<()>>,
}

impl std::fmt::Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores")
            .field("machines", &self.machines.len())
            .field("owners", &self.owners.len())
            .field("clusters", &self.clusters.len())
            .field("proxmox_clusters", &self.proxmox_clusters.len())
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

/// What a bootstrap Secret says without its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapPresence {
    /// The Secret has the data key [`BOOTSTRAP_VALUE_KEY`].
    pub has_value: bool,
    /// The [`BOOTSTRAP_FORMAT_KEY`] value, if any.
    pub format: Option<String>,
    /// `metadata.resourceVersion` (changes with the data).
    pub resource_version: Option<String>,
}

/// A bootstrap data Secret's data and format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapSecret {
    /// Key [`BOOTSTRAP_VALUE_KEY`].
    pub value: Vec<u8>,
    /// Key [`BOOTSTRAP_FORMAT_KEY`], if any.
    pub format: Option<String>,
}

/// The writers of [`Stores`]: whoever runs the watches feeds them.
pub struct Writers {
    /// ProxmoxMachines.
    pub machines: Writer<ProxmoxMachine>,
    /// CAPI Machines.
    pub owners: Writer<Machine>,
    /// CAPI Clusters.
    pub clusters: Writer<Cluster>,
    /// ProxmoxClusters.
    pub proxmox_clusters: Writer<ProxmoxCluster>,
    /// Bootstrap Secrets (apply [`strip_secret`] before writing).
    pub secrets: Writer<Secret>,
}

impl Stores {
    /// Empty stores and their writers.
    pub fn new() -> (Stores, Writers) {
        let (machines, wm) = reflector::store::<ProxmoxMachine>();
        let (owners, wo) = reflector::store::<Machine>();
        let (clusters, wc) = reflector::store::<Cluster>();
        let (proxmox_clusters, wp) = reflector::store::<ProxmoxCluster>();
        let (secrets, ws) = reflector::store::<Secret>();
        (
            Stores {
                machines,
                owners,
                clusters,
                proxmox_clusters,
                secrets,
                ready: Arc::new(tokio::sync::OnceCell::new()),
            },
            Writers {
                machines: wm,
                owners: wo,
                clusters: wc,
                proxmox_clusters: wp,
                secrets: ws,
            },
        )
    }

    /// Waits until every store holds its watch's initial list (a reconcile
    /// must not count machines from a half-filled store).
    ///
    /// # Errors
    /// [`Error::Precondition`] if a store's watch was dropped (the
    /// controller is shutting down).
    pub async fn ready(&self) -> Result<(), Error> {
        self.ready
            .get_or_try_init(|| async {
                let dropped = |_| {
                    Error::Precondition(
                        "a watch of the machine controller stopped (shutting down)".into(),
                    )
                };
                self.machines.wait_until_ready().await.map_err(dropped)?;
                self.owners.wait_until_ready().await.map_err(dropped)?;
                self.clusters.wait_until_ready().await.map_err(dropped)?;
                self.proxmox_clusters
                    .wait_until_ready()
                    .await
                    .map_err(dropped)?;
                self.secrets.wait_until_ready().await.map_err(dropped)?;
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// The ProxmoxMachines of CAPI cluster `cluster` in namespace `ns`
    /// (by the `cluster.x-k8s.io/cluster-name` label).
    pub fn cluster_machines(&self, ns: &str, cluster: &str) -> Vec<Arc<ProxmoxMachine>> {
        self.machines
            .state()
            .into_iter()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(ns)
                    && m.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster)
            })
            .collect()
    }

    /// The ProxmoxCluster of CAPI cluster `cluster` in `ns`: the one the
    /// Cluster's `infrastructureRef` names, else the one labelled with the
    /// cluster name.
    pub fn proxmox_cluster_of(&self, ns: &str, cluster: &Cluster) -> Option<Arc<ProxmoxCluster>> {
        let by_ref = cluster
            .spec
            .infrastructure_ref
            .as_ref()
            .filter(|r| r.kind == "ProxmoxCluster")
            .and_then(|r| {
                self.proxmox_clusters
                    .get(&ObjectRef::new(&r.name).within(ns))
            });
        by_ref.or_else(|| {
            let name = cluster.name_any();
            self.proxmox_clusters.state().into_iter().find(|pc| {
                pc.metadata.namespace.as_deref() == Some(ns)
                    && pc.labels().get(CLUSTER_NAME_LABEL) == Some(&name)
            })
        })
    }

    /// The ProxmoxMachines whose CAPI Machine in `ns` names `secret` as its
    /// bootstrap data (`spec.bootstrap.dataSecretName`), by the Machine's
    /// `infrastructureRef`. A machine whose Machine names no Secret yet is
    /// not among them: CAPI setting the name wakes it through the Machine
    /// watch.
    pub fn bootstrap_secret_users(&self, ns: &str, secret: &str) -> Vec<ObjectRef<ProxmoxMachine>> {
        self.owners
            .state()
            .iter()
            .filter(|m| {
                m.metadata.namespace.as_deref() == Some(ns) && m.bootstrap_secret() == Some(secret)
            })
            .filter_map(|m| m.spec.infrastructure_ref.as_ref())
            .filter(|r| r.kind == "ProxmoxMachine")
            .map(|r| ObjectRef::new(&r.name).within(ns))
            .collect()
    }
}

/// Fills the stores from their watches (what the machine controller's
/// watches do, without waking anything): for tests and tools that call the
/// reconcilers by hand. Resolves when shutdown is requested.
pub fn reflect(shared: &Shared, writers: Writers) -> impl Future<Output = ()> + Send + 'static {
    let all = shared.options.unfiltered_watcher_config();
    let machines = watcher(shared.scoped_api::<ProxmoxMachine>(), all.clone())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writers.machines)
        .map(|_| ())
        .boxed();
    let owners = watcher(shared.scoped_api::<Machine>(), all.clone())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writers.owners)
        .map(|_| ())
        .boxed();
    let clusters = watcher(shared.scoped_api::<Cluster>(), all.clone())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writers.clusters)
        .map(|_| ())
        .boxed();
    let pcs = watcher(shared.scoped_api::<ProxmoxCluster>(), all.clone())
        .default_backoff()
        .modify(strip_managed_fields)
        .reflect(writers.proxmox_clusters)
        .map(|_| ())
        .boxed();
    let secrets = watcher(
        shared.scoped_api::<Secret>(),
        all.labels(CLUSTER_NAME_LABEL),
    )
    .default_backoff()
    .modify(strip_secret)
    .reflect(writers.secrets)
    .map(|_| ())
    .boxed();
    let stop = shared.shutdown_signal();
    async move {
        let all = futures::stream::select_all([machines, owners, clusters, pcs, secrets]);
        tokio::select! {
            _ = all.for_each(|_| async {}) => {}
            _ = stop => {}
        }
    }
}

/// Drops `metadata.managedFields` before an object is stored: the
/// reconcile never reads them, and they are often larger than the rest of
/// the object.
pub fn strip_managed_fields<K: kube::Resource>(obj: &mut K) {
    obj.meta_mut().managed_fields = None;
}

/// Keeps only what the machine reconciler reads of a bootstrap Secret:
/// the keys, with empty values, and the `format` value. Applied to every
/// Secret the watch delivers, before it is stored.
pub fn strip_secret(s: &mut Secret) {
    let mut kept: BTreeMap<String, ByteString> = BTreeMap::new();
    let data = s.data.take().unwrap_or_default();
    let string_data = s.string_data.take().unwrap_or_default();
    for (k, v) in data {
        let v = if k == BOOTSTRAP_FORMAT_KEY {
            v
        } else {
            ByteString(Vec::new())
        };
        kept.insert(k, v);
    }
    for (k, v) in string_data {
        let v = if k == BOOTSTRAP_FORMAT_KEY {
            ByteString(v.into_bytes())
        } else {
            ByteString(Vec::new())
        };
        kept.entry(k).or_insert(v);
    }
    s.data = Some(kept);
    s.metadata.managed_fields = None;
    s.metadata.annotations = None;
}

/// Reads key `k` of a Secret from `data`, else from `stringData`.
pub fn secret_key(s: &Secret, k: &str) -> Option<Vec<u8>> {
    s.data
        .as_ref()
        .and_then(|d| d.get(k))
        .map(|b| b.0.clone())
        .or_else(|| {
            s.string_data
                .as_ref()
                .and_then(|d| d.get(k))
                .map(|v| v.clone().into_bytes())
        })
}

/// Whether bootstrap Secret `name` in `ns` has data, and its format: from
/// the store, else one GET (`None`: the Secret does not exist).
///
/// # Errors
/// [`Error::Kube`] of the GET.
pub async fn bootstrap_presence(
    stores: &Stores,
    kube: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<BootstrapPresence>, Error> {
    let presence = |s: &Secret| BootstrapPresence {
        has_value: secret_key(s, BOOTSTRAP_VALUE_KEY).is_some(),
        format: secret_key(s, BOOTSTRAP_FORMAT_KEY)
            .map(|f| String::from_utf8_lossy(&f).into_owned()),
        resource_version: s.metadata.resource_version.clone(),
    };
    if let Some(s) = stores.secrets.get(&ObjectRef::new(name).within(ns)) {
        return Ok(Some(presence(&s)));
    }
    Ok(Api::<Secret>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await?
        .map(|s| presence(&s)))
}

/// The bootstrap data (key [`BOOTSTRAP_VALUE_KEY`]) and its format of
/// Secret `name` in `ns`: always one GET (stores hold no data). `None`: no
/// Secret or no key.
///
/// # Errors
/// [`Error::Kube`] of the GET.
pub async fn bootstrap_value(
    kube: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<BootstrapSecret>, Error> {
    Ok(Api::<Secret>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await?
        .and_then(|s| {
            Some(BootstrapSecret {
                value: secret_key(&s, BOOTSTRAP_VALUE_KEY)?,
                format: secret_key(&s, BOOTSTRAP_FORMAT_KEY)
                    .map(|f| String::from_utf8_lossy(&f).into_owned()),
            })
        }))
}

/// Object `name` in `ns` from `store` (shared, not copied), else one GET
/// (it may be newer than the watch).
///
/// # Errors
/// [`Error::Kube`] of the GET.
pub async fn read_through<K>(
    store: &Store<K>,
    kube: &Client,
    ns: &str,
    name: &str,
) -> Result<Option<Arc<K>>, Error>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    if let Some(found) = store.get(&ObjectRef::new(name).within(ns)) {
        return Ok(Some(found));
    }
    Ok(Api::<K>::namespaced(kube.clone(), ns)
        .get_opt(name)
        .await?
        .map(Arc::new))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripped_secrets_keep_keys_and_format_only() {
        let mut s = Secret {
            data: Some(BTreeMap::from([
                ("value".to_string(), ByteString(b"#cloud-config\n".to_vec())),
                ("format".to_string(), ByteString(b"cloud-config".to_vec())),
            ])),
            string_data: Some(BTreeMap::from([(
                "extra".to_string(),
                "secret text".to_string(),
            )])),
            ..Secret::default()
        };
        strip_secret(&mut s);
        assert_eq!(secret_key(&s, "value"), Some(Vec::new()));
        assert_eq!(secret_key(&s, "format"), Some(b"cloud-config".to_vec()));
        assert_eq!(secret_key(&s, "extra"), Some(Vec::new()));
        assert_eq!(s.string_data, None);
    }

    #[test]
    fn a_secret_without_value_stays_without_value() {
        let mut s = Secret {
            string_data: Some(BTreeMap::from([(
                "format".to_string(),
                "ignition".to_string(),
            )])),
            ..Secret::default()
        };
        strip_secret(&mut s);
        assert_eq!(secret_key(&s, "value"), None);
        assert_eq!(secret_key(&s, "format"), Some(b"ignition".to_vec()));
    }
}
