//! Template sources, tag selectors, Proxmox tags and VMIDs.
//!
//! Tag syntax is pve-client's [`Tag`] (Proxmox `pve-tag`), the parser the
//! machine controller writes tags and reads template tags with, so a tag
//! validation accepts is one the controller can use and the other way round.

use pve_client::options::Tag;

use super::FieldError;
use crate::api::common::{TemplateSelector, TemplateSource, VMID_MAX, VMID_MIN, VmIdRange};

/// What to write instead of an invalid tag.
const TAG_SYNTAX: &str = "a tag starts with a letter, digit or '_' and goes on with letters, digits, '_', '+', '.' or '-'";

/// `templateID` with `sourceNode`, or a selector — not both, not neither.
pub(super) fn check_template_source(path: &str, t: &TemplateSource, errs: &mut Vec<FieldError>) {
    match (&t.template_id, &t.template_selector) {
        (Some(_), Some(_)) => errs.push(FieldError::new(
            format!("{path}.templateSelector"),
            "templateID and templateSelector are mutually exclusive: keep one",
        )),
        (None, None) => errs.push(FieldError::new(
            path.to_string(),
            "a template needs templateID with sourceNode, or templateSelector with matchTags",
        )),
        (Some(id), None) => {
            check_vmid(&format!("{path}.templateID"), *id, errs);
            if t.source_node.is_none() {
                errs.push(FieldError::new(
                    format!("{path}.sourceNode"),
                    "templateID needs sourceNode (the node that holds the template)",
                ));
            }
        }
        (None, Some(sel)) => check_selector(&format!("{path}.templateSelector"), sel, errs),
    }
    if let Some(n) = &t.source_node
        && pve_client::NodeName::new(n.as_str()).is_err()
    {
        errs.push(FieldError::new(
            format!("{path}.sourceNode"),
            format!("{n:?} is not a Proxmox node name (letters, digits and inner '-')"),
        ));
    }
}

/// A selector matches templates by their tags: without tags, or with a tag
/// no VM can carry, it can never select one.
pub(super) fn check_selector(path: &str, sel: &TemplateSelector, errs: &mut Vec<FieldError>) {
    if sel.match_tags.is_empty() {
        errs.push(FieldError::new(
            format!("{path}.matchTags"),
            "must list at least one tag: a selector without tags matches no template (e.g. matchTags: [capmox])",
        ));
    }
    check_tags(&format!("{path}.matchTags"), &sel.match_tags, errs);
}

/// Each entry must be one Proxmox tag.
pub(super) fn check_tags(path: &str, tags: &[String], errs: &mut Vec<FieldError>) {
    for (i, t) in tags.iter().enumerate() {
        if let Err(e) = Tag::new(t.clone()) {
            errs.push(FieldError::new(
                format!("{path}[{i}]"),
                format!("{t:?} is not a Proxmox tag: {}; {TAG_SYNTAX}", e.reason),
            ));
        }
    }
}

/// A VMID inside Proxmox's range (`pve-vmid`).
pub(super) fn check_vmid(path: &str, id: u32, errs: &mut Vec<FieldError>) {
    if !(VMID_MIN..=VMID_MAX).contains(&id) {
        errs.push(FieldError::new(
            path.to_string(),
            format!("{id} is outside Proxmox's VMID range {VMID_MIN}..{VMID_MAX}"),
        ));
    }
}

/// Both ends valid VMIDs, `start <= end`.
pub(super) fn check_vmid_range(path: &str, r: &VmIdRange, errs: &mut Vec<FieldError>) {
    check_vmid(&format!("{path}.start"), r.start, errs);
    check_vmid(&format!("{path}.end"), r.end, errs);
    if r.start > r.end {
        errs.push(FieldError::new(
            path.to_string(),
            format!("start {} is greater than end {}: swap them", r.start, r.end),
        ));
    }
}

/// Whether two inclusive ranges share a VMID.
pub(super) fn ranges_overlap(a: &VmIdRange, b: &VmIdRange) -> bool {
    a.start <= b.end && b.start <= a.end
}

/// `start-end` as written in messages.
pub(super) fn range_text(r: &VmIdRange) -> String {
    format!("{}-{}", r.start, r.end)
}
