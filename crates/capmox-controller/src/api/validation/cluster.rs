//! ProxmoxCluster and ProxmoxClusterTemplate spec validation.

use std::collections::BTreeSet;

use super::FieldError;
use super::instances::{check_mode, check_same_cluster, mode_warnings};
use super::network::{
    IpFamily, check_endpoint, check_endpoint_pool, check_ip_config, check_name_servers,
    check_pool_overlaps,
};
use super::template::{check_template_source, check_vmid_range};
use crate::api::cluster::ProxmoxClusterSpec;
use crate::api::common::{SecretRef, is_dns1123_label};
use crate::api::templates::ProxmoxClusterTemplateSpec;

/// Every problem with a ProxmoxCluster spec, each naming its field (paths
/// start at `spec.`) and saying what to write.
///
/// Rules: the endpoint is required unless `externalManagedControlPlane`, and
/// when it is an IP address it is reachable (not loopback, multicast, …), not
/// inside a node pool, not a pool's gateway, network or broadcast address;
/// `SingleInstance`/`MultiInstance` need at least one instance, and
/// `MultiInstance` an instance with `controlPlane` (unless the control plane
/// is external); instance names are unique DNS-1123 labels; credentials
/// references name a Secret; instances with the same Secret (one Proxmox
/// cluster) share no node and no VMID; a template needs `templateID` with
/// `sourceNode`, or a selector with valid Proxmox tags; `vmIDRange.start <=
/// end`, both in 100..=999999999; IP pools parse, have the right family,
/// contain their gateway, can serve hosts ([`ipam::check_usable`]) and do not
/// overlap between instances; name servers are resolver addresses.
pub fn validate_cluster(spec: &ProxmoxClusterSpec) -> Vec<FieldError> {
    validate_cluster_at("spec", spec)
}

/// [`validate_cluster`] for the cluster spec inside a ProxmoxClusterTemplate
/// (paths start at `spec.template.spec.`).
pub fn validate_cluster_template(spec: &ProxmoxClusterTemplateSpec) -> Vec<FieldError> {
    validate_cluster_at("spec.template.spec", &spec.template.spec)
}

fn validate_cluster_at(base: &str, spec: &ProxmoxClusterSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let external = spec.external_managed_control_plane.unwrap_or(false);
    match &spec.control_plane_endpoint {
        None if !external && spec.control_plane_endpoint_pool.is_none() => errs.push(FieldError::new(
            format!("{base}.controlPlaneEndpoint"),
            "required unless spec.controlPlaneEndpointPool is set or spec.externalManagedControlPlane is true: write the host and port the API server will be reached at, or a pool to claim the address from",
        )),
        Some(ep) => {
            if ep.host.trim().is_empty() {
                errs.push(FieldError::new(
                    format!("{base}.controlPlaneEndpoint.host"),
                    "must not be empty: write the API server's address or DNS name",
                ));
            }
            if !(1..=65535).contains(&ep.port) {
                errs.push(FieldError::new(
                    format!("{base}.controlPlaneEndpoint.port"),
                    format!("{} is not a TCP port (1..65535), e.g. 6443", ep.port),
                ));
            }
        }
        None => {}
    }
    if let Some(r) = &spec.credentials_ref {
        check_secret_ref(&format!("{base}.credentialsRef"), r, &mut errs);
    }
    check_node_names(
        &format!("{base}.allowedNodes"),
        &spec.allowed_nodes,
        &mut errs,
    );
    check_name_servers(&format!("{base}.dnsServers"), &spec.dns_servers, &mut errs);

    let mut pools = Vec::new();
    for (field, config, family) in [
        ("ipv4Config", &spec.ipv4_config, IpFamily::V4),
        ("ipv6Config", &spec.ipv6_config, IpFamily::V6),
    ] {
        if let Some(c) = config
            && let Some(p) = check_ip_config(&format!("{base}.{field}"), c, family, &mut errs)
        {
            pools.push(p);
        }
    }

    check_mode(base, spec, &mut errs);
    let instances = spec.instances();
    let mut seen = BTreeSet::new();
    for (i, inst) in instances.iter().enumerate() {
        let ipath = format!("{base}.settings.instances[{i}]");
        if !is_dns1123_label(&inst.name) {
            errs.push(FieldError::new(
                format!("{ipath}.name"),
                format!(
                    "{:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters), e.g. dc-a",
                    inst.name
                ),
            ));
        }
        if !seen.insert(inst.name.as_str()) {
            errs.push(FieldError::new(
                format!("{ipath}.name"),
                format!(
                    "duplicate instance name {:?}: give each instance its own name",
                    inst.name
                ),
            ));
        }
        check_secret_ref(
            &format!("{ipath}.credentialsRef"),
            &inst.credentials_ref,
            &mut errs,
        );
        check_node_names(&format!("{ipath}.nodes"), &inst.nodes, &mut errs);
        if let Some(t) = &inst.template {
            check_template_source(&format!("{ipath}.template"), t, &mut errs);
        }
        if let Some(r) = &inst.vm_id_range {
            check_vmid_range(&format!("{ipath}.vmIDRange"), r, &mut errs);
        }
        if let Some(cpu) = &inst.cpu {
            super::shape::check_cpu(&format!("{ipath}.cpu"), cpu, &mut errs);
        }
        if let Some(m) = &inst.bootstrap_media {
            super::shape::check_media(&format!("{ipath}.bootstrapMedia"), m, &mut errs);
        }
        super::pci::check_pci_mappings(
            &format!("{ipath}.pciMappings"),
            &inst.pci_mappings,
            &mut errs,
        );
        if let Some(net) = &inst.network {
            let npath = format!("{ipath}.network");
            for (field, config, family) in [
                ("ipv4Config", &net.ipv4_config, IpFamily::V4),
                ("ipv6Config", &net.ipv6_config, IpFamily::V6),
            ] {
                if let Some(c) = config
                    && let Some(p) =
                        check_ip_config(&format!("{npath}.{field}"), c, family, &mut errs)
                {
                    pools.push(p.for_instance(&inst.name));
                }
            }
            check_name_servers(&format!("{npath}.dnsServers"), &net.dns_servers, &mut errs);
            if let Some(b) = &net.bridge
                && !is_bridge_name(b)
            {
                errs.push(FieldError::new(
                    format!("{npath}.bridge"),
                    format!("{b:?} is not a bridge name (e.g. vmbr0)"),
                ));
            }
        }
    }
    check_same_cluster(base, instances, &mut errs);
    check_pool_overlaps(&pools, &mut errs);
    if let Some(p) = &spec.control_plane_endpoint_pool {
        check_endpoint_pool(
            &format!("{base}.controlPlaneEndpointPool"),
            p,
            external,
            &pools,
            &mut errs,
        );
    }
    if let Some(ep) = &spec.control_plane_endpoint {
        check_endpoint(
            &format!("{base}.controlPlaneEndpoint.host"),
            &ep.host,
            &pools,
            &mut errs,
        );
    }
    errs
}

