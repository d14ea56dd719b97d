//! One benchmark scenario, end to end: a fresh environment (pve-sim with the
//! scenario's datacenters, kube-sim, the CAPI stand-in, the controller
//! binary), the workload cluster with one control-plane machine, then the
//! workers scaled up and back to zero while the clock, the simulator's call
//! log, the controller's `/metrics` and `/proc` are read, and finally the
//! Cluster deleted and whatever is left behind counted. Scenarios of the
//! same datacenters share one environment ([`run_shared`]): the control
//! plane comes up once, and each scenario's leftovers are counted after its
//! scale-down.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kube::api::{Api, DeleteParams};
use pve_sim::{CallLog, LowerBound};

use super::fleet;
use super::measure::{self, Counters, ProcessFigures};
use super::track::Tracker;
use crate::crds::{Cluster, Machine};
use crate::env::{Env, EnvOptions};
use crate::error::{E2eError, Result};
use crate::{observe, scenario};

/// A scenario of the benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Short name (`--scenario NAME`).
    pub name: &'static str,
    /// One line for the table.
    pub about: &'static str,
    /// Simulated datacenters.
    pub datacenters: usize,
    /// Nodes of each datacenter.
    pub nodes: u32,
    /// Workers per datacenter, in datacenter order (`dc-a` first).
    pub workers: Vec<usize>,
    /// After the scale-up, this percentage of the workers (of each
    /// datacenter) is replaced: their Machines are deleted, as a
    /// remediation or a rollout does, and their MachineSets create new ones
    /// (0: no replacement).
    pub replace_percent: u32,
    /// Scale back to zero and time the deletion.
    pub scale_down: bool,
    /// Stop waiting for provisioning after this long (simulated seconds;
    /// `None`: wait for every machine, bounded by the phase timeout). The
    /// 1,000-machine run measures memory and CPU per reconcile at that
    /// object count, not the time to provision them all.
    pub provisioning_window: Option<f64>,
    /// The ratio to the lower bound this project holds itself to (not asserted).
    pub ratio_target: Option<f64>,
    /// The longest one phase of this scenario may take, real time, when
    /// longer than the run's [`RunOptions::phase_timeout`].
    pub min_phase_timeout: Option<Duration>,
    /// This scenario runs at the run's time scale times this (1.0: the
    /// run's). Simulated durations are what it reports either way.
    pub time_scale_factor: f64,
}

impl Scenario {
    /// Workers in total.
    pub fn machines(&self) -> usize {
        self.workers.iter().sum()
    }

    /// `opts` with this scenario's phase timeout.
    pub fn options(&self, opts: &RunOptions) -> RunOptions {
        let mut o = opts.clone();
        if let Some(t) = self.min_phase_timeout {
            o.phase_timeout = o.phase_timeout.max(t);
        }
        o
    }

    /// The time scale this scenario runs at under `opts`.
    pub fn time_scale(&self, opts: &RunOptions) -> f64 {
        opts.time_scale * self.time_scale_factor
    }
}

/// How the benchmark runs.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOptions {
    /// pve-sim's time scale, also the controller's `--time-scale`.
    pub time_scale: f64,
    /// Seed of the simulator and the stand-in.
    pub seed: u64,
    /// Extra controller arguments.
    pub controller_args: Vec<String>,
    /// The longest one phase (set-up, scale-up, scale-down, teardown) may take, real time.
    pub phase_timeout: Duration,
    /// Keep each scenario's working directory (kubeconfig, controller log).
    pub keep_workdir: bool,
}

/// What a phase does to the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PhaseKind {
    /// `replicas` raised: machines created.
    #[default]
    ScaleUp,
    /// Some Machines deleted and created again by their MachineSets.
    Replace,
    /// `replicas` lowered to zero: machines deleted.
    ScaleDown,
}

impl PhaseKind {
    /// The lifecycles of `capmox_machine_seconds_total` the phase's
    /// machines went through.
    pub fn lifecycles(self) -> &'static [&'static str] {
        match self {
            PhaseKind::ScaleUp => &["create"],
            PhaseKind::Replace => &["create", "delete"],
            PhaseKind::ScaleDown => &["delete"],
        }
    }
}

