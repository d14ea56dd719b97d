//! The in-cluster IPAM provider (`cluster-api-ipam-provider-in-cluster`),
//! for `InClusterIPPool`s, built on `crates/ipam`.
//!
//! Claims (`pkg/ipamutil/reconciler.go`, `internal/controllers/ipaddressclaim_address.go`):
//! - claims whose Cluster (`spec.clusterName`, else the cluster-name label)
//!   is missing are skipped (unless being deleted), as are claims of a paused
//!   Cluster or a paused pool;
//! - finalizer `ipam.cluster.x-k8s.io/ReleaseAddress` first, in the same
//!   reconcile as the allocation;
//! - the lowest free address of the pool (gateway, excluded and reserved
//!   addresses never; in use = every IPAddress naming the pool) becomes an
//!   `IPAddress` **named after the claim**, owned by the claim (controller,
//!   `blockOwnerDeletion`) and the pool (`blockOwnerDeletion`), finalizer
//!   `ipam.cluster.x-k8s.io/ProtectAddress`, the cluster-name label copied;
//!   then `status.addressRef`;
//! - a full pool: condition `Ready=False`, reason `PoolExhausted` (the real
//!   provider only logs and retries); waiting claims are re-queued whenever
//!   an IPAddress of their pool goes away, and `Ready=True` once allocated;
//! - deletion: the address's finalizer is removed and the address deleted,
//!   then the claim's finalizer.
//!
//! Allocation runs with concurrency 1 (as the real provider) and reads
//! addresses from its watch's store, with each allocation recorded before
//! its IPAddress is created ([`super::ip_addresses`]), so two claims never
//! get one address. A pool's deletion LISTs the addresses from the API server.
//! An allocated claim is looked at again only when it or its address changes;
//! the periodic safety net (`StandInOptions::resync`) re-queues only claims
//! still waiting, so a busy stand-in serves every claim in turn.
//!
//! Pools (`internal/controllers/inclusterippool.go`): finalizer
//! `ipam.cluster.x-k8s.io/ProtectPool`, released only when no IPAddress names
//! the pool; `status.ipAddresses` counts (`crates/ipam`'s usage: addresses
//! outside the pool count as `outOfRange`, not as `used`).
//!
//! Simpler than the provider: no `GlobalInClusterIPPool`, no prefix pools,
//! no `addressReuseGracePeriodSeconds`, no admission webhooks.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use futures::StreamExt;
use kube::api::{ListParams, ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Predicate, PredicateConfig, predicates};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};

use super::meta::{
    self, CLUSTER_NAME_LABEL, PROTECT_ADDRESS_FINALIZER, PROTECT_POOL_FINALIZER,
    RELEASE_ADDRESS_FINALIZER, is_deleting,
};
use super::{Ctx, error_policy, ip_addresses, ticker};
use crate::crds::Cluster;
use crate::crds::ipam::{
    IN_CLUSTER_IP_POOL, IPAM_GROUP, IPAddress, IPAddressClaim, InClusterIPPool,
    InClusterIpPoolStatus, IpAddressClaimStatus, IpAddressSpec, PoolCounts, PoolRef,
};
use crate::crds::meta::NameRef;
use crate::error::Result;

/// Condition reason for a claim whose pool has no free address.
pub const POOL_EXHAUSTED: &str = "PoolExhausted";

fn is_in_cluster_pool(r: &PoolRef) -> bool {
    r.api_group == IPAM_GROUP && r.kind == IN_CLUSTER_IP_POOL
}

