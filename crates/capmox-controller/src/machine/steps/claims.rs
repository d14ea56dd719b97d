//! The IP address claims: created before the clone (the IPAM provider works
//! while the clone runs), deleted only after the VM is gone
//! (docs/field-cases.md B18).

use kube::api::{DeleteParams, PostParams};
use kube::{Api, ResourceExt};

use crate::capi::ipam::IPAddressClaim;
use crate::error::Error;
use crate::events::EventKind;
use crate::machine::claims::{self, ClaimState};
use crate::machine::context::Run;
use crate::machine::decide::Observed;
use crate::machine::observe::claims::owned;
use crate::reasons::Reason;

/// Creates the claims the last observation found missing (an "already
/// exists" race is fine).
///
/// # Errors
/// [`Error::Kube`] for other API failures; [`Error::Precondition`] when the
/// claims were not observed first.
pub async fn ensure(run: &mut Run<'_>) -> Result<Observed, Error> {
    let read = run.claims.clone().ok_or_else(|| {
        Error::Precondition("the claims were not read before creating them".into())
    })?;
    let cluster = run.me.cluster.clone().unwrap_or_default();
    let api: Api<IPAddressClaim> = Api::namespaced(run.ctx.shared.kube.clone(), &run.me.ns);
    let mut created = Vec::new();
    for (w, s) in read.wanted.iter().zip(&read.states) {
        if *s != ClaimState::Missing {
            continue;
        }
        let obj = claims::claim_object(run.machine, &cluster, w)?;
        match crate::spent::kubernetes(api.create(&PostParams::default(), &obj)).await {
            Ok(_) => created.push(w.name.clone()),
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    if !created.is_empty() {
        run.event(
            EventKind::Normal,
            Reason::IpAddressClaimsCreated(format!(
                "created IP address claims {}",
                created.join(", ")
            )),
        );
    }
    Ok(Observed::ClaimsCreated)
}

/// Deletes every claim owned by the machine that is not being deleted yet.
///
/// # Errors
/// [`Error::Kube`] for failures other than "not found".
pub async fn release(run: &mut Run<'_>) -> Result<Observed, Error> {
    let kube = run.ctx.shared.kube.clone();
    let list = owned(&kube, run.machine).await?;
    let api: Api<IPAddressClaim> = Api::namespaced(kube, &run.me.ns);
    let mut n = 0;
    for c in list
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
    {
        match crate::spent::kubernetes(api.delete(&c.name_any(), &DeleteParams::background())).await
        {
            Ok(_) => n += 1,
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    if n > 0 {
        run.event(
            EventKind::Normal,
            Reason::IpAddressClaimsReleased(format!(
                "released {n} IP address claim(s); the VM is gone"
            )),
        );
    }
    Ok(Observed::ClaimsReleased)
}