/// What one phase (scale-up, replacement or scale-down) measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Phase {
    /// What the phase did.
    pub kind: PhaseKind,
    /// Machines the phase was about (created, replaced or deleted).
    pub machines: usize,
    /// Of those, how many reached the goal (provisioned, replaced and
    /// provisioned, gone).
    pub reached: usize,
    /// From the scale request (or the first Machine deletion) to the last
    /// machine provisioned (or gone).
    pub wall: Duration,
    /// From the scale request to the first ProxmoxMachine created (the
    /// CAPI stand-in's share: MachineDeployment → MachineSet → Machine →
    /// ProxmoxMachine). `None` for a scale-down.
    pub first_machine: Option<Duration>,
    /// Every call the simulated datacenters answered, until the phase had
    /// settled (no task running, no ISO left).
    pub sim_calls: CallLog,
    /// The controller's own count (`capmox_pve_requests_total`), same interval.
    pub controller: Counters,
    /// Controller CPU time in the interval.
    pub controller_cpu: Duration,
    /// CPU time of the benchmark process itself (pve-sim, kube-sim, the
    /// stand-in, the watch) in the interval.
    pub bench_cpu: Duration,
    /// From the scale request until settled.
    pub settled: Duration,
    /// Per machine, from its ProxmoxMachine's creation to provisioned,
    /// sorted (machines created in the phase only).
    pub per_machine: Vec<Duration>,
}

impl Phase {
    /// Reconciles of the ProxmoxMachine controller in the interval.
    pub fn machine_reconciles(&self) -> f64 {
        self.controller
            .reconciles
            .get("proxmoxmachine")
            .copied()
            .unwrap_or(0.0)
    }

    /// Reconciles of every controller in the interval.
    pub fn all_reconciles(&self) -> f64 {
        self.controller.reconciles.values().sum()
    }

    /// Calls the controller made in the interval.
    pub fn controller_calls(&self) -> f64 {
        self.controller.pve_requests.values().sum()
    }

    /// The phase with what the watch saw of the machines created since
    /// `t0`: when the first appeared, and each one's time from creation to
    /// provisioned (sorted).
    fn with_creations(mut self, tracker: &Tracker, t0: Instant) -> Phase {
        self.first_machine = tracker
            .first_seen_after(t0)
            .map(|t| t.saturating_duration_since(t0));
        self.per_machine = tracker.provision_times_since(t0);
        self.per_machine.sort();
        self
    }

    /// `x / machines` (0 without machines).
    pub fn per_machine(&self, x: f64) -> f64 {
        if self.machines == 0 {
            0.0
        } else {
            x / self.machines as f64
        }
    }
}

/// Left behind after the Cluster was deleted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// VMs other than templates, every datacenter.
    pub vms: usize,
    /// ISO volumes, every datacenter.
    pub isos: usize,
    /// IPAddressClaims in the namespace.
    pub claims: usize,
    /// IPAddresses in the namespace.
    pub addresses: usize,
    /// ProxmoxMachines in the namespace.
    pub machines: usize,
}

impl Leftovers {
    /// Nothing left.
    pub fn is_clean(&self) -> bool {
        *self == Leftovers::default()
    }

    /// What is left beyond `baseline` (the control plane's objects).
    pub fn beyond(&self, baseline: &Leftovers) -> Leftovers {
        Leftovers {
            vms: self.vms.saturating_sub(baseline.vms),
            isos: self.isos.saturating_sub(baseline.isos),
            claims: self.claims.saturating_sub(baseline.claims),
            addresses: self.addresses.saturating_sub(baseline.addresses),
            machines: self.machines.saturating_sub(baseline.machines),
        }
    }

    /// Both counts added (a shared environment's last scenario also
    /// carries what the final Cluster deletion left).
    pub fn plus(&self, other: &Leftovers) -> Leftovers {
        Leftovers {
            vms: self.vms + other.vms,
            isos: self.isos + other.isos,
            claims: self.claims + other.claims,
            addresses: self.addresses + other.addresses,
            machines: self.machines + other.machines,
        }
    }
}

/// When a scenario's leftovers were counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeftoversWhen {
    /// After the Cluster was deleted (the scenario had its own environment).
    ClusterDeleted,
    /// After the workers were scaled to zero, beyond what the control plane
    /// holds (the environment is shared with the next scenario).
    ScaledToZero,
    /// After scaling to zero, plus what the shared environment's final
    /// Cluster deletion left.
    ScaledToZeroThenClusterDeleted,
}

