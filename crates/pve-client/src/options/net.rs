//! `net[n]`: network devices (`virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=12`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::propstr::{check_value, fmt_bool, join, parse_bool, parse_uint, split};
use crate::error::ParseError;

const WHAT: &str = "net property string";

/// NIC model (schema enum of `net[n]` → `model`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum NetModel {
    /// `e1000`
    E1000,
    /// `e1000-82540em`
    E1000_82540em,
    /// `e1000-82544gc`
    E1000_82544gc,
    /// `e1000-82545em`
    E1000_82545em,
    /// `e1000e`
    E1000e,
    /// `i82551`
    I82551,
    /// `i82557b`
    I82557b,
    /// `i82559er`
    I82559er,
    /// `ne2k_isa`
    Ne2kIsa,
    /// `ne2k_pci`
    Ne2kPci,
    /// `pcnet`
    Pcnet,
    /// `rtl8139`
    Rtl8139,
    /// `virtio` (paravirtualised, the usual choice)
    Virtio,
    /// `vmxnet3`
    Vmxnet3,
}

impl NetModel {
    const ALL: [NetModel; 14] = [
        Self::E1000,
        Self::E1000_82540em,
        Self::E1000_82544gc,
        Self::E1000_82545em,
        Self::E1000e,
        Self::I82551,
        Self::I82557b,
        Self::I82559er,
        Self::Ne2kIsa,
        Self::Ne2kPci,
        Self::Pcnet,
        Self::Rtl8139,
        Self::Virtio,
        Self::Vmxnet3,
    ];

    /// The wire name, e.g. `virtio`, `e1000-82540em`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::E1000 => "e1000",
            Self::E1000_82540em => "e1000-82540em",
            Self::E1000_82544gc => "e1000-82544gc",
            Self::E1000_82545em => "e1000-82545em",
            Self::E1000e => "e1000e",
            Self::I82551 => "i82551",
            Self::I82557b => "i82557b",
            Self::I82559er => "i82559er",
            Self::Ne2kIsa => "ne2k_isa",
            Self::Ne2kPci => "ne2k_pci",
            Self::Pcnet => "pcnet",
            Self::Rtl8139 => "rtl8139",
            Self::Virtio => "virtio",
            Self::Vmxnet3 => "vmxnet3",
        }
    }

    /// Looks up a wire name.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

impl fmt::Display for NetModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A unicast MAC address (PVE format `mac-addr`: the I/G bit must be clear).
/// Printed upper-case with colons, as Proxmox stores it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Parses `XX:XX:XX:XX:XX:XX` (either case).
    ///
    /// # Errors
    /// [`ParseError`] for other shapes and for multicast addresses.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let err = |r: &str| ParseError::new("MAC address", s, r);
        let parts: Vec<&str> = s.split(':').collect();
        if parts.len() != 6 {
            return Err(err("expected XX:XX:XX:XX:XX:XX"));
        }
        let mut out = [0u8; 6];
        for (slot, p) in out.iter_mut().zip(&parts) {
            if p.len() != 2 || !p.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(err("expected XX:XX:XX:XX:XX:XX"));
            }
            *slot = u8::from_str_radix(p, 16).map_err(|_| err("bad hex"))?;
        }
        if out[0] & 1 != 0 {
            return Err(err(
                "multicast addresses are not allowed (second hex digit must be even)",
            ));
        }
        Ok(Self(out))
    }
}

impl MacAddr {
    /// Why a NIC cannot use this address as its own, although Proxmox stores it:
    /// the all-zero address is no station address (guest drivers replace it
    /// with a random one, so the VM never has the MAC that was asked for).
    /// Multicast addresses, the broadcast address among them, never parse.
    pub fn station_problem(&self) -> Option<&'static str> {
        (self.0 == [0; 6]).then_some(
            "the all-zero address is not a station address (the guest replaces it with a random one)",
        )
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d, e, g] = self.0;
        write!(f, "{a:02X}:{b:02X}:{c:02X}:{d:02X}:{e:02X}:{g:02X}")
    }
}

