//! The HA manager and migrations (docs/proxmox-semantics.md §16, §24).
//!
//! What the provider meets of Proxmox's HA stack, reproduced with its
//! delays: a request (a new requested state, a start or stop of an HA
//! resource, a migrate or relocate) is only queued; the manager acts on it
//! `timings.ha_delay` later, so the API call and its task end before the
//! VM changes (docs/field-cases.md B33). The manager also moves resources:
//! to the preferred node of their HA group (PVE 8) or node-affinity rules
//! (PVE 9), and away from a node that went offline (recovery). A move is a
//! migration: the config carries `lock: migrate` for `timings.migrate`, then
//! lives on the target node; a running VM keeps running.
//!
//! Simplifications: one manager round per request (no CRM/LRM states), no
//! fencing delay beyond `ha_delay`, no `max_restart`/`max_relocate`,
//! resource-affinity rules are stored but not applied.

use std::sync::Arc;

use crate::api::power::{mark_running, mark_stopped};
use crate::state::{Cluster, ClusterState};

/// The major version the cluster reports.
pub(crate) fn major(cluster: &Cluster) -> u32 {
    crate::auth::major_of(&cluster.cfg.pve_version)
}

/// After `ha_delay`: brings VM `vmid` to the requested state of its HA
/// resource (`started` → running, `stopped`/`disabled` → stopped) unless
/// it is locked, a template, gone, no HA resource any more, or on an
/// offline node.
pub(crate) fn request_state(cluster: &Arc<Cluster>, vmid: u32) {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        cluster.clock.sleep(cluster.cfg.timings.ha_delay).await;
        let mut st = cluster.lock();
        let Some(want_running) = st.ha.get(&vmid).and_then(|h| wants_running(&h.state)) else {
            return;
        };
        let Some(vm) = st.vms.get(&vmid) else { return };
        if vm.lock().is_some() || vm.is_template() || vm.running() == want_running {
            return;
        }
        if !st.node_online(&vm.node) {
            return;
        }
        if want_running {
            // The start qemu-server would run: without its PCI devices the
            // VM stays stopped.
            let conf = vm.conf.clone();
            if crate::pci::reserve(&mut st, &cluster.cfg.pci_mappings, vmid, &conf).is_err() {
                return;
            }
            mark_running(&cluster, &mut st, vmid);
        } else {
            mark_stopped(&cluster, &mut st, vmid);
        }
    });
}

fn wants_running(state: &str) -> Option<bool> {
    match state {
        "started" | "enabled" => Some(true),
        "stopped" | "disabled" => Some(false),
        _ => None,
    }
}

/// `node[:priority],…` → `(node, priority)`, priority 0 when absent.
fn parse_nodes(list: &str) -> Vec<(String, u32)> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|n| match n.split_once(':') {
            Some((name, p)) => (name.to_string(), p.parse().unwrap_or(0)),
            None => (n.to_string(), 0),
        })
        .collect()
}

/// The nodes an HA resource should run on, best first: the online nodes
/// of the highest priority of its group (PVE 8) or of the enabled
/// node-affinity rules listing it (PVE 9); `None` when nothing constrains it.
pub(crate) fn preferred_nodes(st: &ClusterState, vmid: u32, major: u32) -> Option<Vec<String>> {
    let h = st.ha.get(&vmid)?;
    let sid = format!("vm:{vmid}");
    let list: Vec<(String, u32)> = if major >= 9 {
        st.ha_rules
            .values()
            .filter(|r| !r.disable && r.resources.contains(&sid))
            .flat_map(|r| parse_nodes(&r.nodes))
            .collect()
    } else {
        let g = st.ha_groups.get(h.group.as_deref()?)?;
        parse_nodes(&g.nodes)
    };
    let online: Vec<(String, u32)> = list
        .into_iter()
        .filter(|(n, _)| st.node_online(n))
        .collect();
    let best = online.iter().map(|(_, p)| *p).max()?;
    let mut nodes: Vec<String> = online
        .into_iter()
        .filter(|(_, p)| *p == best)
        .map(|(n, _)| n)
        .collect();
    nodes.sort();
    nodes.dedup();
    Some(nodes)
}

/// After `ha_delay`: moves HA resource `vmid` to its preferred node when it
/// runs elsewhere (a group or rule with priorities, a new rule).
pub(crate) fn place(cluster: &Arc<Cluster>, vmid: u32) {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        cluster.clock.sleep(cluster.cfg.timings.ha_delay).await;
        let target = {
            let st = cluster.lock();
            let Some(vm) = st.vms.get(&vmid) else { return };
            match preferred_nodes(&st, vmid, major(&cluster)) {
                Some(nodes) if !nodes.is_empty() && !nodes.contains(&vm.node) => nodes[0].clone(),
                _ => return,
            }
        };
        let _ = migrate(&cluster, vmid, &target).await;
    });
}

