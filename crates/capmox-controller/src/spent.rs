//! Where one reconcile's wall time goes: time inside Proxmox API calls and
//! inside Kubernetes API calls, summed per reconcile.
//!
//! A reconcile runs in [`scope`]; the Proxmox client's call observer
//! ([`crate::metrics::Metrics`]) adds every call's duration with
//! [`proxmox`], and the machine reconciler wraps its Kubernetes calls in
//! [`kubernetes`]. Outside a scope both are no-ops. The sums feed
//! `capmox_machine_seconds_total` (see
//! [`crate::machine::runtime::ledger`]); nothing decides from them.
//!
//! The value lives in a Tokio task-local that is swapped in only while the
//! scoped future is polled, so the reconciles that kube-runtime polls side
//! by side in one task each keep their own sums. A caller that waits for a
//! read another reconcile makes on its behalf (a shared listing) does not
//! count that wait here.

use std::cell::Cell;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

/// Time inside API calls, per reconcile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Spent {
    /// Inside Proxmox API calls (request to whole response).
    pub proxmox: Duration,
    /// Inside Kubernetes API calls.
    pub kubernetes: Duration,
}

impl Spent {
    /// `self − earlier`, per field (never below zero).
    pub fn since(self, earlier: Spent) -> Spent {
        Spent {
            proxmox: self.proxmox.saturating_sub(earlier.proxmox),
            kubernetes: self.kubernetes.saturating_sub(earlier.kubernetes),
        }
    }

    /// Both fields added.
    pub fn total(self) -> Duration {
        self.proxmox + self.kubernetes
    }
}

tokio::task_local! {
    static SPENT: Cell<Spent>;
}

/// Runs `fut` with its own sums; answers its output and what it spent.
pub async fn scope<F: Future>(fut: F) -> (F::Output, Spent) {
    SPENT
        .scope(Cell::new(Spent::default()), async {
            let out = fut.await;
            (out, now())
        })
        .await
}

/// The sums of the current scope so far (zero outside a scope).
pub fn now() -> Spent {
    SPENT.try_with(Cell::get).unwrap_or_default()
}

/// Adds a Proxmox call of `d` to the current scope.
pub fn proxmox(d: Duration) {
    let _ = SPENT.try_with(|s| {
        let mut v = s.get();
        v.proxmox += d;
        s.set(v);
    });
}

/// Adds a Kubernetes call of `d` to the current scope.
pub fn add_kubernetes(d: Duration) {
    let _ = SPENT.try_with(|s| {
        let mut v = s.get();
        v.kubernetes += d;
        s.set(v);
    });
}

/// Runs the Kubernetes call `fut`, adding its wall time to the current scope.
pub async fn kubernetes<F: Future>(fut: F) -> F::Output {
    let started = Instant::now();
    let out = fut.await;
    add_kubernetes(started.elapsed());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn each_scope_keeps_its_own_sums() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let a = scope(async {
            proxmox(Duration::from_millis(30));
            // Suspended here while `b` runs and adds to its own sums.
            let _ = rx.await;
            add_kubernetes(Duration::from_millis(20));
            proxmox(Duration::from_millis(5));
        });
        let b = scope(async {
            add_kubernetes(Duration::from_millis(7));
            let _ = tx.send(());
        });
        let (((), sa), ((), sb)) = tokio::join!(a, b);
        assert_eq!(
            sa,
            Spent {
                proxmox: Duration::from_millis(35),
                kubernetes: Duration::from_millis(20),
            }
        );
        assert_eq!(
            sb,
            Spent {
                proxmox: Duration::ZERO,
                kubernetes: Duration::from_millis(7),
            }
        );
        assert_eq!(sa.since(sb).kubernetes, Duration::from_millis(13));
        assert_eq!(sb.since(sa).kubernetes, Duration::ZERO);
        assert_eq!(sa.total(), Duration::from_millis(55));
        // Outside a scope: nothing is kept, nothing fails.
        proxmox(Duration::from_secs(1));
        assert_eq!(now(), Spent::default());
        // The wrapper answers the call's output.
        assert_eq!(kubernetes(async { 7 }).await, 7);
    }
}
