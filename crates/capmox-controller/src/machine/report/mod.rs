//! The reconcile's outputs: conditions, the status write, events, and when
//! to look again.
//!
//! | module | owns |
//! |---|---|
//! | [`conditions`] | the conditions a reconcile's end shows |
//! | [`requeue`] | when to look again |
//!
//! Status is written once per reconcile, by server-side apply (field
//! manager `capmox-controller`, status-only body), and only when it
//! changed. Events queued by the steps are published after it; a failed
//! step's reason becomes a Warning event at each attempt, a terminal one
//! when it is first seen.

pub mod conditions;
pub mod requeue;

use std::time::Duration;

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::context::Run;
use super::decide::{Facts, Wait};
use super::vm::provider_id;
use crate::api::ProxmoxMachine;
use crate::context::FIELD_MANAGER;
use crate::error::Error;
use crate::events::{self, EventKind};

/// The finalizer of ProxmoxMachines.
pub const FINALIZER: &str = "proxmoxmachine.infrastructure.cluster.x-k8s.io";

/// How a reconcile ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum End {
    /// Provisioned and well (or gone).
    Done,
    /// Waiting.
    Wait(Wait),
    /// More steps follow (the step budget of one reconcile ran out).
    More,
}

/// The providerID of this machine's VM with SMBIOS UUID `uuid`, in the
/// ProxmoxCluster's `providerIDFormat` ([`provider_id::provider_id`]).
pub fn provider_id(facts: &Facts, uuid: &str) -> String {
    provider_id::provider_id(
        facts.provider_id_format,
        facts.instance.as_deref().unwrap_or_default(),
        facts.vmid.unwrap_or_default(),
        uuid,
    )
}

/// Ends the reconcile: writes the status, publishes the events, answers
/// when to look again (`None`: the machine is gone).
///
/// # Errors
/// [`Error::Kube`] of the status write (404 and 409 are not errors: the
/// object is gone, or a newer one will be reconciled).
pub async fn finish(run: &mut Run<'_>, facts: &Facts, end: End) -> Result<Option<Duration>, Error> {
    let gone = facts.deleting && !run.finalizers.iter().any(|f| f == FINALIZER);
    if gone {
        publish(run, facts, &end).await;
        return Ok(None);
    }
    let generation = run.machine.metadata.generation;
    let desired = conditions::desired(run, facts, &end);
    if let Some(i) = &facts.instance {
        run.status.failure_domain = Some(i.clone());
    }
    run.status.observed_generation = generation;
    let now = k8s_openapi::jiff::Timestamp::now();
    for d in &desired {
        crate::conditions::set(&mut run.status.conditions, d, generation, now);
    }
    match write(run).await {
        Ok(Some(written)) => run.rt().record_write(&run.me.uid, &written),
        Ok(None) => {}
        Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => {}
        Err(e) => return Err(e),
    }
    publish(run, facts, &end).await;
    Ok(Some(requeue::after(run, facts, &end)))
}

/// Writes the status with server-side apply when it differs from the
/// object's current status; answers the object the write returned.
///
/// # Errors
/// [`Error::Kube`], [`Error::Json`].
async fn write(run: &Run<'_>) -> Result<Option<ProxmoxMachine>, Error> {
    let current = serde_json::to_value(run.machine.status.clone().unwrap_or_default())?;
    let next = serde_json::to_value(&run.status)?;
    if current == next {
        return Ok(None);
    }
    let body = serde_json::json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": "ProxmoxMachine",
        "status": next,
    });
    let api: Api<ProxmoxMachine> = Api::namespaced(run.ctx.shared.kube.clone(), &run.me.ns);
    let written = crate::spent::kubernetes(api.patch_status(
        &run.machine.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(body),
    ))
    .await?;
    Ok(Some(written))
}

/// Publishes the queued events, and a Warning for a failure: at every
/// attempt of a failed step, and when a terminal problem is first seen.
async fn publish(run: &mut Run<'_>, facts: &Facts, end: &End) {
    let obj = run.object_ref();
    for (kind, reason) in std::mem::take(&mut run.events) {
        crate::spent::kubernetes(events::publish(
            &run.ctx.shared,
            &obj,
            kind,
            &reason,
            "Reconcile",
        ))
        .await;
    }
    let End::Wait(w) = end else {
        return;
    };
    if facts.paused {
        return;
    }
    let first_seen = run
        .machine
        .status
        .as_ref()
        .and_then(|s| {
            crate::conditions::get(&s.conditions, crate::conditions::VM_PROVISIONED)
                .or_else(|| crate::conditions::get(&s.conditions, crate::conditions::READY))
        })
        .is_none_or(|c| c.reason != w.reason.code() || c.message != w.reason.message());
    let warn = match &w.retry {
        Some(r) => Some(conditions::retry_text(r)),
        None if w.reason.terminal() && first_seen => Some(String::new()),
        None if matches!(w.until, super::decide::Until::Backoff) && first_seen => {
            Some(String::new())
        }
        None => None,
    };
    if let Some(suffix) = warn {
        let mut note = w.reason.message();
        if !suffix.is_empty() {
            note = format!("{note}; {suffix}");
        }
        events::publish_note(
            &run.ctx.shared,
            &obj,
            EventKind::Warning,
            &w.reason,
            "Reconcile",
            &note,
        )
        .await;
    }
}