/// Everything a scenario measured.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// The scenario.
    pub scenario: Scenario,
    /// Workers up.
    pub up: Phase,
    /// Workers replaced ([`Scenario::replace_percent`]).
    pub replace: Option<Phase>,
    /// The simulator's lower bound for the replacements as placed (`None`
    /// when not every one was provisioned).
    pub replace_bound: Option<LowerBound>,
    /// Workers back to zero.
    pub down: Option<Phase>,
    /// The simulator's lower bound for the fleet as placed (`None` when not
    /// every machine was provisioned).
    pub lower_bound: Option<LowerBound>,
    /// Where the workers went: datacenter → node → VMs.
    pub placements: BTreeMap<String, BTreeMap<String, u32>>,
    /// The controller process at the end (before the teardown): peak RSS
    /// and total CPU time.
    pub controller: ProcessFigures,
    /// The controller's resident set size with the manager up and no
    /// object of the workload cluster applied yet (`VmRSS` one second
    /// after its metrics endpoint answered), KiB.
    pub idle_rss_kib: u64,
    /// Left behind: after deleting the Cluster, or (in a shared
    /// environment) after scaling to zero, beyond the control plane's.
    pub leftovers: Leftovers,
    /// When [`Outcome::leftovers`] were counted.
    pub leftovers_when: LeftoversWhen,
    /// The whole scenario, set-up and teardown included.
    pub total: Duration,
    /// The time scale it ran at.
    pub time_scale: f64,
}

impl Outcome {
    /// The measured phases in the order they ran.
    pub fn phases(&self) -> impl Iterator<Item = &Phase> {
        std::iter::once(&self.up)
            .chain(self.replace.as_ref())
            .chain(self.down.as_ref())
    }

    /// Controller CPU over every measured phase.
    pub fn phases_cpu(&self) -> Duration {
        self.phases().map(|p| p.controller_cpu).sum()
    }

    /// Reconciles of every controller over every measured phase.
    pub fn phases_reconciles(&self) -> f64 {
        self.phases().map(Phase::all_reconciles).sum()
    }

    /// The replacement's wall time ÷ its lower bound (the replacements'
    /// clones and boots as placed).
    pub fn replace_ratio(&self) -> Option<f64> {
        let p = self.replace.as_ref()?;
        let lb = self.replace_bound.as_ref()?.total.as_secs_f64();
        (lb > 0.0 && p.reached == p.machines).then(|| p.wall.as_secs_f64() / lb)
    }

    /// Wall time to all provisioned ÷ the lower bound.
    pub fn ratio(&self) -> Option<f64> {
        let lb = self.lower_bound.as_ref()?.total.as_secs_f64();
        (lb > 0.0 && self.up.reached == self.up.machines).then(|| self.up.wall.as_secs_f64() / lb)
    }

    /// The controller's own share: the slowest machine's time from its
    /// ProxmoxMachine's creation to provisioned, over the lower bound (the
    /// wall-time [`Outcome::ratio`] also holds the CAPI stand-in's time to
    /// create the objects).
    pub fn machine_ratio(&self) -> Option<f64> {
        let lb = self.lower_bound.as_ref()?.total.as_secs_f64();
        let slowest = self.up.per_machine.iter().max()?.as_secs_f64();
        (lb > 0.0 && self.up.reached == self.up.machines).then(|| slowest / lb)
    }
}

/// Runs one scenario in a fresh environment.
///
/// # Errors
/// Any failure of the environment or a phase that ran out of time (with the
/// controller's log tail).
pub async fn run(sc: &Scenario, opts: &RunOptions) -> Result<Outcome> {
    let started = Instant::now();
    let mut env = start_env(sc, opts).await?;
    let r = async {
        let probe = prepare(&mut env, sc.name, opts, started).await?;
        let mut o = measure(&mut env, sc, &probe, opts, started).await?;
        o.controller = probe.process()?;
        o.idle_rss_kib = probe.idle_rss_kib;
        eprintln!(
            "bench: {}: deleting the Cluster ({:.1} s)",
            sc.name,
            started.elapsed().as_secs_f64()
        );
        o.leftovers = teardown(&mut env, opts.phase_timeout).await?;
        o.total = started.elapsed();
        Ok(o)
    }
    .await;
    env.shutdown().await;
    r
}

