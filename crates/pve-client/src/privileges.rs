//! The privileges each endpoint this client offers checks, per Proxmox VE
//! major version (docs/proxmox-semantics.md §21, §23; docs/field-cases.md
//! B31).
//!
//! Proxmox checks privileges on ACL paths (`/vms/{vmid}`, `/storage/{storage}`,
//! `/`); an API token holds what `GET /access/permissions` reports
//! ([`crate::api::access::Permissions`]). The two versions differ:
//!
//! - PVE 8 checks `VM.Monitor` for every guest-agent call and has no
//!   `VM.GuestAgent.*` privileges;
//! - PVE 9 removed `VM.Monitor` (a role naming it is refused, `invalid
//!   privilege 'VM.Monitor'`) and checks `VM.GuestAgent.Audit` (or
//!   `VM.GuestAgent.Unrestricted`) for agent reads and
//!   `VM.GuestAgent.Unrestricted` for `exec`.
//!
//! So a client that requires one fixed list fails on the other version;
//! [`Endpoint::checks`] answers for the version the server reported in
//! `GET /version` ([`crate::api::version::VersionInfo::major`]).

use std::fmt;

/// The ACL path a check runs on, as a template of the endpoint's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AclPath {
    /// `/`: the datacenter (cluster status, HA configuration).
    Root,
    /// `/vms/{vmid}`: the VM (propagated from `/vms` or from the VM's pool
    /// `/pool/{pool}`).
    Vm,
    /// `/storage/{storage}` (propagated from `/storage`).
    Storage,
}

impl AclPath {
    /// The template as Proxmox writes it.
    pub fn template(self) -> &'static str {
        match self {
            AclPath::Root => "/",
            AclPath::Vm => "/vms/{vmid}",
            AclPath::Storage => "/storage/{storage}",
        }
    }
}

/// One privilege check: all of `privileges` on `path`, or one of them when
/// `any`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    /// Where.
    pub path: AclPath,
    /// What.
    pub privileges: &'static [&'static str],
    /// One of `privileges` is enough.
    pub any: bool,
}

const fn all(path: AclPath, privileges: &'static [&'static str]) -> Check {
    Check {
        path,
        privileges,
        any: false,
    }
}

const fn any(path: AclPath, privileges: &'static [&'static str]) -> Check {
    Check {
        path,
        privileges,
        any: true,
    }
}

