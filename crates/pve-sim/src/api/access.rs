//! `POST /access/ticket` (login and renewal) and `GET /access/permissions`.

use std::collections::BTreeMap;
use std::time::Instant;

use rand::RngExt;
use serde_json::{Value, json};

use crate::auth::Principal;
use crate::clock::epoch_now;
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};

fn random_token(st: &mut crate::state::ClusterState, len: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    (0..len)
        .map(|_| ALPHABET[st.rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

/// `POST /access/ticket`: `username` (`user@realm`, or `user` plus `realm`)
/// and `password` (or a valid ticket to renew it). Failures are 401
/// `authentication failure`, delayed like every 401.
pub(crate) async fn ticket(ctx: &Ctx) -> ApiResult {
    let mut username = ctx.params.req_str("username")?;
    let password = ctx.params.req_str("password")?;
    if !username.contains('@')
        && let Some(realm) = ctx.params.str("realm")
    {
        username = format!("{username}@{realm}");
    }
    let ok = ctx.cluster.lock().auth.login(&username, &password);
    if !ok {
        ctx.cluster
            .clock
            .sleep(ctx.cluster.cfg.timings.auth_failure_delay)
            .await;
        return Err(ApiError::unauthorized("authentication failure"));
    }
    let now = epoch_now();
    let (ticket, csrf) = {
        let mut st = ctx.cluster.lock();
        let ticket = format!("PVE:{username}:{now:08X}::{}", random_token(&mut st, 86));
        let csrf = format!("{now:08X}:{}", random_token(&mut st, 43));
        let expires = Instant::now()
            + ctx
                .cluster
                .clock
                .real(ctx.cluster.cfg.timings.ticket_lifetime);
        st.auth
            .add_ticket(ticket.clone(), &username, csrf.clone(), expires);
        (ticket, csrf)
    };
    let who = Principal {
        userid: username.clone(),
        token: None,
    };
    let cap = capabilities(ctx, &who);
    Ok(Reply::data(json!({
        "username": username,
        "ticket": ticket,
        "CSRFPreventionToken": csrf,
        "clustername": ctx.cluster.cfg.name,
        "cap": cap,
    })))
}

fn capabilities(ctx: &Ctx, who: &Principal) -> Value {
    let st = ctx.cluster.lock();
    let mut cap = serde_json::Map::new();
    for (area, path, prefix) in [
        ("vms", "/vms", "VM."),
        ("storage", "/storage", "Datastore."),
        ("nodes", "/nodes", "Sys."),
        ("sdn", "/sdn", "SDN."),
        ("access", "/access", "User."),
        ("dc", "/", "Sys."),
    ] {
        let privs: serde_json::Map<String, Value> = st
            .auth
            .privileges(who, path)
            .into_iter()
            .filter(|p| p.starts_with(prefix) || area == "vms" && p.starts_with("Pool."))
            .map(|p| (p, json!(1)))
            .collect();
        cap.insert(area.to_string(), Value::Object(privs));
    }
    Value::Object(cap)
}

/// `GET /access/permissions[?path=…][&userid=…]`: `{path: {priv: 1}}` for the
/// caller's ACL paths, or just `path`.
pub(crate) fn permissions(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let mut who = ctx.who.clone();
    if let Some(userid) = ctx.params.str("userid") {
        let (user, token) = match userid.split_once('!') {
            Some((u, t)) => (u.to_string(), Some(t.to_string())),
            None => (userid.clone(), None),
        };
        let own = user == ctx.who.userid && (ctx.who.token.is_none() || token == ctx.who.token);
        if !own && !st.auth.has(&ctx.who, "/access", &["Sys.Audit"], false) {
            return Err(ApiError::forbidden("/access, Sys.Audit"));
        }
        who = Principal {
            userid: user,
            token,
        };
    }
    let paths = match ctx.params.str("path") {
        Some(p) => std::iter::once(p).collect(),
        None => {
            let mut p = st.auth.acl_paths(&who);
            p.extend(["/vms", "/storage", "/nodes", "/sdn", "/pool"].map(String::from));
            p
        }
    };
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    for p in paths {
        let privs: serde_json::Map<String, Value> = st
            .auth
            .privileges(&who, &p)
            .into_iter()
            .map(|x| (x, json!(1)))
            .collect();
        out.insert(p, Value::Object(privs));
    }
    Ok(Reply::data(json!(out)))
}
