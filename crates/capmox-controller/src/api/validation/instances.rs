//! Consistency of `settings`: the mode against the instance list, and
//! instances that are the same Proxmox cluster.
//!
//! What is known without reading Secrets: two instances whose
//! `credentialsRef` names the same Secret (same name, same namespace or both
//! without one) reach the same Proxmox cluster. Two different Secrets may
//! still hold the same URL; that is only known once the Secrets are read and
//! is not checked here (VMID reservations are kept per Proxmox cluster at run
//! time, so it is safe, only less clear).

use std::collections::BTreeSet;

use super::FieldError;
use super::template::{range_text, ranges_overlap};
use crate::api::cluster::{ClusterMode, InstanceSpec, ProxmoxClusterSpec};

/// `settings.mode` against `settings.instances`: `SingleInstance` and
/// `MultiInstance` need instances; in `MultiInstance` control-plane machines
/// need an instance with `controlPlane` (unless the control plane is managed
/// elsewhere).
pub(super) fn check_mode(base: &str, spec: &ProxmoxClusterSpec, errs: &mut Vec<FieldError>) {
    let mode = spec.mode();
    let instances = spec.instances();
    let path = format!("{base}.settings.instances");
    if matches!(
        mode,
        ClusterMode::SingleInstance | ClusterMode::MultiInstance
    ) && instances.is_empty()
    {
        errs.push(FieldError::new(
            path,
            format!(
                "settings.mode {} needs at least one instance: list the Proxmox clusters under settings.instances, or set settings.mode to Default",
                mode.as_str()
            ),
        ));
        return;
    }
    let external = spec.external_managed_control_plane.unwrap_or(false);
    if mode == ClusterMode::MultiInstance
        && !external
        && instances.iter().all(|i| !i.is_control_plane())
    {
        errs.push(FieldError::new(
            path,
            "no instance takes control-plane machines (controlPlane is false on every one): set controlPlane: true on at least one, or set externalManagedControlPlane",
        ));
    }
}

/// `Default` with several instances uses only the first.
pub(super) fn mode_warnings(base: &str, spec: &ProxmoxClusterSpec) -> Vec<FieldError> {
    let instances = spec.instances();
    match instances {
        [first, rest @ ..] if spec.mode() == ClusterMode::Default && !rest.is_empty() => {
            let unused: Vec<String> = rest.iter().map(|i| format!("{:?}", i.name)).collect();
            vec![FieldError::new(
                format!("{base}.settings.mode"),
                format!(
                    "settings.mode Default uses only the first instance ({:?}); {} never used: set settings.mode to MultiInstance to spread machines over them, or remove them",
                    first.name,
                    if unused.len() == 1 {
                        format!("{} is", unused[0])
                    } else {
                        format!("{} are", unused.join(", "))
                    }
                ),
            )]
        }
        _ => Vec::new(),
    }
}

/// The Secret an instance's credentials come from, as far as the spec says.
fn secret_key(i: &InstanceSpec) -> (&str, &str) {
    (
        i.credentials_ref.namespace.as_deref().unwrap_or(""),
        i.credentials_ref.name.as_str(),
    )
}

/// Instances with the same credentials Secret are one Proxmox cluster: they
/// must not share nodes (an empty `nodes` is every node), else a node would
/// be in two failure domains; and their `vmIDRange`s must not overlap, else
/// neither range bounds its instance's VMIDs.
pub(super) fn check_same_cluster(
    base: &str,
    instances: &[InstanceSpec],
    errs: &mut Vec<FieldError>,
) {
    for (j, b) in instances.iter().enumerate() {
        let Some((_, a)) = instances[..j]
            .iter()
            .enumerate()
            .find(|(_, a)| secret_key(a) == secret_key(b) && !b.credentials_ref.name.is_empty())
        else {
            continue;
        };
        let path = format!("{base}.settings.instances[{j}]");
        let same = format!(
            "instance {:?} uses the same credentials Secret as instance {:?} (the same Proxmox cluster)",
            b.name, a.name
        );
        let shared = if a.nodes.is_empty() || b.nodes.is_empty() {
            Some("every node with it (an empty nodes list means every node)".to_string())
        } else {
            let theirs: BTreeSet<&str> = a.nodes.iter().map(String::as_str).collect();
            b.nodes
                .iter()
                .find(|n| theirs.contains(n.as_str()))
                .map(|n| format!("node {n:?} with it"))
        };
        if let Some(shared) = shared {
            errs.push(FieldError::new(
                format!("{path}.nodes"),
                format!(
                    "{same} and shares {shared}: give each instance its own nodes, or its own Proxmox cluster"
                ),
            ));
        }
        if let (Some(ra), Some(rb)) = (&a.vm_id_range, &b.vm_id_range)
            && ranges_overlap(ra, rb)
        {
            errs.push(FieldError::new(
                format!("{path}.vmIDRange"),
                format!(
                    "{} overlaps instance {:?}'s vmIDRange {}; both use the same credentials Secret, so both take VMIDs from one Proxmox cluster: make the ranges disjoint",
                    range_text(rb),
                    a.name,
                    range_text(ra)
                ),
            ));
        }
    }
}
