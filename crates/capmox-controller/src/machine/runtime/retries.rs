//! Retry state per machine and step: backoff that grows.
//!
//! A step that fails again in the same way (same step, same failure class)
//! waits longer each time: `base × 2^(n-1)`, capped at `max`, plus up to
//! 10 % jitter (derived from the machine, the step and the attempt, so
//! machines failing together spread out and a test sees the same delays
//! every run). Reconciles in between — polls, watch events, other steps'
//! observations — do not reset it. Only progress does: the step succeeding
//! ([`Retries::succeeded`]), or the machine's spec changing (a new
//! `metadata.generation`).
//!
//! Separately, reads that cannot reach the instance back off per machine
//! ([`Retries::unreachable`]); any successful read resets that.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::time::Instant;

use crate::machine::decide::{Gate, StepKind};
use crate::reasons::Reason;

/// One machine's step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RetryKey {
    uid: String,
    step: StepKind,
}

#[derive(Clone, Debug)]
struct Entry {
    class: &'static str,
    reason: Reason,
    attempts: u32,
    due: Instant,
    due_at: Timestamp,
    generation: Option<i64>,
}

/// The retry state of every machine.
#[derive(Debug)]
pub struct Retries {
    base: Duration,
    max: Duration,
    steps: Mutex<HashMap<RetryKey, Entry>>,
    unreachable: Mutex<HashMap<String, u32>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

pub use crate::backoff::delay;

impl Retries {
    /// Delays start at `base` and double per consecutive failure up to `max`
    /// (both already time-scaled).
    pub fn new(base: Duration, max: Duration) -> Retries {
        Retries {
            base,
            max,
            steps: Mutex::new(HashMap::new()),
            unreachable: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `step` of machine `uid` (class `class`, reason
    /// `reason`) and answers its gate: the same class again counts on, a
    /// new class starts over at one.
    pub fn failed(
        &self,
        uid: &str,
        step: StepKind,
        class: &'static str,
        reason: Reason,
        generation: Option<i64>,
    ) -> Gate {
        let key = RetryKey {
            uid: uid.to_string(),
            step,
        };
        let mut m = lock(&self.steps);
        let attempts = match m.get(&key) {
            Some(e) if e.class == class && e.generation == generation => e.attempts + 1,
            _ => 1,
        };
        let wait = delay(
            self.base,
            self.max,
            attempts,
            &format!("{uid}/{}", step.as_str()),
        );
        let entry = Entry {
            class,
            reason,
            attempts,
            due: Instant::now() + wait,
            due_at: Timestamp::now()
                .checked_add(k8s_openapi::jiff::SignedDuration::try_from(wait).unwrap_or_default())
                .unwrap_or_else(|_| Timestamp::now()),
            generation,
        };
        let gate = gate(step, &entry, Instant::now());
        m.insert(key, entry);
        gate
    }

    /// `step` of machine `uid` succeeded: its retry state is gone.
    pub fn succeeded(&self, uid: &str, step: StepKind) {
        lock(&self.steps).remove(&RetryKey {
            uid: uid.to_string(),
            step,
        });
    }

    /// Every retry state of machine `uid` is gone (a fresh attempt: a new VMID).
    pub fn clear(&self, uid: &str) {
        lock(&self.steps).retain(|k, _| k.uid != uid);
    }

    /// The gates of machine `uid` now. State recorded for another
    /// `generation` of the machine is dropped: the spec changed.
    pub fn gates(&self, uid: &str, generation: Option<i64>) -> Vec<Gate> {
        let now = Instant::now();
        let mut m = lock(&self.steps);
        m.retain(|k, e| k.uid != uid || e.generation == generation);
        let mut out: Vec<Gate> = m
            .iter()
            .filter(|(k, _)| k.uid == uid)
            .map(|(k, e)| gate(k.step, e, now))
            .collect();
        out.sort_by_key(|g| g.step);
        out
    }

    /// A read of machine `uid` could not reach its instance: the delay
    /// before the next look (growing per consecutive failure).
    pub fn unreachable(&self, uid: &str) -> Duration {
        let n = {
            let mut m = lock(&self.unreachable);
            let n = m.entry(uid.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        delay(self.base, self.max, n, uid)
    }

    /// A read of machine `uid` reached its instance.
    pub fn reachable(&self, uid: &str) {
        lock(&self.unreachable).remove(uid);
    }

    /// Forgets machine `uid` (deleted).
    pub fn forget(&self, uid: &str) {
        self.clear(uid);
        self.reachable(uid);
    }
}

fn gate(step: StepKind, e: &Entry, now: Instant) -> Gate {
    Gate {
        step,
        class: e.class,
        reason: e.reason.clone(),
        attempts: e.attempts,
        remaining: e.due.saturating_duration_since(now),
        due_at: e.due_at,
        fresh: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason() -> Reason {
        Reason::CloneFailed("clone task failed: out of space".into())
    }

    #[test]
    fn delays_double_cap_and_jitter_by_at_most_a_tenth() {
        let base = Duration::from_secs(1);
        let max = Duration::from_secs(300);
        let want = [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300];
        for (i, w) in want.iter().enumerate() {
            let d = delay(base, max, i as u32 + 1, "ns/m1/clone");
            let w = Duration::from_secs(*w);
            assert!(d >= w && d <= w + w / 10, "attempt {}: {d:?}", i + 1);
        }
        assert_eq!(
            delay(base, max, 3, "a"),
            delay(base, max, 3, "a"),
            "deterministic"
        );
    }

    #[tokio::test]
    async fn only_success_or_a_new_generation_resets() {
        let r = Retries::new(Duration::from_secs(1), Duration::from_secs(300));
        let g1 = r.failed("u1", StepKind::Clone, "pve_transient", reason(), Some(1));
        let g2 = r.failed("u1", StepKind::Clone, "pve_transient", reason(), Some(1));
        let g3 = r.failed("u1", StepKind::Clone, "pve_transient", reason(), Some(1));
        assert_eq!((g1.attempts, g2.attempts, g3.attempts), (1, 2, 3));
        assert!(g3.remaining >= Duration::from_secs(4));
        // Reading the gates (a poll) changes nothing.
        assert_eq!(r.gates("u1", Some(1))[0].attempts, 3);
        assert_eq!(r.gates("u1", Some(1))[0].attempts, 3);
        // Another class starts over.
        let other = r.failed("u1", StepKind::Clone, "lock_timeout", reason(), Some(1));
        assert_eq!(other.attempts, 1);
        // Other machines and steps are independent.
        assert!(r.gates("u2", Some(1)).is_empty());
        r.failed("u1", StepKind::Start, "pve_transient", reason(), Some(1));
        assert_eq!(r.gates("u1", Some(1)).len(), 2);
        // Success of the step resets it.
        r.succeeded("u1", StepKind::Clone);
        assert_eq!(r.gates("u1", Some(1)).len(), 1);
        // A spec change (new generation) resets the rest.
        assert!(r.gates("u1", Some(2)).is_empty());
    }

    #[test]
    fn unreachable_reads_back_off_until_one_succeeds() {
        let r = Retries::new(Duration::from_secs(1), Duration::from_secs(300));
        let a = r.unreachable("u1");
        let b = r.unreachable("u1");
        let c = r.unreachable("u1");
        assert!(a < b && b < c, "{a:?} {b:?} {c:?}");
        r.reachable("u1");
        assert!(r.unreachable("u1") < Duration::from_millis(1100));
    }
}
