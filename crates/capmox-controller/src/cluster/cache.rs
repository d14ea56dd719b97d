//! Probe results kept between reconciles, so the many reconciles triggered
//! by machine changes do not probe Proxmox again, and so re-probing follows
//! a schedule: a healthy instance is probed every `probe_period`, an
//! unhealthy one after `unhealthy_retry`, doubling per consecutive failed
//! probe up to `backoff_max` (with jitter; polls in between reuse the
//! cached result, so they do not probe and do not reset the count; a
//! successful probe does).
//!
//! A cached result is used only while it is fresh **and** was taken with the
//! same client (a rotated credentials Secret builds a new client) and the
//! same instance spec; anything else probes again at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use tokio::time::Instant;

use super::probe::{ProbeResult, ProbeRetry};
use crate::api::InstanceSpec;
use crate::pve::ProxmoxApi;

/// `(namespace, ProxmoxCluster name, instance)`.
pub type ProbeKey = (String, String, String);

struct Cached {
    api: Arc<dyn ProxmoxApi>,
    spec: InstanceSpec,
    result: ProbeResult,
    expires: Instant,
    failures: u32,
    /// The current run of failures began right after a change of client
    /// or spec ([`ProbeRetry::after_change`]).
    after_change: bool,
}

/// When to probe again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Period for healthy instances.
    pub healthy: Duration,
    /// First retry for an unhealthy instance (doubles per failed probe,
    /// capped at `max`, with [`crate::backoff::delay`]'s jitter).
    pub unhealthy: Duration,
    /// Longest delay between two probes of an unhealthy instance (the
    /// controller's `backoff_max`): a probe that keeps failing costs about
    /// ten probes in ten minutes, not one per `healthy` period. A changed
    /// spec or credentials Secret probes again at once.
    pub max: Duration,
}

impl Schedule {
    /// The delay after the `failures`-th consecutive failed probe (0 =
    /// healthy: `healthy`); `seed` spreads instances failing together.
    pub fn delay(&self, failures: u32, seed: &str) -> Duration {
        if failures == 0 {
            return self.healthy;
        }
        crate::backoff::delay(self.unhealthy, self.max, failures, seed)
    }
}

/// Probe results per (cluster, instance).
#[derive(Default)]
pub struct ProbeCache {
    entries: Mutex<HashMap<ProbeKey, Cached>>,
}

impl std::fmt::Debug for ProbeCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeCache").finish_non_exhaustive()
    }
}

