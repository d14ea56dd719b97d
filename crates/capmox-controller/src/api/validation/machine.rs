//! ProxmoxMachine and ProxmoxMachineTemplate spec validation.

use std::collections::BTreeSet;

use super::FieldError;
use super::cluster::{check_node_names, is_node_name};
use super::nic::check_devices;
use super::slots::{indexed, is_disk_slot, is_net_name};
use super::template::{check_selector, check_tags, check_vmid, check_vmid_range, range_text};
use crate::api::cluster::{ClusterMode, InstanceSpec, ProxmoxClusterSpec};
use crate::api::common::VmIdRange;
use crate::api::machine::ProxmoxMachineSpec;
use crate::api::templates::ProxmoxMachineTemplateSpec;

/// Every problem with a ProxmoxMachine spec on its own, each naming its field
/// (paths start at `spec.`) and saying what to write.
///
/// Rules: `storage`/`format` only with a full clone; `templateID` needs
/// `sourceNode` and excludes `templateSelector`, a selector has valid
/// Proxmox tags; tags in Proxmox syntax; disk slots valid and unique; NIC
/// names `net0`..`net31` and unique, VLAN 1..=4094, MTU 1 or 576..=65520 and
/// only with virtio, bridge names valid, MACs a NIC can use (unicast, not
/// all-zero) and unique, each `ipPoolRef` once; `vmIDRange` ordered and in
/// range, holding `virtualMachineID`; `target` among `allowedNodes`;
/// `startup` and `bootOrder` in Proxmox syntax; `cpu` a model Proxmox knows
/// and flags a VM may set;
/// `pciDevices` mapping ids, each once, at most 16, one primary GPU.
pub fn validate_machine(spec: &ProxmoxMachineSpec) -> Vec<FieldError> {
    validate_machine_at("spec", spec)
}

/// [`validate_machine`] for the machine spec inside a ProxmoxMachineTemplate
/// (paths start at `spec.template.spec.`).
pub fn validate_machine_template(spec: &ProxmoxMachineTemplateSpec) -> Vec<FieldError> {
    validate_machine_at("spec.template.spec", &spec.template.spec)
}

/// Problems of a machine spec relative to its cluster: a pinned `instance`
/// that the cluster does not list, `allowedNodes` outside the pinned
/// instance's nodes, and a `vmIDRange` outside the range of an instance the
/// machine can be placed in (the pinned one; otherwise the first in mode
/// `Default`, any in the other modes) — a machine's own range replaces the
/// instance's when its VMID is chosen.
pub fn validate_machine_for_cluster(
    spec: &ProxmoxMachineSpec,
    cluster: &ProxmoxClusterSpec,
) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let Some(pin) = &spec.instance else {
        if let Some(mine) = &spec.vm_id_range {
            let candidates = match cluster.mode() {
                ClusterMode::Default => cluster.instances().get(..1).unwrap_or_default(),
                _ => cluster.instances(),
            };
            for inst in candidates {
                check_inside(mine, inst, "spec.instance", &mut errs);
            }
        }
        return errs;
    };
    let instances = cluster.instances();
    if instances.is_empty() {
        if cluster.mode() == ClusterMode::Default && pin != crate::DEFAULT_INSTANCE_NAME {
            errs.push(FieldError::new(
                "spec.instance",
                format!(
                    "instance {pin:?} does not exist: the cluster lists no instances (its single Proxmox cluster is called {:?})",
                    crate::DEFAULT_INSTANCE_NAME
                ),
            ));
        }
        return errs;
    }
    let Some(inst) = cluster.instance(pin) else {
        let names: Vec<&str> = instances.iter().map(|i| i.name.as_str()).collect();
        errs.push(FieldError::new(
            "spec.instance",
            format!(
                "instance {pin:?} does not exist in the ProxmoxCluster (known: {})",
                names.join(", ")
            ),
        ));
        return errs;
    };
    if let Some(mine) = &spec.vm_id_range {
        check_inside(mine, inst, "", &mut errs);
    }
    if !inst.nodes.is_empty() {
        for (i, n) in spec.allowed_nodes.iter().enumerate() {
            if !inst.nodes.contains(n) {
                errs.push(FieldError::new(
                    format!("spec.allowedNodes[{i}]"),
                    format!(
                        "node {n:?} is not among instance {pin:?}'s nodes ({}): list only nodes of that instance",
                        inst.nodes.join(", ")
                    ),
                ));
            }
        }
    }
    errs
}