/// Runs the claim controller until aborted.
pub(crate) async fn run_claims(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    let controller = Controller::new(ctx.scoped::<IPAddressClaim>(), wc.clone())
        .with_config(Config::default().concurrency(1));
    let store = controller.store();
    let by_pool = store.clone();
    let by_pool2 = store.clone();
    let resync = store.clone();
    // The addresses through a reflector: allocations read its store
    // (`super::ip_addresses`), and its events wake the owning claim and the
    // claims waiting on the pool.
    let (address_store, address_writer) = reflector::store::<IPAddress>();
    ctx.seen.addresses.set_store(address_store);
    let addresses = reflector::reflector(
        address_writer,
        watcher(ctx.scoped::<IPAddress>(), wc.clone()).default_backoff(),
    )
    .touched_objects();
    let pools = watcher(ctx.scoped::<InClusterIPPool>(), wc.clone())
        .default_backoff()
        .applied_objects()
        .predicate_filter(
            predicates::generation.combine(predicates::annotations),
            PredicateConfig::default(),
        );
    controller
        .watches_stream(addresses, move |a: IPAddress| {
            let ns = a.namespace();
            let pool = a.spec.pool_ref.clone();
            let owner = a
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true) && o.kind == "IPAddressClaim")
                .map(|o| {
                    let r = ObjectRef::<IPAddressClaim>::new(&o.name);
                    match &ns {
                        Some(ns) => r.within(ns),
                        None => r,
                    }
                });
            // Only an address going away frees room for the claims still
            // waiting; a new or changed one does not (waking every waiting
            // claim on each allocation made the single worker's queue grow
            // with the square of the claims).
            let going = a.metadata.deletion_timestamp.is_some();
            let waiting_on_pool = going.then(|| {
                by_pool
                    .state_filter(|c| c.namespace() == ns && c.spec.pool_ref == pool && waiting(c))
            });
            owner
                .into_iter()
                .chain(
                    waiting_on_pool
                        .into_iter()
                        .flatten()
                        .map(|c| ObjectRef::from_obj(&*c)),
                )
                .collect::<Vec<_>>()
        })
        // A pool's spec or annotations (its pause), not its status: the pool
        // controller rewrites the status after each allocation.
        .watches_stream(pools, move |p: InClusterIPPool| {
            let ns = p.namespace();
            let name = p.name_any();
            by_pool2
                .state()
                .into_iter()
                .filter(|c| {
                    c.namespace() == ns
                        && is_in_cluster_pool(&c.spec.pool_ref)
                        && c.spec.pool_ref.name == name
                })
                .filter(|c| waiting(c))
                .map(|c| ObjectRef::from_obj(&*c))
                .collect::<Vec<_>>()
        })
        .watches(ctx.scoped::<Cluster>(), wc, move |cl| {
            let ns = cl.namespace();
            let name = cl.name_any();
            store
                .state()
                .into_iter()
                .filter(|c| c.namespace() == ns && cluster_of(c).as_deref() == Some(name.as_str()))
                .filter(|c| waiting(c))
                .map(|c| ObjectRef::from_obj(&*c))
                .collect::<Vec<_>>()
        })
        // The safety net looks again at the claims still waiting, never at
        // the allocated ones: with one reconcile at a time, re-queuing every
        // claim each period starves some claims for good once a period
        // holds fewer reconciles than there are claims (kube-runtime takes
        // the next of several due objects in no fixed order; the real
        // provider's work queue is first in, first out).
        .reconcile_on(ticker(ctx.opts.resync).flat_map(move |()| {
            futures::stream::iter(
                resync
                    .state()
                    .into_iter()
                    .filter(|c| waiting(c))
                    .map(|c| ObjectRef::from_obj(&*c))
                    .collect::<Vec<_>>(),
            )
        }))
        .run(reconcile_claim, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// Runs the pool controller until aborted.
pub(crate) async fn run_pools(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    Controller::new(ctx.scoped::<InClusterIPPool>(), wc.clone())
        .watches(ctx.scoped::<IPAddress>(), wc, |a| {
            is_in_cluster_pool(&a.spec.pool_ref).then(|| {
                let o = ObjectRef::<InClusterIPPool>::new(&a.spec.pool_ref.name);
                match a.namespace() {
                    Some(ns) => o.within(&ns),
                    None => o,
                }
            })
        })
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile_pool, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// Whether a claim still waits for an address (pool and Cluster events
/// matter only to those; allocated claims need no re-queue from them).
fn waiting(claim: &IPAddressClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.address_ref.as_ref())
        .is_none()
}

/// The Cluster a claim belongs to: `spec.clusterName`, else the label.
fn cluster_of(claim: &IPAddressClaim) -> Option<String> {
    claim
        .spec
        .cluster_name
        .clone()
        .filter(|c| !c.is_empty())
        .or_else(|| meta::label(&claim.metadata, CLUSTER_NAME_LABEL).map(str::to_string))
}

/// Every IPAddress in `ns` allocated from `pool`, LISTed from the API server.
async fn addresses_of(ctx: &Ctx, ns: &str, pool: &PoolRef) -> Result<Vec<IPAddress>> {
    Ok(ctx
        .api::<IPAddress>(ns)
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|a| &a.spec.pool_ref == pool)
        .collect())
}

