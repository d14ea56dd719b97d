//! Conditions (`metav1.Condition`) as output, never as the state machine:
//! computed each reconcile, merged into the list keyed by `type`, keeping
//! `lastTransitionTime` when the status did not change, so status is written
//! only when something an operator can see changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::api::Condition;
use crate::reasons::Reason;

/// `Ready`: the object's whole lifecycle in one condition (CAPI mirrors it).
pub const READY: &str = "Ready";
/// `Paused`: reconciliation is paused (reasons `Paused` / `NotPaused`).
pub const PAUSED: &str = "Paused";
/// `CredentialsReady` (ProxmoxCluster): every instance's credentials work.
pub const CREDENTIALS_READY: &str = "CredentialsReady";
/// `InstancesReady` (ProxmoxCluster): every instance is reachable and usable.
pub const INSTANCES_READY: &str = "InstancesReady";
/// `PrivilegesReady` (ProxmoxCluster): every instance's token holds the
/// privileges the features in use need (docs/field-cases.md B31).
pub const PRIVILEGES_READY: &str = "PrivilegesReady";
/// `PoolsReady` (ProxmoxCluster): every instance's resource pool exists
/// (docs/field-cases.md B34).
pub const POOLS_READY: &str = "PoolsReady";
/// `InstanceSelected` (ProxmoxMachine): the Proxmox instance is chosen.
pub const INSTANCE_SELECTED: &str = "InstanceSelected";
/// `VirtualMachineProvisioned` (ProxmoxMachine): the VM's lifecycle step.
pub const VM_PROVISIONED: &str = "VirtualMachineProvisioned";
/// `IPAddressesClaimed` (ProxmoxMachine): every static address is allocated.
pub const IP_ADDRESSES_CLAIMED: &str = "IPAddressesClaimed";

/// The status of a condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// `True`.
    True,
    /// `False`.
    False,
    /// `Unknown`.
    Unknown,
}

impl Status {
    /// The string Kubernetes uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }

    /// `True` when `b`, else `False`.
    pub fn from_bool(b: bool) -> Status {
        if b { Status::True } else { Status::False }
    }
}

/// A condition to set: type, status, and the [`Reason`] it shows (its
/// code and message; reasons are made only by [`crate::reasons`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    /// Condition type.
    pub type_: &'static str,
    /// Its status.
    pub status: Status,
    reason: &'static str,
    message: String,
}

impl Desired {
    /// A condition of `type_` showing `reason`.
    pub fn new(type_: &'static str, status: Status, reason: &Reason) -> Desired {
        Desired {
            type_,
            status,
            reason: reason.code(),
            message: reason.message(),
        }
    }

    /// The same condition with `text` appended to its message (e.g. when a
    /// failed step is retried next).
    pub fn appending(mut self, text: &str) -> Desired {
        if self.message.is_empty() {
            self.message = text.to_string();
        } else {
            self.message = format!("{}; {text}", self.message);
        }
        self
    }

    /// The CamelCase reason.
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

/// The longest message written into a condition (bytes); longer ones are cut
/// at a character boundary and end in `…`.
pub const MAX_MESSAGE: usize = 1024;

fn truncate(message: &str) -> String {
    if message.len() <= MAX_MESSAGE {
        return message.to_string();
    }
    let mut end = MAX_MESSAGE - 3;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &message[..end])
}

/// Merges `desired` into `conditions`. `lastTransitionTime` becomes `now` only
/// when the status changes (or the condition is new); reason, message and
/// `observedGeneration` are updated in place. Returns whether anything changed.
pub fn set(
    conditions: &mut Vec<Condition>,
    desired: &Desired,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let message = truncate(&desired.message);
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(c) => {
            let mut changed = false;
            if c.status != desired.status.as_str() {
                c.status = desired.status.as_str().to_string();
                c.last_transition_time = Time(now);
                changed = true;
            }
            if c.reason != desired.reason {
                c.reason = desired.reason.to_string();
                changed = true;
            }
            if c.message != message {
                c.message = message;
                changed = true;
            }
            if c.observed_generation != generation {
                c.observed_generation = generation;
                changed = true;
            }
            changed
        }
        None => {
            conditions.push(Condition {
                type_: desired.type_.to_string(),
                status: desired.status.as_str().to_string(),
                reason: desired.reason.to_string(),
                message,
                last_transition_time: Time(now),
                observed_generation: generation,
            });
            true
        }
    }
}

/// The condition of `type_`, if present.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of `type_` is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).unwrap()
    }

    #[test]
    fn transition_time_moves_only_with_status() {
        let mut list = Vec::new();
        assert!(set(
            &mut list,
            &Desired::new(READY, Status::False, &Reason::Cloning("cloning".into())),
            Some(1),
            ts(100)
        ));
        assert_eq!(list[0].last_transition_time, Time(ts(100)));
        // Same status, new reason: changed, but the transition time stays.
        assert!(set(
            &mut list,
            &Desired::new(READY, Status::False, &Reason::PoweringOn("starting".into())),
            Some(1),
            ts(200)
        ));
        assert_eq!(list[0].last_transition_time, Time(ts(100)));
        assert_eq!(list[0].reason, "PoweringOn");
        // Identical: nothing changes.
        assert!(!set(
            &mut list,
            &Desired::new(READY, Status::False, &Reason::PoweringOn("starting".into())),
            Some(1),
            ts(300)
        ));
        // New status: the transition time moves.
        assert!(set(
            &mut list,
            &Desired::new(READY, Status::True, &Reason::Provisioned(String::new())),
            Some(1),
            ts(400)
        ));
        assert_eq!(list[0].last_transition_time, Time(ts(400)));
        assert_eq!(list.len(), 1);
        assert!(is_true(&list, READY));
    }

    #[test]
    fn long_messages_are_cut() {
        let mut list = Vec::new();
        let long = "é".repeat(2000);
        set(
            &mut list,
            &Desired::new(READY, Status::False, &Reason::CloneFailed(long)),
            None,
            ts(1),
        );
        assert!(list[0].message.len() <= MAX_MESSAGE);
        assert!(list[0].message.ends_with('…'));
    }
}
