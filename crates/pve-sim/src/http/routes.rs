//! Every API route the simulator serves, relative to `/api2/json`, with the
//! permission check Proxmox declares for it (copied from the schema; the
//! schema conformance test compares both).

use serde_json::{Value, json};

/// A permission check expression (pve-access-control `check_api2_permissions`).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Check {
    /// `user => 'all'`: any authenticated user.
    All,
    /// `user => 'world'`: no authentication needed.
    World,
    /// `['perm', path, [privs], any => 1?, require_param => p?]`.
    Perm {
        path: &'static str,
        privs: &'static [&'static str],
        any: bool,
        require_param: Option<&'static str>,
    },
    /// `['and', …]`.
    And(&'static [Check]),
    /// `['or', …]`.
    Or(&'static [Check]),
}

impl Check {
    /// The schema's JSON form of this check (`{"user":"all"}` or `{"check":[…]}`).
    pub fn to_schema_json(self) -> Value {
        match self {
            Check::All => json!({"user": "all"}),
            Check::World => json!({"user": "world"}),
            other => json!({ "check": other.expr() }),
        }
    }

    fn expr(self) -> Value {
        match self {
            Check::All | Check::World => Value::Null,
            Check::Perm {
                path,
                privs,
                any,
                require_param,
            } => {
                let mut v = vec![json!("perm"), json!(path), json!(privs)];
                if any {
                    v.push(json!("any"));
                    v.push(json!(1));
                }
                if let Some(p) = require_param {
                    v.push(json!("require_param"));
                    v.push(json!(p));
                }
                Value::Array(v)
            }
            Check::And(items) => {
                let mut v = vec![json!("and")];
                v.extend(items.iter().map(|c| c.expr()));
                Value::Array(v)
            }
            Check::Or(items) => {
                let mut v = vec![json!("or")];
                v.extend(items.iter().map(|c| c.expr()));
                Value::Array(v)
            }
        }
    }
}

const fn perm(path: &'static str, privs: &'static [&'static str]) -> Check {
    Check::Perm {
        path,
        privs,
        any: false,
        require_param: None,
    }
}

const fn perm_any(path: &'static str, privs: &'static [&'static str]) -> Check {
    Check::Perm {
        path,
        privs,
        any: true,
        require_param: None,
    }
}

const VM_CONFIG_PRIVS: &[&str] = &[
    "VM.Config.Disk",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.HWType",
    "VM.Config.Options",
    "VM.Config.Cloudinit",
];
const AGENT_AUDIT: &[&str] = &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"];
const DATASTORE_READ: &[&str] = &["Datastore.Audit", "Datastore.AllocateSpace"];
const CLONE_CHECK: &[Check] = &[
    perm("/vms/{vmid}", &["VM.Clone"]),
    Check::Or(&[
        perm("/vms/{newid}", &["VM.Allocate"]),
        Check::Perm {
            path: "/pool/{pool}",
            privs: &["VM.Allocate"],
            any: false,
            require_param: Some("pool"),
        },
    ]),
];

/// Which handler serves a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub(crate) enum RouteId {
    Version,
    AccessTicket,
    AccessPermissions,
    ClusterResources,
    ClusterNextid,
    ClusterStatus,
    PciMappings,
    ClusterOptions,
    ClusterTasks,
    HaList,
    HaCreate,
    HaGet,
    HaUpdate,
    HaDelete,
    HaMigrate,
    HaRelocate,
    HaGroups,
    HaGroup,
    HaRules,
    HaRule,
    HaRuleUpdate,
    PoolsList,
    PoolsCreate,
    PoolsUpdate,
    PoolsDelete,
    PoolGet,
    PoolUpdate,
    PoolDelete,
    NodesList,
    NodeStatus,
    NodeCertificates,
    NodeNetwork,
    NodeTasks,
    TaskStatus,
    TaskLog,
    TaskStop,
    StorageList,
    StorageStatus,
    StorageContent,
    StorageAlloc,
    VolumeGet,
    VolumeDelete,
    StorageUpload,
    QemuList,
    QemuCreate,
    QemuDestroy,
    QemuClone,
    QemuMigrate,
    ConfigGet,
    ConfigPost,
    ConfigPut,
    Pending,
    Resize,
    Feature,
    StatusCurrent,
    Start,
    Stop,
    Shutdown,
    Reboot,
    Reset,
    Suspend,
    Resume,
    AgentNetwork,
    AgentPing,
    AgentOsinfo,
    AgentExec,
    AgentExecStatus,
    Template,
    CloudinitGet,
    CloudinitPut,
    CloudinitDump,
}

/// One served route.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Route {
    pub method: &'static str,
    pub template: &'static str,
    pub id: RouteId,
    pub check: Check,
}

const fn r(method: &'static str, template: &'static str, id: RouteId, check: Check) -> Route {
    Route {
        method,
        template,
        id,
        check,
    }
}

/// The route table.
pub(crate) const ROUTES: &[Route] = &[
    r("GET", "/version", RouteId::Version, Check::All),
    r(
        "POST",
        "/access/ticket",
        RouteId::AccessTicket,
        Check::World,
    ),
    r(
        "GET",
        "/access/permissions",
        RouteId::AccessPermissions,
        Check::All,
    ),
    r(
        "GET",
        "/cluster/resources",
        RouteId::ClusterResources,
        Check::All,
    ),
    r("GET", "/cluster/nextid", RouteId::ClusterNextid, Check::All),
    r(
        "GET",
        "/cluster/mapping/pci",
        RouteId::PciMappings,
        Check::All,
    ),
    r(
        "GET",
        "/cluster/status",
        RouteId::ClusterStatus,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "GET",
        "/cluster/options",
        RouteId::ClusterOptions,
        perm("/", &["Sys.Audit"]),
    ),
    r("GET", "/cluster/tasks", RouteId::ClusterTasks, Check::All),
    r(
        "GET",
        "/cluster/ha/resources",
        RouteId::HaList,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "POST",
        "/cluster/ha/resources",
        RouteId::HaCreate,
        perm("/", &["Sys.Console"]),
    ),
    r(
        "GET",
        "/cluster/ha/resources/{sid}",
        RouteId::HaGet,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "PUT",
        "/cluster/ha/resources/{sid}",
        RouteId::HaUpdate,
        perm("/", &["Sys.Console"]),
    ),
    r(
        "DELETE",
        "/cluster/ha/resources/{sid}",
        RouteId::HaDelete,
        perm("/", &["Sys.Console"]),
    ),
    r(
        "POST",
        "/cluster/ha/resources/{sid}/migrate",
        RouteId::HaMigrate,
        perm("/", &["Sys.Console"]),
    ),
    r(
        "POST",
        "/cluster/ha/resources/{sid}/relocate",
        RouteId::HaRelocate,
        perm("/", &["Sys.Console"]),
    ),
    r(
        "GET",
        "/cluster/ha/groups",
        RouteId::HaGroups,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "GET",
        "/cluster/ha/groups/{group}",
        RouteId::HaGroup,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "GET",
        "/cluster/ha/rules",
        RouteId::HaRules,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "GET",
        "/cluster/ha/rules/{rule}",
        RouteId::HaRule,
        perm("/", &["Sys.Audit"]),
    ),
    r(
        "PUT",
        "/cluster/ha/rules/{rule}",
        RouteId::HaRuleUpdate,
        perm("/", &["Sys.Console"]),
    ),
    r("GET", "/pools", RouteId::PoolsList, Check::All),
    r(
        "POST",
        "/pools",
        RouteId::PoolsCreate,
        perm("/pool/{poolid}", &["Pool.Allocate"]),
    ),
    r(
        "PUT",
        "/pools",
        RouteId::PoolsUpdate,
        perm("/pool/{poolid}", &["Pool.Allocate"]),
    ),
    r(
        "DELETE",
        "/pools",
        RouteId::PoolsDelete,
        perm("/pool/{poolid}", &["Pool.Allocate"]),
    ),
    r(
        "GET",
        "/pools/{poolid}",
        RouteId::PoolGet,
        perm("/pool/{poolid}", &["Pool.Audit"]),
    ),
    r(
        "PUT",
        "/pools/{poolid}",
        RouteId::PoolUpdate,
        perm("/pool/{poolid}", &["Pool.Allocate"]),
    ),
    r(
        "DELETE",
        "/pools/{poolid}",
        RouteId::PoolDelete,
        perm("/pool/{poolid}", &["Pool.Allocate"]),
    ),
    r("GET", "/nodes", RouteId::NodesList, Check::All),
    r(
        "GET",
        "/nodes/{node}/status",
        RouteId::NodeStatus,
        perm("/nodes/{node}", &["Sys.Audit"]),
    ),
    r(
        "GET",
        "/nodes/{node}/certificates/info",
        RouteId::NodeCertificates,
        Check::All,
    ),
    r(
        "GET",
        "/nodes/{node}/network",
        RouteId::NodeNetwork,
        Check::All,
    ),
    r("GET", "/nodes/{node}/tasks", RouteId::NodeTasks, Check::All),
    r(
        "GET",
        "/nodes/{node}/tasks/{upid}/status",
        RouteId::TaskStatus,
        Check::All,
    ),
    r(
        "GET",
        "/nodes/{node}/tasks/{upid}/log",
        RouteId::TaskLog,
        Check::All,
    ),
    r(
        "DELETE",
        "/nodes/{node}/tasks/{upid}",
        RouteId::TaskStop,
        Check::All,
    ),
    r(
        "GET",
        "/nodes/{node}/storage",
        RouteId::StorageList,
        Check::All,
    ),
    r(
        "GET",
        "/nodes/{node}/storage/{storage}/status",
        RouteId::StorageStatus,
        perm_any("/storage/{storage}", DATASTORE_READ),
    ),
    r(
        "GET",
        "/nodes/{node}/storage/{storage}/content",
        RouteId::StorageContent,
        perm_any("/storage/{storage}", DATASTORE_READ),
    ),
    r(
        "POST",
        "/nodes/{node}/storage/{storage}/content",
        RouteId::StorageAlloc,
        perm("/storage/{storage}", &["Datastore.AllocateSpace"]),
    ),
    r(
        "GET",
        "/nodes/{node}/storage/{storage}/content/{volume}",
        RouteId::VolumeGet,
        Check::All,
    ),
    r(
        "DELETE",
        "/nodes/{node}/storage/{storage}/content/{volume}",
        RouteId::VolumeDelete,
        Check::All,
    ),
    r(
        "POST",
        "/nodes/{node}/storage/{storage}/upload",
        RouteId::StorageUpload,
        perm("/storage/{storage}", &["Datastore.AllocateTemplate"]),
    ),
    r("GET", "/nodes/{node}/qemu", RouteId::QemuList, Check::All),
    r(
        "POST",
        "/nodes/{node}/qemu",
        RouteId::QemuCreate,
        Check::All,
    ),
    r(
        "DELETE",
        "/nodes/{node}/qemu/{vmid}",
        RouteId::QemuDestroy,
        perm("/vms/{vmid}", &["VM.Allocate"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/clone",
        RouteId::QemuClone,
        Check::And(CLONE_CHECK),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/migrate",
        RouteId::QemuMigrate,
        perm("/vms/{vmid}", &["VM.Migrate"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/config",
        RouteId::ConfigGet,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/config",
        RouteId::ConfigPost,
        perm_any("/vms/{vmid}", VM_CONFIG_PRIVS),
    ),
    r(
        "PUT",
        "/nodes/{node}/qemu/{vmid}/config",
        RouteId::ConfigPut,
        perm_any("/vms/{vmid}", VM_CONFIG_PRIVS),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/pending",
        RouteId::Pending,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
    r(
        "PUT",
        "/nodes/{node}/qemu/{vmid}/resize",
        RouteId::Resize,
        perm("/vms/{vmid}", &["VM.Config.Disk"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/feature",
        RouteId::Feature,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/status/current",
        RouteId::StatusCurrent,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/start",
        RouteId::Start,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/stop",
        RouteId::Stop,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/shutdown",
        RouteId::Shutdown,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/reboot",
        RouteId::Reboot,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/reset",
        RouteId::Reset,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/suspend",
        RouteId::Suspend,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/status/resume",
        RouteId::Resume,
        perm("/vms/{vmid}", &["VM.PowerMgmt"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
        RouteId::AgentNetwork,
        perm_any("/vms/{vmid}", AGENT_AUDIT),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/agent/ping",
        RouteId::AgentPing,
        perm_any("/vms/{vmid}", AGENT_AUDIT),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/agent/get-osinfo",
        RouteId::AgentOsinfo,
        perm_any("/vms/{vmid}", AGENT_AUDIT),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/agent/exec",
        RouteId::AgentExec,
        perm("/vms/{vmid}", &["VM.GuestAgent.Unrestricted"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/agent/exec-status",
        RouteId::AgentExecStatus,
        perm("/vms/{vmid}", &["VM.GuestAgent.Unrestricted"]),
    ),
    r(
        "POST",
        "/nodes/{node}/qemu/{vmid}/template",
        RouteId::Template,
        perm("/vms/{vmid}", &["VM.Allocate"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/cloudinit",
        RouteId::CloudinitGet,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
    r(
        "PUT",
        "/nodes/{node}/qemu/{vmid}/cloudinit",
        RouteId::CloudinitPut,
        perm("/vms/{vmid}", &["VM.Config.Cloudinit"]),
    ),
    r(
        "GET",
        "/nodes/{node}/qemu/{vmid}/cloudinit/dump",
        RouteId::CloudinitDump,
        perm("/vms/{vmid}", &["VM.Audit"]),
    ),
];

impl Route {
    /// Whether PVE `major` serves the route: the HA rules exist from PVE 9
    /// on (PVE 8 answers 501 like for any unknown path).
    pub fn served_on(&self, major: u32) -> bool {
        match self.id {
            RouteId::HaRules | RouteId::HaRule | RouteId::HaRuleUpdate => major >= 9,
            _ => true,
        }
    }

    /// The check PVE `major` makes: the table holds PVE 9's (the official
    /// schema's); PVE 8 checks `VM.Monitor` for every guest-agent call
    /// (docs/field-cases.md B31).
    pub fn check_on(&self, major: u32) -> Check {
        const MONITOR: Check = perm("/vms/{vmid}", &["VM.Monitor"]);
        match self.id {
            RouteId::AgentNetwork
            | RouteId::AgentPing
            | RouteId::AgentOsinfo
            | RouteId::AgentExec
            | RouteId::AgentExecStatus
                if major < 9 =>
            {
                MONITOR
            }
            _ => self.check,
        }
    }
}

/// Result of matching a path against the table.
#[derive(Debug)]
pub(crate) enum RouteMatch {
    /// Found; with the decoded path parameters.
    Found(&'static Route, Vec<(String, String)>),
    /// The path exists, not with this method.
    WrongMethod,
    /// No such path.
    NotFound,
}

/// Splits a template or path into segments.
fn segments(p: &str) -> impl Iterator<Item = &str> {
    p.split('/').filter(|s| !s.is_empty())
}

/// Matches a path relative to `/api2/json` (raw, still percent-encoded).
pub(crate) fn find(method: &str, rel_path: &str) -> RouteMatch {
    let parts: Vec<&str> = segments(rel_path).collect();
    let mut path_exists = false;
    for route in ROUTES {
        let Some(params) = match_template(route.template, &parts) else {
            continue;
        };
        if route.method == method {
            return RouteMatch::Found(route, params);
        }
        path_exists = true;
    }
    if path_exists {
        RouteMatch::WrongMethod
    } else {
        RouteMatch::NotFound
    }
}

fn match_template(template: &str, parts: &[&str]) -> Option<Vec<(String, String)>> {
    let tparts: Vec<&str> = segments(template).collect();
    // a trailing `{volume}` takes the rest of the path (`…/content/local:iso/x.iso`)
    let parts: Vec<String> =
        if template.ends_with("/{volume}") && parts.len() > tparts.len() && !tparts.is_empty() {
            let mut p: Vec<String> = parts[..tparts.len() - 1]
                .iter()
                .map(|s| s.to_string())
                .collect();
            p.push(parts[tparts.len() - 1..].join("/"));
            p
        } else {
            parts.iter().map(|s| s.to_string()).collect()
        };
    if tparts.len() != parts.len() {
        return None;
    }
    let mut params = Vec::new();
    for (t, p) in tparts.iter().zip(parts.iter()) {
        if let Some(name) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            let value = percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned();
            params.push((name.to_string(), value));
        } else if *t != p.as_str() {
            return None;
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        match find(
            "GET",
            "/nodes/pve-a1/tasks/UPID%3Apve-a1%3A0000ABCD%3A00000001%3A65000000%3Aqmclone%3A9000%3Aroot%40pam%3A/status",
        ) {
            RouteMatch::Found(r, p) => {
                assert_eq!(r.id, RouteId::TaskStatus);
                assert_eq!(
                    p[1].1,
                    "UPID:pve-a1:0000ABCD:00000001:65000000:qmclone:9000:root@pam:"
                );
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            find("PATCH", "/nodes/x/qemu/100/config"),
            RouteMatch::WrongMethod
        ));
        assert!(matches!(find("GET", "/nodes/x/lxc"), RouteMatch::NotFound));
        assert!(matches!(find("GET", "/version/"), RouteMatch::Found(..)));
    }

    #[test]
    fn schema_json_of_clone_check() {
        let route = ROUTES.iter().find(|r| r.id == RouteId::QemuClone).unwrap();
        assert_eq!(
            route.check.to_schema_json(),
            json!({"check": ["and", ["perm", "/vms/{vmid}", ["VM.Clone"]],
                ["or", ["perm", "/vms/{newid}", ["VM.Allocate"]],
                       ["perm", "/pool/{pool}", ["VM.Allocate"], "require_param", "pool"]]]})
        );
    }
}