fn same_client(a: &Arc<dyn ProxmoxApi>, b: &Arc<dyn ProxmoxApi>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

impl ProbeCache {
    /// The fresh result for `key` taken with `api` and `spec`, and when it expires.
    pub fn fresh(
        &self,
        key: &ProbeKey,
        api: &Arc<dyn ProxmoxApi>,
        spec: &InstanceSpec,
        now: Instant,
    ) -> Option<(ProbeResult, Instant)> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let c = entries.get(key)?;
        (now < c.expires && same_client(&c.api, api) && c.spec == *spec)
            .then(|| (c.result.clone(), c.expires))
    }

    /// Records a new result; returns it — a failed one with its
    /// [`ProbeRetry`] (consecutive failures, when the next probe is due) —
    /// and when to probe again.
    pub fn record(
        &self,
        key: ProbeKey,
        api: Arc<dyn ProxmoxApi>,
        spec: InstanceSpec,
        mut result: ProbeResult,
        now: Instant,
        schedule: Schedule,
    ) -> (ProbeResult, Instant) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let before = entries.get(&key);
        let same = before.is_some_and(|c| same_client(&c.api, &api) && c.spec == spec);
        // A failure right after the API URL or the instance spec changed,
        // or one of a run that began so. A client rebuilt for the same URL
        // (a learnt identity, a rotated token) is no such change: failed
        // credentials count at once anyway (`decide::hold`).
        let after_change = !result.ready
            && before.is_some_and(|c| {
                c.api.origin() != api.origin()
                    || c.spec != spec
                    || (c.failures > 0 && c.after_change)
            });
        let failures = if result.ready {
            0
        } else {
            // Progress resets the count: another client (rotated
            // credentials) or another instance spec starts over.
            before
                .filter(|_| same)
                .map_or(0, |c| c.failures)
                .saturating_add(1)
        };
        let wait = schedule.delay(failures, &format!("{}/{}/{}", key.0, key.1, key.2));
        let expires = now + wait;
        result.retry = (failures > 0).then(|| ProbeRetry {
            failures,
            after_change,
            at: Timestamp::now()
                .checked_add(SignedDuration::try_from(wait).unwrap_or_default())
                .unwrap_or_else(|_| Timestamp::now()),
        });
        entries.insert(
            key,
            Cached {
                api,
                spec,
                result: result.clone(),
                expires,
                failures,
                after_change,
            },
        );
        (result, expires)
    }

    /// Consecutive failed probes of `key`.
    pub fn failures(&self, key: &ProbeKey) -> u32 {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .map_or(0, |c| c.failures)
    }

    /// Forgets every result of the ProxmoxCluster `namespace/name`.
    pub fn forget_cluster(&self, namespace: &str, name: &str) {
        self.entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(ns, n, _), _| !(ns == namespace && n == name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::probe::CredentialState;

    #[test]
    fn schedule_backs_off_and_caps() {
        let s = Schedule {
            healthy: Duration::from_secs(60),
            unhealthy: Duration::from_secs(10),
            max: Duration::from_secs(300),
        };
        assert_eq!(s.delay(0, "k"), Duration::from_secs(60));
        // 10 s doubling, capped at 300 s, plus at most 10 %.
        for (n, want) in [
            (1, 10),
            (2, 20),
            (3, 40),
            (4, 80),
            (5, 160),
            (6, 300),
            (40, 300),
        ] {
            let d = s.delay(n, "ns/wl1/dc-a");
            let want = Duration::from_secs(want);
            assert!(d >= want && d <= want + want / 10, "failure {n}: {d:?}");
        }
        assert_eq!(s.delay(3, "a"), s.delay(3, "a"), "deterministic");
    }

    #[tokio::test]
    async fn fresh_only_with_same_client_and_spec() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mk = |url: &str| -> Arc<dyn ProxmoxApi> {
            let cfg = pve_client::ClientConfig::new(
                "dc-a",
                pve_client::ApiUrl::parse(url).unwrap(),
                pve_client::Auth::token("capmox@pve!capi", "x").unwrap(),
            );
            Arc::new(pve_client::PveClient::new(cfg).unwrap())
        };
        let a = mk("https://127.0.0.1:9");
        let b = mk("https://127.0.0.1:10");
        let cache = ProbeCache::default();
        let key: ProbeKey = ("ns".into(), "wl1".into(), "dc-a".into());
        let spec = InstanceSpec {
            name: "dc-a".into(),
            ..InstanceSpec::default()
        };
        let sched = Schedule {
            healthy: Duration::from_secs(60),
            unhealthy: Duration::from_secs(10),
            max: Duration::from_secs(300),
        };
        let t0 = Instant::now();
        let bad = ProbeResult::failed(CredentialState::Unverified, "down");
        let within = |at: Instant, secs: u64| {
            let want = Duration::from_secs(secs);
            at >= t0 + want && at <= t0 + want + want / 10
        };
        let (r1, e1) = cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched);
        assert!(within(e1, 10), "{:?}", e1 - t0);
        assert_eq!(r1.retry.map(|r| r.failures), Some(1));
        // The first probe this process makes is no change of settings.
        assert_eq!(r1.retry.map(|r| r.after_change), Some(false));
        let (r2, e2) = cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched);
        assert!(within(e2, 20), "{:?}", e2 - t0);
        let retry = r2.retry.unwrap();
        assert_eq!(retry.failures, 2);
        let lead = retry.at.duration_since(Timestamp::now()).as_secs_f64();
        assert!((17.0..=22.1).contains(&lead), "next probe due in {lead} s");
        assert_eq!(cache.failures(&key), 2);
        assert_eq!(cache.fresh(&key, &a, &spec, t0).map(|r| r.0), Some(r2));
        // Another client starts the count over (and back).
        let (r, _) = cache.record(key.clone(), b.clone(), spec.clone(), bad.clone(), t0, sched);
        assert_eq!(
            r.retry.map(|r| (r.failures, r.after_change)),
            Some((1, true))
        );
        let (r, _) = cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched);
        assert_eq!(
            r.retry.map(|r| (r.failures, r.after_change)),
            Some((1, true))
        );
        // The run that began after the change stays marked so.
        let (r2, e2) = cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched);
        assert_eq!(
            r2.retry.map(|r| (r.failures, r.after_change)),
            Some((2, true))
        );
        // Expired, other client, other spec: not fresh.
        assert!(cache.fresh(&key, &a, &spec, e2).is_none());
        assert!(cache.fresh(&key, &b, &spec, t0).is_none());
        let mut other = spec.clone();
        other.nodes = vec!["pve1".into()];
        assert!(cache.fresh(&key, &a, &other, t0).is_none());
        // Success resets the failure count.
        let mut good = ProbeResult::failed(CredentialState::Valid, "x");
        good.ready = true;
        let (r, e) = cache.record(key.clone(), a.clone(), spec.clone(), good, t0, sched);
        assert_eq!(e, t0 + Duration::from_secs(60));
        assert_eq!(r.retry, None);
        assert_eq!(cache.failures(&key), 0);
        cache.forget_cluster("ns", "wl1");
        assert!(cache.fresh(&key, &a, &spec, t0).is_none());
    }
}
