//! The desired state of a managed topology, computed without I/O: each of
//! the class's templates patched for its role, per MachineDeployment of
//! `spec.topology.workers`. Source: CAPI
//! `internal/controllers/topology/cluster/desired_state.go`.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::TopologyError;
use super::patch::{Target, apply_all};
use super::variables::resolve;
use crate::crds::clusterclass::{ClusterClassSpec, Topology};

/// The class's templates as fetched (whole objects).
#[derive(Clone, Debug, Default)]
pub struct ClassTemplates {
    /// The InfraCluster template (ProxmoxClusterTemplate).
    pub infrastructure: Value,
    /// The KubeadmControlPlaneTemplate.
    pub control_plane: Value,
    /// The control plane's InfraMachine template.
    pub control_plane_machine: Option<Value>,
    /// Per MachineDeployment class: (bootstrap template, InfraMachine template).
    pub workers: BTreeMap<String, (Value, Value)>,
}

/// One MachineDeployment of the topology, with its patched templates.
#[derive(Clone, Debug, PartialEq)]
pub struct DesiredMachineDeployment {
    /// `spec.topology.workers.machineDeployments[].name`.
    pub topology_name: String,
    /// Its class.
    pub class: String,
    /// Its failure domain.
    pub failure_domain: Option<String>,
    /// Replicas (`None`: left to the MachineDeployment's default, 1).
    pub replicas: Option<i32>,
    /// The patched bootstrap config template (whole object).
    pub bootstrap: Value,
    /// The patched InfraMachine template (whole object).
    pub infrastructure: Value,
}

/// Everything the topology wants, templates patched.
#[derive(Clone, Debug, PartialEq)]
pub struct Desired {
    /// The patched InfraCluster template; the InfraCluster's spec is its
    /// `spec.template.spec`.
    pub infrastructure: Value,
    /// The patched control plane template; the control plane's spec is its
    /// `spec.template.spec` plus version, replicas and machine template.
    pub control_plane: Value,
    /// The patched control-plane InfraMachine template.
    pub control_plane_machine: Option<Value>,
    /// The MachineDeployments in topology order.
    pub machine_deployments: Vec<DesiredMachineDeployment>,
}

impl Desired {
    /// The InfraCluster's `spec`.
    pub fn infrastructure_spec(&self) -> Value {
        self.infrastructure
            .pointer("/spec/template/spec")
            .cloned()
            .unwrap_or_else(|| json!({}))
    }

    /// The control plane's `spec` with the topology's `version` and
    /// `replicas` and the InfraMachine template named `machine_template`.
    pub fn control_plane_spec(
        &self,
        topology: &Topology,
        machine_template: Option<(&str, &str, &str)>,
    ) -> Value {
        let mut spec = self
            .control_plane
            .pointer("/spec/template/spec")
            .cloned()
            .unwrap_or_else(|| json!({}));
        spec["version"] = json!(topology.version);
        if let Some(r) = topology.control_plane.as_ref().and_then(|c| c.replicas) {
            spec["replicas"] = json!(r);
        }
        if let Some((group, kind, name)) = machine_template {
            spec["machineTemplate"]["spec"]["infrastructureRef"] =
                json!({"apiGroup": group, "kind": kind, "name": name});
        }
        spec
    }
}

/// CAPI's `builtin` variable for the cluster (and a MachineDeployment).
pub fn builtin(
    cluster: &str,
    namespace: &str,
    topology: &Topology,
    md: Option<(&str, &str)>,
) -> Value {
    let mut b = json!({"cluster": {
        "name": cluster,
        "namespace": namespace,
        "topology": {"version": topology.version, "class": topology.class_ref.name}
    }});
    if let Some((class, name)) = md {
        b["machineDeployment"] =
            json!({"class": class, "topologyName": name, "version": topology.version});
    }
    b
}

/// The desired state of `topology` (Cluster `cluster` in `namespace`) from
/// `class` and its fetched `templates`.
///
/// # Errors
/// [`TopologyError`]: unknown or missing variables, a MachineDeployment of
/// a class the ClusterClass lacks, a duplicate MachineDeployment name, a
/// patch that fails.
pub fn desired(
    cluster: &str,
    namespace: &str,
    topology: &Topology,
    class: &ClusterClassSpec,
    templates: &ClassTemplates,
) -> Result<Desired, TopologyError> {
    let vars = |md: Option<(&str, &str)>| -> Result<Map<String, Value>, TopologyError> {
        resolve(
            &class.variables,
            &topology.variables,
            builtin(cluster, namespace, topology, md),
        )
    };
    let cluster_vars = vars(None)?;
    let mut infrastructure = templates.infrastructure.clone();
    apply_all(
        &class.patches,
        &Target::InfrastructureCluster,
        &mut infrastructure,
        &cluster_vars,
    )?;
    let mut control_plane = templates.control_plane.clone();
    apply_all(
        &class.patches,
        &Target::ControlPlane,
        &mut control_plane,
        &cluster_vars,
    )?;
    let control_plane_machine = match &templates.control_plane_machine {
        Some(t) => {
            let mut t = t.clone();
            apply_all(&class.patches, &Target::ControlPlane, &mut t, &cluster_vars)?;
            Some(t)
        }
        None => None,
    };
    let mut machine_deployments = Vec::new();
    let mds = topology
        .workers
        .as_ref()
        .map(|w| w.machine_deployments.as_slice())
        .unwrap_or(&[]);
    for (index, md) in mds.iter().enumerate() {
        if mds[..index].iter().any(|o| o.name == md.name) {
            return Err(TopologyError::DuplicateMachineDeployment(md.name.clone()));
        }
        let (bootstrap, infra) =
            templates
                .workers
                .get(&md.class)
                .ok_or_else(|| TopologyError::UnknownClass {
                    index,
                    class: md.class.clone(),
                })?;
        let md_vars = vars(Some((md.class.as_str(), md.name.as_str())))?;
        let target = Target::MachineDeployment(md.class.clone());
        let mut bootstrap = bootstrap.clone();
        apply_all(&class.patches, &target, &mut bootstrap, &md_vars)?;
        let mut infrastructure = infra.clone();
        apply_all(&class.patches, &target, &mut infrastructure, &md_vars)?;
        machine_deployments.push(DesiredMachineDeployment {
            topology_name: md.name.clone(),
            class: md.class.clone(),
            failure_domain: md.failure_domain.clone(),
            replicas: md.replicas,
            bootstrap,
            infrastructure,
        });
    }
    Ok(Desired {
        infrastructure,
        control_plane,
        control_plane_machine,
        machine_deployments,
    })
}