impl FromStr for MacAddr {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A `net[n]` value.
///
/// Format: `[model=]<model> [,bridge=<bridge>] [,firewall=<1|0>]
/// [,link_down=<1|0>] [,macaddr=<MAC>] [,mtu=<1-65520>] [,queues=<0-64>]
/// [,rate=<mbps>] [,tag=<1-4094>] [,trunks=<vlanid[;vlanid...]>]
/// [,<model>=<MAC>]`. Canonical output is `<model>=<MAC>` (or the bare model
/// when no MAC is set; the server then generates one) followed by the other
/// keys alphabetically: `virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1,tag=12`.
#[derive(Debug, Clone, PartialEq)]
pub struct NetDevice {
    /// NIC model.
    pub model: NetModel,
    /// MAC address; `None` lets Proxmox generate one (prefix `BC:24:11`).
    pub macaddr: Option<MacAddr>,
    /// Bridge, e.g. `vmbr0` (PVE format `pve-bridge-id`: `[-_.\w]+`).
    pub bridge: Option<String>,
    /// VLAN tag, 1 ..= 4094.
    pub tag: Option<u16>,
    /// Firewall on this interface.
    pub firewall: Option<bool>,
    /// Link disconnected.
    pub link_down: Option<bool>,
    /// MTU, 1 ..= 65520; `1` means "use the bridge MTU" (virtio only).
    pub mtu: Option<u16>,
    /// Packet queues, 0 ..= 64.
    pub queues: Option<u8>,
    /// Other sub-options (`rate`, `trunks`, future keys), kept verbatim.
    pub extra: BTreeMap<String, String>,
}

impl NetDevice {
    /// A NIC of `model` with nothing else set.
    pub fn new(model: NetModel) -> Self {
        Self {
            model,
            macaddr: None,
            bridge: None,
            tag: None,
            firewall: None,
            link_down: None,
            mtu: None,
            queues: None,
            extra: BTreeMap::new(),
        }
    }

    /// Parses a `net[n]` value.
    ///
    /// # Errors
    /// [`ParseError`] for a missing or unknown model, both `<model>=<MAC>` and
    /// `model=`, out-of-range numbers, bad MACs or bridges.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut model: Option<NetModel> = None;
        let mut dev = Self::new(NetModel::Virtio);
        for (k, v) in split(s, WHAT, Some("model"))? {
            if let Some(m) = NetModel::from_name(&k) {
                if model.is_some() {
                    return Err(ParseError::new(WHAT, s, "model given twice"));
                }
                model = Some(m);
                dev.set_mac(s, &v)?;
                continue;
            }
            match k.as_str() {
                "model" => {
                    if model.is_some() {
                        return Err(ParseError::new(WHAT, s, "model given twice"));
                    }
                    model =
                        Some(NetModel::from_name(&v).ok_or_else(|| {
                            ParseError::new(WHAT, s, format!("unknown model '{v}'"))
                        })?);
                }
                "macaddr" => dev.set_mac(s, &v)?,
                "bridge" => {
                    check_bridge(&v).map_err(|r| ParseError::new(WHAT, s, r))?;
                    dev.bridge = Some(v);
                }
                "tag" => dev.tag = Some(narrow(parse_uint(WHAT, "tag", &v, 1, 4094)?)),
                "firewall" => dev.firewall = Some(parse_bool(WHAT, "firewall", &v)?),
                "link_down" => dev.link_down = Some(parse_bool(WHAT, "link_down", &v)?),
                "mtu" => dev.mtu = Some(narrow(parse_uint(WHAT, "mtu", &v, 1, 65520)?)),
                "queues" => dev.queues = Some(narrow(parse_uint(WHAT, "queues", &v, 0, 64)?)),
                _ if valid_key(&k) => {
                    dev.extra.insert(k, v);
                }
                _ => return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'"))),
            }
        }
        dev.model = model.ok_or_else(|| ParseError::new(WHAT, s, "model is missing"))?;
        Ok(dev)
    }

