//! One reconcile of one ProxmoxMachine: read the facts, then ask
//! [`decide`] for the next step, run it, fold in what it observed, and ask
//! again — until `decide` says wait or done; then report.
//!
//! Invariants (module header):
//! - **Level-triggered.** Every reconcile reads the world again. Memory
//!   (the runtime) only saves calls; after a restart the same steps follow
//!   from spec, status and Proxmox.
//! - **One place decides.** This loop does not choose: it runs what
//!   [`decide`] answers. It keeps the books `decide` reads — the retry
//!   state of each step (a step that failed is gated until its retry is
//!   due; only its success or a spec change resets it).
//! - **At most one Proxmox task per reconcile**: a started task makes
//!   `decide` wait for it.
//! - **Never decide from an object older than our own last write.** The
//!   informer cache lags: a reconcile may be handed the object from before
//!   the previous reconcile's status write. Per machine UID the runtime
//!   keeps the object our last successful write returned; an incoming
//!   object that is not exactly that `resourceVersion` is read again with
//!   one GET before anything is decided (and, were even that answer one of
//!   our earlier versions, the remembered object is used) — see
//!   [`crate::machine::runtime::freshness`].
//! - **A 409 on our own write is expected under watch lag**: the controller
//!   requeues promptly with a fresh read, logs one debug line, and counts
//!   it neither as a reconcile error nor as a Warning event.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};
use tracing::{Instrument, debug, warn};

use super::context::{Context, Run};
use super::decide::{self, Facts, Observed, Step, StepKind, decide};
use super::report::{self, End};
use super::runtime::freshness::{self, Freshness};
use super::runtime::ledger::{Lifecycle, Phase, ReconcileTime, Share, Waiting};
use super::{observe, steps};
use crate::api::ProxmoxMachine;
use crate::error::Error;
use crate::spent;

/// The controller name in metrics.
pub const CONTROLLER: &str = "proxmoxmachine";

/// Steps per reconcile before requeueing (observations and synchronous
/// steps continue in the same reconcile).
const MAX_STEPS: usize = 48;

/// Reconciles one ProxmoxMachine (see the module invariants).
///
/// # Errors
/// Kubernetes API failures; Proxmox failures become conditions and
/// retries instead.
pub async fn reconcile(machine: Arc<ProxmoxMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    let _running = ctx.shared.metrics.reconcile_started();
    match reconcile_once(machine.clone(), ctx.clone()).await {
        Ok(Some(d)) => Ok(Action::requeue(d)),
        Ok(None) => Ok(Action::await_change()),
        Err(e) if is_conflict(&e) => {
            // Someone (usually our own earlier write, seen late) changed the
            // object after the version this reconcile wrote against.
            if let Some(uid) = machine.uid() {
                ctx.runtime.must_refresh(&uid);
            }
            debug!(object = %key(&machine), "write conflict (409); retrying from a fresh read");
            Ok(Action::requeue(ctx.runtime.poll_floor()))
        }
        Err(e) => Err(e),
    }
}

/// Whether `e` is a Kubernetes 409 Conflict (a write against an older
/// `resourceVersion`).
pub fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Kube(kube::Error::Api(s)) if s.code == 409)
}