/// The machine's `vmIDRange` inside `inst`'s; `alternative` names another
/// field that would avoid the problem (pinning), if any.
fn check_inside(
    mine: &VmIdRange,
    inst: &InstanceSpec,
    alternative: &str,
    errs: &mut Vec<FieldError>,
) {
    let Some(theirs) = &inst.vm_id_range else {
        return;
    };
    if mine.start >= theirs.start && mine.end <= theirs.end {
        return;
    }
    let or_pin = if alternative.is_empty() {
        String::new()
    } else {
        format!(", or set {alternative} to an instance whose range holds it")
    };
    errs.push(FieldError::new(
        "spec.vmIDRange",
        format!(
            "{} is not inside instance {:?}'s vmIDRange {}: machines there may only use that range; narrow spec.vmIDRange to it{or_pin}",
            range_text(mine),
            inst.name,
            range_text(theirs)
        ),
    ));
}

fn validate_machine_at(base: &str, spec: &ProxmoxMachineSpec) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let full = spec.full.unwrap_or(true);
    if !full {
        if spec.storage.is_some() {
            errs.push(FieldError::new(
                format!("{base}.storage"),
                "only allowed for full clones (full: true); linked clones stay on the template's storage",
            ));
        }
        if spec.format.is_some() {
            errs.push(FieldError::new(
                format!("{base}.format"),
                "only allowed for full clones (full: true)",
            ));
        }
    }
    if let Some(i) = &spec.instance
        && !crate::api::common::is_dns1123_label(i)
    {
        errs.push(FieldError::new(
            format!("{base}.instance"),
            format!("{i:?} is not an instance name (DNS-1123 label)"),
        ));
    }
    if let Some(id) = spec.virtual_machine_id {
        check_vmid(&format!("{base}.virtualMachineID"), id, &mut errs);
    }
    match (&spec.template_id, &spec.template_selector) {
        (Some(_), Some(_)) => errs.push(FieldError::new(
            format!("{base}.templateSelector"),
            "templateID and templateSelector are mutually exclusive",
        )),
        (Some(id), None) => {
            check_vmid(&format!("{base}.templateID"), *id, &mut errs);
            if spec.source_node.is_none() {
                errs.push(FieldError::new(
                    format!("{base}.sourceNode"),
                    "templateID needs sourceNode (the node that holds the template)",
                ));
            }
        }
        (None, Some(sel)) => check_selector(&format!("{base}.templateSelector"), sel, &mut errs),
        (None, None) => {}
    }
    for (field, value) in [("sourceNode", &spec.source_node), ("target", &spec.target)] {
        if let Some(n) = value
            && !is_node_name(n)
        {
            errs.push(FieldError::new(
                format!("{base}.{field}"),
                format!("{n:?} is not a Proxmox node name"),
            ));
        }
    }
    if spec.num_sockets == Some(0) {
        errs.push(FieldError::new(
            format!("{base}.numSockets"),
            "must be at least 1",
        ));
    }
    if spec.num_cores == Some(0) {
        errs.push(FieldError::new(
            format!("{base}.numCores"),
            "must be at least 1",
        ));
    }
    if let Some(m) = spec.memory_mib
        && m < 16
    {
        errs.push(FieldError::new(
            format!("{base}.memoryMiB"),
            format!("{m} MiB is below Proxmox's minimum of 16 MiB"),
        ));
    }
    if let Some(disks) = &spec.disks {
        let mut slots = BTreeSet::new();
        if let Some(b) = &disks.boot_volume {
            check_disk_slot(&format!("{base}.disks.bootVolume.disk"), &b.disk, &mut errs);
            if b.size_gb == 0 {
                errs.push(FieldError::new(
                    format!("{base}.disks.bootVolume.sizeGb"),
                    "must be at least 1 GiB",
                ));
            }
            slots.insert(b.disk.as_str());
        }
        for (i, v) in disks.additional_volumes.iter().enumerate() {
            let p = format!("{base}.disks.additionalVolumes[{i}]");
            check_disk_slot(&format!("{p}.disk"), &v.disk, &mut errs);
            if !slots.insert(v.disk.as_str()) {
                errs.push(FieldError::new(
                    format!("{p}.disk"),
                    format!("disk slot {} is used twice", v.disk),
                ));
            }
            if v.size_gb == 0 {
                errs.push(FieldError::new(
                    format!("{p}.sizeGb"),
                    "must be at least 1 GiB",
                ));
            }
        }
    }
    if let Some(net) = &spec.network {
        check_devices(base, &net.network_devices, &mut errs);
    }
    if let Some(r) = &spec.vm_id_range {
        check_vmid_range(&format!("{base}.vmIDRange"), r, &mut errs);
        if let Some(id) = spec.virtual_machine_id
            && r.start <= r.end
            && !r.contains(id)
        {
            errs.push(FieldError::new(
                format!("{base}.virtualMachineID"),
                format!(
                    "{id} is outside {base}.vmIDRange {}: remove virtualMachineID (the controller picks one) or widen the range",
                    range_text(r)
                ),
            ));
        }
    }
    check_node_names(
        &format!("{base}.allowedNodes"),
        &spec.allowed_nodes,
        &mut errs,
    );
    if let Some(t) = &spec.target
        && !spec.allowed_nodes.is_empty()
        && !spec.allowed_nodes.contains(t)
    {
        errs.push(FieldError::new(
            format!("{base}.target"),
            format!(
                "node {t:?} is not among {base}.allowedNodes ({}): add it there or pick one of them",
                spec.allowed_nodes.join(", ")
            ),
        ));
    }
    check_tags(&format!("{base}.tags"), &spec.tags, &mut errs);
    if let Some(cpu) = &spec.cpu {
        super::shape::check_cpu(&format!("{base}.cpu"), cpu, &mut errs);
    }
    if let Some(m) = &spec.bootstrap_media {
        super::shape::check_media(&format!("{base}.bootstrapMedia"), m, &mut errs);
    }
    super::pci::check_pci_devices(&format!("{base}.pciDevices"), &spec.pci_devices, &mut errs);
    if let Some(s) = &spec.startup
        && !is_startup(s)
    {
        errs.push(FieldError::new(
            format!("{base}.startup"),
            format!("{s:?} is not Proxmox startup syntax order=N,up=S,down=S"),
        ));
    }
    if let Some(b) = &spec.boot_order
        && !is_boot_order(b)
    {
        errs.push(FieldError::new(
            format!("{base}.bootOrder"),
            format!(
                "{b:?} is not Proxmox boot syntax order=<dev>[;<dev>...] (e.g. order=scsi0;net0)"
            ),
        ));
    }
    errs
}

fn check_disk_slot(path: &str, slot: &str, errs: &mut Vec<FieldError>) {
    if !is_disk_slot(slot) {
        errs.push(FieldError::new(
            path.to_string(),
            format!("{slot:?} is not a disk slot (scsi0..scsi30, virtio0..virtio15, sata0..sata5, ide0..ide3)"),
        ));
    }
}

fn is_startup(s: &str) -> bool {
    !s.is_empty()
        && s.split(',').all(|kv| {
            kv.split_once('=').is_some_and(|(k, v)| {
                matches!(k, "order" | "up" | "down")
                    && !v.is_empty()
                    && v.chars().all(|c| c.is_ascii_digit())
            })
        })
}

fn is_boot_order(s: &str) -> bool {
    s.strip_prefix("order=").is_some_and(|devs| {
        !devs.is_empty()
            && devs.split(';').all(|d| {
                is_disk_slot(d)
                    || is_net_name(d)
                    || indexed(d, "hostpci", 15)
                    || indexed(d, "usb", 4)
            })
    })
}
