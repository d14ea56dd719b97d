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
//! - `capacity["nvidia.com/gpu"]` = the number of `pciDevices` that are
//!   GPUs (`primaryGpu: true` or a mediated device type, a vGPU); left out
//!   when there are none. The key is the extended resource the NVIDIA
//!   device plugin advertises, as in Cluster API's opt-in
//!   autoscaling-from-zero proposal; GPUs of other vendors need their own key, which this
//!   provider cannot tell from a mapping name (docs/vm-shapes.md).
//! - `nodeInfo.operatingSystem: linux`; `nodeInfo.architecture` (Kubernetes
//!   words, `amd64` or `arm64`) is the architecture of the instance the
//!   template's `spec.instance` names, when that instance of the
//!   ProxmoxCluster sets `arch` (docs/vm-shapes.md) ▸ the architecture of
//!   the template's `cpu.type` when it is a model for one architecture only
//!   (`x86-64-v3` → `amd64`) ▸ `amd64`. The ProxmoxCluster is read when
//!   the template changes (a later change of the instance's `arch` shows
//!   on the template's next change).
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
use pve_client::options::{Arch, cpu_model_kind};

/// The controller name in metrics.
pub const CONTROLLER: &str = "proxmoxmachinetemplate";

/// The Kubernetes architecture (`amd64`, `arm64`) of machines of `spec`
/// placed in an instance whose `arch` is `instance_arch` (module rules).
pub fn architecture(spec: &ProxmoxMachineSpec, instance_arch: Option<Arch>) -> &'static str {
    let from_cpu = spec
        .cpu
        .as_ref()
        .and_then(|c| c.type_.as_deref())
        .and_then(|t| cpu_model_kind(t).ok())
        .and_then(|k| k.arch());
    match instance_arch.or(from_cpu).unwrap_or(Arch::X86_64) {
        Arch::X86_64 => "amd64",
        Arch::Aarch64 => "arm64",
    }
}

/// The capacity key of GPUs (the NVIDIA device plugin's extended resource).
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// The status a template's machine spec implies (pure); `instance_arch`
/// is the `arch` of the instance `spec.instance` names, if any.
pub fn status_for(
    spec: &ProxmoxMachineSpec,
    instance_arch: Option<Arch>,
) -> ProxmoxMachineTemplateStatus {
    let mut capacity = BTreeMap::new();
    if let Some(cores) = spec.num_cores {
        let cpu = u64::from(cores) * u64::from(spec.num_sockets.unwrap_or(1));
        capacity.insert("cpu".to_string(), Quantity(cpu.to_string()));
    }
    if let Some(mib) = spec.memory_mib {
        capacity.insert("memory".to_string(), Quantity(format!("{mib}Mi")));
    }
    let gpus = spec.pci_devices.iter().filter(|d| d.is_gpu()).count();
    if gpus > 0 {
        capacity.insert(GPU_RESOURCE.to_string(), Quantity(gpus.to_string()));
    }
    ProxmoxMachineTemplateStatus {
        capacity,
        node_info: Some(NodeInfo {
            architecture: Some(architecture(spec, instance_arch).into()),
            operating_system: Some("linux".into()),
        }),
    }
}

/// The `arch` of the instance the template's machines are pinned to
/// (`spec.instance`), read from the ProxmoxCluster of the template's
/// cluster (`cluster.x-k8s.io/cluster-name` label); `None` when any of
/// them is not there.
async fn instance_arch(
    template: &ProxmoxMachineTemplate,
    shared: &Shared,
) -> Result<Option<Arch>, Error> {
    let spec = &template.spec.template.spec;
    let (Some(instance), Some(cluster)) = (
        spec.instance.as_deref(),
        template.labels().get(crate::capi::CLUSTER_NAME_LABEL),
    ) else {
        return Ok(None);
    };
    let ns = template.namespace().unwrap_or_default();
    let pc = crate::webhook::lookup::proxmox_cluster(&shared.kube, &ns, cluster).await?;
    Ok(pc
        .and_then(|pc| pc.settings)
        .and_then(|s| s.instances.into_iter().find(|i| i.name == instance))
        .and_then(|i| i.arch)
        .map(|a| a.arch()))
}

