//! The machine's outputs: `spec.providerID`, the conditions, and how the
//! status is written (server-side apply, field manager `capmox-controller`,
//! status-only body, only when something changed — STYLE.md 9, 10).
//!
//! Conditions (reasons are CamelCase and stable):
//! - `Paused` — `Paused` / `NotPaused`;
//! - `InstanceSelected` — `Pinned`, `FailureDomain`, `Policy`, or why not
//!   ([`super::placement::PlacementError::reason`]);
//! - `IPAddressesClaimed` — `Claimed`, `NoStaticAddresses`,
//!   `WaitingForIPAddresses`, `IPAddressPoolExhausted`;
//! - `VirtualMachineProvisioned` — the step (`Cloning`, `Configuring`,
//!   `Resizing`, `UploadingBootstrapData`, `PoweringOn`,
//!   `WaitingForAddresses`, `Provisioned`, `Deleting`, `DeletionFailed`,
//!   `CloneFailed`, …) with the task's own message when a task failed;
//! - `Ready` — `True`/`Provisioned` once provisioned, else the
//!   `VirtualMachineProvisioned` reason and message.

use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

use super::decide::ClaimsFact;
use crate::api::cluster::ProviderIdFormat;
use crate::api::{ProxmoxMachine, ProxmoxMachineStatus};
use crate::conditions::{self, Desired, Status};
use crate::context::FIELD_MANAGER;
use crate::error::Error;

/// The finalizer of ProxmoxMachines.
pub const FINALIZER: &str = "proxmoxmachine.infrastructure.cluster.x-k8s.io";

/// `spec.providerID` (CAPI contract: must equal the Node's providerID byte
/// for byte): `proxmox://<smbios1 uuid>` by default — what kubelet reports
/// from the product UUID, which cloud-init's `instance-id` carries — or
/// `proxmox://<instance>/<vmid>` with `providerIDFormat: InstanceVMID` (the
/// Proxmox cloud controller manager's form, region = instance).
pub fn provider_id(format: ProviderIdFormat, instance: &str, vmid: u32, uuid: &str) -> String {
    match format {
        ProviderIdFormat::Uuid => format!("proxmox://{}", uuid.to_ascii_lowercase()),
        ProviderIdFormat::InstanceVmid => format!("proxmox://{instance}/{vmid}"),
    }
}

/// The `IPAddressesClaimed` condition for a claims fact.
pub fn claims_condition(fact: &ClaimsFact) -> Desired {
    match fact {
        ClaimsFact::NotNeeded => Desired::new(
            conditions::IP_ADDRESSES_CLAIMED,
            Status::True,
            "NoStaticAddresses",
            "every device uses DHCP",
        ),
        ClaimsFact::Bound(a) => Desired::new(
            conditions::IP_ADDRESSES_CLAIMED,
            Status::True,
            "Claimed",
            a.iter()
                .map(|c| format!("{} {}/{}", c.net, c.address, c.prefix))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ClaimsFact::Missing => Desired::new(
            conditions::IP_ADDRESSES_CLAIMED,
            Status::False,
            "WaitingForIPAddresses",
            "creating IP address claims",
        ),
        ClaimsFact::NoPool(why) => Desired::new(
            conditions::IP_ADDRESSES_CLAIMED,
            Status::False,
            "WaitingForIPAddresses",
            why.clone(),
        ),
        ClaimsFact::Pending {
            pools,
            exhausted,
            message,
        } => Desired::new(
            conditions::IP_ADDRESSES_CLAIMED,
            Status::False,
            if *exhausted {
                "IPAddressPoolExhausted"
            } else {
                "WaitingForIPAddresses"
            },
            if message.is_empty() {
                format!("waiting for addresses from {pools}")
            } else {
                format!("waiting for addresses from {pools}: {message}")
            },
        ),
    }
}

/// Writes `status` with server-side apply when it differs from the
/// object's current status; answers the object the write returned (`None`
/// when nothing had to be written).
///
/// # Errors
/// [`Error::Kube`], [`Error::Json`].
pub async fn write(
    api: &Api<ProxmoxMachine>,
    machine: &ProxmoxMachine,
    status: &ProxmoxMachineStatus,
) -> Result<Option<ProxmoxMachine>, Error> {
    let current = serde_json::to_value(machine.status.clone().unwrap_or_default())?;
    let next = serde_json::to_value(status)?;
    if current == next {
        return Ok(None);
    }
    let body = serde_json::json!({
        "apiVersion": format!("{}/{}", crate::api::GROUP, crate::api::VERSION),
        "kind": "ProxmoxMachine",
        "status": next,
    });
    let written = api
        .patch_status(
            &machine.name_any(),
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(body),
        )
        .await?;
    Ok(Some(written))
}

/// Merges `desired` conditions into `status` (transition times kept when
/// the status does not change).
pub fn merge(status: &mut ProxmoxMachineStatus, desired: &[Desired], generation: Option<i64>) {
    let now = k8s_openapi::jiff::Timestamp::now();
    for d in desired {
        conditions::set(&mut status.conditions, d, generation, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::decide::ClaimedAddress;

    #[test]
    fn provider_ids() {
        assert_eq!(
            provider_id(
                ProviderIdFormat::Uuid,
                "dc-a",
                131,
                "0D3C1E4A-5B6C-4D7E-8F90-A1B2C3D4E5F6"
            ),
            "proxmox://0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"
        );
        assert_eq!(
            provider_id(ProviderIdFormat::InstanceVmid, "dc-a", 131, "x"),
            "proxmox://dc-a/131"
        );
    }

    #[test]
    fn claim_conditions() {
        let c = claims_condition(&ClaimsFact::Bound(vec![ClaimedAddress {
            net: "net0".into(),
            address: "10.0.0.20".parse().unwrap(),
            prefix: 24,
            gateway: None,
        }]));
        assert_eq!(
            (c.status, c.reason.as_str(), c.message.as_str()),
            (Status::True, "Claimed", "net0 10.0.0.20/24")
        );
        let p = claims_condition(&ClaimsFact::Pending {
            pools: "InClusterIPPool wl1-dc-a-ipv4".into(),
            exhausted: true,
            message: "m-net0-ipv4: PoolExhausted".into(),
        });
        assert_eq!(p.reason, "IPAddressPoolExhausted");
        assert_eq!(
            p.message,
            "waiting for addresses from InClusterIPPool wl1-dc-a-ipv4: m-net0-ipv4: PoolExhausted"
        );
    }
}
