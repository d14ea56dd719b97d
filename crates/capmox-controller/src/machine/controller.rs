//! The kube-runtime controller for ProxmoxMachines: what wakes a machine.
//!
//! Watches ProxmoxMachines, their owner Machines (bootstrap data, failure
//! domain), the CAPI Clusters (infrastructure provisioned, pause), the
//! ProxmoxClusters (instance health, IP pools), the IP address claims they
//! own, and bootstrap Secrets; each watch fills its store before it wakes a
//! machine, so a reconcile woken by a change reads it. Which changes wake a
//! machine is [`super::triggers`]'. Machines whose task a node's task list
//! showed ended, or whose clone slot freed, are woken by the runtime.

use std::future::Future;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};

use super::context::Context;
use super::reconcile::{error_policy, reconcile};
use super::triggers;
use crate::api::{ProxmoxCluster, ProxmoxMachine};
use crate::capi::ipam::IPAddressClaim;
use crate::capi::{CLUSTER_NAME_LABEL, Cluster, Machine};
use crate::stores::{self, Stores, Writers};
use crate::watch_filter;

/// The controller; runs until the shared shutdown signal fires. `writers`
/// are the writers of `ctx.stores`: this controller's watches fill them.
pub fn run(ctx: Arc<Context>, writers: Writers) -> impl Future<Output = ()> {
    let shared = ctx.shared.clone();
    let options = shared.options.clone();
    let all = options.unfiltered_watcher_config();
    let stores = ctx.stores.clone();
    // Every machine in scope is stored (counts must be complete); only the
    // ones `--watch-filter` selects are reconciled.
    let filter = options.clone();
    let (runtime, stored) = (ctx.runtime.clone(), stores.machines.clone());
    let machine_events = watcher(shared.scoped_api::<ProxmoxMachine>(), all.clone())
        .default_backoff()
        .modify(stores::strip_managed_fields)
        .reflect(writers.machines)
        .inspect_ok(move |event| {
            // Our own status writes wake nobody (the trigger filter below
            // looks at metadata only), so the record of the last write
            // learns here that the store caught up with it.
            if let watcher::Event::Apply(m) = event
                && let (Some(uid), Some(m)) = (m.uid(), stored.get(&ObjectRef::from_obj(m)))
            {
                runtime.seen(&uid, &m);
            }
        });
    let triggers_stream = watch_filter::changed(
        machine_events,
        watch_filter::metadata_hash::<ProxmoxMachine>,
    )
    .filter(move |m| {
        let keep = m
            .as_ref()
            .map_or(true, |m| filter.passes_filter(m.labels()));
        async move { keep }
    });
    let controller = Controller::for_stream(triggers_stream, stores.machines.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(options.concurrency));
    let owners = watch_filter::changed(
        watcher(shared.scoped_api::<Machine>(), all.clone())
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(writers.owners),
        watch_filter::metadata_hash::<Machine>,
    );
    let clusters = watch_filter::changed(
        watcher(shared.scoped_api::<Cluster>(), all.clone())
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(writers.clusters),
        triggers::cluster_hash,
    );
    let proxmox_clusters = watch_filter::changed(
        watcher(shared.scoped_api::<ProxmoxCluster>(), all.clone())
            .default_backoff()
            .modify(stores::strip_managed_fields)
            .reflect(writers.proxmox_clusters),
        triggers::proxmox_cluster_hash,
    );
    // Bootstrap Secrets: stored without their data (see `stores`).
    let secrets = watcher(
        shared.scoped_api::<Secret>(),
        all.clone().labels(CLUSTER_NAME_LABEL),
    )
    .default_backoff()
    .modify(stores::strip_secret)
    .reflect(writers.secrets)
    .touched_objects();
    let ledger_ctx = ctx.clone();
    let wakes = ctx.runtime.take_wakes().map(|rx| {
        futures::stream::unfold(rx, move |mut rx| {
            let ctx = ledger_ctx.clone();
            async move {
                let m = rx.recv().await?;
                // The wait the machine's last reconcile ended on is over.
                let key = format!("{}/{}", m.namespace.as_deref().unwrap_or_default(), m.name);
                ctx.runtime.ledger.woken(&key, tokio::time::Instant::now());
                Some((m, rx))
            }
        })
    });
    let controller = match wakes {
        Some(w) => controller.reconcile_on(w),
        None => controller,
    };
    let (st_cluster, st_pc, st_secret) = (stores.clone(), stores.clone(), stores.clone());
    controller
        .owns(shared.scoped_api::<IPAddressClaim>(), all)
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
            wake(&st_cluster, c.namespace(), Some(&c.name_any()), |_| true)
        })
        .watches_stream(proxmox_clusters, move |pc: ProxmoxCluster| {
            // Instance health and IP pools unblock waiting machines.
            wake(
                &st_pc,
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
            st_secret
                .bootstrap_secret_users(&ns, &s.name_any())
                .into_iter()
                .filter(|r| {
                    st_secret
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
