//! Property strings and small formats, parsed and printed the way
//! qemu-server stores them (docs/proxmox-semantics.md §14, §15, §18): `netN`
//! (`virtio=BC:24:11:…,bridge=vmbr0,tag=112`), drives
//! (`ceph:vm-101-disk-0,discard=on,size=32G`), sizes (largest exact unit),
//! tags (lower-cased, de-duplicated, sorted, `;`-joined), MAC addresses.

use std::collections::BTreeMap;

/// NIC models that may be written `<model>=<mac>` (net format `keyAlias`).
pub(crate) const NET_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

const NET_BOOLEANS: &[&str] = &["firewall", "link_down"];
const DRIVE_BOOLEANS: &[&str] = &[
    "backup",
    "detect_zeroes",
    "iothread",
    "pre-enrolled-keys",
    "replicate",
    "ro",
    "shared",
    "ssd",
];

/// `pve-node` format: letters, digits, inner hyphens.
pub fn node_name_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
}

/// Parses a Proxmox size (`32G`, `528K`, `1.5T`, `4096` = bytes; `GiB` suffixes
/// accepted) into bytes. Returns `None` when it does not match
/// `(\d+(\.\d+)?)([KMGT](iB)?)?`.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let digits_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(digits_end);
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return None;
    }
    let mult: u64 = match unit {
        "" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        _ => return None,
    };
    let value: f64 = num.parse().ok()?;
    let bytes = value * mult as f64;
    if !bytes.is_finite() || bytes < 0.0 || bytes > u64::MAX as f64 {
        return None;
    }
    Some(bytes as u64)
}

/// Prints bytes with the largest unit that divides exactly (`34G`, `528K`,
/// `1000` when no unit divides).
pub fn format_size(bytes: u64) -> String {
    for (unit, shift) in [("T", 40u32), ("G", 30), ("M", 20), ("K", 10)] {
        let m = 1u64 << shift;
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{unit}", bytes / m);
        }
    }
    bytes.to_string()
}

/// Key/value pairs of a property string in input order.
pub(crate) type Pairs = Vec<(String, String)>;

/// Splits a property string on `,` into key/value pairs; a bare value belongs
/// to `default_key`. Errors use pve-common's texts.
pub(crate) fn split_pairs(s: &str, default_key: Option<&str>) -> Result<Pairs, String> {
    let mut out: Pairs = Vec::new();
    for part in s.split(',') {
        if part.is_empty() {
            continue;
        }
        let (k, v) = match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match default_key {
                Some(d) => (d.to_string(), part.to_string()),
                None => {
                    return Err(
                        "value without key, but schema does not define a default key".into(),
                    );
                }
            },
        };
        if out.iter().any(|(ek, _)| *ek == k) {
            return Err(format!(
                "duplicate key in comma-separated list property: {k}"
            ));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// Proxmox boolean spellings inside property strings (`1|on|yes|true`, `0|off|no|false`).
pub(crate) fn parse_bool_word(v: &str) -> Option<bool> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some(true),
        "0" | "off" | "no" | "false" => Some(false),
        _ => None,
    }
}

/// Prints pairs: default key bare first, then the rest sorted by key.
fn print_canonical(default: Option<(&str, &str)>, rest: &BTreeMap<String, String>) -> String {
    let mut parts = Vec::with_capacity(rest.len() + 1);
    if let Some((_, v)) = default {
        parts.push(v.to_string());
    }
    for (k, v) in rest {
        parts.push(format!("{k}={v}"));
    }
    parts.join(",")
}

/// A parsed `netN` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Net {
    /// NIC model (`virtio`, `e1000`, …).
    pub model: String,
    /// MAC address, upper-case, if set.
    pub macaddr: Option<String>,
    /// Other options (`bridge`, `tag`, `firewall`, `mtu`, …).
    pub opts: BTreeMap<String, String>,
}

