//! `cpu`: the emulated CPU type and its flags, format `pve-vm-cpu-conf`:
//! `[[cputype=]<string>] [,flags=<+FLAG[;-FLAG...]>] [,hidden=<1|0>]
//! [,hv-vendor-id=<vendor-id>] [,phys-bits=<8-64|host>] …`
//! (e.g. `x86-64-v2-AES,flags=+pcid;-md-clear`).
//!
//! The rules a VM's `cpu` must follow (qemu-server's `pve-vm-cpu-conf`
//! check, which Proxmox applies to every config write):
//! - `cputype` is a built-in model ([`BUILTIN_MODELS`]) or a custom model
//!   named `custom-<name>` (defined cluster-wide in
//!   `/cluster/cpu-models`-style configuration, not checked here);
//! - VM-specific `flags` may only toggle the flags in [`VM_CPU_FLAGS`]
//!   (custom models may set any flag, but only in their own definition);
//! - `reported-model` belongs to custom model definitions, never to a VM.
//!
//! Which architecture a model is for: the named Intel and AMD models, the
//! `x86-64-v*` levels and `kvm32`/`kvm64`/`qemu32`/`qemu64` are x86_64
//! models; `host` and `max` exist on every architecture (they are the only
//! built-in choices on aarch64); a custom model's architecture is its
//! reported model's, unknown here.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::arch::Arch;
use super::propstr::{check_value, join, split};
use crate::error::ParseError;

const WHAT: &str = "cpu property string";

/// The built-in CPU models Proxmox accepts as `cputype` (qemu-server's
/// vendor list and its `x86-64-v*` models).
pub const BUILTIN_MODELS: &[&str] = &[
    // Intel
    "486",
    "pentium",
    "pentium2",
    "pentium3",
    "coreduo",
    "core2duo",
    "Conroe",
    "Penryn",
    "Nehalem",
    "Nehalem-IBRS",
    "Westmere",
    "Westmere-IBRS",
    "SandyBridge",
    "SandyBridge-IBRS",
    "IvyBridge",
    "IvyBridge-IBRS",
    "Haswell",
    "Haswell-IBRS",
    "Haswell-noTSX",
    "Haswell-noTSX-IBRS",
    "Broadwell",
    "Broadwell-IBRS",
    "Broadwell-noTSX",
    "Broadwell-noTSX-IBRS",
    "Skylake-Client",
    "Skylake-Client-IBRS",
    "Skylake-Client-noTSX-IBRS",
    "Skylake-Client-v4",
    "Skylake-Server",
    "Skylake-Server-IBRS",
    "Skylake-Server-noTSX-IBRS",
    "Skylake-Server-v4",
    "Skylake-Server-v5",
    "Cascadelake-Server",
    "Cascadelake-Server-v2",
    "Cascadelake-Server-noTSX",
    "Cascadelake-Server-v4",
    "Cascadelake-Server-v5",
    "Cooperlake",
    "Cooperlake-v2",
    "KnightsMill",
    "Icelake-Client",
    "Icelake-Client-noTSX",
    "Icelake-Server",
    "Icelake-Server-noTSX",
    "Icelake-Server-v3",
    "Icelake-Server-v4",
    "Icelake-Server-v5",
    "Icelake-Server-v6",
    "SapphireRapids",
    "SapphireRapids-v2",
    "GraniteRapids",
    // AMD
    "athlon",
    "phenom",
    "Opteron_G1",
    "Opteron_G2",
    "Opteron_G3",
    "Opteron_G4",
    "Opteron_G5",
    "EPYC",
    "EPYC-IBPB",
    "EPYC-v3",
    "EPYC-v4",
    "EPYC-Rome",
    "EPYC-Rome-v2",
    "EPYC-Rome-v3",
    "EPYC-Rome-v4",
    "EPYC-Milan",
    "EPYC-Milan-v2",
    "EPYC-Genoa",
    // generic
    "host",
    "kvm32",
    "kvm64",
    "qemu32",
    "qemu64",
    "max",
    "x86-64-v2",
    "x86-64-v2-AES",
    "x86-64-v3",
    "x86-64-v4",
];

