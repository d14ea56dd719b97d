//! The goal table at the top of the report: issue 25's figures, one row
//! each, against the targets the project holds itself to (reported, never
//! asserted).

use std::fmt::Write as _;

use super::ScenarioResult;
use super::clean_test;
use super::report::{mark, mib};
use super::run::Outcome;
use super::run_info::RunInfo;

/// Targets this project holds itself to (reported, never asserted).
pub mod targets {
    /// PVE API calls per provisioned machine, every endpoint, polling included.
    pub const CALLS_PER_PROVISIONED: f64 = 8.0;
    /// PVE API calls per deleted machine, in every scenario.
    pub const CALLS_PER_DELETED: f64 = 3.0;
    /// Controller peak RSS at 1,000 machines, MiB.
    pub const PEAK_RSS_MIB_AT_1000: f64 = 40.0;
    /// Controller RSS with the manager up and no objects, MiB.
    pub const IDLE_RSS_MIB: f64 = 15.0;
    /// Controller CPU per reconcile (mean over the measured phases), ms.
    pub const CPU_MS_PER_RECONCILE: f64 = 0.5;
    /// The benchmark's runs (the build before them not counted), minutes.
    pub const RUN_MINUTES: f64 = 10.0;
    /// Clean `make test` (fresh clone, empty target directory), minutes.
    pub const CLEAN_TEST_MINUTES: f64 = 7.0;
}

/// The goals of the run, one row each (docs/benchmarks.md, "Goals"): the
/// ratio of the three spread scenarios, the calls per provisioned and per
/// deleted machine (the worst scenario), peak RSS at 1,000 machines, idle
/// RSS (the largest of the environments), CPU per reconcile (all measured
/// phases together), the run's wall time, and the clean `make test` of
/// `info.clean_test` (measured by `make time-clean-test`, not by this run).
pub fn goals(info: &RunInfo, results: &[ScenarioResult]) -> String {
    let done: Vec<&Outcome> = results
        .iter()
        .filter_map(|r| match r {
            ScenarioResult::Done(o) => Some(o.as_ref()),
            ScenarioResult::Failed { .. } => None,
        })
        .collect();
    let by_name = |n: &str| done.iter().copied().find(|o| o.scenario.name == n);
    let mut t = String::from("| goal | this run | target |\n|---|---:|---|\n");
    // `value`: the figure and whether it meets the target (`None`: no
    // target, no mark).
    let mut row = |goal: &str, value: Option<(String, Option<bool>)>, target: String| {
        let (v, m) = match value {
            Some((v, Some(ok))) => (v, mark(ok)),
            Some((v, None)) => (v, ""),
            None => ("not measured".to_string(), ""),
        };
        let _ = writeln!(
            t,
            "| {goal} | {v} | {} |",
            format!("{target} {m}").trim_end()
        );
    };
    for (name, what) in [
        ("spread-60", "0→60 machines, 3 DCs × 4 nodes, spread"),
        ("spread-300", "0→300 machines, same DCs"),
        ("spread-1000", "0→1,000 machines, 10 DCs × 8 nodes"),
    ] {
        let o = by_name(name);
        let target = o.and_then(|o| o.scenario.ratio_target);
        row(
            &format!("{what}: last provisioned / lower bound"),
            o.and_then(Outcome::ratio)
                .map(|r| (format!("{r:.2}"), target.map(|t| r <= t))),
            target.map_or("–".into(), |t| format!("≤ {t:.2}")),
        );
    }
    if let Some(o) = done.iter().find(|o| o.replace.is_some()) {
        let p = o.replace.as_ref().map_or(0, |p| p.machines);
        row(
            &format!(
                "{}: {p} machines ({} %) replaced at {}: last provisioned / lower bound of the replacements",
                o.scenario.name, o.scenario.replace_percent, o.up.machines
            ),
            o.replace_ratio().map(|r| (format!("{r:.2}"), None)),
            "– (no goal set)".into(),
        );
    }
    let worst = |f: &dyn Fn(&Outcome) -> Option<f64>| {
        done.iter()
            .filter_map(|o| Some((f(o)?, o.scenario.name)))
            .max_by(|a, b| a.0.total_cmp(&b.0))
    };
    row(
        "Proxmox API calls per provisioned machine, all endpoints incl. polling (worst scenario)",
        worst(&|o| {
            (o.up.reached == o.up.machines).then(|| o.up.per_machine(o.up.controller_calls()))
        })
        .map(|(c, n)| {
            (
                format!("{c:.1} ({n})"),
                Some(c <= targets::CALLS_PER_PROVISIONED),
            )
        }),
        format!("≤ {}", targets::CALLS_PER_PROVISIONED),
    );
    row(
        "Proxmox API calls per deleted machine (worst scenario)",
        worst(&|o| o.down.as_ref().map(|d| d.per_machine(d.controller_calls()))).map(|(c, n)| {
            (
                format!("{c:.1} ({n})"),
                Some(c <= targets::CALLS_PER_DELETED),
            )
        }),
        format!("≤ {} in every scenario", targets::CALLS_PER_DELETED),
    );
    row(
        "controller peak RSS at 1,000 ProxmoxMachines",
        done.iter()
            .filter(|o| o.up.machines >= 1000)
            .map(|o| mib(o.controller.peak_rss_kib))
            .max_by(f64::total_cmp)
            .map(|m| {
                (
                    format!("{m:.1} MiB"),
                    Some(m <= targets::PEAK_RSS_MIB_AT_1000),
                )
            }),
        format!("≤ {:.0} MiB", targets::PEAK_RSS_MIB_AT_1000),
    );
    row(
        "controller idle RSS (manager up, no objects; largest environment)",
        done.iter()
            .map(|o| mib(o.idle_rss_kib))
            .max_by(f64::total_cmp)
            .map(|m| (format!("{m:.1} MiB"), Some(m <= targets::IDLE_RSS_MIB))),
        format!("≤ {:.0} MiB", targets::IDLE_RSS_MIB),
    );
    let (cpu, reconciles) = done.iter().fold((0.0, 0.0), |(c, r), o| {
        (c + o.phases_cpu().as_secs_f64(), r + o.phases_reconciles())
    });
    row(
        "controller CPU per machine reconcile (mean, every measured phase)",
        (reconciles > 0.0).then(|| {
            let ms = 1000.0 * cpu / reconciles;
            (
                format!("{ms:.2} ms"),
                Some(ms <= targets::CPU_MS_PER_RECONCILE),
            )
        }),
        format!("≤ {} ms", targets::CPU_MS_PER_RECONCILE),
    );
    let minutes = info.total.as_secs_f64() / 60.0;
    row(
        "`make bench` wall time (the runs; the build before them is not counted)",
        Some((
            format!("{minutes:.1} min"),
            Some(minutes <= targets::RUN_MINUTES),
        )),
        format!("≤ {:.0} min", targets::RUN_MINUTES),
    );
    row(
        "clean `make test` (fresh clone, empty target directory: build and every test)",
        Some(clean_test::row_value(
            info.clean_test.as_ref(),
            &info.commit,
            targets::CLEAN_TEST_MINUTES,
        )),
        format!("≤ {:.0} min", targets::CLEAN_TEST_MINUTES),
    );
    t
}