/// After `ha_delay`: an HA migrate or relocate request of `vmid` to `target`.
pub(crate) fn queue_migrate(cluster: &Arc<Cluster>, vmid: u32, target: String) {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        cluster.clock.sleep(cluster.cfg.timings.ha_delay).await;
        let _ = migrate(&cluster, vmid, &target).await;
    });
}

/// Why VM `vmid` cannot move to `target` now: it does not exist, is
/// locked, is already there, the target is unknown or offline, or a disk
/// (or attached ISO) lies on storage that is not shared.
pub(crate) fn migrate_check(st: &ClusterState, vmid: u32, target: &str) -> Result<String, String> {
    let vm = st
        .vms
        .get(&vmid)
        .ok_or_else(|| format!("VM {vmid} does not exist"))?;
    if vm.node == target {
        return Err(format!("VM {vmid} is already on node '{target}'"));
    }
    if !st.nodes.contains_key(target) {
        return Err(format!("no such cluster node '{target}'"));
    }
    if !st.node_online(target) {
        return Err(format!("target node '{target}' is not online"));
    }
    vm.check_lock()?;
    for (key, d) in vm.drives() {
        let Some(storage) = d.storage() else { continue };
        if st.storage_cfg(storage).is_some_and(|s| !s.shared) {
            return Err(format!(
                "can't migrate local disk '{key}: {}': storage '{storage}' is not shared",
                d.file
            ));
        }
    }
    Ok(vm.node.clone())
}

/// Moves VM `vmid` to `target`: `lock: migrate` for `timings.migrate`, then
/// the config on the target node (a running VM keeps running).
///
/// # Errors
/// The reason of [`migrate_check`], or the VM changed during the move.
pub(crate) async fn migrate(cluster: &Arc<Cluster>, vmid: u32, target: &str) -> Result<(), String> {
    let lag = cluster.lag();
    {
        let mut st = cluster.lock();
        migrate_check(&st, vmid, target)?;
        if let Some(vm) = st.vms.get_mut(&vmid) {
            vm.conf.insert("lock".into(), "migrate".into());
        }
    }
    cluster.clock.sleep(cluster.cfg.timings.migrate).await;
    let mut st = cluster.lock();
    let vm = st
        .vms
        .get_mut(&vmid)
        .ok_or_else(|| format!("VM {vmid} vanished during its migration"))?;
    vm.conf.remove("lock");
    vm.node = target.to_string();
    vm.record_status(lag);
    Ok(())
}

/// A node went offline: after `ha_delay` (fencing), its HA resources are
/// recovered on the first preferred online node (or any online node), in
/// the state their resource requests; others stay where they are.
pub(crate) fn recover(cluster: &Arc<Cluster>, node: String) {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        cluster.clock.sleep(cluster.cfg.timings.ha_delay).await;
        let lag = cluster.lag();
        let major = major(&cluster);
        let mut st = cluster.lock();
        if st.node_online(&node) {
            return;
        }
        let victims: Vec<u32> = st
            .ha
            .iter()
            .filter(|(id, h)| {
                h.state != "ignored" && st.vms.get(id).is_some_and(|v| v.node == node)
            })
            .map(|(id, _)| *id)
            .collect();
        for vmid in victims {
            let target = preferred_nodes(&st, vmid, major)
                .and_then(|n| n.into_iter().next())
                .or_else(|| {
                    st.nodes
                        .values()
                        .find(|n| n.online)
                        .map(|n| n.cfg.name.clone())
                });
            let Some(target) = target else { continue };
            let start = st
                .ha
                .get(&vmid)
                .and_then(|h| wants_running(&h.state))
                .unwrap_or(false);
            if let Some(vm) = st.vms.get_mut(&vmid) {
                vm.conf.remove("lock");
                vm.node = target;
                vm.run = None;
                vm.record_status(lag);
            }
            if start {
                mark_running(&cluster, &mut st, vmid);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_lists() {
        assert_eq!(
            parse_nodes("pve-b1:2, pve-b2,pve-b3:1"),
            [
                ("pve-b1".to_string(), 2),
                ("pve-b2".to_string(), 0),
                ("pve-b3".to_string(), 1)
            ]
        );
        assert_eq!(wants_running("enabled"), Some(true));
        assert_eq!(wants_running("disabled"), Some(false));
        assert_eq!(wants_running("ignored"), None);
    }
}
