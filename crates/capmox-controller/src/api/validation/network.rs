//! IP pool and name-server checks, built on the `ipam` crate.

use std::net::IpAddr;

use ipam::{IpamError, Pool, PoolSpec};

use super::FieldError;
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
        Ok(pool) => Some(NamedPool {
            path: path.to_string(),
            instance: None,
            pool,
        }),
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
                        "overlaps {} (both can hand out {range}); pools of different instances must be disjoint",
                        a.path
                    ),
                ));
            }
        }
    }
}

/// The control-plane endpoint must not be an address a node can get.
pub(super) fn check_endpoint_outside_pools(
    path: &str,
    host: &str,
    pools: &[NamedPool],
    errs: &mut Vec<FieldError>,
) {
    let Ok(addr) = host.parse::<IpAddr>() else {
        return;
    };
    for p in pools.iter().filter(|p| p.pool.contains(addr)) {
        errs.push(FieldError::new(
            path,
            format!(
                "{addr} lies inside the node pool {}; the API endpoint would be handed to a machine",
                p.path
            ),
        ));
    }
}

/// Each entry must be an IP address.
pub(super) fn check_name_servers(path: &str, servers: &[String], errs: &mut Vec<FieldError>) {
    for (i, s) in servers.iter().enumerate() {
        let field = format!("{path}[{i}]");
        if let Err(e) = ipam::parse_address(&field, s) {
            push_ipam(errs, e, &field);
        }
    }
}
