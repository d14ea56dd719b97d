//! Whether a failed probe makes an instance unready at once, or whether the
//! instance's last known good state is kept for a bounded number of probes
//! (docs/failure-domains.md, "One failed probe is not an outage").
//!
//! The rule: an instance that was ready (its previous
//! `status.instances[].ready`) stays ready — and keeps its failure domain —
//! while fewer than [`HOLD_FAILURES`] consecutive probes of it have failed.
//! The [`HOLD_FAILURES`]-th consecutive failed probe makes it unready and
//! removes its failure domain. Only probes that got no usable answer are
//! held (a 5xx, a dropped connection, a timeout: the credentials stay
//! unverified); an answer that says what is wrong — failed credentials
//! (401, 403, a missing or malformed Secret, TLS), no allowed node online,
//! the template missing — counts at once: waiting does not fix it. Nor is
//! a failure held that began right after the credentials or the instance's
//! spec changed: the state kept would be that of the old settings.
//!
//! The bound in time follows from the probe schedule
//! (`super::super::cache::Schedule`): with the default first retry of 10 s,
//! doubling, the third probe comes about 30 s after the first failure, so
//! a real outage removes the failure domain within about 30 s. A restart
//! of the controller starts the count over, but only the state last written
//! is held: an instance already unready stays so until a probe succeeds.

use super::super::probe::{CredentialState, ProbeResult};

/// Consecutive failed probes that make a ready instance unready: the first
/// `HOLD_FAILURES - 1` are held.
pub const HOLD_FAILURES: u32 = 3;

/// How the probe of one instance counts for the status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// The probe succeeded.
    Ready,
    /// The probe failed, but the instance was ready and only `failures`
    /// (< [`HOLD_FAILURES`]) consecutive probes have failed: it is still
    /// taken as ready; `message` says why and for how long.
    Held {
        /// Consecutive failed probes so far (1 = the first).
        failures: u32,
        /// "probe 1 of 3 failed: …; the instance stays ready until 3
        /// consecutive probes fail".
        message: String,
    },
    /// The probe failed and the instance is unready.
    Unready,
}

impl Health {
    /// Whether the instance counts as ready (status, failure domains,
    /// placement).
    pub fn ready(&self) -> bool {
        !matches!(self, Health::Unready)
    }
}

/// The health of one instance from its probe and whether it was ready in
/// the status last written (pure).
///
/// A failed probe without a failure count ([`ProbeResult::retry`] `None`:
/// not recorded by the probe cache) counts as the first.
pub fn health(probe: &ProbeResult, was_ready: bool) -> Health {
    if probe.ready {
        return Health::Ready;
    }
    let failures = probe.retry.map_or(1, |r| r.failures.max(1));
    let after_change = probe.retry.is_some_and(|r| r.after_change);
    if !was_ready
        || after_change
        || probe.credentials != CredentialState::Unverified
        || failures >= HOLD_FAILURES
    {
        return Health::Unready;
    }
    let why = probe.message.as_deref().unwrap_or("not ready");
    let next = probe
        .retry
        .map(|r| format!("; next probe at {}", r.at.strftime("%Y-%m-%dT%H:%M:%SZ")))
        .unwrap_or_default();
    Health::Held {
        failures,
        message: format!(
            "probe {failures} of {HOLD_FAILURES} failed: {why}; the instance stays ready until {HOLD_FAILURES} consecutive probes fail{next}"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::probe::ProbeRetry;
    use k8s_openapi::jiff::Timestamp;

    fn failed(credentials: CredentialState, failures: Option<u32>) -> ProbeResult {
        let mut p = ProbeResult::failed(credentials, "down");
        p.retry = failures.map(|failures| ProbeRetry {
            failures,
            at: Timestamp::from_second(60).unwrap(),
            after_change: false,
        });
        p
    }

    #[test]
    fn held_for_two_failed_probes_of_a_ready_instance() {
        let unreachable = CredentialState::Unverified;
        let mut ok = ProbeResult::failed(CredentialState::Valid, "");
        ok.ready = true;
        assert_eq!(health(&ok, false), Health::Ready);
        assert_eq!(
            health(&failed(unreachable, Some(1)), true),
            Health::Held {
                failures: 1,
                message: "probe 1 of 3 failed: down; the instance stays ready until 3 consecutive probes fail; next probe at 1970-01-01T00:01:00Z".into()
            }
        );
        assert!(health(&failed(unreachable, Some(2)), true).ready());
        // Not recorded by the cache: the first.
        assert!(matches!(
            health(&failed(unreachable, None), true),
            Health::Held { failures: 1, .. }
        ));
        for (p, was_ready) in [
            (failed(unreachable, Some(3)), true),
            (failed(unreachable, Some(9)), true),
            (failed(unreachable, Some(1)), false),
            (failed(CredentialState::Invalid, Some(1)), true),
            // An answer that says what is wrong (no allowed node online).
            (failed(CredentialState::Valid, Some(1)), true),
            // Right after the credentials or the spec changed: the state
            // that would be kept is the old settings'.
            (
                {
                    let mut p = failed(unreachable, Some(1));
                    if let Some(r) = p.retry.as_mut() {
                        r.after_change = true;
                    }
                    p
                },
                true,
            ),
        ] {
            assert_eq!(health(&p, was_ready), Health::Unready, "{p:?} {was_ready}");
        }
    }
}