/// Runs scenarios of the same datacenters one after the other in one
/// environment: the control plane comes up once, each scenario scales the
/// workers up and back to zero, and the Cluster is deleted after the last.
/// Each scenario's leftovers are counted after its scale-down, beyond what
/// the control plane holds; the last one also carries what the final
/// deletion left. The controller's peak RSS is reset before each scenario
/// (`/proc/PID/clear_refs`), its CPU counted from the scenario's start.
/// After a failure the remaining scenarios are not run (the environment's
/// state is unknown); they are reported as failed with the reason.
pub async fn run_shared(scs: &[Scenario], opts: &RunOptions) -> Vec<Result<Outcome>> {
    let Some(first) = scs.first() else {
        return Vec::new();
    };
    let started = Instant::now();
    let mut env = match start_env(first, opts).await {
        Ok(env) => env,
        Err(e) => {
            return scs
                .iter()
                .map(|_| Err(E2eError::Contract(format!("environment: {e}"))))
                .collect();
        }
    };
    let mut out: Vec<Result<Outcome>> = Vec::new();
    let probe = match prepare(&mut env, first.name, opts, started).await {
        Ok(p) => Some(p),
        Err(e) => {
            out.push(Err(e));
            None
        }
    };
    let baseline = match (&probe, leftovers(&env).await) {
        (Some(_), Ok(b)) => Some(b),
        (Some(_), Err(e)) => {
            out.push(Err(e));
            None
        }
        (None, _) => None,
    };
    if let (Some(probe), Some(baseline)) = (&probe, baseline) {
        for (i, sc) in scs.iter().enumerate() {
            let sc_started = if i == 0 { started } else { Instant::now() };
            if i > 0 {
                eprintln!(
                    "bench: {} — {} (in the environment of {})",
                    sc.name, sc.about, first.name
                );
            }
            let r = async {
                // The first scenario counts from the process start, as a
                // scenario in its own environment does.
                let peak_reset = if i == 0 { Ok(()) } else { measure::reset_peak_rss(&probe.pid) };
                let cpu0 = if i == 0 { Duration::ZERO } else { probe.process()?.cpu };
                let mut o = measure(&mut env, sc, probe, opts, sc_started).await?;
                let now = probe.process()?;
                o.controller = ProcessFigures {
                    peak_rss_kib: now.peak_rss_kib,
                    rss_kib: now.rss_kib,
                    cpu: now.cpu.saturating_sub(cpu0),
                };
                o.idle_rss_kib = probe.idle_rss_kib;
                if let Err(e) = peak_reset {
                    eprintln!("bench: {}: the controller's peak RSS could not be reset ({e}); it counts from the environment's start", sc.name);
                }
                o.leftovers = wait_leftovers(
                    &mut env,
                    &baseline,
                    opts.phase_timeout.min(Duration::from_secs(30)),
                )
                .await?;
                o.leftovers_when = LeftoversWhen::ScaledToZero;
                o.total = sc_started.elapsed();
                Ok(o)
            }
            .await;
            let failed = r.is_err();
            out.push(r);
            if failed {
                break;
            }
        }
        eprintln!(
            "bench: {}: deleting the Cluster ({:.1} s)",
            first.name,
            started.elapsed().as_secs_f64()
        );
        match teardown(&mut env, opts.phase_timeout).await {
            Ok(l) => {
                if let Some(Ok(last)) = out.last_mut() {
                    last.leftovers = last.leftovers.plus(&l);
                    last.leftovers_when = LeftoversWhen::ScaledToZeroThenClusterDeleted;
                }
            }
            Err(e) => out.push(Err(e)),
        }
    }
    env.shutdown().await;
    out.truncate(scs.len());
    while out.len() < scs.len() {
        out.push(Err(E2eError::Contract(
            "not run: an earlier scenario in its shared environment failed".into(),
        )));
    }
    out
}

/// The CAPI stand-in's resync in the benchmark (real seconds, not scaled).
/// Every watch event already triggers its reconcile; a 5 s resync (the
/// tests') re-reconciled 1,000 Machines 200 times a second in objects-1000,
/// most of it on copies the lagging watch had not yet refreshed, each
/// rewriting what had already been written.
const STANDIN_RESYNC: Duration = Duration::from_secs(60);

