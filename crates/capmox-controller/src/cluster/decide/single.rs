//! Which instances are probed per mode, and the SingleInstance choice
//! (machines already placed first, then the recorded choice, then the first
//! healthy instance, control-plane eligible first).

use std::collections::BTreeMap;

use super::MachineCounts;
use crate::api::{ClusterMode, ProxmoxClusterSpec, ProxmoxClusterStatus};
use crate::cluster::probe::ProbeResult;
use crate::instances::{EffectiveInstance, effective_instances};

/// The instances probed in this mode: `Default` → only the first (the one
/// in use); `SingleInstance` and `MultiInstance` → all listed.
pub fn instances_to_probe(spec: &ProxmoxClusterSpec) -> Vec<EffectiveInstance> {
    let all = effective_instances(spec);
    match spec.mode() {
        ClusterMode::Default => all.into_iter().take(1).collect(),
        ClusterMode::SingleInstance | ClusterMode::MultiInstance => all,
    }
}

/// The SingleInstance choice and, when machines are spread over several
/// instances (which should not happen), a note saying so.
pub fn select_single(
    instances: &[EffectiveInstance],
    probes: &BTreeMap<String, ProbeResult>,
    machines: &MachineCounts,
    previous: Option<&str>,
) -> (Option<String>, Option<String>) {
    let placed: Vec<(&str, u32)> = instances
        .iter()
        .map(|i| (i.name(), machines.in_instance(i.name())))
        .filter(|(_, n)| *n > 0)
        .collect();
    if let Some(&(first, _)) = placed.first() {
        let best = placed
            .iter()
            .fold(
                (first, 0u32),
                |acc, &(n, c)| if c > acc.1 { (n, c) } else { acc },
            )
            .0;
        let note = (placed.len() > 1).then(|| {
            format!(
                "machines of this cluster are in several instances ({}); SingleInstance uses {best}",
                placed
                    .iter()
                    .map(|(n, c)| format!("{n}: {c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        return (Some(best.to_string()), note);
    }
    if let Some(p) = previous
        && instances.iter().any(|i| i.name() == p)
    {
        return (Some(p.to_string()), None);
    }
    let ready = |i: &&EffectiveInstance| probes.get(i.name()).is_some_and(|p| p.ready);
    let choice = instances
        .iter()
        .filter(ready)
        .find(|i| i.spec.is_control_plane())
        .or_else(|| instances.iter().find(ready));
    (choice.map(|i| i.name().to_string()), None)
}

pub(super) fn previous_selected(previous: &ProxmoxClusterStatus) -> Option<&str> {
    previous
        .instances
        .iter()
        .find(|i| i.selected == Some(true))
        .map(|i| i.name.as_str())
}