    fn set_mac(&mut self, input: &str, v: &str) -> Result<(), ParseError> {
        if self.macaddr.is_some() {
            return Err(ParseError::new(WHAT, input, "MAC address given twice"));
        }
        self.macaddr = Some(MacAddr::parse(v)?);
        Ok(())
    }

    /// Checks every field against the schema (ranges, bridge characters,
    /// `extra` keys and values printable in a property string).
    ///
    /// # Errors
    /// [`ParseError`] naming the field.
    pub fn validate(&self) -> Result<(), ParseError> {
        if let Some(b) = &self.bridge {
            check_bridge(b).map_err(|r| ParseError::new(WHAT, b.clone(), r))?;
        }
        if let Some(t) = self.tag {
            parse_uint(WHAT, "tag", &t.to_string(), 1, 4094)?;
        }
        if let Some(m) = self.mtu {
            parse_uint(WHAT, "mtu", &m.to_string(), 1, 65520)?;
        }
        if let Some(q) = self.queues {
            parse_uint(WHAT, "queues", &q.to_string(), 0, 64)?;
        }
        for (k, v) in &self.extra {
            if !valid_key(k) || NetModel::from_name(k).is_some() || KNOWN.contains(&k.as_str()) {
                return Err(ParseError::new(
                    WHAT,
                    k.clone(),
                    "invalid or reserved key in extra",
                ));
            }
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }
}

const KNOWN: [&str; 8] = [
    "model",
    "macaddr",
    "bridge",
    "tag",
    "firewall",
    "link_down",
    "mtu",
    "queues",
];

fn narrow<T: TryFrom<u64> + Default>(n: u64) -> T {
    // Callers checked the range first.
    T::try_from(n).unwrap_or_default()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn check_bridge(b: &str) -> Result<(), String> {
    if !b.is_empty()
        && b.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
    {
        Ok(())
    } else {
        Err(format!("invalid bridge '{b}'"))
    }
}

impl fmt::Display for NetDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let head = match self.macaddr {
            Some(mac) => format!("{}={mac}", self.model),
            None => self.model.to_string(),
        };
        let mut rest: BTreeMap<&str, String> = BTreeMap::new();
        if let Some(b) = &self.bridge {
            rest.insert("bridge", b.clone());
        }
        if let Some(v) = self.firewall {
            rest.insert("firewall", fmt_bool(v).into());
        }
        if let Some(v) = self.link_down {
            rest.insert("link_down", fmt_bool(v).into());
        }
        if let Some(v) = self.mtu {
            rest.insert("mtu", v.to_string());
        }
        if let Some(v) = self.queues {
            rest.insert("queues", v.to_string());
        }
        if let Some(v) = self.tag {
            rest.insert("tag", v.to_string());
        }
        for (k, v) in &self.extra {
            rest.insert(k, v.clone());
        }
        let parts =
            std::iter::once((None, head)).chain(rest.into_iter().map(|(k, v)| (Some(k), v)));
        f.write_str(&join(parts))
    }
}

impl FromStr for NetDevice {
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
    fn station_addresses() {
        assert!(
            MacAddr::parse("00:00:00:00:00:00")
                .unwrap()
                .station_problem()
                .is_some()
        );
        assert_eq!(
            MacAddr::parse("BC:24:11:00:00:01")
                .unwrap()
                .station_problem(),
            None
        );
        assert!(MacAddr::parse("FF:FF:FF:FF:FF:FF").is_err());
    }

    #[test]
    fn parses_canonical_server_form() {
        let n =
            NetDevice::parse("virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1,tag=112").unwrap();
        assert_eq!(n.model, NetModel::Virtio);
        assert_eq!(
            n.macaddr,
            Some(MacAddr([0xBC, 0x24, 0x11, 0xAA, 0xBB, 0xCC]))
        );
        assert_eq!(n.bridge.as_deref(), Some("vmbr0"));
        assert_eq!(n.firewall, Some(true));
        assert_eq!(n.tag, Some(112));
        assert_eq!(
            n.to_string(),
            "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1,tag=112"
        );
    }

