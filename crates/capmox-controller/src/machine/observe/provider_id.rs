//! Whether another ProxmoxMachine already records the providerID this
//! machine's VM would get (docs/field-cases.md B36): a VM copied with its
//! SMBIOS UUID into another Proxmox cluster carries the same UUID, and
//! CAPI would match both machines to one Node. Read from the watched
//! machines before `spec.providerID` is written; no Proxmox call.

use kube::ResourceExt;

use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, VmFact};
use crate::machine::observe::duplicates::latest_known;
use crate::machine::report::provider_id;
use crate::machine::vm::provider_id::same;

/// Looks for another machine recording the providerID of our VM: its
/// `namespace/name`, or `None`. A VM without a readable SMBIOS UUID has no
/// providerID yet, so nobody holds it.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    Observed::ProviderIdHolder(holder(run, facts))
}

fn holder(run: &Run<'_>, facts: &Facts) -> Option<String> {
    let Some(VmFact::Ours(view)) = &facts.vm else {
        return None;
    };
    let uuid = view.config.as_ref()?.smbios1.as_ref()?.uuid?;
    let ours = provider_id(facts, &uuid.to_string());
    run.ctx
        .stores
        .machines
        .state()
        .into_iter()
        .filter(|m| m.metadata.uid.as_deref() != Some(run.me.uid.as_str()))
        .map(|m| latest_known(run, m))
        .find(|m| {
            m.spec
                .provider_id
                .as_deref()
                .is_some_and(|p| same(p, &ours))
        })
        .map(|m| format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()))
}
