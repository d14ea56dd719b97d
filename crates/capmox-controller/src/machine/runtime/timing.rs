//! When to look at a Proxmox task again.
//!
//! Tasks are awaited efficiently, not polled in a tight loop: the machine
//! records the task's UPID in `status.taskRef` and requeues at its expected
//! completion. Expected durations are learned per (Proxmox cluster identity,
//! operation) from observed ones with an exponentially weighted moving
//! average, starting from configured guesses; a poll that finds the task still
//! running backs off in short steps (a tenth of the expectation, doubling,
//! capped at half of it).
//!
//! Durations here are real (already time-scaled): the simulator's scaled task
//! times are learned as they are.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::clients::Identity;
pub use crate::machine::decide::Operation;

/// The initial guess of an operation's duration before anything was
/// observed.
pub fn default_guess(op: Operation) -> Duration {
    guess(op)
}

/// The initial guess before anything was observed, **unscaled seconds**
/// (Proxmox's typical durations: a full clone of a 20 GiB template takes
/// about a minute, a config write a second, a boot to the guest agent
/// under two minutes; an agent `exec` of `cat` well under a second). The
/// bootstrap's guess is as short as an `exec` on purpose: until a
/// duration was learned the sentinel is checked as soon as the
/// addresses are there (images with everything baked in bootstrap in
/// seconds), then re-checked at the bounded cadence of
/// [`bootstrap_recheck`].
fn guess(op: Operation) -> Duration {
    Duration::from_secs(match op {
        Operation::Clone => 60,
        Operation::Configure
        | Operation::Upload
        | Operation::DeleteVolume
        | Operation::AgentExec
        | Operation::Bootstrap => 1,
        Operation::Resize | Operation::Stop => 2,
        Operation::Start | Operation::Destroy => 3,
        Operation::Shutdown => 10,
        Operation::Boot => 100,
    })
}

/// How far past its expected end a task is first polled (a fraction of
/// the expectation): small, since [`observation`] keeps expectations from
/// creeping above the real durations.
pub const MARGIN: f64 = 0.01;

/// Width of the poll grid, a fraction of the expected duration: task polls
/// are moved to the next grid line ([`on_grid`]), so the polls of tasks
/// ending close together on one node fall on the same instant and one
/// read of the node's task list answers them all
/// (see [`super::node_tasks`]). With [`MARGIN`] a task is first polled
/// 1–3 % after its expected end, 2 % on average.
pub const GRID: f64 = 0.02;

/// `delay` from `now`, lengthened so that it ends on a line of a grid of
/// width `grid` (lines at whole multiples of `grid` since `origin`, the
/// runtime's start). A zero `grid` leaves `delay` as it is.
pub fn on_grid(origin: Instant, now: Instant, delay: Duration, grid: Duration) -> Duration {
    let g = grid.as_nanos();
    if g == 0 {
        return delay;
    }
    let at = (now + delay).saturating_duration_since(origin).as_nanos();
    let rest = (g - at % g) % g;
    delay + Duration::from_nanos(u64::try_from(rest).unwrap_or(0))
}

/// Weight of a new observation in the average.
pub const ALPHA: f64 = 0.3;

/// When to poll next: `expected − elapsed` while the task should still run
/// (plus 2 % so the poll lands just after the end); afterwards short steps
/// of a tenth of the expectation doubling per extra poll, capped at half of
/// it and at least `floor`.
pub fn next_poll(
    expected: Duration,
    elapsed: Duration,
    late_polls: u32,
    floor: Duration,
) -> Duration {
    if elapsed < expected {
        let remaining = expected - elapsed;
        return (remaining + expected.mul_f64(MARGIN)).max(floor);
    }
    let step = expected
        .mul_f64(0.1)
        .saturating_mul(1u32 << late_polls.min(16));
    step.min(expected.mul_f64(0.5)).max(floor)
}

/// What a finished task says about its duration, for [`TaskTimer::observe`].
///
/// Proxmox's task status has no end time, so the end is only bracketed by
/// polls: after the last poll that found the task running (`seen_running`,
/// since issue) and no later than the poll that found it done (`took`).
/// With a bracket its middle is learned. Found done on the first poll,
/// `took` is only an upper bound — learning it would let the expectation
/// creep up by the poll's margin on every task — so a value a little below
/// the current expectation is learned instead: expectations drift down until
/// a poll comes early, and that poll's bracket corrects them.
pub fn observation(took: Duration, seen_running: Option<Duration>, expected: Duration) -> Duration {
    match seen_running {
        Some(p) if p < took => p + (took - p) / 2,
        _ => took.min(expected).mul_f64(0.97),
    }
}

