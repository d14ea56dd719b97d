//! `/cluster/ha/*` (docs/proxmox-semantics.md §24): HA resources, groups
//! (PVE 8), node-affinity rules (PVE 9), migrate and relocate requests.
//! Texts as pve-ha-manager words them. What the manager then does is
//! [`crate::ha_manager`].

use serde_json::{Value, json};

use crate::ha_manager::{self, major};
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::state::{ClusterState, HaResource};

fn parse_sid(sid: &str) -> Result<u32, ApiError> {
    let id = sid.strip_prefix("vm:").unwrap_or(sid);
    id.parse::<u32>()
        .ok()
        .filter(|v| *v >= 100)
        .ok_or_else(|| ApiError::param("sid", format!("unable to parse service id '{sid}'")))
}

fn ha_json(st: &ClusterState, vmid: u32, h: &HaResource, pve9: bool) -> Value {
    let mut v = json!({
        "sid": format!("vm:{vmid}"),
        "type": "vm",
        "state": h.state,
        "max_restart": h.max_restart,
        "max_relocate": h.max_relocate,
        "digest": st.ha_digest(),
    });
    if let Some(c) = &h.comment {
        v["comment"] = json!(c);
    }
    // PVE 9 leaves the group out once groups are migrated to rules.
    if let Some(g) = h.group.as_ref().filter(|_| !pve9) {
        v["group"] = json!(g);
        if !st.ha_groups.contains_key(g) {
            v["errors"] = json!({"group": format!("group '{g}' does not exist")});
        }
    }
    v
}

/// `GET /cluster/ha/resources[?type=vm]`.
pub(crate) fn list(ctx: &Ctx) -> ApiResult {
    let pve9 = major(&ctx.cluster) >= 9;
    let st = ctx.cluster.lock();
    if ctx.params.str("type").is_some_and(|t| t != "vm") {
        return Ok(Reply::data(json!([])));
    }
    Ok(Reply::data(Value::Array(
        st.ha
            .iter()
            .map(|(id, h)| ha_json(&st, *id, h, pve9))
            .collect(),
    )))
}

/// `GET /cluster/ha/resources/{sid}`.
pub(crate) fn get(ctx: &Ctx) -> ApiResult {
    let vmid = parse_sid(&ctx.params.req_str("sid")?)?;
    let pve9 = major(&ctx.cluster) >= 9;
    let st = ctx.cluster.lock();
    let h = st
        .ha
        .get(&vmid)
        .ok_or_else(|| ApiError::internal(format!("no such resource 'vm:{vmid}'")))?;
    Ok(Reply::data(ha_json(&st, vmid, h, pve9)))
}

const MIGRATED: &str = "invalid parameter 'group': ha groups have been migrated to rules";

/// `POST /cluster/ha/resources`: PVE 9 refuses a `group`; PVE 8 takes any
/// group name (a missing group shows as an error in the listing). The
/// manager then applies the state and moves the VM to its preferred node.
pub(crate) fn create(ctx: &Ctx) -> ApiResult {
    let vmid = parse_sid(&ctx.params.req_str("sid")?)?;
    let state = ctx.params.str("state").unwrap_or_else(|| "started".into());
    let group = ctx.params.str("group");
    if group.is_some() && major(&ctx.cluster) >= 9 {
        return Err(ApiError::internal(MIGRATED));
    }
    {
        let mut st = ctx.cluster.lock();
        if !st.vms.contains_key(&vmid) {
            return Err(ApiError::internal(format!("unable to find VM '{vmid}'")));
        }
        if st.ha.contains_key(&vmid) {
            return Err(ApiError::internal(format!(
                "resource ID 'vm:{vmid}' already defined"
            )));
        }
        st.ha.insert(
            vmid,
            HaResource {
                state,
                comment: ctx.params.str("comment"),
                group,
                max_restart: ctx.params.u32("max_restart")?.unwrap_or(1),
                max_relocate: ctx.params.u32("max_relocate")?.unwrap_or(1),
            },
        );
        st.ha_serial += 1;
    }
    ha_manager::request_state(&ctx.cluster, vmid);
    ha_manager::place(&ctx.cluster, vmid);
    Ok(Reply::null())
}

