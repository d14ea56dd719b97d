//! The one config write that turns a fresh clone into the machine's VM.
//!
//! [`desired`] computes what the spec asks for; [`update`] compares it with
//! the VM's current config (`GET …/config`) and returns the
//! [`ConfigUpdate`] that changes only what differs — so a re-run after the
//! write changes nothing (level-triggered, idempotent). Everything goes in
//! one `POST …/config` with the `digest` that was read, so a concurrent edit
//! fails with a retryable conflict instead of being overwritten (field case
//! B30).
//!
//! Rules:
//! - CPU (`sockets`, `cores`) and `memory` (**MiB**) when the spec sets them;
//!   the CPU model and flags (`cpu`) as [`cpu`](mod@cpu) says.
//! - NICs `netN`: model, bridge (spec ▸ for `net0` the instance's bridge ▸
//!   the template's), VLAN `tag`, `mtu`, `firewall`, `link_down`, MAC (spec ▸
//!   the MAC the VM has: **an existing MAC is never changed**). Fields the
//!   spec leaves out keep the template's value. `net0` always exists (the
//!   default device). NICs the spec does not name are left alone.
//! - `tags`: the VM's tags without other machines' ownership tags, plus the
//!   spec's tags and this machine's marker tag (compared as sets,
//!   case-insensitively, docs/proxmox-semantics.md §15).
//! - `description` carries the marker line; `name` is the machine name.
//! - `onboot`, `startup`, `boot` order when the spec sets them; `agent: 1`
//!   unless `checks.skipQemuGuestAgent`.
//! - Additional volumes that do not exist yet: `STORAGE:SIZE_GiB` with
//!   `format`, `discard=on`, `ssd=1`, `iothread=1` as asked, on the spec's
//!   storage ▸ the boot disk's storage. Existing ones are grown by
//!   [`super::disks`], never recreated.
//! - The bootstrap ISO as a CD-ROM in the first free slot of `ide0`..`ide3`,
//!   `sata0`..`sata5` (reusing an empty CD-ROM drive).
//! - Firmware by architecture ([`crate::machine::vm::arch`]): on aarch64
//!   `bios: ovmf`, `machine: virt` and an `efidisk0` beside the boot disk
//!   when the clone lacks them.
//! - Never touched: an existing `efidisk0`, `tpmstate0`, the cloud-init
//!   drive, `smbios1`, `arch`.

mod cpu;
mod desired;
mod nics;
mod update;

#[cfg(test)]
mod tests;

pub use cpu::*;
pub use desired::*;
pub use nics::*;
pub use update::*;
