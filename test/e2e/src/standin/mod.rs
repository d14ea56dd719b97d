//! The CAPI-core stand-in: minimal controllers that do, for our objects,
//! what CAPI core, the kubeadm bootstrap and control-plane providers and the
//! in-cluster IPAM provider do (the CAPI infrastructure provider contract for
//! InfraMachine, templates and what core CAPI does around them, and the CAPI
//! IPAM contract) — nothing provider-specific, and against ANY API server
//! reached through a `kube::Client` (kube-sim in the suite).
//!
//! | module | stands in for |
//! |---|---|
//! | [`cluster`] | CAPI's Cluster controller (owner refs, endpoint, failure domains, deletion order) |
//! | [`machine`] | CAPI's Machine controller (re-parenting, providerID, nodeRef, deletion order) |
//! | [`machineset`] | CAPI's MachineSet controller (cloning templates, scale up/down) |
//! | [`machinedeployment`] | CAPI's MachineDeployment controller (one MachineSet per template) |
//! | [`kcp`] | KubeadmControlPlane (spreading over failure domains, one machine at a time; rolling update with surge when its infrastructure template changes) |
//! | [`bootstrap`] | CABPK (bootstrap data Secrets; workers wait for the control plane) |
//! | [`ipam`] | the in-cluster IPAM provider (claims, addresses, pools) |
//! | [`node`] | kubelets: a Node per booted VM of the Proxmox simulator |
//! | [`workload`] | the workload cluster's Node registry |
//! | [`topology`] | CAPI's topology controller (ClusterClass: InfraCluster, control plane and MachineDeployments from the class's patched templates; template rotation) |
//!
//! Where the stand-in is knowingly simpler than the real controllers, the
//! module header of each says so.

pub mod bootstrap;
pub mod cache;
pub mod clone;
pub mod cluster;
pub mod ip_addresses;
pub mod ipam;
pub mod kcp;
pub mod kinds;
pub mod machine;
pub mod machinedeployment;
pub mod machineset;
pub mod meta;
pub mod names;
pub mod node;
pub mod topology;
pub mod workload;

use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use kube::runtime::controller::Action;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::error::{E2eError, Result};
use kinds::Kinds;
use names::NameGen;
use workload::WorkloadNodes;

/// How the stand-in runs.
#[derive(Clone, Debug)]
pub struct StandInOptions {
    /// Watch only this namespace (`None`: all namespaces).
    pub namespace: Option<String>,
    /// Seed of generated names (`<set>-<5 random characters>`).
    pub seed: u64,
    /// Every controller re-reconciles all its objects this often, besides
    /// reacting to watch events (a safety net for kinds it cannot watch, e.g.
    /// an InfraMachine kind it has not seen yet).
    pub resync: Duration,
    /// Delay before retrying a reconcile that failed (e.g. a 409 after a
    /// concurrent write).
    pub retry: Duration,
    /// The InfraCluster and InfraMachine kinds to watch, `(group, kind)`
    /// (default: ProxmoxCluster and ProxmoxMachine). Their CRDs must be
    /// installed before [`StandIn::start`]. Kinds ending in `Machine` are
    /// InfraMachines (Machine controller), the others InfraClusters (Cluster
    /// controller), as the contract names them.
    pub infra_kinds: Vec<(String, String)>,
}

impl Default for StandInOptions {
    fn default() -> Self {
        StandInOptions {
            namespace: None,
            seed: 1,
            resync: Duration::from_secs(2),
            retry: Duration::from_millis(200),
            infra_kinds: vec![
                (
                    crate::crds::INFRASTRUCTURE_GROUP.into(),
                    "ProxmoxCluster".into(),
                ),
                (
                    crate::crds::INFRASTRUCTURE_GROUP.into(),
                    "ProxmoxMachine".into(),
                ),
            ],
        }
    }
}

/// What every stand-in controller shares.
pub struct Ctx {
    /// The API server.
    pub client: kube::Client,
    /// Kind → API resource (CRD lookups, cached).
    pub kinds: Kinds,
    /// The workload cluster's Nodes.
    pub nodes: Arc<WorkloadNodes>,
    /// Generated names.
    pub names: NameGen,
    /// What the controllers' watches delivered (read instead of GETs).
    pub seen: cache::Caches,
    /// Options.
    pub opts: StandInOptions,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Ctx {
    /// The API of `K` over the watched scope (one namespace or all).
    pub fn scoped<K>(&self) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        match &self.opts.namespace {
            Some(ns) => Api::namespaced(self.client.clone(), ns),
            None => Api::all(self.client.clone()),
        }
    }