/// Reconciles one template: writes its status when it differs.
///
/// # Errors
/// [`Error::Kube`] / [`Error::Json`] when the status cannot be written.
pub async fn reconcile(
    template: Arc<ProxmoxMachineTemplate>,
    shared: Arc<Shared>,
) -> Result<Action, Error> {
    let _running = shared.metrics.reconcile_started();
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
    let arch = instance_arch(template, shared).await?;
    let want = status_for(&template.spec.template.spec, arch);
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
        let s = status_for(&spec, None);
        assert_eq!(s.capacity.get("cpu"), Some(&Quantity("8".into())));
        assert_eq!(s.capacity.get("memory"), Some(&Quantity("8192Mi".into())));
        let info = s.node_info.unwrap();
        assert_eq!(info.architecture.as_deref(), Some("amd64"));
        assert_eq!(info.operating_system.as_deref(), Some("linux"));
        let json = serde_json::to_value(status_for(&spec, None)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "capacity": {"cpu": "8", "memory": "8192Mi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            })
        );
    }

    #[test]
    fn architecture_from_the_instance_then_the_cpu_model() {
        use crate::api::machine::CpuSpec;
        let cpu = |t: &str| ProxmoxMachineSpec {
            cpu: Some(CpuSpec {
                type_: Some(t.into()),
                flags: vec![],
            }),
            ..ProxmoxMachineSpec::default()
        };
        let plain = ProxmoxMachineSpec::default();
        assert_eq!(architecture(&plain, None), "amd64");
        assert_eq!(architecture(&plain, Some(Arch::Aarch64)), "arm64");
        assert_eq!(architecture(&cpu("x86-64-v3"), None), "amd64");
        assert_eq!(architecture(&cpu("host"), Some(Arch::Aarch64)), "arm64");
        assert_eq!(architecture(&cpu("host"), None), "amd64");
        let s = status_for(&cpu("max"), Some(Arch::Aarch64));
        assert_eq!(s.node_info.unwrap().architecture.as_deref(), Some("arm64"));
    }

    #[test]
    fn gpu_count_from_the_pci_devices() {
        use crate::api::machine::PciDeviceSpec;
        let dev = |m: &str, gpu: Option<bool>, mdev: Option<&str>| PciDeviceSpec {
            mapping: m.into(),
            primary_gpu: gpu,
            mdev: mdev.map(str::to_string),
            ..PciDeviceSpec::default()
        };
        let spec = ProxmoxMachineSpec {
            pci_devices: vec![
                dev("a100", Some(true), None),
                dev("grid", None, Some("nvidia-63")),
                dev("nic", None, None),
                dev("nvme", Some(false), None),
            ],
            ..ProxmoxMachineSpec::default()
        };
        let s = status_for(&spec, None);
        assert_eq!(
            s.capacity.get("nvidia.com/gpu"),
            Some(&Quantity("2".into()))
        );
        let none = status_for(&ProxmoxMachineSpec::default(), None);
        assert!(!none.capacity.contains_key("nvidia.com/gpu"));
    }

    #[test]
    fn empty_shape_values_are_unset() {
        // What the templates render when the clusterctl variables
        // CONTROL_PLANE_CPU, WORKER_CPU, WORKER_PCI_DEVICES and
        // BOOTSTRAP_MEDIA are not set (docs/templates.md).
        let spec: ProxmoxMachineSpec = serde_json::from_value(serde_json::json!({
            "numSockets": 1, "numCores": 4, "memoryMiB": 8192,
            "cpu": {}, "pciDevices": [], "bootstrapMedia": {}
        }))
        .unwrap();
        for arch in [None, Some(Arch::Aarch64)] {
            assert_eq!(
                serde_json::to_value(status_for(&spec, arch)).unwrap(),
                serde_json::json!({
                    "capacity": {"cpu": "4", "memory": "8192Mi"},
                    "nodeInfo": {
                        "architecture": if arch.is_some() { "arm64" } else { "amd64" },
                        "operatingSystem": "linux"
                    }
                }),
                "{arch:?}"
            );
        }
    }

    #[test]
    fn unknown_values_are_left_out() {
        let only_cores = ProxmoxMachineSpec {
            num_cores: Some(3),
            ..ProxmoxMachineSpec::default()
        };
        assert_eq!(
            serde_json::to_value(status_for(&only_cores, None)).unwrap()["capacity"],
            serde_json::json!({"cpu": "3"})
        );
        let none = status_for(&ProxmoxMachineSpec::default(), None);
        assert!(none.capacity.is_empty());
        assert!(
            serde_json::to_value(&none)
                .unwrap()
                .get("capacity")
                .is_none()
        );
    }
}