impl Net {
    /// Parses `virtio=BC:24:11:00:00:01,bridge=vmbr0` or `model=virtio,macaddr=…`.
    pub fn parse(s: &str) -> Result<Net, String> {
        let pairs = split_pairs(s, Some("model"))?;
        let mut model = None;
        let mut mac = None;
        let mut opts = BTreeMap::new();
        for (k, v) in pairs {
            if NET_MODELS.contains(&k.as_str()) {
                if model.is_some() {
                    return Err(format!(
                        "duplicate key in comma-separated list property: {k}"
                    ));
                }
                model = Some(k);
                mac = Some(v);
            } else if k == "model" {
                model = Some(v);
            } else if k == "macaddr" {
                mac = Some(v);
            } else if NET_BOOLEANS.contains(&k.as_str()) {
                let b = parse_bool_word(&v)
                    .ok_or_else(|| format!("{k}: type check ('boolean') failed - got '{v}'"))?;
                opts.insert(k, if b { "1" } else { "0" }.to_string());
            } else {
                opts.insert(k, v);
            }
        }
        let model =
            model.ok_or_else(|| "property is missing and it is not optional".to_string())?;
        if !NET_MODELS.contains(&model.as_str()) {
            return Err(format!(
                "model: value '{model}' does not have a value in the enumeration"
            ));
        }
        let macaddr = match mac {
            Some(m) if m.is_empty() => None,
            Some(m) => {
                if !mac_ok(&m) {
                    return Err(format!(
                        "macaddr: invalid format - value does not look like a valid unicast MAC address: '{m}'"
                    ));
                }
                Some(m.to_ascii_uppercase())
            }
            None => None,
        };
        Ok(Net {
            model,
            macaddr,
            opts,
        })
    }

    /// Canonical form: `<model>=<MAC>` first, then options sorted.
    pub fn print(&self) -> String {
        let head = match &self.macaddr {
            Some(m) => format!("{}={m}", self.model),
            None => self.model.clone(),
        };
        let rest = print_canonical(None, &self.opts);
        if rest.is_empty() {
            head
        } else {
            format!("{head},{rest}")
        }
    }

    /// Bridge name, if any.
    pub fn bridge(&self) -> Option<&str> {
        self.opts.get("bridge").map(String::as_str)
    }
}

/// `mac-addr`: unicast (second hex digit even).
pub(crate) fn mac_ok(m: &str) -> bool {
    let parts: Vec<&str> = m.split(':').collect();
    if parts.len() != 6
        || parts
            .iter()
            .any(|p| p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return false;
    }
    u8::from_str_radix(parts[0], 16).is_ok_and(|b| b & 1 == 0)
}

/// Generates a MAC the way `PVE::Tools::random_ether_addr` does: random
/// bytes, multicast bit cleared, locally-administered bit set, then the
/// datacenter prefix written over the leading characters. Upper-case.
pub(crate) fn generate_mac(prefix: &str, random: [u8; 6]) -> String {
    let mut b = random;
    b[0] = (b[0] & 0xfe) | 0x02;
    let mut text: Vec<char> = b
        .iter()
        .map(|x| format!("{x:02X}"))
        .collect::<Vec<_>>()
        .join(":")
        .chars()
        .collect();
    for (i, c) in prefix.to_ascii_uppercase().chars().enumerate() {
        if i < text.len() {
            text[i] = c;
        }
    }
    text.into_iter().collect()
}

/// A parsed drive value (`scsiN`, `virtioN`, `sataN`, `ideN`, `efidisk0`,
/// `tpmstate0`, `unusedN`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Drive {
    /// The `file` (volume ID, `none`, `cdrom`, or a new-disk `storage:size`).
    pub file: String,
    /// Options, canonical (booleans 1/0, `size` with the largest unit).
    pub opts: BTreeMap<String, String>,
}

impl Drive {
    /// Parses a drive string. `volume=` is an alias of `file=`.
    pub fn parse(s: &str) -> Result<Drive, String> {
        let pairs = split_pairs(s, Some("file"))?;
        let mut file = None;
        let mut opts = BTreeMap::new();
        for (k, v) in pairs {
            match k.as_str() {
                "file" | "volume" => file = Some(v),
                "size" => {
                    let bytes = parse_size(&v).ok_or_else(|| {
                        format!("size: invalid format - unable to parse size '{v}'")
                    })?;
                    opts.insert(k, format_size(bytes));
                }
                _ if DRIVE_BOOLEANS.contains(&k.as_str()) => {
                    let b = parse_bool_word(&v)
                        .ok_or_else(|| format!("{k}: type check ('boolean') failed - got '{v}'"))?;
                    opts.insert(k, if b { "1" } else { "0" }.to_string());
                }
                _ => {
                    opts.insert(k, v);
                }
            }
        }
        let file =
            file.ok_or_else(|| "file: property is missing and it is not optional".to_string())?;
        Ok(Drive { file, opts })
    }

