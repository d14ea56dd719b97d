//! `make bench`: the scale benchmark — how close the controller gets to
//! what Proxmox allows, and at what cost. Not a test: nothing here asserts
//! a time; it measures and reports.
//!
//! Every scenario runs in an environment of its own, or shared with the
//! scenarios of the same datacenters before it (see [`shared_groups`]) —
//! the e2e machinery of
//! [`crate::env`]: pve-sim with pve-sim's realistic task durations under a
//! time scale, kube-sim, the CAPI stand-in and the real controller binary
//! with the same `--time-scale` — scales MachineDeployments the way
//! `kubectl scale` does (`spec.replicas`), and measures:
//!
//! - wall time from the scale request to every worker ProxmoxMachine's
//!   `status.initialization.provisioned` (and to all gone after scaling to
//!   0), from a watch ([`track`]);
//! - pve-sim's lower bound for the same fleet ([`fleet::lower_bound_requests`])
//!   and the ratio;
//! - Proxmox API calls per machine by endpoint (pve-sim's call log, reset
//!   between phases; cross-checked with the controller's own
//!   `capmox_pve_requests_total`);
//! - reconciles per machine (`capmox_reconcile_total`), controller peak RSS
//!   (`VmHWM`) and CPU seconds (`utime + stime`) ([`measure`]);
//! - leftovers after the Cluster is deleted (VMs, ISOs, claims, addresses).
//!
//! | module | owns |
//! |---|---|
//! | [`fleet`] | the simulated datacenters, the manifests, the lower-bound request |
//! | [`track`] | the watch that times provisioning and deletion |
//! | [`measure`] | `/proc` figures and the controller's `/metrics` |
//! | [`run`] | one scenario end to end |
//! | [`report`] | the table on stdout and `docs/benchmarks.md` |

pub mod clean_test;
pub mod fleet;
pub mod goals;
pub mod measure;
pub mod report;
pub mod run;
pub mod run_info;
pub mod track;

use std::time::{Duration, Instant};

pub use run::{Outcome, RunOptions, Scenario};

use crate::error::Result;

/// The scenarios, in the order they run: 3 datacenters × 4 nodes with
/// `replicas` 0 → 60 → 0 spread over the three, one datacenter only
/// 0 → 60 → 0, and 0 → 300 → 0 spread (these three share one environment,
/// the largest last so its memory does not carry into the others' peak),
/// then 0 → 1,000 → 0 over ten datacenters of eight nodes with 10 % of
/// the machines replaced at 1,000 (controller memory at 1,000
/// ProxmoxMachines, the ratio at that scale).
pub fn scenarios() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "spread-60",
            about: "3 datacenters × 4 nodes, replicas 0 → 60 → 0 (20 per datacenter)",
            datacenters: 3,
            nodes: 4,
            workers: vec![20, 20, 20],
            replace_percent: 0,
            scale_down: true,
            provisioning_window: None,
            min_phase_timeout: None,
            ratio_target: Some(1.03),
            time_scale_factor: 1.0,
        },
        Scenario {
            name: "single-60",
            about: "one datacenter only (dc-a, 4 nodes), replicas 0 → 60 → 0",
            datacenters: 3,
            nodes: 4,
            workers: vec![60, 0, 0],
            replace_percent: 0,
            scale_down: true,
            provisioning_window: None,
            min_phase_timeout: None,
            ratio_target: Some(1.10),
            time_scale_factor: 1.0,
        },
        Scenario {
            name: "spread-300",
            about: "3 datacenters × 4 nodes, replicas 0 → 300 → 0 (100 per datacenter)",
            datacenters: 3,
            nodes: 4,
            workers: vec![100, 100, 100],
            replace_percent: 0,
            scale_down: true,
            provisioning_window: None,
            min_phase_timeout: None,
            ratio_target: Some(1.10),
            time_scale_factor: 1.0,
        },
        Scenario {
            name: "spread-1000",
            about: "10 datacenters × 8 nodes, replicas 0 → 1,000 (100 per datacenter), 10 % replaced, → 0",
            datacenters: 10,
            nodes: 8,
            workers: vec![100; 10],
            replace_percent: 10,
            scale_down: true,
            provisioning_window: None,
            // 1,000 machines keep both cores busy (the simulators use about
            // three times the controller's CPU): the scale-up takes several
            // times the bound's real time.
            min_phase_timeout: Some(Duration::from_secs(900)),
            ratio_target: Some(1.15),
            // Proxmox's durations at twice the run's scale (0.5 by default:
            // a 60 s clone takes 30 s real). The lower bound is pve-sim's
            // for the same fleet in simulated seconds, so the scale does not
            // change it; it changes how much real time the simulators and
            // the controller get per simulated second. At the run's 0.25 the
            // simulators alone (kube-sim, pve-sim and the CAPI stand-in for
            // 1,000 machines, ~0.2 s of CPU per machine in spread-300) need
            // more than the bound's 41 s real on 2 cores.
            time_scale_factor: 2.0,
        },
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_datacenter_scenarios_share_one_environment() {
        let all = scenarios();
        let names: Vec<Vec<&str>> = shared_groups(&all)
            .iter()
            .map(|g| g.iter().map(|s| s.name).collect())
            .collect();
        assert_eq!(
            names,
            vec![
                vec!["spread-60", "single-60", "spread-300"],
                vec!["spread-1000"]
            ]
        );
        let only: Vec<Scenario> = all
            .iter()
            .filter(|s| s.name != "single-60")
            .cloned()
            .collect();
        assert_eq!(
            shared_groups(&only).len(),
            2,
            "a selection groups the same way"
        );
        assert!(shared_groups(&[]).is_empty());
    }
}

