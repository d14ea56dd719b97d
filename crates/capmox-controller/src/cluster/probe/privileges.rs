//! The privileges the instance's token lacks for the features in use
//! (docs/field-cases.md B31): the table of the instance's Proxmox VE major
//! version (`pve_client::privileges`) against `GET /access/permissions`.

use pve_client::privileges::{self, Endpoint};

use crate::api::MissingPrivilege;
use crate::instances::EffectiveInstance;
use crate::pve::Permissions;

/// The endpoint groups the provider uses in `inst`: every VM, storage and
/// guest-agent operation, and the HA ones when the instance turns HA on
/// (`spec.instances[].ha`; a machine's own `spec.ha` is checked when it
/// registers).
pub fn endpoints(inst: &EffectiveInstance) -> Vec<Endpoint> {
    let mut v = vec![
        Endpoint::ClusterStatus,
        Endpoint::VmRead,
        Endpoint::VmClone,
        Endpoint::VmConfigure,
        Endpoint::VmPower,
        Endpoint::VmDestroy,
        Endpoint::AgentRead,
        Endpoint::AgentExec,
        Endpoint::StorageRead,
        Endpoint::StorageUpload,
        Endpoint::StorageDelete,
    ];
    if inst.spec.ha.as_ref().is_some_and(|h| h.wanted()) {
        v.extend([Endpoint::HaRead, Endpoint::HaWrite]);
    }
    v
}

/// What the token lacks in `inst` on PVE `major`, per operation. VM and
/// storage privileges held on the instance's resource pool
/// (`spec.settings.instances[].pool`) count: the clone names that pool
/// (docs/field-cases.md B34).
pub fn missing(inst: &EffectiveInstance, major: u32, held: &Permissions) -> Vec<MissingPrivilege> {
    privileges::missing(held, major, &endpoints(inst), inst.spec.pool.as_deref())
        .into_iter()
        .map(|m| MissingPrivilege {
            privilege: m.privilege,
            path: m.path.to_string(),
            operation: m.endpoint.name().to_string(),
        })
        .collect()
}

/// `privilege on path (operation)`, joined, for messages.
pub fn describe(missing: &[MissingPrivilege]) -> String {
    missing
        .iter()
        .map(|m| format!("{} on {} ({})", m.privilege, m.path, m.operation))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{HaSettings, InstanceSpec};

    fn inst(ha: bool) -> EffectiveInstance {
        EffectiveInstance {
            spec: InstanceSpec {
                name: "dc-a".into(),
                ha: ha.then(|| HaSettings {
                    rule: Some("capmox".into()),
                    ..HaSettings::default()
                }),
                ..InstanceSpec::default()
            },
            manager_credentials: false,
            implicit: false,
            network: Default::default(),
            scheduler_hints: Default::default(),
        }
    }

    /// Everything PVEVMAdmin-like on /vms, datastore rights on /storage,
    /// Sys.Audit on /: on PVE 9 the agent privilege is named, and the HA
    /// write only when the instance turns HA on.
    #[test]
    fn named_per_version_and_feature() {
        let vms: &[&str] = &[
            "VM.Audit",
            "VM.Allocate",
            "VM.Clone",
            "VM.PowerMgmt",
            "VM.Config.CDROM",
            "VM.Config.CPU",
            "VM.Config.Disk",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.Options",
            "VM.Monitor",
        ];
        let storage: &[&str] = &[
            "Datastore.Audit",
            "Datastore.AllocateSpace",
            "Datastore.AllocateTemplate",
            "Datastore.Allocate",
        ];
        let held = Permissions::from_paths([
            ("/vms", vms),
            ("/storage", storage),
            ("/", &["Sys.Audit"][..]),
        ]);
        assert!(missing(&inst(false), 8, &held).is_empty());
        assert_eq!(
            describe(&missing(&inst(false), 9, &held)),
            "VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted on /vms/{vmid} (agentRead), VM.GuestAgent.Unrestricted on /vms/{vmid} (agentExec)"
        );
        assert_eq!(
            describe(&missing(&inst(true), 8, &held)),
            "Sys.Console on / (haWrite)"
        );
    }
}
