//! What a VM's architecture needs of the node it starts on (qemu-server's
//! aarch64 support); the PCI devices it needs are [`crate::pci`]'s.
//!
//! Architecture rules checked when a VM starts (`qmstart`): the VM's
//! architecture is its `arch` ▸ the node's (`current-kernel.machine` of
//! `GET /nodes/{node}/status`). An aarch64 VM must boot OVMF (`bios: ovmf`)
//! with an `efidisk0`, on a `virt` machine type, without any IDE drive and
//! with a CPU model that exists on aarch64 (`host`, `max`, `custom-*`, or
//! none: qemu-server's default `cortex-a57`). An x86_64 VM cannot use a
//! `virt` machine type. Config writes take these values unchecked (the
//! schema allows them on every node), as Proxmox does; the start fails.

use std::collections::BTreeMap;

/// The architecture a VM runs as on a node of architecture `node_arch`.
pub(crate) fn vm_arch<'a>(conf: &'a BTreeMap<String, String>, node_arch: &'a str) -> &'a str {
    conf.get("arch").map(String::as_str).unwrap_or(node_arch)
}

fn machine_type(conf: &BTreeMap<String, String>) -> Option<String> {
    let m = conf.get("machine")?;
    let first = m.split(',').next().unwrap_or_default();
    let ty = first.strip_prefix("type=").unwrap_or(first);
    if ty.contains('=') {
        return m
            .split(',')
            .find_map(|p| p.strip_prefix("type="))
            .map(str::to_string);
    }
    Some(ty.to_string())
}

/// Why a VM with `conf` cannot start on a node of architecture
/// `node_arch`, if it cannot.
pub(crate) fn start_refusal(conf: &BTreeMap<String, String>, node_arch: &str) -> Option<String> {
    let arch = vm_arch(conf, node_arch);
    let machine = machine_type(conf);
    let is_virt = |m: &str| m == "virt" || m.starts_with("virt-") || m.starts_with("virt+");
    if arch == "aarch64" {
        if conf.get("bios").map(String::as_str) != Some("ovmf") {
            return Some("aarch64 VMs can only boot with OVMF (set 'bios: ovmf')".into());
        }
        if !conf.contains_key("efidisk0") {
            return Some("aarch64 VMs with OVMF need an EFI disk (efidisk0)".into());
        }
        if let Some(m) = &machine
            && !is_virt(m)
        {
            return Some(format!(
                "machine type '{m}' is not supported for aarch64 VMs (use 'virt')"
            ));
        }
        if let Some(k) = conf
            .keys()
            .find(|k| k.starts_with("ide") && crate::props::is_drive_key(k))
        {
            return Some(format!("{k}: aarch64 VMs have no IDE bus"));
        }
        if let Some(cpu) = conf.get("cpu") {
            let first = cpu.split(',').next().unwrap_or_default();
            let model = first.strip_prefix("cputype=").unwrap_or(first);
            if !model.contains('=')
                && !matches!(model, "host" | "max")
                && !model.starts_with("custom-")
            {
                return Some(format!(
                    "CPU model '{model}' is not available for aarch64 VMs"
                ));
            }
        }
    } else if let Some(m) = &machine
        && is_virt(m)
    {
        return Some(format!(
            "machine type '{m}' is not supported for {arch} VMs"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn aarch64_needs_ovmf_an_efi_disk_virt_and_no_ide() {
        let good = [
            ("bios", "ovmf"),
            ("efidisk0", "local-lvm:vm-100-disk-1,size=64M"),
            ("machine", "virt"),
            ("scsi0", "local-lvm:vm-100-disk-0"),
            ("sata0", "local:iso/x.iso,media=cdrom"),
            ("cpu", "host"),
        ];
        assert_eq!(start_refusal(&conf(&good), "aarch64"), None);
        // Without machine: qemu-server's default for aarch64 is virt.
        assert_eq!(start_refusal(&conf(&good[..2]), "aarch64"), None);
        let mut c = conf(&good);
        c.insert("ide2".into(), "local:iso/x.iso,media=cdrom".into());
        assert!(start_refusal(&c, "aarch64").unwrap().contains("no IDE"));
        let mut c = conf(&good);
        c.insert("cpu".into(), "x86-64-v3".into());
        assert!(start_refusal(&c, "aarch64").unwrap().contains("x86-64-v3"));
        let mut c = conf(&good);
        c.insert("machine".into(), "q35".into());
        assert!(start_refusal(&c, "aarch64").unwrap().contains("q35"));
        let mut c = conf(&good);
        c.remove("efidisk0");
        assert!(start_refusal(&c, "aarch64").is_some());
        assert!(start_refusal(&conf(&[("efidisk0", "x:1")]), "aarch64").is_some());
        // The VM's own arch wins over the node's.
        assert!(start_refusal(&conf(&[("arch", "aarch64")]), "x86_64").is_some());
    }

    #[test]
    fn x86_64_takes_pc_and_q35_not_virt() {
        assert_eq!(
            start_refusal(&conf(&[("ide2", "none,media=cdrom")]), "x86_64"),
            None
        );
        assert_eq!(
            start_refusal(&conf(&[("machine", "type=q35,viommu=intel")]), "x86_64"),
            None
        );
        assert!(start_refusal(&conf(&[("machine", "virt")]), "x86_64").is_some());
    }
}