/// The flags a VM's own `cpu` may toggle (qemu-server allows only these,
/// "for security reasons"; custom models may set any flag).
pub const VM_CPU_FLAGS: &[&str] = &[
    "pcid",
    "spec-ctrl",
    "ibpb",
    "ssbd",
    "virt-ssbd",
    "amd-ssbd",
    "amd-no-ssb",
    "pdpe1gb",
    "md-clear",
    "hv-tlbflush",
    "hv-evmcs",
    "aes",
];

/// Prefix of custom CPU model names.
pub const CUSTOM_PREFIX: &str = "custom-";

/// What a `cputype` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuModelKind {
    /// A built-in model for one architecture only.
    Builtin(Arch),
    /// `host` or `max`: every architecture.
    Generic,
    /// `custom-<name>`: defined in the Proxmox cluster; its architecture is
    /// not known here.
    Custom,
}

impl CpuModelKind {
    /// Whether a VM of architecture `arch` can use the model (custom models
    /// are not judged).
    pub fn fits(self, arch: Arch) -> bool {
        match self {
            Self::Builtin(a) => a == arch,
            Self::Generic | Self::Custom => true,
        }
    }

    /// The one architecture the model is for, when it is for one only.
    pub fn arch(self) -> Option<Arch> {
        match self {
            Self::Builtin(a) => Some(a),
            Self::Generic | Self::Custom => None,
        }
    }
}

/// What `cputype` names, or why Proxmox would refuse it.
///
/// # Errors
/// [`ParseError`] for a name that is neither built in nor `custom-<name>`
/// (Proxmox: "Built-in cputype … is not defined (missing 'custom-'
/// prefix?)").
pub fn cpu_model_kind(cputype: &str) -> Result<CpuModelKind, ParseError> {
    if let Some(name) = cputype.strip_prefix(CUSTOM_PREFIX) {
        let ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        return if ok {
            Ok(CpuModelKind::Custom)
        } else {
            Err(ParseError::new(
                "CPU type",
                cputype,
                "a custom model name after 'custom-' must be letters, digits, '-', '_' or '.'",
            ))
        };
    }
    if matches!(cputype, "host" | "max") {
        return Ok(CpuModelKind::Generic);
    }
    if BUILTIN_MODELS.contains(&cputype) {
        return Ok(CpuModelKind::Builtin(Arch::X86_64));
    }
    let hint = BUILTIN_MODELS
        .iter()
        .find(|m| m.eq_ignore_ascii_case(cputype))
        .map(|m| format!(" (did you mean {m}? names are case-sensitive)"))
        .unwrap_or_default();
    Err(ParseError::new(
        "CPU type",
        cputype,
        format!(
            "is not a built-in Proxmox CPU model{hint}; use a built-in model (host, max, x86-64-v2-AES, x86-64-v3, EPYC-Rome, …) or a custom model named custom-<name>"
        ),
    ))
}

/// One CPU flag toggle: `+aes` enables, `-pcid` disables.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CpuFlag {
    /// `+` (true) or `-` (false).
    pub enabled: bool,
    /// The flag name (`[a-zA-Z0-9_.-]+`).
    pub name: String,
}

impl CpuFlag {
    /// Parses `+name` or `-name`.
    ///
    /// # Errors
    /// [`ParseError`] without a sign or with characters outside
    /// `[a-zA-Z0-9_.-]`.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let (enabled, name) = match s.split_at_checked(1) {
            Some(("+", n)) => (true, n),
            Some(("-", n)) => (false, n),
            _ => {
                return Err(ParseError::new(
                    "CPU flag",
                    s,
                    "must start with '+' (enable) or '-' (disable), e.g. +aes",
                ));
            }
        };
        if name.is_empty()
            || !name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(ParseError::new(
                "CPU flag",
                s,
                "the flag name must be letters, digits, '-', '_' or '.'",
            ));
        }
        Ok(Self {
            enabled,
            name: name.to_string(),
        })
    }

    /// Whether a VM's own `cpu` may toggle this flag ([`VM_CPU_FLAGS`]).
    pub fn allowed_for_vm(&self) -> bool {
        VM_CPU_FLAGS.contains(&self.name.as_str())
    }
}

