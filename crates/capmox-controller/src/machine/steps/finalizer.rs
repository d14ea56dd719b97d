//! The finalizer: added before anything is made in Proxmox, removed when
//! everything is gone (with the machine's in-memory state).

use tracing::info;

use crate::error::Error;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed};
use crate::machine::report::FINALIZER;

/// Adds the finalizer.
///
/// # Errors
/// [`Error::Kube`] (409 on a concurrent change).
pub async fn add(run: &mut Run<'_>) -> Result<Observed, Error> {
    let mut list = run.finalizers.clone();
    list.push(FINALIZER.to_string());
    run.merge_patch(serde_json::json!({ "metadata": { "finalizers": list } }))
        .await?;
    Ok(Observed::FinalizerAdded)
}

/// Removes the finalizer and forgets the machine (its VMID reservation,
/// clone slot, placement in flight, retry state and memo).
///
/// # Errors
/// [`Error::Kube`] other than 404 (the object is gone already).
pub async fn remove(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let list: Vec<String> = run
        .finalizers
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    match run
        .merge_patch(serde_json::json!({ "metadata": { "finalizers": list } }))
        .await
    {
        Ok(()) => {}
        Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
        Err(e) => return Err(e),
    }
    run.finalizers.retain(|f| f != FINALIZER);
    run.rt().forget(&run.me.uid);
    info!(
        vmid = facts.vmid.unwrap_or(0),
        "finalizer removed; the machine is gone"
    );
    Ok(Observed::FinalizerRemoved)
}
