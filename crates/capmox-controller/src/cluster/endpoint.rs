//! The control-plane endpoint from an IP pool (`spec.controlPlaneEndpointPool`,
//! docs/control-plane-endpoint.md): the decision ([`decide`], pure) and the
//! calls that carry it out ([`reconcile_endpoint`], [`release`]).
//!
//! The address is claimed through the CAPI IPAM contract: one
//! `IPAddressClaim` per ProxmoxCluster, named by
//! [`crate::names::endpoint_claim_name`], recorded in
//! `status.controlPlaneEndpointClaim` before it is created, owned by the
//! ProxmoxCluster. Once the IPAM provider has allocated an `IPAddress`, its
//! address becomes `spec.controlPlaneEndpoint` of the ProxmoxCluster, which
//! CAPI copies into the Cluster's when that has none
//! (docs/capi-contract.md fact 20; the provider only reads Clusters). The
//! claim is made once:
//! with an endpoint set nothing is claimed, and a set endpoint — the user's
//! on either object, or the one written from the claim — is never replaced.
//! The claim is deleted (by its record) only when the ProxmoxCluster is
//! deleted; `clusterctl move` leaves the record behind (status is not
//! moved, fact 19), and then the owner reference lets garbage collection
//! delete the claim with the ProxmoxCluster.
//!
//! With `addresses` instead of a `poolRef`, the provider creates the pool:
//! an `InClusterIPPool` named by [`crate::names::endpoint_pool_name`], made
//! and deleted with the cluster's node pools ([`super::pools`]).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Resource, ResourceExt};

use super::pools::DesiredPool;
use crate::api::{
    ApiEndpoint, EndpointClaimStatus, EndpointPool, IpPoolReference, ProxmoxCluster,
    ProxmoxClusterSpec,
};
use crate::capi::CLUSTER_NAME_LABEL;
use crate::capi::core::Endpoint;
use crate::capi::ipam::{
    IN_CLUSTER_POOL_KIND, IPAM_GROUP, IPAddress, IPAddressClaim, InClusterIpPoolSpec,
    IpAddressClaimSpec, PoolRef,
};
use crate::error::Error;
use crate::instances::IpFamily;
use crate::names::{endpoint_claim_name, endpoint_pool_name};

/// The claim as read from the API server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClaimFact {
    /// No claim of that name exists.
    Missing,
    /// It exists without an address yet: why (the claim's `Ready` condition
    /// message, or that the IPAM provider has not answered).
    Pending(String),
    /// The pool allocated this address.
    Bound(String),
}

/// What [`decide`] looks at.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// The ProxmoxCluster's name.
    pub name: &'a str,
    /// Its spec.
    pub spec: &'a ProxmoxClusterSpec,
    /// The Cluster's `spec.controlPlaneEndpoint`.
    pub cluster_endpoint: Option<&'a Endpoint>,
    /// `status.controlPlaneEndpointClaim`.
    pub recorded: Option<&'a EndpointClaimStatus>,
    /// The recorded claim as read (`None`: not read).
    pub claim: Option<&'a ClaimFact>,
}

/// What to do about the endpoint, one step at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing: no pool, or the endpoint is set.
    Nothing,
    /// Read the recorded claim (and its address).
    ReadClaim,
    /// Record this claim in status, then create it (creating an existing
    /// one is fine: the record says it is ours).
    Claim(EndpointClaimStatus),
    /// The claim has no address yet: wait, saying why.
    Wait(String),
    /// Write this endpoint into `spec.controlPlaneEndpoint` and its host
    /// into the record's `address`.
    Write(ApiEndpoint),
    /// The endpoint is set but the record has no address: put the claim's
    /// address into the record (status only).
    Record(String),
}

fn usable(e: &Endpoint) -> bool {
    !e.host.trim().is_empty() && (1..=65535).contains(&e.port)
}

/// The pool `pool` names: its `poolRef`, or the pool the provider makes
/// for its `addresses` (named after the ProxmoxCluster `name`).
pub fn pool_ref(name: &str, pool: &EndpointPool) -> IpPoolReference {
    pool.pool_ref.clone().unwrap_or_else(|| IpPoolReference {
        api_group: IPAM_GROUP.to_string(),
        kind: IN_CLUSTER_POOL_KIND.to_string(),
        name: endpoint_pool_name(name),
    })
}

