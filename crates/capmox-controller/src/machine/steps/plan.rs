//! Choose the node and the template (replica) for the clone, and register
//! the choice as a placement in flight.
//!
//! The template comes from the machine's own template fields or its
//! instance's ([`crate::machine::plan::template`]); the node from the
//! scheduler ([`crate::machine::plan::scheduler`]): allowed and online
//! nodes, memory, storage locality (a template on node-local storage can
//! only be cloned on its node, docs/field-cases.md B05), the storages the
//! VM needs enabled and active on the node (docs/field-cases.md B37), and
//! spread — the
//! fewest machines of this CAPI cluster, counting the placements in flight
//! ([`crate::machine::runtime::inflight`]) so concurrent scale-ups spread.
//! The choice is made under the Proxmox cluster's planning lock.

use std::collections::{BTreeMap, BTreeSet};

use kube::ResourceExt;

use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Plan, StepKind};
use crate::machine::observe::duplicates::latest_known;
use crate::machine::plan::pci::{self, PciFilter};
use crate::machine::plan::scheduler::{
    self, CLONE_TARGET_ANNOTATION, Locality, Request, StorageFilter,
};
use crate::machine::plan::storage;
use crate::machine::plan::template::{self, Resolved, TemplateError};
use crate::machine::runtime::inflight::Placement;
use crate::machine::runtime::resources::Snapshot;
use crate::machine::runtime::slots::TemplateKey;
use crate::machine::vm::{arch, vmconfig};
use crate::pve::{NodeName, PveError, VmConfig, VmId};
use crate::reasons::Reason;

