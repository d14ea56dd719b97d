//! The ProxmoxMachine reconciler: one Proxmox VM per ProxmoxMachine, in the
//! instance (Proxmox cluster) its failure domain names.
//!
//! Layout — imports point one way: API types → rules (`plan`, `vm`,
//! `claims`) → [`decide`] → `runtime`, [`observe`], [`steps`], [`report`]
//! → clients.
//!
//! | module | owns |
//! |---|---|
//! | [`decide`] | the pure decision core: facts → the next step (facts, steps, rules) |
//! | [`observe`] | Proxmox and Kubernetes read into facts, one file per source |
//! | [`steps`] | one file per action step, each runs what it is given and reports what it saw |
//! | [`report`] | conditions, the status write, events, when to look again |
//! | [`reconcile`](mod@reconcile) | the loop: decide, run, fold in; freshness; error policy |
//! | [`controller`] | the kube-runtime controller: watches and what wakes a machine |
//! | [`context`] | what reconciles share, and one reconcile's working state |
//! | [`plan`] | pure placement rules: instance, node, template, VMID ranges and reservations |
//! | [`vm`] | pure VM-shape rules: marker, config write, disks, addresses |
//! | [`claims`] | pure IP claim rules: which claims, their state, their objects |
//! | [`runtime`] | what the controller keeps in memory between reconciles |
//! | [`triggers`] | which watched changes wake a machine (and which do not) |

pub mod claims;
pub mod context;
pub mod controller;
pub mod decide;
pub mod observe;
pub mod plan;
pub mod reconcile;
pub mod report;
pub mod runtime;
pub mod steps;
pub mod triggers;
pub mod vm;

pub use context::Context;
pub use reconcile::{error_policy, reconcile, reconcile_once};
pub use runtime::{MachineOptions, MachineRuntime};