    /// Canonical form: file first, options sorted.
    pub fn print(&self) -> String {
        print_canonical(Some(("file", &self.file)), &self.opts)
    }

    /// `media=cdrom` (or the file is `cdrom`).
    pub fn is_cdrom(&self) -> bool {
        self.opts.get("media").map(String::as_str) == Some("cdrom") || self.file == "cdrom"
    }

    /// A Proxmox cloud-init drive (`…:vm-<id>-cloudinit…` or `storage:cloudinit`).
    pub fn is_cloudinit(&self) -> bool {
        let vol = self
            .file
            .split_once(':')
            .map(|(_, v)| v)
            .unwrap_or(&self.file);
        vol == "cloudinit" || vol.contains("-cloudinit")
    }

    /// Size in bytes from the `size` option.
    pub fn size(&self) -> Option<u64> {
        self.opts.get("size").and_then(|s| parse_size(s))
    }

    /// The storage part of the volume ID, if it is one.
    pub fn storage(&self) -> Option<&str> {
        self.file
            .split_once(':')
            .map(|(s, _)| s)
            .filter(|s| !s.starts_with('/'))
    }
}

/// Whether a config key names a drive (`is_valid_drivename` plus `unusedN`
/// handled separately).
pub(crate) fn is_drive_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    indexed(key, "ide", 3)
        || indexed(key, "sata", 5)
        || indexed(key, "scsi", 30)
        || indexed(key, "virtio", 15)
}

/// `unusedN`.
pub(crate) fn is_unused_key(key: &str) -> bool {
    indexed(key, "unused", 255)
}

/// `netN`.
pub(crate) fn is_net_key(key: &str) -> bool {
    indexed(key, "net", 31)
}

/// `prefix<N>` with `N <= max`, no leading zeros.
pub(crate) fn indexed(key: &str, prefix: &str, max: u32) -> bool {
    key.strip_prefix(prefix).is_some_and(|n| {
        !n.is_empty()
            && n.bytes().all(|b| b.is_ascii_digit())
            && (n == "0" || !n.starts_with('0'))
            && n.parse::<u32>().is_ok_and(|i| i <= max)
    })
}

/// Validates one tag (`[a-z0-9_][a-z0-9_\-+.]*`, case-insensitive).
pub(crate) fn tag_ok(t: &str) -> bool {
    let mut chars = t.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.'))
}

