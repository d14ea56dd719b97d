//! The ProxmoxMachine reconciler: one Proxmox VM per ProxmoxMachine, in the
//! instance (Proxmox cluster) its failure domain names.
//!
//! | module | owns |
//! |---|---|
//! | [`decide`] | the pure decision core: observed facts → next step |
//! | [`reconcile`](mod@reconcile) | the executor: gathers facts, performs one step, records it |
//! | [`placement`] | which instance (pin ▸ failure domain ▸ mode policy) |
//! | [`scheduler`] | which node (allowed ∩ online, memory, spread, storage locality) |
//! | [`template`] | which template (`templateID` or tag selector policies) |
//! | [`vmid`] | VMID reservations per Proxmox cluster identity |
//! | [`marker`] | the ownership marker (tag and description line) |
//! | [`vmconfig`] | the one config write; idempotent compare |
//! | [`disks`] | grow-only resizes |
//! | [`addresses`] | guest agent interfaces → machine addresses |
//! | [`claims`] | IP address claims (CAPI IPAM contract) |
//! | [`resources`] | shared `/cluster/resources` snapshots |
//! | [`timing`] | learned task durations, when to poll |
//! | [`node_tasks`] | one task list per node answers for every task awaited there |
//! | [`runtime`] | what the controller keeps in memory between reconciles |
//! | [`freshness`] | never deciding from an object older than our own last write |
//! | [`status`] | providerID, conditions, the status write |
//! | [`stores`] | the watched objects a reconcile reads, without a request each |
//! | [`triggers`] | which watched changes wake a machine (and which do not) |
//!
//! The controller ([`controller`]) watches ProxmoxMachines, their owner
//! Machines (bootstrap data, failure domain), the CAPI Clusters
//! (infrastructure provisioned, pause), the ProxmoxClusters (instance
//! health, IP pools), the IP address claims they own, and bootstrap Secrets.

pub mod addresses;
pub mod claims;
pub mod decide;
pub mod disks;
pub mod freshness;
pub mod marker;
pub mod node_tasks;
pub mod placement;
pub mod reconcile;
pub mod resources;
pub mod runtime;
pub mod scheduler;
pub mod status;
pub mod stores;
pub mod template;
pub mod timing;
pub mod triggers;
pub mod vmconfig;
pub mod vmid;

use std::future::Future;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};

pub use reconcile::{Context, error_policy, reconcile};
pub use runtime::{MachineOptions, MachineRuntime};
pub use stores::Stores;

use crate::api::{ProxmoxCluster, ProxmoxMachine};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::ipam::IPAddressClaim;
use crate::capi::{Cluster, Machine};
use crate::context::Shared;
use crate::watch_filter;

/// The kube-runtime controller for ProxmoxMachines; runs until the shared
/// shutdown signal fires. `options` tunes clone concurrency, caches and
/// timeouts (unscaled; `Shared::options.time_scale` applies).
pub fn controller(shared: Arc<Shared>, options: MachineOptions) -> impl Future<Output = ()> {
    let runtime = Arc::new(MachineRuntime::new(&shared.options, options));
    controller_with(shared, runtime)
}

