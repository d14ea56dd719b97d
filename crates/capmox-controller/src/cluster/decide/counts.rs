//! What the decision counts in ([`MachineCounts`]) and announces ([`Note`]).

use std::collections::BTreeMap;

use crate::events::EventKind;
use crate::reasons::Reason;

/// ProxmoxMachines of this cluster, counted by `spec.instance`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineCounts {
    /// Machines per instance name (their `spec.instance`).
    pub by_instance: BTreeMap<String, u32>,
    /// Machines without `spec.instance` yet.
    pub unplaced: u32,
    /// Names of the machines (sorted), for messages.
    pub names: Vec<String>,
    /// Machines by `(instance or "none", phase)` for the `capmox_machines`
    /// metric; phases `Provisioning`, `Provisioned`, `Failed`, `Deleting`.
    pub phases: BTreeMap<(String, String), i64>,
}

impl MachineCounts {
    /// All machines.
    pub fn total(&self) -> u32 {
        self.by_instance.values().sum::<u32>() + self.unplaced
    }

    /// Machines placed in `instance`.
    pub fn in_instance(&self, instance: &str) -> u32 {
        self.by_instance.get(instance).copied().unwrap_or(0)
    }
}

/// An event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Normal or Warning.
    pub kind: EventKind,
    /// The reason (code and message).
    pub reason: Reason,
    /// The instance the event is about, if one (its own event series).
    pub instance: Option<String>,
}

impl Note {
    /// A Normal event.
    pub fn normal(reason: Reason) -> Note {
        Note {
            kind: EventKind::Normal,
            reason,
            instance: None,
        }
    }

    /// A Warning event.
    pub fn warning(reason: Reason) -> Note {
        Note {
            kind: EventKind::Warning,
            reason,
            instance: None,
        }
    }

    /// The event is about `instance` (its own series).
    pub fn about(mut self, instance: &str) -> Note {
        self.instance = Some(instance.to_string());
        self
    }
}
