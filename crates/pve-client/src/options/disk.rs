//! Disk drives: `scsi[n]`, `virtio[n]`, `sata[n]`, `ide[n]`, `efidisk0`,
//! `tpmstate0` (`local-lvm:vm-101-disk-0,discard=on,iothread=1,size=32G`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::propstr::{check_value, join, split};
use super::size::DiskSize;
use crate::error::ParseError;

const WHAT: &str = "disk property string";

/// A disk bus, with the slot range Proxmox allows on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DiskBus {
    /// `ide0` ..= `ide3` (cloud-init drives and CD-ROMs, usually `ide2`).
    Ide,
    /// `sata0` ..= `sata5`.
    Sata,
    /// `scsi0` ..= `scsi30`.
    Scsi,
    /// `virtio0` ..= `virtio15`.
    Virtio,
}

impl DiskBus {
    /// The key prefix, e.g. `scsi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ide => "ide",
            Self::Sata => "sata",
            Self::Scsi => "scsi",
            Self::Virtio => "virtio",
        }
    }

    /// Highest slot index on this bus.
    pub fn max_index(self) -> u8 {
        match self {
            Self::Ide => 3,
            Self::Sata => 5,
            Self::Scsi => 30,
            Self::Virtio => 15,
        }
    }
}

/// A disk slot such as `scsi0` — the config key of a drive and the `disk`
/// parameter of `PUT …/resize`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskSlot {
    bus: DiskBus,
    index: u8,
}

impl DiskSlot {
    /// A slot, checked against the bus's range.
    ///
    /// # Errors
    /// [`ParseError`] when `index` is beyond [`DiskBus::max_index`].
    pub fn new(bus: DiskBus, index: u8) -> Result<Self, ParseError> {
        if index > bus.max_index() {
            return Err(ParseError::new(
                "disk slot",
                format!("{}{index}", bus.as_str()),
                format!("{} slots go from 0 to {}", bus.as_str(), bus.max_index()),
            ));
        }
        Ok(Self { bus, index })
    }

    /// Parses a config key like `scsi0`, `virtio15`, `ide2`.
    ///
    /// # Errors
    /// [`ParseError`] for unknown buses, missing or out-of-range indexes.
    pub fn parse(key: &str) -> Result<Self, ParseError> {
        let split_at = key.find(|c: char| c.is_ascii_digit()).unwrap_or(key.len());
        let (prefix, digits) = key.split_at(split_at);
        let bus = match prefix {
            "ide" => DiskBus::Ide,
            "sata" => DiskBus::Sata,
            "scsi" => DiskBus::Scsi,
            "virtio" => DiskBus::Virtio,
            _ => {
                return Err(ParseError::new(
                    "disk slot",
                    key,
                    "expected ideN, sataN, scsiN or virtioN",
                ));
            }
        };
        if digits.is_empty()
            || !digits.bytes().all(|b| b.is_ascii_digit())
            || (digits.len() > 1 && digits.starts_with('0'))
        {
            return Err(ParseError::new("disk slot", key, "expected a slot number"));
        }
        let index: u8 = digits
            .parse()
            .map_err(|_| ParseError::new("disk slot", key, "slot number too large"))?;
        Self::new(bus, index)
    }

    /// The bus.
    pub fn bus(self) -> DiskBus {
        self.bus
    }

    /// The slot index.
    pub fn index(self) -> u8 {
        self.index
    }
}

impl fmt::Display for DiskSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.bus.as_str(), self.index)
    }
}

impl FromStr for DiskSlot {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Drive media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DiskMedia {
    /// `media=disk` (the default when absent).
    Disk,
    /// `media=cdrom`: CD-ROM drives, ISOs and the cloud-init drive.
    Cdrom,
}

impl DiskMedia {
    fn as_str(self) -> &'static str {
        match self {
            Self::Disk => "disk",
            Self::Cdrom => "cdrom",
        }
    }
}

/// A drive value (`scsi[n]`, `virtio[n]`, `sata[n]`, `ide[n]`, `efidisk0`,
/// `tpmstate0`).
///
/// Format: `[file=]<volume> [,media=<cdrom|disk>] [,size=<DiskSize>]
/// [,<option>=<value>…]`. The server prints the volume first (bare), then the
/// other keys alphabetically, sizes with the largest exact unit:
/// `local-lvm:vm-101-disk-0,discard=on,iothread=1,size=32G`. Options this crate
/// does not model (`discard`, `iothread`, `ssd`, `cache`, `format`, `efitype`,
/// `pre-enrolled-keys`, `version`, …) are kept verbatim in [`Disk::options`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disk {
    /// The volume: a volume id (`local-lvm:vm-101-disk-0`,
    /// `local:iso/seed.iso`), the new-disk syntax `STORAGE:SIZE_GiB`
    /// (`local-lvm:32`), `STORAGE:cloudinit`, `none` or `cdrom`.
    pub file: String,
    /// Media type; `None` means the default (`disk`).
    pub media: Option<DiskMedia>,
    /// Size as recorded by Proxmox (informational; change it with resize).
    pub size: Option<DiskSize>,
    /// All other sub-options, verbatim.
    pub options: BTreeMap<String, String>,
}