/// The addresses of `pool` in `ns` in use: as the claim controller knows
/// them once its store is ready, else LISTed.
async fn in_use_of(ctx: &Ctx, ns: &str, pool: &PoolRef) -> Result<BTreeSet<IpAddr>> {
    Ok(match ctx.seen.addresses.in_use(ns, pool) {
        Some(used) => used,
        None => ip_addresses::parsed(&addresses_of(ctx, ns, pool).await?),
    })
}

async fn reconcile_claim(obj: Arc<IPAddressClaim>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    tracing::debug!(claim = %obj.name_any(), "reconcile");
    let api: Api<IPAddressClaim> = ctx.api(&ns);
    let Some(claim) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    if !is_in_cluster_pool(&claim.spec.pool_ref) {
        return Ok(Action::await_change());
    }
    let deleting = is_deleting(&claim.metadata);
    if let Some(cluster_name) = cluster_of(&claim) {
        match ctx.api::<Cluster>(&ns).get_opt(&cluster_name).await? {
            None if !deleting => return Ok(Action::await_change()),
            Some(c) if c.is_paused() || meta::has_paused_annotation(&c.metadata) => {
                return Ok(Action::await_change());
            }
            _ => {}
        }
    }
    // The finalizer, then on in the same pass (the provider adds it and
    // allocates in one reconcile, patching both at its end).
    if !deleting {
        meta::add_finalizer(&api, &claim.metadata, RELEASE_ADDRESS_FINALIZER).await?;
    }
    let pool = ctx
        .api::<InClusterIPPool>(&ns)
        .get_opt(&claim.spec.pool_ref.name)
        .await?;
    if deleting {
        return release(&ctx, &api, &claim).await;
    }
    let Some(pool) = pool else {
        tracing::info!(claim = %claim.name_any(), pool = %claim.spec.pool_ref.name, "pool not found");
        return Ok(ctx.idle());
    };
    if meta::has_paused_annotation(&pool.metadata) {
        return Ok(Action::await_change());
    }
    let current = claim.status.clone().unwrap_or_default();
    let mut status = current.clone();
    let addresses: Api<IPAddress> = ctx.api(&ns);
    let name = claim.name_any();
    let Some(store) = ctx.seen.addresses.ready() else {
        return Ok(ctx.poll());
    };
    if !ctx.seen.addresses.exists(&ns, &name) {
        let parsed = ipam::Pool::parse(&pool.name_any(), &pool.spec.to_pool_spec());
        let free = match parsed {
            Ok(p) => ctx
                .seen
                .addresses
                .allocate(store, &ns, &name, &claim.spec.pool_ref, |used| {
                    p.first_free(used)
                        .map_err(|e| (POOL_EXHAUSTED, e.to_string()))
                }),
            Err(problems) => Err((
                "AllocationFailed",
                problems
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            )),
        };
        match free {
            Ok(addr) => {
                let ip = build_address(&claim, &pool, addr);
                match addresses.create(&PostParams::default(), &ip).await {
                    Ok(_) => {
                        tracing::info!(claim = %name, address = %addr, "allocated");
                    }
                    Err(e) => {
                        ctx.seen.addresses.forget(&ns, &name);
                        return match e {
                            kube::Error::Api(s) if s.code == 409 => Ok(ctx.poll()),
                            e => Err(e.into()),
                        };
                    }
                }
            }
            Err((reason, message)) => {
                meta::set_condition(&mut status.conditions, "Ready", false, reason, &message);
                if status != current {
                    meta::patch_status(&api, &name, serde_json::to_value(&status)?).await?;
                }
                return Ok(ctx.idle());
            }
        }
    }
    status.address_ref = Some(NameRef { name: name.clone() });
    meta::set_condition(&mut status.conditions, "Ready", true, "Allocated", "");
    if status != current {
        meta::patch_status(&api, &name, serde_json::to_value(&status)?).await?;
    }
    // Allocated: only a change (the claim's deletion, its address gone)
    // needs another look, and the watches bring it.
    Ok(Action::await_change())
}