/// [`controller`] around an existing runtime (tests inspect it).
pub fn controller_with(
    shared: Arc<Shared>,
    runtime: Arc<MachineRuntime>,
) -> impl Future<Output = ()> {
    let machines: Api<ProxmoxMachine> = shared.scoped_api();
    let wc = shared.options.watcher_config();
    let all = shared.options.unfiltered_watcher_config();
    // The reflector sees every change (the store stays current); the
    // reconcile is woken only by the ones it acts on (see `triggers`).
    let (store, writer) = reflector::store::<ProxmoxMachine>();
    let machine_events = watcher(machines, wc.clone())
        .default_backoff()
        .modify(stores::strip_managed_fields)
        .reflect(writer);
    let controller = Controller::for_stream(
        watch_filter::changed(
            machine_events,
            watch_filter::metadata_hash::<ProxmoxMachine>,
        ),
        store.clone(),
    )
    .with_config(
        kube::runtime::controller::Config::default().concurrency(shared.options.concurrency),
    );
    // Each store is filled by the stream that wakes machines, before the
    // wake is delivered: a reconcile woken by a change reads it.
    let (owners_store, owners_writer) = reflector::store::<Machine>();
    let (clusters_store, clusters_writer) = reflector::store::<Cluster>();
    let (pcs_store, pcs_writer) = reflector::store::<ProxmoxCluster>();
    let (secrets_store, secrets_writer) = reflector::store::<Secret>();
    let stores = Stores::new(
        store.clone(),
        owners_store,
        clusters_store,
        pcs_store,
        secrets_store,
    );
    shared.share_machine_stores(stores.clone());
    let ctx = Arc::new(Context {
        shared: shared.clone(),
        runtime,
        stores: Some(stores.clone()),
    });
    let stores_pc = stores.clone();
    let stores_secret = stores.clone();
    let stores_cluster = stores.clone();
    let owners = watch_filter::changed(
        watcher(shared.scoped_api::<Machine>(), wc.clone())
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(owners_writer),
        watch_filter::metadata_hash::<Machine>,
    );
    let clusters = watch_filter::changed(
        watcher(shared.scoped_api::<Cluster>(), wc.clone())
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(clusters_writer),
        triggers::cluster_hash,
    );
    let proxmox_clusters = watch_filter::changed(
        watcher(shared.scoped_api::<ProxmoxCluster>(), wc)
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(pcs_writer),
        triggers::proxmox_cluster_hash,
    );
    // Bootstrap Secrets: stored without their data (see `stores`).
    let secrets = watcher(
        shared.scoped_api::<Secret>(),
        all.clone().labels(CLUSTER_NAME_LABEL),
    )
    .default_backoff()
    .modify(stores::strip_secret)
    .reflect(secrets_writer)
    .touched_objects();
    // Machines whose task a node's task list showed ended before their poll.
    let wakes = ctx.runtime.take_wakes().map(|rx| {
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|m| (m, rx)) })
    });
    let controller = match wakes {
        Some(w) => controller.reconcile_on(w),
        None => controller,
    };
    controller
        .owns(shared.scoped_api::<IPAddressClaim>(), all.clone())
        .watches_stream(owners, |m: Machine| {
            let ns = m.namespace();
            m.spec
                .infrastructure_ref
                .as_ref()
                .filter(|r| r.kind == "ProxmoxMachine")
                .map(|r| {
                    let mut o = ObjectRef::<ProxmoxMachine>::new(&r.name);
                    if let Some(ns) = &ns {
                        o = o.within(ns);
                    }
                    o
                })
        })
        .watches_stream(clusters, move |c: Cluster| {
            // Infrastructure provisioned, or pause toggled.
            wake(&stores_cluster, c.namespace(), Some(&c.name_any()), |_| {
                true
            })
        })
        .watches_stream(proxmox_clusters, move |pc: ProxmoxCluster| {
            // Instance health and IP pools unblock waiting machines.
            wake(
                &stores_pc,
                pc.namespace(),
                pc.labels().get(CLUSTER_NAME_LABEL),
                |m| !provisioned(m),
            )
        })
        .watches_stream(secrets, move |s: Secret| {
            // Bootstrap data appeared or changed: only the machines whose
            // Machine names this Secret, and only while they wait for it
            // (not every waiting machine of the cluster: N new Secrets
            // would cost N² reconciles).
            let Some(ns) = s.namespace() else {
                return Vec::new();
            };
            stores_secret
                .bootstrap_secret_users(&ns, &s.name_any())
                .into_iter()
                .filter(|r| {
                    stores_secret
                        .machines
                        .get(r)
                        .is_none_or(|m| triggers::waits_for_bootstrap_data(&m))
                })
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shared.shutdown_signal())
        .run(reconcile, error_policy, ctx)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "machine controller event");
            }
        })
}

/// The machines of CAPI cluster `cluster` in `ns` that `keep` selects, to
/// reconcile after a change of a cluster-wide object (nothing without a
/// cluster name).
fn wake(
    stores: &Stores,
    ns: Option<String>,
    cluster: Option<&String>,
    keep: impl Fn(&ProxmoxMachine) -> bool,
) -> Vec<ObjectRef<ProxmoxMachine>> {
    let (Some(ns), Some(cluster)) = (ns, cluster) else {
        return Vec::new();
    };
    stores
        .cluster_machines(&ns, cluster)
        .into_iter()
        .filter(|m| keep(m))
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

fn provisioned(m: &ProxmoxMachine) -> bool {
    m.status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false)
}
