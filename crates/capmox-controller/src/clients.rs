//! The client map: one Proxmox client per (ProxmoxCluster, instance), built
//! from the instance's credentials Secret, cached, and rebuilt when the
//! Secret changes (its `uid`/`resourceVersion`) or the instance points at
//! another Secret.
//!
//! - Credentials come from the instance's `credentialsRef` (namespace
//!   defaults to the ProxmoxCluster's), or — only for the implicit instance of
//!   legacy `Default` mode without `spec.credentialsRef` — from the
//!   manager-level default Secret (`--default-credentials-secret`). A
//!   cluster's own reference always wins.
//! - Secrets are read from the manager's Secret store (a reflector fed by the
//!   same watch that maps Secret changes to clusters, so a rotation is in the
//!   store before the affected clusters reconcile), falling back to a GET
//!   when the store does not have the Secret (yet).
//! - Every client reports its calls to the metrics observer.
//! - Identity: what makes two instances the same Proxmox cluster (VMID
//!   reservations and clone limits are shared by identity): the cluster name
//!   from `GET /cluster/status` (entry `type=cluster`), else (standalone node,
//!   or not reachable yet) the URL origin. Learned once per origin.
//!
//! Invariant: nothing here logs or returns a credential value; errors name
//! the Secret and the key.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use pve_client::{CallObserver, ClientConfig, PveClient, PveError};

use crate::api::ProxmoxCluster;
use crate::credentials;
use crate::error::Error;
use crate::instances::effective_instance;
use crate::pve::{ClusterStatusEntry, ProxmoxApi};

/// Builds the API of one instance from its configuration (production:
/// [`PveClient::new`] with the metrics observer; tests may return fakes).
pub type ClientFactory =
    Arc<dyn Fn(ClientConfig) -> Result<Arc<dyn ProxmoxApi>, PveError> + Send + Sync>;

/// What makes two instances the same Proxmox cluster: `cluster:<name>`
/// from `GET /cluster/status`, else the URL origin (see the module docs).
/// VMID reservations, clone slots and caches are keyed by it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Identity(String);

impl Identity {
    /// An identity from its text.
    pub fn new(s: impl Into<String>) -> Identity {
        Identity(s.into())
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl PartialEq<&str> for Identity {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// An instance of one ProxmoxCluster: the key of the client cache.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ClientKey {
    namespace: String,
    cluster: String,
    instance: String,
}

/// One instance's client, as handed to reconcilers.
#[derive(Clone)]
pub struct Instance {
    /// Instance name (= failure-domain name).
    pub name: String,
    /// The Proxmox API of this instance.
    pub api: Arc<dyn ProxmoxApi>,
    /// The Proxmox cluster's identity: its cluster name, or the URL origin
    /// (see the module docs).
    pub identity: Identity,
}

impl std::fmt::Debug for Instance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Instance")
            .field("name", &self.name)
            .field("origin", &self.api.origin())
            .field("identity", &self.identity)
            .finish()
    }
}

/// How the map builds clients.
#[derive(Clone)]
pub struct ClientMapConfig {
    /// Per-call timeout of every client.
    pub call_timeout: Duration,
    /// Timeout of the one `GET /cluster/status` that learns a new origin's identity.
    pub identity_timeout: Duration,
    /// Manager-level default credentials Secret `(namespace, name)`, used only
    /// by the implicit instance of a cluster without `spec.credentialsRef`.
    pub default_credentials: Option<(String, String)>,
    /// Call observer attached to every client built by the default factory.
    pub observer: Option<Arc<dyn CallObserver>>,
    /// Replaces the default factory (tests).
    pub factory: Option<ClientFactory>,
}

impl Default for ClientMapConfig {
    fn default() -> Self {
        ClientMapConfig {
            call_timeout: pve_client::config::DEFAULT_TIMEOUT,
            identity_timeout: Duration::from_secs(10),
            default_credentials: None,
            observer: None,
            factory: None,
        }
    }
}

struct Entry {
    secret: (String, String),
    version: String,
    instance: Instance,
    identity_known: bool,
}

struct Inner {
    entries: Mutex<HashMap<ClientKey, Entry>>,
    identities: Mutex<HashMap<String, Identity>>,
    secrets: RwLock<Option<Store<Secret>>>,
    factory: ClientFactory,
    call_timeout: Duration,
    identity_timeout: Duration,
    default_credentials: Option<(String, String)>,
}