/// When to check the bootstrap sentinel again after a check that did not
/// say `success`: not before the expected end of the bootstrap
/// (`expected − elapsed`), else `min` doubling with each failed check
/// (`failed` ≥ 1), always within `[min, max]` — so a bootstrap that hangs
/// costs one check every `max` at most, never a tight loop.
pub fn bootstrap_recheck(
    expected: Duration,
    elapsed: Duration,
    failed: u32,
    min: Duration,
    max: Duration,
) -> Duration {
    let max = max.max(min);
    let backoff = min.saturating_mul(1u32 << failed.saturating_sub(1).min(16));
    let until_expected = expected.saturating_sub(elapsed);
    backoff.max(until_expected).clamp(min, max)
}

/// An operation in one Proxmox cluster: the key of a learned duration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct OpKey {
    identity: Identity,
    op: Operation,
}

/// Learned durations per (identity, operation).
#[derive(Debug)]
pub struct TaskTimer {
    scale: f64,
    learned: Mutex<HashMap<OpKey, f64>>,
    origin: Instant,
}

impl TaskTimer {
    /// A timer whose initial guesses are [`default_guess`] ×
    /// `time_scale`.
    pub fn new(time_scale: f64) -> TaskTimer {
        TaskTimer {
            scale: if time_scale.is_finite() && time_scale > 0.0 {
                time_scale
            } else {
                1.0
            },
            learned: Mutex::new(HashMap::new()),
            origin: Instant::now(),
        }
    }

    /// When to poll a task of `op` on `identity` expected to take
    /// `expected`, `elapsed` after it started and after `late` polls past its
    /// end: [`next_poll`], moved onto this runtime's poll grid ([`on_grid`]).
    pub fn poll_in(
        &self,
        expected: Duration,
        elapsed: Duration,
        late: u32,
        floor: Duration,
    ) -> Duration {
        let delay = next_poll(expected, elapsed, late, floor);
        on_grid(self.origin, Instant::now(), delay, expected.mul_f64(GRID))
    }

    /// The expected duration of `op` on `identity`.
    pub fn expected(&self, identity: &Identity, op: Operation) -> Duration {
        let map = self
            .learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.get(&OpKey {
            identity: identity.clone(),
            op,
        }) {
            Some(secs) => Duration::from_secs_f64(*secs),
            None => default_guess(op).mul_f64(self.scale),
        }
    }

