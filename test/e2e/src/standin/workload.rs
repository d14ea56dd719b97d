//! The workload cluster's Nodes, as CAPI's Machine controller sees them.
//!
//! In real CAPI the Nodes live in the *workload* cluster, reached through the
//! `<cluster>-kubeconfig` Secret; here the kubelets are simulated (see
//! [`super::node`]) and their Nodes are stored in the management API server
//! when it serves `core/v1` Node (so `kubectl get nodes` shows them), or else
//! kept in memory as the workload cluster's registry. Either way the Machine
//! controller matches `Node.spec.providerID == Machine.spec.providerID`
//! byte for byte. Every write notifies [`WorkloadNodes::changes`].

use std::collections::BTreeMap;
use std::sync::Mutex;

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::watch;

use crate::error::Result;

enum Backend {
    Api(Box<Api<Node>>),
    Memory(Mutex<BTreeMap<String, Node>>),
}

/// The registry of the workload cluster's Nodes.
pub struct WorkloadNodes {
    backend: Backend,
    tick: watch::Sender<u64>,
}

impl std::fmt::Debug for WorkloadNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadNodes")
            .field("backend", &self.backend_name())
            .finish()
    }
}

impl WorkloadNodes {
    /// Nodes stored in the API server behind `client` when it serves
    /// `core/v1` Node (a list answers), else in memory.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`] for failures other than 404.
    pub async fn detect(client: kube::Client) -> Result<WorkloadNodes> {
        let api: Api<Node> = Api::all(client);
        match api.list(&ListParams::default().limit(1)).await {
            Ok(_) => Ok(WorkloadNodes::with_backend(Backend::Api(Box::new(api)))),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(WorkloadNodes::in_memory()),
            Err(e) => Err(e.into()),
        }
    }

    /// An in-memory registry.
    pub fn in_memory() -> WorkloadNodes {
        WorkloadNodes::with_backend(Backend::Memory(Mutex::new(BTreeMap::new())))
    }

    fn with_backend(backend: Backend) -> WorkloadNodes {
        let (tick, _) = watch::channel(0);
        WorkloadNodes { backend, tick }
    }

    /// `"api"` or `"memory"`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            Backend::Api(_) => "api",
            Backend::Memory(_) => "memory",
        }
    }

    fn memory(&self) -> Option<std::sync::MutexGuard<'_, BTreeMap<String, Node>>> {
        match &self.backend {
            Backend::Memory(m) => Some(m.lock().unwrap_or_else(|p| p.into_inner())),
            Backend::Api(_) => None,
        }
    }

    fn notify(&self) {
        self.tick.send_modify(|t| *t = t.wrapping_add(1));
    }

    /// Every Node.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn list(&self) -> Result<Vec<Node>> {
        match &self.backend {
            Backend::Api(api) => Ok(api.list(&ListParams::default()).await?.items),
            Backend::Memory(_) => Ok(self
                .memory()
                .map(|m| m.values().cloned().collect())
                .unwrap_or_default()),
        }
    }

    /// A Node by name.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn get(&self, name: &str) -> Result<Option<Node>> {
        match &self.backend {
            Backend::Api(api) => Ok(api.get_opt(name).await?),
            Backend::Memory(_) => Ok(self.memory().and_then(|m| m.get(name).cloned())),
        }
    }

    /// The Node whose `spec.providerID` equals `provider_id` exactly.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn find_by_provider_id(&self, provider_id: &str) -> Result<Option<Node>> {
        Ok(self
            .list()
            .await?
            .into_iter()
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id)))
    }

    /// Registers a Node (a kubelet joining); an existing one is kept.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`] for failures other than 409.
    pub async fn create(&self, node: Node) -> Result<()> {
        let name = node.metadata.name.clone().unwrap_or_default();
        match &self.backend {
            Backend::Api(api) => match api.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 409 => {}
                Err(e) => return Err(e.into()),
            },
            Backend::Memory(_) => {
                if let Some(mut m) = self.memory() {
                    m.entry(name).or_insert(node);
                }
            }
        }
        self.notify();
        Ok(())
    }

    /// Removes a Node; a missing one counts as removed.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`] for failures other than 404.
    pub async fn delete(&self, name: &str) -> Result<()> {
        match &self.backend {
            Backend::Api(api) => super::meta::delete_ignoring_missing(api, name).await?,
            Backend::Memory(_) => {
                if let Some(mut m) = self.memory() {
                    m.remove(name);
                }
            }
        }
        self.notify();
        Ok(())
    }

    /// A stream that yields after every write through this registry
    /// (coalescing bursts), for `Controller::reconcile_all_on`.
    pub fn changes(&self) -> impl Stream<Item = ()> + Send + 'static {
        let rx = self.tick.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            Some(((), rx))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::NodeSpec;
    use kube::api::ObjectMeta;

    fn node(name: &str, provider_id: &str) -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.into()),
                ..NodeSpec::default()
            }),
            status: None,
        }
    }

    #[tokio::test]
    async fn memory_registry_matches_provider_id_exactly_and_notifies() {
        let nodes = WorkloadNodes::in_memory();
        let mut changes = Box::pin(nodes.changes());
        nodes
            .create(node("m1", "proxmox://dc-a/1000"))
            .await
            .unwrap();
        changes.next().await.unwrap();
        assert!(
            nodes
                .find_by_provider_id("proxmox://dc-a/100")
                .await
                .unwrap()
                .is_none()
        );
        let found = nodes
            .find_by_provider_id("proxmox://dc-a/1000")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found.metadata.name.as_deref(), Some("m1"));
        // A second registration under the same name keeps the first.
        nodes.create(node("m1", "proxmox://other")).await.unwrap();
        assert!(
            nodes
                .find_by_provider_id("proxmox://other")
                .await
                .unwrap()
                .is_none()
        );
        nodes.delete("m1").await.unwrap();
        nodes.delete("m1").await.unwrap();
        assert!(nodes.list().await.unwrap().is_empty());
        assert_eq!(nodes.backend_name(), "memory");
    }
}
