//! IP pool, endpoint and name-server checks, built on the `ipam` crate:
//! pools must parse ([`ipam::Pool::parse_as`]) and be able to serve hosts
//! ([`ipam::check_usable`]); addresses that no host can have are refused
//! where a host address is meant ([`ipam::special_block`]).

use std::net::IpAddr;

use ipam::{IpamError, Pool, PoolSpec};

use super::FieldError;
use crate::api::cluster::EndpointPool;
use crate::api::common::IpConfig;

pub(super) use ipam::Family as IpFamily;

/// A validated pool with the field it came from and the instance using it
/// (`None` for the cluster-wide default pool).
pub(super) struct NamedPool {
    pub path: String,
    pub instance: Option<String>,
    pub pool: Pool,
}

impl NamedPool {
    pub fn for_instance(mut self, instance: &str) -> NamedPool {
        self.instance = Some(instance.to_string());
        self
    }
}

/// The `ipam` pool spec of an `ipv4Config` / `ipv6Config`.
pub fn pool_spec(config: &IpConfig) -> PoolSpec {
    PoolSpec {
        addresses: config.addresses.clone(),
        prefix: i64::from(config.prefix),
        gateway: config.gateway.clone(),
        ..PoolSpec::default()
    }
}

fn push_ipam(errs: &mut Vec<FieldError>, e: IpamError, fallback_path: &str) {
    match e.field() {
        Some(field) => errs.push(FieldError::new(field, e.detail())),
        None => errs.push(FieldError::new(fallback_path, e.to_string())),
    }
}

/// Validates one pool of the given family; returns it when valid.
pub(super) fn check_ip_config(
    path: &str,
    config: &IpConfig,
    family: IpFamily,
    errs: &mut Vec<FieldError>,
) -> Option<NamedPool> {
    match Pool::parse_as(path, &pool_spec(config), family) {
        Ok(pool) => {
            for e in ipam::check_usable(&pool) {
                push_ipam(errs, e.at(path), path);
            }
            Some(NamedPool {
                path: path.to_string(),
                instance: None,
                pool,
            })
        }
        Err(problems) => {
            for e in problems {
                push_ipam(errs, e.at(path), path);
            }
            None
        }
    }
}

/// Pools used by different instances must not overlap (the same address
/// could be handed to two machines). The cluster-wide default pool counts
/// as used by every instance that has no pool of its own for that family.
pub(super) fn check_pool_overlaps(pools: &[NamedPool], errs: &mut Vec<FieldError>) {
    for (i, a) in pools.iter().enumerate() {
        for b in pools.iter().skip(i + 1) {
            if a.instance == b.instance || a.pool.family() != b.pool.family() {
                continue;
            }
            if let Some(range) = ipam::overlaps(&a.pool, &b.pool) {
                errs.push(FieldError::new(
                    b.path.clone(),
                    format!(
                        "overlaps {} (both can hand out {range}): pools of different instances must be disjoint, give each instance its own addresses",
                        a.path
                    ),
                ));
            }
        }
    }
}