/// A scenario's result: what it measured, or why it failed.
#[derive(Debug)]
pub enum ScenarioResult {
    /// It ran to the end.
    Done(Box<Outcome>),
    /// It failed.
    Failed {
        /// The scenario.
        scenario: Scenario,
        /// What went wrong.
        error: String,
        /// How long it ran.
        after: Duration,
    },
}

/// Consecutive scenarios that can share one environment: the same
/// datacenters and nodes, each scaling back to zero, none with a provisioning window
/// (the control plane comes up once for them; see [`run::run_shared`]).
pub fn shared_groups(scenarios: &[Scenario]) -> Vec<&[Scenario]> {
    let shareable = |s: &Scenario| s.scale_down && s.provisioning_window.is_none();
    let mut groups = Vec::new();
    let mut start = 0;
    for i in 1..=scenarios.len() {
        let ends = i == scenarios.len()
            || !shareable(&scenarios[i])
            || !shareable(&scenarios[i - 1])
            || scenarios[i].datacenters != scenarios[i - 1].datacenters
            || scenarios[i].nodes != scenarios[i - 1].nodes
            || scenarios[i].time_scale_factor != scenarios[i - 1].time_scale_factor;
        if ends {
            groups.push(&scenarios[start..i]);
            start = i;
        }
    }
    groups
}

/// The benchmark's options.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchOptions {
    /// Scenario names to run (empty: all).
    pub only: Vec<String>,
    /// How each runs.
    pub run: RunOptions,
}

/// [`run_all`] on a multi-threaded Tokio runtime of its own, for a binary's
/// plain `main`.
///
/// The binary calls this one non-async function instead of awaiting
/// [`run_all`] itself: an `async fn`'s state machine is compiled again in
/// every crate that polls it, so a `#[tokio::main]` binary awaiting the
/// library re-compiled the whole benchmark (82 s of the release build).
///
/// # Errors
/// [`crate::E2eError::Io`] when the runtime cannot be built; otherwise as
/// [`run_all`].
pub fn run_all_blocking(opts: &BenchOptions) -> Result<Vec<ScenarioResult>> {
    crate::runtime()?.block_on(run_all(opts))
}

/// Runs the selected scenarios one after the other (a failed scenario is
/// reported and the next one runs), printing progress to stderr.
///
/// # Errors
/// [`crate::E2eError::Contract`] when a requested scenario does not exist.
pub async fn run_all(opts: &BenchOptions) -> Result<Vec<ScenarioResult>> {
    let all = scenarios();
    for name in &opts.only {
        if !all.iter().any(|s| s.name == name) {
            let names: Vec<&str> = all.iter().map(|s| s.name).collect();
            return Err(crate::E2eError::Contract(format!(
                "no scenario {name}; there are {}",
                names.join(", ")
            )));
        }
    }
    let selected: Vec<Scenario> = all
        .into_iter()
        .filter(|s| opts.only.is_empty() || opts.only.iter().any(|n| n == s.name))
        .collect();
    let mut out = Vec::new();
    for group in shared_groups(&selected) {
        let started = Instant::now();
        eprintln!("bench: {} — {}", group[0].name, group[0].about);
        let results = if group.len() == 1 {
            vec![run::run(&group[0], &group[0].options(&opts.run)).await]
        } else {
            run::run_shared(group, &group[0].options(&opts.run)).await
        };
        for (sc, r) in group.iter().zip(results) {
            match r {
                Ok(o) => {
                    eprintln!("{}", report::one_line(&o));
                    out.push(ScenarioResult::Done(Box::new(o)));
                }
                Err(e) => {
                    eprintln!(
                        "bench: {} failed after {:.0} s: {e}",
                        sc.name,
                        started.elapsed().as_secs_f64()
                    );
                    out.push(ScenarioResult::Failed {
                        scenario: sc.clone(),
                        error: e.to_string(),
                        after: started.elapsed(),
                    });
                }
            }
        }
    }
    Ok(out)
}
