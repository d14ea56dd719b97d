//! High availability (docs/proxmox-semantics.md §24): HA resources
//! (`/cluster/ha/resources`), HA groups (`/cluster/ha/groups`, PVE 8) and
//! HA rules (`/cluster/ha/rules`, PVE 9).
//!
//! A VM becomes HA-managed when an HA resource `vm:<vmid>` is created; from
//! then on its power operations are requests to the HA manager, which
//! carries them out later (docs/proxmox-semantics.md §16). Where a resource
//! may run is said by an HA group named on the resource (PVE 8) or by the
//! node-affinity rules that list it (PVE 9, where groups were migrated to
//! rules and naming a group is refused).

use std::fmt;
use std::str::FromStr;

use serde::Deserialize;

use crate::PveClient;
use crate::client::{Call, seg};
use crate::encode::Form;
use crate::error::{ParseError, PveError};
use crate::types::lenient::{bool01, opt_string};
use crate::types::{ConfigId, VmId};

/// The HA resource id of a VM, `vm:<vmid>` (format `pve-ha-resource-or-vm-id`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HaSid(VmId);

impl HaSid {
    /// The sid of VM `vmid`.
    pub fn vm(vmid: VmId) -> HaSid {
        HaSid(vmid)
    }

    /// The VM.
    pub fn vmid(self) -> VmId {
        self.0
    }
}

impl fmt::Display for HaSid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "vm:{}", self.0)
    }
}

impl FromStr for HaSid {
    type Err = ParseError;

    /// Parses `vm:<vmid>` or the bare VMID shorthand the API accepts.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let id = match s.split_once(':') {
            Some(("vm", id)) => id,
            Some(_) => {
                return Err(ParseError::new(
                    "HA resource id",
                    s,
                    "only VM resources (vm:<vmid>) are supported",
                ));
            }
            None => s,
        };
        id.parse::<VmId>()
            .map(HaSid)
            .map_err(|e| ParseError::new("HA resource id", s, e.reason))
    }
}

/// The requested state of an HA resource. `enabled` is an alias of
/// `started` and is read as [`HaState::Started`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HaState {
    /// The HA manager keeps the VM running (starting it when it is not).
    Started,
    /// The HA manager keeps the VM stopped (it is still relocated when its
    /// node fails).
    Stopped,
    /// Stopped and not relocated.
    Disabled,
    /// Not managed: the HA manager ignores the resource; power requests
    /// bypass it.
    Ignored,
}

impl HaState {
    /// The value sent to Proxmox.
    pub fn as_str(self) -> &'static str {
        match self {
            HaState::Started => "started",
            HaState::Stopped => "stopped",
            HaState::Disabled => "disabled",
            HaState::Ignored => "ignored",
        }
    }

    /// Parses a state value (`enabled` → `Started`).
    ///
    /// # Errors
    /// [`ParseError`] for a value outside the schema's enum.
    pub fn parse(s: &str) -> Result<HaState, ParseError> {
        Ok(match s {
            "started" | "enabled" => HaState::Started,
            "stopped" => HaState::Stopped,
            "disabled" => HaState::Disabled,
            "ignored" => HaState::Ignored,
            other => {
                return Err(ParseError::new(
                    "HA state",
                    other,
                    "expected started, stopped, enabled, disabled or ignored",
                ));
            }
        })
    }

    /// Whether the HA manager drives the VM towards running.
    pub fn wants_running(self) -> Option<bool> {
        match self {
            HaState::Started => Some(true),
            HaState::Stopped | HaState::Disabled => Some(false),
            HaState::Ignored => None,
        }
    }
}

impl fmt::Display for HaState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An HA resource (`GET /cluster/ha/resources[/{sid}]`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HaResource {
    /// `vm:<vmid>` (or `ct:<vmid>` for containers).
    pub sid: String,
    /// The requested state as written (`started`, `stopped`, …); see
    /// [`HaResource::state`].
    #[serde(default, rename = "state", deserialize_with = "opt_string")]
    pub state_raw: Option<String>,
    /// The HA group (PVE 8; PVE 9 leaves it out once groups are migrated).
    #[serde(default, deserialize_with = "opt_string")]
    pub group: Option<String>,
    /// Comment.
    #[serde(default, deserialize_with = "opt_string")]
    pub comment: Option<String>,
    /// Digest of the resources configuration.
    #[serde(default, deserialize_with = "opt_string")]
    pub digest: Option<String>,
}

impl HaResource {
    /// The requested state (`started` when none is written, the schema's default).
    pub fn state(&self) -> Option<HaState> {
        match &self.state_raw {
            None => Some(HaState::Started),
            Some(s) => HaState::parse(s).ok(),
        }
    }

    /// The VM's sid, when this is a VM resource.
    pub fn vm_sid(&self) -> Option<HaSid> {
        self.sid
            .strip_prefix("vm:")
            .and_then(|id| id.parse::<VmId>().ok())
            .map(HaSid)
    }
}

/// What `POST /cluster/ha/resources` creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaResourceRequest {
    /// The VM.
    pub sid: HaSid,
    /// The requested state.
    pub state: HaState,
    /// The HA group (PVE 8 only: PVE 9 refuses it, `ha groups have been
    /// migrated to rules`).
    pub group: Option<ConfigId>,
    /// Comment (at most 4096 characters).
    pub comment: Option<String>,
}