/// The next step for the endpoint (pure). A set endpoint wins: the
/// ProxmoxCluster's, or the Cluster's (which the cluster decision copies,
/// `super::decide`). Otherwise the recorded claim is read, created when it
/// is neither recorded nor there, waited for, and its address written.
pub fn decide(f: &Facts<'_>) -> Step {
    let Some(pool) = &f.spec.control_plane_endpoint_pool else {
        return Step::Nothing;
    };
    if f.spec.control_plane_endpoint.is_some() || f.cluster_endpoint.is_some_and(usable) {
        // The reconcile that wrote the endpoint from the claim may have
        // ended before its status write (a 409, a failed later step): the
        // record still lacks the address, and only the claim has it.
        return match (f.recorded, f.claim) {
            (Some(r), None) if r.address.is_none() => Step::ReadClaim,
            (Some(r), Some(ClaimFact::Bound(a))) if r.address.is_none() => Step::Record(a.clone()),
            _ => Step::Nothing,
        };
    }
    let Some(recorded) = f.recorded else {
        return Step::Claim(EndpointClaimStatus {
            name: endpoint_claim_name(f.name),
            pool_ref: pool_ref(f.name, pool),
            address: None,
        });
    };
    match f.claim {
        None => Step::ReadClaim,
        Some(ClaimFact::Missing) => Step::Claim(EndpointClaimStatus {
            address: None,
            ..recorded.clone()
        }),
        Some(ClaimFact::Pending(why)) => Step::Wait(format!(
            "waiting for IPAddressClaim {} to get an address from {} {}: {why}",
            recorded.name, recorded.pool_ref.kind, recorded.pool_ref.name
        )),
        Some(ClaimFact::Bound(address)) => Step::Write(ApiEndpoint {
            host: address.clone(),
            port: pool.port(),
        }),
    }
}

/// The `InClusterIPPool` for `spec.controlPlaneEndpointPool.addresses` of
/// the ProxmoxCluster `name`, when it has addresses (not a `poolRef`).
pub fn desired_pool(name: &str, spec: &ProxmoxClusterSpec) -> Option<DesiredPool> {
    let pool = spec.control_plane_endpoint_pool.as_ref()?;
    if pool.pool_ref.is_some() || pool.addresses.is_empty() {
        return None;
    }
    let family = if pool.addresses.iter().any(|a| a.contains(':')) {
        IpFamily::V6
    } else {
        IpFamily::V4
    };
    Some(DesiredPool {
        name: endpoint_pool_name(name),
        instance: None,
        family,
        endpoint: true,
        spec: InClusterIpPoolSpec {
            addresses: pool.addresses.clone(),
            prefix: i32::from(pool.prefix.unwrap_or(match family {
                IpFamily::V4 => 32,
                IpFamily::V6 => 128,
            })),
            gateway: None,
            excluded_addresses: Vec::new(),
            allocate_reserved_ip_addresses: None,
        },
    })
}

/// What [`reconcile_endpoint`] leaves for the cluster decision.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Outcome {
    /// `status.controlPlaneEndpointClaim` to keep.
    pub claim: Option<EndpointClaimStatus>,
    /// Why the endpoint is not there yet (the claim is pending).
    pub wait: Option<String>,
    /// The endpoint written into the ProxmoxCluster's spec now.
    pub written: Option<ApiEndpoint>,
}

