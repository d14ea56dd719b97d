//! Whether another machine of this controller in the same layer-2 domain
//! (Proxmox cluster, bridge, VLAN) holds one of our claimed addresses
//! (docs/field-cases.md B16: overlapping pools of different IPAM providers
//! can hand out one address twice). Read before the network config is
//! written, from the watched machines; no Proxmox call.

use std::sync::Arc;

use kube::ResourceExt;

use crate::api::ProxmoxMachine;
use crate::machine::claims::{self, L2Address};
use crate::machine::context::Run;
use crate::machine::decide::{ClaimsFact, Facts, Observed, VmFact};
use crate::machine::vm::vmconfig;

/// Looks for another machine holding one of our claimed addresses.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    Observed::Duplicates(find(run, facts).await)
}

async fn find(run: &Run<'_>, facts: &Facts) -> Option<String> {
    let bound = match &facts.claims {
        Some(ClaimsFact::Bound(b)) if !b.is_empty() => b.clone(),
        _ => return None,
    };
    let desired = facts.desired.as_ref().ok()?;
    let Some(VmFact::Ours(view)) = &facts.vm else {
        return None;
    };
    let config = view.config.as_ref()?;
    let inst = run.instance().ok()?;
    let l2 = |net: &str| -> Option<(String, Option<u16>)> {
        let index: u8 = net.trim_start_matches("net").parse().ok()?;
        let want = desired.nics.iter().find(|n| n.index == index)?;
        let dev = vmconfig::nic_device(want, config.nets.get(&index), &facts.marker).ok()?;
        Some((dev.bridge?, dev.tag))
    };
    let ours: Vec<L2Address> = bound
        .iter()
        .filter_map(|c| l2(&c.net).map(|(b, v)| (c.address, b, v)))
        .collect();
    let others: Vec<(Arc<ProxmoxMachine>, Vec<L2Address>)> = run
        .ctx
        .stores
        .machines
        .state()
        .into_iter()
        .filter(|m| m.metadata.uid.as_deref() != Some(run.me.uid.as_str()))
        .map(|m| latest_known(run, m))
        .filter_map(|m| {
            let addrs = held(&m);
            (!addrs.is_empty()).then_some((m, addrs))
        })
        .collect();
    let candidates: Vec<(String, Vec<L2Address>)> =
        others.iter().map(|(m, a)| (key(m), a.clone())).collect();
    for (addr, who) in claims::duplicates(&ours, &candidates) {
        let Some((m, _)) = others.iter().find(|(m, _)| key(m) == who) else {
            continue;
        };
        // Same Proxmox cluster? Only then is it the same layer-2 domain.
        let same = match (
            &m.spec.instance,
            m.labels().get(crate::capi::CLUSTER_NAME_LABEL),
        ) {
            (Some(i), Some(cluster)) => {
                let ns = m.namespace().unwrap_or_default();
                let capi = run
                    .ctx
                    .stores
                    .clusters
                    .get(&kube::runtime::reflector::ObjectRef::new(cluster).within(&ns));
                match capi.and_then(|c| run.ctx.stores.proxmox_cluster_of(&ns, &c)) {
                    Some(pc) => run
                        .ctx
                        .shared
                        .clients
                        .get(&run.ctx.shared.kube, &pc, i)
                        .await
                        .is_ok_and(|o| o.identity == inst.identity),
                    None => false,
                }
            }
            _ => false,
        };
        if same {
            let (bridge, vlan) = ours
                .iter()
                .find(|(a, _, _)| *a == addr)
                .map(|(_, b, v)| (b.clone(), *v))
                .unwrap_or_default();
            let vlan = vlan.map_or_else(|| "no VLAN".to_string(), |v| format!("VLAN {v}"));
            return Some(format!(
                "address {addr} claimed for {} is already held by machine {who} in the same network (the Proxmox cluster of instance {}, bridge {bridge}, {vlan}); the VM is not started until this is resolved",
                run.me.key(),
                inst.name
            ));
        }
    }
    None
}

/// The addresses a machine's status shows, with bridge and VLAN.
fn held(m: &ProxmoxMachine) -> Vec<L2Address> {
    let Some(st) = &m.status else {
        return Vec::new();
    };
    let mut addrs = Vec::new();
    for d in &st.ip_addresses {
        let Some(n) = st.network.iter().find(|n| n.name == d.net) else {
            continue;
        };
        let Some(bridge) = n.bridge.clone() else {
            continue;
        };
        for a in d
            .ipv4
            .iter()
            .chain(d.ipv6.iter())
            .filter_map(|a| a.parse().ok())
        {
            addrs.push((a, bridge.clone(), n.vlan));
        }
    }
    addrs
}

fn key(m: &ProxmoxMachine) -> String {
    format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any())
}

/// `m` as stored, unless this process wrote it since (the store lags our
/// own writes): then the object that write returned.
pub fn latest_known(run: &Run<'_>, m: Arc<ProxmoxMachine>) -> Arc<ProxmoxMachine> {
    let Some(uid) = m.metadata.uid.as_deref() else {
        return m;
    };
    run.rt()
        .newer_written(uid, m.metadata.resource_version.as_deref())
        .unwrap_or(m)
}
