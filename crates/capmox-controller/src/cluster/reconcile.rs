//! The executor of the ProxmoxCluster reconciler: reads the world, asks the
//! pure core ([`super::decide`]) what should be true, and writes it.
//!
//! Order of one reconcile (CAPI contract, InfraCluster workflow):
//! 1. externally managed (`cluster.x-k8s.io/managed-by`) → skip entirely;
//! 2. owner `Cluster` (by kind and group) missing → `Ready=False
//!    WaitingForCluster`, nothing else;
//! 3. paused (Cluster `spec.paused` or the annotation) → only `Paused=True`;
//! 4. deleting → wait until no ProxmoxMachine of the cluster remains
//!    (condition says how many), release the endpoint's claim, delete the IP
//!    pools, drop the finalizer;
//! 5. finalizer added (before any Proxmox call);
//! 6. validation first: an invalid spec → `Ready=False InvalidSpec`, no
//!    Proxmox call;
//! 7. probe every instance concurrently (cached per schedule), reconcile IP
//!    pools, claim the endpoint from its pool ([`super::endpoint`]), count
//!    machines, decide, copy an externally managed endpoint, write status
//!    (server-side apply, only when changed), publish events.
//!
//! Finalizers are written with JSON merge patches carrying the
//! `resourceVersion` (a concurrent change fails with 409 and is retried),
//! not with kube-runtime's `finalizer` helper: that helper removes the
//! finalizer whenever cleanup returns `Ok`, so "wait for the machines" would
//! have to be an error; here waiting is an `Action`, as it should be.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Api, Resource, ResourceExt};
use tokio::time::Instant;
use tracing::Instrument;

use super::cache::{ProbeCache, ProbeKey, Schedule};
use super::decide::{self, Inputs, MachineCounts, instances_to_probe};
use super::probe::{self, ProbeResult, describe_error};
use super::{CONTROLLER_NAME, FINALIZER};
use super::{endpoint, pools};
use crate::api::validation::{cluster_warnings, validate_cluster};
use crate::api::{ProxmoxCluster, ProxmoxClusterStatus, ProxmoxMachine};
use crate::backoff::Backoff;
use crate::capi::core::Cluster;
use crate::capi::{CLUSTER_NAME_LABEL, is_externally_managed, is_paused, owner_of_kind};
use crate::context::{FIELD_MANAGER, Shared, cluster_selector};
use crate::error::Error;
use crate::events::{self, EventKind};
use crate::reasons::Reason;
use crate::stores::Stores;

/// What the ProxmoxCluster controller keeps between reconciles.
pub struct ClusterContext {
    /// Shared manager state.
    pub shared: Arc<Shared>,
    /// Probe results and their schedule.
    pub probes: ProbeCache,
    /// Per-object retry backoff after failed reconciles.
    pub backoff: Backoff,
    /// The watched objects (machine counts come from its ProxmoxMachines).
    pub stores: Stores,
}

impl std::fmt::Debug for ClusterContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClusterContext").finish_non_exhaustive()
    }
}

impl ClusterContext {
    /// A fresh context (empty probe cache and backoff table) reading `stores`.
    pub fn new(shared: Arc<Shared>, stores: Stores) -> ClusterContext {
        let o = &shared.options;
        let backoff = Backoff::new(o.scaled(o.backoff_base), o.scaled(o.backoff_max));
        ClusterContext {
            shared,
            probes: ProbeCache::default(),
            backoff,
            stores,
        }
    }

    fn schedule(&self) -> Schedule {
        let o = &self.shared.options;
        let unhealthy = o.scaled(o.unhealthy_retry);
        Schedule {
            healthy: o.scaled(o.probe_period),
            unhealthy,
            max: o.scaled(o.backoff_max).max(unhealthy),
        }
    }
}

fn key_of(pc: &ProxmoxCluster) -> String {
    format!("{}/{}", pc.namespace().unwrap_or_default(), pc.name_any())
}