/// The per-(cluster, instance) client cache. Cheap to clone (shared state).
#[derive(Clone)]
pub struct ClientMap {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for ClientMap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientMap")
            .field("clients", &self.len())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The identity of a Proxmox cluster from its `/cluster/status`: the cluster
/// name (entry `type=cluster`), else the URL origin (a standalone node).
pub fn identity_from_status(origin: &str, status: &[ClusterStatusEntry]) -> Identity {
    Identity(
        status
            .iter()
            .find(|e| e.kind == "cluster" && !e.name.is_empty())
            .map_or_else(|| origin.to_string(), |e| format!("cluster:{}", e.name)),
    )
}

impl ClientMap {
    /// An empty map.
    pub fn new(config: ClientMapConfig) -> ClientMap {
        let observer = config.observer.clone();
        let factory = config.factory.clone().unwrap_or_else(|| {
            Arc::new(move |cfg: ClientConfig| {
                let client = PveClient::new(cfg)?;
                let client = match &observer {
                    Some(o) => client.with_observer(o.clone()),
                    None => client,
                };
                Ok(Arc::new(client) as Arc<dyn ProxmoxApi>)
            })
        });
        ClientMap {
            inner: Arc::new(Inner {
                entries: Mutex::new(HashMap::new()),
                identities: Mutex::new(HashMap::new()),
                secrets: RwLock::new(None),
                factory,
                call_timeout: config.call_timeout,
                identity_timeout: config.identity_timeout,
                default_credentials: config.default_credentials,
            }),
        }
    }

    /// Reads Secrets from `store` from now on (GET only when it lacks one).
    pub fn set_secret_store(&self, store: Store<Secret>) {
        *self
            .inner
            .secrets
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(store);
    }

    /// Number of cached clients.
    pub fn len(&self) -> usize {
        lock(&self.inner.entries).len()
    }

    /// Whether no client is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The manager-level default credentials Secret, if configured.
    pub fn default_credentials(&self) -> Option<(String, String)> {
        self.inner.default_credentials.clone()
    }

    /// The credentials Secret `(namespace, name)` of `instance` of `cluster`.
    ///
    /// # Errors
    /// [`Error::Precondition`] when the cluster has no such instance;
    /// [`Error::Credentials`] when neither the cluster nor the manager names
    /// credentials.
    pub fn credentials_secret(
        &self,
        cluster: &ProxmoxCluster,
        instance: &str,
    ) -> Result<(String, String), Error> {
        let ns = cluster.namespace().unwrap_or_default();
        let eff = effective_instance(&cluster.spec, instance).ok_or_else(|| {
            Error::Precondition(format!(
                "instance {instance} is not an instance of ProxmoxCluster {ns}/{}",
                cluster.name_any()
            ))
        })?;
        if eff.manager_credentials {
            return self.inner.default_credentials.clone().ok_or_else(|| Error::Credentials {
                instance: instance.to_string(),
                message: "no credentials: set spec.credentialsRef (or start the manager with --default-credentials-secret)".to_string(),
            });
        }
        let r = &eff.spec.credentials_ref;
        Ok((r.namespace.clone().unwrap_or(ns), r.name.clone()))
    }

    async fn fetch_secret(
        &self,
        kube: &kube::Client,
        instance: &str,
        (ns, name): &(String, String),
    ) -> Result<Secret, Error> {
        let cached = self
            .inner
            .secrets
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .and_then(|s| s.get(&ObjectRef::new(name).within(ns)));
        if let Some(s) = cached {
            return Ok((*s).clone());
        }
        let api: kube::Api<Secret> = kube::Api::namespaced(kube.clone(), ns);
        match api.get_opt(name).await {
            Ok(Some(s)) => Ok(s),
            Ok(None) => Err(Error::Credentials {
                instance: instance.to_string(),
                message: format!("Secret {ns}/{name} not found"),
            }),
            Err(kube::Error::Api(s)) if s.code == 403 => Err(Error::Credentials {
                instance: instance.to_string(),
                message: format!(
                    "the manager may not read Secret {ns}/{name} (403 Forbidden); check its RBAC"
                ),
            }),
            Err(e) => Err(Error::Kube(e)),
        }
    }

