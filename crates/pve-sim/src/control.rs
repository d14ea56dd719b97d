//! The control API under `/_sim/` on every cluster's port (outside
//! `/api2/json`, **no authentication**: the simulator listens on 127.0.0.1
//! by default). Plain JSON bodies, not the Proxmox envelope.
//!
//! | method + path | body / query | answer |
//! |---|---|---|
//! | `GET /_sim/state` | | cluster, url, token id, time scale, timings, nodes, VMs, storages with volumes, tasks, faults |
//! | `GET /_sim/calls` | | [`crate::CallLog`] |
//! | `DELETE /_sim/calls` | | resets the counts |
//! | `GET /_sim/faults` | | active faults with ids |
//! | `POST /_sim/faults` | a [`crate::Fault`] | `{"id": N}` |
//! | `DELETE /_sim/faults` | | removes all |
//! | `DELETE /_sim/faults/{id}` | | removes one |
//! | `POST /_sim/nodes/{node}/online` | `{"online": bool}` or `?online=0/1` | |
//! | `POST /_sim/vms/{vmid}/agent` | `{"state": "auto" \| "running" \| "not-running"}` | |
//! | `POST /_sim/tokens/{tokenid}/secret` | `{"secret": "…"}` | |
//! | `GET /_sim/tasks/{upid}` | | a task with log |
//! | `GET /_sim/iso?node=&volid=` | | the uploaded bytes |
//! | `POST /_sim/lower-bound` | a list of [`crate::lower_bound::FleetRequest`] | [`crate::lower_bound::LowerBound`] |

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, StatusCode, header};
use serde_json::{Value, json};

use crate::faults::{Fault, FaultId};
use crate::lower_bound::FleetRequest;
use crate::simulator::SimCluster;
use crate::state::Cluster;
use crate::state::vm::AgentState;