impl fmt::Display for CpuFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", if self.enabled { '+' } else { '-' }, self.name)
    }
}

/// A `cpu` value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cpu {
    /// `cputype` (the default key); `None` leaves Proxmox's default
    /// (`kvm64` on x86_64).
    pub cputype: Option<String>,
    /// `flags`, in order.
    pub flags: Vec<CpuFlag>,
    /// Every other sub-option (`hidden`, `hv-vendor-id`, `phys-bits`,
    /// `guest-phys-bits`, `reported-model`), verbatim.
    pub extra: BTreeMap<String, String>,
}

const KNOWN_EXTRA: &[&str] = &[
    "hidden",
    "hv-vendor-id",
    "phys-bits",
    "guest-phys-bits",
    "reported-model",
];

impl Cpu {
    /// A CPU of type `cputype` without flags.
    pub fn model(cputype: impl Into<String>) -> Self {
        Self {
            cputype: Some(cputype.into()),
            ..Self::default()
        }
    }

    /// Parses a `cpu` value as Proxmox returns it (syntax only; see
    /// [`Cpu::validate`] for what a VM may use).
    ///
    /// # Errors
    /// [`ParseError`] for unknown keys or malformed flags.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut cpu = Self::default();
        for (k, v) in split(s, WHAT, Some("cputype"))? {
            match k.as_str() {
                "cputype" => cpu.cputype = Some(v),
                "flags" => {
                    cpu.flags = v
                        .split(';')
                        .map(CpuFlag::parse)
                        .collect::<Result<_, _>>()
                        .map_err(|e| ParseError::new(WHAT, s, format!("flags: {}", e.reason)))?;
                }
                k if KNOWN_EXTRA.contains(&k) => {
                    cpu.extra.insert(k.to_string(), v);
                }
                other => return Err(ParseError::new(WHAT, s, format!("invalid key '{other}'"))),
            }
        }
        Ok(cpu)
    }

    /// The kind of model `cputype` names (`None` without a `cputype`).
    ///
    /// # Errors
    /// As [`cpu_model_kind`].
    pub fn kind(&self) -> Result<Option<CpuModelKind>, ParseError> {
        self.cputype.as_deref().map(cpu_model_kind).transpose()
    }

    /// Checks what Proxmox checks of a VM's `cpu` (`pve-vm-cpu-conf`): not
    /// empty, a `cputype` (absent: Proxmox's default `kvm64`) that is built
    /// in or `custom-<name>`, VM flags from
    /// [`VM_CPU_FLAGS`] only and each at most once, no `reported-model`.
    ///
    /// # Errors
    /// [`ParseError`] naming the first problem.
    pub fn validate(&self) -> Result<(), ParseError> {
        if self.cputype.is_none() && self.flags.is_empty() && self.extra.is_empty() {
            return Err(ParseError::new(WHAT, "", "the value is empty"));
        }
        if let Some(t) = &self.cputype {
            cpu_model_kind(t)?;
        }
        if let Some(f) = self.flags.iter().find(|f| !f.allowed_for_vm()) {
            return Err(ParseError::new(
                "CPU flag",
                f.to_string(),
                format!(
                    "a VM's own CPU flags must be among {} (other flags belong in a custom CPU model)",
                    VM_CPU_FLAGS.join(", ")
                ),
            ));
        }
        let mut seen = std::collections::BTreeSet::new();
        if let Some(f) = self.flags.iter().find(|f| !seen.insert(f.name.as_str())) {
            return Err(ParseError::new(
                "CPU flag",
                f.to_string(),
                format!("flag '{}' is given twice", f.name),
            ));
        }
        if self.extra.contains_key("reported-model") {
            return Err(ParseError::new(
                WHAT,
                self.to_string(),
                "reported-model is only allowed in custom CPU model definitions",
            ));
        }
        for (k, v) in &self.extra {
            check_value(WHAT, k, v)?;
        }
        Ok(())
    }
}

