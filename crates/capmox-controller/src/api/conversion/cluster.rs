//! ProxmoxCluster, field by field (also the `spec.template.spec` of a
//! ProxmoxClusterTemplate).
//!
//! A `v1alpha2` ProxmoxCluster is one Proxmox cluster: it becomes a
//! `v1alpha3` cluster in `Default` mode without `settings.instances`, whose
//! one implicit instance (named `default`) is built from the same
//! `credentialsRef`, `allowedNodes`, `schedulerHints`, `ipv4Config`,
//! `ipv6Config` and `dnsServers` — field names `v1alpha3` kept for exactly
//! this. Refused: `zoneConfig` (per-zone address pools), a
//! `controlPlaneEndpoint` without host or port, a `credentialsRef` without
//! a name. Kept aside: CAPMOX's pool references and node locations in the
//! status; `settings` and `providerIDFormat` the other way.

use crate::api::common::{IpConfig, SchedulerHints, SecretRef};
use crate::api::v1alpha2::cluster as v2;
use crate::api::v1alpha2::common as v2common;
use crate::api::{
    ApiEndpoint, Condition, Initialization, ProxmoxClusterSpec, ProxmoxClusterStatus,
};

use super::fields::{join, opt_u32, refuse, to_i32, to_u8};
use super::{Body, ConversionError, emit, parse};

/// `v1alpha2` → `v1alpha3` body.
pub(super) fn up(body: &Body) -> Result<Body, ConversionError> {
    let (spec, status) = parse::<v2::ProxmoxClusterSpec, v2::ProxmoxClusterStatus>(body)?;
    let spec = spec_up(&spec, "spec")?;
    let status = status.as_ref().map(status_up);
    emit(&spec, status.as_ref())
}

/// `v1alpha3` → `v1alpha2` body.
pub(super) fn down(body: &Body) -> Result<Body, ConversionError> {
    let (spec, status) = parse::<ProxmoxClusterSpec, ProxmoxClusterStatus>(body)?;
    emit(&spec_down(&spec), status.as_ref().map(status_down).as_ref())
}

/// A `v1alpha2` ProxmoxCluster spec found at `at`, as `v1alpha3`.
///
/// # Errors
/// [`ConversionError`] naming a refused field (module doc).
pub(super) fn spec_up(
    s: &v2::ProxmoxClusterSpec,
    at: &str,
) -> Result<ProxmoxClusterSpec, ConversionError> {
    if !s.zone_configs.is_empty() {
        return refuse(
            &join(at, "zoneConfig"),
            "zones are address pools a machine picks by network.zone inside one Proxmox cluster; \
             v1alpha3 gives each Proxmox cluster (instance) one set of pools",
        );
    }
    Ok(ProxmoxClusterSpec {
        control_plane_endpoint: s
            .control_plane_endpoint
            .as_ref()
            .map(|e| endpoint_up(e, &join(at, "controlPlaneEndpoint")))
            .transpose()?,
        external_managed_control_plane: s.external_managed_control_plane,
        credentials_ref: s
            .credentials_ref
            .as_ref()
            .map(|c| credentials_up(c, &join(at, "credentialsRef")))
            .transpose()?,
        allowed_nodes: s.allowed_nodes.clone(),
        scheduler_hints: s
            .scheduler_hints
            .as_ref()
            .map(|h| {
                Ok::<_, ConversionError>(SchedulerHints {
                    memory_adjustment: opt_u32(
                        h.memory_adjustment,
                        &join(at, "schedulerHints.memoryAdjustment"),
                    )?,
                })
            })
            .transpose()?,
        ipv4_config: s
            .ipv4_config
            .as_ref()
            .map(|c| ip_up(c, &join(at, "ipv4Config")))
            .transpose()?,
        ipv6_config: s
            .ipv6_config
            .as_ref()
            .map(|c| ip_up(c, &join(at, "ipv6Config")))
            .transpose()?,
        dns_servers: s.dns_servers.clone(),
        provider_id_format: None,
        control_plane_endpoint_pool: None,
        settings: None,
    })
}

