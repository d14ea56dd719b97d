//! `POST /nodes/{node}/qemu/{vmid}/migrate` (docs/proxmox-semantics.md §16,
//! §24): a `qmigrate` task that moves the VM to `target` (a running VM only
//! with `online=1`); for an HA-managed VM an `hamigrate` task that only
//! queues the request for the HA manager and ends at once.

use serde_json::json;

use super::{task_spec, vm_on};
use crate::ha_manager;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::worker::{self, TaskOk};

/// `POST …/migrate` (`target`, `online`).
pub(crate) fn migrate(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let target = ctx.params.req_str("target")?;
    let online = ctx.params.bool("online")?.unwrap_or(false);
    {
        let st = ctx.cluster.lock();
        let vm = vm_on(&st, &node, vmid)?;
        if target == node {
            return Err(ApiError::param("target", "target is local node."));
        }
        if vm.running() && !online {
            return Err(ApiError::internal(
                "can't migrate running VM without --online".to_string(),
            ));
        }
        ha_manager::migrate_check(&st, vmid, &target).map_err(ApiError::internal)?;
    }
    if super::power::ha_managed(ctx, vmid) {
        let spec = task_spec(ctx, &node, "hamigrate", vmid, 0.0);
        let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
            t.log(format!(
                "Requesting HA migration for VM {vmid} to node {target}"
            ));
            ha_manager::queue_migrate(&t.cluster, vmid, target);
            Ok(TaskOk::default())
        });
        return Ok(Reply::data(json!(upid)));
    }
    let spec = task_spec(
        ctx,
        &node,
        "qmigrate",
        vmid,
        ctx.cluster.cfg.timings.migrate,
    );
    let upid = worker::spawn(&ctx.cluster, spec, move |t| async move {
        t.log(format!(
            "starting migration of VM {vmid} to node '{target}'"
        ));
        ha_manager::migrate(&t.cluster, vmid, &target).await?;
        t.log("migration finished successfully");
        Ok(TaskOk::default())
    });
    Ok(Reply::data(json!(upid)))
}
