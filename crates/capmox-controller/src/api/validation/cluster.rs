//! ProxmoxCluster spec validation.

use std::collections::BTreeSet;

use super::FieldError;
use super::network::{
    IpFamily, check_endpoint_outside_pools, check_ip_config, check_name_servers,
    check_pool_overlaps,
};
use crate::api::cluster::{ClusterMode, ProxmoxClusterSpec};
use crate::api::common::{
    SecretRef, TemplateSelector, TemplateSource, VMID_MAX, VMID_MIN, VmIdRange, is_dns1123_label,
    is_valid_tag,
};

/// Every problem with a ProxmoxCluster spec, each naming its field.
///
/// Rules: the endpoint is required unless `externalManagedControlPlane`;
/// `SingleInstance`/`MultiInstance` need at least one instance; instance names
/// are unique DNS-1123 labels; credentials references name a Secret; a template
/// needs `templateID` with `sourceNode`, or a selector; `vmIDRange.start <= end`,
/// both in 100..=999999999; IP pools parse, have the right family, contain their
/// gateway, and do not overlap between instances; the endpoint host is not
/// inside a node pool; name servers are IP addresses.
pub fn validate_cluster(spec: &ProxmoxClusterSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let external = spec.external_managed_control_plane.unwrap_or(false);
    match &spec.control_plane_endpoint {
        None if !external => errs.push(FieldError::new(
            "spec.controlPlaneEndpoint",
            "required unless spec.externalManagedControlPlane is true",
        )),
        Some(ep) => {
            if ep.host.trim().is_empty() {
                errs.push(FieldError::new(
                    "spec.controlPlaneEndpoint.host",
                    "must not be empty",
                ));
            }
            if !(1..=65535).contains(&ep.port) {
                errs.push(FieldError::new(
                    "spec.controlPlaneEndpoint.port",
                    format!("{} is not a TCP port (1..65535)", ep.port),
                ));
            }
        }
        None => {}
    }
    if let Some(r) = &spec.credentials_ref {
        check_secret_ref("spec.credentialsRef", r, &mut errs);
    }
    check_node_names("spec.allowedNodes", &spec.allowed_nodes, &mut errs);
    check_name_servers("spec.dnsServers", &spec.dns_servers, &mut errs);

    let mut pools = Vec::new();
    if let Some(c) = &spec.ipv4_config
        && let Some(p) = check_ip_config("spec.ipv4Config", c, IpFamily::V4, &mut errs)
    {
        pools.push(p);
    }
    if let Some(c) = &spec.ipv6_config
        && let Some(p) = check_ip_config("spec.ipv6Config", c, IpFamily::V6, &mut errs)
    {
        pools.push(p);
    }

    let mode = spec.mode();
    let instances = spec.instances();
    if matches!(
        mode,
        ClusterMode::SingleInstance | ClusterMode::MultiInstance
    ) && instances.is_empty()
    {
        errs.push(FieldError::new(
            "spec.settings.instances",
            format!(
                "settings.mode {} needs at least one instance",
                mode.as_str()
            ),
        ));
    }

    let mut seen = BTreeSet::new();
    for (i, inst) in instances.iter().enumerate() {
        let base = format!("spec.settings.instances[{i}]");
        if !is_dns1123_label(&inst.name) {
            errs.push(FieldError::new(
                format!("{base}.name"),
                format!(
                    "{:?} is not a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)",
                    inst.name
                ),
            ));
        }
        if !seen.insert(inst.name.as_str()) {
            errs.push(FieldError::new(
                format!("{base}.name"),
                format!("duplicate instance name {:?}", inst.name),
            ));
        }
        check_secret_ref(
            &format!("{base}.credentialsRef"),
            &inst.credentials_ref,
            &mut errs,
        );
        check_node_names(&format!("{base}.nodes"), &inst.nodes, &mut errs);
        if let Some(t) = &inst.template {
            check_template_source(&format!("{base}.template"), t, &mut errs);
        }
        if let Some(r) = &inst.vm_id_range {
            check_vmid_range(&format!("{base}.vmIDRange"), r, &mut errs);
        }
        if let Some(net) = &inst.network {
            let npath = format!("{base}.network");
            if let Some(c) = &net.ipv4_config
                && let Some(p) =
                    check_ip_config(&format!("{npath}.ipv4Config"), c, IpFamily::V4, &mut errs)
            {
                pools.push(p.for_instance(&inst.name));
            }
            if let Some(c) = &net.ipv6_config
                && let Some(p) =
                    check_ip_config(&format!("{npath}.ipv6Config"), c, IpFamily::V6, &mut errs)
            {
                pools.push(p.for_instance(&inst.name));
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
    check_pool_overlaps(&pools, &mut errs);
    if let Some(ep) = &spec.control_plane_endpoint {
        check_endpoint_outside_pools(
            "spec.controlPlaneEndpoint.host",
            &ep.host,
            &pools,
            &mut errs,
        );
    }
    errs
}

/// Problems that do not block reconciling but deserve a warning condition,
/// e.g. `allowedNodes` set together with `settings.instances` (ignored then).
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
    warnings
}

pub(super) fn check_secret_ref(path: &str, r: &SecretRef, errs: &mut Vec<FieldError>) {
    if r.name.trim().is_empty() {
        errs.push(FieldError::new(
            format!("{path}.name"),
            "must name a Secret",
        ));
    }
    if let Some(ns) = &r.namespace
        && !is_dns1123_label(ns)
    {
        errs.push(FieldError::new(
            format!("{path}.namespace"),
            format!("{ns:?} is not a valid namespace name"),
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
                format!("duplicate node {n:?}"),
            ));
        }
    }
}

/// Proxmox node names (`pve-node` format): letters, digits and inner hyphens.
pub(super) fn is_node_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= 63
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !n.starts_with('-')
        && !n.ends_with('-')
}