/// A group of endpoints with the same privilege checks (the methods of
/// [`crate::PveClient`] named in [`Endpoint::api`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Endpoint {
    /// `GET /cluster/status`.
    ClusterStatus,
    /// `GET …/qemu/{vmid}/config`, `GET …/qemu/{vmid}/status/current`.
    VmRead,
    /// `POST /nodes/{node}/qemu/{vmid}/clone` (source VM and new VMID).
    VmClone,
    /// `POST`/`PUT …/qemu/{vmid}/config` with the keys the provider writes
    /// (name, description, tags, `onboot`, `startup`, `agent`: Options;
    /// cores, sockets: CPU; memory; `net[n]`: Network; data disks and
    /// `boot`: Disk; the ISO drive: CDROM) and `PUT …/resize`.
    VmConfigure,
    /// `POST …/qemu/{vmid}/status/{start,stop,shutdown}`.
    VmPower,
    /// `DELETE /nodes/{node}/qemu/{vmid}`.
    VmDestroy,
    /// `GET …/qemu/{vmid}/agent/network-get-interfaces`.
    AgentRead,
    /// `POST …/qemu/{vmid}/agent/exec`, `GET …/agent/exec-status`.
    AgentExec,
    /// `GET /nodes/{node}/storage/{storage}/content`.
    StorageRead,
    /// `POST /nodes/{node}/storage/{storage}/upload` (ISO).
    StorageUpload,
    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`.
    StorageDelete,
    /// `GET /cluster/ha/resources[/{sid}]`, `/cluster/ha/groups`, `/cluster/ha/rules/{rule}`.
    HaRead,
    /// `POST`/`PUT`/`DELETE /cluster/ha/resources[/{sid}]`, `PUT /cluster/ha/rules/{rule}`.
    HaWrite,
}

const VM_CONFIGURE: &[&str] = &[
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Disk",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
];

impl Endpoint {
    /// Every endpoint group.
    pub const ALL: [Endpoint; 13] = [
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
        Endpoint::HaRead,
        Endpoint::HaWrite,
    ];

    /// The API calls of the group (for messages).
    pub fn api(self) -> &'static str {
        match self {
            Endpoint::ClusterStatus => "GET /cluster/status",
            Endpoint::VmRead => "GET /nodes/{node}/qemu/{vmid}/config",
            Endpoint::VmClone => "POST /nodes/{node}/qemu/{vmid}/clone",
            Endpoint::VmConfigure => "POST /nodes/{node}/qemu/{vmid}/config",
            Endpoint::VmPower => "POST /nodes/{node}/qemu/{vmid}/status/start",
            Endpoint::VmDestroy => "DELETE /nodes/{node}/qemu/{vmid}",
            Endpoint::AgentRead => "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
            Endpoint::AgentExec => "POST /nodes/{node}/qemu/{vmid}/agent/exec",
            Endpoint::StorageRead => "GET /nodes/{node}/storage/{storage}/content",
            Endpoint::StorageUpload => "POST /nodes/{node}/storage/{storage}/upload",
            Endpoint::StorageDelete => "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
            Endpoint::HaRead => "GET /cluster/ha/resources/{sid}",
            Endpoint::HaWrite => "POST /cluster/ha/resources",
        }
    }

    /// The checks the endpoint makes on PVE `major` (8 or 9; later majors
    /// are taken as 9, earlier ones as 8).
    pub fn checks(self, major: u32) -> &'static [Check] {
        use AclPath::{Root, Storage, Vm};
        const CLUSTER_STATUS: &[Check] = &[all(Root, &["Sys.Audit"])];
        const VM_READ: &[Check] = &[all(Vm, &["VM.Audit"])];
        // VM.Clone on the source, VM.Allocate on the new VMID (or its pool),
        // Datastore.AllocateSpace on the target storage.
        const VM_CLONE: &[Check] = &[
            all(Vm, &["VM.Clone"]),
            all(Vm, &["VM.Allocate"]),
            all(Storage, &["Datastore.AllocateSpace"]),
        ];
        const VM_CONFIG: &[Check] = &[all(Vm, VM_CONFIGURE)];
        const VM_POWER: &[Check] = &[all(Vm, &["VM.PowerMgmt"])];
        const VM_DESTROY: &[Check] = &[all(Vm, &["VM.Allocate"])];
        const AGENT_READ_9: &[Check] = &[any(
            Vm,
            &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"],
        )];
        const AGENT_EXEC_9: &[Check] = &[all(Vm, &["VM.GuestAgent.Unrestricted"])];
        const AGENT_8: &[Check] = &[all(Vm, &["VM.Monitor"])];
        const STORAGE_READ: &[Check] = &[any(
            Storage,
            &["Datastore.Audit", "Datastore.AllocateSpace"],
        )];
        const STORAGE_UPLOAD: &[Check] = &[all(Storage, &["Datastore.AllocateTemplate"])];
        const STORAGE_DELETE: &[Check] = &[all(Storage, &["Datastore.Allocate"])];
        const HA_READ: &[Check] = &[all(Root, &["Sys.Audit"])];
        const HA_WRITE: &[Check] = &[all(Root, &["Sys.Console"])];
        let pve9 = major >= 9;
        match self {
            Endpoint::ClusterStatus => CLUSTER_STATUS,
            Endpoint::VmRead => VM_READ,
            Endpoint::VmClone => VM_CLONE,
            Endpoint::VmConfigure => VM_CONFIG,
            Endpoint::VmPower => VM_POWER,
            Endpoint::VmDestroy => VM_DESTROY,
            Endpoint::AgentRead if pve9 => AGENT_READ_9,
            Endpoint::AgentExec if pve9 => AGENT_EXEC_9,
            Endpoint::AgentRead | Endpoint::AgentExec => AGENT_8,
            Endpoint::StorageRead => STORAGE_READ,
            Endpoint::StorageUpload => STORAGE_UPLOAD,
            Endpoint::StorageDelete => STORAGE_DELETE,
            Endpoint::HaRead => HA_READ,
            Endpoint::HaWrite => HA_WRITE,
        }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.api())
    }
}

impl Endpoint {
    /// A stable lower-camel-case name (`agentRead`), for status fields.
    pub fn name(self) -> &'static str {
        match self {
            Endpoint::ClusterStatus => "clusterStatus",
            Endpoint::VmRead => "vmRead",
            Endpoint::VmClone => "vmClone",
            Endpoint::VmConfigure => "vmConfigure",
            Endpoint::VmPower => "vmPower",
            Endpoint::VmDestroy => "vmDestroy",
            Endpoint::AgentRead => "agentRead",
            Endpoint::AgentExec => "agentExec",
            Endpoint::StorageRead => "storageRead",
            Endpoint::StorageUpload => "storageUpload",
            Endpoint::StorageDelete => "storageDelete",
            Endpoint::HaRead => "haRead",
            Endpoint::HaWrite => "haWrite",
        }
    }
}

/// A check of an endpoint that the held privileges do not pass.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissingPrivilege {
    /// The endpoint group that needs it.
    pub endpoint: Endpoint,
    /// The privilege (`VM.GuestAgent.Audit`), or the alternatives joined by
    /// ` or ` when one of several is enough.
    pub privilege: String,
    /// The ACL path template (`/vms/{vmid}`).
    pub path: &'static str,
}

impl fmt::Display for MissingPrivilege {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}", self.privilege, self.path)
    }
}

/// The checks of `endpoints` on PVE `major` that `held` (the answer of
/// `GET /access/permissions` without a path: effective privileges per ACL
/// path, propagation applied) does not pass, in the order given, each
/// missing privilege once per endpoint.
///
/// A check on `/vms/{vmid}` passes when `/vms` holds it, or `/pool/{pool}`
/// when the VMs are made in `pool` (a pool-scoped token: an ACL on a pool is
/// inherited by its members, and a clone may use the pool's `VM.Allocate`
/// only when it names the pool, docs/field-cases.md B34); on
/// `/storage/{storage}` when `/storage` holds it, or the pool (its member
/// storages); on `/` when `/` holds it.
pub fn missing(
    held: &crate::api::access::Permissions,
    major: u32,
    endpoints: &[Endpoint],
    pool: Option<&str>,
) -> Vec<MissingPrivilege> {
    let pool_path = pool.map(|p| format!("/pool/{p}"));
    let in_pool = |privilege: &str| pool_path.as_deref().is_some_and(|p| held.has(p, privilege));
    let has = |path: AclPath, privilege: &str| -> bool {
        match path {
            AclPath::Root => held.has("/", privilege),
            AclPath::Storage => held.has("/storage", privilege) || in_pool(privilege),
            AclPath::Vm => held.has("/vms", privilege) || in_pool(privilege),
        }
    };
    let mut out = Vec::new();
    for e in endpoints {
        for c in e.checks(major) {
            if c.any {
                if !c.privileges.iter().any(|p| has(c.path, p)) {
                    out.push(MissingPrivilege {
                        endpoint: *e,
                        privilege: c.privileges.join(" or "),
                        path: c.path.template(),
                    });
                }
            } else {
                for p in c.privileges.iter().filter(|p| !has(c.path, p)) {
                    out.push(MissingPrivilege {
                        endpoint: *e,
                        privilege: (*p).to_string(),
                        path: c.path.template(),
                    });
                }
            }
        }
    }
    out
}

/// The privileges of PVE 9 that PVE 8 does not have.
pub const ONLY_PVE9: &[&str] = &[
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
];

/// The privileges of PVE 8 that PVE 9 removed.
pub const ONLY_PVE8: &[&str] = &["VM.Monitor"];

/// Whether `privilege` exists on PVE `major` (a role naming one that does
/// not is refused with `invalid privilege '<name>'`). Privileges outside
/// both lists are taken to exist on both.
pub fn exists(privilege: &str, major: u32) -> bool {
    if major >= 9 {
        !ONLY_PVE8.contains(&privilege)
    } else {
        !ONLY_PVE9.contains(&privilege)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_privileges_follow_the_version() {
        let names = |e: Endpoint, major| {
            e.checks(major)
                .iter()
                .flat_map(|c| c.privileges.iter().copied())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(Endpoint::AgentRead, 8), ["VM.Monitor"]);
        assert_eq!(names(Endpoint::AgentExec, 8), ["VM.Monitor"]);
        assert_eq!(
            names(Endpoint::AgentRead, 9),
            ["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"]
        );
        assert!(Endpoint::AgentRead.checks(9)[0].any);
        assert_eq!(
            names(Endpoint::AgentExec, 10),
            ["VM.GuestAgent.Unrestricted"]
        );
        assert_eq!(names(Endpoint::AgentRead, 7), ["VM.Monitor"]);
    }

    /// docs/field-cases.md B31: the token of the case (VM.Audit, VM.Clone,
    /// VM.PowerMgmt, VM.Config.* on /vms) lacks the agent privilege of each
    /// version, named with its path.
    #[test]
    fn missing_privileges_per_version() {
        use crate::api::access::Permissions;
        let vms: &[&str] = &[
            "VM.Audit",
            "VM.Clone",
            "VM.PowerMgmt",
            "VM.Config.CDROM",
            "VM.Config.CPU",
            "VM.Config.Disk",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.Options",
        ];
        let held = Permissions::from_paths([("/vms", vms)]);
        let text = |major| {
            missing(
                &held,
                major,
                &[Endpoint::VmRead, Endpoint::AgentRead, Endpoint::HaWrite],
                None,
            )
            .iter()
            .map(|m| format!("{}: {m}", m.endpoint.name()))
            .collect::<Vec<_>>()
        };
        assert_eq!(
            text(9),
            [
                "agentRead: VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted on /vms/{vmid}",
                "haWrite: Sys.Console on /"
            ]
        );
        assert_eq!(
            text(8),
            [
                "agentRead: VM.Monitor on /vms/{vmid}",
                "haWrite: Sys.Console on /"
            ]
        );
        // A pool-scoped token holds VM privileges on its pool, for VMs
        // made in that pool only.
        let pool = Permissions::from_paths([(
            "/pool/k8s",
            &[
                "VM.Audit",
                "VM.Clone",
                "VM.Allocate",
                "Datastore.AllocateSpace",
            ][..],
        )]);
        assert!(
            missing(
                &pool,
                9,
                &[Endpoint::VmRead, Endpoint::VmClone],
                Some("k8s")
            )
            .is_empty()
        );
        let names = |m: Vec<MissingPrivilege>| m.iter().map(|m| m.to_string()).collect::<Vec<_>>();
        assert_eq!(
            names(missing(&pool, 9, &[Endpoint::VmClone], None)),
            [
                "VM.Clone on /vms/{vmid}",
                "VM.Allocate on /vms/{vmid}",
                "Datastore.AllocateSpace on /storage/{storage}"
            ]
        );
        assert_eq!(
            names(missing(&pool, 9, &[Endpoint::VmRead], Some("other"))),
            ["VM.Audit on /vms/{vmid}"]
        );
    }

    #[test]
    fn no_version_requires_a_privilege_it_does_not_have() {
        for major in [8, 9] {
            for e in Endpoint::ALL {
                for c in e.checks(major) {
                    for p in c.privileges {
                        assert!(exists(p, major), "{e} on PVE {major} requires {p}");
                    }
                }
            }
        }
        assert!(!exists("VM.Monitor", 9));
        assert!(!exists("VM.GuestAgent.Audit", 8));
        assert!(exists("VM.Audit", 8) && exists("VM.Audit", 9));
    }
}
