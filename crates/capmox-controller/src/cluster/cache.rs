//! Probe results kept between reconciles, so the many reconciles triggered
//! by machine changes do not probe Proxmox again, and so re-probing follows
//! a schedule: a healthy instance is probed every `probe_period`, an
//! unhealthy one after `unhealthy_retry`, doubling per consecutive failed
//! probe up to `probe_period`.
//!
//! A cached result is used only while it is fresh **and** was taken with the
//! same client (a rotated credentials Secret builds a new client) and the
//! same instance spec; anything else probes again at once.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

use super::probe::ProbeResult;
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
}

/// When to probe again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// Period for healthy instances.
    pub healthy: Duration,
    /// First retry for an unhealthy instance (doubles per failed probe, capped at `healthy`).
    pub unhealthy: Duration,
}

impl Schedule {
    /// The delay after the `failures`-th consecutive failed probe (0 = healthy).
    pub fn delay(&self, failures: u32) -> Duration {
        if failures == 0 {
            return self.healthy;
        }
        let factor = 1u32
            .checked_shl(failures.saturating_sub(1).min(20))
            .unwrap_or(u32::MAX);
        self.unhealthy.saturating_mul(factor).min(self.healthy)
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

    /// Records a new result; returns when to probe again.
    pub fn record(
        &self,
        key: ProbeKey,
        api: Arc<dyn ProxmoxApi>,
        spec: InstanceSpec,
        result: ProbeResult,
        now: Instant,
        schedule: Schedule,
    ) -> Instant {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let failures = if result.ready {
            0
        } else {
            entries
                .get(&key)
                .map_or(0, |c| c.failures)
                .saturating_add(1)
        };
        let expires = now + schedule.delay(failures);
        entries.insert(
            key,
            Cached {
                api,
                spec,
                result,
                expires,
                failures,
            },
        );
        expires
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
        };
        assert_eq!(s.delay(0), Duration::from_secs(60));
        assert_eq!(s.delay(1), Duration::from_secs(10));
        assert_eq!(s.delay(2), Duration::from_secs(20));
        assert_eq!(s.delay(3), Duration::from_secs(40));
        assert_eq!(s.delay(4), Duration::from_secs(60));
        assert_eq!(s.delay(40), Duration::from_secs(60));
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
        let b = mk("https://127.0.0.1:9");
        let cache = ProbeCache::default();
        let key: ProbeKey = ("ns".into(), "wl1".into(), "dc-a".into());
        let spec = InstanceSpec {
            name: "dc-a".into(),
            ..InstanceSpec::default()
        };
        let sched = Schedule {
            healthy: Duration::from_secs(60),
            unhealthy: Duration::from_secs(10),
        };
        let t0 = Instant::now();
        let bad = ProbeResult::failed(CredentialState::Unverified, "down");
        assert_eq!(
            cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched),
            t0 + Duration::from_secs(10)
        );
        assert_eq!(
            cache.record(key.clone(), a.clone(), spec.clone(), bad.clone(), t0, sched),
            t0 + Duration::from_secs(20)
        );
        assert_eq!(cache.failures(&key), 2);
        assert_eq!(cache.fresh(&key, &a, &spec, t0).map(|r| r.0), Some(bad));
        // Expired, other client, other spec: not fresh.
        assert!(
            cache
                .fresh(&key, &a, &spec, t0 + Duration::from_secs(20))
                .is_none()
        );
        assert!(cache.fresh(&key, &b, &spec, t0).is_none());
        let mut other = spec.clone();
        other.nodes = vec!["pve1".into()];
        assert!(cache.fresh(&key, &a, &other, t0).is_none());
        // Success resets the failure count.
        let mut good = ProbeResult::failed(CredentialState::Valid, "x");
        good.ready = true;
        assert_eq!(
            cache.record(key.clone(), a.clone(), spec.clone(), good, t0, sched),
            t0 + Duration::from_secs(60)
        );
        assert_eq!(cache.failures(&key), 0);
        cache.forget_cluster("ns", "wl1");
        assert!(cache.fresh(&key, &a, &spec, t0).is_none());
    }
}
