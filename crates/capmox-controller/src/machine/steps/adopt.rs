//! Adopt a VM the Go provider (CAPMOX) made for this machine
//! ([`crate::machine::decide::VmFact::Legacy`]): one config write
//! (`PUT /nodes/{node}/qemu/{vmid}/config`, with the `digest` it was read
//! at) that adds our ownership tag and appends our marker line to the
//! description, keeping what is there. No clone, no destroy, no power
//! change: the VM runs on as it was (docs/migrating-from-capmox.md).

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, StepKind, VmFact};
use crate::machine::observe::vm::moved;
use crate::machine::vm::marker::Marker;
use crate::pve::{ConfigUpdate, PveError, VmConfig};
use crate::reasons::Reason;

/// The config write that marks `config` as the VM of `marker`'s machine:
/// our tag added to its tags, our line after its description.
pub fn marking(config: &VmConfig, marker: &Marker) -> ConfigUpdate {
    let mut tags = config.tags.clone();
    tags.insert(marker.tag());
    let mut u = ConfigUpdate::new()
        .tags(&tags)
        .description(&marker.description(config.description.as_deref()));
    if let Some(d) = &config.digest {
        u = u.digest(d.clone());
    }
    u
}

/// Writes the marker onto the VM.
pub async fn adopt(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Legacy(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Some(config) = &view.config else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Adopt,
                "precondition",
                Reason::AdoptionFailed(e.to_string()),
            );
        }
    };
    let update = marking(config, &facts.marker);
    match inst
        .api
        .update_vm_config_sync(&view.node, vmid, &update)
        .await
    {
        Ok(()) => {
            run.event(
                EventKind::Normal,
                Reason::Adopted(format!(
                    "adopted VM {vmid} on {} made by CAPMOX (its SMBIOS UUID is the machine's providerID); our marker was added, nothing else changed",
                    view.node
                )),
            );
            run.rt().update_memo(&run.me.uid, |m| m.vm = None);
            Observed::Adopted
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => {
            let reason = Reason::AdoptionFailed(format!("marking VM {vmid}: {e}"));
            super::pve_failed(run, StepKind::Adopt, &e, reason)
        }
    }
}
