//! Per-object retry backoff: kube-runtime's `Controller` has none built in,
//! so the error policy asks this table how long to wait after the N-th
//! consecutive failure of one object, and a successful reconcile resets it.
//!
//! [`delay`] is the one growth rule of every retry of the controller (this
//! table, a machine step's retries in
//! [`crate::machine::runtime::retries`], the probes of an unhealthy
//! instance in [`crate::cluster::cache`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Consecutive-failure counts per object key (`namespace/name`).
#[derive(Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

/// The delay after the `attempt`-th consecutive failure (1-based):
/// `base × 2^(attempt-1)` capped at `max`, plus up to 10 % jitter derived
/// from `seed` and the attempt (FNV-1a: the same delays every run and on
/// every platform, different ones for things failing together).
pub fn delay(base: Duration, max: Duration, attempt: u32, seed: &str) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
    let capped = exp.min(max);
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in seed.bytes().chain(attempt.to_le_bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    capped + capped.mul_f64((h % 100) as f64 / 1000.0)
}

impl Backoff {
    /// Delays start at `base` and double per consecutive failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Backoff {
        Backoff {
            base,
            max,
            failures: Mutex::new(HashMap::new()),
        }
    }

    /// Records a failure of `key` and returns the delay before the next try
    /// ([`delay`] of the `n`-th consecutive failure, jitter from the key so
    /// objects failing together do not retry in lockstep).
    pub fn failed(&self, key: &str) -> Duration {
        let n = {
            let mut map = self
                .failures
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let n = map.entry(key.to_string()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        delay(self.base, self.max, n, key)
    }

    /// Forgets the failures of `key` (after a successful reconcile).
    pub fn succeeded(&self, key: &str) {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }

    /// Consecutive failures recorded for `key`.
    pub fn failures(&self, key: &str) -> u32 {
        self.failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_caps_and_resets() {
        let b = Backoff::new(Duration::from_secs(1), Duration::from_secs(10));
        let d1 = b.failed("ns/a");
        let d2 = b.failed("ns/a");
        let d3 = b.failed("ns/a");
        assert!(d1 >= Duration::from_secs(1) && d1 < Duration::from_millis(1100));
        assert!(d2 >= Duration::from_secs(2) && d2 < Duration::from_millis(2200));
        assert!(d3 >= Duration::from_secs(4) && d3 < Duration::from_millis(4400));
        for _ in 0..10 {
            b.failed("ns/a");
        }
        let capped = b.failed("ns/a");
        assert!(capped >= Duration::from_secs(10) && capped < Duration::from_secs(11));
        assert_eq!(b.failures("ns/a"), 14);
        b.succeeded("ns/a");
        assert_eq!(b.failures("ns/a"), 0);
        assert!(b.failed("ns/a") < Duration::from_millis(1100));
        // Other keys are independent.
        assert_eq!(b.failures("ns/b"), 0);
    }
}
