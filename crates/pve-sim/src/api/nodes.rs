//! `/nodes`, `/nodes/{node}/status`, `/nodes/{node}/certificates/info`,
//! `/nodes/{node}/network`.

use serde_json::{Value, json};

use crate::http::Ctx;
use crate::http::envelope::{ApiResult, Reply};
use crate::state::{ClusterState, NodeState};

fn mem_used(st: &ClusterState, node: &str) -> u64 {
    st.vms
        .values()
        .filter(|v| v.node == node && v.running())
        .map(|v| v.memory_mib() << 20)
        .sum::<u64>()
        + (2 << 30)
}

fn uptime(ctx: &Ctx, n: &NodeState) -> u64 {
    ctx.cluster.clock.simulated_since(n.booted) + 86_400
}

/// `GET /nodes`.
pub(crate) fn list(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let fp = &ctx.cluster.certs.fingerprint;
    let out: Vec<Value> = st
        .nodes
        .values()
        .map(|n| {
            let mut e = json!({
                "node": n.cfg.name,
                "id": format!("node/{}", n.cfg.name),
                "type": "node",
                "status": if n.online { "online" } else { "offline" },
                "level": "",
                "ssl_fingerprint": fp,
            });
            if n.online {
                e["maxcpu"] = json!(n.cfg.cores);
                e["cpu"] = json!(0.01);
                e["maxmem"] = json!(n.cfg.memory_gib << 30);
                e["mem"] = json!(mem_used(&st, &n.cfg.name));
                e["maxdisk"] = json!(100u64 << 30);
                e["disk"] = json!(8u64 << 30);
                e["uptime"] = json!(uptime(ctx, n));
            }
            e
        })
        .collect();
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /nodes/{node}/status`.
pub(crate) fn status(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let st = ctx.cluster.lock();
    let Some(n) = st.nodes.get(&node) else {
        return Ok(Reply::null());
    };
    let total = n.cfg.memory_gib << 30;
    let used = mem_used(&st, &node);
    let v = &ctx.cluster.cfg.pve_version;
    Ok(Reply::data(json!({
        "uptime": uptime(ctx, n),
        "cpu": 0.01,
        "wait": 0.0,
        "loadavg": ["0.10", "0.08", "0.05"],
        "cpuinfo": {"cpus": n.cfg.cores, "cores": n.cfg.cores / 2, "sockets": 2, "model": "pve-sim virtual CPU", "mhz": "2400.000", "hvm": "1"},
        "memory": {"total": total, "used": used, "free": total.saturating_sub(used)},
        "swap": {"total": 0, "used": 0, "free": 0},
        "rootfs": {"total": 100u64 << 30, "used": 8u64 << 30, "avail": 92u64 << 30, "free": 92u64 << 30},
        "ksm": {"shared": 0},
        "kversion": "Linux 6.14.8-2-pve #1 SMP PREEMPT_DYNAMIC",
        "pveversion": format!("pve-manager/{v}/5e1a7c9d"),
        "current-kernel": {"sysname": "Linux", "release": "6.14.8-2-pve", "machine": n.cfg.arch},
        "boot-info": {"mode": "efi", "secureboot": 0},
    })))
}

/// `GET /nodes/{node}/certificates/info`: the cluster CA and the API
/// certificate with SHA-256 fingerprints (`AA:BB:…`).
pub(crate) fn certificates(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let c = &ctx.cluster.certs;
    Ok(Reply::data(json!([
        {
            "filename": "pve-root-ca.pem",
            "fingerprint": c.ca_fingerprint,
            "pem": c.ca_pem,
            "subject": format!("/CN=Proxmox Virtual Environment/OU={}/O=PVE Cluster Manager CA", ctx.cluster.cfg.name),
            "issuer": format!("/CN=Proxmox Virtual Environment/OU={}/O=PVE Cluster Manager CA", ctx.cluster.cfg.name),
            "public-key-type": "id-ecPublicKey",
        },
        {
            "filename": "pve-ssl.pem",
            "fingerprint": c.fingerprint,
            "pem": c.leaf_pem,
            "subject": format!("/OU=PVE Cluster Node/O=Proxmox Virtual Environment/CN={node}"),
            "issuer": format!("/CN=Proxmox Virtual Environment/OU={}/O=PVE Cluster Manager CA", ctx.cluster.cfg.name),
            "san": ["127.0.0.1", "::1", "localhost", node],
            "public-key-type": "id-ecPublicKey",
        }
    ])))
}

/// `GET /nodes/{node}/network[?type=bridge|any_bridge|eth|…]`.
pub(crate) fn network(ctx: &Ctx) -> ApiResult {
    let filter = ctx.params.str("type");
    let mut out = vec![json!({
        "iface": "eno1", "type": "eth", "active": 1, "autostart": 1, "method": "manual", "families": ["inet"], "priority": 1
    })];
    for (i, b) in ctx.cluster.cfg.bridges.iter().enumerate() {
        let mut e = json!({
            "iface": b.name,
            "type": "bridge",
            "active": 1,
            "autostart": 1,
            "bridge_ports": if i == 0 { "eno1" } else { "" },
            "bridge_stp": "off",
            "bridge_fd": "0",
            "method": "manual",
            "families": ["inet"],
            "priority": i + 2,
        });
        if let Some(d) = &b.dhcp {
            e["method"] = json!("static");
            e["cidr"] = json!(format!("{}/{}", d.gateway.unwrap_or(d.start), d.prefix));
        }
        out.push(e);
    }
    if let Some(f) = filter {
        out.retain(|e| {
            let t = e["type"].as_str().unwrap_or("");
            match f.as_str() {
                "any_bridge" => t == "bridge" || t == "OVSBridge",
                other => t == other,
            }
        });
    }
    Ok(Reply::data(Value::Array(out)))
}
