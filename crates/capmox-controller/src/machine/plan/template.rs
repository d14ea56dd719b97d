//! Which template a machine is cloned from, in its instance.
//!
//! The source is the machine's override (`templateID` + `sourceNode`, or
//! `templateSelector`) ▸ the instance's `template`. A selector is evaluated
//! **only over VMs that are templates** in that instance (tags travel between
//! Proxmox clusters, VMIDs do not):
//!
//! - `exact`: the template's tag set equals `matchTags` (case-insensitive);
//! - `uniqueSubset`: `matchTags` ⊆ the template's tags, and exactly one matches;
//! - `bestSubset`: `matchTags` ⊆ the template's tags; the matches with the
//!   fewest extra tags win.
//!
//! Several equally good matches are ambiguous — unless they are **replicas**:
//! the same tag set, one per node (the usual way to have a template next to
//! node-local storage, docs/field-cases.md B05). Replicas count as one template; the
//! scheduler then clones each VM from the replica on its own node.
//!
//! Zero or ambiguous matches are an error listing the candidates, never a
//! guess.

use std::collections::BTreeSet;
use std::fmt;

use pve_client::options::Tags;

use crate::api::common::{MatchPolicy, TemplateSelector, TemplateSource};
use crate::api::machine::ProxmoxMachineSpec;

/// A VM of the instance as `/cluster/resources` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TemplateVm {
    /// VMID.
    pub vmid: u32,
    /// Node holding it.
    pub node: String,
    /// Name (may be absent right after a clone; templates are old).
    pub name: Option<String>,
    /// Tags.
    pub tags: Tags,
    /// Whether it is a template (`template: 1`).
    pub template: bool,
}

impl fmt::Display for TemplateVm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.vmid)?;
        if let Some(n) = &self.name {
            write!(f, " ({n})")?;
        }
        write!(f, " on {} [{}]", self.node, self.tags)
    }
}

/// What to look for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TemplateRequest {
    /// `templateID` on `sourceNode`.
    ById {
        /// The node named by `sourceNode`.
        node: String,
        /// The template's VMID.
        vmid: u32,
    },
    /// A tag selector.
    BySelector {
        /// `matchTags`.
        tags: Tags,
        /// The policy (`exact` when absent).
        policy: MatchPolicy,
    },
}

/// The template(s) found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolved {
    /// One template.
    One(TemplateVm),
    /// Identical replicas, one per node (sorted by node name); clone from the
    /// one on the VM's node.
    Replicas(Vec<TemplateVm>),
}

impl Resolved {
    /// Every candidate VM (one, or all replicas).
    pub fn all(&self) -> Vec<&TemplateVm> {
        match self {
            Resolved::One(t) => vec![t],
            Resolved::Replicas(v) => v.iter().collect(),
        }
    }

    /// The template to clone onto `node`: the replica on that node if there
    /// is one, else the single template.
    pub fn for_node(&self, node: &str) -> Option<&TemplateVm> {
        match self {
            Resolved::One(t) => Some(t),
            Resolved::Replicas(v) => v.iter().find(|t| t.node == node),
        }
    }
}

/// Why no template could be chosen.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Neither the machine nor its instance names a template.
    #[error(
        "no template configured: set templateID and sourceNode or templateSelector on the ProxmoxMachine, or template on instance {instance:?}"
    )]
    NotConfigured {
        /// The instance.
        instance: String,
    },
    /// A source names a selector with no tags, or an id without a node.
    #[error("template source is incomplete: {0}")]
    Incomplete(String),
    /// No VM with that id in the instance.
    #[error("template {vmid} does not exist in instance {instance:?}")]
    NotFound {
        /// The VMID.
        vmid: u32,
        /// The instance.
        instance: String,
    },
    /// The VM exists but on another node than `sourceNode`.
    #[error("template {vmid} is not on node {node} (sourceNode) but on {actual}")]
    WrongNode {
        /// The VMID.
        vmid: u32,
        /// `sourceNode`.
        node: String,
        /// Where it is.
        actual: String,
    },
    /// The VM is not a template (cloning it would copy a live VM; docs/field-cases.md B29).
    #[error("VM {vmid} on {node} is not a template")]
    NotATemplate {
        /// The VMID.
        vmid: u32,
        /// Its node.
        node: String,
    },
    /// The selector matches no template.
    #[error(
        "no template matches tags [{tags}] ({policy}); templates in instance {instance:?}: {candidates}"
    )]
    NoMatch {
        /// The selector's tags.
        tags: String,
        /// The policy name.
        policy: &'static str,
        /// The instance.
        instance: String,
        /// Every template of the instance, or `none`.
        candidates: String,
    },
    /// The selector matches several different templates.
    #[error("tags [{tags}] ({policy}) match several templates in instance {instance:?}: {matches}")]
    Ambiguous {
        /// The selector's tags.
        tags: String,
        /// The policy name.
        policy: &'static str,
        /// The instance.
        instance: String,
        /// The matching templates.
        matches: String,
    },
}

