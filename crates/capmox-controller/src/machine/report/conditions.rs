//! The conditions a reconcile's end shows (reasons from [`Reason`]):
//! - `Paused` — `Paused` / `NotPaused`;
//! - `InstanceSelected` — `Pinned`, `FailureDomain`, `Policy`, or why no
//!   instance can be used;
//! - `IPAddressesClaimed` — `Claimed`, `NoStaticAddresses`,
//!   `WaitingForIPAddresses`, `IPAddressPoolExhausted`;
//! - `VirtualMachineProvisioned` — the step the machine is at, with a
//!   failed task's own message and when the next attempt is due;
//! - `Ready` — `True` once provisioned and well; `False` with the reason
//!   otherwise (a provisioned VM that is gone, not ours, or stopped outside
//!   the provider makes `Ready` false, which a MachineHealthCheck can act on).

use crate::conditions::{self, Desired, Status};
use crate::machine::context::Run;
use crate::machine::decide::{ClaimsFact, Facts, Retry};
use crate::reasons::{Reason, Selected};

use super::End;

/// "attempt N failed; next attempt at T" (a stable text: the time is
/// absolute, so the condition does not change between polls).
pub fn retry_text(r: &Retry) -> String {
    format!(
        "attempt {} failed; next attempt at {}",
        r.attempts,
        r.at.strftime("%Y-%m-%dT%H:%M:%SZ")
    )
}

/// The conditions to set.
pub fn desired(run: &Run<'_>, facts: &Facts, end: &End) -> Vec<Desired> {
    let mut out = vec![if facts.paused {
        Desired::new(conditions::PAUSED, Status::True, &Reason::Paused)
    } else {
        Desired::new(conditions::PAUSED, Status::False, &Reason::NotPaused)
    }];
    if let Some(e) = &facts.placement
        && !facts.provisioned
    {
        out.push(Desired::new(
            conditions::INSTANCE_SELECTED,
            Status::False,
            &Reason::InstanceNotSelected(e.clone()),
        ));
    } else if let End::Wait(w) = end
        && let Reason::InstanceNotSelected(_) = &w.reason
    {
        out.push(Desired::new(
            conditions::INSTANCE_SELECTED,
            Status::False,
            &w.reason,
        ));
    } else if let Some(i) = &facts.instance
        && !conditions::is_true(&run.status.conditions, conditions::INSTANCE_SELECTED)
    {
        let why = run
            .events
            .iter()
            .find_map(|(_, r)| match r {
                Reason::InstanceSelected { why, .. } => Some(*why),
                _ => None,
            })
            .unwrap_or(Selected::Pinned);
        out.push(Desired::new(
            conditions::INSTANCE_SELECTED,
            Status::True,
            &Reason::InstanceSelected {
                instance: i.clone(),
                why,
            },
        ));
    }
    if let Some(c) = &facts.claims {
        out.push(claims(c));
    }
    if facts.paused {
        return out;
    }
    let (status, reason, retry) = lifecycle(facts, end);
    let provisioned_status = match (&reason, facts.provisioned) {
        (Reason::VirtualMachineStopped(_), _) => Status::True,
        (_, true) if status == Status::True => Status::True,
        (Reason::VirtualMachineNotFound(_) | Reason::VirtualMachineNotOurs(_), _) => Status::False,
        (_, true) => Status::True,
        _ => status,
    };
    let vm = if provisioned_status == Status::True && facts.provisioned && !facts.deleting {
        Desired::new(
            conditions::VM_PROVISIONED,
            Status::True,
            &Reason::Provisioned(String::new()),
        )
    } else {
        with_retry(
            Desired::new(conditions::VM_PROVISIONED, status, &reason),
            retry.as_ref(),
        )
    };
    out.push(vm);
    out.push(with_retry(
        Desired::new(conditions::READY, status, &reason),
        retry.as_ref(),
    ));
    out
}

fn with_retry(d: Desired, retry: Option<&Retry>) -> Desired {
    match retry {
        Some(r) => d.appending(&retry_text(r)),
        None => d,
    }
}

