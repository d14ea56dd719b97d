//! `/version`, `/cluster/resources`, `/cluster/nextid`, `/cluster/status`,
//! `/cluster/options` (HA is [`super::ha`]).

use serde_json::{Value, json};

use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};

/// `GET /version`.
pub(crate) fn version(ctx: &Ctx) -> ApiResult {
    let v = &ctx.cluster.cfg.pve_version;
    let release: Vec<&str> = v.split('.').take(2).collect();
    Ok(Reply::data(json!({
        "version": v,
        "release": release.join("."),
        "repoid": "5e1a7c9d",
        "console": "html5",
    })))
}

/// `GET /cluster/resources[?type=vm|storage|node|sdn]` (docs/proxmox-semantics.md §9):
/// VM list, `lock` and `tags` are current; status, name, template flag and
/// counters lag by `timings.resources_lag`; VMs of offline nodes are `unknown`.
pub(crate) fn resources(ctx: &Ctx) -> ApiResult {
    let filter = ctx.params.str("type");
    let want = |t: &str| filter.as_deref().is_none_or(|f| f == t);
    let lag = ctx.cluster.lag();
    let st = ctx.cluster.lock();
    let mut out: Vec<Value> = Vec::new();
    if want("vm") {
        let may_audit = st.auth.vm_audit_filter(&ctx.who);
        for vm in st.vms.values() {
            if !may_audit(vm.vmid) {
                continue;
            }
            let online = st.node_online(&vm.node);
            let snap = if online { vm.visible_status(lag) } else { None };
            let mut e = json!({
                "id": format!("qemu/{}", vm.vmid),
                "type": "qemu",
                "vmid": vm.vmid,
                "node": vm.node,
            });
            match &snap {
                Some(s) => {
                    let uptime = s
                        .since
                        .map(|t| ctx.cluster.clock.simulated_since(t))
                        .unwrap_or(0);
                    e["status"] = json!(if s.running { "running" } else { "stopped" });
                    if let Some(n) = &s.name {
                        e["name"] = json!(n);
                    }
                    e["template"] = json!(u8::from(s.template));
                    e["maxmem"] = json!(s.maxmem);
                    e["mem"] = json!(if s.running { s.maxmem / 10 * 3 } else { 0 });
                    e["maxcpu"] = json!(s.maxcpu);
                    e["cpu"] = json!(if s.running { 0.02 } else { 0.0 });
                    e["maxdisk"] = json!(s.maxdisk);
                    e["disk"] = json!(0);
                    e["uptime"] = json!(if s.running { uptime } else { 0 });
                    for k in ["netin", "netout", "diskread", "diskwrite"] {
                        e[k] = json!(0);
                    }
                }
                None => e["status"] = json!("unknown"),
            }
            if let Some(t) = vm.conf.get("tags") {
                e["tags"] = json!(t);
            }
            if let Some(l) = vm.lock() {
                e["lock"] = json!(l);
            }
            if let Some((p, _)) = st.pools.iter().find(|(_, p)| p.vms.contains(&vm.vmid)) {
                e["pool"] = json!(p);
            }
            if let Some(h) = st.ha.get(&vm.vmid) {
                e["hastate"] = json!(h.state);
            }
            out.push(e);
        }
    }
    if want("node") {
        for n in st.nodes.values() {
            let used: u64 = st
                .vms
                .values()
                .filter(|v| v.node == n.cfg.name && v.running())
                .map(|v| v.memory_mib() << 20)
                .sum();
            let mut e = json!({
                "id": format!("node/{}", n.cfg.name),
                "type": "node",
                "node": n.cfg.name,
                "status": if n.online { "online" } else { "offline" },
                "level": "",
                "cgroup-mode": 2,
                "maxcpu": n.cfg.cores,
                "maxmem": n.cfg.memory_gib << 30,
                "maxdisk": 100u64 << 30,
            });
            if n.online {
                e["mem"] = json!(used + (2 << 30));
                e["cpu"] = json!(0.01);
                e["disk"] = json!(8u64 << 30);
                e["uptime"] = json!(ctx.cluster.clock.simulated_since(n.booted) + 86_400);
            }
            out.push(e);
        }
    }
    if want("storage") {
        for n in st.nodes.values() {
            for s in st.storages.values() {
                if !s.enabled_on(&n.cfg.name)
                    || !st.auth.has(
                        &ctx.who,
                        &format!("/storage/{}", s.cfg.name),
                        &["Datastore.Audit", "Datastore.AllocateSpace"],
                        true,
                    )
                {
                    continue;
                }
                let mut content = s.cfg.content.clone();
                content.sort();
                out.push(json!({
                    "id": format!("storage/{}/{}", n.cfg.name, s.cfg.name),
                    "type": "storage",
                    "node": n.cfg.name,
                    "storage": s.cfg.name,
                    "status": if n.online && s.active_on(&n.cfg.name) { "available" } else { "unknown" },
                    "plugintype": s.cfg.kind.as_str(),
                    "shared": u8::from(s.cfg.shared),
                    "content": content.join(","),
                    "maxdisk": s.capacity(),
                    "disk": s.used(&n.cfg.name),
                }));
            }
        }
    }
    if want("sdn") {
        for n in st.nodes.values() {
            out.push(json!({
                "id": format!("sdn/{}/localnetwork", n.cfg.name),
                "type": "sdn",
                "sdn": "localnetwork",
                "node": n.cfg.name,
                "status": if n.online { "ok" } else { "unknown" },
            }));
        }
    }
    if filter.is_none() {
        for p in st.pools.keys() {
            if st
                .auth
                .has(&ctx.who, &format!("/pool/{p}"), &["Pool.Audit"], false)
            {
                out.push(json!({"id": format!("/pool/{p}"), "type": "pool", "pool": p}));
            }
        }
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/nextid[?vmid=N]`: lowest free VMID in the datacenter range,
/// nothing reserved (docs/proxmox-semantics.md §7). Returned as a string, as Proxmox does.
pub(crate) fn nextid(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    if let Some(vmid) = ctx.params.u32("vmid")? {
        if st.vmid_taken(vmid) {
            return Err(ApiError::param("vmid", format!("VM {vmid} already exists")));
        }
        return Ok(Reply::data(json!(vmid.to_string())));
    }
    let r = ctx.cluster.cfg.next_id_range();
    match st.next_free_vmid(r.lower, r.upper) {
        Some(id) => Ok(Reply::data(json!(id.to_string()))),
        None => Err(ApiError::internal(format!(
            "unable to get any free VMID in range [{}, {}]",
            r.lower,
            r.upper - 1
        ))),
    }
}

/// `GET /cluster/status`: the cluster entry and one entry per node.
pub(crate) fn status(ctx: &Ctx) -> ApiResult {
    let st = ctx.cluster.lock();
    let mut out = vec![json!({
        "type": "cluster",
        "id": "cluster",
        "name": ctx.cluster.cfg.name,
        "nodes": st.nodes.len(),
        "quorate": u8::from(st.quorate()),
        "version": st.nodes.len() + 2,
    })];
    for (i, n) in st.nodes.values().enumerate() {
        let ip = n
            .cfg
            .ip
            .map(|ip| ip.to_string())
            .unwrap_or_else(|| format!("10.255.{}.{}", ctx.cluster.index, i + 1));
        out.push(json!({
            "type": "node",
            "id": format!("node/{}", n.cfg.name),
            "name": n.cfg.name,
            "nodeid": i + 1,
            "ip": ip,
            "online": u8::from(n.online),
            "local": u8::from(i == 0),
            "level": "",
        }));
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `GET /cluster/options` (datacenter.cfg).
/// `GET /cluster/mapping/pci`: the configured PCI resource mappings, each
/// with its `map` entries (every mapping is listed: the simulator does not
/// model `Mapping.*` privileges).
pub(crate) fn pci_mappings(ctx: &Ctx) -> ApiResult {
    let out: Vec<Value> = ctx
        .cluster
        .cfg
        .pci_mappings
        .iter()
        .map(|m| {
            let mut v = json!({"id": m.id, "map": m.map});
            if let Some(d) = &m.description {
                v["description"] = json!(d);
            }
            if m.mdev {
                v["mdev"] = json!(1);
            }
            v
        })
        .collect();
    Ok(Reply::data(json!(out)))
}

pub(crate) fn options(ctx: &Ctx) -> ApiResult {
    let cfg = &ctx.cluster.cfg;
    let mut v = json!({
        "mac_prefix": cfg.mac_prefix,
        "keyboard": "en-us",
        "console": "html5",
    });
    if let Some(r) = cfg.next_id {
        v["next-id"] = json!({"lower": r.lower, "upper": r.upper});
    }
    Ok(Reply::data(v))
}