/// `PUT /cluster/ha/resources/{sid}`: a new requested state (acted on
/// later), comment or group (PVE 8: it must exist; PVE 9: refused).
pub(crate) fn update(ctx: &Ctx) -> ApiResult {
    let vmid = parse_sid(&ctx.params.req_str("sid")?)?;
    let pve9 = major(&ctx.cluster) >= 9;
    {
        let mut st = ctx.cluster.lock();
        if let Some(g) = ctx.params.str("group") {
            if pve9 {
                return Err(ApiError::internal(MIGRATED));
            }
            if !st.ha_groups.contains_key(&g) {
                return Err(ApiError::internal(format!("HA group '{g}' does not exist")));
            }
        }
        if let Some(d) = ctx.params.str("digest")
            && d != st.ha_digest()
        {
            return Err(modified());
        }
        let h = st
            .ha
            .get_mut(&vmid)
            .ok_or_else(|| ApiError::internal(format!("no such resource 'vm:{vmid}'")))?;
        if let Some(s) = ctx.params.str("state") {
            h.state = s;
        }
        if let Some(c) = ctx.params.str("comment") {
            h.comment = Some(c);
        }
        if let Some(g) = ctx.params.str("group") {
            h.group = Some(g);
        }
        st.ha_serial += 1;
    }
    ha_manager::request_state(&ctx.cluster, vmid);
    ha_manager::place(&ctx.cluster, vmid);
    Ok(Reply::null())
}

fn modified() -> ApiError {
    ApiError::internal("detected modified configuration - file changed by other user? Try again.")
}

/// `DELETE /cluster/ha/resources/{sid}[?purge=…]`: the VM keeps its state.
/// PVE 8 knows no `purge`; on PVE 9 `purge` (default 1) also removes the
/// resource from the rules listing it and deletes a rule left without
/// resources.
pub(crate) fn delete(ctx: &Ctx) -> ApiResult {
    let vmid = parse_sid(&ctx.params.req_str("sid")?)?;
    let pve9 = major(&ctx.cluster) >= 9;
    if !pve9 && ctx.params.has("purge") {
        return Err(ApiError::param(
            "purge",
            "property is not defined in schema and the schema does not allow additional properties",
        ));
    }
    let purge = pve9 && ctx.params.bool("purge")?.unwrap_or(true);
    let mut st = ctx.cluster.lock();
    if st.ha.remove(&vmid).is_none() {
        return Err(ApiError::internal(format!(
            "cannot delete service 'vm:{vmid}', not HA managed!"
        )));
    }
    if purge {
        let sid = format!("vm:{vmid}");
        for r in st.ha_rules.values_mut() {
            r.resources.retain(|x| *x != sid);
        }
        st.ha_rules.retain(|_, r| !r.resources.is_empty());
    }
    st.ha_serial += 1;
    Ok(Reply::null())
}

/// `POST /cluster/ha/resources/{sid}/migrate` and `…/relocate`: queued for
/// the manager (the call returns before anything moves).
pub(crate) fn migrate(ctx: &Ctx, relocate: bool) -> ApiResult {
    let vmid = parse_sid(&ctx.params.req_str("sid")?)?;
    let node = ctx.params.req_str("node")?;
    {
        let st = ctx.cluster.lock();
        if !st.ha.contains_key(&vmid) {
            return Err(ApiError::internal(format!(
                "service 'vm:{vmid}' not managed by HA"
            )));
        }
        if !st.nodes.contains_key(&node) {
            return Err(ApiError::param(
                "node",
                format!("no such cluster node '{node}'"),
            ));
        }
    }
    ha_manager::queue_migrate(&ctx.cluster, vmid, node.clone());
    // Relocate stops the VM and starts it on the target; the simulator
    // moves both the same way (a migration keeps a running VM running).
    let _ = relocate;
    Ok(Reply::data(json!({
        "sid": format!("vm:{vmid}"),
        "requested-node": node,
    })))
}

/// `GET /cluster/ha/groups` (PVE 9: empty, the groups were migrated to rules).
pub(crate) fn groups(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    Ok(Reply::data(Value::Array(
        st.ha_groups
            .iter()
            .map(|(g, v)| {
                json!({
                    "group": g, "type": "group", "nodes": v.nodes,
                    "restricted": u8::from(v.restricted), "digest": st.ha_digest(),
                })
            })
            .collect(),
    )))
}

