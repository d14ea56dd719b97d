//! Leader election on a `coordination.k8s.io/v1` Lease, with client-go's
//! semantics: lease duration, renew deadline, retry period, holder identity.
//!
//! - A candidate takes the Lease when it has no holder, or when the holder's
//!   record (holder, renew time, transitions) has not changed for the lease
//!   duration **as observed locally** (no clock comparison across machines).
//! - Writes use the Lease's `resourceVersion` (a lost race is a 409 and
//!   simply means "not leader this round").
//! - The leader renews every retry period; when no renewal succeeded for the
//!   renew deadline it gives up leadership (reports `false`) and stops — the
//!   manager then exits so two processes never act at once (a leader cut off
//!   from the API server must not keep cloning VMs).
//! - On shutdown the leader releases the Lease (empty holder, 1 s duration)
//!   so a successor takes over at once.
//!
//! `kube-lease-manager` 0.13 (kube 5) was considered: it has no renew
//! deadline (a leader whose renewals fail keeps reporting itself leader) and
//! only whole-second timing, so this small module is used instead.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::time::Instant;

/// Leader election settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Lease name (`--leader-election-id`).
    pub name: String,
    /// This process's identity (`POD_NAME`, or hostname plus a random suffix).
    pub identity: String,
    /// How long a lease is valid without renewal (written rounded up to whole seconds).
    pub lease_duration: Duration,
    /// The leader gives up when no renewal succeeded for this long (< lease duration).
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew.
    pub retry_period: Duration,
}

/// What the Lease record says, as compared between observations.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Record {
    holder: Option<String>,
    renew_time: Option<MicroTime>,
    transitions: Option<i32>,
}

fn record_of(l: &Lease) -> Record {
    let s = l.spec.clone().unwrap_or_default();
    Record {
        holder: s.holder_identity.filter(|h| !h.is_empty()),
        renew_time: s.renew_time,
        transitions: s.lease_transitions,
    }
}

/// Whether `me` may take a lease held by `holder`, whose record last changed
/// `unchanged_for` ago with the given `lease_duration`.
pub fn may_take(
    me: &str,
    holder: Option<&str>,
    unchanged_for: Duration,
    lease_duration: Duration,
) -> bool {
    match holder {
        None => true,
        Some(h) if h == me => true,
        Some(_) => unchanged_for >= lease_duration,
    }
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    cfg: LeaderConfig,
    observed: Option<(Record, Instant)>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_millis().div_ceil(1000))
        .unwrap_or(i32::MAX)
        .max(1)
}

impl LeaderElector {
    /// A candidate for the Lease `cfg.namespace/cfg.name`.
    pub fn new(kube: kube::Client, cfg: LeaderConfig) -> LeaderElector {
        LeaderElector {
            api: Api::namespaced(kube, &cfg.namespace),
            cfg,
            observed: None,
        }
    }

