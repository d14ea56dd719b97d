//! `ProxmoxMachineTemplate.status.capacity` and `status.nodeInfo`, for the
//! cluster autoscaler's scale-from-zero (CAPI contract 1.4: the
//! InfraMachineTemplate reports what one machine offers).
//!
//! - `capacity.cpu` = `numSockets × numCores` (sockets default to 1, as in
//!   Proxmox); left out when `numCores` is not set, because the machine then
//!   inherits the Proxmox template's CPU count, which this controller does
//!   not read.
//! - `capacity.memory` = `<memoryMiB>Mi`; left out when `memoryMiB` is not set
//!   (same reason).
//! - `nodeInfo`: `architecture: amd64`, `operatingSystem: linux` — the
//!   machines are x86-64 QEMU VMs booted with cloud-init; nothing in the
//!   spec says otherwise.
//!
//! Status is written by server-side apply (field manager
//! `capmox-controller`) and only when it changes.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::{Api, ResourceExt};

use crate::api::{
    NodeInfo, ProxmoxMachineSpec, ProxmoxMachineTemplate, ProxmoxMachineTemplateStatus,
};
use crate::context::{FIELD_MANAGER, Shared};
use crate::error::Error;

/// The controller name in metrics.
pub const CONTROLLER: &str = "proxmoxmachinetemplate";

/// The status a template's machine spec implies (pure).
pub fn status_for(spec: &ProxmoxMachineSpec) -> ProxmoxMachineTemplateStatus {
    let mut capacity = BTreeMap::new();
    if let Some(cores) = spec.num_cores {
        let cpu = u64::from(cores) * u64::from(spec.num_sockets.unwrap_or(1));
        capacity.insert("cpu".to_string(), Quantity(cpu.to_string()));
    }
    if let Some(mib) = spec.memory_mib {
        capacity.insert("memory".to_string(), Quantity(format!("{mib}Mi")));
    }
    ProxmoxMachineTemplateStatus {
        capacity,
        node_info: Some(NodeInfo {
            architecture: Some("amd64".into()),
            operating_system: Some("linux".into()),
        }),
    }
}

/// Reconciles one template: writes its status when it differs.
///
/// # Errors
/// [`Error::Kube`] / [`Error::Json`] when the status cannot be written.
pub async fn reconcile(
    template: Arc<ProxmoxMachineTemplate>,
    shared: Arc<Shared>,
) -> Result<Action, Error> {
    let started = std::time::Instant::now();
    let result = apply(&template, &shared).await;
    shared.metrics.reconcile(
        CONTROLLER,
        if result.is_ok() { "ok" } else { "error" },
        started.elapsed(),
    );
    result
}

async fn apply(template: &ProxmoxMachineTemplate, shared: &Shared) -> Result<Action, Error> {
    let want = status_for(&template.spec.template.spec);
    let have = template.status.clone().unwrap_or_default();
    if serde_json::to_value(&want)? != serde_json::to_value(&have)? {
        let api: Api<ProxmoxMachineTemplate> = Api::namespaced(
            shared.kube.clone(),
            &template.namespace().unwrap_or_default(),
        );
        let body = serde_json::json!({
            "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
            "kind": "ProxmoxMachineTemplate",
            "status": want,
        });
        api.patch_status(
            &template.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
        tracing::debug!(template = %template.name_any(), "capacity written");
    }
    Ok(Action::await_change())
}

/// Requeue after a failure.
pub fn error_policy(_t: Arc<ProxmoxMachineTemplate>, error: &Error, shared: Arc<Shared>) -> Action {
    shared.metrics.error(CONTROLLER, error.category());
    Action::requeue(shared.options.scaled(Duration::from_secs(10)))
}

/// The kube-runtime controller for ProxmoxMachineTemplates; runs until the
/// shared shutdown signal fires.
pub fn controller(shared: Arc<Shared>) -> impl Future<Output = ()> {
    let api: Api<ProxmoxMachineTemplate> = shared.scoped_api();
    Controller::new(api, shared.options.watcher_config())
        .graceful_shutdown_on(shared.shutdown_signal())
        .run(reconcile, error_policy, shared)
        .for_each(|res| async move {
            if let Err(e) = res {
                tracing::debug!(error = %e, "template controller event");
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacity_from_the_spec() {
        let spec = ProxmoxMachineSpec {
            num_sockets: Some(2),
            num_cores: Some(4),
            memory_mib: Some(8192),
            ..ProxmoxMachineSpec::default()
        };
        let s = status_for(&spec);
        assert_eq!(s.capacity.get("cpu"), Some(&Quantity("8".into())));
        assert_eq!(s.capacity.get("memory"), Some(&Quantity("8192Mi".into())));
        let info = s.node_info.unwrap();
        assert_eq!(info.architecture.as_deref(), Some("amd64"));
        assert_eq!(info.operating_system.as_deref(), Some("linux"));
        let json = serde_json::to_value(status_for(&spec)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "capacity": {"cpu": "8", "memory": "8192Mi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            })
        );
    }

    #[test]
    fn unknown_values_are_left_out() {
        let only_cores = ProxmoxMachineSpec {
            num_cores: Some(3),
            ..ProxmoxMachineSpec::default()
        };
        assert_eq!(
            serde_json::to_value(status_for(&only_cores)).unwrap()["capacity"],
            serde_json::json!({"cpu": "3"})
        );
        let none = status_for(&ProxmoxMachineSpec::default());
        assert!(none.capacity.is_empty());
        assert!(
            serde_json::to_value(&none)
                .unwrap()
                .get("capacity")
                .is_none()
        );
    }
}