/// The machine's lifecycle as `Ready` shows it.
fn lifecycle(facts: &Facts, end: &End) -> (Status, Reason, Option<Retry>) {
    let w = match end {
        End::Wait(w) => w,
        End::Done | End::More if facts.provisioned && !facts.deleting => {
            return (Status::True, Reason::Provisioned(String::new()), None);
        }
        End::Done | End::More => {
            let r = if facts.deleting {
                Reason::Deleting(String::new())
            } else {
                Reason::Cloning("more steps follow".into())
            };
            return (Status::False, r, None);
        }
    };
    if facts.deleting {
        let r = match &w.reason {
            r @ (Reason::Deleting(_) | Reason::DeletionFailed(_)) => r.clone(),
            r => Reason::Deleting(r.message()),
        };
        return (Status::False, r, w.retry.clone());
    }
    if facts.provisioned {
        // A provisioned machine whose ISO cleanup waits or is retried still works.
        return match &w.reason {
            Reason::VirtualMachineNotFound(_)
            | Reason::VirtualMachineNotOurs(_)
            | Reason::VirtualMachineStopped(_) => (Status::False, w.reason.clone(), None),
            _ => (Status::True, Reason::Provisioned(String::new()), None),
        };
    }
    (Status::False, w.reason.clone(), w.retry.clone())
}

/// The `IPAddressesClaimed` condition for a claims fact.
pub fn claims(fact: &ClaimsFact) -> Desired {
    let t = conditions::IP_ADDRESSES_CLAIMED;
    match fact {
        ClaimsFact::NotNeeded => Desired::new(t, Status::True, &Reason::NoStaticAddresses),
        ClaimsFact::Bound(a) => Desired::new(
            t,
            Status::True,
            &Reason::IpAddressesClaimed(
                a.iter()
                    .map(|c| format!("{} {}/{}", c.net, c.address, c.prefix))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        ),
        ClaimsFact::Missing => Desired::new(
            t,
            Status::False,
            &Reason::WaitingForIpAddresses("creating IP address claims".into()),
        ),
        ClaimsFact::NoPool(why) => Desired::new(
            t,
            Status::False,
            &Reason::WaitingForIpAddresses(why.clone()),
        ),
        ClaimsFact::Pending {
            pools,
            exhausted,
            message,
        } => {
            let text = if message.is_empty() {
                format!("waiting for addresses from {pools}")
            } else {
                format!("waiting for addresses from {pools}: {message}")
            };
            let reason = if *exhausted {
                Reason::IpAddressPoolExhausted(text)
            } else {
                Reason::WaitingForIpAddresses(text)
            };
            Desired::new(t, Status::False, &reason)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::decide::ClaimedAddress;

    #[test]
    fn claim_conditions() {
        let c = claims(&ClaimsFact::Bound(vec![ClaimedAddress {
            net: "net0".into(),
            address: "10.0.0.20".parse().unwrap(),
            prefix: 24,
            gateway: None,
            metric: None,
        }]));
        assert_eq!(
            (c.status, c.reason(), c.message()),
            (Status::True, "Claimed", "net0 10.0.0.20/24")
        );
        let p = claims(&ClaimsFact::Pending {
            pools: "InClusterIPPool wl1-dc-a-ipv4".into(),
            exhausted: true,
            message: "m-net0-ipv4: PoolExhausted".into(),
        });
        assert_eq!(p.reason(), "IPAddressPoolExhausted");
        assert_eq!(
            p.message(),
            "waiting for addresses from InClusterIPPool wl1-dc-a-ipv4: m-net0-ipv4: PoolExhausted"
        );
    }

    #[test]
    fn retries_name_the_attempt_and_the_time() {
        let r = Retry {
            attempts: 3,
            at: k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
        };
        assert_eq!(
            retry_text(&r),
            "attempt 3 failed; next attempt at 2027-01-15T08:00:00Z"
        );
    }
}
