//! What a VM runs on: `arch` (the virtual processor architecture), `bios`
//! (the firmware) and `machine` (the QEMU machine type), and what Proxmox
//! requires of each architecture.
//!
//! Rules (official API schema of `/nodes/{node}/qemu/{vmid}/config`;
//! qemu-server's aarch64 support):
//! - `arch` defaults to the architecture of the node the VM runs on (the
//!   node reports it as `current-kernel.machine` of
//!   `GET /nodes/{node}/status`).
//! - An aarch64 VM boots UEFI firmware only (`bios: ovmf`), uses the
//!   `virt` machine type and has no IDE bus; its CD-ROMs go on SCSI (or
//!   SATA).
//! - An x86_64 VM uses `pc` (i440fx, the default) or `q35`; PCI Express
//!   passthrough (`hostpci[n]` with `pcie=1`) needs `q35`.

use std::fmt;
use std::str::FromStr;

use super::disk::DiskBus;
use super::propstr::split;
use crate::error::ParseError;

/// A virtual processor architecture (`arch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arch {
    /// `x86_64` (Proxmox's usual hosts).
    X86_64,
    /// `aarch64` (64-bit ARM).
    Aarch64,
}

impl Arch {
    /// Every architecture, in Proxmox's order.
    pub const ALL: [Arch; 2] = [Arch::X86_64, Arch::Aarch64];

    /// The value Proxmox writes: `x86_64`, `aarch64`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::X86_64 => "x86_64",
            Self::Aarch64 => "aarch64",
        }
    }

    /// Parses `x86_64` or `aarch64` (also the kernel's `arm64` and `amd64`
    /// spellings some tools print).
    ///
    /// # Errors
    /// [`ParseError`] for anything else.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.trim() {
            "x86_64" | "amd64" => Ok(Self::X86_64),
            "aarch64" | "arm64" => Ok(Self::Aarch64),
            other => Err(ParseError::new(
                "architecture",
                other,
                "expected x86_64 or aarch64",
            )),
        }
    }

    /// The firmware this architecture needs, if it needs one: OVMF
    /// (UEFI) for aarch64; x86_64 boots either.
    pub fn required_firmware(self) -> Option<Firmware> {
        match self {
            Self::X86_64 => None,
            Self::Aarch64 => Some(Firmware::Ovmf),
        }
    }

    /// Whether a VM of this architecture can have a drive on `bus`
    /// (aarch64 has no IDE).
    pub fn has_bus(self, bus: DiskBus) -> bool {
        !(self == Self::Aarch64 && bus == DiskBus::Ide)
    }

    /// The bus a CD-ROM goes on when nothing else is asked: IDE on x86_64
    /// (what every guest reads), SCSI on aarch64.
    pub fn default_cdrom_bus(self) -> DiskBus {
        match self {
            Self::X86_64 => DiskBus::Ide,
            Self::Aarch64 => DiskBus::Scsi,
        }
    }

    /// Whether a VM of this architecture can use machine type `m`.
    pub fn allows_machine(self, m: &MachineType) -> bool {
        match self {
            Self::X86_64 => m.kind() != MachineKind::Virt,
            Self::Aarch64 => m.kind() == MachineKind::Virt,
        }
    }

    /// The machine type a VM of this architecture gets when none is set:
    /// `virt` for aarch64 (the only one), none for x86_64 (Proxmox's own
    /// default, i440fx, stays).
    pub fn default_machine(self) -> Option<MachineType> {
        match self {
            Self::X86_64 => None,
            Self::Aarch64 => Some(MachineType::virt()),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Arch {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// The firmware (`bios`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Firmware {
    /// `seabios` (legacy BIOS, Proxmox's default).
    SeaBios,
    /// `ovmf` (UEFI).
    Ovmf,
}

impl Firmware {
    /// `seabios` or `ovmf`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SeaBios => "seabios",
            Self::Ovmf => "ovmf",
        }
    }

    /// Parses `seabios` or `ovmf`.
    ///
    /// # Errors
    /// [`ParseError`] for anything else.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        match s.trim() {
            "seabios" => Ok(Self::SeaBios),
            "ovmf" => Ok(Self::Ovmf),
            other => Err(ParseError::new(
                "firmware",
                other,
                "expected seabios or ovmf",
            )),
        }
    }
}

impl fmt::Display for Firmware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The family of a QEMU machine type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MachineKind {
    /// `pc`, `pc-i440fx-*`: Proxmox's x86_64 default.
    I440fx,
    /// `q35`, `pc-q35-*`: x86_64 with PCI Express.
    Q35,
    /// `virt`, `virt-*`: aarch64.
    Virt,
}

impl MachineKind {
    /// How Proxmox names the family: `i440fx`, `q35`, `virt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::I440fx => "i440fx",
            Self::Q35 => "q35",
            Self::Virt => "virt",
        }
    }
}

/// A `machine` value: `[[type=]<machine type>] [,viommu=…] [,…]`, the type
/// matching the schema's pattern (`pc`, `pc-i440fx-9.2+pve1`, `q35`,
/// `pc-q35-8.1`, `virt`, `virt-9.0`, …). Other sub-options are kept
/// verbatim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineType {
    raw: String,
    kind: MachineKind,
}

impl MachineType {
    /// `virt` (aarch64).
    pub fn virt() -> Self {
        Self {
            raw: "virt".into(),
            kind: MachineKind::Virt,
        }
    }