    /// The client of `instance` of `cluster`, built from the current
    /// credentials Secret (cached while the Secret is unchanged).
    ///
    /// # Errors
    /// [`Error::Credentials`] for a missing Secret, a missing or malformed key
    /// or an unusable TLS configuration (naming the Secret and the key);
    /// [`Error::Precondition`] for an unknown instance; [`Error::Kube`] when
    /// the Secret cannot be read for another reason.
    pub async fn get(
        &self,
        kube: &kube::Client,
        cluster: &ProxmoxCluster,
        instance: &str,
    ) -> Result<Instance, Error> {
        let secret_ref = self.credentials_secret(cluster, instance)?;
        let key = ClientKey {
            namespace: cluster.namespace().unwrap_or_default(),
            cluster: cluster.name_any(),
            instance: instance.to_string(),
        };
        let secret = self.fetch_secret(kube, instance, &secret_ref).await?;
        let version = format!(
            "{}/{}",
            secret.uid().unwrap_or_default(),
            secret.resource_version().unwrap_or_default()
        );
        {
            let mut entries = lock(&self.inner.entries);
            if let Some(e) = entries.get_mut(&key)
                && e.secret == secret_ref
                && e.version == version
            {
                if !e.identity_known
                    && let Some(id) = lock(&self.inner.identities).get(e.instance.api.origin())
                {
                    e.instance.identity.clone_from(id);
                    e.identity_known = true;
                }
                return Ok(e.instance.clone());
            }
        }
        let config =
            credentials::client_config(instance, &secret)?.with_timeout(self.inner.call_timeout);
        let api = (self.inner.factory)(config).map_err(|e| Error::Credentials {
            instance: instance.to_string(),
            message: format!(
                "Secret {}/{}: {}",
                secret_ref.0,
                secret_ref.1,
                config_message(&e)
            ),
        })?;
        let (identity, identity_known) = self.resolve_identity(api.as_ref()).await;
        let inst = Instance {
            name: instance.to_string(),
            api,
            identity,
        };
        tracing::debug!(
            instance = %instance,
            origin = %inst.api.origin(),
            identity = %inst.identity,
            secret = %format!("{}/{}", secret_ref.0, secret_ref.1),
            "built Proxmox client"
        );
        lock(&self.inner.entries).insert(
            key,
            Entry {
                secret: secret_ref,
                version,
                instance: inst.clone(),
                identity_known,
            },
        );
        Ok(inst)
    }

    async fn resolve_identity(&self, api: &dyn ProxmoxApi) -> (Identity, bool) {
        let origin = api.origin().to_string();
        if let Some(id) = lock(&self.inner.identities).get(&origin) {
            return (id.clone(), true);
        }
        match tokio::time::timeout(self.inner.identity_timeout, api.cluster_status()).await {
            Ok(Ok(status)) => {
                let id = identity_from_status(&origin, &status);
                self.learn_identity(&origin, &id);
                (id, true)
            }
            _ => (Identity(origin), false),
        }
    }

    /// Records the identity of `origin` (the cluster reconciler calls this
    /// after each successful `/cluster/status` probe), so clients built while
    /// the instance was unreachable learn it.
    pub fn learn_identity(&self, origin: &str, identity: &Identity) {
        lock(&self.inner.identities).insert(origin.to_string(), identity.clone());
    }