    /// The API of `K` in `namespace`.
    pub fn api<K>(&self, namespace: &str) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), namespace)
    }

    /// `Action` after a failed reconcile.
    pub fn retry(&self) -> Action {
        Action::requeue(self.opts.retry)
    }

    /// `Action` for a wait on something the stand-in may not get an event for.
    pub fn poll(&self) -> Action {
        Action::requeue(self.opts.retry)
    }

    /// `Action` when nothing is pending.
    pub fn idle(&self) -> Action {
        Action::requeue(self.opts.resync)
    }

    /// The ApiResources of the configured infra kinds that are installed.
    async fn infra_resources(&self) -> Vec<kube::api::ApiResource> {
        let mut out = Vec::new();
        for (group, kind) in &self.opts.infra_kinds {
            match self.kinds.resolve(group, kind).await {
                Ok(ar) => out.push(ar),
                Err(e) => tracing::warn!(%group, %kind, error = %e, "infra kind not watched"),
            }
        }
        out
    }
}

/// A stream that yields every `period` (for `reconcile_all_on`).
pub fn ticker(period: Duration) -> impl Stream<Item = ()> + Send + 'static {
    futures::stream::unfold((), move |()| async move {
        tokio::time::sleep(period).await;
        Some(((), ()))
    })
}

/// Logs a reconcile failure and asks for a retry.
pub fn error_policy<K: Resource>(obj: Arc<K>, error: &E2eError, ctx: Arc<Ctx>) -> Action {
    if error.is_conflict() {
        tracing::debug!(name = ?obj.meta().name, "conflict, retrying");
    } else {
        tracing::warn!(name = ?obj.meta().name, error = %error, "stand-in reconcile failed");
    }
    ctx.retry()
}

/// The running stand-in: one task per controller.
pub struct StandIn {
    ctx: Arc<Ctx>,
    tasks: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for StandIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StandIn")
            .field("controllers", &self.tasks.len())
            .finish()
    }
}

impl StandIn {
    /// Starts every controller (Cluster, Machine, MachineSet,
    /// MachineDeployment, topology, KubeadmControlPlane, KubeadmConfig, IPAM claims and
    /// pools). The CAPI CRDs ([`crate::crds`]) and the infra kinds must be
    /// installed. Nodes are kept in `nodes`.
    ///
    /// # Errors
    /// None today; reserved for start-up checks.
    pub async fn start(
        client: kube::Client,
        nodes: Arc<WorkloadNodes>,
        opts: StandInOptions,
    ) -> Result<StandIn> {
        let ctx = Arc::new(Ctx {
            kinds: Kinds::new(client.clone()),
            client,
            nodes,
            names: NameGen::new(opts.seed),
            seen: cache::Caches::default(),
            opts,
        });
        // The contract names InfraMachine kinds `<Provider>Machine` and
        // InfraCluster kinds `<Provider>Cluster`: each controller watches the
        // kind it reads (a watch it ignores still costs the server).
        let (infra_machines, infra_clusters): (Vec<_>, Vec<_>) = ctx
            .infra_resources()
            .await
            .into_iter()
            .partition(|ar| ar.kind.ends_with("Machine"));
        let tasks = vec![
            tokio::spawn(cluster::run(ctx.clone(), infra_clusters)),
            tokio::spawn(machine::run(ctx.clone(), infra_machines)),
            tokio::spawn(machineset::run(ctx.clone())),
            tokio::spawn(machinedeployment::run(ctx.clone())),
            tokio::spawn(topology::run(ctx.clone())),
            tokio::spawn(kcp::run(ctx.clone())),
            tokio::spawn(bootstrap::run(ctx.clone())),
            tokio::spawn(ipam::run_claims(ctx.clone())),
            tokio::spawn(ipam::run_pools(ctx.clone())),
        ];
        Ok(StandIn { ctx, tasks })
    }

    /// The shared context (client, kinds, nodes).
    pub fn ctx(&self) -> Arc<Ctx> {
        self.ctx.clone()
    }

    /// Stops every controller.
    pub async fn shutdown(mut self) {
        let tasks = std::mem::take(&mut self.tasks);
        for t in &tasks {
            t.abort();
        }
        for t in tasks {
            let _ = t.await;
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