/// An HA group (`GET /cluster/ha/groups`, PVE 8).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HaGroup {
    /// The group id.
    pub group: String,
    /// `node[:priority],…`.
    #[serde(default, deserialize_with = "opt_string")]
    pub nodes: Option<String>,
    /// Resources may run only on the group's nodes.
    #[serde(default, deserialize_with = "bool01")]
    pub restricted: bool,
}

/// An HA rule (`GET /cluster/ha/rules/{rule}`, PVE 9).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct HaRule {
    /// The rule id.
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The resources the rule applies to, `vm:100,vm:101`; see [`HaRule::resources`].
    #[serde(default, rename = "resources", deserialize_with = "opt_string")]
    pub resources_raw: Option<String>,
    /// `node[:priority],…` (node-affinity rules).
    #[serde(default, deserialize_with = "opt_string")]
    pub nodes: Option<String>,
    /// The rule is disabled.
    #[serde(default, deserialize_with = "bool01")]
    pub disable: bool,
    /// Digest of the rules configuration (for [`PveClient::set_ha_rule_resources`]).
    #[serde(default, deserialize_with = "opt_string")]
    pub digest: Option<String>,
}

impl HaRule {
    /// The resource ids the rule lists, in order.
    pub fn resources(&self) -> Vec<String> {
        self.resources_raw
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }

    /// Whether the rule lists `sid`.
    pub fn lists(&self, sid: HaSid) -> bool {
        let want = sid.to_string();
        self.resources().contains(&want)
    }
}

fn sid_path(sid: HaSid) -> String {
    format!("/cluster/ha/resources/{}", seg(&sid.to_string()))
}

impl PveClient {
    /// `GET /cluster/ha/resources`: every HA resource (needs `Sys.Audit` on `/`).
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>, PveError> {
        self.call(Call::get(
            "/cluster/ha/resources",
            "/cluster/ha/resources".to_owned(),
        ))
        .await
    }