    /// Drops every client of the ProxmoxCluster `namespace/name` (after deletion).
    pub fn forget_cluster(&self, namespace: &str, name: &str) {
        lock(&self.inner.entries).retain(|k, _| !(k.namespace == namespace && k.cluster == name));
    }
}

/// The message of a client-construction error without the instance prefix
/// (the condition names the instance already).
fn config_message(e: &PveError) -> String {
    match e {
        PveError::InvalidConfig { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use k8s_openapi::ByteString;

    use super::*;
    use crate::api::{ClusterMode, ClusterSettings, InstanceSpec, ProxmoxClusterSpec, SecretRef};

    fn cluster(instances: Vec<InstanceSpec>, credentials_ref: Option<SecretRef>) -> ProxmoxCluster {
        let mut c = ProxmoxCluster::new(
            "wl1",
            ProxmoxClusterSpec {
                credentials_ref,
                settings: Some(ClusterSettings {
                    mode: Some(ClusterMode::MultiInstance),
                    instances,
                }),
                ..ProxmoxClusterSpec::default()
            },
        );
        c.metadata.namespace = Some("ns1".into());
        c
    }

    fn inst(name: &str, secret: &str, ns: Option<&str>) -> InstanceSpec {
        InstanceSpec {
            name: name.into(),
            credentials_ref: SecretRef {
                name: secret.into(),
                namespace: ns.map(str::to_string),
            },
            ..InstanceSpec::default()
        }
    }

    #[test]
    fn credentials_secret_resolution() {
        let map = ClientMap::new(ClientMapConfig {
            default_credentials: Some((
                "capmox-system".into(),
                "capmox-default-credentials".into(),
            )),
            ..ClientMapConfig::default()
        });
        let c = cluster(
            vec![
                inst("dc-a", "a-creds", None),
                inst("dc-b", "b-creds", Some("shared")),
            ],
            Some(SecretRef {
                name: "ignored".into(),
                namespace: None,
            }),
        );
        assert_eq!(
            map.credentials_secret(&c, "dc-a").unwrap(),
            ("ns1".to_string(), "a-creds".to_string())
        );
        assert_eq!(
            map.credentials_secret(&c, "dc-b").unwrap(),
            ("shared".to_string(), "b-creds".to_string())
        );
        assert_eq!(
            map.credentials_secret(&c, "dc-x").unwrap_err().to_string(),
            "instance dc-x is not an instance of ProxmoxCluster ns1/wl1"
        );
        // Legacy Default mode: the cluster's own reference wins over the manager default.
        let mut legacy = ProxmoxCluster::new(
            "old",
            ProxmoxClusterSpec {
                credentials_ref: Some(SecretRef {
                    name: "own".into(),
                    namespace: None,
                }),
                ..ProxmoxClusterSpec::default()
            },
        );
        legacy.metadata.namespace = Some("ns1".into());
        assert_eq!(
            map.credentials_secret(&legacy, "default").unwrap(),
            ("ns1".to_string(), "own".to_string())
        );
        legacy.spec.credentials_ref = None;
        assert_eq!(
            map.credentials_secret(&legacy, "default").unwrap(),
            (
                "capmox-system".to_string(),
                "capmox-default-credentials".to_string()
            )
        );
        let bare = ClientMap::new(ClientMapConfig::default());
        assert!(
            bare.credentials_secret(&legacy, "default")
                .unwrap_err()
                .to_string()
                .contains("no credentials: set spec.credentialsRef")
        );
    }

    #[test]
    fn identity_prefers_cluster_name() {
        let entry = |kind: &str, name: &str| ClusterStatusEntry {
            id: kind.into(),
            name: name.into(),
            kind: kind.into(),
            ip: None,
            online: true,
            local: false,
            nodeid: None,
            quorate: true,
            nodes: None,
        };
        assert_eq!(
            identity_from_status(
                "https://10.0.0.5:8006",
                &[entry("node", "pve1"), entry("cluster", "dc-a")]
            ),
            "cluster:dc-a"
        );
        assert_eq!(
            identity_from_status("https://10.0.0.5:8006", &[entry("node", "pve1")]),
            "https://10.0.0.5:8006"
        );
    }

    /// Clients are cached per Secret version and rebuilt when it changes;
    /// exercised through the store path so no API server is needed.
    #[tokio::test]
    async fn cache_rebuilds_on_secret_change() {
        let built = Arc::new(AtomicUsize::new(0));
        let counter = built.clone();
        let map = ClientMap::new(ClientMapConfig {
            identity_timeout: Duration::from_millis(50),
            factory: Some(Arc::new(move |cfg: ClientConfig| {
                counter.fetch_add(1, Ordering::SeqCst);
                // A real client to an address nothing listens on: the identity
                // probe fails fast and the origin is used.
                Ok(Arc::new(PveClient::new(cfg)?) as Arc<dyn ProxmoxApi>)
            })),
            ..ClientMapConfig::default()
        });
        let (store, mut writer) = kube::runtime::reflector::store::<Secret>();
        map.set_secret_store(store);
        let secret = |rv: &str, url: &str| Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("a-creds".into()),
                namespace: Some("ns1".into()),
                uid: Some("u1".into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([
                ("url".to_string(), ByteString(url.as_bytes().to_vec())),
                ("token".to_string(), ByteString(b"capmox@pve!capi".to_vec())),
                ("secret".to_string(), ByteString(b"s3cr3t-value".to_vec())),
            ])),
            ..Secret::default()
        };
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(secret(
            "1",
            "https://127.0.0.1:9",
        )));
        let c = cluster(vec![inst("dc-a", "a-creds", None)], None);
        // `kube::Client` is never used on the store path; build one that points nowhere.
        let kube =
            kube::Client::try_from(kube::Config::new("https://127.0.0.1:9".parse().unwrap()))
                .unwrap();
        let _ = rustls::crypto::ring::default_provider().install_default();
        let a = map.get(&kube, &c, "dc-a").await.unwrap();
        assert_eq!(a.identity, "https://127.0.0.1:9");
        let again = map.get(&kube, &c, "dc-a").await.unwrap();
        assert!(Arc::ptr_eq(&a.api, &again.api));
        assert_eq!(built.load(Ordering::SeqCst), 1);
        // Rotation: new resourceVersion → new client.
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(secret(
            "2",
            "https://127.0.0.1:10",
        )));
        let rotated = map.get(&kube, &c, "dc-a").await.unwrap();
        assert_eq!(rotated.api.origin(), "https://127.0.0.1:10");
        assert_eq!(built.load(Ordering::SeqCst), 2);
        // A learned identity reaches cached clients.
        map.learn_identity("https://127.0.0.1:10", &Identity::new("cluster:dc-a"));
        assert_eq!(
            map.get(&kube, &c, "dc-a").await.unwrap().identity,
            "cluster:dc-a"
        );
        assert_eq!(map.len(), 1);
        map.forget_cluster("ns1", "wl1");
        assert!(map.is_empty());
    }
}