/// `spec.controlPlaneEndpointPool` (docs/control-plane-endpoint.md): not with
/// an externally managed control plane; exactly one of `poolRef` and
/// `addresses`; `addresses` with a `prefix`, one family, parsing as a pool
/// and sharing no address with a node pool (a machine could get the VIP).
pub(super) fn check_endpoint_pool(
    path: &str,
    p: &EndpointPool,
    external: bool,
    node_pools: &[NamedPool],
    errs: &mut Vec<FieldError>,
) {
    if external {
        errs.push(FieldError::new(
            path,
            "cannot be used with spec.externalManagedControlPlane: the control plane provider sets the endpoint; remove one of the two",
        ));
    }
    match (&p.pool_ref, p.addresses.is_empty()) {
        (Some(_), false) => errs.push(FieldError::new(
            path,
            "set poolRef or addresses, not both: poolRef names an existing pool, addresses make one",
        )),
        (None, true) => errs.push(FieldError::new(
            path,
            "set poolRef (an existing IPAM pool) or addresses (a pool the provider creates)",
        )),
        _ => {}
    }
    if p.addresses.is_empty() {
        return;
    }
    let Some(prefix) = p.prefix else {
        errs.push(FieldError::new(
            format!("{path}.prefix"),
            "required with addresses: the prefix length of the VIP's subnet, e.g. 24",
        ));
        return;
    };
    let family = if p.addresses.iter().any(|a| a.contains(':')) {
        IpFamily::V6
    } else {
        IpFamily::V4
    };
    let config = IpConfig {
        addresses: p.addresses.clone(),
        prefix,
        gateway: None,
        metric: None,
    };
    let Some(vip) = check_ip_config(path, &config, family, errs) else {
        return;
    };
    for n in node_pools.iter().filter(|n| n.pool.family() == family) {
        if let Some(range) = ipam::overlaps(&vip.pool, &n.pool) {
            errs.push(FieldError::new(
                format!("{path}.addresses"),
                format!(
                    "overlaps the node pool {} (both can hand out {range}): a machine could get the control-plane address; give the endpoint pool its own addresses",
                    n.path
                ),
            ));
        }
    }
}

/// The control-plane endpoint, when it is an IP address: one other machines
/// can reach, not one a node can get from a pool, not a pool's gateway, not
/// the network or broadcast address of a pool's subnet.
pub(super) fn check_endpoint(
    path: &str,
    host: &str,
    pools: &[NamedPool],
    errs: &mut Vec<FieldError>,
) {
    let Ok(addr) = host.parse::<IpAddr>() else {
        return;
    };
    if let Some((block, what)) = ipam::special_block(addr) {
        errs.push(FieldError::new(
            path,
            format!(
                "{addr} cannot be the API endpoint: it lies in {what} {block}, which other machines cannot reach; write the address the API server is reached at (e.g. a kube-vip address)"
            ),
        ));
        return;
    }
    for p in pools {
        let subnet = p.pool.subnet();
        if p.pool.contains(addr) {
            errs.push(FieldError::new(
                path,
                format!(
                    "{addr} lies inside the node pool {}, so a machine could get it: pick an address outside the pools",
                    p.path
                ),
            ));
        } else if p.pool.gateway() == Some(addr) {
            errs.push(FieldError::new(
                path,
                format!(
                    "{addr} is the gateway of {}: write the API server's own address",
                    p.path
                ),
            ));
        } else if addr.is_ipv4() && subnet.prefix_len() <= 30 && subnet.network() == addr {
            errs.push(FieldError::new(
                path,
                format!(
                    "{addr} is the network address of {subnet} ({}): write a host address",
                    p.path
                ),
            ));
        } else if addr.is_ipv4() && subnet.prefix_len() <= 30 && subnet.broadcast() == addr {
            errs.push(FieldError::new(
                path,
                format!(
                    "{addr} is the broadcast address of {subnet} ({}): write a host address",
                    p.path
                ),
            ));
        }
    }
}

/// Each entry must be the IP address of a resolver. Loopback (a local stub
/// resolver) and link-local (a cloud's metadata resolver) addresses can be
/// right; unspecified, multicast, reserved and IPv4-mapped ones cannot.
pub(super) fn check_name_servers(path: &str, servers: &[String], errs: &mut Vec<FieldError>) {
    for (i, s) in servers.iter().enumerate() {
        let field = format!("{path}[{i}]");
        match ipam::parse_address(&field, s) {
            Err(e) => push_ipam(errs, e, &field),
            Ok(addr) => {
                let link_local = match addr {
                    IpAddr::V4(a) => a.is_link_local(),
                    IpAddr::V6(a) => a.is_unicast_link_local(),
                };
                if let Some((block, what)) = ipam::special_block(addr)
                    && !addr.is_loopback()
                    && !link_local
                {
                    errs.push(FieldError::new(
                        field,
                        format!(
                            "{addr} cannot be a name server: it lies in {what} {block}; write the resolver's address (e.g. 1.1.1.1)"
                        ),
                    ));
                }
            }
        }
    }
}