/// A fresh environment for the scenario's datacenters.
async fn start_env(sc: &Scenario, opts: &RunOptions) -> Result<Env> {
    let mut eo = EnvOptions::new(&format!("bench-{}", sc.name));
    eo.time_scale = sc.time_scale(opts);
    eo.seed = opts.seed;
    eo.sim = Some(fleet::sim_config(sc.datacenters, sc.nodes)?);
    eo.wait_floor = opts.phase_timeout;
    eo.log_level = "info".into();
    eo.controller_args = opts.controller_args.clone();
    eo.keep_workdir = opts.keep_workdir;
    eo.standin_resync = STANDIN_RESYNC;
    let env = Env::start(eo).await?;
    if opts.keep_workdir {
        eprintln!(
            "bench: {}: controller log {}",
            sc.name,
            env.controller_log().display()
        );
    }
    Ok(env)
}

/// The controller handles the benchmark reads.
struct Probe {
    pid: String,
    metrics: String,
    ticks: u64,
    /// `VmRSS` before the workload cluster was applied, KiB.
    idle_rss_kib: u64,
}

impl Probe {
    fn process(&self) -> Result<ProcessFigures> {
        measure::process(&self.pid, self.ticks)
    }
}

/// How long after its metrics endpoint answered the controller's idle
/// resident set is read (its watches have listed the empty namespace).
const IDLE_SETTLE: Duration = Duration::from_secs(1);

/// Applies the workload cluster and waits for its control-plane machine
/// (provisioned, Node joined) and a quiet simulator.
async fn prepare(env: &mut Env, name: &str, opts: &RunOptions, started: Instant) -> Result<Probe> {
    let pid = env
        .controller_pid()
        .ok_or_else(|| E2eError::Controller("not running".into()))?;
    let metrics = measure::metrics_address(&env.controller_log(), Duration::from_secs(60)).await?;
    // Idle: the manager up (watches started on empty lists), nothing of
    // the workload cluster applied yet.
    tokio::time::sleep(IDLE_SETTLE).await;
    let ticks = measure::clock_ticks();
    let idle = measure::process(&pid.to_string(), ticks)?;
    let probe = Probe {
        pid: pid.to_string(),
        metrics,
        ticks,
        idle_rss_kib: idle.rss_kib,
    };
    let say = |what: &str| {
        eprintln!(
            "bench: {name}: {what} ({:.1} s)",
            started.elapsed().as_secs_f64()
        )
    };
    say("environment up");
    let docs = fleet::manifests(env)?;
    fleet::apply(env, &docs).await?;
    let need_node = env.nodes_join();
    env.wait_machines(
        "the control-plane machine provisioned and its Node joined",
        opts.phase_timeout,
        |rows| rows.iter().any(|r| r.control_plane && r.up(need_node)),
    )
    .await?;
    wait_quiet(env, opts.phase_timeout).await?;
    say("control plane up");
    Ok(probe)
}