/// Plans the clone.
pub async fn plan(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let fail = |run: &Run<'_>, class: &'static str, reason: Reason| {
        super::failed(run, StepKind::Plan, class, reason)
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => return fail(run, "precondition", Reason::InvalidSpec(e.to_string())),
    };
    let Some(eff) = run.world.instance.clone() else {
        return fail(
            run,
            "precondition",
            Reason::InvalidSpec(format!(
                "spec.instance {:?} is not an instance of the ProxmoxCluster",
                inst.name
            )),
        );
    };
    let lock = run.rt().inflight.planning_lock(&inst.identity);
    let _guard = lock.lock().await;
    let snap = match run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), None)
        .await
    {
        Ok(s) => s,
        Err(e) => {
            return super::pve_failed(run, StepKind::Plan, &e, unreachable(&inst.name, &e));
        }
    };
    let spec = &run.machine.spec;
    let resolved = match template::request_for(spec, &inst.name, eff.spec.template.as_ref())
        .and_then(|r| template::resolve(&r, &inst.name, &snap.template_candidates()))
    {
        Ok(r) => r,
        Err(e) => return fail(run, "template", Reason::Template(e)),
    };
    let first = resolved.all()[0].clone();
    let key = TemplateKey::new(&inst.identity, first.vmid);
    let tcfg = match run.rt().template_config(&key) {
        Some(c) => c,
        None => {
            let (Ok(n), Ok(id)) = (NodeName::new(first.node.clone()), VmId::new(first.vmid)) else {
                return fail(
                    run,
                    "template",
                    Reason::Template(TemplateError::NotFound {
                        vmid: first.vmid,
                        instance: inst.name.clone(),
                    }),
                );
            };
            match inst.api.vm_config(&n, id).await {
                Ok(c) => {
                    run.rt().cache_template(key, c.clone());
                    c
                }
                Err(e @ PveError::NotFound { .. }) => {
                    return super::pve_failed(
                        run,
                        StepKind::Plan,
                        &e,
                        Reason::Template(TemplateError::NotFound {
                            vmid: first.vmid,
                            instance: inst.name.clone(),
                        }),
                    );
                }
                Err(e) => {
                    return super::pve_failed(run, StepKind::Plan, &e, unreachable(&inst.name, &e));
                }
            }
        }
    };
    // Before the clone: a shape the VM's architecture cannot have is
    // refused, the field named. The shape is taken with this instance's
    // defaults (the instance may have been chosen in this reconcile).
    if let Ok(desired) = vmconfig::desired(
        spec,
        &facts.name,
        &facts.marker,
        vmconfig::InstanceDefaults {
            bridge: None,
            cpu: eff.spec.cpu.as_ref(),
            media: eff.spec.bootstrap_media.as_ref(),
            arch: eff.spec.arch.map(|a| a.arch()),
            pci_mappings: Some(&eff.spec.pci_mappings),
        },
    ) && let Err(e) = arch::check(&desired, &tcfg, first.vmid, &inst.name)
    {
        return fail(run, "architecture", Reason::ArchitectureUnfit(e));
    }
    if let Some(e) = pci::pcie_unfit(&spec.pci_devices, tcfg.machine.as_ref(), first.vmid) {
        return fail(run, "pci", Reason::PciDeviceUnfit(e));
    }
    let pci_needs = pci::needs(&spec.pci_devices, &eff.spec.pci_mappings);
    let pci_filter = if pci_needs.is_empty() {
        None
    } else {
        match inst.api.pci_mappings().await {
            Ok(mappings) => Some(PciFilter {
                devices: mappings
                    .iter()
                    .map(|m| (m.id.clone(), m.devices_per_node()))
                    .collect(),
                in_use: pci_in_use(run, facts, &inst.identity, &eff.spec.pci_mappings, &snap),
                needs: pci_needs.clone(),
            }),
            Err(e) => {
                return super::pve_failed(run, StepKind::Plan, &e, unreachable(&inst.name, &e));
            }
        }
    };
    let memory = spec
        .memory_mib
        .map(u64::from)
        .or(tcfg.memory_mib)
        .unwrap_or(512)
        << 20;
    let request = Request {
        memory,
        instance_nodes: eff.spec.nodes.clone(),
        machine_nodes: spec.allowed_nodes.clone(),
        target: spec.target.clone(),
        memory_adjustment: eff.scheduler_hints.memory_adjustment.unwrap_or(100),
        cluster_machines: cluster_machines(run, facts, &inst.identity, &snap),
        locality: locality(&resolved, &tcfg, spec.storage.as_deref(), &snap),
        storage: Some(StorageFilter {
            needs: storage::needs(spec, first.vmid, &tcfg),
            on_nodes: crate::machine::observe::storage::on_nodes(&snap),
        }),
        pci: pci_filter,
    };
    let loads = snap.loads();
    let listed: BTreeSet<u32> = loads
        .iter()
        .filter(|l| l.maxmem.is_some())
        .map(|l| l.vmid)
        .collect();
    let pending = run.rt().inflight.pending(&inst.identity, &listed);
    let placed = match scheduler::choose_node(&request, &snap.nodes(), &loads, &pending) {
        Ok(p) => p,
        Err(e) => return fail(run, "schedule", Reason::NoNode(e)),
    };
    let Some(source) = resolved.for_node(&placed.node).cloned() else {
        return fail(
            run,
            "template",
            Reason::Template(TemplateError::NotFound {
                vmid: first.vmid,
                instance: inst.name.clone(),
            }),
        );
    };
    let Ok(node) = NodeName::new(placed.node.clone()) else {
        return fail(
            run,
            "schedule",
            Reason::InvalidSpec(format!("node name {:?} is not valid", placed.node)),
        );
    };
    run.rt().inflight.place(
        &inst.identity,
        &run.me.uid,
        Placement {
            cluster: run.me.cluster_key(),
            node: node.clone(),
            pci: pci_needs,
        },
    );
    let plan = Plan {
        node,
        template: source,
        memory,
    };
    run.rt()
        .update_memo(&run.me.uid, |m| m.plan = Some(plan.clone()));
    Observed::Planned(plan)
}

/// Machines of this CAPI cluster per node of this Proxmox cluster: each
/// machine once, where its placement in flight says, else where
/// [`machine_node`] finds it.
fn cluster_machines(
    run: &Run<'_>,
    facts: &Facts,
    identity: &crate::clients::Identity,
    snap: &Snapshot,
) -> BTreeMap<String, u32> {
    let me = run.me.cluster_key();
    let inflight: BTreeMap<String, Placement> = run
        .rt()
        .inflight
        .placements(identity)
        .into_iter()
        .filter(|(uid, p)| p.cluster == me && *uid != run.me.uid)
        .collect();
    let mut per_node = BTreeMap::new();
    for p in inflight.values() {
        *per_node.entry(p.node.as_str().to_string()).or_insert(0u32) += 1;
    }
    let cluster = run.me.cluster.clone().unwrap_or_default();
    for m in run.ctx.stores.cluster_machines(&run.me.ns, &cluster) {
        let Some(uid) = m.metadata.uid.as_deref() else {
            continue;
        };
        if uid == run.me.uid || inflight.contains_key(uid) {
            continue;
        }
        let m = latest_known(run, m);
        if m.spec.instance.as_deref() != facts.instance.as_deref() {
            continue;
        }
        if let Some(n) = machine_node(&m, snap) {
            *per_node.entry(n).or_insert(0) += 1;
        }
    }
    per_node
}

