//! The indexed names of Proxmox VM config keys (`scsi0`, `net3`, …) and
//! their limits in qemu-server (`/nodes/{node}/qemu/{vmid}/config`).

/// `<prefix><n>` with `n` in `0..=max`, without leading zeros.
pub(super) fn indexed(name: &str, prefix: &str, max: u32) -> bool {
    name.strip_prefix(prefix).is_some_and(|n| {
        !n.is_empty()
            && n.chars().all(|c| c.is_ascii_digit())
            && (n == "0" || !n.starts_with('0'))
            && n.parse::<u32>().is_ok_and(|v| v <= max)
    })
}

/// `scsi0..scsi30`, `virtio0..virtio15`, `sata0..sata5`, `ide0..ide3` (qemu-server limits).
pub(crate) fn is_disk_slot(s: &str) -> bool {
    indexed(s, "scsi", 30)
        || indexed(s, "virtio", 15)
        || indexed(s, "sata", 5)
        || indexed(s, "ide", 3)
}

/// `net0..net31`.
pub(crate) fn is_net_name(s: &str) -> bool {
    indexed(s, "net", 31)
}