/// The policy's name as written in the spec.
pub fn policy_name(p: MatchPolicy) -> &'static str {
    match p {
        MatchPolicy::Exact => "exact",
        MatchPolicy::UniqueSubset => "uniqueSubset",
        MatchPolicy::BestSubset => "bestSubset",
    }
}

fn selector_request(sel: &TemplateSelector) -> Result<TemplateRequest, TemplateError> {
    let tags = Tags::parse(&sel.match_tags.join(";"))
        .map_err(|e| TemplateError::Incomplete(format!("templateSelector.matchTags: {e}")))?;
    if tags.is_empty() {
        return Err(TemplateError::Incomplete(
            "templateSelector.matchTags is empty".into(),
        ));
    }
    Ok(TemplateRequest::BySelector {
        tags,
        policy: sel.match_policy.unwrap_or_default(),
    })
}

/// The request for a machine in `instance`: the machine's own template
/// fields ▸ the instance's `template`.
///
/// # Errors
/// [`TemplateError::NotConfigured`] when neither names one,
/// [`TemplateError::Incomplete`] for a `templateID` without `sourceNode` or
/// an empty selector.
pub fn request_for(
    machine: &ProxmoxMachineSpec,
    instance: &str,
    instance_template: Option<&TemplateSource>,
) -> Result<TemplateRequest, TemplateError> {
    if let Some(sel) = &machine.template_selector {
        return selector_request(sel);
    }
    if let Some(vmid) = machine.template_id {
        let node = machine
            .source_node
            .clone()
            .ok_or_else(|| TemplateError::Incomplete("templateID needs sourceNode".into()))?;
        return Ok(TemplateRequest::ById { node, vmid });
    }
    let Some(src) = instance_template else {
        return Err(TemplateError::NotConfigured {
            instance: instance.to_string(),
        });
    };
    if let Some(sel) = &src.template_selector {
        return selector_request(sel);
    }
    match (src.template_id, &src.source_node) {
        (Some(vmid), Some(node)) => Ok(TemplateRequest::ById {
            node: node.clone(),
            vmid,
        }),
        (Some(_), None) => Err(TemplateError::Incomplete(format!(
            "instance {instance:?} template has templateID but no sourceNode"
        ))),
        _ => Err(TemplateError::NotConfigured {
            instance: instance.to_string(),
        }),
    }
}

fn lower_set(tags: &Tags) -> BTreeSet<String> {
    tags.iter()
        .map(|t| t.as_str().to_ascii_lowercase())
        .collect()
}

