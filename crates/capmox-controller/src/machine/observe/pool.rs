//! The machine's resource pool and its members (docs/field-cases.md B34):
//! `GET /pools?poolid={pool}` from PVE 8.1 on, `GET /pools/{pool}` before.

use crate::cluster::probe::pool::missing_text;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, PoolFact};
use crate::pve::{Missing, PoolId, PveError};
use crate::reasons::Reason;

/// Reads the pool the machine's VM is cloned into.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let instance = facts.instance.clone().unwrap_or_default();
    let (Some(name), Ok(inst)) = (facts.pool.as_deref(), run.instance().cloned()) else {
        return Observed::Pool(PoolFact::Unreachable(Reason::InstanceUnreachable {
            instance,
            detail: "no client or no pool".into(),
        }));
    };
    let id = match PoolId::new(name.to_string()) {
        Ok(id) => id,
        Err(e) => {
            return Observed::Pool(PoolFact::Problem(format!(
                "pool {name:?} of instance {instance}: {e}"
            )));
        }
    };
    let read = if facts.pool_query {
        inst.api.pool(&id).await
    } else {
        inst.api.pool_by_path(&id).await.map(Some)
    };
    Observed::Pool(match read {
        Ok(Some(p)) => PoolFact::Members(
            p.members
                .iter()
                .filter_map(|m| m.vmid.map(|v| v.get()))
                .collect(),
        ),
        Ok(None)
        | Err(PveError::NotFound {
            missing: Missing::Pool,
            ..
        }) => PoolFact::Problem(missing_text(name, &instance)),
        Err(PveError::PermissionDenied { .. }) => PoolFact::Problem(format!(
            "pool {name} of instance {instance} cannot be read: the token lacks Pool.Audit on /pool/{name} (or the pool does not exist)"
        )),
        Err(e) => PoolFact::Unreachable(Reason::InstanceUnreachable {
            instance,
            detail: e.to_string(),
        }),
    })
}