    /// `q35` (x86_64 with PCI Express).
    pub fn q35() -> Self {
        Self {
            raw: "q35".into(),
            kind: MachineKind::Q35,
        }
    }

    /// Parses a `machine` value.
    ///
    /// # Errors
    /// [`ParseError`] when the type does not match the schema's pattern.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        const WHAT: &str = "machine property string";
        let pairs = split(s, WHAT, Some("type"))?;
        let ty = pairs
            .iter()
            .find(|(k, _)| k == "type")
            .map(|(_, v)| v.as_str())
            .unwrap_or("pc");
        let kind = classify(ty).ok_or_else(|| {
            ParseError::new(
                WHAT,
                s,
                format!("'{ty}' is not a machine type (pc, q35, virt, optionally versioned)"),
            )
        })?;
        Ok(Self {
            raw: s.to_string(),
            kind,
        })
    }

    /// The family.
    pub fn kind(&self) -> MachineKind {
        self.kind
    }
}

fn versioned(rest: &str) -> bool {
    // `<major>.<minor>[.<patch>][+pveN][.pxe]`
    let rest = rest.strip_suffix(".pxe").unwrap_or(rest);
    let (version, pve) = match rest.split_once("+pve") {
        Some((v, p)) => (v, Some(p)),
        None => (rest, None),
    };
    let parts: Vec<&str> = version.split('.').collect();
    parts.len() >= 2
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && pve.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn classify(ty: &str) -> Option<MachineKind> {
    if ty.len() > 40 {
        return None;
    }
    match ty {
        "pc" => return Some(MachineKind::I440fx),
        "q35" => return Some(MachineKind::Q35),
        "virt" => return Some(MachineKind::Virt),
        _ => {}
    }
    if let Some(rest) = ty.strip_prefix("pc-q35-") {
        return versioned(rest).then_some(MachineKind::Q35);
    }
    if let Some(rest) = ty.strip_prefix("pc-i440fx-") {
        return versioned(rest).then_some(MachineKind::I440fx);
    }
    if let Some(rest) = ty.strip_prefix("pc-") {
        return versioned(rest).then_some(MachineKind::I440fx);
    }
    if let Some(rest) = ty.strip_prefix("virt-") {
        let rest = rest.strip_suffix(".pxe").unwrap_or(rest);
        return versioned(rest).then_some(MachineKind::Virt);
    }
    if let Some(pve) = ty.strip_prefix("virt+pve") {
        return (!pve.is_empty() && pve.bytes().all(|b| b.is_ascii_digit()))
            .then_some(MachineKind::Virt);
    }
    None
}

impl fmt::Display for MachineType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl FromStr for MachineType {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures() {
        assert_eq!(Arch::parse("aarch64").unwrap(), Arch::Aarch64);
        assert_eq!(Arch::parse("arm64").unwrap(), Arch::Aarch64);
        assert_eq!(Arch::parse("x86_64").unwrap().as_str(), "x86_64");
        assert!(Arch::parse("riscv64").is_err());
        assert!(!Arch::Aarch64.has_bus(DiskBus::Ide));
        assert!(Arch::Aarch64.has_bus(DiskBus::Sata));
        assert!(Arch::X86_64.has_bus(DiskBus::Ide));
        assert_eq!(Arch::Aarch64.default_cdrom_bus(), DiskBus::Scsi);
        assert_eq!(Arch::X86_64.default_cdrom_bus(), DiskBus::Ide);
        assert_eq!(Arch::Aarch64.required_firmware(), Some(Firmware::Ovmf));
        assert_eq!(Arch::X86_64.required_firmware(), None);
    }

    #[test]
    fn machine_types_follow_the_schema_pattern() {
        for (s, kind) in [
            ("pc", MachineKind::I440fx),
            ("pc-i440fx-9.2+pve1", MachineKind::I440fx),
            ("pc-8.1", MachineKind::I440fx),
            ("q35", MachineKind::Q35),
            ("pc-q35-8.1.5+pve2.pxe", MachineKind::Q35),
            ("type=q35,viommu=intel", MachineKind::Q35),
            ("virt", MachineKind::Virt),
            ("virt-9.0", MachineKind::Virt),
            ("virt+pve1", MachineKind::Virt),
            ("viommu=virtio", MachineKind::I440fx),
        ] {
            let m = MachineType::parse(s).unwrap();
            assert_eq!(m.kind(), kind, "{s}");
            assert_eq!(m.to_string(), s);
        }
        for bad in ["q36", "pc-q35", "virt-9", "pc-i440fx-x.y", "microvm"] {
            assert!(MachineType::parse(bad).is_err(), "{bad}");
        }
        assert!(Arch::Aarch64.allows_machine(&MachineType::virt()));
        assert!(!Arch::Aarch64.allows_machine(&MachineType::q35()));
        assert!(!Arch::X86_64.allows_machine(&MachineType::virt()));
        assert_eq!(Arch::Aarch64.default_machine(), Some(MachineType::virt()));
    }

    #[test]
    fn firmware() {
        assert_eq!(Firmware::parse("ovmf").unwrap(), Firmware::Ovmf);
        assert_eq!(Firmware::SeaBios.to_string(), "seabios");
        assert!(Firmware::parse("uefi").is_err());
    }
}
