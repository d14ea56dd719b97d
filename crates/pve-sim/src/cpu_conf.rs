//! The `pve-vm-cpu-conf` format of a VM's `cpu` option, checked the way
//! qemu-server's `PVE::QemuServer::CPUConfig` checks it on every config
//! write: the `cputype` is a built-in model or `custom-<name>`, the
//! VM-specific `flags` are among the few qemu-server allows, and
//! `reported-model` is refused (it belongs to custom model definitions).
//!
//! The model list is qemu-server's (x86_64 vendors' models, the
//! `x86-64-v*` levels, and the generic `host`/`max`/`kvm*`/`qemu*`). Custom
//! models are accepted by name; the simulator keeps no
//! `/etc/pve/virtual-guest/cpu-models.conf`.

use crate::props;

/// Built-in CPU models (qemu-server `$cpu_vendor_list` plus the
/// `x86-64-v*` models).
const MODELS: &[&str] = &[
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

/// The flags a VM's own `cpu` may toggle (qemu-server
/// `@supported_cpu_flags`).
const VM_FLAGS: &[&str] = &[
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

/// Checks a VM's `cpu` value.
///
/// # Errors
/// qemu-server's message for the first problem.
pub(crate) fn check(text: &str) -> Result<(), String> {
    let mut cputype = None;
    for (k, v) in props::split_pairs(text, Some("cputype"))? {
        match k.as_str() {
            "cputype" => cputype = Some(v),
            "flags" => {
                for f in v.split(';') {
                    let name = f.strip_prefix(['+', '-']).ok_or_else(|| {
                        "format error\nflags: value does not match the regex pattern".to_string()
                    })?;
                    if !VM_FLAGS.contains(&name) {
                        return Err(format!(
                            "VM-specific CPU flags must be a subset of: {}",
                            VM_FLAGS.join(", ")
                        ));
                    }
                }
            }
            "reported-model" => {
                return Err(
                    "Property 'reported-model' not allowed in VM-specific CPU config.".into(),
                );
            }
            "hidden" | "hv-vendor-id" | "phys-bits" | "guest-phys-bits" => {}
            other => {
                return Err(format!(
                    "invalid key in comma-separated list property: {other}"
                ));
            }
        }
    }
    let cputype = cputype.unwrap_or_else(|| "kvm64".into());
    if let Some(name) = cputype.strip_prefix("custom-") {
        if name.is_empty() {
            return Err(format!("CPU model '{cputype}' is not defined"));
        }
        return Ok(());
    }
    if MODELS.contains(&cputype.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "Built-in cputype '{cputype}' is not defined (missing 'custom-' prefix?)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn qemu_server_rules() {
        assert!(check("x86-64-v2-AES").is_ok());
        assert!(check("cputype=host,flags=+aes;-pcid,hidden=1").is_ok());
        assert!(check("custom-avx512").is_ok());
        assert!(
            check("Skylake")
                .unwrap_err()
                .contains("missing 'custom-' prefix")
        );
        assert!(
            check("host,flags=+avx512f")
                .unwrap_err()
                .contains("subset of")
        );
        assert!(check("host,flags=aes").is_err());
        assert!(check("host,reported-model=kvm64").is_err());
        assert!(check("host,color=red").is_err());
        assert!(check("custom-").is_err());
    }
}