    /// Records an observed duration (moving average with weight [`ALPHA`];
    /// the first observation replaces the guess).
    pub fn observe(&self, identity: &Identity, op: Operation, took: Duration) {
        let mut map = self
            .learned
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let v = took.as_secs_f64();
        map.entry(OpKey {
            identity: identity.clone(),
            op,
        })
        .and_modify(|avg| *avg = ALPHA * v + (1.0 - ALPHA) * *avg)
        .or_insert(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clients::Identity;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn guesses_are_scaled_then_learned() {
        let t = TaskTimer::new(0.01);
        assert_eq!(
            t.expected(&Identity::new("dc-a"), Operation::Clone),
            ms(600)
        );
        t.observe(&Identity::new("dc-a"), Operation::Clone, ms(1000));
        assert_eq!(
            t.expected(&Identity::new("dc-a"), Operation::Clone),
            ms(1000)
        );
        t.observe(&Identity::new("dc-a"), Operation::Clone, ms(2000));
        // 0.3 × 2000 + 0.7 × 1000 = 1300
        assert_eq!(
            t.expected(&Identity::new("dc-a"), Operation::Clone)
                .as_millis(),
            1300
        );
        // Per identity.
        assert_eq!(
            t.expected(&Identity::new("dc-b"), Operation::Clone),
            ms(600)
        );
    }

    #[test]
    fn polls_land_after_the_expected_end_then_back_off() {
        let floor = ms(10);
        assert_eq!(next_poll(ms(1000), ms(0), 0, floor), ms(1010));
        assert_eq!(next_poll(ms(1000), ms(900), 0, floor), ms(110));
        assert_eq!(next_poll(ms(1000), ms(1000), 0, floor), ms(100));
        assert_eq!(next_poll(ms(1000), ms(1500), 1, floor), ms(200));
        assert_eq!(
            next_poll(ms(1000), ms(2500), 3, floor),
            ms(500),
            "capped at half"
        );
        assert_eq!(next_poll(ms(20), ms(40), 0, floor), floor);
    }

    #[test]
    fn observations_never_creep_up_on_first_poll_hits() {
        // Found done on the first poll (at expected + 2 %): learn a bit less.
        assert_eq!(observation(ms(1020), None, ms(1000)), ms(970));
        // Found running at 1050 ms, done at 1150 ms: the middle.
        assert_eq!(observation(ms(1150), Some(ms(1050)), ms(1000)), ms(1100));
        // A task that really takes 1000 ms, polled as the controller does:
        // the expectation settles near it instead of growing without bound.
        // The guess (60 s × 0.02 = 1.2 s) is 20 % above the real duration.
        let t = TaskTimer::new(0.02);
        let real = ms(1000);
        let floor = ms(10);
        let mut polls = 0;
        for _ in 0..200 {
            let e = t.expected(&Identity::new("dc-a"), Operation::Clone);
            let mut at = next_poll(e, Duration::ZERO, 0, floor);
            let mut seen = None;
            let mut late = 0;
            polls += 1;
            while at < real {
                seen = Some(at);
                late += 1;
                at += next_poll(e, at, late, floor);
                polls += 1;
            }
            t.observe(
                &Identity::new("dc-a"),
                Operation::Clone,
                observation(at, seen, e),
            );
        }
        let e = t.expected(&Identity::new("dc-a"), Operation::Clone);
        assert!(e > ms(850) && e < ms(1100), "settled at {e:?}");
        assert!(polls < 280, "{polls} polls for 200 tasks");
    }

    #[test]
    fn polls_move_to_the_next_grid_line() {
        let origin = Instant::now();
        let grid = ms(100);
        // 250 ms after the origin, a poll in 100 ms (at 350) moves to 400.
        let now = origin + ms(250);
        assert_eq!(on_grid(origin, now, ms(100), grid), ms(150));
        // Already on a line: unchanged.
        assert_eq!(on_grid(origin, now, ms(50), grid), ms(50));
        // Two polls due 10 ms apart land on the same line.
        let a = now + on_grid(origin, now, ms(110), grid);
        let b = now + on_grid(origin, now, ms(120), grid);
        assert_eq!(a, b);
        assert_eq!(on_grid(origin, now, ms(37), Duration::ZERO), ms(37));
    }

    #[test]
    fn bootstrap_rechecks_are_bounded() {
        let (min, max) = (ms(5000), ms(30_000));
        // Expected in 60 s, 2 s passed: the next check at the expected end, capped.
        assert_eq!(bootstrap_recheck(ms(60_000), ms(2000), 1, min, max), max);
        assert_eq!(
            bootstrap_recheck(ms(20_000), ms(2000), 1, min, max),
            ms(18_000)
        );
        // Past the expected end: 5, 10, 20, 30, 30 s.
        let steps: Vec<Duration> = (1..=5)
            .map(|n| bootstrap_recheck(ms(1000), ms(90_000), n, min, max))
            .collect();
        assert_eq!(
            steps,
            vec![ms(5000), ms(10_000), ms(20_000), ms(30_000), ms(30_000)]
        );
        // Never below the minimum, however short the learned bootstrap.
        assert_eq!(bootstrap_recheck(ms(10), ms(9), 1, min, max), min);
        assert_eq!(bootstrap_recheck(ms(10), ms(9), 200, min, max), max);
    }

    #[test]
    fn worker_types() {
        assert_eq!(Operation::from_worker("qmclone"), Some(Operation::Clone));
        assert_eq!(Operation::from_worker("hastop"), Some(Operation::Shutdown));
        assert_eq!(Operation::from_worker("vzdump"), None);
    }

    #[test]
    fn only_our_own_power_tasks_settle_the_power_state() {
        use crate::machine::decide::Power;
        assert_eq!(Operation::power_after("qmstart"), Some(Power::Running));
        assert_eq!(Operation::power_after("qmshutdown"), Some(Power::Stopped));
        assert_eq!(Operation::power_after("qmstop"), Some(Power::Stopped));
        // An HA request ends before the HA manager acts.
        assert_eq!(Operation::power_after("hastart"), None);
        assert_eq!(Operation::power_after("hastop"), None);
        assert_eq!(Operation::power_after("qmclone"), None);
    }
}
