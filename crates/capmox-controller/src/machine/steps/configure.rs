//! The one config write that turns a fresh clone into the machine's VM
//! ([`crate::machine::vm::vmconfig`]): CPU, memory, NICs, tags, options,
//! data disks, and — before the first boot — the bootstrap ISO as a CD-ROM.
//!
//! It carries the `digest` of the config it was computed from, so a
//! concurrent edit fails it instead of being overwritten (docs/field-cases.md
//! B30). A write that allocates a disk goes as `POST` (a task); any other as
//! `PUT` (synchronous).

use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Operation, Power, StepKind, VmFact};
use crate::machine::observe::vm::{moved, remember};
use crate::machine::vm::{arch, media, vmconfig};
use crate::pve::{ConfigUpdate, PveError};
use crate::reasons::Reason;

/// Writes the config.
pub async fn configure(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let fail = |run: &Run<'_>, class: &'static str, reason: Reason| {
        super::failed(run, StepKind::Configure, class, reason)
    };
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Some(config) = &view.config else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => return fail(run, "precondition", Reason::ConfigureFailed(e.to_string())),
    };
    let desired = match &facts.desired {
        Ok(d) => d,
        Err(e) => return fail(run, "invalid_spec", Reason::InvalidSpec(e.clone())),
    };
    let running = view.power == Power::Running;
    // Before the first boot the ISO goes in (its volume was recorded before
    // the upload); a started VM read it already.
    let iso = if running {
        None
    } else {
        match &facts.media_recorded {
            Some(m) => {
                match media::cdrom_buses(
                    desired.cdrom_bus,
                    arch::effective(config.arch, desired.arch),
                )
                .map_err(vmconfig::VmConfigError)
                .and_then(|buses| vmconfig::iso_slot(config, &m.volid, &buses))
                {
                    Ok(slot) => Some((slot, m.volid.as_str())),
                    Err(e) => {
                        return fail(run, "invalid_spec", Reason::ConfigureFailed(e.to_string()));
                    }
                }
            }
            None => {
                return fail(
                    run,
                    "precondition",
                    Reason::ConfigureFailed("the bootstrap ISO is not recorded yet".into()),
                );
            }
        }
    };
    let update = match vmconfig::update(desired, config, &facts.marker, iso) {
        Ok(u) => u,
        Err(e) => return fail(run, "invalid_spec", Reason::InvalidSpec(e.to_string())),
    };
    let keys: Vec<&str> = update
        .changes()
        .keys()
        .map(String::as_str)
        .filter(|k| *k != "digest")
        .collect();
    let note = format!("configuring VM {vmid} ({})", keys.join(", "));
    let after = vmconfig::apply_update(config, &update);
    let result = if allocates(&update) {
        inst.api
            .update_vm_config_async(&view.node, vmid, &update)
            .await
    } else {
        inst.api
            .update_vm_config_sync(&view.node, vmid, &update)
            .await
            .map(|()| None)
    };
    match result {
        Ok(task) => {
            let after = std::sync::Arc::new(after);
            remember(
                run,
                vmid,
                &view.node,
                Some(std::sync::Arc::clone(&after)),
                None,
            );
            if iso.is_some() {
                run.status.bootstrap_data_provided = Some(true);
            }
            match task {
                Some(upid) => {
                    run.event(EventKind::Normal, Reason::Configuring(note));
                    Observed::All(vec![
                        Observed::Configured(after),
                        super::task::started(
                            run,
                            &upid,
                            Operation::Configure,
                            facts.vmid,
                            None,
                            None,
                        ),
                    ])
                }
                None => {
                    run.event(EventKind::Normal, Reason::Configured(note));
                    Observed::Configured(after)
                }
            }
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => {
            // Our view may be stale (a concurrent edit): read it again.
            run.rt().update_memo(&run.me.uid, |m| {
                if let Some(v) = &mut m.vm {
                    v.config = None;
                }
            });
            let reason = Reason::ConfigureFailed(format!("config write of VM {vmid}: {e}"));
            super::pve_failed(run, StepKind::Configure, &e, reason)
        }
    }
}

/// Whether the update allocates a disk (`STORAGE:SIZE`): such a write runs
/// as a task (`POST`).
pub fn allocates(update: &ConfigUpdate) -> bool {
    update.changes().iter().any(|(k, v)| {
        (pve_client::options::DiskSlot::parse(k).is_ok() || k == "efidisk0")
            && v.split_once(':').is_some_and(|(_, r)| {
                r.split(',')
                    .next()
                    .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
            })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_new_disks_make_the_write_a_task() {
        let new_disk = ConfigUpdate::new().set("scsi1", "ceph:40,discard=on");
        assert!(allocates(&new_disk));
        let cdrom = ConfigUpdate::new().set("ide2", "cephfs:iso/capmox-131-x.iso,media=cdrom");
        assert!(!allocates(&cdrom));
        assert!(allocates(&ConfigUpdate::new().set("efidisk0", "ceph:1")));
        let plain = ConfigUpdate::new().set("memory", "4096").set("cores", "2");
        assert!(!allocates(&plain));
    }
}