/// `GET /cluster/ha/groups/{group}`.
pub(crate) fn group(ctx: &Ctx) -> ApiResult {
    let g = ctx.params.req_str("group")?;
    let st = ctx.cluster.lock();
    let v = st
        .ha_groups
        .get(&g)
        .ok_or_else(|| ApiError::internal(format!("no such ha group '{g}'")))?;
    Ok(Reply::data(json!({
        "group": g, "type": "group", "nodes": v.nodes,
        "restricted": u8::from(v.restricted), "digest": st.ha_digest(),
    })))
}

fn rule_json(st: &ClusterState, id: &str) -> Option<Value> {
    let r = st.ha_rules.get(id)?;
    let mut v = json!({
        "rule": id,
        "type": "node-affinity",
        "resources": r.resources.join(","),
        "nodes": r.nodes,
        "strict": u8::from(r.strict),
        "digest": st.ha_digest(),
    });
    if r.disable {
        v["disable"] = json!(1);
    }
    if let Some(c) = &r.comment {
        v["comment"] = json!(c);
    }
    Some(v)
}

/// `GET /cluster/ha/rules[?type=…][&resource=…]` (PVE 9).
pub(crate) fn rules(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let kind = ctx.params.str("type");
    let resource = ctx.params.str("resource");
    let out = st
        .ha_rules
        .iter()
        .filter(|_| kind.as_deref().is_none_or(|k| k == "node-affinity"))
        .filter(|(_, r)| {
            resource
                .as_deref()
                .is_none_or(|x| r.resources.iter().any(|y| y == x))
        })
        .filter_map(|(id, _)| rule_json(&st, id))
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/ha/rules/{rule}` (PVE 9).
pub(crate) fn rule(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("rule")?;
    let st = ctx.cluster.lock();
    rule_json(&st, &id)
        .map(Reply::data)
        .ok_or_else(|| ApiError::internal(format!("no such ha rule '{id}'")))
}

/// `PUT /cluster/ha/rules/{rule}` (PVE 9): `resources` must list HA
/// resources only and not be empty; a `digest` that does not match fails.
/// The manager then moves the listed resources to the rule's nodes.
pub(crate) fn update_rule(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("rule")?;
    let moved: Vec<u32> = {
        let mut st = ctx.cluster.lock();
        if !st.ha_rules.contains_key(&id) {
            return Err(ApiError::internal(format!("HA rule '{id}' does not exist")));
        }
        if let Some(d) = ctx.params.str("digest")
            && d != st.ha_digest()
        {
            return Err(modified());
        }
        let resources = ctx.params.str("resources").map(|r| {
            r.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect::<Vec<_>>()
        });
        if let Some(list) = &resources {
            if list.is_empty() {
                return Err(ApiError::internal("no resources were specified"));
            }
            let unmanaged: Vec<&str> = list
                .iter()
                .filter(|sid| parse_sid(sid).ok().is_none_or(|v| !st.ha.contains_key(&v)))
                .map(String::as_str)
                .collect();
            if !unmanaged.is_empty() {
                return Err(ApiError::internal(format!(
                    "cannot use unmanaged resource(s) {}.",
                    unmanaged.join(", ")
                )));
            }
        }
        let r = st
            .ha_rules
            .get_mut(&id)
            .ok_or_else(|| ApiError::internal(format!("HA rule '{id}' does not exist")))?;
        if let Some(list) = resources {
            r.resources = list;
        }
        if let Some(n) = ctx.params.str("nodes") {
            r.nodes = n;
        }
        if let Some(s) = ctx.params.bool("strict")? {
            r.strict = s;
        }
        if let Some(c) = ctx.params.str("comment") {
            r.comment = Some(c);
        }
        let listed = r.resources.clone();
        st.ha_serial += 1;
        listed.iter().filter_map(|s| parse_sid(s).ok()).collect()
    };
    for vmid in moved {
        ha_manager::place(&ctx.cluster, vmid);
    }
    Ok(Reply::null())
}