    /// Tries once to acquire or renew. `Ok(true)`: this process holds the
    /// Lease now.
    ///
    /// # Errors
    /// Kubernetes API failures other than a lost race (409).
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = Timestamp::now();
        let me = self.cfg.identity.clone();
        let Some(lease) = self.api.get_opt(&self.cfg.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.cfg.name.clone()),
                    namespace: Some(self.cfg.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me),
                    lease_duration_seconds: Some(seconds(self.cfg.lease_duration)),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(l) => {
                    tracing::info!(lease = %self.cfg.name, identity = %self.cfg.identity, "acquired leader lease (created)");
                    self.observed = Some((record_of(&l), Instant::now()));
                    Ok(true)
                }
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            };
        };
        let record = record_of(&lease);
        let observed_at = match &self.observed {
            Some((r, t)) if *r == record => *t,
            _ => {
                let t = Instant::now();
                self.observed = Some((record.clone(), t));
                t
            }
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let their_duration = spec
            .lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.cfg.lease_duration, Duration::from_secs);
        if !may_take(
            &me,
            record.holder.as_deref(),
            observed_at.elapsed(),
            their_duration,
        ) {
            return Ok(false);
        }
        let taking_over = record.holder.as_deref() != Some(me.as_str());
        let mut new_spec = spec;
        if taking_over {
            new_spec.acquire_time = Some(MicroTime(now));
            new_spec.lease_transitions =
                Some(new_spec.lease_transitions.unwrap_or(0) + i32::from(record.holder.is_some()));
        }
        new_spec.holder_identity = Some(me.clone());
        new_spec.lease_duration_seconds = Some(seconds(self.cfg.lease_duration));
        new_spec.renew_time = Some(MicroTime(now));
        let mut updated = lease.clone();
        updated.spec = Some(new_spec);
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &updated)
            .await
        {
            Ok(l) => {
                if taking_over {
                    tracing::info!(lease = %self.cfg.name, identity = %me, previous = ?record.holder, "acquired leader lease");
                }
                self.observed = Some((record_of(&l), Instant::now()));
                Ok(true)
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Releases the Lease if this process holds it (empty holder, 1 s
    /// duration), so a successor need not wait for expiry.
    ///
    /// # Errors
    /// Kubernetes API failures (a lost race is not one).
    pub async fn release(&mut self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.cfg.name).await? else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.cfg.identity.as_str()) {
            return Ok(());
        }
        let mut updated = lease.clone();
        updated.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            renew_time: Some(MicroTime(Timestamp::now())),
            ..spec
        });
        match self
            .api
            .replace(&self.cfg.name, &PostParams::default(), &updated)
            .await
        {
            Ok(_) => {
                tracing::info!(lease = %self.cfg.name, "released leader lease");
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Campaigns until leading, reports `true` on `leading`, renews, and
    /// reports `false` and returns when leadership is lost (renew deadline
    /// passed or another holder took over). When `stop` resolves, releases
    /// the Lease if held and returns.
    pub async fn run(
        mut self,
        leading: tokio::sync::watch::Sender<bool>,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        let retry = self.cfg.retry_period;
        let mut leader = false;
        let mut last_renew = Instant::now();
        loop {
            if leader {
                tokio::select! {
                    () = &mut stop => break,
                    () = tokio::time::sleep(retry) => {}
                }
            }
            // Until it leads, a stop ends an attempt too: an API server that
            // accepts connections but never answers would otherwise hold the
            // shutdown until the client's connect timeout. (A leader's
            // renewal is not cut: it holds the lease, which it releases
            // below.)
            let attempt = if leader {
                self.try_acquire_or_renew().await
            } else {
                tokio::select! {
                    () = &mut stop => break,
                    a = self.try_acquire_or_renew() => a,
                }
            };
            match (leader, attempt) {
                (false, Ok(true)) => {
                    leader = true;
                    last_renew = Instant::now();
                    let _ = leading.send(true);
                }
                (false, Ok(false)) => {}
                (false, Err(e)) => {
                    tracing::warn!(error = %e, "leader election: cannot read or write the lease")
                }
                (true, Ok(true)) => last_renew = Instant::now(),
                (true, Ok(false)) => {
                    tracing::error!(lease = %self.cfg.name, "leader lease taken by another process; stepping down");
                    let _ = leading.send(false);
                    return;
                }
                (true, Err(e)) => {
                    tracing::warn!(error = %e, "leader election: renewing the lease failed");
                    if last_renew.elapsed() >= self.cfg.renew_deadline {
                        tracing::error!(lease = %self.cfg.name, "leader lease not renewed within the renew deadline; stepping down");
                        let _ = leading.send(false);
                        return;
                    }
                }
            }
            if !leader {
                tokio::select! {
                    () = &mut stop => break,
                    () = tokio::time::sleep(retry) => {}
                }
            }
        }
        if leader {
            if let Err(e) = self.release().await {
                tracing::warn!(error = %e, "could not release the leader lease");
            }
            let _ = leading.send(false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn who_may_take_the_lease() {
        let d = Duration::from_secs(15);
        assert!(may_take("a", None, Duration::ZERO, d));
        assert!(may_take("a", Some("a"), Duration::ZERO, d));
        assert!(!may_take("a", Some("b"), Duration::from_secs(14), d));
        assert!(may_take("a", Some("b"), Duration::from_secs(15), d));
    }

    #[test]
    fn durations_round_up_to_seconds() {
        assert_eq!(seconds(Duration::from_millis(1)), 1);
        assert_eq!(seconds(Duration::from_millis(1500)), 2);
        assert_eq!(seconds(Duration::from_secs(15)), 15);
        assert_eq!(seconds(Duration::ZERO), 1);
    }
}
