//! IP addresses through the CAPI IPAM contract (`ipam.cluster.x-k8s.io`):
//! one `IPAddressClaim` per device and family, owned by the ProxmoxMachine
//! (controller, `blockOwnerDeletion`), `spec.clusterName` set, pointing at the
//! pool of the machine's instance (from `ProxmoxCluster.status.ipPools`) or at
//! the device's own `ipPoolRef` (any IPAM provider's pool kind). The address
//! is read from the `IPAddress` named by `status.addressRef`.
//!
//! Which devices claim:
//! - `net0` (the default device, listed or not) without `ipPoolRef`: one
//!   claim per family the instance has a pool for, unless `dhcp4`/`dhcp6`
//!   asks for DHCP on that family. With no pool and no DHCP setting at all,
//!   `net0` uses DHCPv4.
//! - A device with `ipPoolRef`: one claim per reference.
//! - Other devices without `ipPoolRef`: no claim (DHCP only if asked).
//!
//! Names: `<machine>-<net>-<family>` for instance pools (e.g.
//! `wl1-md-0-abcde-net0-ipv4`), `<machine>-<net>-<i>` for the i-th
//! `ipPoolRef` (its family is only known once the address is there). Names
//! longer than 253 characters are cut and suffixed with a hash.
//!
//! A claim without an address is reported exhausted only when the claim
//! itself says so (its condition reason `PoolExhausted`, or the IPAM
//! provider's message saying "exhausted"); otherwise the machine waits,
//! naming the pool and how long the claim has waited.
//!
//! Claims are released only after the VM is gone (field case B18).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};

use super::decide::{ClaimedAddress, ClaimsFact};
use crate::api::ProxmoxMachine;
use crate::api::machine::NetworkDevice;
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::ipam::{IPAddress, IPAddressClaim, IpAddressClaimSpec, PoolRef};
use crate::error::Error;
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

fn cut(name: String) -> String {
    if name.len() <= 253 {
        return name;
    }
    // FNV-1a: stable across builds and platforms.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    let mut head = name[..240].to_string();
    while head.ends_with(['-', '.']) {
        head.pop();
    }
    format!("{head}-{h:012x}").chars().take(253).collect()
}

/// Claim name for an instance pool.
pub fn instance_claim_name(machine: &str, net: &str, family: IpFamily) -> String {
    cut(format!("{machine}-{net}-{}", family.as_str()))
}

/// Claim name for the i-th `ipPoolRef` of a device.
pub fn ref_claim_name(machine: &str, net: &str, i: usize) -> String {
    cut(format!("{machine}-{net}-{i}"))
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

/// A claim as observed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// The claim object does not exist.
    Missing,
    /// It exists without an address.
    Waiting {
        /// The claim itself says its pool is exhausted (a condition with
        /// reason `PoolExhausted`, CAPI's `ipamv1.PoolExhaustedReason`, or
        /// the IPAM provider's message saying "exhausted"). Never inferred
        /// from how long the claim waited.
        exhausted: bool,
        /// For an exhausted pool the claim's own `reason: message`; else
        /// how long the claim has waited for an address, plus what its
        /// conditions say.
        message: String,
    },
    /// It has its address.
    Bound(ClaimedAddress),
}

