//! Clone the planned template to the reserved VMID
//! (`POST /nodes/{node}/qemu/{vmid}/clone`).
//!
//! Clones of one template in one Proxmox cluster take a slot of its
//! adaptive clone window first ([`crate::machine::runtime::slots`]); a
//! machine refused one waits in line and is woken when a slot is its own.
//! The clone request sets the name and the ownership marker in the
//! description, so the VM is ours from the moment it exists.

use kube::runtime::reflector::ObjectRef;

use crate::api::machine::{DiskFormat, ProxmoxMachineSpec};
use crate::cluster::probe::pool::missing_text;
use crate::error::Error;
use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, InLine, Observed, Operation, Plan, StepKind};
use crate::machine::plan::scheduler::{CLONE_TARGET_ANNOTATION, PendingVm};
use crate::machine::runtime::slots::{SlotGrant, TemplateKey};
use crate::machine::vm::marker::Marker;
use crate::pve::{CloneRequest, Missing, NodeName, PoolId, PveError, StorageId, VmId};
use crate::reasons::Reason;

/// Clones, after recording the target node ([`CLONE_TARGET_ANNOTATION`]).
///
/// # Errors
/// [`Error::Kube`] of the record write (nothing was asked of Proxmox).
pub async fn clone(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let fail = |run: &Run<'_>, class: &'static str, reason: Reason| {
        super::failed(run, StepKind::Clone, class, reason)
    };
    let (Some(plan), Some(vmid)) = (&facts.plan, facts.vm_id()) else {
        return Ok(fail(
            run,
            "precondition",
            Reason::CloneFailed("no plan or VMID before the clone".into()),
        ));
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return Ok(fail(
                run,
                "precondition",
                Reason::CloneFailed(e.to_string()),
            ));
        }
    };
    let rt = run.rt();
    let key = TemplateKey::new(&inst.identity, plan.template.vmid);
    let me = ObjectRef::new(&run.me.name).within(&run.me.ns);
    if let SlotGrant::InLine { running, ahead } = rt.slots.acquire(&key, &run.me.uid, &me) {
        return Ok(Observed::InLine(InLine {
            template: plan.template.vmid,
            running,
            ahead,
        }));
    }
    // A VMID written earlier is held again (after a restart), unless
    // another machine of this process holds it.
    if let Err(e) = rt.vmids.hold(&inst.identity, vmid.get(), &run.me.uid) {
        rt.slots.release(&run.me.uid);
        return Ok(fail(run, "vmid", Reason::Vmid(e)));
    }
    let req = match request(
        &run.machine.spec,
        facts.pool.as_deref(),
        &run.me.name,
        &facts.marker,
        vmid,
        plan,
    ) {
        Ok(r) => r,
        Err(e) => {
            rt.slots.release(&run.me.uid);
            return Ok(fail(run, "invalid_spec", Reason::InvalidSpec(e)));
        }
    };
    let (Ok(src_node), Ok(src_id)) = (
        NodeName::new(plan.template.node.clone()),
        VmId::new(plan.template.vmid),
    ) else {
        rt.slots.release(&run.me.uid);
        return Ok(fail(
            run,
            "invalid_spec",
            Reason::CloneFailed(format!(
                "template {} has an invalid node or VMID",
                plan.template
            )),
        ));
    };
    // Record before create: the target node is written before the clone is
    // asked for ([`CLONE_TARGET_ANNOTATION`]), so that a process that starts
    // after this one died counts the VM on it and the spread holds across
    // restarts (`steps::plan`). The VMID reservation wrote it with the
    // VMID; it is written here only when the plan changed since (a re-plan
    // after a failed clone).
    if run.clone_target.as_deref() != Some(plan.node.as_str()) {
        let body = serde_json::json!({
            "metadata": { "annotations": { CLONE_TARGET_ANNOTATION: plan.node.as_str() } }
        });
        if let Err(e) = run.merge_patch(body).await {
            rt.slots.release(&run.me.uid);
            return Err(e);
        }
    }
    match inst.api.clone_vm(&src_node, src_id, &req).await {
        Ok(upid) => {
            rt.inflight.add_pending(
                &inst.identity,
                PendingVm {
                    vmid: vmid.get(),
                    node: plan.node.as_str().to_string(),
                    memory: plan.memory,
                },
            );
            rt.update_memo(&run.me.uid, |m| {
                m.vm = None;
                m.media_uploaded = None;
                m.plan = None;
            });
            run.status.proxmox_node = Some(plan.node.as_str().to_string());
            let note = format!(
                "cloning template {} on {} to VM {vmid} on {} in instance {}",
                plan.template.vmid, plan.template.node, plan.node, inst.name
            );
            run.event(EventKind::Normal, Reason::Cloning(note));
            Ok(super::task::started(
                run,
                &upid,
                Operation::Clone,
                Some(vmid.get()),
                Some(key),
                None,
            ))
        }
        Err(e) => {
            rt.slots.release(&run.me.uid);
            if matches!(e, PveError::LockTimeout { .. } | PveError::Locked { .. }) {
                let window = rt.slots.congested(&key);
                tracing::debug!(
                    template = key.template,
                    window,
                    "clone refused on a lock; clone window halved"
                );
            }
            // The pool was there when it was read before the clone, and is
            // gone now (docs/field-cases.md B34): said as the read says it;
            // the next reconcile reads it again before any clone.
            if let (
                PveError::NotFound {
                    missing: Missing::Pool,
                    ..
                },
                Some(pool),
            ) = (&e, facts.pool.as_deref())
            {
                let msg = format!(
                    "{}; the clone of template {} to VM {vmid} was refused: {e}",
                    missing_text(pool, &inst.name),
                    plan.template.vmid
                );
                return Ok(super::pve_failed(
                    run,
                    StepKind::Clone,
                    &e,
                    Reason::PoolNotFound(msg),
                ));
            }
            let mut msg = format!(
                "clone of template {} to VM {vmid} failed: {e}",
                plan.template.vmid
            );
            // Proxmox's 403 of a clone names no path when the VMID-or-pool
            // check fails (docs/field-cases.md B34): say what it checks.
            if matches!(e, PveError::PermissionDenied { .. }) {
                let pool = match &facts.pool {
                    Some(p) => format!("the request named pool {p}"),
                    None => "the request named no pool (set the instance's pool or spec.pool for a pool-scoped token)".to_string(),
                };
                msg.push_str(&format!(
                    "; the clone needs VM.Clone on /vms/{}, VM.Allocate on /vms/{vmid} or on the pool it names (/pool/<pool>), and Datastore.AllocateSpace on the target storage; {pool}",
                    plan.template.vmid
                ));
            }
            Ok(super::pve_failed(
                run,
                StepKind::Clone,
                &e,
                Reason::CloneFailed(msg),
            ))
        }
    }
}

