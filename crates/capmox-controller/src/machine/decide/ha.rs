//! Proxmox HA of the machine's VM (docs/field-cases.md B33).
//!
//! - After provisioning, a VM whose machine asks for HA (its `spec.ha`, else
//!   its instance's) is made the HA resource `vm:<vmid>` with requested state
//!   `started`: in the HA group the spec names on PVE 8, added to the
//!   node-affinity rule it names on PVE 9 (the instance's major version
//!   decides; PVE 9 refuses groups, PVE 8 has no rules). The resource is
//!   recorded in `status.haResource` before it is created.
//! - Deletion removes the recorded HA resource first; the VM is then
//!   stopped and destroyed like any other.
//! - A VM HA-managed by someone else is stopped through the HA manager:
//!   the request's task ends before the VM stops, so the deletion waits
//!   until `status/current` shows it stopped — for [`HA_STOP_DEADLINE`]
//!   after the deletion began; past it the machine reports
//!   `DeletionFailed` naming the HA resource and what to do, and keeps
//!   looking with a growing delay. A running VM is never destroyed and the
//!   finalizer stays.
//! - A VM that HA (or an operator) moved is found on its new node by the VM
//!   observation; nothing here re-creates it.

use std::fmt;
use std::time::Duration;

use crate::api::HaSettings;
use crate::pve::{ConfigId, HaState};
use crate::reasons::Reason;

use super::facts::{Facts, HaFact, VmView};
use super::step::{Observe, Step, Until, wait};

/// Where the HA resource goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HaTarget {
    /// Into this HA group (PVE 8).
    Group(ConfigId),
    /// Listed in this node-affinity HA rule (PVE 9).
    Rule(ConfigId),
}

impl fmt::Display for HaTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HaTarget::Group(g) => write!(f, "HA group {g}"),
            HaTarget::Rule(r) => write!(f, "HA rule {r}"),
        }
    }
}

/// The group (PVE 8) or rule (PVE 9) `settings` name for Proxmox VE
/// `major`; `Err` says what the spec must name instead.
pub fn target(settings: &HaSettings, major: u32) -> Result<HaTarget, String> {
    let (name, make, what, other): (_, fn(ConfigId) -> HaTarget, _, _) = if major >= 9 {
        (
            &settings.rule,
            HaTarget::Rule,
            "ha.rule",
            "groups were migrated to rules",
        )
    } else {
        (
            &settings.group,
            HaTarget::Group,
            "ha.group",
            "HA rules exist from Proxmox VE 9 on",
        )
    };
    let Some(name) = name else {
        return Err(format!(
            "the instance runs Proxmox VE {major}, where {other}: set {what}"
        ));
    };
    ConfigId::new(name.clone())
        .map(make)
        .map_err(|e| format!("{what} {name:?}: {e}"))
}

/// The HA step a provisioned, running VM still needs, `None` when HA is
/// not wanted or the VM is registered.
pub(super) fn provisioned(f: &Facts, view: &VmView) -> Option<Step> {
    let settings = f.ha_wanted.as_ref()?;
    let instance = f.instance.as_deref().unwrap_or_default();
    let Some(major) = f.pve_major else {
        return Some(wait(
            Reason::HaRegistrationFailed(format!(
                "the Proxmox VE version of instance {instance} is not known yet"
            )),
            Until::Backoff,
        ));
    };
    let target = match target(settings, major) {
        Ok(t) => t,
        Err(m) => return Some(wait(Reason::HaConfigurationInvalid(m), Until::Change)),
    };
    match &f.ha {
        None => Some(Step::Observe(Observe::Ha)),
        Some(HaFact::Unusable(r)) => Some(wait(
            r.clone(),
            if r.terminal() {
                Until::Change
            } else {
                Until::Backoff
            },
        )),
        Some(HaFact::Present { listed: true, .. }) => None,
        Some(HaFact::Absent | HaFact::Present { listed: false, .. }) => {
            if let Some(p) = f.blocked("haWrite") {
                return Some(wait(
                    Reason::MissingPrivileges(format!(
                        "VM {} on {} cannot be made an HA resource: the token of instance {instance} lacks {p}",
                        f.vmid.unwrap_or_default(),
                        view.node
                    )),
                    Until::Change,
                ));
            }
            Some(Step::RegisterHa(target))
        }
    }
}

/// Deletion: the recorded HA resource goes first (delete by the record).
pub(super) fn deleting(f: &Facts) -> Option<Step> {
    f.ha_recorded.then_some(Step::UnregisterHa)
}

/// How long after the deletion began an HA-managed VM asked to stop may
/// keep running before the machine reports `DeletionFailed`: 5 minutes —
/// the HA manager acts within a few of its 10 s rounds, and a guest
/// shutdown through HA is given Proxmox's default 180 s before it is
/// stopped hard (docs/proxmox-semantics.md §24).
pub const HA_STOP_DEADLINE: Duration = Duration::from_secs(300);

/// The delay between looks at a VM HA has not stopped by the deadline,
/// `overdue` past it: a quarter of the time overdue, from 10 s up to 5 min
/// (a few looks an hour once it is long overdue).
pub fn overdue_delay(overdue: Duration) -> Duration {
    (overdue / 4).clamp(Duration::from_secs(10), Duration::from_secs(300))
}

/// Deletion of a running VM that HA manages (not by our record): asked to
/// stop through HA, it is waited for until it really stopped; past
/// [`HA_STOP_DEADLINE`] the wait is reported as a failed deletion.
pub(super) fn stopping(f: &Facts, view: &VmView) -> Option<Step> {
    if !matches!(view.ha, Some(HaState::Stopped | HaState::Disabled)) {
        return None;
    }
    let vmid = f.vmid.unwrap_or_default();
    let node = &view.node;
    let age = f.deletion_age.unwrap_or_default();
    if age < HA_STOP_DEADLINE {
        return Some(wait(
            Reason::WaitingForHaStop(format!(
                "VM {vmid} on {node} is HA-managed and was asked to stop; waiting until the HA manager has stopped it"
            )),
            Until::Soon,
        ));
    }
    Some(wait(
        Reason::DeletionFailed(format!(
            "VM {vmid} on {node} is the HA resource vm:{vmid} and was asked to stop, but it still runs {}s after the deletion began (deadline {}s); check the HA manager (ha-manager status, the LRM on {node}) or stop the VM through HA yourself (ha-manager set vm:{vmid} --state stopped); a running VM is never destroyed, and the deletion continues once it is stopped",
            age.as_secs(),
            HA_STOP_DEADLINE.as_secs()
        )),
        Until::Retry(overdue_delay(age - HA_STOP_DEADLINE)),
    ))
}