fn list<'a>(vms: impl IntoIterator<Item = &'a TemplateVm>) -> String {
    let v: Vec<String> = vms.into_iter().map(ToString::to_string).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Finds the template for `request` among `vms` (every VM of the instance).
///
/// # Errors
/// [`TemplateError::NotFound`], [`TemplateError::WrongNode`],
/// [`TemplateError::NotATemplate`] for an id; [`TemplateError::NoMatch`] and
/// [`TemplateError::Ambiguous`] for a selector.
pub fn resolve(
    request: &TemplateRequest,
    instance: &str,
    vms: &[TemplateVm],
) -> Result<Resolved, TemplateError> {
    match request {
        TemplateRequest::ById { node, vmid } => {
            let vm =
                vms.iter()
                    .find(|v| v.vmid == *vmid)
                    .ok_or_else(|| TemplateError::NotFound {
                        vmid: *vmid,
                        instance: instance.to_string(),
                    })?;
            if &vm.node != node {
                return Err(TemplateError::WrongNode {
                    vmid: *vmid,
                    node: node.clone(),
                    actual: vm.node.clone(),
                });
            }
            if !vm.template {
                return Err(TemplateError::NotATemplate {
                    vmid: *vmid,
                    node: vm.node.clone(),
                });
            }
            Ok(Resolved::One(vm.clone()))
        }
        TemplateRequest::BySelector { tags, policy } => {
            let want = lower_set(tags);
            let templates: Vec<&TemplateVm> = vms.iter().filter(|v| v.template).collect();
            let mut matches: Vec<(&TemplateVm, usize)> = templates
                .iter()
                .filter_map(|t| {
                    let have = lower_set(&t.tags);
                    let ok = match policy {
                        MatchPolicy::Exact => have == want,
                        MatchPolicy::UniqueSubset | MatchPolicy::BestSubset => {
                            want.is_subset(&have)
                        }
                    };
                    ok.then(|| (*t, have.len() - want.len().min(have.len())))
                })
                .collect();
            if *policy == MatchPolicy::BestSubset
                && let Some(best) = matches.iter().map(|(_, extra)| *extra).min()
            {
                matches.retain(|(_, extra)| *extra == best);
            }
            let tags_text = tags.to_string();
            let policy_text = policy_name(*policy);
            match matches.len() {
                0 => Err(TemplateError::NoMatch {
                    tags: tags_text,
                    policy: policy_text,
                    instance: instance.to_string(),
                    candidates: list(templates.iter().copied()),
                }),
                1 => Ok(Resolved::One(matches[0].0.clone())),
                _ => {
                    let first = lower_set(&matches[0].0.tags);
                    let nodes: BTreeSet<&str> =
                        matches.iter().map(|(t, _)| t.node.as_str()).collect();
                    let replicas = nodes.len() == matches.len()
                        && matches.iter().all(|(t, _)| lower_set(&t.tags) == first);
                    if replicas {
                        let mut v: Vec<TemplateVm> =
                            matches.into_iter().map(|(t, _)| t.clone()).collect();
                        v.sort_by(|a, b| a.node.cmp(&b.node));
                        Ok(Resolved::Replicas(v))
                    } else {
                        Err(TemplateError::Ambiguous {
                            tags: tags_text,
                            policy: policy_text,
                            instance: instance.to_string(),
                            matches: list(matches.iter().map(|(t, _)| *t)),
                        })
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(vmid: u32, node: &str, tags: &str, template: bool) -> TemplateVm {
        TemplateVm {
            vmid,
            node: node.into(),
            name: Some(format!("vm{vmid}")),
            tags: Tags::parse(tags).unwrap(),
            template,
        }
    }

    fn sel(tags: &[&str], policy: MatchPolicy) -> TemplateRequest {
        TemplateRequest::BySelector {
            tags: Tags::parse(&tags.join(";")).unwrap(),
            policy,
        }
    }

    fn inventory() -> Vec<TemplateVm> {
        vec![
            vm(9000, "pve-a1", "capmox;ubuntu-24.04", true),
            vm(9001, "pve-a1", "capmox;ubuntu-24.04;gpu", true),
            vm(9002, "pve-a2", "capmox;debian-12", true),
            // A running VM with matching tags must never be chosen.
            vm(105, "pve-a2", "capmox;ubuntu-24.04", false),
        ]
    }

    #[test]
    fn by_id_checks_node_and_template_flag() {
        let inv = inventory();
        let ok = resolve(
            &TemplateRequest::ById {
                node: "pve-a1".into(),
                vmid: 9000,
            },
            "dc-a",
            &inv,
        )
        .unwrap();
        assert_eq!(ok, Resolved::One(inv[0].clone()));
        assert_eq!(
            resolve(
                &TemplateRequest::ById {
                    node: "pve-a2".into(),
                    vmid: 9000
                },
                "dc-a",
                &inv
            )
            .unwrap_err(),
            TemplateError::WrongNode {
                vmid: 9000,
                node: "pve-a2".into(),
                actual: "pve-a1".into()
            }
        );
        assert_eq!(
            resolve(
                &TemplateRequest::ById {
                    node: "pve-a2".into(),
                    vmid: 105
                },
                "dc-a",
                &inv
            )
            .unwrap_err(),
            TemplateError::NotATemplate {
                vmid: 105,
                node: "pve-a2".into()
            }
        );
        let missing = resolve(
            &TemplateRequest::ById {
                node: "pve-a1".into(),
                vmid: 9100,
            },
            "dc-a",
            &inv,
        )
        .unwrap_err();
        assert_eq!(
            missing.to_string(),
            "template 9100 does not exist in instance \"dc-a\""
        );
    }

    #[test]
    fn exact_policy() {
        let inv = inventory();
        let r = resolve(
            &sel(&["capmox", "ubuntu-24.04"], MatchPolicy::Exact),
            "dc-a",
            &inv,
        )
        .unwrap();
        assert_eq!(r, Resolved::One(inv[0].clone()));
        // Case-insensitive.
        let r = resolve(
            &sel(&["CAPMOX", "Ubuntu-24.04"], MatchPolicy::Exact),
            "dc-a",
            &inv,
        )
        .unwrap();
        assert_eq!(r, Resolved::One(inv[0].clone()));
        let e = resolve(&sel(&["capmox"], MatchPolicy::Exact), "dc-a", &inv).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no template matches tags [capmox] (exact); templates in instance \"dc-a\": \
             9000 (vm9000) on pve-a1 [capmox;ubuntu-24.04], 9001 (vm9001) on pve-a1 [capmox;ubuntu-24.04;gpu], \
             9002 (vm9002) on pve-a2 [capmox;debian-12]"
        );
    }

    #[test]
    fn unique_subset_policy() {
        let inv = inventory();
        let r = resolve(&sel(&["gpu"], MatchPolicy::UniqueSubset), "dc-a", &inv).unwrap();
        assert_eq!(r, Resolved::One(inv[1].clone()));
        let e = resolve(
            &sel(&["ubuntu-24.04"], MatchPolicy::UniqueSubset),
            "dc-a",
            &inv,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "tags [ubuntu-24.04] (uniqueSubset) match several templates in instance \"dc-a\": \
             9000 (vm9000) on pve-a1 [capmox;ubuntu-24.04], 9001 (vm9001) on pve-a1 [capmox;ubuntu-24.04;gpu]"
        );
    }

    #[test]
    fn best_subset_policy() {
        let inv = inventory();
        // 9000 has 1 extra tag, 9001 has 2: 9000 wins.
        let r = resolve(
            &sel(&["ubuntu-24.04"], MatchPolicy::BestSubset),
            "dc-a",
            &inv,
        )
        .unwrap();
        assert_eq!(r, Resolved::One(inv[0].clone()));
        // Tie between two different templates: ambiguous.
        let mut tie = inventory();
        tie.push(vm(9003, "pve-a1", "capmox;ubuntu-24.04;lts", true));
        tie.push(vm(9004, "pve-a1", "capmox;ubuntu-22.04;lts", true));
        let e = resolve(
            &sel(&["capmox", "lts"], MatchPolicy::BestSubset),
            "dc-a",
            &tie,
        )
        .unwrap_err();
        assert!(matches!(e, TemplateError::Ambiguous { .. }), "{e}");
        let e = resolve(
            &sel(&["nothing"], MatchPolicy::BestSubset),
            "dc-a",
            &inventory(),
        )
        .unwrap_err();
        assert!(matches!(e, TemplateError::NoMatch { .. }));
    }

    #[test]
    fn replicas_on_different_nodes_count_as_one() {
        let inv = vec![
            vm(9010, "pve-a2", "capmox;ubuntu-24.04", true),
            vm(9011, "pve-a1", "capmox;ubuntu-24.04", true),
        ];
        let r = resolve(
            &sel(&["capmox", "ubuntu-24.04"], MatchPolicy::Exact),
            "dc-a",
            &inv,
        )
        .unwrap();
        assert_eq!(r, Resolved::Replicas(vec![inv[1].clone(), inv[0].clone()]));
        assert_eq!(r.for_node("pve-a2").map(|t| t.vmid), Some(9010));
        assert_eq!(r.for_node("pve-a3"), None);
        // Two copies on one node are not replicas.
        let same = vec![
            vm(9010, "pve-a1", "capmox;ubuntu-24.04", true),
            vm(9011, "pve-a1", "capmox;ubuntu-24.04", true),
        ];
        assert!(resolve(&sel(&["capmox"], MatchPolicy::UniqueSubset), "dc-a", &same).is_err());
    }

    #[test]
    fn machine_override_beats_instance_template() {
        let instance_src = TemplateSource {
            source_node: None,
            template_id: None,
            template_selector: Some(TemplateSelector {
                match_tags: vec!["capmox".into()],
                match_policy: Some(MatchPolicy::UniqueSubset),
            }),
        };
        let mut spec = ProxmoxMachineSpec::default();
        assert_eq!(
            request_for(&spec, "dc-a", Some(&instance_src)).unwrap(),
            sel(&["capmox"], MatchPolicy::UniqueSubset)
        );
        spec.template_id = Some(9000);
        spec.source_node = Some("pve-a1".into());
        assert_eq!(
            request_for(&spec, "dc-a", Some(&instance_src)).unwrap(),
            TemplateRequest::ById {
                node: "pve-a1".into(),
                vmid: 9000
            }
        );
        let none = request_for(&ProxmoxMachineSpec::default(), "dc-a", None).unwrap_err();
        assert!(matches!(none, TemplateError::NotConfigured { .. }));
        spec.source_node = None;
        assert!(matches!(
            request_for(&spec, "dc-a", None).unwrap_err(),
            TemplateError::Incomplete(_)
        ));
    }
}