/// The clone request: name, marker, full or linked, target node, storage,
/// format, snapshot, as the spec asks, and the resource pool `pool` (the
/// machine's `spec.pool`, else its instance's: docs/field-cases.md B34 —
/// given at clone time, never written to the config).
///
/// # Errors
/// A message naming the spec field whose value Proxmox cannot take.
pub fn request(
    spec: &ProxmoxMachineSpec,
    pool: Option<&str>,
    name: &str,
    marker: &Marker,
    vmid: VmId,
    plan: &Plan,
) -> Result<CloneRequest, String> {
    let mut req = CloneRequest::new(vmid)
        .name(crate::names::vm_name(name))
        .full(spec.full.unwrap_or(true))
        .description(marker.description(spec.description.as_deref()));
    if plan.node.as_str() != plan.template.node {
        req = req.target(plan.node.clone());
    }
    if let Some(s) = &spec.storage {
        req = req.storage(StorageId::new(s.clone()).map_err(|e| format!("spec.storage: {e}"))?);
    }
    if let Some(f) = spec.format {
        req = req.format(match f {
            DiskFormat::Raw => pve_client::api::qemu::clone::DiskFormat::Raw,
            DiskFormat::Qcow2 => pve_client::api::qemu::clone::DiskFormat::Qcow2,
            DiskFormat::Vmdk => pve_client::api::qemu::clone::DiskFormat::Vmdk,
        });
    }
    if let Some(p) = pool {
        req = req.pool(
            PoolId::new(p.to_string())
                .map_err(|e| format!("pool (spec.pool or the instance's): {e}"))?,
        );
    }
    if let Some(s) = &spec.snap_name {
        req = req.snapname(s.clone());
    }
    Ok(req)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::plan::template::TemplateVm;
    use crate::pve::ProxmoxApi;
    use crate::pve::fake::FakeProxmox;

    fn plan(node: &str) -> Plan {
        Plan {
            node: NodeName::new(node).unwrap(),
            template: TemplateVm {
                vmid: 9000,
                node: "pve-a1".into(),
                name: Some("ubuntu".into()),
                tags: Default::default(),
                template: true,
            },
            memory: 2 << 30,
        }
    }

    fn marker() -> Marker {
        Marker::new("wl1", "m1", "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f")
    }

    #[test]
    fn the_request_carries_name_marker_and_target() {
        let spec = ProxmoxMachineSpec {
            pool: Some("team-a".into()),
            ..ProxmoxMachineSpec::default()
        };
        let r = request(
            &spec,
            spec.pool.as_deref(),
            "m1",
            &marker(),
            VmId::new(131).unwrap(),
            &plan("pve-a2"),
        )
        .unwrap();
        assert_eq!(r.newid.get(), 131);
        assert_eq!(r.name.as_deref(), Some("m1"));
        assert_eq!(r.full, Some(true));
        assert_eq!(r.target.as_ref().map(NodeName::as_str), Some("pve-a2"));
        assert_eq!(r.pool.as_ref().map(PoolId::as_str), Some("team-a"));
        assert_eq!(
            r.description.as_deref(),
            Some("capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f")
        );
        // On the template's own node: no target.
        let r = request(
            &spec,
            spec.pool.as_deref(),
            "m1",
            &marker(),
            VmId::new(131).unwrap(),
            &plan("pve-a1"),
        )
        .unwrap();
        assert_eq!(r.target, None);
    }

    #[test]
    fn a_storage_proxmox_refuses_names_the_field() {
        let spec = ProxmoxMachineSpec {
            storage: Some("bad storage!".into()),
            ..ProxmoxMachineSpec::default()
        };
        let e = request(
            &spec,
            None,
            "m1",
            &marker(),
            VmId::new(131).unwrap(),
            &plan("pve-a1"),
        )
        .unwrap_err();
        assert!(e.starts_with("spec.storage: "), "{e}");
    }

    #[tokio::test]
    async fn the_fake_clones_with_the_marker_and_refuses_a_taken_vmid() {
        let pve = FakeProxmox::new();
        pve.add_vm(
            9000,
            "pve-a1",
            false,
            &[("template", "1"), ("memory", "2048")],
        );
        pve.add_vm(131, "pve-a1", false, &[("name", "someone-else")]);
        let req = request(
            &ProxmoxMachineSpec::default(),
            None,
            "m1",
            &marker(),
            VmId::new(132).unwrap(),
            &plan("pve-a2"),
        )
        .unwrap();
        let node = NodeName::new("pve-a1").unwrap();
        pve.clone_vm(&node, VmId::new(9000).unwrap(), &req)
            .await
            .unwrap();
        let vm = pve.vm(132).unwrap();
        assert_eq!(vm.node, "pve-a2");
        assert!(marker().in_description(vm.config["description"].as_str().unwrap()));
        let taken = request(
            &ProxmoxMachineSpec::default(),
            None,
            "m1",
            &marker(),
            VmId::new(131).unwrap(),
            &plan("pve-a1"),
        )
        .unwrap();
        let e = pve
            .clone_vm(&node, VmId::new(9000).unwrap(), &taken)
            .await
            .unwrap_err();
        assert_eq!(super::super::class_of(&e), "already_exists");
    }
}