    /// `GET /cluster/ha/resources/{sid}`: one HA resource, `None` when the VM
    /// is not an HA resource (`no such resource 'vm:<vmid>'`). Needs
    /// `Sys.Audit` on `/`.
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn ha_resource(&self, sid: HaSid) -> Result<Option<HaResource>, PveError> {
        match self
            .call(Call::get("/cluster/ha/resources/{sid}", sid_path(sid)))
            .await
        {
            Ok(r) => Ok(Some(r)),
            Err(PveError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /cluster/ha/resources`: makes the VM an HA resource with the
    /// requested state (needs `Sys.Console` on `/`). The HA manager acts on
    /// the state later (a stopped VM with `started` is started within a
    /// manager round, docs/proxmox-semantics.md §24).
    ///
    /// # Errors
    /// `Conflict` (`AlreadyExists`) when the resource is defined already;
    /// `NotFound` for a VM that does not exist; `InvalidParameter` for a
    /// group on PVE 9 or an unknown group; transport errors.
    pub async fn create_ha_resource(&self, request: &HaResourceRequest) -> Result<(), PveError> {
        let mut f = Form::new();
        f.push("sid", request.sid.to_string())
            .push("state", request.state.as_str())
            .push_opt("group", request.group.as_ref().map(ConfigId::as_str))
            .push_opt("comment", request.comment.as_deref());
        let _: Option<serde_json::Value> = self
            .call(Call::post(
                "/cluster/ha/resources",
                "/cluster/ha/resources".to_owned(),
                f,
            ))
            .await?;
        Ok(())
    }

    /// `PUT /cluster/ha/resources/{sid}` with `state`: asks the HA manager
    /// for a new state (needs `Sys.Console` on `/`). Returns at once; the VM
    /// changes state when the manager gets to it — read `status/current`
    /// until it shows the state (docs/field-cases.md B33).
    ///
    /// # Errors
    /// `NotFound` when the VM is not an HA resource; transport errors.
    pub async fn set_ha_state(&self, sid: HaSid, state: HaState) -> Result<(), PveError> {
        let mut f = Form::new();
        f.push("state", state.as_str());
        let _: Option<serde_json::Value> = self
            .call(Call::put("/cluster/ha/resources/{sid}", sid_path(sid), f))
            .await?;
        Ok(())
    }

    /// `DELETE /cluster/ha/resources/{sid}[?purge=0|1]` (needs `Sys.Console`
    /// on `/`). The VM keeps its power state; HA stops managing it. `purge`
    /// exists from PVE 9 (`None` sends nothing, the server's default): `1`
    /// also removes the resource from the rules naming it and **deletes a
    /// rule it was the only resource of**; `0` leaves the rules as they are.
    ///
    /// # Errors
    /// `NotFound` when the VM is not an HA resource (`cannot delete service
    /// 'vm:<vmid>', not HA managed!`); `InvalidParameter` for `purge` on
    /// PVE 8; transport errors.
    pub async fn delete_ha_resource(
        &self,
        sid: HaSid,
        purge: Option<bool>,
    ) -> Result<(), PveError> {
        let mut q = Form::new();
        q.push_opt_bool("purge", purge);
        let _: Option<serde_json::Value> = self
            .call(Call::delete(
                "/cluster/ha/resources/{sid}",
                sid_path(sid),
                q,
            ))
            .await?;
        Ok(())
    }

    /// `GET /cluster/ha/groups` (PVE 8; needs `Sys.Audit` on `/`).
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn ha_groups(&self) -> Result<Vec<HaGroup>, PveError> {
        self.call(Call::get(
            "/cluster/ha/groups",
            "/cluster/ha/groups".to_owned(),
        ))
        .await
    }

    /// `GET /cluster/ha/rules/{rule}` (PVE 9; needs `Sys.Audit` on `/`),
    /// `None` when no such rule exists.
    ///
    /// # Errors
    /// `Unsupported` (HTTP 501) on PVE 8, which has no rules; transport errors.
    pub async fn ha_rule(&self, rule: &ConfigId) -> Result<Option<HaRule>, PveError> {
        match self
            .call(Call::get(
                "/cluster/ha/rules/{rule}",
                format!("/cluster/ha/rules/{}", seg(rule.as_str())),
            ))
            .await
        {
            Ok(r) => Ok(Some(r)),
            Err(PveError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PUT /cluster/ha/rules/{rule}` with `type` and `resources` (the whole
    /// list) and the `digest` read with the rule, so a concurrent change
    /// fails instead of being overwritten (needs `Sys.Console` on `/`). Every
    /// listed resource must be an HA resource.
    ///
    /// # Errors
    /// `Conflict` (`DigestMismatch`) when the rules changed since `digest`;
    /// `NotFound` for a rule that does not exist; `InvalidParameter`/500 for
    /// an empty list or a resource that is not an HA resource; transport errors.
    pub async fn set_ha_rule_resources(
        &self,
        rule: &ConfigId,
        kind: &str,
        resources: &[String],
        digest: Option<&str>,
    ) -> Result<(), PveError> {
        let mut f = Form::new();
        f.push("type", kind)
            .push("resources", resources.join(","))
            .push_opt("digest", digest);
        let _: Option<serde_json::Value> = self
            .call(Call::put(
                "/cluster/ha/rules/{rule}",
                format!("/cluster/ha/rules/{}", seg(rule.as_str())),
                f,
            ))
            .await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sids() {
        let sid: HaSid = "vm:131".parse().unwrap();
        assert_eq!(sid.vmid().get(), 131);
        assert_eq!(sid.to_string(), "vm:131");
        assert_eq!("131".parse::<HaSid>().unwrap(), sid);
        assert!("ct:131".parse::<HaSid>().is_err());
        assert!("vm:1".parse::<HaSid>().is_err());
    }

    #[test]
    fn states() {
        assert_eq!(HaState::parse("enabled").unwrap(), HaState::Started);
        for s in [
            HaState::Started,
            HaState::Stopped,
            HaState::Disabled,
            HaState::Ignored,
        ] {
            assert_eq!(HaState::parse(s.as_str()).unwrap(), s);
        }
        assert!(HaState::parse("running").is_err());
        assert_eq!(HaState::Stopped.wants_running(), Some(false));
        assert_eq!(HaState::Ignored.wants_running(), None);
    }

    #[test]
    fn decodes_resources_and_rules() {
        let r: HaResource = serde_json::from_str(
            r#"{"sid":"vm:131","type":"vm","state":"started","group":"capmox","digest":"ab12","max_restart":1}"#,
        )
        .unwrap();
        assert_eq!(r.state(), Some(HaState::Started));
        assert_eq!(r.vm_sid(), Some(HaSid::vm(VmId::new(131).unwrap())));
        assert_eq!(r.group.as_deref(), Some("capmox"));
        let r: HaResource = serde_json::from_str(r#"{"sid":"ct:200"}"#).unwrap();
        assert_eq!(r.state(), Some(HaState::Started));
        assert_eq!(r.vm_sid(), None);
        let rule: HaRule = serde_json::from_str(
            r#"{"rule":"capmox","type":"node-affinity","resources":"vm:131, vm:132","nodes":"pve-b1:2,pve-b2","digest":"d1","disable":0}"#,
        )
        .unwrap();
        assert_eq!(rule.resources(), ["vm:131", "vm:132"]);
        assert!(rule.lists("vm:132".parse().unwrap()));
        assert!(!rule.lists(HaSid::vm(VmId::new(133).unwrap())));
        assert!(!rule.disable);
    }
}