/// The scenario's phases: workers up (and back to zero), measured. The
/// controller figures, leftovers and total are filled in by the caller.
async fn measure(
    env: &mut Env,
    sc: &Scenario,
    probe: &Probe,
    opts: &RunOptions,
    started: Instant,
) -> Result<Outcome> {
    let say = |what: &str| {
        eprintln!(
            "bench: {}: {what} ({:.1} s)",
            sc.name,
            started.elapsed().as_secs_f64()
        )
    };
    say("scaling the workers");
    let tracker = Tracker::start(env.client.clone(), &env.namespace, &fleet::worker_prefix());
    let dcs: Vec<String> = env
        .pve
        .clusters()
        .iter()
        .map(|c| c.name().to_string())
        .collect();
    let up_targets: Vec<(String, usize)> = dcs
        .iter()
        .cloned()
        .zip(sc.workers.iter().copied())
        .collect();
    let window = sc
        .provisioning_window
        .map(|s| Duration::from_secs_f64(s * sc.time_scale(opts)));
    let up = phase(env, &tracker, probe, &up_targets, true, window, opts).await?;
    say("scale-up measured");
    let placements = fleet::placements(env);
    let lower_bound = if up.reached == up.machines {
        Some(lower_bound_of(env, &placements)?)
    } else {
        None
    };
    let (replace, replace_bound) = if sc.replace_percent > 0 && up.reached == up.machines {
        say("replacing workers");
        let (p, lb) = replace(env, &tracker, probe, &dcs, sc.replace_percent, opts).await?;
        say("replacement measured");
        (Some(p), lb)
    } else {
        (None, None)
    };
    let down = if sc.scale_down {
        tracker.forget_gone();
        let zero: Vec<(String, usize)> = dcs.iter().map(|d| (d.clone(), 0)).collect();
        Some(phase(env, &tracker, probe, &zero, false, None, opts).await?)
    } else {
        None
    };
    tracker.stop();
    Ok(Outcome {
        scenario: sc.clone(),
        up,
        replace,
        replace_bound,
        down,
        lower_bound,
        placements,
        controller: ProcessFigures::default(),
        idle_rss_kib: 0,
        leftovers: Leftovers::default(),
        leftovers_when: LeftoversWhen::ClusterDeleted,
        total: Duration::ZERO,
        time_scale: sc.time_scale(opts),
    })
}

/// Counts what is left beyond `baseline` (every [`TEARDOWN_POLL`]) until
/// nothing is, or `timeout` passed, and answers the last count. Deletion
/// goes on while it waits (after a scale-down the IPAM stand-in removes
/// addresses a moment after their claims).
///
/// # Errors
/// A failed LIST, or the controller process gone.
async fn wait_leftovers(
    env: &mut Env,
    baseline: &Leftovers,
    timeout: Duration,
) -> Result<Leftovers> {
    let start = Instant::now();
    loop {
        let l = leftovers(env).await?.beyond(baseline);
        if l.is_clean() || start.elapsed() >= timeout {
            return Ok(l);
        }
        env.check_controller()?;
        tokio::time::sleep(TEARDOWN_POLL).await;
    }
}

/// Every simulated datacenter's call log, merged.
fn sim_calls(env: &Env) -> CallLog {
    let mut all = CallLog::default();
    for c in env.pve.clusters() {
        let l = c.calls();
        all.total += l.total;
        all.errors += l.errors;
        for (k, v) in l.by_endpoint {
            *all.by_endpoint.entry(k).or_default() += v;
        }
    }
    all
}

/// The counters a phase starts from: the call logs reset, the controller's
/// metrics and both processes' CPU read.
struct Mark {
    metrics: Counters,
    controller: ProcessFigures,
    bench: ProcessFigures,
    at: Instant,
}

impl Mark {
    async fn take(env: &Env, probe: &Probe) -> Result<Mark> {
        for c in env.pve.clusters() {
            c.reset_calls();
        }
        Ok(Mark {
            metrics: measure::scrape(&probe.metrics).await?,
            controller: probe.process()?,
            bench: measure::process("self", probe.ticks)?,
            at: Instant::now(),
        })
    }

    /// The phase from this mark to now (the caller has waited for the
    /// simulators to settle).
    async fn finish(
        self,
        env: &Env,
        probe: &Probe,
        kind: PhaseKind,
        machines: usize,
        reached: usize,
        wall: Duration,
    ) -> Result<Phase> {
        let settled = self.at.elapsed();
        let m1 = measure::scrape(&probe.metrics).await?;
        let c1 = probe.process()?;
        let b1 = measure::process("self", probe.ticks)?;
        Ok(Phase {
            kind,
            machines,
            reached,
            wall,
            first_machine: None,
            sim_calls: sim_calls(env),
            controller: m1.since(&self.metrics),
            controller_cpu: c1.cpu.saturating_sub(self.controller.cpu),
            bench_cpu: b1.cpu.saturating_sub(self.bench.cpu),
            settled,
            per_machine: Vec::new(),
        })
    }
}

