//! `cpu` and `bootstrapMedia` (machine and instance). `cpu`: the CPU
//! model and VM-specific flags, as
//! Proxmox checks them on every config write (`pve-vm-cpu-conf` of
//! `/nodes/{node}/qemu/{vmid}/config`; the rules live in
//! [`pve_client::options::Cpu::validate`]).

use std::collections::BTreeSet;

use pve_client::options::{CpuFlag, VM_CPU_FLAGS, cpu_model_kind};

use super::FieldError;
use crate::api::machine::{BootstrapMediaSpec, CpuSpec};

/// Problems of `cpu` at `path` (`spec.cpu`,
/// `spec.settings.instances[0].cpu`): a model that is neither built in nor
/// `custom-<name>`, flags without a sign, outside what a VM may set, or
/// given twice.
pub(crate) fn check_cpu(path: &str, cpu: &CpuSpec, errs: &mut Vec<FieldError>) {
    if let Some(t) = &cpu.type_
        && let Err(e) = cpu_model_kind(t)
    {
        errs.push(FieldError::new(format!("{path}.type"), e.reason));
    }
    let mut seen = BTreeSet::new();
    for (i, f) in cpu.flags.iter().enumerate() {
        let at = format!("{path}.flags[{i}]");
        match CpuFlag::parse(f) {
            Err(e) => errs.push(FieldError::new(at, format!("{f:?}: {}", e.reason))),
            Ok(flag) if !flag.allowed_for_vm() => errs.push(FieldError::new(
                at,
                format!(
                    "{f:?}: Proxmox lets a VM set only {} (other flags belong in a custom CPU model, type custom-<name>)",
                    VM_CPU_FLAGS.join(", ")
                ),
            )),
            Ok(flag) => {
                if !seen.insert(flag.name.clone()) {
                    errs.push(FieldError::new(
                        at,
                        format!("flag {:?} is given twice", flag.name),
                    ));
                }
            }
        }
    }
}

/// Problems of `bootstrapMedia` at `path`: a storage name that is not a
/// Proxmox storage id (`pve-storage-id`: a lower-case letter, then
/// letters, digits, `-`, `_`, `.`, ending in a letter or digit).
pub(crate) fn check_media(path: &str, media: &BootstrapMediaSpec, errs: &mut Vec<FieldError>) {
    if let Some(s) = &media.storage
        && !is_storage_id(s)
    {
        errs.push(FieldError::new(
            format!("{path}.storage"),
            format!("{s:?} is not a Proxmox storage id (e.g. local, nfs-iso)"),
        ));
    }
}

fn is_storage_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_lowercase()
        && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'-' | b'_' | b'.')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu(t: Option<&str>, flags: &[&str]) -> Vec<FieldError> {
        let mut errs = Vec::new();
        let spec = CpuSpec {
            type_: t.map(str::to_string),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        };
        check_cpu("spec.cpu", &spec, &mut errs);
        errs
    }

    #[test]
    fn models_and_flags() {
        assert!(cpu(Some("x86-64-v2-AES"), &["+aes", "-pcid"]).is_empty());
        assert!(cpu(Some("custom-avx512"), &[]).is_empty());
        assert!(cpu(None, &["+md-clear"]).is_empty());
        let e = cpu(Some("x86-64-V3"), &[]);
        assert_eq!(e[0].path, "spec.cpu.type");
        assert!(e[0].message.contains("x86-64-v3"), "{}", e[0].message);
        let e = cpu(Some("host"), &["aes", "+avx512f", "+aes", "-aes"]);
        let paths: Vec<&str> = e.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "spec.cpu.flags[0]",
                "spec.cpu.flags[1]",
                "spec.cpu.flags[3]"
            ]
        );
        assert!(e[1].message.contains("custom-<name>"));
        assert!(e[2].message.contains("twice"));
    }
}

#[cfg(test)]
mod media_tests {
    use super::*;

    #[test]
    fn storage_ids() {
        for (s, ok) in [
            ("local", true),
            ("nfs-iso", true),
            ("a1.b_c", true),
            ("Local", false),
            ("x", false),
            ("iso-", false),
            ("1st", false),
        ] {
            let mut errs = Vec::new();
            let m = BootstrapMediaSpec {
                storage: Some(s.into()),
                cdrom_bus: None,
            };
            check_media("spec.bootstrapMedia", &m, &mut errs);
            assert_eq!(errs.is_empty(), ok, "{s}");
            if !ok {
                assert_eq!(errs[0].path, "spec.bootstrapMedia.storage");
            }
        }
    }
}