fn reply(status: StatusCode, v: Value) -> Response<Body> {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn ok(v: Value) -> Response<Body> {
    reply(StatusCode::OK, v)
}

fn bad(status: StatusCode, msg: impl Into<String>) -> Response<Body> {
    reply(status, json!({"error": msg.into()}))
}

fn query_param(req: &Request<Body>, key: &str) -> Option<String> {
    let q = req.uri().query()?;
    let mut map = std::collections::BTreeMap::new();
    crate::http::params::parse_urlencoded(q, &mut map);
    map.get(key).and_then(crate::http::params::value_as_string)
}

/// Handles `/_sim/…`.
pub(crate) async fn handle(cluster: &Arc<Cluster>, req: Request<Body>) -> Response<Body> {
    let sim = SimCluster {
        inner: cluster.clone(),
    };
    let method = req.method().as_str().to_string();
    let path = req.uri().path().trim_end_matches('/').to_string();
    let parts: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .skip(1)
        .map(|s| {
            percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .into_owned()
        })
        .collect();
    let online_query = query_param(&req, "online");
    let iso_query = (query_param(&req, "node"), query_param(&req, "volid"));
    let body = match axum::body::to_bytes(req.into_body(), 16 << 20).await {
        Ok(b) => b,
        Err(e) => return bad(StatusCode::BAD_REQUEST, format!("cannot read body: {e}")),
    };
    let json_body = || serde_json::from_slice::<Value>(&body).unwrap_or(Value::Null);
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match (method.as_str(), p.as_slice()) {
        ("GET", ["state"]) => ok(state(&sim)),
        ("GET", ["calls"]) => ok(json!(sim.calls())),
        ("DELETE", ["calls"]) => {
            sim.reset_calls();
            ok(json!({}))
        }
        ("GET", ["faults"]) => ok(json!(sim.faults())),
        ("POST", ["faults"]) => match serde_json::from_slice::<Fault>(&body) {
            Ok(f) => ok(json!({"id": sim.add_fault(f)})),
            Err(e) => bad(StatusCode::BAD_REQUEST, format!("invalid fault: {e}")),
        },
        ("DELETE", ["faults"]) => {
            sim.clear_faults();
            ok(json!({}))
        }
        ("DELETE", ["faults", id]) => match id.parse::<u64>() {
            Ok(n) if sim.remove_fault(FaultId(n)) => ok(json!({})),
            _ => bad(StatusCode::NOT_FOUND, format!("no fault '{id}'")),
        },
        ("POST", ["nodes", node, "online"]) => {
            let v = json_body();
            let online = v
                .get("online")
                .and_then(|o| o.as_bool().or_else(|| o.as_u64().map(|n| n != 0)))
                .or_else(|| {
                    online_query
                        .as_deref()
                        .map(|q| matches!(q, "1" | "true" | "yes"))
                });
            match online {
                Some(o) if sim.set_node_online(node, o) => ok(json!({"node": node, "online": o})),
                Some(_) => bad(StatusCode::NOT_FOUND, format!("no node '{node}'")),
                None => bad(StatusCode::BAD_REQUEST, "missing 'online'"),
            }
        }
        ("POST", ["vms", vmid, "agent"]) => {
            let state: Option<AgentState> = json_body()
                .get("state")
                .cloned()
                .and_then(|s| serde_json::from_value(s).ok());
            match (vmid.parse::<u32>(), state) {
                (Ok(id), Some(s)) if sim.set_agent_state(id, s) => ok(json!({"vmid": id})),
                (Ok(_), Some(_)) => bad(StatusCode::NOT_FOUND, format!("no VM {vmid}")),
                _ => bad(
                    StatusCode::BAD_REQUEST,
                    "need a VMID and {\"state\": \"auto|running|not-running\"}",
                ),
            }
        }
        ("POST", ["tokens", token, "secret"]) => {
            match json_body().get("secret").and_then(Value::as_str) {
                Some(s) if sim.set_token_secret(token, s) => ok(json!({})),
                Some(_) => bad(StatusCode::NOT_FOUND, format!("no token '{token}'")),
                None => bad(StatusCode::BAD_REQUEST, "missing 'secret'"),
            }
        }
        ("GET", ["tasks", upid]) => match sim.task(upid) {
            Some(t) => ok(json!(t)),
            None => bad(StatusCode::NOT_FOUND, "no such task"),
        },
        ("GET", ["iso"]) => match iso_query {
            (Some(node), Some(volid)) => match sim.iso_bytes(&node, &volid) {
                Some(bytes) => {
                    let mut r = Response::new(Body::from(bytes));
                    r.headers_mut().insert(
                        header::CONTENT_TYPE,
                        HeaderValue::from_static("application/octet-stream"),
                    );
                    r
                }
                None => bad(
                    StatusCode::NOT_FOUND,
                    format!("no file '{volid}' on node '{node}'"),
                ),
            },
            _ => bad(StatusCode::BAD_REQUEST, "need ?node=&volid="),
        },
        ("POST", ["lower-bound"]) => match serde_json::from_slice::<Vec<FleetRequest>>(&body) {
            Ok(reqs) => match sim.lower_bound(&reqs) {
                Ok(lb) => ok(json!(lb)),
                Err(e) => bad(StatusCode::BAD_REQUEST, e.to_string()),
            },
            Err(e) => bad(
                StatusCode::BAD_REQUEST,
                format!("invalid fleet request: {e}"),
            ),
        },
        _ => bad(
            StatusCode::NOT_FOUND,
            format!("no control endpoint '{method} {path}'"),
        ),
    }
}

fn state(sim: &SimCluster) -> Value {
    let cfg = sim.config();
    let storages: Vec<Value> = cfg
        .storages
        .iter()
        .flat_map(|s| {
            let nodes: Vec<Option<String>> = if s.shared {
                vec![None]
            } else {
                cfg.nodes.iter().map(|n| Some(n.name.clone())).collect()
            };
            nodes.into_iter().map(move |n| (s.name.clone(), n))
        })
        .map(|(s, n)| {
            let view = n.clone().unwrap_or_else(|| {
                cfg.nodes
                    .first()
                    .map(|x| x.name.clone())
                    .unwrap_or_default()
            });
            json!({"storage": s, "node": n, "volumes": sim.storage_content(&view, &s)})
        })
        .collect();
    json!({
        "cluster": sim.name(),
        "url": sim.url(),
        "token_id": sim.token_id(),
        "time_scale": sim.inner.clock.real(1.0).as_secs_f64(),
        "timings": cfg.timings,
        "qemu_server_version": cfg.qemu_server_version,
        "nodes": sim.nodes(),
        "vms": sim.vms(),
        "storages": storages,
        "tasks": sim.tasks(),
        "faults": sim.faults(),
        "calls": sim.calls(),
    })
}
