//! Proxmox's own cloud-init: `GET …/cloudinit` (current vs pending values),
//! `PUT …/cloudinit` (regenerate), `GET …/cloudinit/dump?type=user|network|meta`
//! (the generated NoCloud documents, docs/proxmox-semantics.md §13). The values used for
//! the image are captured at VM start and on regeneration.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::{vm_missing, vm_on};
use crate::http::Ctx;
use crate::http::envelope::{ApiError, ApiResult, Reply};
use crate::locks::LockMode;
use crate::props;
use crate::state::vm::{Vm, is_cloudinit_key};

fn ci_values(vm: &Vm) -> BTreeMap<String, String> {
    vm.conf
        .iter()
        .filter(|(k, _)| is_cloudinit_key(k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// `GET /nodes/{node}/qemu/{vmid}/cloudinit`.
pub(crate) fn get(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let now = ci_values(vm);
    let used = &vm.cloudinit_applied;
    let mask = |k: &str, v: &str| {
        if k == "cipassword" {
            "**********".to_string()
        } else {
            v.to_string()
        }
    };
    let mut out = Vec::new();
    for (k, v) in &now {
        let mut e = json!({"key": k});
        match used.get(k) {
            Some(u) if u != v => {
                e["value"] = json!(mask(k, u));
                e["pending"] = json!(mask(k, v));
            }
            Some(_) => e["value"] = json!(mask(k, v)),
            None if used.is_empty() => e["value"] = json!(mask(k, v)),
            None => e["pending"] = json!(mask(k, v)),
        }
        out.push(e);
    }
    for k in used.keys().filter(|k| !now.contains_key(*k)) {
        out.push(json!({"key": k, "delete": 1}));
    }
    Ok(Reply::data(Value::Array(out)))
}

/// `PUT /nodes/{node}/qemu/{vmid}/cloudinit`: regenerates the drive (takes
/// the flock, refuses a locked VM).
pub(crate) async fn regenerate(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let timeout = ctx
        .cluster
        .clock
        .real(ctx.cluster.cfg.timings.lock_timeout_default);
    let _g = ctx
        .cluster
        .flocks
        .acquire(&node, vmid, LockMode::Exclusive, timeout)
        .await
        .map_err(ApiError::internal)?;
    let mut st = ctx.cluster.lock();
    let vm = st
        .vms
        .get_mut(&vmid)
        .filter(|v| v.node == node)
        .ok_or_else(|| ApiError::internal(vm_missing(&node, vmid)))?;
    vm.check_lock().map_err(ApiError::internal)?;
    vm.cloudinit_applied = ci_values(vm);
    Ok(Reply::null())
}

fn prefix_to_mask(prefix: u8) -> String {
    let bits: u32 = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix.min(32)))
    };
    std::net::Ipv4Addr::from(bits).to_string()
}

fn user_data(vm: &Vm) -> String {
    let conf = vm.effective_conf();
    let name = vm.name().unwrap_or("vm").to_string();
    let mut s = String::from("#cloud-config\n");
    let fqdn = match conf.get("searchdomain") {
        Some(d) if !name.contains('.') => format!("{name}.{d}"),
        _ => name.clone(),
    };
    s.push_str(&format!(
        "hostname: {}\nmanage_etc_hosts: true\nfqdn: {fqdn}\n",
        name.split('.').next().unwrap_or(&name)
    ));
    if let Some(u) = conf.get("ciuser") {
        s.push_str(&format!("user: {u}\n"));
    }
    if conf.contains_key("cipassword") {
        s.push_str("password: **********\n");
    }
    if let Some(keys) = conf.get("sshkeys") {
        let decoded = percent_encoding::percent_decode_str(keys)
            .decode_utf8_lossy()
            .into_owned();
        s.push_str("ssh_authorized_keys:\n");
        for k in decoded.lines().filter(|l| !l.trim().is_empty()) {
            s.push_str(&format!("  - {k}\n"));
        }
    }
    s.push_str("chpasswd:\n  expire: False\nusers:\n  - default\n");
    let upgrade = conf.get("ciupgrade").is_none_or(|v| v == "1");
    s.push_str(&format!("package_upgrade: {upgrade}\n"));
    s
}

