//! Resource pools: `/pools` (list, create, flat update/delete with
//! `poolid`) and the older `/pools/{poolid}` variants.

use serde_json::{Value, json};

use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::props;
use crate::state::{ClusterState, Pool};

fn members(st: &ClusterState, pool: &Pool, ty: Option<&str>) -> Vec<Value> {
    let mut out = Vec::new();
    if ty.is_none_or(|t| t == "qemu") {
        for vmid in &pool.vms {
            if let Some(vm) = st.vms.get(vmid) {
                out.push(json!({
                    "id": format!("qemu/{vmid}"),
                    "type": "qemu",
                    "vmid": vmid,
                    "node": vm.node,
                    "name": vm.name().unwrap_or(""),
                    "status": if vm.running() { "running" } else { "stopped" },
                    "template": u8::from(vm.is_template()),
                }));
            }
        }
    }
    if ty.is_none_or(|t| t == "storage") {
        for s in &pool.storage {
            out.push(json!({"id": format!("storage/{s}"), "type": "storage", "storage": s}));
        }
    }
    out
}

/// `GET /pools[?poolid=…][&type=qemu|lxc|storage]`.
pub(crate) fn list(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let only = ctx.params.str("poolid");
    let ty = ctx.params.str("type");
    if let Some(p) = &only
        && !st.pools.contains_key(p)
    {
        return Err(ApiError::internal(format!("pool '{p}' does not exist")));
    }
    let out: Vec<Value> = st
        .pools
        .iter()
        .filter(|(id, _)| only.as_deref().is_none_or(|o| o == id.as_str()))
        .filter(|(id, _)| {
            st.auth
                .has(&ctx.who, &format!("/pool/{id}"), &["Pool.Audit"], false)
        })
        .map(|(id, p)| {
            let mut e = json!({"poolid": id});
            if let Some(c) = &p.comment {
                e["comment"] = json!(c);
            }
            if only.is_some() {
                e["members"] = json!(members(&st, p, ty.as_deref()));
            }
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /pools/{poolid}`.
pub(crate) fn get(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("poolid")?;
    let st = ctx.cluster.lock();
    let p = st
        .pools
        .get(&id)
        .ok_or_else(|| ApiError::internal(format!("pool '{id}' does not exist")))?;
    let mut e = json!({"members": members(&st, p, ctx.params.str("type").as_deref())});
    if let Some(c) = &p.comment {
        e["comment"] = json!(c);
    }
    Ok(Reply::data(e))
}

/// `POST /pools`.
pub(crate) fn create(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("poolid")?;
    let mut st = ctx.cluster.lock();
    if st.pools.contains_key(&id) {
        return Err(ApiError::internal(format!("pool '{id}' already exists")));
    }
    st.pools.insert(
        id,
        Pool {
            comment: ctx.params.str("comment"),
            ..Pool::default()
        },
    );
    Ok(Reply::null())
}

/// `PUT /pools` / `PUT /pools/{poolid}`: `comment`, `vms`, `storage`,
/// `delete=1` removes the listed members, `allow-move` moves VMs between pools.
pub(crate) fn update(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("poolid")?;
    let remove = ctx.params.bool("delete")?.unwrap_or(false);
    let allow_move = ctx.params.bool("allow-move")?.unwrap_or(false);
    let vms: Vec<u32> = ctx
        .params
        .str("vms")
        .map(|v| {
            props::split_list(&v)
                .iter()
                .filter_map(|x| x.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    let storages: Vec<String> = ctx
        .params
        .str("storage")
        .map(|v| {
            props::split_list(&v)
                .iter()
                .map(|s| s.to_string())
                .collect()
        })
        .unwrap_or_default();
    let mut st = ctx.cluster.lock();
    if !st.pools.contains_key(&id) {
        return Err(ApiError::internal(format!("pool '{id}' does not exist")));
    }
    for vmid in &vms {
        if !st.vms.contains_key(vmid) {
            return Err(ApiError::internal(format!("no such VMID '{vmid}'")));
        }
        if !remove {
            let other = st
                .pools
                .iter()
                .find(|(p, pool)| **p != id && pool.vms.contains(vmid))
                .map(|(p, _)| p.clone());
            if let Some(other) = other {
                if !allow_move {
                    return Err(ApiError::internal(format!(
                        "VM {vmid} is already a pool member"
                    )));
                }
                if let Some(o) = st.pools.get_mut(&other) {
                    o.vms.remove(vmid);
                }
            }
        }
    }
    let Some(pool) = st.pools.get_mut(&id) else {
        return Err(ApiError::internal(format!("pool '{id}' does not exist")));
    };
    if let Some(c) = ctx.params.str("comment") {
        pool.comment = Some(c);
    }
    for vmid in vms {
        if remove {
            pool.vms.remove(&vmid);
        } else {
            pool.vms.insert(vmid);
        }
    }
    for s in storages {
        if remove {
            pool.storage.remove(&s);
        } else {
            pool.storage.insert(s);
        }
    }
    st.sync_pool_acl();
    Ok(Reply::null())
}

/// `DELETE /pools?poolid=` / `DELETE /pools/{poolid}`: only empty pools.
pub(crate) fn delete(ctx: &Ctx) -> ApiResult {
    let id = ctx.params.req_str("poolid")?;
    let mut st = ctx.cluster.lock();
    let p = st
        .pools
        .get(&id)
        .ok_or_else(|| ApiError::internal(format!("pool '{id}' does not exist")))?;
    if !p.vms.is_empty() || !p.storage.is_empty() {
        return Err(ApiError::internal(format!("pool '{id}' is not empty")));
    }
    st.pools.remove(&id);
    Ok(Reply::null())
}

impl crate::SimCluster {
    /// Deletes resource pool `pool` as `DELETE /pools/{poolid}` does: only
    /// an empty pool (no VM, no storage). Returns false when there is no
    /// such pool or it is not empty.
    pub fn remove_pool(&self, pool: &str) -> bool {
        let mut st = self.inner.lock();
        if !st
            .pools
            .get(pool)
            .is_some_and(|p| p.vms.is_empty() && p.storage.is_empty())
        {
            return false;
        }
        st.pools.remove(pool);
        st.sync_pool_acl();
        true
    }
}