/// The IPAddress for `claim` from `pool`.
pub fn build_address(claim: &IPAddressClaim, pool: &InClusterIPPool, addr: IpAddr) -> IPAddress {
    let labels = meta::label(&claim.metadata, CLUSTER_NAME_LABEL)
        .map(|c| [(CLUSTER_NAME_LABEL.to_string(), c.to_string())].into());
    IPAddress {
        metadata: ObjectMeta {
            name: Some(claim.name_any()),
            namespace: claim.namespace(),
            labels,
            owner_references: Some(vec![
                meta::owner_ref(
                    &IPAddressClaim::api_version(&()),
                    "IPAddressClaim",
                    &claim.metadata,
                    true,
                    true,
                ),
                meta::owner_ref(
                    &InClusterIPPool::api_version(&()),
                    IN_CLUSTER_IP_POOL,
                    &pool.metadata,
                    false,
                    true,
                ),
            ]),
            finalizers: Some(vec![PROTECT_ADDRESS_FINALIZER.into()]),
            ..ObjectMeta::default()
        },
        spec: IpAddressSpec {
            claim_ref: NameRef {
                name: claim.name_any(),
            },
            pool_ref: claim.spec.pool_ref.clone(),
            address: addr.to_string(),
            prefix: i32::try_from(pool.spec.prefix).unwrap_or(0),
            gateway: pool.spec.gateway.clone().filter(|g| !g.is_empty()),
        },
    }
}

async fn release(ctx: &Ctx, api: &Api<IPAddressClaim>, claim: &IPAddressClaim) -> Result<Action> {
    let ns = claim.namespace().unwrap_or_default();
    let addresses: Api<IPAddress> = ctx.api(&ns);
    if let Some(addr) = addresses.get_opt(&claim.name_any()).await? {
        meta::remove_finalizer(&addresses, &addr.metadata, PROTECT_ADDRESS_FINALIZER).await?;
        meta::delete_ignoring_missing(&addresses, &claim.name_any()).await?;
    }
    ctx.seen.addresses.forget(&ns, &claim.name_any());
    meta::remove_finalizer(api, &claim.metadata, RELEASE_ADDRESS_FINALIZER).await?;
    Ok(Action::await_change())
}

async fn reconcile_pool(obj: Arc<InClusterIPPool>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<InClusterIPPool> = ctx.api(&ns);
    let Some(pool) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let pool_ref = PoolRef {
        api_group: IPAM_GROUP.into(),
        kind: IN_CLUSTER_IP_POOL.into(),
        name: pool.name_any(),
    };
    if is_deleting(&pool.metadata) {
        // Exact, not from a cache: the finalizer goes only when no address is left.
        if addresses_of(&ctx, &ns, &pool_ref).await?.is_empty() {
            meta::remove_finalizer(&api, &pool.metadata, PROTECT_POOL_FINALIZER).await?;
            return Ok(Action::await_change());
        }
        return Ok(ctx.poll());
    }
    if meta::add_finalizer(&api, &pool.metadata, PROTECT_POOL_FINALIZER).await? {
        return Ok(ctx.poll());
    }
    let Ok(parsed) = ipam::Pool::parse(&pool.name_any(), &pool.spec.to_pool_spec()) else {
        return Ok(ctx.idle());
    };
    let usage = parsed.usage(&in_use_of(&ctx, &ns, &pool_ref).await?);
    let count = |n: u128| i64::try_from(n).unwrap_or(i64::MAX);
    let status = InClusterIpPoolStatus {
        ip_addresses: Some(PoolCounts {
            total: count(usage.total),
            free: count(usage.free),
            used: count(usage.used),
            out_of_range: count(usage.out_of_range),
        }),
    };
    if pool.status.as_ref() != Some(&status) {
        meta::patch_status(&api, &pool.name_any(), serde_json::to_value(&status)?).await?;
    }
    Ok(ctx.idle())
}

