//! Proxmox property strings as types: parse what the server returns, format
//! what the server accepts, and round-trip between the two.
//!
//! A property string is a comma-separated `key=value` list where one key (the
//! format's `default_key`) may be written bare (docs/proxmox-semantics.md
//! §18; the formats are those of the official API schema).
//! Formatting follows the server's canonical form: the default key first and
//! bare, then the remaining keys in alphabetical order, booleans as `1`/`0`,
//! sizes with the largest exact unit. Sub-options this crate does not model are
//! kept verbatim in an `extra`/`options` map so nothing is lost on a
//! read-modify-write.

mod agent;
mod arch;
mod boot;
mod cpu;
mod disk;
mod hostpci;
mod ipconfig;
mod net;
pub(crate) mod propstr;
mod size;
mod smbios;
mod startup;
mod tags;

pub use agent::AgentOption;
pub use arch::{Arch, Firmware, MachineKind, MachineType};
pub use boot::Boot;
pub use cpu::{
    BUILTIN_MODELS, CUSTOM_PREFIX, Cpu, CpuFlag, CpuModelKind, VM_CPU_FLAGS, cpu_model_kind,
};
pub use disk::{Disk, DiskBus, DiskMedia, DiskSlot};
pub use hostpci::{HostPci, MAX_HOSTPCI_INDEX, is_config_id};
pub use ipconfig::{IpConfig, Ipv4Config, Ipv6Config};
pub use net::{MacAddr, NetDevice, NetModel};
pub use size::DiskSize;
pub use smbios::Smbios1;
pub use startup::Startup;
pub use tags::{Tag, Tags};