impl Disk {
    /// An existing volume attached as a disk.
    pub fn volume(volid: impl Into<String>) -> Self {
        Self {
            file: volid.into(),
            media: None,
            size: None,
            options: BTreeMap::new(),
        }
    }

    /// A new volume of `size_gib` **GiB** on `storage` (new-disk syntax
    /// `STORAGE:SIZE_GiB`, qemu-server `NEW_DISK_RE`).
    pub fn new_volume(storage: &str, size_gib: u64) -> Self {
        Self::volume(format!("{storage}:{size_gib}"))
    }

    /// An ISO volume (`local:iso/seed.iso`) as a CD-ROM (`media=cdrom`).
    pub fn cdrom(volid: impl Into<String>) -> Self {
        let mut d = Self::volume(volid);
        d.media = Some(DiskMedia::Cdrom);
        d
    }

    /// An empty CD-ROM drive (`none,media=cdrom`), used to eject an ISO.
    pub fn empty_cdrom() -> Self {
        Self::cdrom("none")
    }

    /// A new cloud-init drive on `storage` (`STORAGE:cloudinit`).
    pub fn new_cloudinit(storage: &str) -> Self {
        Self::volume(format!("{storage}:cloudinit"))
    }

    /// Parses a drive value.
    ///
    /// # Errors
    /// [`ParseError`] for a missing volume, bad `size` or `media`, or keys
    /// that are not `[a-z0-9_-]+`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut file = None;
        let mut d = Self::volume(String::new());
        for (k, v) in split(s, WHAT, Some("file"))? {
            match k.as_str() {
                "file" | "volume" => {
                    if file.replace(v).is_some() {
                        return Err(ParseError::new(WHAT, s, "volume given twice"));
                    }
                }
                "media" => {
                    d.media = Some(match v.as_str() {
                        "disk" => DiskMedia::Disk,
                        "cdrom" => DiskMedia::Cdrom,
                        _ => {
                            return Err(ParseError::new(
                                WHAT,
                                s,
                                format!("media must be disk or cdrom, got '{v}'"),
                            ));
                        }
                    });
                }
                "size" => d.size = Some(DiskSize::parse(&v)?),
                _ if valid_key(&k) => {
                    d.options.insert(k, v);
                }
                _ => return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'"))),
            }
        }
        d.file = file.ok_or_else(|| ParseError::new(WHAT, s, "volume is missing"))?;
        Ok(d)
    }

    /// Checks that the value can be printed as a property string.
    ///
    /// # Errors
    /// [`ParseError`] naming the field.
    pub fn validate(&self) -> Result<(), ParseError> {
        check_value(WHAT, "file", &self.file)?;
        for (k, v) in &self.options {
            if !valid_key(k) || matches!(k.as_str(), "file" | "volume" | "media" | "size") {
                return Err(ParseError::new(
                    WHAT,
                    k.clone(),
                    "invalid or reserved key in options",
                ));
            }
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }

    /// The storage part of the volume (`local-lvm` of `local-lvm:vm-101-disk-0`).
    pub fn storage(&self) -> Option<&str> {
        self.file.split_once(':').map(|(s, _)| s)
    }

    /// The volume name part (`vm-101-disk-0` of `local-lvm:vm-101-disk-0`).
    pub fn volume_name(&self) -> Option<&str> {
        self.file.split_once(':').map(|(_, v)| v)
    }

    /// Whether this drive is a CD-ROM (`media=cdrom`, or the literal `cdrom`).
    pub fn is_cdrom(&self) -> bool {
        self.media == Some(DiskMedia::Cdrom) || self.file == "cdrom"
    }

    /// Whether this is a cloud-init drive (`…:vm-<id>-cloudinit[.fmt]` or
    /// `STORAGE:cloudinit`).
    pub fn is_cloudinit(&self) -> bool {
        self.volume_name().is_some_and(|v| {
            v == "cloudinit"
                || v.rsplit('/')
                    .next()
                    .is_some_and(|n| n.contains("-cloudinit"))
        })
    }
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
}

impl fmt::Display for Disk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest: BTreeMap<&str, String> = BTreeMap::new();
        if let Some(m) = self.media {
            rest.insert("media", m.as_str().to_owned());
        }
        if let Some(s) = self.size {
            rest.insert("size", s.to_string());
        }
        for (k, v) in &self.options {
            rest.insert(k, v.clone());
        }
        let parts = std::iter::once((None, self.file.clone()))
            .chain(rest.into_iter().map(|(k, v)| (Some(k), v)));
        f.write_str(&join(parts))
    }
}

