//! The VM's `cpu` (model and VM-specific flags): the machine's `cpu`
//! field by field over the instance's, over the template's value.
//!
//! Rules (docs/vm-shapes.md):
//! - `type` replaces the model (`cputype`); absent in both machine and
//!   instance, the template's model stays.
//! - `flags`, when the machine (or else the instance) gives any, replace
//!   the template's flags; otherwise the template's flags stay.
//! - Other sub-options of the template's `cpu` (`hidden`, `phys-bits`, …)
//!   always stay.
//! - Nothing set anywhere: `cpu` is not written at all.

use pve_client::options::{Cpu, CpuFlag};

use super::desired::VmConfigError;
use crate::api::machine::CpuSpec;

/// The CPU the spec asks for; `None` fields keep the template's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesiredCpu {
    /// `cputype`.
    pub model: Option<String>,
    /// `flags`, replacing the template's when `Some`.
    pub flags: Option<Vec<CpuFlag>>,
}

/// The machine's `cpu` over the instance's default; `None` when neither
/// sets anything.
///
/// # Errors
/// [`VmConfigError`] for a flag that does not parse (validation refuses
/// it first).
pub fn desired_cpu(
    machine: Option<&CpuSpec>,
    instance: Option<&CpuSpec>,
) -> Result<Option<DesiredCpu>, VmConfigError> {
    let model = machine
        .and_then(|c| c.type_.clone())
        .or_else(|| instance.and_then(|c| c.type_.clone()));
    let flags = [machine, instance]
        .into_iter()
        .flatten()
        .map(|c| &c.flags)
        .find(|f| !f.is_empty())
        .map(|f| {
            f.iter()
                .map(|s| CpuFlag::parse(s).map_err(|e| VmConfigError(e.to_string())))
                .collect::<Result<Vec<_>, _>>()
        })
        .transpose()?;
    Ok((model.is_some() || flags.is_some()).then_some(DesiredCpu { model, flags }))
}

/// The `cpu` to write over the VM's `have`, or `None` when it already is
/// what `want` asks.
pub fn cpu_value(want: &DesiredCpu, have: Option<&Cpu>) -> Option<Cpu> {
    let mut next = have.cloned().unwrap_or_default();
    if let Some(m) = &want.model {
        next.cputype = Some(m.clone());
    }
    if let Some(f) = &want.flags {
        next.flags = f.clone();
    }
    (Some(&next) != have).then_some(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(t: Option<&str>, flags: &[&str]) -> CpuSpec {
        CpuSpec {
            type_: t.map(str::to_string),
            flags: flags.iter().map(|f| f.to_string()).collect(),
        }
    }

    #[test]
    fn machine_over_instance_field_by_field() {
        assert_eq!(desired_cpu(None, None).unwrap(), None);
        let inst = spec(Some("x86-64-v2-AES"), &["+pcid"]);
        let d = desired_cpu(Some(&spec(Some("host"), &[])), Some(&inst))
            .unwrap()
            .unwrap();
        assert_eq!(d.model.as_deref(), Some("host"));
        assert_eq!(d.flags.unwrap()[0].name, "pcid");
        let d = desired_cpu(Some(&spec(None, &["-aes"])), Some(&inst))
            .unwrap()
            .unwrap();
        assert_eq!(d.model.as_deref(), Some("x86-64-v2-AES"));
        assert_eq!(d.flags.unwrap()[0].to_string(), "-aes");
    }

    #[test]
    fn the_templates_other_options_stay() {
        let have = Cpu::parse("kvm64,flags=+pcid,hidden=1").unwrap();
        let want = DesiredCpu {
            model: Some("x86-64-v3".into()),
            flags: None,
        };
        let next = cpu_value(&want, Some(&have)).unwrap();
        assert_eq!(next.to_string(), "x86-64-v3,flags=+pcid,hidden=1");
        assert_eq!(cpu_value(&want, Some(&next)), None, "idempotent");
        let want = DesiredCpu {
            model: None,
            flags: Some(vec![CpuFlag::parse("+aes").unwrap()]),
        };
        assert_eq!(cpu_value(&want, None).unwrap().to_string(), "flags=+aes");
    }
}