impl fmt::Display for Cpu {
    /// The canonical form: `cputype` bare first, then the other keys in
    /// alphabetical order.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut rest: BTreeMap<&str, String> = self
            .extra
            .iter()
            .map(|(k, v)| (k.as_str(), v.clone()))
            .collect();
        if !self.flags.is_empty() {
            let flags: Vec<String> = self.flags.iter().map(ToString::to_string).collect();
            rest.insert("flags", flags.join(";"));
        }
        let head = self.cputype.clone().map(|t| (None, t));
        f.write_str(&join(
            head.into_iter()
                .chain(rest.into_iter().map(|(k, v)| (Some(k), v))),
        ))
    }
}

impl FromStr for Cpu {
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
    fn parses_and_prints_the_canonical_form() {
        let c = Cpu::parse("cputype=x86-64-v2-AES,flags=+pcid;-md-clear,hidden=1").unwrap();
        assert_eq!(c.cputype.as_deref(), Some("x86-64-v2-AES"));
        assert_eq!(
            c.flags,
            vec![
                CpuFlag {
                    enabled: true,
                    name: "pcid".into()
                },
                CpuFlag {
                    enabled: false,
                    name: "md-clear".into()
                }
            ]
        );
        assert_eq!(
            c.to_string(),
            "x86-64-v2-AES,flags=+pcid;-md-clear,hidden=1"
        );
        assert_eq!(Cpu::parse("host").unwrap(), Cpu::model("host"));
        assert!(Cpu::parse("host,color=red").is_err());
        assert!(Cpu::parse("host,flags=aes").is_err());
        assert!(Cpu::parse("host,flags=+a b").is_err());
    }

    #[test]
    fn vm_rules_are_proxmoxs() {
        assert!(Cpu::model("x86-64-v3").validate().is_ok());
        assert!(Cpu::model("custom-avx512").validate().is_ok());
        let e = Cpu::model("x86-64-V3").validate().unwrap_err();
        assert!(e.reason.contains("did you mean x86-64-v3"), "{e}");
        assert!(Cpu::model("Skylake").validate().is_err());
        let mut c = Cpu::model("host");
        c.flags = vec![CpuFlag::parse("+avx512f").unwrap()];
        let e = c.validate().unwrap_err();
        assert!(e.reason.contains("pcid, spec-ctrl"), "{e}");
        c.flags = vec![
            CpuFlag::parse("+aes").unwrap(),
            CpuFlag::parse("-aes").unwrap(),
        ];
        assert!(c.validate().unwrap_err().reason.contains("twice"));
        let mut r = Cpu::model("host");
        r.extra.insert("reported-model".into(), "kvm64".into());
        assert!(r.validate().is_err());
        assert!(Cpu::default().validate().is_err(), "empty");
        let f = Cpu {
            flags: vec![CpuFlag::parse("+aes").unwrap()],
            ..Cpu::default()
        };
        assert!(f.validate().is_ok(), "the default model with flags");
    }

    #[test]
    fn models_know_their_architecture() {
        assert_eq!(
            cpu_model_kind("EPYC-Rome").unwrap(),
            CpuModelKind::Builtin(Arch::X86_64)
        );
        assert_eq!(cpu_model_kind("max").unwrap(), CpuModelKind::Generic);
        assert_eq!(cpu_model_kind("custom-a72").unwrap(), CpuModelKind::Custom);
        assert!(cpu_model_kind("custom-").is_err());
        assert!(!CpuModelKind::Builtin(Arch::X86_64).fits(Arch::Aarch64));
        assert!(CpuModelKind::Generic.fits(Arch::Aarch64));
        assert!(CpuModelKind::Custom.fits(Arch::Aarch64));
        assert_eq!(CpuModelKind::Generic.arch(), None);
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            model in proptest::sample::select(BUILTIN_MODELS),
            flags in proptest::collection::vec((any::<bool>(), proptest::sample::select(VM_CPU_FLAGS)), 0..4),
            hidden in proptest::option::of(any::<bool>()),
        ) {
            let mut c = Cpu::model(model);
            c.flags = flags.into_iter().map(|(enabled, n)| CpuFlag { enabled, name: n.to_string() }).collect();
            if let Some(h) = hidden {
                c.extra.insert("hidden".into(), if h { "1" } else { "0" }.into());
            }
            prop_assert_eq!(Cpu::parse(&c.to_string()).unwrap(), c);
        }
    }
}