/// PCI devices held per mapping and node in this Proxmox cluster
/// ([`crate::machine::plan::pci`]): the placements in flight of every
/// cluster, and this CAPI cluster's other machines where their status (or
/// the listing) puts them, their mapping names translated by `renames`.
fn pci_in_use(
    run: &Run<'_>,
    facts: &Facts,
    identity: &crate::clients::Identity,
    renames: &BTreeMap<String, String>,
    snap: &Snapshot,
) -> pci::InUse {
    let mut in_use = pci::InUse::new();
    let inflight = run.rt().inflight.placements(identity);
    for (uid, p) in &inflight {
        if *uid != run.me.uid {
            pci::hold(&mut in_use, &p.pci, p.node.as_str());
        }
    }
    let cluster = run.me.cluster.clone().unwrap_or_default();
    for m in run.ctx.stores.cluster_machines(&run.me.ns, &cluster) {
        let Some(uid) = m.metadata.uid.as_deref() else {
            continue;
        };
        if uid == run.me.uid || inflight.contains_key(uid) || m.spec.pci_devices.is_empty() {
            continue;
        }
        let m = latest_known(run, m);
        if m.spec.instance.as_deref() != facts.instance.as_deref() {
            continue;
        }
        if let Some(node) = machine_node(&m, snap) {
            pci::hold(
                &mut in_use,
                &pci::needs(&m.spec.pci_devices, renames),
                &node,
            );
        }
    }
    in_use
}

/// Where a machine's VM is, or will be: where the listing shows its VMID (a
/// VM's node in the listing is current, docs/proxmox-semantics.md §9),
/// unless the VM is still being cloned; else the target its latest clone
/// recorded before it was asked for; else its `status.proxmoxNode`; else
/// where the listing shows it being cloned.
///
/// - The listing goes before the status: the status may still name the
///   node of a clone that failed before the last restart, while the retried
///   clone made the VM elsewhere.
/// - Not for a VM locked by its clone: a clone to another node creates the
///   config on the template's node and moves it to the target at the task's
///   end (docs/proxmox-semantics.md §8), so until then the listing shows the
///   template's node. The target ([`CLONE_TARGET_ANNOTATION`]) is written
///   before every clone, so it goes before the status, which is written
///   after a clone and may still name the node of an earlier one.
fn machine_node(m: &crate::api::machine::ProxmoxMachine, snap: &Snapshot) -> Option<String> {
    let listed = m.spec.virtual_machine_id.and_then(|v| snap.vm(v));
    let node_of = |r: &crate::pve::ClusterResource| r.node.as_ref().map(|n| n.as_str().to_string());
    let cloning = listed.is_some_and(|r| r.lock == Some(crate::pve::VmLock::Clone));
    let status = m.status.as_ref().and_then(|s| s.proxmox_node.clone());
    let target = || m.annotations().get(CLONE_TARGET_ANNOTATION).cloned();
    match listed {
        Some(r) if !cloning => node_of(r),
        _ => target().or(status).or_else(|| listed.and_then(node_of)),
    }
}

fn unreachable(instance: &str, e: &PveError) -> Reason {
    Reason::InstanceUnreachable {
        instance: instance.to_string(),
        detail: e.to_string(),
    }
}

