//! Whether an instance's template is usable (by `templateID` on
//! `sourceNode`, or by tag selector).

use std::collections::BTreeSet;

use crate::api::{MatchPolicy, TemplateSource};
use crate::pve::ClusterResource;

fn lower_set<'a>(tags: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    tags.map(str::to_ascii_lowercase).collect()
}

/// Why the instance's template is not usable, if it is not: `templateID`
/// must be a template on `sourceNode`; a selector must match at least one
/// template (`exact`: same tag set; `uniqueSubset` / `bestSubset`: the
/// template carries every `matchTags` entry — which one wins, and ambiguity,
/// is the machine reconciler's call).
pub fn template_problem(t: &TemplateSource, vms: &[ClusterResource]) -> Option<String> {
    if let Some(id) = t.template_id {
        let node = t.source_node.as_deref().unwrap_or("");
        let Some(vm) = vms
            .iter()
            .find(|r| r.is_qemu() && r.vmid.map(|v| v.get()) == Some(id))
        else {
            return Some(format!(
                "template {id} (templateID) does not exist (or the token lacks VM.Audit on /vms/{id})"
            ));
        };
        if !vm.template {
            return Some(format!(
                "VM {id} is not a template; convert it or pick another templateID"
            ));
        }
        let on = vm.node.as_ref().map(|n| n.as_str()).unwrap_or("");
        if on != node {
            return Some(format!(
                "template {id} is on node {on}, not on sourceNode {node}"
            ));
        }
        return None;
    }
    let sel = t.template_selector.as_ref()?;
    let want = lower_set(sel.match_tags.iter().map(String::as_str));
    let exact = matches!(sel.match_policy.unwrap_or_default(), MatchPolicy::Exact);
    let templates: Vec<(&ClusterResource, BTreeSet<String>)> = vms
        .iter()
        .filter(|r| r.is_qemu() && r.template)
        .map(|r| {
            let tags = r.tags_raw.as_deref().unwrap_or("");
            let set = lower_set(tags.split([';', ',', ' ']).filter(|s| !s.is_empty()));
            (r, set)
        })
        .collect();
    let matched = templates.iter().any(|(_, tags)| {
        if exact {
            *tags == want
        } else {
            want.is_subset(tags)
        }
    });
    if matched {
        return None;
    }
    let policy = match sel.match_policy.unwrap_or_default() {
        MatchPolicy::Exact => "exact",
        MatchPolicy::UniqueSubset => "uniqueSubset",
        MatchPolicy::BestSubset => "bestSubset",
    };
    let mut seen: Vec<String> = templates
        .iter()
        .take(5)
        .map(|(r, tags)| {
            format!(
                "{} ({}) [{}]",
                r.vmid.map(|v| v.get()).unwrap_or(0),
                r.name.as_deref().unwrap_or("?"),
                tags.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if templates.len() > 5 {
        seen.push(format!("… {} more", templates.len() - 5));
    }
    Some(format!(
        "no template matches templateSelector tags [{}] (matchPolicy {policy}); templates: {}",
        want.iter().cloned().collect::<Vec<_>>().join(", "),
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    ))
}