/// Reconciles one ProxmoxCluster (the kube-runtime reconcile function):
/// runs [`reconcile_once`] in a span, records metrics, resets or feeds the
/// backoff table and publishes a Warning event on failure.
///
/// # Errors
/// Whatever [`reconcile_once`] returns.
pub async fn reconcile(pc: Arc<ProxmoxCluster>, ctx: Arc<ClusterContext>) -> Result<Action, Error> {
    let _running = ctx.shared.metrics.reconcile_started();
    let key = key_of(&pc);
    let span = tracing::info_span!("reconcile", controller = CONTROLLER_NAME, object = %key);
    let started = std::time::Instant::now();
    let result = reconcile_once(&pc, &ctx).instrument(span.clone()).await;
    let metrics = &ctx.shared.metrics;
    match &result {
        Ok(_) => {
            ctx.backoff.succeeded(&key);
            metrics.reconcile(CONTROLLER_NAME, "success", started.elapsed());
        }
        Err(e) => {
            metrics.reconcile(CONTROLLER_NAME, "error", started.elapsed());
            metrics.error(CONTROLLER_NAME, e.category());
            span.in_scope(
                || tracing::warn!(error = %e, category = e.category(), "reconcile failed"),
            );
            events::publish(
                &ctx.shared,
                &pc.object_ref(&()),
                EventKind::Warning,
                &Reason::ReconcileFailed(format!("{}: {e}", e.category())),
                "Reconcile",
            )
            .await;
        }
    }
    result
}

/// The error policy: retry after the object's backoff delay (doubling per
/// consecutive failure); errors that need a change first wait at least the
/// wait period.
pub fn error_policy(pc: Arc<ProxmoxCluster>, err: &Error, ctx: Arc<ClusterContext>) -> Action {
    let o = &ctx.shared.options;
    let delay = ctx.backoff.failed(&key_of(&pc));
    let delay = if err.is_transient() {
        delay
    } else {
        delay.max(o.scaled(o.wait_period))
    };
    Action::requeue(delay)
}

/// One pass of the reconcile described in the module docs.
///
/// # Errors
/// Kubernetes API failures, a pool name owned by something else, a missing
/// IPAM kind while pools are configured.
pub async fn reconcile_once(pc: &ProxmoxCluster, ctx: &ClusterContext) -> Result<Action, Error> {
    let shared = &ctx.shared;
    if is_externally_managed(&pc.metadata) {
        tracing::debug!("externally managed (cluster.x-k8s.io/managed-by); skipped");
        return Ok(Action::await_change());
    }
    let ns = pc
        .namespace()
        .ok_or_else(|| Error::Precondition("ProxmoxCluster has no namespace".to_string()))?;
    let api: Api<ProxmoxCluster> = Api::namespaced(shared.kube.clone(), &ns);
    let previous = pc.status.clone().unwrap_or_default();
    let generation = pc.metadata.generation;
    let deleting = pc.metadata.deletion_timestamp.is_some();

    let owner = owner_of_kind(&pc.metadata, "cluster.x-k8s.io", "Cluster");
    let cluster = match owner {
        Some(o) => {
            Api::<Cluster>::namespaced(shared.kube.clone(), &ns)
                .get_opt(&o.name)
                .await?
        }
        None => None,
    };
    if cluster.is_none() && !deleting {
        let message = match owner {
            None => "waiting for the owner Cluster: no Cluster owner reference yet (CAPI sets it once a Cluster's infrastructureRef names this ProxmoxCluster)".to_string(),
            Some(o) => format!("waiting for the owner Cluster {ns}/{}: not found", o.name),
        };
        let st =
            decide::decide_waiting_for_owner(&previous, generation, Timestamp::now(), &message);
        write_status(&api, pc, &st).await?;
        return Ok(Action::await_change());
    }
    if is_paused(cluster.as_ref(), &pc.metadata) {
        let st = decide::decide_paused(&previous, generation, Timestamp::now());
        if write_status(&api, pc, &st).await? {
            tracing::info!("reconciliation paused");
            events::publish(
                shared,
                &pc.object_ref(&()),
                EventKind::Normal,
                &Reason::Paused,
                "Reconcile",
            )
            .await;
        }
        return Ok(Action::await_change());
    }
    let capi_name = capi_cluster_name(pc, cluster.as_ref());
    if deleting {
        return cleanup(pc, ctx, &api, &capi_name).await;
    }
    let pc = ensure_finalizer(&api, pc).await?;
    apply(&pc, ctx, &api, &capi_name, cluster.as_ref()).await
}

/// The CAPI cluster name: the `cluster.x-k8s.io/cluster-name` label, else the
/// owner Cluster's name, else the ProxmoxCluster's own name.
pub fn capi_cluster_name(pc: &ProxmoxCluster, cluster: Option<&Cluster>) -> String {
    pc.labels()
        .get(CLUSTER_NAME_LABEL)
        .cloned()
        .or_else(|| cluster.map(ResourceExt::name_any))
        .unwrap_or_else(|| pc.name_any())
}