/// A wait for humans: `0.3s` under 10 s, `42s` under 2 min, `3m05s`, `1h02m`.
pub fn waited(d: Duration) -> String {
    let secs = d.as_secs();
    if d < Duration::from_secs(10) {
        format!("{:.1}s", d.as_secs_f64())
    } else if secs < 120 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// The state of one claim from the claim object, its `IPAddress` and the
/// time (pure: `now` injected). A claim without an address is exhausted
/// only when it says so; otherwise its message tells how long it has
/// waited since its creation, and once that is longer than `patience` (how
/// long an IPAM provider usually takes) it says so too — field case B15
/// ("no address for long") is reported, not reinterpreted as a full pool.
pub fn claim_state(
    net: &str,
    claim: Option<&IPAddressClaim>,
    address: Option<&IPAddress>,
    now: Timestamp,
    patience: Duration,
) -> ClaimState {
    let Some(claim) = claim else {
        return ClaimState::Missing;
    };
    if let Some(a) = address
        && let Ok(ip) = a.spec.address.parse::<IpAddr>()
    {
        let prefix = a
            .spec
            .prefix
            .and_then(|p| u8::try_from(p).ok())
            .unwrap_or(if ip.is_ipv4() { 32 } else { 128 });
        return ClaimState::Bound(ClaimedAddress {
            net: net.to_string(),
            address: ip,
            prefix,
            gateway: a.spec.gateway.as_deref().and_then(|g| g.parse().ok()),
        });
    }
    let conditions = claim
        .status
        .as_ref()
        .map(|s| s.conditions.as_slice())
        .unwrap_or(&[]);
    let said = |c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition| {
        if c.message.is_empty() {
            c.reason.clone()
        } else {
            format!("{}: {}", c.reason, c.message)
        }
    };
    if let Some(c) = conditions.iter().find(|c| {
        c.status != "True"
            && (c.reason == "PoolExhausted" || c.message.to_ascii_lowercase().contains("exhausted"))
    }) {
        return ClaimState::Waiting {
            exhausted: true,
            message: said(c),
        };
    }
    let age = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(|t| now.duration_since(t.0))
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    let mut message = format!("no address after {}", waited(age));
    if let Some(c) = conditions
        .iter()
        .find(|c| c.status == "False" && !(c.reason.is_empty() && c.message.is_empty()))
    {
        message.push_str(&format!(" ({})", said(c)));
    }
    if age > patience {
        message.push_str(&format!(
            "; longer than the usual {}: is the IPAM provider running?",
            waited(patience)
        ));
    }
    ClaimState::Waiting {
        exhausted: false,
        message,
    }
}

/// Folds the states of all wanted claims into the decision fact.
pub fn fold(wanted: &[WantedClaim], states: &[ClaimState]) -> ClaimsFact {
    if wanted.is_empty() {
        return ClaimsFact::NotNeeded;
    }
    if states.contains(&ClaimState::Missing) {
        return ClaimsFact::Missing;
    }
    let mut bound = Vec::new();
    let mut pools = Vec::new();
    let mut exhausted = false;
    let mut messages = Vec::new();
    for (w, s) in wanted.iter().zip(states) {
        match s {
            ClaimState::Bound(a) => bound.push(a.clone()),
            ClaimState::Waiting {
                exhausted: e,
                message,
            } => {
                pools.push(format!("{} {}", w.pool.kind, w.pool.name));
                exhausted |= *e;
                if !message.is_empty() {
                    messages.push(format!("{}: {message}", w.name));
                }
            }
            ClaimState::Missing => {}
        }
    }
    if pools.is_empty() {
        ClaimsFact::Bound(bound)
    } else {
        ClaimsFact::Pending {
            pools: pools.join(", "),
            exhausted,
            message: messages.join("; "),
        }
    }
}

/// One address in one layer-2 domain: `(address, bridge, VLAN)`; the
/// Proxmox cluster is compared by the caller.
pub type L2Address = (IpAddr, String, Option<u16>);

/// Addresses of `ours` that another machine (`(name, its addresses)`)
/// already holds in the same layer-2 domain (bridge and VLAN), with that
/// machine's name — field case B16: overlapping pools of different IPAM
/// providers can hand out one address twice. The same address on another
/// VLAN or bridge is fine.
pub fn duplicates(
    ours: &[L2Address],
    others: &[(String, Vec<L2Address>)],
) -> Vec<(IpAddr, String)> {
    let mut out = Vec::new();
    for (addr, bridge, vlan) in ours {
        for (name, theirs) in others {
            if theirs
                .iter()
                .any(|(a, b, v)| a == addr && b == bridge && v == vlan)
            {
                out.push((*addr, name.clone()));
            }
        }
    }
    out
}

/// The owner reference to the ProxmoxMachine (controller,
/// `blockOwnerDeletion`: the claim moves and is collected with it).
///
/// # Errors
/// [`Error::Precondition`] when the machine has no UID (not stored yet).
pub fn owner_ref(machine: &ProxmoxMachine) -> Result<OwnerReference, Error> {
    let mut o = machine
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Precondition("ProxmoxMachine has no uid".into()))?;
    o.block_owner_deletion = Some(true);
    Ok(o)
}