impl FromStr for Disk {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slots() {
        assert_eq!(DiskSlot::parse("scsi0").unwrap().to_string(), "scsi0");
        assert_eq!(DiskSlot::parse("scsi30").unwrap().index(), 30);
        assert_eq!(DiskSlot::parse("virtio15").unwrap().bus(), DiskBus::Virtio);
        assert_eq!(DiskSlot::parse("ide3").unwrap().bus(), DiskBus::Ide);
        assert_eq!(DiskSlot::parse("sata5").unwrap().bus(), DiskBus::Sata);
        for bad in [
            "scsi31", "virtio16", "ide4", "sata6", "scsi", "nvme0", "scsi01", "efidisk0", "scsi-1",
        ] {
            assert!(DiskSlot::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_canonical_disk() {
        let s = "local-lvm:vm-101-disk-0,discard=on,iothread=1,size=32G";
        let d = Disk::parse(s).unwrap();
        assert_eq!(d.file, "local-lvm:vm-101-disk-0");
        assert_eq!(d.storage(), Some("local-lvm"));
        assert_eq!(d.volume_name(), Some("vm-101-disk-0"));
        assert_eq!(d.size, Some(DiskSize::from_gib(32)));
        assert_eq!(d.options.get("discard").map(String::as_str), Some("on"));
        assert!(!d.is_cdrom());
        assert_eq!(d.to_string(), s);
    }

    #[test]
    fn b10_efidisk_and_tpmstate_sizes() {
        let efi = Disk::parse("shared-rbd:vm-9000-disk-1,efitype=4m,pre-enrolled-keys=1,size=528K")
            .unwrap();
        assert_eq!(efi.size.map(DiskSize::bytes), Some(528 * 1024));
        assert_eq!(
            efi.to_string(),
            "shared-rbd:vm-9000-disk-1,efitype=4m,pre-enrolled-keys=1,size=528K"
        );
        let tpm = Disk::parse("shared-rbd:vm-9000-disk-2,size=4M,version=v2.0").unwrap();
        assert_eq!(tpm.size, Some(DiskSize::from_mib(4)));
        assert_eq!(tpm.options.get("version").map(String::as_str), Some("v2.0"));
    }

    #[test]
    fn cdroms_and_cloudinit() {
        let ci = Disk::parse("local-lvm:vm-101-cloudinit,media=cdrom").unwrap();
        assert!(ci.is_cdrom());
        assert!(ci.is_cloudinit());
        let ci2 = Disk::parse("local:101/vm-101-cloudinit.qcow2,media=cdrom").unwrap();
        assert!(ci2.is_cloudinit());
        let iso = Disk::cdrom("nfs-iso:iso/capmox-101.iso");
        assert_eq!(iso.to_string(), "nfs-iso:iso/capmox-101.iso,media=cdrom");
        assert!(!iso.is_cloudinit());
        assert_eq!(Disk::empty_cdrom().to_string(), "none,media=cdrom");
        assert_eq!(
            Disk::new_cloudinit("local-lvm").to_string(),
            "local-lvm:cloudinit"
        );
        assert!(Disk::new_cloudinit("local-lvm").is_cloudinit());
        assert_eq!(
            Disk::new_volume("local-lvm", 32).to_string(),
            "local-lvm:32"
        );
        assert_eq!(
            Disk::parse("file=local-lvm:vm-1-disk-0").unwrap().file,
            "local-lvm:vm-1-disk-0"
        );
    }

    #[test]
    fn refuses_invalid() {
        for bad in [
            "size=32G",
            "a:b,size=3X",
            "a:b,media=floppy",
            "a:b,file=c:d",
            "a:b,Cache=none",
        ] {
            assert!(Disk::parse(bad).is_err(), "{bad}");
        }
        let mut d = Disk::volume("local-lvm:vm-1-disk-0");
        d.options.insert("size".into(), "1G".into());
        assert!(d.validate().is_err());
        let d = Disk::volume("a:b,size=1");
        assert!(d.validate().is_err());
    }

    fn arb_disk() -> impl Strategy<Value = Disk> {
        (
            "[a-z][a-z0-9-]{1,8}:(vm|base)-[1-9][0-9]{2}-disk-[0-9]",
            proptest::option::of(prop_oneof![Just(DiskMedia::Disk), Just(DiskMedia::Cdrom)]),
            proptest::option::of(any::<u64>().prop_map(DiskSize::from_bytes)),
            proptest::collection::btree_map(
                "(discard|iothread|ssd|cache|backup|replicate|aio)",
                "[a-z0-9_]{1,8}",
                0..4,
            ),
        )
            .prop_map(|(file, media, size, options)| Disk {
                file,
                media,
                size,
                options,
            })
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(d in arb_disk()) {
            prop_assert!(d.validate().is_ok());
            let s = d.to_string();
            let back = Disk::parse(&s).unwrap();
            prop_assert_eq!(&back, &d);
            prop_assert_eq!(back.to_string(), s);
        }
    }
}
