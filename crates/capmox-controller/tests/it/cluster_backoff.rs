//! Backoff that grows, for the cluster-level checks: an instance whose
//! probe keeps failing is probed again after `--probe-retry` (10 s)
//! doubling per failed probe up to `--backoff-max` (5 min, up to 10 %
//! jitter), however often the ProxmoxCluster is reconciled in between (its
//! machines change all the time); the `InstancesReady` condition names the
//! failed probe and when the next is due; a successful probe resets it.
//!
//! Ten minutes pass on tokio's paused clock, at time scale 1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use capmox_controller::api::ClusterMode;
use capmox_controller::context::ControllerOptions;
use k8s_openapi::jiff::Timestamp;
use pve_sim::{Fault, FaultKind};
use tokio::time::Instant;

use crate::support::cluster::*;

const VERSION: &str = "/version";

/// The delay after the `n`-th consecutive failed probe, without jitter:
/// 10 s doubling, capped at 300 s (the defaults, computed here
/// independently).
fn expected_delay(n: u32) -> Duration {
    Duration::from_secs((10u64 << (n - 1).min(20)).min(300))
}

/// `(N, T)` of "dc-a: …; probe N failed; next probe at T" in a message.
fn retry_of(message: &str) -> (u32, Timestamp) {
    let (_, rest) = message
        .split_once("; probe ")
        .unwrap_or_else(|| panic!("no probe retry in {message:?}"));
    let n = rest.split_whitespace().next().unwrap().parse().unwrap();
    let (_, at) = rest.split_once("next probe at ").unwrap();
    let at = at.split(';').next().unwrap().trim();
    (n, at.parse().unwrap_or_else(|e| panic!("{at:?}: {e}")))
}

#[tokio::test(start_paused = true)]
async fn an_instance_failing_for_ten_minutes_is_probed_about_six_times() {
    let env = Env::start_with(sim_config().with_time_scale(1.0)).await;
    env.put_all_credentials().await;
    let ctx = env.context_with(ControllerOptions {
        time_scale: 1.0,
        ..ControllerOptions::default()
    });
    let dc_a = env.pve.cluster("dc-a").unwrap();
    let fault = dc_a.add_fault(Fault {
        method: Some("GET".into()),
        path: Some(VERSION.into()),
        node: None,
        probability: 1.0,
        count: None,
        kind: FaultKind::Error {
            status: 503,
            message: "service unavailable".into(),
        },
    });
    env.create_cluster(
        "wl1",
        spec(
            ClusterMode::MultiInstance,
            vec![instance("dc-a"), instance("dc-b")],
        ),
    )
    .await;
    let probes = || dc_a.calls().count("GET", VERSION);

    // A reconcile every 5 s: machine changes, Secret and Cluster events.
    let poll = Duration::from_secs(5);
    let start = Instant::now();
    let mut reconciles = 0u32;
    let mut seen: Vec<(Duration, u32, String)> = Vec::new();
    while start.elapsed() < Duration::from_secs(600) {
        let before = probes();
        let wall = Timestamp::now();
        let pc = reconcile(&env, &ctx, "wl1").await;
        reconciles += 1;
        if probes() > before {
            let (status, reason, message) = condition(&pc, "InstancesReady");
            assert_eq!(
                (status.as_str(), reason.as_str()),
                ("False", "InstancesUnavailable")
            );
            let (n, due) = retry_of(&message);
            assert_eq!(u64::from(n), probes(), "one probe per call: {message}");
            let lead = due.duration_since(wall).as_secs_f64();
            let want = expected_delay(n).as_secs_f64();
            assert!(
                lead >= want - 1.0 && lead <= want * 1.1 + 1.0,
                "probe {n}: next due in {lead} s, want {want} s + ≤10 %: {message}"
            );
            seen.push((start.elapsed(), n, message));
        }
        tokio::time::sleep(poll).await;
    }
    println!("{reconciles} reconciles in 10 simulated minutes; probes of dc-a:");
    let mut previous: Option<Duration> = None;
    for (at, n, message) in &seen {
        println!(
            "  t={:>6.1}s  probe {n}  {}  ({})",
            at.as_secs_f64(),
            previous
                .map(|p| format!("{:>6.1}s after the previous", (*at - p).as_secs_f64()))
                .unwrap_or_else(|| "        first".into()),
            message
                .split_once("; probe ")
                .map(|(_, t)| t)
                .unwrap_or(message)
        );
        previous = Some(*at);
    }
    // 10+20+40+80+160 = 310 s (+ ≤10 %), then 300 s: six probes fit
    // into ten minutes (seven with the slack of the 5 s polls).
    let n = seen.len();
    assert!((5..=7).contains(&n), "{n} probes of dc-a in 10 minutes");
    for pair in seen.windows(2) {
        let (gap, n) = (pair[1].0 - pair[0].0, pair[0].1);
        let want = expected_delay(n);
        assert!(
            gap >= want && gap <= want.mul_f64(1.1) + poll,
            "after probe {n}: {gap:?}, want {want:?} + ≤10 % + one poll"
        );
    }
    // The healthy instance kept its period (60 s): about ten probes.
    let healthy = env
        .pve
        .cluster("dc-b")
        .unwrap()
        .calls()
        .count("GET", VERSION);
    assert!((10..=11).contains(&healthy), "dc-b probed {healthy} times");

    // A successful probe resets it.
    dc_a.remove_fault(fault);
    let deadline = Instant::now() + Duration::from_secs(400);
    loop {
        let pc = reconcile(&env, &ctx, "wl1").await;
        if condition(&pc, "InstancesReady").0 == "True" {
            break;
        }
        assert!(Instant::now() < deadline, "dc-a never probed again");
        tokio::time::sleep(poll).await;
    }
    let id = dc_a.add_fault(Fault {
        method: Some("GET".into()),
        path: Some(VERSION.into()),
        node: None,
        probability: 1.0,
        count: None,
        kind: FaultKind::Error {
            status: 503,
            message: "service unavailable".into(),
        },
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let message = loop {
        let pc = reconcile(&env, &ctx, "wl1").await;
        let (status, _, message) = condition(&pc, "InstancesReady");
        if status == "False" {
            break message;
        }
        assert!(Instant::now() < deadline, "dc-a never failed again");
        tokio::time::sleep(poll).await;
    };
    // Counted from one again: the third failure after the reset ends the
    // hold (cluster::decide::hold), not the seventh of the earlier run.
    assert_eq!(
        retry_of(&message).0,
        capmox_controller::cluster::decide::hold::HOLD_FAILURES,
        "counted from one again: {message}"
    );
    dc_a.remove_fault(id);
}