/// The claim object for `wanted`.
///
/// # Errors
/// As [`owner_ref`].
pub fn claim_object(
    machine: &ProxmoxMachine,
    cluster_name: &str,
    wanted: &WantedClaim,
) -> Result<IPAddressClaim, Error> {
    let labels: BTreeMap<String, String> = [
        (CLUSTER_NAME_LABEL.to_string(), cluster_name.to_string()),
        (MACHINE_LABEL.to_string(), machine.name_any()),
    ]
    .into();
    Ok(IPAddressClaim {
        metadata: ObjectMeta {
            name: Some(wanted.name.clone()),
            namespace: machine.namespace(),
            labels: Some(labels),
            owner_references: Some(vec![owner_ref(machine)?]),
            ..ObjectMeta::default()
        },
        spec: IpAddressClaimSpec {
            cluster_name: Some(cluster_name.to_string()),
            pool_ref: wanted.pool.clone(),
        },
        status: None,
    })
}

/// Whether `claim` is owned by `machine` (by UID).
pub fn owned_by(claim: &IPAddressClaim, machine: &ProxmoxMachine) -> bool {
    let uid = machine.uid().unwrap_or_default();
    claim
        .owner_references()
        .iter()
        .any(|o| o.uid == uid && o.kind == ProxmoxMachine::kind(&()))
}

/// Reads every wanted claim and its address.
///
/// # Errors
/// [`Error::Kube`] for API failures other than "not found".
pub async fn observe(
    kube: &kube::Client,
    namespace: &str,
    wanted: &[WantedClaim],
    now: Timestamp,
    patience: Duration,
) -> Result<(ClaimsFact, Vec<WantedClaim>, Vec<ClaimState>), Error> {
    let claims: Api<IPAddressClaim> = Api::namespaced(kube.clone(), namespace);
    let addresses: Api<IPAddress> = Api::namespaced(kube.clone(), namespace);
    let mut states = Vec::new();
    for w in wanted {
        let claim = claims.get_opt(&w.name).await?;
        let address = match claim
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.address_ref.as_ref())
        {
            Some(r) if !r.name.is_empty() => addresses.get_opt(&r.name).await?,
            _ => None,
        };
        states.push(claim_state(
            &w.net,
            claim.as_ref(),
            address.as_ref(),
            now,
            patience,
        ));
    }
    Ok((fold(wanted, &states), wanted.to_vec(), states))
}

/// Creates the claims that do not exist yet (an "already exists" race is
/// fine). Returns the names created.
///
/// # Errors
/// [`Error::Kube`] for other API failures.
pub async fn ensure(
    kube: &kube::Client,
    machine: &ProxmoxMachine,
    cluster_name: &str,
    wanted: &[WantedClaim],
    states: &[ClaimState],
) -> Result<Vec<String>, Error> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(kube.clone(), &ns);
    let mut created = Vec::new();
    for (w, s) in wanted.iter().zip(states) {
        if *s != ClaimState::Missing {
            continue;
        }
        let obj = claim_object(machine, cluster_name, w)?;
        match api.create(&PostParams::default(), &obj).await {
            Ok(_) => created.push(w.name.clone()),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(created)
}

/// Claim objects owned by the machine: `(all, deleting)`.
///
/// # Errors
/// [`Error::Kube`].
pub async fn owned(
    kube: &kube::Client,
    machine: &ProxmoxMachine,
) -> Result<Vec<IPAddressClaim>, Error> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(kube.clone(), &ns);
    let lp = ListParams::default().labels(&format!("{MACHINE_LABEL}={}", machine.name_any()));
    Ok(api
        .list(&lp)
        .await?
        .items
        .into_iter()
        .filter(|c| owned_by(c, machine))
        .collect())
}

