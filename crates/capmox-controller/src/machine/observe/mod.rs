//! Proxmox and Kubernetes read into facts: one module per source. An
//! observer reads and reports what it read ([`Observed`]); it never decides
//! what happens next. What it learns that saves later calls (the VM's
//! config, a task's end) goes into the runtime's memory.
//!
//! | module | reads |
//! |---|---|
//! | [`kube`] | the ProxmoxMachine and the objects around it (the facts a reconcile starts from) |
//! | [`client`] | the instance's Proxmox client (credentials Secret) |
//! | [`task`] | the task in `status.taskRef` |
//! | [`vm`] | the VM at the VMID: owner marker, node, lock, power, config |
//! | [`claims`] | the IP address claims |
//! | [`agent`] | the guest agent's addresses |
//! | [`bootstrap`] | whether the bootstrap finished (sentinel file) |
//! | [`ignition`] | whether an Ignition bootstrap data Secret holds a usable config |
//! | [`duplicates`] | claimed addresses another machine holds in the same network |
//! | [`media`] | this machine's ISO volumes on the instance's storages |
//! | [`ha`] | the VM's HA resource and the HA rule listing it |
//! | [`pool`] | the machine's resource pool and its members |
//! | [`storage`] | which storages are enabled and active on which node (for the plan step) |
//! | [`provider_id`] | whether another machine records the providerID our VM would get |

pub mod agent;
pub mod bootstrap;
pub mod claims;
pub mod client;
pub mod duplicates;
pub mod ha;
pub mod ignition;
pub mod kube;
pub mod media;
pub mod pool;
pub mod provider_id;
pub mod storage;
pub mod task;
pub mod vm;

use super::context::Run;
use super::decide::{Facts, Observe, Observed};
use crate::error::Error;

/// Reads the fact `what`.
///
/// # Errors
/// Kubernetes API failures ([`Error::Kube`]); Proxmox failures are facts
/// (an unreachable instance, a VM that moved), not errors.
pub async fn run(what: Observe, run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    match what {
        Observe::Client => client::observe(run, facts).await,
        Observe::Task => Ok(task::observe(run, facts).await),
        Observe::Vm => Ok(vm::observe(run, facts).await),
        Observe::Config => Ok(vm::config(run, facts).await),
        Observe::Power => Ok(vm::power(run, facts).await),
        Observe::Claims => claims::observe(run, facts).await,
        Observe::ClaimObjects => claims::objects(run).await,
        Observe::Agent => Ok(agent::observe(run, facts).await),
        Observe::Bootstrap => Ok(bootstrap::observe(run, facts).await),
        Observe::Duplicates => Ok(duplicates::observe(run, facts).await),
        Observe::Media => Ok(media::observe(run, facts).await),
        Observe::Ha => Ok(ha::observe(run, facts).await),
        Observe::ProviderIdHolder => Ok(provider_id::observe(run, facts).await),
        Observe::Pool => Ok(pool::observe(run, facts).await),
    }
}