/// One phase: reset the call logs, read the counters, scale each
/// datacenter's MachineDeployment, wait for the watch to report every
/// worker provisioned (`up`) or gone, wait until the simulator is quiet,
/// read again.
async fn phase(
    env: &mut Env,
    tracker: &Tracker,
    probe: &Probe,
    targets: &[(String, usize)],
    up: bool,
    window: Option<Duration>,
    opts: &RunOptions,
) -> Result<Phase> {
    let machines = if up {
        targets.iter().map(|(_, n)| n).sum()
    } else {
        tracker.counts().live
    };
    let mark = Mark::take(env, probe).await?;
    let t0 = mark.at;
    for (dc, n) in targets {
        scenario::scale_machine_deployment(
            &env.client,
            &env.namespace,
            &fleet::machine_deployment(dc),
            i32::try_from(*n).unwrap_or(i32::MAX),
        )
        .await?;
    }
    let limit = window.unwrap_or(opts.phase_timeout).min(opts.phase_timeout);
    let what = if up {
        format!("{machines} workers provisioned")
    } else {
        format!("{machines} workers deleted")
    };
    let (end, reached) = loop {
        env.check_controller()?;
        let c = tracker.counts();
        if up && c.live == machines && c.provisioned == machines {
            break (tracker.all_provisioned_at(), machines);
        }
        if !up && c.live == 0 {
            break (tracker.all_gone_at(), machines);
        }
        if t0.elapsed() >= limit {
            if window.is_some() {
                break (
                    Some(Instant::now()),
                    if up { c.provisioned } else { machines - c.live },
                );
            }
            return Err(timeout(env, what, t0, c));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let wall = end
        .unwrap_or_else(Instant::now)
        .saturating_duration_since(t0);
    if window.is_none() {
        wait_quiet(env, opts.phase_timeout).await?;
    }
    let kind = if up {
        PhaseKind::ScaleUp
    } else {
        PhaseKind::ScaleDown
    };
    let p = mark
        .finish(env, probe, kind, machines, reached, wall)
        .await?;
    Ok(if up { p.with_creations(tracker, t0) } else { p })
}

/// pve-sim's lower bound for the VMs as placed.
fn lower_bound_of(
    env: &Env,
    placements: &BTreeMap<String, BTreeMap<String, u32>>,
) -> Result<LowerBound> {
    env.pve
        .lower_bound(&fleet::lower_bound_requests(env, placements))
        .map_err(|e| E2eError::Sim(e.to_string()))
}

/// A phase that ran out of time, with what the watch saw and the
/// controller's log tail.
fn timeout(env: &Env, what: String, t0: Instant, c: super::track::Counts) -> E2eError {
    E2eError::Timeout {
        what,
        after: t0.elapsed(),
        last_seen: format!(
            "{} workers, {} provisioned\n--- controller log (last 40 lines) ---\n{}",
            c.live,
            c.provisioned,
            env.controller_log_tail(40)
        ),
    }
}

/// The workers a replacement of `percent` % deletes: in each datacenter
/// the first `ceil(live × percent / 100)` of its live workers by name
/// (`live` sorted; names are `<machine deployment>-…`).
pub fn pick_for_replacement(live: &[String], dcs: &[String], percent: u32) -> Vec<String> {
    let mut out = Vec::new();
    for dc in dcs {
        let prefix = format!("{}-", fleet::machine_deployment(dc));
        let of_dc: Vec<&String> = live.iter().filter(|n| n.starts_with(&prefix)).collect();
        let n = (of_dc.len() * percent as usize).div_ceil(100);
        out.extend(of_dc.into_iter().take(n).cloned());
    }
    out
}

/// The rolling replacement: [`pick_for_replacement`] chooses the workers,
/// their CAPI Machines are deleted (the Machine controller deletes each
/// ProxmoxMachine, the provider its VM), and their MachineSets create a
/// new Machine for each. The phase ends when every chosen worker is gone
/// and every live one is provisioned; its lower bound is pve-sim's for the
/// new machines as placed.
async fn replace(
    env: &mut Env,
    tracker: &Tracker,
    probe: &Probe,
    dcs: &[String],
    percent: u32,
    opts: &RunOptions,
) -> Result<(Phase, Option<LowerBound>)> {
    tracker.forget_gone();
    let live = tracker.live_names();
    let machines = live.len();
    let victims = pick_for_replacement(&live, dcs, percent);
    let mark = Mark::take(env, probe).await?;
    let t0 = mark.at;
    let api: Api<Machine> = Api::namespaced(env.client.clone(), &env.namespace);
    for name in &victims {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let what = format!("{} workers replaced", victims.len());
    let end = loop {
        env.check_controller()?;
        let c = tracker.counts();
        if let Some(gone) = tracker.all_gone_of(&victims)
            && c.live == machines
            && c.provisioned == machines
        {
            break tracker.all_provisioned_at().map_or(gone, |p| p.max(gone));
        }
        if t0.elapsed() >= opts.phase_timeout {
            return Err(timeout(env, what, t0, c));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    wait_quiet(env, opts.phase_timeout).await?;
    let created: std::collections::BTreeSet<String> = tracker
        .live_names()
        .into_iter()
        .filter(|n| !live.contains(n))
        .collect();
    let placed = fleet::placements_of(env, |n| created.contains(n));
    let bound = lower_bound_of(env, &placed)?;
    let wall = end.saturating_duration_since(t0);
    let p = mark
        .finish(
            env,
            probe,
            PhaseKind::Replace,
            victims.len(),
            victims.len(),
            wall,
        )
        .await?;
    Ok((p.with_creations(tracker, t0), Some(bound)))
}

/// Waits until no task runs in any simulated datacenter and no ISO is left
/// (the seed ISOs are deleted when a machine is provisioned).
async fn wait_quiet(env: &Env, timeout: Duration) -> Result<()> {
    let start = Instant::now();
    loop {
        let running: usize = env
            .pve
            .clusters()
            .iter()
            .map(|c| c.tasks().iter().filter(|t| t.status == "running").count())
            .sum();
        let isos: usize = observe::iso_counts(&env.pve).values().sum();
        if running == 0 && isos == 0 {
            return Ok(());
        }
        if start.elapsed() >= timeout {
            return Err(E2eError::Timeout {
                what: "the simulated datacenters to settle".into(),
                after: start.elapsed(),
                last_seen: format!("{running} tasks running, {isos} ISOs"),
            });
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Deletes the Cluster, waits (bounded) until its machines are gone, and
/// counts what is left. Checks every [`TEARDOWN_POLL`]: each check LISTs
/// claims, addresses and ProxmoxMachines from kube-sim (3,000 objects at the
/// 1,000-machine scale), which must not compete with the deletion itself.
async fn teardown(env: &mut Env, timeout: Duration) -> Result<Leftovers> {
    let api: Api<Cluster> = Api::namespaced(env.client.clone(), &env.namespace);
    match api.delete(fleet::CLUSTER, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(e.into()),
    }
    wait_leftovers(env, &Leftovers::default(), timeout).await
}

/// How often the teardown counts what is left.
const TEARDOWN_POLL: Duration = Duration::from_secs(2);

async fn leftovers(env: &Env) -> Result<Leftovers> {
    let count = |api_version: &'static str, kind: &'static str| {
        let client = env.client.clone();
        let ns = env.namespace.clone();
        async move {
            scenario::list(&client, &ns, api_version, kind)
                .await
                .map(|l| l.len())
        }
    };
    Ok(Leftovers {
        vms: observe::vm_counts(&env.pve).values().sum(),
        isos: observe::iso_counts(&env.pve).values().sum(),
        claims: count("ipam.cluster.x-k8s.io/v1beta2", "IPAddressClaim").await?,
        addresses: count("ipam.cluster.x-k8s.io/v1beta2", "IPAddress").await?,
        machines: count("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxMachine").await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_takes_the_first_workers_of_each_datacenter() {
        let live: Vec<String> = [
            "bench-md-dc-a-x-1",
            "bench-md-dc-a-x-2",
            "bench-md-dc-a-x-3",
            "bench-md-dc-b-y-1",
            "bench-md-dc-b-y-2",
            "bench-control-plane-z",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let dcs = vec!["dc-a".to_string(), "dc-b".to_string(), "dc-c".to_string()];
        // 10 % of 3 rounds up to 1, of 2 to 1; dc-c has none.
        assert_eq!(
            pick_for_replacement(&live, &dcs, 10),
            vec!["bench-md-dc-a-x-1", "bench-md-dc-b-y-1"]
        );
        assert_eq!(pick_for_replacement(&live, &dcs, 50).len(), 2 + 1);
        assert_eq!(pick_for_replacement(&live, &dcs, 100).len(), 5);
        assert!(pick_for_replacement(&live, &dcs, 0).is_empty());
    }
}