/// Deletes every claim owned by the machine that is not being deleted yet.
///
/// # Errors
/// [`Error::Kube`] for failures other than "not found".
pub async fn release(
    kube: &kube::Client,
    machine: &ProxmoxMachine,
    claims: &[IPAddressClaim],
) -> Result<usize, Error> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(kube.clone(), &ns);
    let mut n = 0;
    for c in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        match api.delete(&c.name_any(), &DeleteParams::background()).await {
            Ok(_) => n += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    use super::*;
    use crate::api::common::IpPoolReference;
    use crate::capi::ipam::{IpAddressClaimStatus, IpAddressSpec, NameRef};

    fn pool(name: &str) -> InstancePool {
        InstancePool::Recorded(
            PoolRef {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: name.into(),
            },
            None,
        )
    }

    #[test]
    fn net0_claims_from_the_instance_pools() {
        let (claims, plans) = plan(
            "wl1-md-0-abcde",
            &[],
            &pool("wl1-dc-a-ipv4"),
            &pool("wl1-dc-a-ipv6"),
            &["10.0.0.53".into()],
        )
        .unwrap();
        let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            vec!["wl1-md-0-abcde-net0-ipv4", "wl1-md-0-abcde-net0-ipv6"]
        );
        assert_eq!(claims[1].pool.name, "wl1-dc-a-ipv6");
        assert_eq!(
            plans,
            vec![DevicePlan {
                index: 0,
                dhcp4: false,
                dhcp6: false,
                dns: vec!["10.0.0.53".into()]
            }]
        );
    }

    #[test]
    fn dhcp_devices_take_no_claim() {
        let net0 = NetworkDevice {
            name: "net0".into(),
            dhcp4: Some(true),
            ..NetworkDevice::default()
        };
        let (claims, plans) = plan("m", &[net0], &pool("p4"), &pool("p6"), &[]).unwrap();
        assert_eq!(claims.len(), 1);
        assert_eq!(claims[0].family, Some(IpFamily::V6));
        assert!(plans[0].dhcp4);
        // No pool, no DHCP setting: DHCPv4 by default.
        let (claims, plans) =
            plan("m", &[], &InstancePool::None, &InstancePool::None, &[]).unwrap();
        assert!(claims.is_empty());
        assert!(plans[0].dhcp4 && !plans[0].dhcp6);
        // A pool the cluster has not recorded yet: wait, never guess.
        let e = plan(
            "m",
            &[],
            &InstancePool::NotRecorded,
            &InstancePool::None,
            &[],
        )
        .unwrap_err();
        assert!(e.contains("ipv4 pool"), "{e}");
    }

    #[test]
    fn explicit_pool_refs_and_extra_devices() {
        let net1 = NetworkDevice {
            name: "net1".into(),
            bridge: Some("vmbr1".into()),
            ip_pool_ref: vec![IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "GlobalInClusterIPPool".into(),
                name: "storage-net".into(),
            }],
            dns_servers: vec!["10.1.0.53".into()],
            ..NetworkDevice::default()
        };
        let net2 = NetworkDevice {
            name: "net2".into(),
            bridge: Some("vmbr2".into()),
            ..NetworkDevice::default()
        };
        let (claims, plans) = plan(
            "m",
            &[net2, net1],
            &pool("p4"),
            &InstancePool::None,
            &["10.0.0.53".into()],
        )
        .unwrap();
        let names: Vec<&str> = claims.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, vec!["m-net0-ipv4", "m-net1-0"]);
        assert_eq!(claims[1].pool.kind, "GlobalInClusterIPPool");
        assert_eq!(plans.len(), 3);
        assert_eq!(plans[1].dns, vec!["10.1.0.53".to_string()]);
        // net2: no ref, no DHCP: no claim and no DHCP.
        assert!(!plans[2].dhcp4 && !plans[2].dhcp6);
    }

    #[test]
    fn long_names_are_cut_stably() {
        let long = "m".repeat(260);
        let a = instance_claim_name(&long, "net0", IpFamily::V4);
        assert_eq!(a.len(), 253);
        assert_eq!(a, instance_claim_name(&long, "net0", IpFamily::V4));
        assert_ne!(a, instance_claim_name(&long, "net0", IpFamily::V6));
    }

    fn claim(created: i64, conditions: Vec<Condition>) -> IPAddressClaim {
        let mut c = IPAddressClaim::new("m-net0-ipv4", IpAddressClaimSpec::default());
        c.metadata.creation_timestamp = Some(Time(Timestamp::from_second(created).unwrap()));
        c.status = Some(IpAddressClaimStatus {
            address_ref: None,
            conditions,
        });
        c
    }

    #[test]
    fn claim_states_with_an_injected_clock() {
        let now = Timestamp::from_second(1000).unwrap();
        let patience = Duration::from_secs(60);
        assert_eq!(
            claim_state("net0", None, None, now, patience),
            ClaimState::Missing
        );
        assert_eq!(
            claim_state("net0", Some(&claim(990, vec![])), None, now, patience),
            ClaimState::Waiting {
                exhausted: false,
                message: "no address after 10s".into()
            }
        );
        // Waiting long is said, but it is not exhaustion.
        assert_eq!(
            claim_state("net0", Some(&claim(800, vec![])), None, now, patience),
            ClaimState::Waiting {
                exhausted: false,
                message: "no address after 3m20s; longer than the usual 60s: is the IPAM provider running?"
                    .into()
            }
        );
        let failed = Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "AllocationFailed".into(),
            message: "pool p not found".into(),
            last_transition_time: Time(now),
            observed_generation: None,
        };
        assert_eq!(
            claim_state("net0", Some(&claim(998, vec![failed])), None, now, patience),
            ClaimState::Waiting {
                exhausted: false,
                message: "no address after 2.0s (AllocationFailed: pool p not found)".into()
            }
        );
        let exhausted = Condition {
            type_: "Ready".into(),
            status: "False".into(),
            reason: "PoolExhausted".into(),
            message: "pool wl1-dc-a-ipv4 has no free address".into(),
            last_transition_time: Time(now),
            observed_generation: None,
        };
        assert_eq!(
            claim_state(
                "net0",
                Some(&claim(999, vec![exhausted])),
                None,
                now,
                patience
            ),
            ClaimState::Waiting {
                exhausted: true,
                message: "PoolExhausted: pool wl1-dc-a-ipv4 has no free address".into()
            }
        );
        let addr = IPAddress::new(
            "m-net0-ipv4",
            IpAddressSpec {
                claim_ref: NameRef {
                    name: "m-net0-ipv4".into(),
                },
                pool_ref: PoolRef::default(),
                address: "10.0.0.20".into(),
                prefix: Some(24),
                gateway: Some("10.0.0.1".into()),
            },
        );
        let mut c = claim(990, vec![]);
        c.status = Some(IpAddressClaimStatus {
            address_ref: Some(NameRef {
                name: "m-net0-ipv4".into(),
            }),
            conditions: vec![],
        });
        assert_eq!(
            claim_state("net0", Some(&c), Some(&addr), now, patience),
            ClaimState::Bound(ClaimedAddress {
                net: "net0".into(),
                address: "10.0.0.20".parse().unwrap(),
                prefix: 24,
                gateway: Some("10.0.0.1".parse().unwrap()),
            })
        );
    }

    #[test]
    fn waits_read_like_a_human_wrote_them() {
        assert_eq!(waited(Duration::from_millis(300)), "0.3s");
        assert_eq!(waited(Duration::from_secs(42)), "42s");
        assert_eq!(waited(Duration::from_secs(185)), "3m05s");
        assert_eq!(waited(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn b16_duplicates_only_in_the_same_l2_domain() {
        let a: IpAddr = "10.0.0.25".parse().unwrap();
        let b: IpAddr = "10.0.0.26".parse().unwrap();
        let ours = vec![(a, "vmbr0".to_string(), Some(10))];
        let others = vec![
            (
                "wl1/wl1-md-0-x".to_string(),
                vec![(a, "vmbr0".to_string(), Some(10))],
            ),
            (
                "wl3/other-vlan".to_string(),
                vec![(a, "vmbr0".to_string(), Some(20))],
            ),
            (
                "wl4/other-bridge".to_string(),
                vec![(a, "vmbr1".to_string(), Some(10))],
            ),
            (
                "wl5/other-address".to_string(),
                vec![(b, "vmbr0".to_string(), Some(10))],
            ),
        ];
        assert_eq!(
            duplicates(&ours, &others),
            vec![(a, "wl1/wl1-md-0-x".to_string())]
        );
    }

    #[test]
    fn folding() {
        let (wanted, _) = plan("m", &[], &pool("p4"), &pool("p6"), &[]).unwrap();
        let bound = ClaimState::Bound(ClaimedAddress {
            net: "net0".into(),
            address: "10.0.0.20".parse().unwrap(),
            prefix: 24,
            gateway: None,
        });
        assert_eq!(fold(&[], &[]), ClaimsFact::NotNeeded);
        assert_eq!(
            fold(&wanted, &[bound.clone(), ClaimState::Missing]),
            ClaimsFact::Missing
        );
        assert_eq!(
            fold(
                &wanted,
                &[
                    bound.clone(),
                    ClaimState::Waiting {
                        exhausted: true,
                        message: "PoolExhausted".into()
                    }
                ]
            ),
            ClaimsFact::Pending {
                pools: "InClusterIPPool p6".into(),
                exhausted: true,
                message: "m-net0-ipv6: PoolExhausted".into()
            }
        );
        assert!(
            matches!(fold(&wanted, &[bound.clone(), bound]), ClaimsFact::Bound(v) if v.len() == 2)
        );
    }
}
