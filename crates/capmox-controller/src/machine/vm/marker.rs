//! The ownership marker that ties a Proxmox VM to its ProxmoxMachine.
//!
//! VM names are not unique in Proxmox (docs/field-cases.md B29), so a VM is ours only
//! when it sits at the machine's VMID **and** carries the machine's UID:
//!
//! - a tag `capmox-<uid>` (Proxmox tag syntax `[a-z0-9_][a-z0-9_+.-]*`,
//!   docs/proxmox-semantics.md §15; a Kubernetes UID is lower-case hex and `-`, so it fits
//!   unchanged). Tags are current in `/cluster/resources` (docs/proxmox-semantics.md §9), so
//!   ownership can be checked without reading the config.
//! - a description line `capmox: <namespace>/<name> uid=<uid>`. The clone
//!   request sets the description, so a VM is marked from the moment it
//!   exists, before the first config write adds the tag.
//!
//! Invariant: a VM with another machine's marker, or with none, is never
//! adopted and never touched ([`Ownership::Foreign`] / [`Ownership::Unmarked`]).

use pve_client::options::{Tag, Tags};

/// Prefix of the ownership tag.
pub const TAG_PREFIX: &str = "capmox-";
/// Prefix of the ownership line in the VM description.
pub const DESCRIPTION_PREFIX: &str = "capmox: ";

/// The marker of one ProxmoxMachine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Marker {
    namespace: String,
    name: String,
    uid: String,
}

/// Whose VM it is, judged from its tags and description.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ownership {
    /// It carries this machine's marker (tag or description line).
    Ours,
    /// It carries another machine's marker; the text names that owner
    /// (`namespace/name uid=…` from the description, or the tag).
    Foreign(String),
    /// It carries no capmox marker at all (someone else's VM, or a template).
    Unmarked,
}

impl Marker {
    /// The marker of the machine `namespace/name` with Kubernetes UID `uid`.
    pub fn new(namespace: &str, name: &str, uid: &str) -> Marker {
        Marker {
            namespace: namespace.to_string(),
            name: name.to_string(),
            uid: uid.to_ascii_lowercase(),
        }
    }

    /// The machine's UID (lower-case).
    pub fn uid(&self) -> &str {
        &self.uid
    }

    /// The ownership tag `capmox-<uid>`, sanitised to Proxmox's tag syntax.
    pub fn tag(&self) -> Tag {
        crate::names::owner_tag(&self.uid)
    }

    /// The description line `capmox: <namespace>/<name> uid=<uid>`.
    pub fn description_line(&self) -> String {
        format!(
            "{DESCRIPTION_PREFIX}{}/{} uid={}",
            self.namespace, self.name, self.uid
        )
    }

    /// The VM description: the user's text (if any), then the marker line
    /// last, so an operator reading the VM's notes in the Proxmox GUI sees
    /// both.
    pub fn description(&self, user_text: Option<&str>) -> String {
        match user_text.map(str::trim_end).filter(|t| !t.is_empty()) {
            Some(text) => format!("{text}\n{}", self.description_line()),
            None => self.description_line(),
        }
    }

    /// Whether `description` contains this machine's marker line.
    pub fn in_description(&self, description: &str) -> bool {
        description
            .lines()
            .filter_map(description_uid)
            .any(|uid| uid.eq_ignore_ascii_case(&self.uid))
    }

    /// Ownership from tags and (when read from the config) description: ours
    /// when either carries this UID; foreign when either carries another
    /// capmox UID; unmarked otherwise.
    pub fn ownership(&self, tags: &Tags, description: Option<&str>) -> Ownership {
        let mine = self.tag();
        if tags.contains(mine.as_str()) || description.is_some_and(|d| self.in_description(d)) {
            return Ownership::Ours;
        }
        if let Some(line) = description.and_then(|d| {
            d.lines()
                .find(|l| description_uid(l).is_some())
                .map(|l| l.trim().trim_start_matches(DESCRIPTION_PREFIX).to_string())
        }) {
            return Ownership::Foreign(line);
        }
        if let Some(tag) = tags.iter().find(|t| is_marker_tag(t.as_str())) {
            return Ownership::Foreign(format!("tag {}", tag.as_str()));
        }
        Ownership::Unmarked
    }
}

/// The bootstrap ISO file name of the VM `vmid` of machine `uid`
/// (`capmox-<vmid>-<uid>.iso`, see [`crate::names::iso_file_name`]): unique
/// per (VMID, machine UID) so a cleanup never deletes another VM's ISO
/// (docs/field-cases.md B20), and carrying the UID so a deletion can sweep
/// for it when the record is lost.
pub fn iso_file_name(vmid: u32, uid: &str) -> String {
    crate::names::iso_file_name(vmid, uid)
}

/// Whether an ISO file name is one of machine `uid`'s (any VMID).
pub fn is_iso_of(file: &str, uid: &str) -> bool {
    let uid = uid.to_ascii_lowercase();
    file.strip_prefix(ISO_PREFIX)
        .and_then(|rest| rest.strip_suffix(".iso"))
        .and_then(|rest| rest.split_once('-'))
        .is_some_and(|(vmid, u)| vmid.bytes().all(|b| b.is_ascii_digit()) && u == uid)
}