fn network_data(vm: &Vm) -> String {
    let conf = vm.effective_conf();
    let mut s = String::from("version: 1\nconfig:\n");
    for nic in crate::guest::nics(&conf) {
        s.push_str(&format!(
            "    - type: physical\n      name: eth{}\n      mac_address: '{}'\n      subnets:\n",
            nic.index,
            nic.mac.to_ascii_lowercase()
        ));
        let cfg = conf
            .get(&format!("ipconfig{}", nic.index))
            .and_then(|v| props::parse_ipconfig(v).ok())
            .unwrap_or_default();
        match cfg.get("ip").map(String::as_str) {
            Some("dhcp") | None if !cfg.contains_key("ip6") || cfg.contains_key("ip") => {
                s.push_str("      - type: dhcp4\n");
            }
            Some("manual") | None => {}
            Some(cidr) => {
                let (addr, prefix) = cidr.split_once('/').unwrap_or((cidr, "24"));
                s.push_str(&format!(
                    "      - type: static\n        address: '{addr}'\n        netmask: '{}'\n",
                    prefix_to_mask(prefix.parse().unwrap_or(24))
                ));
                if let Some(gw) = cfg.get("gw") {
                    s.push_str(&format!("        gateway: '{gw}'\n"));
                }
            }
        }
        match cfg.get("ip6").map(String::as_str) {
            Some("dhcp") => s.push_str("      - type: dhcp6\n"),
            Some("auto") => s.push_str("      - type: ipv6_slaac\n"),
            Some("manual") | None => {}
            Some(cidr) => {
                s.push_str(&format!(
                    "      - type: static6\n        address: '{cidr}'\n"
                ));
                if let Some(gw) = cfg.get("gw6") {
                    s.push_str(&format!("        gateway: '{gw}'\n"));
                }
            }
        }
    }
    let ns = conf.get("nameserver");
    let sd = conf.get("searchdomain");
    if ns.is_some() || sd.is_some() {
        s.push_str("    - type: nameserver\n");
        if let Some(ns) = ns {
            s.push_str("      address:\n");
            for a in props::split_list(ns) {
                s.push_str(&format!("      - '{a}'\n"));
            }
        }
        if let Some(sd) = sd {
            s.push_str("      search:\n");
            for d in props::split_list(sd) {
                s.push_str(&format!("      - '{d}'\n"));
            }
        }
    }
    s
}

/// `GET …/cloudinit/dump?type=user|network|meta`.
pub(crate) fn dump(ctx: &Ctx) -> ApiResult {
    let node = ctx.node();
    let vmid = ctx.vmid()?;
    let ty = ctx.params.req_str("type")?;
    let st = ctx.cluster.lock();
    let vm = vm_on(&st, &node, vmid)?;
    let text = match ty.as_str() {
        "user" => user_data(vm),
        "network" => network_data(vm),
        _ => {
            let both = format!("{}{}", user_data(vm), network_data(vm));
            let d = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, both.as_bytes());
            let id: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
            format!("instance-id: {id}\n")
        }
    };
    Ok(Reply::data(json!(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks() {
        assert_eq!(prefix_to_mask(24), "255.255.255.0");
        assert_eq!(prefix_to_mask(0), "0.0.0.0");
        assert_eq!(prefix_to_mask(32), "255.255.255.255");
    }

    #[test]
    fn network_dump() {
        let vm = Vm::new(
            100,
            "n",
            BTreeMap::from([
                ("name".to_string(), "w1".to_string()),
                (
                    "net0".to_string(),
                    "virtio=BC:24:11:00:00:01,bridge=vmbr0".to_string(),
                ),
                (
                    "ipconfig0".to_string(),
                    "ip=10.0.0.5/24,gw=10.0.0.1".to_string(),
                ),
                ("nameserver".to_string(), "10.0.0.1".to_string()),
            ]),
        );
        let n = network_data(&vm);
        assert!(n.contains("mac_address: 'bc:24:11:00:00:01'"), "{n}");
        assert!(
            n.contains(
                "address: '10.0.0.5'\n        netmask: '255.255.255.0'\n        gateway: '10.0.0.1'"
            ),
            "{n}"
        );
        assert!(n.contains("- '10.0.0.1'"), "{n}");
        assert!(user_data(&vm).starts_with("#cloud-config\nhostname: w1\n"));
    }
}
