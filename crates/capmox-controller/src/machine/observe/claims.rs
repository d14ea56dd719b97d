//! The IP address claims (CAPI IPAM contract): which the machine wants,
//! and what each says; during deletion, which still exist.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::api::ProxmoxMachine;
use crate::capi::ipam::{IPAddress, IPAddressClaim, PoolRef};
use crate::error::Error;
use crate::instances::{self, IpFamily, PoolSource};
use crate::machine::claims::{self, InstancePool, MACHINE_LABEL, WantedClaim};
use crate::machine::context::{ClaimsRead, Run};
use crate::machine::decide::{ClaimObjects, ClaimsFact, Facts, Observed};

/// Reads the claims the machine wants.
///
/// # Errors
/// [`Error::Kube`] for API failures other than "not found".
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let (v4, v6) = pools(run, facts);
    let dns = run
        .world
        .instance
        .as_ref()
        .map(|e| e.network.dns_servers.clone())
        .unwrap_or_default();
    let listed = run
        .machine
        .spec
        .network
        .as_ref()
        .map(|n| n.network_devices.clone())
        .unwrap_or_default();
    let (wanted, plans) = match claims::plan(&run.me.name, &listed, &v4, &v6, &dns) {
        Ok(p) => p,
        Err(why) => {
            run.claims = None;
            return Ok(Observed::Claims(ClaimsFact::NoPool(why)));
        }
    };
    let patience = run.rt().scaled(run.rt().options.claim_patience);
    let states = read(&run.ctx.shared.kube, &run.me.ns, &wanted, patience).await?;
    let fact = claims::fold(&wanted, &states);
    run.claims = Some(ClaimsRead {
        wanted,
        plans,
        states,
    });
    Ok(Observed::Claims(fact))
}

/// Reads every wanted claim and its address.
async fn read(
    kube: &kube::Client,
    ns: &str,
    wanted: &[WantedClaim],
    patience: Duration,
) -> Result<Vec<claims::ClaimState>, Error> {
    let claims_api: Api<IPAddressClaim> = Api::namespaced(kube.clone(), ns);
    let addresses: Api<IPAddress> = Api::namespaced(kube.clone(), ns);
    let now = Timestamp::now();
    let mut states = Vec::new();
    for w in wanted {
        let claim = crate::spent::kubernetes(claims_api.get_opt(&w.name)).await?;
        let address = match claim
            .as_ref()
            .and_then(|c| c.status.as_ref())
            .and_then(|s| s.address_ref.as_ref())
        {
            Some(r) if !r.name.is_empty() => {
                crate::spent::kubernetes(addresses.get_opt(&r.name)).await?
            }
            _ => None,
        };
        states.push(claims::claim_state(
            &w.net,
            claim.as_ref(),
            address.as_ref(),
            now,
            patience,
        ));
    }
    Ok(states)
}

/// The claim objects owned by the machine that still exist.
///
/// # Errors
/// [`Error::Kube`].
pub async fn objects(run: &mut Run<'_>) -> Result<Observed, Error> {
    let owned = owned(&run.ctx.shared.kube, run.machine).await?;
    Ok(Observed::ClaimObjects(ClaimObjects {
        total: owned.len(),
        deleting: owned
            .iter()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
            .count(),
    }))
}

/// Claim objects owned by the machine (by label, then by owner UID).
///
/// # Errors
/// [`Error::Kube`].
pub async fn owned(
    kube: &kube::Client,
    machine: &ProxmoxMachine,
) -> Result<Vec<IPAddressClaim>, Error> {
    let ns = machine.namespace().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(kube.clone(), &ns);
    let lp = ListParams::default().labels(&format!(
        "{MACHINE_LABEL}={}",
        crate::names::label_value(&machine.name_any())
    ));
    Ok(crate::spent::kubernetes(api.list(&lp))
        .await?
        .items
        .into_iter()
        .filter(|c| claims::owned_by(c, machine))
        .collect())
}

/// The instance pools of both families as the claims need them.
fn pools(run: &Run<'_>, facts: &Facts) -> (InstancePool, InstancePool) {
    let (Some(pc), Some(inst), Some(eff)) = (
        &run.world.proxmox_cluster,
        &facts.instance,
        &run.world.instance,
    ) else {
        return (InstancePool::None, InstancePool::None);
    };
    let pool = |family: IpFamily| match eff.network.pool(family) {
        None => InstancePool::None,
        Some(src) => {
            let metric = match src {
                PoolSource::Instance(c) | PoolSource::Cluster(c) => c.metric,
            };
            match instances::ip_pool_for(pc, inst, family) {
                Some(p) => InstancePool::Recorded(
                    PoolRef {
                        api_group: p.api_group.clone(),
                        kind: p.kind.clone(),
                        name: p.name.clone(),
                    },
                    metric,
                ),
                None => InstancePool::NotRecorded,
            }
        }
    };
    (pool(IpFamily::V4), pool(IpFamily::V6))
}