async fn ensure_finalizer(
    api: &Api<ProxmoxCluster>,
    pc: &ProxmoxCluster,
) -> Result<ProxmoxCluster, Error> {
    if pc.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(pc.clone());
    }
    let mut list = pc.finalizers().to_vec();
    list.push(FINALIZER.to_string());
    let patch = serde_json::json!({
        "metadata": {"finalizers": list, "resourceVersion": pc.resource_version()}
    });
    let updated = api
        .patch(
            &pc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    tracing::debug!("finalizer added");
    Ok(updated)
}

async fn remove_finalizer(api: &Api<ProxmoxCluster>, pc: &ProxmoxCluster) -> Result<(), Error> {
    let list: Vec<&String> = pc.finalizers().iter().filter(|f| *f != FINALIZER).collect();
    let patch = serde_json::json!({
        "metadata": {"finalizers": list, "resourceVersion": pc.resource_version()}
    });
    match api
        .patch(
            &pc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Writes `status` (status subresource, status-only body, field manager
/// `capmox-controller`) when it differs from the object's. Returns whether
/// it wrote.
///
/// The write is a forced server-side apply of the whole computed status
/// (`apiVersion`, `kind`, `metadata.name`, `status`): this manager owns
/// every field it applies, so fields and list items it applied before and
/// omits now (a failure domain, an instance, a condition) are removed by the
/// API server, and list-map items (`failureDomains`, `instances`,
/// `conditions`, keyed by `name`/`type`) keep the applied order.
async fn write_status(
    api: &Api<ProxmoxCluster>,
    pc: &ProxmoxCluster,
    status: &ProxmoxClusterStatus,
) -> Result<bool, Error> {
    if pc.status.as_ref() == Some(status)
        || (pc.status.is_none() && *status == ProxmoxClusterStatus::default())
    {
        return Ok(false);
    }
    let name = pc.name_any();
    let body = serde_json::json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": "ProxmoxCluster",
        "metadata": { "name": name },
        "status": serde_json::to_value(status)?,
    });
    match api
        .patch_status(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
    {
        Ok(_) => Ok(true),
        // Deleted meanwhile: nothing to write to.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Counts the ProxmoxMachines labelled with the CAPI cluster name, by
/// `spec.instance`, from the stores (no LIST: a ProxmoxMachine change
/// triggers this reconcile, and LISTing 1,000 machines on each one cost
/// O(N²) objects served during a scale-down).
///
/// The store and this controller's own ProxmoxMachine watch are separate
/// watches of the same objects; the reconcile runs a debounce
/// ([`super::DEBOUNCE`]) after the trigger, by when the store has the same
/// change. Deletion does not rely on it: see [`count_machines_listed`].
async fn count_machines(
    stores: &Stores,
    ns: &str,
    capi_name: &str,
) -> Result<MachineCounts, Error> {
    stores.ready().await?;
    let machines = stores.cluster_machines(ns, capi_name);
    Ok(tally(machines.iter().map(|m| m.as_ref())))
}

/// [`count_machines`] with one LIST, always: what the API server holds now.
/// The ProxmoxCluster's finalizer comes off only when this says none is left.
async fn count_machines_listed(
    shared: &Shared,
    ns: &str,
    capi_name: &str,
) -> Result<MachineCounts, Error> {
    let api: Api<ProxmoxMachine> = Api::namespaced(shared.kube.clone(), ns);
    let list = api
        .list(&ListParams::default().labels(&cluster_selector(capi_name)))
        .await?;
    Ok(tally(list.items.iter()))
}

/// Machine counts of `machines` by instance and phase, names sorted.
fn tally<'a>(machines: impl Iterator<Item = &'a ProxmoxMachine>) -> MachineCounts {
    let mut counts = MachineCounts::default();
    for m in machines {
        counts.names.push(m.name_any());
        let instance = m.spec.instance.as_deref().filter(|s| !s.is_empty());
        match instance {
            Some(i) => *counts.by_instance.entry(i.to_string()).or_insert(0) += 1,
            None => counts.unplaced += 1,
        }
        let key = (
            instance.unwrap_or("none").to_string(),
            machine_phase(m).to_string(),
        );
        *counts.phases.entry(key).or_insert(0) += 1;
    }
    counts.names.sort();
    counts
}

/// The phase of a ProxmoxMachine for metrics: `Deleting`, `Provisioned`,
/// `Failed` (its `Ready` reason ends in `Failed`, e.g. `CloneFailed`), else
/// `Provisioning`.
pub fn machine_phase(m: &ProxmoxMachine) -> &'static str {
    if m.metadata.deletion_timestamp.is_some() {
        return "Deleting";
    }
    let st = m.status.as_ref();
    if st
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        == Some(true)
    {
        return "Provisioned";
    }
    let failed = st
        .and_then(|s| crate::conditions::get(&s.conditions, crate::conditions::READY))
        .is_some_and(|c| c.status == "False" && crate::reasons::Reason::is_failure_code(&c.reason));
    if failed { "Failed" } else { "Provisioning" }
}

async fn cleanup(
    pc: &ProxmoxCluster,
    ctx: &ClusterContext,
    api: &Api<ProxmoxCluster>,
    capi_name: &str,
) -> Result<Action, Error> {
    let shared = &ctx.shared;
    if !pc.finalizers().iter().any(|f| f == FINALIZER) {
        return Ok(Action::await_change());
    }
    let ns = pc.namespace().unwrap_or_default();
    // The store says which machines are still there; that none is left is
    // confirmed with a LIST before the pools and the finalizer go.
    let mut machines = count_machines(&ctx.stores, &ns, capi_name).await?;
    if machines.total() == 0 {
        machines = count_machines_listed(shared, &ns, capi_name).await?;
    }
    if machines.total() > 0 {
        let previous = pc.status.clone().unwrap_or_default();
        let st = decide::decide_deleting(
            &previous,
            pc.metadata.generation,
            Timestamp::now(),
            &machines,
        );
        if write_status(api, pc, &st).await? {
            let msg = crate::conditions::get(&st.conditions, crate::conditions::READY)
                .map(|c| c.message.clone())
                .unwrap_or_default();
            tracing::info!(machines = machines.total(), "deletion waits for machines");
            events::publish(
                shared,
                &pc.object_ref(&()),
                EventKind::Normal,
                &Reason::WaitingForMachines(msg),
                "Delete",
            )
            .await;
        }
        let o = &shared.options;
        return Ok(Action::requeue(o.scaled(o.wait_period)));
    }
    endpoint::release(&shared.kube, pc).await?;
    let deleted = pools::delete_pools(&shared.kube, pc).await?;
    shared.clients.forget_cluster(&ns, &pc.name_any());
    shared
        .metrics
        .set_cluster_machines(&key_of(pc), BTreeMap::new());
    ctx.probes.forget_cluster(&ns, &pc.name_any());
    remove_finalizer(api, pc).await?;
    tracing::info!(
        pools = deleted,
        "deleted: IP pools removed, finalizer dropped"
    );
    events::publish(
        shared,
        &pc.object_ref(&()),
        EventKind::Normal,
        &Reason::Deleted(format!(
            "no ProxmoxMachine left; {deleted} IP pool(s) deleted; finalizer removed"
        )),
        "Delete",
    )
    .await;
    Ok(Action::await_change())
}

/// Probes every instance of the mode concurrently (fresh cached results are
/// reused). Returns the results and when the next probe is due.
async fn probe_instances(
    pc: &ProxmoxCluster,
    ctx: &ClusterContext,
) -> Result<(BTreeMap<String, ProbeResult>, Instant), Error> {
    let shared = &ctx.shared;
    let o = &shared.options;
    // A wall-clock limit on real requests: not scaled by --time-scale.
    let timeout = o.probe_timeout;
    let schedule = ctx.schedule();
    let ns = pc.namespace().unwrap_or_default();
    let name = pc.name_any();
    let now = Instant::now();
    let default_next = now + schedule.healthy;
    let tasks = instances_to_probe(&pc.spec).into_iter().map(|inst| {
        let key: ProbeKey = (ns.clone(), name.clone(), inst.name().to_string());
        async move {
            let client = match shared.clients.get(&shared.kube, pc, inst.name()).await {
                Ok(c) => c,
                Err(e @ Error::Kube(_)) => return Err(e),
                Err(e) => {
                    // Secret missing, key missing or malformed: no request is made.
                    let (message, state) = describe_error(&e, None);
                    return Ok((inst.name().to_string(), ProbeResult::failed(state, message), default_next));
                }
            };
            if let Some((r, expires)) = ctx.probes.fresh(&key, &client.api, &inst.spec, now) {
                return Ok((inst.name().to_string(), r, expires));
            }
            let result = probe::probe(client.api.as_ref(), &inst, timeout)
                .instrument(tracing::debug_span!("probe", instance = %inst.name()))
                .await;
            if let Some(id) = &result.identity {
                shared.clients.learn_identity(client.api.origin(), id);
            }
            tracing::debug!(instance = %inst.name(), ready = result.ready, message = ?result.message, "probed");
            let (result, expires) = ctx.probes.record(key, client.api.clone(), inst.spec.clone(), result, Instant::now(), schedule);
            Ok((inst.name().to_string(), result, expires))
        }
    });
    let mut out = BTreeMap::new();
    let mut next = default_next;
    for r in join_all(tasks).await {
        let (name, result, expires) = r?;
        next = next.min(expires);
        out.insert(name, result);
    }
    Ok((out, next))
}

async fn apply(
    pc: &ProxmoxCluster,
    ctx: &ClusterContext,
    api: &Api<ProxmoxCluster>,
    capi_name: &str,
    cluster: Option<&Cluster>,
) -> Result<Action, Error> {
    let shared = &ctx.shared;
    let ns = pc.namespace().unwrap_or_default();
    let previous = pc.status.clone().unwrap_or_default();
    let validation = validate_cluster(&pc.spec);
    let warnings = cluster_warnings(&pc.spec);
    let valid = validation.is_empty();

    let (probes, next_probe) = if valid {
        probe_instances(pc, ctx).await?
    } else {
        (BTreeMap::new(), Instant::now())
    };
    let (ip_pools, pool_error) = if valid {
        let mut recorded = previous.ip_pools.clone();
        recorded.extend(pools::capmox_pools(&shared.kube, pc, &recorded).await?);
        let mut desired = pools::desired_pools(&pc.name_any(), &pc.spec, &recorded);
        desired.extend(endpoint::desired_pool(&pc.name_any(), &pc.spec));
        match pools::reconcile_pools(&shared.kube, pc, capi_name, &desired).await {
            Ok(p) => (p, None),
            Err(e) => (previous.ip_pools.clone(), Some(e)),
        }
    } else {
        (previous.ip_pools.clone(), None)
    };
    let cluster_endpoint = cluster.and_then(|c| c.spec.control_plane_endpoint.as_ref());
    let ep = if valid {
        let record = |c| {
            let mut st = previous.clone();
            st.control_plane_endpoint_claim = Some(c);
            async move { write_status(api, pc, &st).await.map(|_| ()) }
        };
        endpoint::reconcile_endpoint(&shared.kube, pc, capi_name, cluster_endpoint, record).await?
    } else {
        endpoint::Outcome::default()
    };
    let mut spec = pc.spec.clone();
    spec.control_plane_endpoint = ep.written.clone().or(spec.control_plane_endpoint);
    let machines = count_machines(&ctx.stores, &ns, capi_name).await?;
    shared
        .metrics
        .set_cluster_machines(&key_of(pc), machines.phases.clone());
    let decision = decide::decide(&Inputs {
        spec: &spec,
        generation: pc.metadata.generation,
        previous: &previous,
        validation: &validation,
        warnings: &warnings,
        cluster_endpoint,
        endpoint_claim: ep
            .claim
            .as_ref()
            .or(previous.control_plane_endpoint_claim.as_ref()),
        endpoint_wait: ep.wait.as_deref(),
        probes: &probes,
        machines: &machines,
        ip_pools: &ip_pools,
        now: Timestamp::now(),
    });
    if let Some(ep) = &decision.copy_endpoint {
        let patch = serde_json::json!({"spec": {"controlPlaneEndpoint": ep}});
        api.patch(
            &pc.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    }
    write_status(api, pc, &decision.status).await?;
    let obj = pc.object_ref(&());
    for note in &decision.events {
        let (code, message) = (note.reason.code(), note.reason.message());
        match note.kind {
            EventKind::Warning => tracing::warn!(reason = code, "{message}"),
            EventKind::Normal => tracing::info!(reason = code, "{message}"),
        }
        // Events about one instance are their own series (see `events`).
        let regarding = match &note.instance {
            Some(i) => events::about_instance(&obj, i),
            None => obj.clone(),
        };
        events::publish(shared, &regarding, note.kind, &note.reason, "Reconcile").await;
    }
    if let Some(e) = pool_error {
        return Err(e);
    }
    if !valid {
        // Only a spec change helps; the watch reports it.
        return Ok(Action::await_change());
    }
    let wait = next_probe
        .saturating_duration_since(Instant::now())
        .max(Duration::from_millis(1));
    Ok(Action::requeue(wait))
}