/// [`reconcile`], answering the requeue delay itself (`None`: wait for a
/// change) — for tests and tools that drive reconciles by hand. A 409 is
/// returned as the error (the controller turns it into a prompt requeue).
///
/// # Errors
/// As [`reconcile`].
pub async fn reconcile_once(
    machine: Arc<ProxmoxMachine>,
    ctx: Arc<Context>,
) -> Result<Option<Duration>, Error> {
    let started = std::time::Instant::now();
    let key = key(&machine);
    let before = ctx.runtime.ledger.begin(&key, tokio::time::Instant::now());
    let tracked = before.first().map(|s| s.lifecycle);
    book(&ctx, &before);
    let span = tracing::info_span!(
        "reconcile",
        controller = CONTROLLER,
        object = %key,
        instance = machine.spec.instance.as_deref().unwrap_or(""),
        vmid = machine.spec.virtual_machine_id.unwrap_or(0),
    );
    let (result, spent) = spent::scope(
        async {
            let Some(machine) = spent::kubernetes(fresh(machine, &ctx)).await? else {
                return Ok((None, None));
            };
            run_machine(&machine, &ctx).await
        }
        .instrument(span),
    )
    .await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) if is_conflict(e) => "conflict",
        Err(_) => "error",
    };
    let wall = started.elapsed();
    ctx.shared.metrics.reconcile(CONTROLLER, outcome, wall);
    // The ledger: what this reconcile spent, and what the machine waits
    // for now (a failed reconcile waits for its retry).
    let (due, ended) = match &result {
        Ok((due, ended)) => (*due, *ended),
        Err(e) => {
            let due = is_conflict(e).then(|| ctx.runtime.poll_floor());
            (
                due,
                tracked.map(|l| (l, Some(Phase::Retry), Duration::ZERO)),
            )
        }
    };
    let lifecycle = ended.map(|(l, _, _)| l);
    let next =
        ended.and_then(|(lifecycle, phase, _)| phase.map(|phase| Waiting { lifecycle, phase }));
    let spent_time = ReconcileTime {
        wall,
        proxmox: spent.proxmox,
        kubernetes: spent.kubernetes,
        scheduler: ended.map(|(_, _, s)| s).unwrap_or_default(),
    };
    let after = ctx.runtime.ledger.end(
        &key,
        tokio::time::Instant::now(),
        tracked.and(lifecycle.or(tracked)),
        spent_time,
        next,
        due,
    );
    book(&ctx, &after);
    result.map(|(due, _)| due)
}

/// What a reconcile tells the ledger: its lifecycle, what the machine
/// waits for after it (`None`: provisioned or gone), and the time spent
/// planning beyond its calls.
type Ended = (Lifecycle, Option<Phase>, Duration);

/// Adds ledger shares to `capmox_machine_seconds_total`.
fn book(ctx: &Context, shares: &[Share]) {
    for s in shares {
        ctx.shared
            .metrics
            .machine_time(s.lifecycle.as_str(), s.phase.label(), s.time);
    }
}

/// What a machine waits for after a reconcile that ended on `end`
/// (`None`: nothing, it is provisioned and well, or gone).
fn waiting_for(end: &End) -> Option<Phase> {
    let w = match end {
        End::Done => return None,
        End::More => return Some(Phase::Queue),
        End::Wait(w) => w,
    };
    Phase::of_wait(w.until, &w.reason)
}

async fn run_machine(
    machine: &ProxmoxMachine,
    ctx: &Context,
) -> Result<(Option<Duration>, Option<Ended>), Error> {
    let mut run = Run::new(ctx, machine);
    let mut facts = observe::kube::facts(&mut run).await?;
    if facts.deleting {
        ctx.runtime.update_memo(&run.me.uid, |m| {
            m.deleting_since
                .get_or_insert_with(tokio::time::Instant::now);
        });
    }
    let mut scheduler = Duration::ZERO;
    let end = drive(&mut run, &mut facts, &mut scheduler).await?;
    let lifecycle = if facts.deleting {
        Lifecycle::Delete
    } else {
        Lifecycle::Create
    };
    let next = waiting_for(&end);
    let due = report::finish(&mut run, &facts, end).await?;
    Ok((due, Some((lifecycle, next, scheduler))))
}

/// The loop: decide, run, fold in, until `decide` waits or is done.
/// Planning steps (choosing instance, node, template and VMID) add their
/// time beyond their API calls to `scheduler`.
async fn drive(
    run: &mut Run<'_>,
    facts: &mut Facts,
    scheduler: &mut Duration,
) -> Result<End, Error> {
    for _ in 0..MAX_STEPS {
        let step = decide(facts);
        debug!(?step, "decided");
        match step {
            Step::Done => return Ok(End::Done),
            Step::Wait(w) => return Ok(End::Wait(w)),
            Step::Observe(what) => {
                let o = observe::run(what, run, facts).await?;
                if reached(&o) {
                    run.rt().retries.reachable(&run.me.uid);
                }
                facts.apply(o);
            }
            action => {
                let kind = action.kind();
                let planning = matches!(
                    kind,
                    Some(StepKind::ChooseInstance | StepKind::Plan | StepKind::ReserveVmid)
                );
                let (t0, calls0) = (std::time::Instant::now(), spent::now());
                let o = steps::run(action, run, facts).await?;
                if planning {
                    let calls = spent::now().since(calls0).total();
                    *scheduler += t0.elapsed().saturating_sub(calls);
                }
                if let Some(kind) = kind
                    && kind != StepKind::ClearTask
                    && succeeded(&o)
                {
                    run.rt().retries.succeeded(&run.me.uid, kind);
                }
                facts.apply(o);
                refresh_gates(run, facts);
            }
        }
    }
    Ok(End::More)
}

