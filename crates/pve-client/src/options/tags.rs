//! `tags`: the VM tag list (`capmox;ubuntu-24.04`).

use std::fmt;
use std::str::FromStr;

use crate::error::ParseError;

/// One tag. Proxmox's character set (pve-common `pve-tag`, docs/field-cases.md B07):
/// the first character is `[a-z0-9_]`, the rest `[a-z0-9_+.-]`,
/// case-insensitive. Neither stricter nor looser: `ubuntu-24.04`, `Debian`,
/// `k8s_1.30`, `a+b` are valid; `-lead`, `.lead`, `has space`, `semi;colon`,
/// `comma,tag` and the empty string are not.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

impl Tag {
    /// Validates one tag, keeping its case.
    ///
    /// # Errors
    /// [`ParseError`] naming the tag and the offending character.
    pub fn new(s: impl Into<String>) -> Result<Self, ParseError> {
        let s = s.into();
        let mut chars = s.chars();
        let Some(first) = chars.next() else {
            return Err(ParseError::new("tag", s, "must not be empty"));
        };
        if !(first.is_ascii_alphanumeric() || first == '_') {
            return Err(ParseError::new(
                "tag",
                s.clone(),
                format!("must not start with {first:?}"),
            ));
        }
        if let Some(bad) =
            chars.find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '+' | '.')))
        {
            return Err(ParseError::new(
                "tag",
                s.clone(),
                format!("character {bad:?} is not allowed"),
            ));
        }
        Ok(Self(s))
    }

    /// Turns any text into a valid tag: lower-case, every character outside
    /// `[a-z0-9_+.-]` replaced by `-`, and a leading `-`, `+` or `.` replaced
    /// by `_`. Empty input gives `_`. For tags the provider generates itself
    /// (cluster names, owner markers).
    pub fn sanitize(s: &str) -> Self {
        let mut out: String = s
            .chars()
            .map(|c| {
                let c = c.to_ascii_lowercase();
                if c.is_ascii_lowercase()
                    || c.is_ascii_digit()
                    || matches!(c, '_' | '-' | '+' | '.')
                {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        if out.is_empty() {
            out.push('_');
        }
        if out.starts_with(['-', '+', '.']) {
            out.replace_range(..1, "_");
        }
        Self(out)
    }

    /// The tag as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Case-insensitive comparison, the way Proxmox compares tags by default.
    pub fn eq_ignore_case(&self, other: &str) -> bool {
        self.0.eq_ignore_ascii_case(other)
    }
}

impl fmt::Display for Tag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Tag {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// The `tags` value: a list of [`Tag`]s.
///
/// Parsing splits on `;`, `,` and whitespace like the server (and skips empty
/// pieces); duplicates (ignoring case) are dropped, keeping the first.
/// Formatting joins with `;` in stored order, so a string read from Proxmox
/// prints back unchanged. Equality is **set equality ignoring case**, because
/// the server lower-cases and sorts tags unless the datacenter says otherwise
/// (docs/proxmox-semantics.md §15) — compare with `==`, never as strings.
#[derive(Debug, Clone, Default)]
pub struct Tags(Vec<Tag>);

impl Tags {
    /// No tags.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a `tags` value.
    ///
    /// # Errors
    /// [`ParseError`] naming the first invalid tag.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut t = Self::new();
        for piece in s.split(|c: char| c == ';' || c == ',' || c.is_whitespace()) {
            if !piece.is_empty() {
                t.insert(Tag::new(piece)?);
            }
        }
        Ok(t)
    }

    /// Adds a tag unless an equal one (ignoring case) is present. Returns
    /// whether it was added.
    pub fn insert(&mut self, tag: Tag) -> bool {
        if self.contains(tag.as_str()) {
            return false;
        }
        self.0.push(tag);
        true
    }

    /// Removes a tag (ignoring case). Returns whether it was present.
    pub fn remove(&mut self, tag: &str) -> bool {
        let before = self.0.len();
        self.0.retain(|t| !t.eq_ignore_case(tag));
        before != self.0.len()
    }

    /// Whether the tag is present (ignoring case).
    pub fn contains(&self, tag: &str) -> bool {
        self.0.iter().any(|t| t.eq_ignore_case(tag))
    }

    /// Whether every tag of `other` is present (ignoring case), e.g. for a
    /// template selector's `matchTags`.
    pub fn contains_all(&self, other: &Tags) -> bool {
        other.iter().all(|t| self.contains(t.as_str()))
    }

    /// The tags in stored order.
    pub fn iter(&self) -> impl Iterator<Item = &Tag> {
        self.0.iter()
    }

    /// Number of tags.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no tags.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The form Proxmox stores by default: lower-cased, de-duplicated, sorted.
    pub fn normalized(&self) -> Self {
        let mut v: Vec<Tag> = self
            .0
            .iter()
            .map(|t| Tag(t.0.to_ascii_lowercase()))
            .collect();
        v.sort();
        v.dedup();
        Self(v)
    }
}

impl PartialEq for Tags {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.contains_all(other)
    }
}

impl Eq for Tags {}

impl fmt::Display for Tags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, t) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            f.write_str(t.as_str())?;
        }
        Ok(())
    }
}

