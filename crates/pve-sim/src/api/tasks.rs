//! Task listing, status, log and stop (docs/proxmox-semantics.md §5).

use serde_json::{Value, json};

use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::state::tasks::Task;

/// Whether the caller owns the task (a user also owns its tokens' tasks).
fn owns(ctx: &Ctx, t: &Task) -> bool {
    let me = ctx.who.task_owner();
    t.owner == me
        || (ctx.who.token.is_none() && t.owner.split('!').next() == Some(ctx.who.userid.as_str()))
}

fn find<'a>(
    ctx: &Ctx,
    st: &'a crate::state::ClusterState,
    node: &str,
) -> Result<&'a Task, ApiError> {
    let upid = ctx.params.req_str("upid")?;
    if !upid.starts_with("UPID:") || upid.split(':').count() < 9 {
        return Err(ApiError::param(
            "upid",
            format!("unable to parse worker upid '{upid}'"),
        ));
    }
    st.tasks
        .get(&upid)
        .filter(|t| t.node == node)
        .ok_or_else(|| ApiError::param("upid", "no such task"))
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
pub(crate) fn status(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let st = ctx.cluster.lock();
    let t = find(ctx, &st, &node)?;
    if !owns(ctx, t) {
        st.auth
            .check(&ctx.who, &format!("/nodes/{node}"), &["Sys.Audit"], false)?;
    }
    Ok(Reply::data(t.status_json()))
}

/// `GET /nodes/{node}/tasks/{upid}/log[?start=&limit=]`: `[{n, t}]` plus `total`.
pub(crate) fn log(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let start = ctx.params.int("start")?.unwrap_or(0).max(0) as usize;
    let limit = ctx.params.int("limit")?.unwrap_or(50).max(0) as usize;
    let st = ctx.cluster.lock();
    let t = find(ctx, &st, &node)?;
    if !owns(ctx, t) {
        st.auth
            .check(&ctx.who, &format!("/nodes/{node}"), &["Sys.Audit"], false)?;
    }
    let lines: Vec<Value> = t
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(limit)
        .map(|(i, l)| json!({"n": i + 1, "t": l}))
        .collect();
    Ok(Reply {
        data: Value::Array(lines),
        total: Some(t.log.len() as u64),
    })
}

/// `DELETE /nodes/{node}/tasks/{upid}`: interrupts a running task.
pub(crate) fn stop(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let st = ctx.cluster.lock();
    let t = find(ctx, &st, &node)?;
    if !owns(ctx, t) {
        st.auth
            .check(&ctx.who, &format!("/nodes/{node}"), &["Sys.Modify"], false)?;
    }
    if t.is_running() {
        t.cancel.notify_one();
    }
    Ok(Reply::null())
}

fn visible(ctx: &Ctx, st: &crate::state::ClusterState, t: &Task) -> bool {
    owns(ctx, t)
        || st.auth.has(
            &ctx.who,
            &format!("/nodes/{}", t.node),
            &["Sys.Audit"],
            false,
        )
}

/// `GET /nodes/{node}/tasks` with `vmid`, `typefilter`, `userfilter`,
/// `source` (`archive` default, `active`, `all`), `errors`, `since` and
/// `until` (Unix epoch seconds, compared with the start time, as
/// `PVE/API2/Tasks.pm` does), `start`, `limit`. Running tasks come first.
pub(crate) fn node_tasks(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.params.u32("vmid")?;
    let typefilter = ctx.params.str("typefilter");
    let userfilter = ctx.params.str("userfilter");
    let source = ctx.params.str("source").unwrap_or_else(|| "archive".into());
    let errors_only = ctx.params.bool("errors")?.unwrap_or(false);
    let start = ctx.params.int("start")?.unwrap_or(0).max(0) as usize;
    let limit = ctx.params.int("limit")?.unwrap_or(50).max(0) as usize;
    let since = ctx.params.int("since")?;
    let until = ctx.params.int("until")?;
    let st = ctx.cluster.lock();
    let (running, ended): (Vec<&Task>, Vec<&Task>) = st
        .tasks
        .iter_newest()
        .filter(|t| t.node == node && visible(ctx, &st, t))
        .filter(|t| since.is_none_or(|s| t.starttime as i64 >= s))
        .filter(|t| until.is_none_or(|u| t.starttime as i64 <= u))
        .partition(|t| t.is_running());
    let matching: Vec<Value> = running
        .into_iter()
        .chain(ended)
        .filter(|t| vmid.is_none_or(|v| t.id == v.to_string()))
        .filter(|t| typefilter.as_deref().is_none_or(|f| t.kind == f))
        .filter(|t| userfilter.as_deref().is_none_or(|f| t.owner.contains(f)))
        .filter(|t| match source.as_str() {
            "active" => t.is_running(),
            "all" => true,
            _ => !t.is_running(),
        })
        .filter(|t| {
            !errors_only
                || matches!(&t.status, crate::state::tasks::TaskStatus::Stopped { exitstatus, .. }
                    if exitstatus != "OK" && !exitstatus.starts_with("WARNINGS"))
        })
        .map(Task::list_json)
        .collect();
    let total = matching.len() as u64;
    let page: Vec<Value> = matching.into_iter().skip(start).take(limit).collect();
    Ok(Reply {
        data: Value::Array(page),
        total: Some(total),
    })
}

/// `GET /cluster/tasks`: the most recent tasks of all nodes.
pub(crate) fn cluster_tasks(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let out: Vec<Value> = st
        .tasks
        .iter_newest()
        .filter(|t| visible(ctx, &st, t))
        .take(500)
        .map(Task::list_json)
        .collect();
    Ok(Reply::data(Value::Array(out)))
}