/// Prefix of every bootstrap ISO file name.
pub const ISO_PREFIX: &str = "capmox-";

/// Whether a tag is some machine's ownership tag (`capmox-` followed by a
/// UID: 36 characters of hex digits and `-`). The cluster-name tag `capmox`
/// and user tags like `capmox-prod` are not.
pub fn is_marker_tag(tag: &str) -> bool {
    let lower = tag.to_ascii_lowercase();
    lower.strip_prefix(TAG_PREFIX).is_some_and(|rest| {
        rest.len() == 36
            && rest.bytes().filter(|b| *b == b'-').count() == 4
            && rest.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
    })
}

/// The UID in a description marker line, if the line is one.
fn description_uid(line: &str) -> Option<&str> {
    let rest = line.trim().strip_prefix(DESCRIPTION_PREFIX)?;
    let (_, uid) = rest.rsplit_once(" uid=")?;
    let uid = uid.trim();
    (!uid.is_empty()).then_some(uid)
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_names_carry_vmid_and_uid() {
        let uid = "3F2A9C1E-7b4d-4e8a-9c2f-0a1b2c3d4e5f";
        let f = super::iso_file_name(131, uid);
        assert_eq!(f, "capmox-131-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso");
        assert!(super::is_iso_of(&f, uid));
        assert!(super::is_iso_of(
            "capmox-9-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso",
            uid
        ));
        assert!(!super::is_iso_of(
            &f,
            "00000000-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        ));
        assert!(!super::is_iso_of(
            "capmox-x1-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso",
            uid
        ));
        assert!(!super::is_iso_of("ubuntu-24.04.iso", uid));
    }

    use super::*;

    const UID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f";
    const OTHER: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

    fn m() -> Marker {
        Marker::new("wl1", "wl1-md-0-abcde", UID)
    }

    #[test]
    fn tag_and_description_shapes() {
        assert_eq!(
            m().tag().as_str(),
            "capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        );
        assert!(Tag::new(m().tag().as_str()).is_ok());
        assert_eq!(
            m().description_line(),
            "capmox: wl1/wl1-md-0-abcde uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        );
        assert_eq!(
            m().description(Some("worker of wl1\n")),
            "worker of wl1\ncapmox: wl1/wl1-md-0-abcde uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"
        );
        assert_eq!(m().description(Some("  ")), m().description_line());
        // Upper-case UIDs are normalised.
        assert_eq!(Marker::new("a", "b", &UID.to_uppercase()).tag(), m().tag());
    }

    #[test]
    fn ownership_by_tag_or_description() {
        let tags =
            Tags::parse("capmox;ubuntu-24.04;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f").unwrap();
        assert_eq!(m().ownership(&tags, None), Ownership::Ours);
        // Proxmox may have upper-cased nothing, but compare case-insensitively anyway.
        let upper = Tags::parse("CAPMOX-3F2A9C1E-7B4D-4E8A-9C2F-0A1B2C3D4E5F").unwrap();
        assert_eq!(m().ownership(&upper, None), Ownership::Ours);
        let plain = Tags::parse("capmox;ubuntu-24.04").unwrap();
        assert_eq!(m().ownership(&plain, None), Ownership::Unmarked);
        assert_eq!(
            m().ownership(
                &plain,
                Some("notes\ncapmox: wl1/wl1-md-0-abcde uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f")
            ),
            Ownership::Ours
        );
    }

    #[test]
    fn other_machines_are_foreign() {
        let theirs = Tags::parse("capmox;capmox-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee").unwrap();
        assert_eq!(
            m().ownership(&theirs, None),
            Ownership::Foreign("tag capmox-aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee".into())
        );
        let desc = format!("capmox: wl2/wl2-md-0-x uid={OTHER}");
        assert_eq!(
            m().ownership(&Tags::new(), Some(&desc)),
            Ownership::Foreign(format!("wl2/wl2-md-0-x uid={OTHER}"))
        );
        // A same-named machine with another UID is still foreign.
        let same_name = format!("capmox: wl1/wl1-md-0-abcde uid={OTHER}");
        assert!(matches!(
            m().ownership(&Tags::new(), Some(&same_name)),
            Ownership::Foreign(_)
        ));
        // A foreign marker plus ours (a template made from a provisioned VM,
        // then cloned by us) is ours: our clone set the description.
        let both = Tags::parse(&format!("capmox-{OTHER}")).unwrap();
        assert_eq!(
            m().ownership(&both, Some(&m().description_line())),
            Ownership::Ours
        );
    }

    #[test]
    fn marker_tags_are_recognised_exactly() {
        assert!(is_marker_tag("capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"));
        assert!(!is_marker_tag("capmox"));
        assert!(!is_marker_tag("capmox-prod"));
        assert!(!is_marker_tag("capmox-3f2a9c1e"));
        assert!(!is_marker_tag("other-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"));
    }
}