impl FromStr for Tags {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl FromIterator<Tag> for Tags {
    fn from_iter<I: IntoIterator<Item = Tag>>(iter: I) -> Self {
        let mut t = Self::new();
        for tag in iter {
            t.insert(tag);
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn b07_valid_and_invalid_tags() {
        for ok in [
            "capi",
            "ubuntu-24.04",
            "Debian",
            "k8s_1.30",
            "a+b",
            "_x",
            "9",
        ] {
            assert!(Tag::new(ok).is_ok(), "{ok}");
        }
        for bad in [
            "-lead",
            ".lead",
            "has space",
            "semi;colon",
            "comma,tag",
            "",
            "tag\n",
            "+x",
            "ä",
        ] {
            let e = Tag::new(bad).unwrap_err();
            assert_eq!(e.input, bad, "error names the tag");
        }
        let t: Tags = ["capi", "ubuntu-24.04", "Debian", "k8s_1.30", "a+b"]
            .into_iter()
            .map(|s| Tag::new(s).unwrap())
            .collect();
        assert_eq!(t.to_string(), "capi;ubuntu-24.04;Debian;k8s_1.30;a+b");
    }

    #[test]
    fn parses_every_separator() {
        let t = Tags::parse("b;a, c\td  ;;").unwrap();
        assert_eq!(t.to_string(), "b;a;c;d");
        assert!(Tags::parse("").unwrap().is_empty());
        assert!(Tags::parse("ok;-bad").is_err());
    }

    #[test]
    fn compares_as_sets_ignoring_case() {
        let given = Tags::parse("capmox;Ubuntu-24.04;cluster-a").unwrap();
        let stored = Tags::parse("capmox;cluster-a;ubuntu-24.04").unwrap();
        assert_eq!(given, stored);
        assert_eq!(
            given.normalized().to_string(),
            "capmox;cluster-a;ubuntu-24.04"
        );
        assert_ne!(given, Tags::parse("capmox;cluster-a").unwrap());
        let sel = Tags::parse("CAPMOX").unwrap();
        assert!(stored.contains_all(&sel));
    }

    #[test]
    fn duplicates_are_dropped() {
        let mut t = Tags::parse("a;A;b").unwrap();
        assert_eq!(t.to_string(), "a;b");
        assert!(!t.insert(Tag::new("B").unwrap()));
        assert!(t.remove("A"));
        assert_eq!(t.to_string(), "b");
    }

    #[test]
    fn sanitize_produces_valid_tags() {
        assert_eq!(Tag::sanitize("My Cluster/01").as_str(), "my-cluster-01");
        assert_eq!(Tag::sanitize("-x").as_str(), "_x");
        assert_eq!(Tag::sanitize("").as_str(), "_");
        assert_eq!(Tag::sanitize("äb").as_str(), "_b");
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(tags in proptest::collection::vec("[a-zA-Z0-9_][a-zA-Z0-9_+.-]{0,12}", 0..8)) {
            let t: Tags = tags.iter().map(|s| Tag::new(s.clone()).unwrap()).collect();
            let s = t.to_string();
            let back = Tags::parse(&s).unwrap();
            prop_assert_eq!(back.to_string(), s);
            prop_assert_eq!(&back, &t);
        }

        #[test]
        fn sanitize_is_always_valid(s in any::<String>()) {
            let t = Tag::sanitize(&s);
            prop_assert!(Tag::new(t.as_str()).is_ok());
        }
    }
}
