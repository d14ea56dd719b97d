//! The machine is up: `spec.providerID` (written once, never changed),
//! `status.addresses`, the devices as Proxmox reports them, and
//! `status.initialization.provisioned` (CAPI contract v1beta2,
//! InfraMachine).

use tracing::info;

use crate::api::Initialization;
use crate::api::machine::{DeviceAddresses, NetworkStatus};
use crate::error::Error;
use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, StepKind, VmFact};
use crate::machine::report::provider_id;
use crate::machine::vm::addresses;
use crate::machine::vm::provider_id::same;
use crate::reasons::Reason;

/// Writes providerID and the provisioned status.
///
/// # Errors
/// [`Error::Kube`] of the providerID write.
pub async fn provision(
    run: &mut Run<'_>,
    facts: &Facts,
    devs: Vec<DeviceAddresses>,
) -> Result<Observed, Error> {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Ok(Observed::VmMoved);
    };
    let Some(config) = &view.config else {
        return Ok(Observed::VmMoved);
    };
    let Some(uuid) = config.smbios1.as_ref().and_then(|s| s.uuid) else {
        return Ok(super::failed(
            run,
            StepKind::Provision,
            "precondition",
            Reason::WaitingForAddresses("the VM has no smbios1 uuid".into()),
        ));
    };
    let id = provider_id(facts, &uuid.to_string());
    match run.machine.spec.provider_id.as_deref() {
        Some(existing) if same(existing, &id) => {}
        Some(existing) => {
            // Once set, a providerID never changes (CAPI matches Nodes by
            // it, docs/field-cases.md B36): the difference is reported.
            tracing::warn!(%existing, computed = %id, "spec.providerID is set and differs; it is kept");
            run.event(
                EventKind::Warning,
                Reason::ProviderIdMismatch(format!(
                    "spec.providerID {existing} is kept; VM {vmid} in instance {} would be {id} in providerIDFormat {}",
                    facts.instance.as_deref().unwrap_or_default(),
                    facts.provider_id_format.as_str()
                )),
            );
        }
        None => {
            run.merge_patch(serde_json::json!({ "spec": { "providerID": id } }))
                .await?;
        }
    }
    let id = run.machine.spec.provider_id.clone().unwrap_or(id);
    let st = &mut run.status;
    st.addresses = addresses::machine_addresses(&crate::names::hostname(&run.me.name), &devs);
    st.ip_addresses = devs;
    st.network = config
        .nets
        .iter()
        .map(|(i, n)| NetworkStatus {
            name: format!("net{i}"),
            mac_address: n.macaddr.map(|m| m.to_string()),
            bridge: n.bridge.clone(),
            vlan: n.tag,
            mtu: n.mtu.map(u32::from),
        })
        .collect();
    st.proxmox_node = Some(view.node.as_str().to_string());
    st.vm_status = Some("running".into());
    st.failure_domain = facts.instance.clone();
    st.initialization = Some(Initialization {
        provisioned: Some(true),
    });
    run.rt().inflight.settle(&run.me.uid);
    let instance = facts.instance.clone().unwrap_or_default();
    run.event(
        EventKind::Normal,
        Reason::Provisioned(format!(
            "VM {vmid} on {} in instance {instance} is up: providerID {id}",
            view.node
        )),
    );
    info!(provider_id = %id, "machine provisioned");
    Ok(Observed::Provisioned)
}