/// Where a clone of `resolved` can go: anywhere when every template disk
/// (and the requested target storage) is shared, else only the template's
/// node (or, for replicas, each replica's own node) — docs/field-cases.md B05.
pub fn locality(
    resolved: &Resolved,
    template: &VmConfig,
    target_storage: Option<&str>,
    snap: &Snapshot,
) -> Option<Locality> {
    if let Resolved::Replicas(v) = resolved {
        return Some(Locality {
            nodes: v.iter().map(|t| t.node.clone()).collect(),
            why: "the template is replicated per node; each VM is cloned from the replica on its node".into(),
        });
    }
    let node = resolved.all().first().map(|t| t.node.clone())?;
    let vmid = resolved.all().first().map(|t| t.vmid)?;
    let mut disks: Vec<(String, String)> = template
        .disks
        .iter()
        .filter(|(_, d)| !d.is_cdrom())
        .filter_map(|(slot, d)| Some((slot.to_string(), d.storage()?.to_string())))
        .collect();
    for (key, d) in [
        ("efidisk0", &template.efidisk0),
        ("tpmstate0", &template.tpmstate0),
    ] {
        if let Some(s) = d.as_ref().and_then(|d| d.storage()) {
            disks.push((key.to_string(), s.to_string()));
        }
    }
    let local = disks
        .iter()
        .find(|(_, s)| snap.is_shared(s) != Some(true))
        .map(|(k, s)| format!("template {vmid} has {k} on {s}, which is not shared"));
    let target_local = target_storage
        .filter(|s| snap.is_shared(s) != Some(true))
        .map(|s| format!("the target storage {s} is not shared"));
    local.or(target_local).map(|why| Locality {
        nodes: [node].into(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::machine::{ProxmoxMachine, ProxmoxMachineSpec, ProxmoxMachineStatus};

    fn machine(vmid: Option<u32>, status_node: Option<&str>) -> ProxmoxMachine {
        let mut m = ProxmoxMachine::new(
            "m",
            ProxmoxMachineSpec {
                virtual_machine_id: vmid,
                ..ProxmoxMachineSpec::default()
            },
        );
        m.status = Some(ProxmoxMachineStatus {
            proxmox_node: status_node.map(str::to_string),
            ..ProxmoxMachineStatus::default()
        });
        m
    }

    #[test]
    fn the_listing_places_a_machine_before_its_status() {
        let snap = Snapshot::new(
            tokio::time::Instant::now(),
            serde_json::from_str(
                r#"[{"id":"qemu/1001","type":"qemu","vmid":1001,"node":"pve-b4"},
                    {"id":"qemu/1003","type":"qemu","vmid":1003,"node":"pve-b1","lock":"clone"}]"#,
            )
            .unwrap(),
        );
        assert_eq!(
            machine_node(&machine(Some(1001), Some("pve-b3")), &snap).as_deref(),
            Some("pve-b4"),
            "the status still names the node of an earlier, failed clone"
        );
        assert_eq!(
            machine_node(&machine(Some(1002), Some("pve-b3")), &snap).as_deref(),
            Some("pve-b3"),
            "not listed (yet): the status"
        );
        assert_eq!(
            machine_node(&machine(Some(1003), Some("pve-b2")), &snap).as_deref(),
            Some("pve-b2"),
            "being cloned to pve-b2: the config is on the template's node until the task ends"
        );
        assert_eq!(
            machine_node(&machine(Some(1003), None), &snap).as_deref(),
            Some("pve-b1"),
            "no status: where the listing shows it"
        );
        assert_eq!(machine_node(&machine(None, None), &snap), None);
    }

    #[test]
    fn a_recorded_clone_target_places_a_machine_before_its_status() {
        let snap = Snapshot::new(
            tokio::time::Instant::now(),
            serde_json::from_str(
                r#"[{"id":"qemu/1003","type":"qemu","vmid":1003,"node":"pve-b1","lock":"clone"}]"#,
            )
            .unwrap(),
        );
        let targeted = |vmid, status_node| {
            let mut m = machine(Some(vmid), status_node);
            m.annotations_mut()
                .insert(CLONE_TARGET_ANNOTATION.to_string(), "pve-b3".to_string());
            m
        };
        assert_eq!(
            machine_node(&targeted(1003, None), &snap).as_deref(),
            Some("pve-b3"),
            "being cloned, no status written yet: the recorded target"
        );
        assert_eq!(
            machine_node(&targeted(1003, Some("pve-b2")), &snap).as_deref(),
            Some("pve-b3"),
            "the status names the node of an earlier clone; the target is the latest"
        );
        assert_eq!(
            machine_node(&targeted(1002, None), &snap).as_deref(),
            Some("pve-b3"),
            "not listed yet: the recorded target"
        );
    }
}
