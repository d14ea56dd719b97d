//! Backoff that grows: a step that keeps failing the same way is retried
//! after `1 s × 2^(n-1)` (capped at 5 min, up to 10 % jitter), however
//! often the machine is reconciled in between; the condition names the
//! attempt and when the next is due; only progress resets it.
//!
//! Ten minutes pass on tokio's paused clock (`start_paused`): the
//! simulator and the controller run at time scale 1, every timer fires in
//! order, and the run takes well under a second of real time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::machine::decide::StepKind;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use pve_sim::{Fault, FaultKind};
use support::*;
use tokio::time::Instant;

const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";

/// The delay before attempt `n + 1` after `n` consecutive failures, without
/// jitter: the controller's defaults (`--backoff-base 1s`, `--backoff-max
/// 5m`), computed here independently.
fn expected_delay(n: u32) -> Duration {
    Duration::from_secs((1u64 << (n - 1).min(20)).min(300))
}

/// The `T` of "next attempt at T" in a condition message.
fn next_attempt_at(message: &str) -> Timestamp {
    let (_, at) = message
        .rsplit_once("next attempt at ")
        .unwrap_or_else(|| panic!("no due time in {message:?}"));
    at.parse().unwrap_or_else(|e| panic!("{at:?}: {e}"))
}

/// The attempt number of "attempt N failed" in a condition message.
fn attempt_of(message: &str) -> u32 {
    let (_, rest) = message
        .rsplit_once("; attempt ")
        .unwrap_or_else(|| panic!("no attempt in {message:?}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_clone_failing_for_ten_minutes_is_tried_about_ten_times() {
    // pve-sim counts a guest's boot on the real clock, which the paused
    // tokio clock does not move: the guest boots at once here (this test is
    // about the clone's retries, not the boot).
    let w = world_with(WorldOptions {
        sim: fast_sim()
            .with_time_scale(1.0)
            .with_timings(|t| t.boot = 0.0),
        time_scale: 1.0,
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let fault = w.pve("dc-a").add_fault(Fault {
        method: Some("POST".into()),
        path: Some(CLONE.into()),
        node: None,
        probability: 1.0,
        count: None,
        kind: FaultKind::Error {
            status: 503,
            message: "service unavailable".into(),
        },
    });
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let uid = w.get("m1").await.unwrap().uid().unwrap();
    let clones = || w.pve("dc-a").calls().count("POST", CLONE);

    // The controller's loop, with a watch event (some other object of the
    // machine changing: its Machine, its claims, the cluster) every 15 s
    // besides the requeues the reconciles ask for.
    let poll = Duration::from_secs(15);
    let start = Instant::now();
    let end = start + Duration::from_secs(600);
    let mut next_poll = start + poll;
    let mut reconciles = 0u32;
    let mut attempts: Vec<(Duration, u32, String)> = Vec::new();
    while Instant::now() < end {
        w.fulfil_claims().await;
        let before = clones();
        let wall = Timestamp::now();
        let requeue = w.reconcile("m1").await.unwrap().unwrap();
        reconciles += 1;
        if clones() > before {
            let m = w.get("m1").await.unwrap();
            let (_, reason, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
            assert_eq!(reason, "CloneFailed", "{message}");
            let n = attempt_of(&message);
            assert_eq!(u64::from(n), clones(), "one attempt per call: {message}");
            // The condition says when the next attempt is due (seconds).
            let due = next_attempt_at(&message);
            let lead = due.duration_since(wall);
            let want = expected_delay(n);
            assert!(
                lead.as_secs_f64() >= want.as_secs_f64() - 1.0
                    && lead.as_secs_f64() <= want.as_secs_f64() * 1.1 + 1.0,
                "attempt {n}: due in {lead:?}, want {want:?} + ≤10 %: {message}"
            );
            attempts.push((start.elapsed(), n, message));
        }
        let wake = Instant::now() + requeue.unwrap_or(Duration::from_secs(300));
        let next = if next_poll <= wake {
            let at = next_poll;
            next_poll += poll;
            at
        } else {
            wake
        };
        tokio::time::sleep_until(next).await;
    }

    println!("{reconciles} reconciles in 10 simulated minutes; clone attempts:");
    let mut previous: Option<Duration> = None;
    for (at, n, message) in &attempts {
        let gap = previous.map(|p| *at - p);
        println!(
            "  t={:>6.1}s  attempt {n:>2}  {}  ({})",
            at.as_secs_f64(),
            gap.map(|g| format!("{:>6.1}s after the previous", g.as_secs_f64()))
                .unwrap_or_else(|| "        first".into()),
            message.rsplit_once("; ").map(|(_, t)| t).unwrap_or(message)
        );
        previous = Some(*at);
    }
    // 1+2+4+…+256 = 511 s (+ ≤10 %) fits ten attempts into ten minutes,
    // the eleventh would be due after 1,023 s.
    let n = attempts.len();
    assert!((8..=10).contains(&n), "{n} clone attempts in 10 minutes");
    assert!(
        reconciles as usize > 3 * n,
        "the polls in between ({reconciles} reconciles) did not cause attempts"
    );
    for pair in attempts.windows(2) {
        let (gap, n) = (pair[1].0 - pair[0].0, pair[0].1);
        let want = expected_delay(n);
        assert!(
            gap >= want && gap <= want.mul_f64(1.1) + Duration::from_secs(1),
            "after attempt {n}: {gap:?}, want {want:?} + ≤10 % (the requeue lands on the due time)"
        );
    }

    // Progress resets it: the clone succeeds at its next attempt.
    // (The clone is due up to 5 minutes later: the loop sleeps each
    // requeue out in full.)
    w.pve("dc-a").remove_fault(fault);
    let mut m = w.get("m1").await.unwrap();
    for _ in 0..300 {
        if provisioned(Some(&m)) {
            break;
        }
        w.fulfil_claims().await;
        let requeue = w.reconcile("m1").await.unwrap().unwrap();
        tokio::time::sleep(requeue.unwrap_or(Duration::from_secs(1))).await;
        m = w.get("m1").await.unwrap();
    }
    assert!(provisioned(Some(&m)), "{:?}", m.status);
    assert_eq!(clones(), n as u64 + 1, "one more call, the successful one");
    assert!(
        w.runtime()
            .retries
            .gates(&uid, m.metadata.generation)
            .iter()
            .all(|g| g.step != StepKind::Clone),
        "the clone's retry state is gone"
    );
}
