//! Validation of our kinds beyond what the CRD schema (OpenAPI constraints and
//! CEL rules) expresses — and, as defence in depth, everything it does express,
//! because the reconciler validates as its first step before any Proxmox call
//! (a CRD may have been installed without its rules, or edited).
//!
//! Every function returns **all** problems, each with the field path it is
//! about (`spec.settings.instances[1].name`) and a message that says what to
//! write, never stopping at the first. The admission webhook and the
//! reconcilers call the same functions, so a spec refused at admission is
//! also refused before any Proxmox call when no webhook ran.
//!
//! | module | checks |
//! |---|---|
//! | `cluster` | ProxmoxCluster / ProxmoxClusterTemplate: endpoint, instances, credentials |
//! | `instances` | mode versus instances, instances that are one Proxmox cluster |
//! | `network` | IP pools (parse, usable by hosts, disjoint), endpoint, name servers |
//! | `template` | template sources, tag selectors, Proxmox tags, VMID ranges |
//! | `machine` | ProxmoxMachine / ProxmoxMachineTemplate, and a machine against its cluster |
//! | `nic` | network devices: VLAN, MTU, MAC, pools |
//! | `pci` | PCI devices by resource mapping (machine) and mapping renames (instance) |
//! | `shape` | VM shape: CPU model and flags, bootstrap media (machine and instance) |

mod cluster;
mod instances;
mod machine;
mod network;
mod nic;
mod pci;
mod shape;
mod slots;
mod template;

use std::fmt;

pub use cluster::{cluster_warnings, validate_cluster, validate_cluster_template};
pub use machine::{validate_machine, validate_machine_for_cluster, validate_machine_template};
pub use pci::MAX_PCI_DEVICES;

/// One validation problem: the field path and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// JSON path of the offending field, e.g. `spec.network.networkDevices[0].vlan`.
    pub path: String,
    /// What is wrong, in words an operator can act on.
    pub message: String,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        FieldError {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Joins problems into one condition message (`a: x; b: y`).
pub fn summarize(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod refusals;
#[cfg(test)]
mod tests;