    #[test]
    fn accepts_explicit_model_and_macaddr_keys() {
        let n = NetDevice::parse("model=e1000,macaddr=bc:24:11:00:00:01,bridge=vmbr1").unwrap();
        assert_eq!(n.model, NetModel::E1000);
        assert_eq!(n.to_string(), "e1000=BC:24:11:00:00:01,bridge=vmbr1");
        let bare = NetDevice::parse("virtio,bridge=vmbr0").unwrap();
        assert_eq!(bare.macaddr, None);
        assert_eq!(bare.to_string(), "virtio,bridge=vmbr0");
    }

    #[test]
    fn b12_valid_case_renders_as_expected() {
        let mut n = NetDevice::new(NetModel::Virtio);
        n.macaddr = Some(MacAddr::parse("BC:24:11:12:34:56").unwrap());
        n.bridge = Some("vmbr0".into());
        n.tag = Some(4094);
        n.mtu = Some(1);
        n.validate().unwrap();
        assert_eq!(
            n.to_string(),
            "virtio=BC:24:11:12:34:56,bridge=vmbr0,mtu=1,tag=4094"
        );
    }

    #[test]
    fn keeps_unmodelled_options() {
        let s = "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,rate=12.5,trunks=10;20-30";
        let n = NetDevice::parse(s).unwrap();
        assert_eq!(n.extra.get("rate").map(String::as_str), Some("12.5"));
        assert_eq!(n.extra.get("trunks").map(String::as_str), Some("10;20-30"));
        assert_eq!(n.to_string(), s);
    }

    #[test]
    fn refuses_invalid() {
        for bad in [
            "bridge=vmbr0",
            "foo=BC:24:11:AA:BB:CC",
            "virtio,tag=0",
            "virtio,tag=4095",
            "virtio,mtu=65521",
            "virtio,queues=65",
            "virtio=01:24:11:AA:BB:CC",
            "virtio=BC:24:11:AA:BB",
            "virtio,model=e1000",
            "virtio=BC:24:11:AA:BB:CC,macaddr=BC:24:11:AA:BB:CD",
            "virtio,bridge=vm br0",
            "virtio,firewall=2",
            "virtio, bridge=vmbr0",
        ] {
            assert!(NetDevice::parse(bad).is_err(), "{bad:?}");
        }
        let mut n = NetDevice::new(NetModel::Virtio);
        n.tag = Some(0);
        assert!(n.validate().is_err());
        n.tag = None;
        n.bridge = Some("vmbr0,tag=5".into());
        assert!(n.validate().is_err(), "a comma would inject a key");
    }

    fn arb_net() -> impl Strategy<Value = NetDevice> {
        (
            0usize..14,
            proptest::option::of(any::<[u8; 6]>()),
            proptest::option::of("[a-z][a-z0-9_.-]{0,10}"),
            proptest::option::of(1u16..=4094),
            proptest::option::of(any::<bool>()),
            proptest::option::of(any::<bool>()),
            proptest::option::of(1u16..=65520),
            proptest::option::of(0u8..=64),
            proptest::option::of("[0-9]{1,3}(\\.[0-9])?"),
        )
            .prop_map(|(m, mac, bridge, tag, fw, ld, mtu, queues, rate)| {
                let mut n = NetDevice::new(NetModel::ALL[m]);
                n.macaddr = mac.map(|mut b| {
                    b[0] &= 0xFE;
                    MacAddr(b)
                });
                n.bridge = bridge;
                n.tag = tag;
                n.firewall = fw;
                n.link_down = ld;
                n.mtu = mtu;
                n.queues = queues;
                if let Some(r) = rate {
                    n.extra.insert("rate".into(), r);
                }
                n
            })
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(n in arb_net()) {
            prop_assert!(n.validate().is_ok());
            let s = n.to_string();
            let back = NetDevice::parse(&s).unwrap();
            prop_assert_eq!(&back, &n);
            prop_assert_eq!(back.to_string(), s);
        }
    }
}
