//! The workload cluster's Nodes, as CAPI's Machine controller sees them.
//!
//! In real CAPI the Nodes live in the *workload* cluster, reached through the
//! `<cluster>-kubeconfig` Secret; here the kubelets are simulated (see
//! [`super::node`]) and register real `core/v1` Node objects in the
//! management API server (kube-sim serves Node), so `kubectl get nodes`
//! shows them. The Machine controller matches
//! `Node.spec.providerID == Machine.spec.providerID` byte for byte. Every
//! write notifies [`WorkloadNodes::changes`] with the Node's providerID.
//!
//! The Nodes are written only through this registry (the kubelet stand-in),
//! so it keeps them in memory: the first [`WorkloadNodes::find_by_provider_id`]
//! loads them with one LIST, later writes update the copy, and lookups (one
//! per Machine reconcile) cost no request.

use std::collections::BTreeMap;

use futures::Stream;
use k8s_openapi::api::core::v1::Node;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use tokio::sync::{Mutex, broadcast};

use crate::error::Result;

/// How many Node writes a [`WorkloadNodes::changes`] stream may fall
/// behind before it reports `None` (any Machine) instead of each.
pub const CHANGES_KEPT: usize = 4096;

/// The registry of the workload cluster's Nodes: `core/v1` Nodes of the API
/// server behind a client.
pub struct WorkloadNodes {
    api: Api<Node>,
    /// The `spec.providerID` of each Node written (see [`Self::changes`]).
    written: broadcast::Sender<Option<String>>,
    /// The Nodes by name, once loaded.
    known: Mutex<Option<BTreeMap<String, Node>>>,
}

impl std::fmt::Debug for WorkloadNodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkloadNodes").finish_non_exhaustive()
    }
}

impl WorkloadNodes {
    /// The Nodes of the API server behind `client`.
    pub fn new(client: kube::Client) -> WorkloadNodes {
        let (written, _) = broadcast::channel(CHANGES_KEPT);
        WorkloadNodes {
            api: Api::all(client),
            written,
            known: Mutex::new(None),
        }
    }

    fn notify(&self, provider_id: Option<String>) {
        // No receiver yet: nobody to wake.
        let _ = self.written.send(provider_id);
    }

    /// Every Node.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn list(&self) -> Result<Vec<Node>> {
        Ok(self.api.list(&ListParams::default()).await?.items)
    }

    /// A Node by name.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn get(&self, name: &str) -> Result<Option<Node>> {
        Ok(self.api.get_opt(name).await?)
    }

    /// The Node whose `spec.providerID` equals `provider_id` exactly.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`].
    pub async fn find_by_provider_id(&self, provider_id: &str) -> Result<Option<Node>> {
        let mut known = self.known.lock().await;
        if known.is_none() {
            let all = self.list().await?;
            *known = Some(all.into_iter().map(|n| (n.name_any(), n)).collect());
        }
        Ok(known
            .as_ref()
            .into_iter()
            .flat_map(BTreeMap::values)
            .find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(provider_id))
            .cloned())
    }

    /// Registers a Node (a kubelet joining, status included); an existing
    /// one is kept.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`] for failures other than 409.
    pub async fn create(&self, node: Node) -> Result<()> {
        let provider_id = node.spec.as_ref().and_then(|s| s.provider_id.clone());
        let mut known = self.known.lock().await;
        match self.api.create(&PostParams::default(), &node).await {
            Ok(created) => {
                if let Some(k) = known.as_mut() {
                    k.insert(created.name_any(), created);
                }
            }
            Err(kube::Error::Api(s)) if s.code == 409 => {
                if let Some(k) = known.as_mut()
                    && !k.contains_key(&node.name_any())
                {
                    // Not written through this registry: load it.
                    if let Some(existing) = self.get(&node.name_any()).await? {
                        k.insert(existing.name_any(), existing);
                    }
                }
            }
            Err(e) => return Err(e.into()),
        }
        drop(known);
        self.notify(provider_id);
        Ok(())
    }

    /// Removes a Node; a missing one counts as removed.
    ///
    /// # Errors
    /// [`crate::E2eError::Kube`] for failures other than 404.
    pub async fn delete(&self, name: &str) -> Result<()> {
        let mut known = self.known.lock().await;
        super::meta::delete_ignoring_missing(&self.api, name).await?;
        let provider_id = match known.as_mut().map(|k| k.remove(name)) {
            // Not registered: nothing changed, nobody to wake (a retried
            // deletion must not wake every Machine).
            Some(None) => return Ok(()),
            Some(Some(node)) => node.spec.and_then(|s| s.provider_id),
            // Not loaded yet: which Machine it concerned is unknown.
            None => None,
        };
        drop(known);
        self.notify(provider_id);
        Ok(())
    }

    /// A stream with an item for every write through this registry from now
    /// on: the written Node's `spec.providerID`, so that only the Machine
    /// with that providerID is woken. `None` when it is not known (a Node
    /// without one, or removed before the registry loaded it; a Node the
    /// loaded registry does not hold is not reported) or when this
    /// stream fell more than [`CHANGES_KEPT`] writes behind: then any
    /// Machine may be concerned.
    pub fn changes(&self) -> impl Stream<Item = Option<String>> + Send + 'static {
        let rx = self.written.subscribe();
        futures::stream::unfold(rx, |mut rx| async move {
            match rx.recv().await {
                Ok(provider_id) => Some((provider_id, rx)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((None, rx)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::{NodeCondition, NodeSpec, NodeStatus};
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
            status: Some(NodeStatus {
                conditions: Some(vec![NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..NodeCondition::default()
                }]),
                ..NodeStatus::default()
            }),
        }
    }

    #[tokio::test]
    async fn nodes_are_api_objects_matched_by_exact_provider_id() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let sim = kube_sim::KubeSim::start(kube_sim::KubeSimOptions::default())
            .await
            .unwrap();
        let client = sim.client().await.unwrap();
        let nodes = WorkloadNodes::new(client.clone());
        let mut changes = Box::pin(nodes.changes());
        nodes
            .create(node("m1", "proxmox://dc-a/1000"))
            .await
            .unwrap();
        assert_eq!(
            changes.next().await.unwrap().as_deref(),
            Some("proxmox://dc-a/1000")
        );
        // A real Node object, status as registered.
        let stored = Api::<Node>::all(client).get("m1").await.unwrap();
        assert_eq!(
            stored.status.unwrap().conditions.unwrap()[0].type_,
            "Ready".to_string()
        );
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
        assert_eq!(
            changes.next().await.unwrap().as_deref(),
            Some("proxmox://other")
        );
        nodes.delete("m1").await.unwrap();
        // The removed Node's providerID, as it was registered.
        assert_eq!(
            changes.next().await.unwrap().as_deref(),
            Some("proxmox://dc-a/1000")
        );
        // Removing it again changes nothing and wakes nobody.
        nodes.delete("m1").await.unwrap();
        assert!(futures::FutureExt::now_or_never(changes.next()).is_none());
        assert!(nodes.list().await.unwrap().is_empty());
        assert!(nodes.get("m1").await.unwrap().is_none());
        sim.shutdown().await;
    }
}