/// Carries out [`decide`] for `pc` (whose Cluster's endpoint is
/// `cluster_endpoint`) until it asks for nothing more or to wait: reads the
/// claim, records and creates it, writes the endpoint. `record` writes a
/// status with the claim recorded (before the claim is created).
///
/// # Errors
/// [`Error::Kube`] when a call fails (a missing IPAM kind among them).
pub async fn reconcile_endpoint<R, Fut>(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    capi_cluster: &str,
    cluster_endpoint: Option<&Endpoint>,
    record: R,
) -> Result<Outcome, Error>
where
    R: Fn(EndpointClaimStatus) -> Fut,
    Fut: std::future::Future<Output = Result<(), Error>>,
{
    let ns = pc.namespace().unwrap_or_default();
    let name = pc.name_any();
    let mut spec = pc.spec.clone();
    let mut recorded = pc
        .status
        .as_ref()
        .and_then(|s| s.control_plane_endpoint_claim.clone());
    let mut claim = None;
    let mut out = Outcome::default();
    // Each step changes what the next decision sees; at most one of each.
    for _ in 0..6 {
        let step = decide(&Facts {
            name: &name,
            spec: &spec,
            cluster_endpoint,
            recorded: recorded.as_ref(),
            claim: claim.as_ref(),
        });
        match step {
            Step::Nothing => break,
            Step::ReadClaim => {
                let r = recorded.as_ref().map(|r| r.name.as_str()).unwrap_or("");
                claim = Some(read_claim(kube, &ns, r).await?);
            }
            Step::Claim(c) => {
                record(c.clone()).await?;
                create_claim(kube, pc, capi_cluster, &c).await?;
                tracing::info!(claim = %c.name, pool = %c.pool_ref.name, "claimed the control-plane endpoint");
                recorded = Some(c);
                claim = None;
            }
            Step::Wait(why) => {
                out.wait = Some(why);
                break;
            }
            Step::Write(endpoint) => {
                let api: Api<ProxmoxCluster> = Api::namespaced(kube.clone(), &ns);
                let patch = serde_json::json!({"spec": {"controlPlaneEndpoint": endpoint}});
                api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await?;
                tracing::info!(host = %endpoint.host, port = endpoint.port, "control-plane endpoint set from the pool");
                if let Some(r) = &mut recorded {
                    r.address = Some(endpoint.host.clone());
                }
                spec.control_plane_endpoint = Some(endpoint.clone());
                out.written = Some(endpoint);
            }
            Step::Record(address) => {
                if let Some(r) = &mut recorded {
                    r.address = Some(address);
                }
            }
        }
    }
    out.claim = recorded;
    Ok(out)
}

async fn read_claim(kube: &kube::Client, ns: &str, name: &str) -> Result<ClaimFact, Error> {
    let claims: Api<IPAddressClaim> = Api::namespaced(kube.clone(), ns);
    let Some(claim) = claims.get_opt(name).await? else {
        return Ok(ClaimFact::Missing);
    };
    let status = claim.status.as_ref();
    if let Some(r) = status
        .and_then(|s| s.address_ref.as_ref())
        .filter(|r| !r.name.is_empty())
    {
        let addresses: Api<IPAddress> = Api::namespaced(kube.clone(), ns);
        if let Some(a) = addresses.get_opt(&r.name).await? {
            return Ok(ClaimFact::Bound(a.spec.address));
        }
    }
    let why = status
        .and_then(|s| crate::conditions::get(&s.conditions, crate::conditions::READY))
        .filter(|c| c.status == "False")
        .map(|c| format!("{}: {}", c.reason, c.message))
        .unwrap_or_else(|| "no address allocated yet".to_string());
    Ok(ClaimFact::Pending(why))
}

async fn create_claim(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    capi_cluster: &str,
    c: &EndpointClaimStatus,
) -> Result<(), Error> {
    let mut owner = pc
        .controller_owner_ref(&())
        .ok_or_else(|| Error::Precondition("ProxmoxCluster has no uid yet".to_string()))?;
    owner.block_owner_deletion = Some(true);
    let claim = IPAddressClaim {
        metadata: ObjectMeta {
            name: Some(c.name.clone()),
            namespace: pc.namespace(),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_string(),
                capi_cluster.to_string(),
            )])),
            owner_references: Some(vec![owner]),
            ..ObjectMeta::default()
        },
        spec: IpAddressClaimSpec {
            cluster_name: Some(capi_cluster.to_string()),
            pool_ref: PoolRef {
                api_group: c.pool_ref.api_group.clone(),
                kind: c.pool_ref.kind.clone(),
                name: c.pool_ref.name.clone(),
            },
        },
        status: None,
    };
    let api: Api<IPAddressClaim> =
        Api::namespaced(kube.clone(), &pc.namespace().unwrap_or_default());
    match api.create(&PostParams::default(), &claim).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the endpoint's claim recorded in `pc`'s status (cluster
/// deletion), releasing its address. Returns whether a claim was recorded.
///
/// # Errors
/// [`Error::Kube`] when the deletion fails (not for a claim already gone,
/// nor for a missing IPAM kind).
pub async fn release(kube: &kube::Client, pc: &ProxmoxCluster) -> Result<bool, Error> {
    let Some(c) = pc
        .status
        .as_ref()
        .and_then(|s| s.control_plane_endpoint_claim.as_ref())
    else {
        return Ok(false);
    };
    let api: Api<IPAddressClaim> =
        Api::namespaced(kube.clone(), &pc.namespace().unwrap_or_default());
    match api.delete(&c.name, &DeleteParams::default()).await {
        Ok(_) => {
            tracing::info!(claim = %c.name, "released the control-plane endpoint's claim");
            Ok(true)
        }
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(true),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
#[path = "endpoint_tests.rs"]
mod tests;