/// Problems that do not block reconciling but deserve a warning condition
/// (and an admission warning): `allowedNodes` or `credentialsRef` set
/// together with `settings.instances` (ignored then), and mode `Default`
/// with several instances (only the first is used).
pub fn cluster_warnings(spec: &ProxmoxClusterSpec) -> Vec<FieldError> {
    let mut warnings = Vec::new();
    if !spec.instances().is_empty() {
        if !spec.allowed_nodes.is_empty() {
            warnings.push(FieldError::new(
                "spec.allowedNodes",
                "ignored because spec.settings.instances is set; use settings.instances[].nodes",
            ));
        }
        if spec.credentials_ref.is_some() {
            warnings.push(FieldError::new(
                "spec.credentialsRef",
                "ignored because spec.settings.instances is set; each instance has its own credentialsRef",
            ));
        }
    }
    warnings.extend(mode_warnings("spec", spec));
    warnings
}

pub(super) fn check_secret_ref(path: &str, r: &SecretRef, errs: &mut Vec<FieldError>) {
    if r.name.trim().is_empty() {
        errs.push(FieldError::new(
            format!("{path}.name"),
            "must name a Secret (with url, token and secret)",
        ));
    }
    if let Some(ns) = &r.namespace
        && !is_dns1123_label(ns)
    {
        errs.push(FieldError::new(
            format!("{path}.namespace"),
            format!("{ns:?} is not a valid namespace name (a DNS-1123 label)"),
        ));
    }
}

pub(super) fn check_node_names(path: &str, nodes: &[String], errs: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (i, n) in nodes.iter().enumerate() {
        if !is_node_name(n) {
            errs.push(FieldError::new(
                format!("{path}[{i}]"),
                format!("{n:?} is not a Proxmox node name (letters, digits and inner '-')"),
            ));
        } else if !seen.insert(n.as_str()) {
            errs.push(FieldError::new(
                format!("{path}[{i}]"),
                format!("duplicate node {n:?}: list each node once"),
            ));
        }
    }
}

/// A Proxmox node name (`pve-node`), as pve-client parses it.
pub(super) fn is_node_name(n: &str) -> bool {
    pve_client::NodeName::new(n).is_ok()
}

/// Linux bridge / SDN vnet names as Proxmox accepts them (`pve-bridge-id`):
/// a letter first, then letters, digits, `_`, `.` or `-`, at most 15 characters.
pub(super) fn is_bridge_name(b: &str) -> bool {
    let mut chars = b.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && b.len() <= 15
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}