/// The retry gates from the runtime (keeping which failed in this
/// reconcile), plus this reconcile's terminal ones (not kept across
/// reconciles: a change of the objects retries them).
fn refresh_gates(run: &Run<'_>, facts: &mut Facts) {
    let mut gates = run.rt().retries.gates(&run.me.uid, run.generation);
    for g in &mut gates {
        g.fresh = facts.gate(g.step).is_some_and(|old| old.fresh);
    }
    for t in facts.gates.iter().filter(|g| g.reason.terminal()) {
        if !gates.iter().any(|g| g.step == t.step) {
            gates.push(t.clone());
        }
    }
    facts.gates = gates;
}

/// Whether an action did what it was for now: not a failure, not a wait
/// in line, not a task whose end is still to come.
fn succeeded(o: &Observed) -> bool {
    match o {
        Observed::Failed(_) | Observed::InLine(_) | Observed::TaskStarted(_) => false,
        Observed::All(list) => list.iter().all(succeeded),
        _ => true,
    }
}

/// Whether an observation reached what it asked.
fn reached(o: &Observed) -> bool {
    !matches!(
        o,
        Observed::Vm(decide::VmFact::Unreachable(_))
            | Observed::Client(decide::ClientFact::Broken(_))
            | Observed::Task(decide::TaskFact::Unreadable(_))
    )
}

/// The object to decide from: `machine` when it is the version of our last
/// write, else the API server's current version (one GET), else — should
/// even that be one of our earlier versions — what we wrote. `None` when
/// the object is gone.
///
/// # Errors
/// [`Error::Kube`] of the GET.
async fn fresh(
    machine: Arc<ProxmoxMachine>,
    ctx: &Context,
) -> Result<Option<Arc<ProxmoxMachine>>, Error> {
    let Some(uid) = machine.uid() else {
        return Ok(Some(machine));
    };
    let seen = ctx.runtime.seen(&uid, &machine);
    if seen == Freshness::Current {
        return Ok(Some(machine));
    }
    let written = ctx.runtime.written(&uid);
    let rv = machine.resource_version();
    let api: Api<ProxmoxMachine> = Api::namespaced(
        ctx.shared.kube.clone(),
        &machine.namespace().unwrap_or_default(),
    );
    let Some(got) = api.get_opt(&machine.name_any()).await? else {
        return Ok(None);
    };
    if got.uid().as_deref() != Some(uid.as_str()) {
        // Deleted and created again under the same name: a new machine.
        return Ok(None);
    }
    let now = freshness::classify(got.resource_version().as_deref(), written.as_ref());
    debug!(
        seen = ?seen,
        stale_version = rv.as_deref().unwrap_or(""),
        fresh_version = got.resource_version().as_deref().unwrap_or(""),
        "the object may predate our last write; read it again"
    );
    let got = match (now, &written) {
        (Freshness::Stale, Some(w)) => freshness::overlay(got, w),
        _ => {
            ctx.runtime.record_write(&uid, &got);
            got
        }
    };
    ctx.runtime.refreshed(&uid);
    Ok(Some(Arc::new(got)))
}

/// Requeue after a failed reconcile (a Kubernetes failure): the machine's
/// growing delay.
pub fn error_policy(machine: Arc<ProxmoxMachine>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.metrics.error(CONTROLLER, error.category());
    let uid = machine.uid().unwrap_or_default();
    let delay = ctx.runtime.retries.unreachable(&uid);
    warn!(
        object = %key(&machine),
        category = error.category(),
        error = %error,
        retry_in_ms = delay.as_millis() as u64,
        "reconcile failed"
    );
    Action::requeue(delay)
}

fn key(m: &ProxmoxMachine) -> String {
    format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any())
}