/// The status a claim reports (for scenarios): its address, or the reason it has none.
pub fn claim_state(status: Option<&IpAddressClaimStatus>) -> String {
    let Some(s) = status else {
        return "pending".into();
    };
    if let Some(a) = &s.address_ref {
        return format!("allocated ({})", a.name);
    }
    s.conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .map_or_else(
            || "pending".into(),
            |c| format!("{}: {}", c.reason, c.message),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crds::ipam::{InClusterIpPoolSpec, IpAddressClaimSpec};
    use serde_json::json;

    #[test]
    fn address_named_after_claim_owned_by_claim_and_pool() {
        let mut claim = IPAddressClaim::new(
            "m1-net0-ipv4",
            IpAddressClaimSpec {
                cluster_name: Some("wl1".into()),
                pool_ref: PoolRef {
                    api_group: IPAM_GROUP.into(),
                    kind: IN_CLUSTER_IP_POOL.into(),
                    name: "wl1-dc-a-ipv4".into(),
                },
            },
        );
        claim.metadata.namespace = Some("ns".into());
        claim.metadata.uid = Some("claim-uid".into());
        claim.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), "wl1".to_string())].into());
        let mut pool = InClusterIPPool::new(
            "wl1-dc-a-ipv4",
            InClusterIpPoolSpec {
                addresses: vec!["10.10.0.100-10.10.0.200".into()],
                prefix: 24,
                gateway: Some("10.10.0.1".into()),
                ..InClusterIpPoolSpec::default()
            },
        );
        pool.metadata.uid = Some("pool-uid".into());
        let a = build_address(&claim, &pool, "10.10.0.100".parse().unwrap());
        assert_eq!(
            serde_json::to_value(&a).unwrap(),
            json!({
                "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
                "kind": "IPAddress",
                "metadata": {
                    "name": "m1-net0-ipv4",
                    "namespace": "ns",
                    "labels": {"cluster.x-k8s.io/cluster-name": "wl1"},
                    "finalizers": ["ipam.cluster.x-k8s.io/ProtectAddress"],
                    "ownerReferences": [
                        {"apiVersion": "ipam.cluster.x-k8s.io/v1beta2", "kind": "IPAddressClaim",
                         "name": "m1-net0-ipv4", "uid": "claim-uid", "controller": true, "blockOwnerDeletion": true},
                        {"apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
                         "name": "wl1-dc-a-ipv4", "uid": "pool-uid", "controller": false, "blockOwnerDeletion": true}
                    ]
                },
                "spec": {
                    "claimRef": {"name": "m1-net0-ipv4"},
                    "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "wl1-dc-a-ipv4"},
                    "address": "10.10.0.100",
                    "prefix": 24,
                    "gateway": "10.10.0.1"
                }
            })
        );
    }

    #[test]
    fn claim_states() {
        assert_eq!(claim_state(None), "pending");
        let mut s = IpAddressClaimStatus::default();
        meta::set_condition(
            &mut s.conditions,
            "Ready",
            false,
            POOL_EXHAUSTED,
            "pool p is exhausted",
        );
        assert_eq!(claim_state(Some(&s)), "PoolExhausted: pool p is exhausted");
        s.address_ref = Some(NameRef { name: "c".into() });
        assert_eq!(claim_state(Some(&s)), "allocated (c)");
    }
}