/// A `v1alpha3` ProxmoxCluster spec as `v1alpha2`; `settings` and
/// `providerIDFormat` have no place there.
pub(super) fn spec_down(s: &ProxmoxClusterSpec) -> v2::ProxmoxClusterSpec {
    v2::ProxmoxClusterSpec {
        allowed_nodes: s.allowed_nodes.clone(),
        control_plane_endpoint: s.control_plane_endpoint.as_ref().map(|e| v2::ApiEndpoint {
            host: Some(e.host.clone()),
            port: Some(e.port),
        }),
        credentials_ref: s.credentials_ref.as_ref().map(|c| v2::SecretReference {
            name: Some(c.name.clone()),
            namespace: c.namespace.clone(),
        }),
        dns_servers: s.dns_servers.clone(),
        external_managed_control_plane: s.external_managed_control_plane,
        ipv4_config: s.ipv4_config.as_ref().map(ip_down),
        ipv6_config: s.ipv6_config.as_ref().map(ip_down),
        scheduler_hints: s.scheduler_hints.map(|h| v2::SchedulerHints {
            memory_adjustment: h.memory_adjustment.map(i64::from),
        }),
        zone_configs: Vec::new(),
    }
}

fn endpoint_up(e: &v2::ApiEndpoint, at: &str) -> Result<ApiEndpoint, ConversionError> {
    match (&e.host, e.port) {
        (Some(host), Some(port)) => Ok(ApiEndpoint {
            host: host.clone(),
            port,
        }),
        (None, _) => refuse(
            &join(at, "host"),
            "v1alpha3 needs the host together with the port",
        ),
        (_, None) => refuse(
            &join(at, "port"),
            "v1alpha3 needs the port together with the host",
        ),
    }
}

fn credentials_up(c: &v2::SecretReference, at: &str) -> Result<SecretRef, ConversionError> {
    match &c.name {
        Some(name) => Ok(SecretRef {
            name: name.clone(),
            namespace: c.namespace.clone(),
        }),
        None => refuse(
            &join(at, "name"),
            "a reference without a name selects no Secret; remove credentialsRef to use the manager's credentials",
        ),
    }
}

fn ip_up(c: &v2::IpConfig, at: &str) -> Result<IpConfig, ConversionError> {
    Ok(IpConfig {
        addresses: c.addresses.clone(),
        prefix: to_u8(c.prefix, &join(at, "prefix"))?,
        gateway: c.gateway.clone(),
        metric: opt_u32(c.metric, &join(at, "metric"))?,
    })
}

fn ip_down(c: &IpConfig) -> v2::IpConfig {
    v2::IpConfig {
        addresses: c.addresses.clone(),
        gateway: c.gateway.clone(),
        metric: c.metric.and_then(to_i32),
        prefix: i32::from(c.prefix),
    }
}

fn status_up(s: &v2::ProxmoxClusterStatus) -> ProxmoxClusterStatus {
    ProxmoxClusterStatus {
        initialization: s.initialization.as_ref().map(|i| Initialization {
            provisioned: i.provisioned,
        }),
        conditions: conditions_up(&s.conditions),
        ..ProxmoxClusterStatus::default()
    }
}

fn status_down(s: &ProxmoxClusterStatus) -> v2::ProxmoxClusterStatus {
    v2::ProxmoxClusterStatus {
        conditions: conditions_down(&s.conditions),
        initialization: s.initialization.as_ref().map(|i| v2common::Initialization {
            provisioned: i.provisioned,
        }),
        ..v2::ProxmoxClusterStatus::default()
    }
}

/// `v1alpha2` conditions as `metav1.Condition`s (the same fields; the
/// `v1alpha2` schema only validates them more).
pub(super) fn conditions_up(c: &[v2common::Condition]) -> Vec<Condition> {
    c.iter()
        .map(|c| Condition {
            last_transition_time: c.last_transition_time.clone(),
            message: c.message.clone(),
            observed_generation: c.observed_generation,
            reason: c.reason.clone(),
            status: c.status.clone(),
            type_: c.type_.clone(),
        })
        .collect()
}

/// `metav1.Condition`s as `v1alpha2` conditions.
pub(super) fn conditions_down(c: &[Condition]) -> Vec<v2common::Condition> {
    c.iter()
        .map(|c| v2common::Condition {
            last_transition_time: c.last_transition_time.clone(),
            message: c.message.clone(),
            observed_generation: c.observed_generation,
            reason: c.reason.clone(),
            status: c.status.clone(),
            type_: c.type_.clone(),
        })
        .collect()
}
