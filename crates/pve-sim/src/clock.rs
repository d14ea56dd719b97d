//! The simulator's notion of time: every configured duration (simulated
//! seconds) is multiplied by the time scale before the simulator waits for it.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Converts simulated seconds into real durations and back.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Clock {
    scale: f64,
}

impl Clock {
    pub fn new(scale: f64) -> Self {
        Clock {
            scale: if scale.is_finite() && scale > 0.0 {
                scale
            } else {
                0.0
            },
        }
    }

    /// Real duration of `secs` simulated seconds.
    pub fn real(&self, secs: f64) -> Duration {
        let s = secs * self.scale;
        if s.is_finite() && s > 0.0 {
            Duration::from_secs_f64(s)
        } else {
            Duration::ZERO
        }
    }

    /// Sleeps for `secs` simulated seconds.
    pub async fn sleep(&self, secs: f64) {
        let d = self.real(secs);
        if !d.is_zero() {
            tokio::time::sleep(d).await;
        }
    }

    /// Simulated seconds elapsed since `t` (real seconds when the scale is 0).
    pub fn simulated_since(&self, t: Instant) -> u64 {
        let real = t.elapsed().as_secs_f64();
        let sim = if self.scale > 0.0 {
            real / self.scale
        } else {
            real
        };
        sim as u64
    }
}

/// Seconds since the Unix epoch (real wall clock; UPIDs and `ctime`).
pub(crate) fn epoch_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scales() {
        assert_eq!(Clock::new(0.001).real(60.0), Duration::from_millis(60));
        assert_eq!(Clock::new(0.0).real(60.0), Duration::ZERO);
        assert_eq!(Clock::new(-1.0).real(60.0), Duration::ZERO);
        assert_eq!(Clock::new(2.0).real(1.5), Duration::from_secs(3));
    }
}
