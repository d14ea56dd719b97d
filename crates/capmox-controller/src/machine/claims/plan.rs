//! Which claims a machine wants and how each device is addressed (pure).

use crate::api::machine::NetworkDevice;
use crate::capi::ipam::PoolRef;
use crate::instances::IpFamily;

/// Label on our claims naming the ProxmoxMachine (for listing).
pub const MACHINE_LABEL: &str = "infrastructure.cluster.x-k8s.io/proxmoxmachine";

/// A claim the machine should have.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WantedClaim {
    /// Claim name.
    pub name: String,
    /// Device (`net0`).
    pub net: String,
    /// Family, when known (instance pools).
    pub family: Option<IpFamily>,
    /// The pool.
    pub pool: PoolRef,
    /// Route metric of the pool's config (instance pools).
    pub metric: Option<u32>,
}

/// How each device is addressed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DevicePlan {
    /// `netN` index.
    pub index: u8,
    /// DHCPv4.
    pub dhcp4: bool,
    /// DHCPv6 / SLAAC.
    pub dhcp6: bool,
    /// Name servers of the device (device's ▸ instance's).
    pub dns: Vec<String>,
}

/// The instance pool of one family, as the claims need it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstancePool {
    /// The instance has no pool of this family.
    None,
    /// It has one but the ProxmoxCluster has not recorded it yet.
    NotRecorded,
    /// The recorded pool and the config's route metric.
    Recorded(PoolRef, Option<u32>),
}

/// Claim name for an instance pool.
pub fn instance_claim_name(machine: &str, net: &str, family: IpFamily) -> String {
    crate::names::claim_name(machine, net, family)
}

/// Claim name for the i-th `ipPoolRef` of a device.
pub fn ref_claim_name(machine: &str, net: &str, i: usize) -> String {
    crate::names::ref_claim_name(machine, net, i)
}

/// The devices of a spec: the listed ones, plus an implicit `net0`.
pub fn devices(listed: &[NetworkDevice]) -> Vec<NetworkDevice> {
    let mut out = listed.to_vec();
    if !out.iter().any(|d| d.name == "net0") {
        out.push(NetworkDevice {
            name: "net0".into(),
            ..NetworkDevice::default()
        });
    }
    out.sort_by_key(|d| {
        d.name
            .trim_start_matches("net")
            .parse::<u8>()
            .unwrap_or(u8::MAX)
    });
    out
}

/// The claims a machine should have and how each device is addressed.
///
/// # Errors
/// A message naming the device and family whose instance pool the
/// ProxmoxCluster has not recorded yet.
pub fn plan(
    machine: &str,
    listed: &[NetworkDevice],
    v4: &InstancePool,
    v6: &InstancePool,
    instance_dns: &[String],
) -> Result<(Vec<WantedClaim>, Vec<DevicePlan>), String> {
    let mut claims = Vec::new();
    let mut plans = Vec::new();
    for d in devices(listed) {
        let index = d.name.trim_start_matches("net").parse::<u8>().unwrap_or(0);
        let mut dp = DevicePlan {
            index,
            dhcp4: d.dhcp4.unwrap_or(false),
            dhcp6: d.dhcp6.unwrap_or(false),
            dns: if d.dns_servers.is_empty() {
                instance_dns.to_vec()
            } else {
                d.dns_servers.clone()
            },
        };
        if !d.ip_pool_ref.is_empty() {
            for (i, r) in d.ip_pool_ref.iter().enumerate() {
                claims.push(WantedClaim {
                    name: ref_claim_name(machine, &d.name, i),
                    net: d.name.clone(),
                    family: None,
                    pool: PoolRef {
                        api_group: r.api_group.clone(),
                        kind: r.kind.clone(),
                        name: r.name.clone(),
                    },
                    metric: None,
                });
            }
        } else if index == 0 {
            let mut any = false;
            for (family, pool, dhcp) in [(IpFamily::V4, v4, dp.dhcp4), (IpFamily::V6, v6, dp.dhcp6)]
            {
                if dhcp {
                    any = true;
                    continue;
                }
                match pool {
                    InstancePool::None => {}
                    InstancePool::NotRecorded => {
                        return Err(format!(
                            "waiting for the ProxmoxCluster to create and record the {} pool of the instance (status.ipPools)",
                            family.as_str()
                        ));
                    }
                    InstancePool::Recorded(p, metric) => {
                        any = true;
                        claims.push(WantedClaim {
                            name: instance_claim_name(machine, &d.name, family),
                            net: d.name.clone(),
                            family: Some(family),
                            pool: p.clone(),
                            metric: *metric,
                        });
                    }
                }
            }
            if !any && d.dhcp4.is_none() && d.dhcp6.is_none() {
                dp.dhcp4 = true;
            }
        }
        plans.push(dp);
    }
    Ok((claims, plans))
}