/// Linux bridge / SDN vnet names as Proxmox accepts them (`pve-bridge-id`):
/// a letter first, then letters, digits, `_`, `.` or `-`, at most 15 characters.
pub(super) fn is_bridge_name(b: &str) -> bool {
    let mut chars = b.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && b.len() <= 15
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
}

pub(super) fn check_template_source(path: &str, t: &TemplateSource, errs: &mut Vec<FieldError>) {
    match (&t.template_id, &t.template_selector) {
        (Some(_), Some(_)) => errs.push(FieldError::new(
            format!("{path}.templateSelector"),
            "templateID and templateSelector are mutually exclusive",
        )),
        (None, None) => errs.push(FieldError::new(
            path.to_string(),
            "a template needs templateID with sourceNode, or templateSelector",
        )),
        (Some(id), None) => {
            check_vmid(&format!("{path}.templateID"), *id, errs);
            if t.source_node.is_none() {
                errs.push(FieldError::new(
                    format!("{path}.sourceNode"),
                    "templateID needs sourceNode (the node that holds the template)",
                ));
            }
        }
        (None, Some(sel)) => check_selector(&format!("{path}.templateSelector"), sel, errs),
    }
    if let Some(n) = &t.source_node
        && !is_node_name(n)
    {
        errs.push(FieldError::new(
            format!("{path}.sourceNode"),
            format!("{n:?} is not a Proxmox node name"),
        ));
    }
}

pub(super) fn check_selector(path: &str, sel: &TemplateSelector, errs: &mut Vec<FieldError>) {
    if sel.match_tags.is_empty() {
        errs.push(FieldError::new(
            format!("{path}.matchTags"),
            "must list at least one tag",
        ));
    }
    check_tags(&format!("{path}.matchTags"), &sel.match_tags, errs);
}

pub(super) fn check_tags(path: &str, tags: &[String], errs: &mut Vec<FieldError>) {
    for (i, t) in tags.iter().enumerate() {
        if !is_valid_tag(t) {
            errs.push(FieldError::new(
                format!("{path}[{i}]"),
                format!(
                    "{t:?} is not a Proxmox tag (first [a-z0-9_], then [a-z0-9_+.-], case-insensitive)"
                ),
            ));
        }
    }
}

pub(super) fn check_vmid(path: &str, id: u32, errs: &mut Vec<FieldError>) {
    if !(VMID_MIN..=VMID_MAX).contains(&id) {
        errs.push(FieldError::new(
            path.to_string(),
            format!("{id} is outside Proxmox's VMID range {VMID_MIN}..{VMID_MAX}"),
        ));
    }
}

pub(super) fn check_vmid_range(path: &str, r: &VmIdRange, errs: &mut Vec<FieldError>) {
    check_vmid(&format!("{path}.start"), r.start, errs);
    check_vmid(&format!("{path}.end"), r.end, errs);
    if r.start > r.end {
        errs.push(FieldError::new(
            path.to_string(),
            format!("start {} is greater than end {}", r.start, r.end),
        ));
    }
}