/// Splits a `*-list` value on `,`, `;`, whitespace or NUL (pve-common `split_list`).
pub(crate) fn split_list(s: &str) -> Vec<&str> {
    s.split(|c: char| c == ',' || c == ';' || c == '\0' || c.is_whitespace())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Normalises tags as `get_unique_tags` does: lower-case, unique, sorted, `;`.
pub(crate) fn normalize_tags(s: &str) -> String {
    let mut tags: Vec<String> = split_list(s)
        .into_iter()
        .map(|t| t.to_ascii_lowercase())
        .collect();
    tags.sort();
    tags.dedup();
    tags.join(";")
}

/// Parses `ipconfigN` (`ip=10.0.0.5/24,gw=10.0.0.1,ip6=…,gw6=…`).
pub(crate) fn parse_ipconfig(s: &str) -> Result<BTreeMap<String, String>, String> {
    let pairs = split_pairs(s, None)?;
    let mut out = BTreeMap::new();
    for (k, v) in pairs {
        if !matches!(k.as_str(), "ip" | "gw" | "ip6" | "gw6") {
            return Err(format!("invalid key in comma-separated list property: {k}"));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// Generic key=value parse for `agent` (`[enabled=]<1|0>,…`): whether the
/// agent is enabled.
pub(crate) fn agent_enabled(value: &str) -> bool {
    split_pairs(value, Some("enabled"))
        .ok()
        .and_then(|p| p.into_iter().find(|(k, _)| k == "enabled").map(|(_, v)| v))
        .and_then(|v| parse_bool_word(&v))
        .unwrap_or(false)
}

/// Memory in MiB from `memory` (`[current=]<MiB>`), default 512.
pub(crate) fn memory_mib(value: Option<&str>) -> u64 {
    value
        .and_then(|v| split_pairs(v, Some("current")).ok())
        .and_then(|p| p.into_iter().find(|(k, _)| k == "current").map(|(_, v)| v))
        .and_then(|v| v.parse().ok())
        .unwrap_or(512)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("32G"), Some(32 << 30));
        assert_eq!(parse_size("528K"), Some(528 << 10));
        assert_eq!(parse_size("4M"), Some(4 << 20));
        assert_eq!(parse_size("1.5G"), Some(1_610_612_736));
        assert_eq!(parse_size("100"), Some(100));
        assert_eq!(parse_size("20GiB"), Some(20 << 30));
        assert_eq!(parse_size("G"), None);
        assert_eq!(parse_size("1.G"), None);
        assert_eq!(parse_size("3X"), None);
        assert_eq!(format_size(34 << 30), "34G");
        assert_eq!(format_size(528 << 10), "528K");
        assert_eq!(format_size(1536 << 20), "1536M");
        assert_eq!(format_size(4 << 40), "4T");
        assert_eq!(format_size(1000), "1000");
    }

    #[test]
    fn net_canonical() {
        let n =
            Net::parse("bridge=vmbr0,model=virtio,macaddr=bc:24:11:aa:bb:cc,tag=112,firewall=on")
                .unwrap();
        assert_eq!(
            n.print(),
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1,tag=112"
        );
        let n = Net::parse("virtio,bridge=vmbr1").unwrap();
        assert_eq!(n.macaddr, None);
        assert_eq!(n.print(), "virtio,bridge=vmbr1");
        assert!(
            Net::parse("virtio=01:00:00:00:00:00").is_err(),
            "multicast MAC refused"
        );
        assert!(Net::parse("bridge=vmbr0").is_err(), "model is required");
    }

    #[test]
    fn drive_canonical() {
        let d =
            Drive::parse("size=34359738368,file=local-lvm:vm-101-disk-0,iothread=on,discard=on")
                .unwrap();
        assert_eq!(
            d.print(),
            "local-lvm:vm-101-disk-0,discard=on,iothread=1,size=32G"
        );
        let c = Drive::parse("cephfs:iso/seed.iso,media=cdrom").unwrap();
        assert!(c.is_cdrom());
        assert!(!c.is_cloudinit());
        assert!(
            Drive::parse("ceph:vm-101-cloudinit,media=cdrom")
                .unwrap()
                .is_cloudinit()
        );
        assert_eq!(
            split_pairs("a=1,a=2", None).unwrap_err(),
            "duplicate key in comma-separated list property: a"
        );
    }

    #[test]
    fn macs() {
        let m = generate_mac("BC:24:11", [0xff, 0xff, 0xff, 0x12, 0x34, 0x56]);
        assert_eq!(m, "BC:24:11:12:34:56");
        let m = generate_mac("", [0x01, 0, 0, 0, 0, 0]);
        assert_eq!(m, "02:00:00:00:00:00");
        assert!(mac_ok("BC:24:11:12:34:56"));
        assert!(!mac_ok("BD:24:11:12:34:56"));
    }

    #[test]
    fn tags_and_keys() {
        assert_eq!(
            normalize_tags("Ubuntu-24.04,capmox;capmox k8s_1.30"),
            "capmox;k8s_1.30;ubuntu-24.04"
        );
        assert!(
            tag_ok("a+b") && tag_ok("_x") && !tag_ok("-lead") && !tag_ok(".lead") && !tag_ok("a b")
        );
        assert!(is_drive_key("scsi30") && !is_drive_key("scsi31") && !is_drive_key("scsi01"));
        assert!(is_drive_key("efidisk0") && is_unused_key("unused7") && is_net_key("net31"));
        assert!(
            agent_enabled("1")
                && agent_enabled("enabled=1,fstrim_cloned_disks=1")
                && !agent_enabled("0")
        );
        assert_eq!(memory_mib(Some("4096")), 4096);
        assert_eq!(memory_mib(Some("current=1024")), 1024);
        assert_eq!(memory_mib(None), 512);
        assert!(node_name_ok("pve-a1") && !node_name_ok("-x") && !node_name_ok("a_b"));
    }
}
