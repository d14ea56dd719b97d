//! kube-apiserver's name and label rules as plain functions, each returning the messages
//! kube-apiserver gives (empty when the value is valid).
//!
//! Sources: `k8s.io/apimachinery/pkg/util/validation` (`IsDNS1123Label`,
//! `IsDNS1123Subdomain`, `IsValidLabelValue`, `IsQualifiedName`),
//! `k8s.io/apimachinery/pkg/api/validation/path` (`IsValidPathSegmentName`) and the
//! per-kind name functions passed to `ValidateObjectMeta` (`ValidateNamespaceName`,
//! `ValidateSecretName`, …). kube-sim's write path uses these functions, and other
//! crates' tests use them to check that a value they derive is one kube-apiserver accepts.
//!
//! ```
//! use kube_sim::validation::{self, NameRule};
//!
//! // A DNS-1123 subdomain has no per-label limit, only the 253-character total.
//! let long_label = format!("{}.example", "a".repeat(100));
//! assert!(validation::dns1123_subdomain(&long_label).is_empty());
//! assert_eq!(validation::name_rule("", "Namespace"), NameRule::Label);
//! assert!(!validation::object_name(NameRule::Label, &long_label, false).is_empty());
//! assert!(validation::label_value(&"v".repeat(63)).is_empty());
//! assert_eq!(
//!     validation::label_value(&"v".repeat(64)),
//!     vec!["must be no more than 63 characters".to_string()]
//! );
//! ```

/// Longest DNS-1123 label (`IsDNS1123Label`).
pub const DNS1123_LABEL_MAX: usize = 63;
/// Longest DNS-1123 subdomain (`IsDNS1123Subdomain`).
pub const DNS1123_SUBDOMAIN_MAX: usize = 253;
/// Longest label value, and longest name part of a qualified name (label key).
pub const LABEL_VALUE_MAX: usize = 63;
/// Longest `generateName` prefix kept before the 5 random characters are appended
/// (`SimpleNameGenerator`: 63 − 5).
pub const GENERATE_NAME_PREFIX_MAX: usize = 58;

const DNS1123_LABEL_FMT: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1123_LABEL_ERR: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_ERR: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_ERR: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_FMT: &str = "(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?";
const LABEL_VALUE_ERR: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// apimachinery's `RegexError`: the message, examples and the regular expression.
fn regex_error(msg: &str, fmt: &str, examples: &[&str]) -> String {
    let mut out = format!("{msg} (e.g. ");
    for (i, e) in examples.iter().enumerate() {
        if i > 0 {
            out.push_str(" or ");
        }
        out.push_str(&format!("'{e}', "));
    }
    out.push_str(&format!("regex used for validation is '{fmt}')"));
    out
}

fn max_len_error(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// Whether `s` matches `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (any length).
fn label_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// Whether `s` matches the subdomain expression: dot-separated label shapes (any length).
fn subdomain_shape(s: &str) -> bool {
    s.split('.').all(label_shape)
}

/// Whether `s` matches `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]` (any length).
fn qualified_shape(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
}

/// `IsDNS1123Label`: lower-case alphanumerics and `-`, alphanumeric at both ends, at
/// most [`DNS1123_LABEL_MAX`] characters.
pub fn dns1123_label(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_LABEL_MAX {
        errs.push(max_len_error(DNS1123_LABEL_MAX));
    }
    if !label_shape(value) {
        if subdomain_shape(value) {
            errs.push("must not contain dots".to_string());
        } else {
            errs.push(regex_error(
                DNS1123_LABEL_ERR,
                DNS1123_LABEL_FMT,
                &["my-name", "123-abc"],
            ));
        }
    }
    errs
}

/// `IsDNS1123Subdomain`: dot-separated DNS-1123 label shapes, at most
/// [`DNS1123_SUBDOMAIN_MAX`] characters in total. There is no limit per label: the
/// expression kube-apiserver matches has none.
pub fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > DNS1123_SUBDOMAIN_MAX {
        errs.push(max_len_error(DNS1123_SUBDOMAIN_MAX));
    }
    if !subdomain_shape(value) {
        errs.push(regex_error(
            DNS1123_SUBDOMAIN_ERR,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        ));
    }
    errs
}

/// `IsValidLabelValue`: empty, or alphanumerics, `-`, `_` and `.` with an alphanumeric at
/// both ends; at most [`LABEL_VALUE_MAX`] characters.
pub fn label_value(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if value.len() > LABEL_VALUE_MAX {
        errs.push(max_len_error(LABEL_VALUE_MAX));
    }
    if !value.is_empty() && !qualified_shape(value) {
        errs.push(regex_error(
            LABEL_VALUE_ERR,
            LABEL_VALUE_FMT,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errs
}

/// `IsQualifiedName` (label and annotation keys): an optional DNS-1123 subdomain prefix
/// and `/`, then a name part of at most [`LABEL_VALUE_MAX`] characters.
pub fn qualified_name(value: &str) -> Vec<String> {
    let mut errs = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                errs.push("prefix part must be non-empty".to_string());
            } else {
                errs.extend(
                    dns1123_subdomain(prefix)
                        .into_iter()
                        .map(|m| format!("prefix part {m}")),
                );
            }
            *name
        }
        _ => {
            errs.push(format!(
                "a qualified name {} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
                regex_error(
                    QUALIFIED_NAME_ERR,
                    QUALIFIED_NAME_FMT,
                    &["MyName", "my.name", "123-abc"]
                )
            ));
            return errs;
        }
    };
    if name.is_empty() {
        errs.push("name part must be non-empty".to_string());
    } else if name.len() > LABEL_VALUE_MAX {
        errs.push(format!("name part {}", max_len_error(LABEL_VALUE_MAX)));
    }
    if !qualified_shape(name) {
        errs.push(format!(
            "name part {}",
            regex_error(
                QUALIFIED_NAME_ERR,
                QUALIFIED_NAME_FMT,
                &["MyName", "my.name", "123-abc"]
            )
        ));
    }
    errs
}

/// `IsValidPathSegmentName` (and, with `prefix`, `IsValidPathSegmentPrefix`): a name that
/// can be a URL path segment — not `.` or `..`, no `/` or `%`. kube-apiserver checks it
/// for every kind after the kind's own name rule.
pub fn path_segment_name(value: &str, prefix: bool) -> Vec<String> {
    if !prefix {
        for bad in [".", ".."] {
            if value == bad {
                return vec![format!("may not be '{bad}'")];
            }
        }
    }
    ["/", "%"]
        .iter()
        .filter(|bad| value.contains(**bad))
        .map(|bad| format!("may not contain '{bad}'"))
        .collect()
}

/// How kube-apiserver validates `metadata.name` (and `generateName`) of a kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NameRule {
    /// DNS-1123 subdomain (`NameIsDNSSubdomain`): most kinds, every custom resource.
    Subdomain,
    /// DNS-1123 label (`NameIsDNSLabel`): Namespace.
    Label,
    /// Only the path-segment rule: core `v1` Event, whose legacy validation checks no
    /// name shape.
    PathSegmentOnly,
}

/// The name rule of a kind by API group (`""` for core) and kind, for the kinds kube-sim
/// serves and every custom resource (subdomain). Kinds kube-sim does not serve follow
/// their own rules in kube-apiserver (for example Service: DNS-1035 label); they are
/// answered as subdomains here.
pub fn name_rule(group: &str, kind: &str) -> NameRule {
    match (group, kind) {
        ("", "Namespace") => NameRule::Label,
        ("", "Event") => NameRule::PathSegmentOnly,
        _ => NameRule::Subdomain,
    }
}

/// kube-apiserver's `NameIsDNSSubdomain` / `NameIsDNSLabel` with its `prefix` flag: a
/// `generateName` prefix may end in `-` (it is checked as if that `-` were a letter).
fn mask_trailing_dash(name: &str) -> String {
    match name.strip_suffix('-') {
        Some(head) if name.len() > 1 => format!("{head}a"),
        _ => name.to_string(),
    }
}

/// The kind's own name messages for `name` under `rule` (`prefix` for a `generateName`),
/// followed by the path-segment messages kube-apiserver adds for every kind.
pub fn object_name(rule: NameRule, name: &str, prefix: bool) -> Vec<String> {
    let checked = if prefix {
        mask_trailing_dash(name)
    } else {
        name.to_string()
    };
    let mut errs = match rule {
        NameRule::Subdomain => dns1123_subdomain(&checked),
        NameRule::Label => dns1123_label(&checked),
        NameRule::PathSegmentOnly => Vec::new(),
    };
    errs.extend(path_segment_name(name, prefix));
    errs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        assert!(dns1123_label("a-1").is_empty());
        assert_eq!(dns1123_label("a.b"), vec!["must not contain dots"]);
        assert_eq!(
            dns1123_label(&"a".repeat(64)),
            vec!["must be no more than 63 characters"]
        );
        assert!(dns1123_label("A")[0].starts_with("a lowercase RFC 1123 label must consist"));
        // A label of 64 characters inside a subdomain is fine (kube-apiserver's
        // expression has no per-label limit).
        assert!(dns1123_subdomain(&format!("{}.b", "a".repeat(64))).is_empty());
        assert_eq!(
            dns1123_subdomain(&"a".repeat(254)),
            vec!["must be no more than 253 characters"]
        );
        let both = dns1123_subdomain(&format!("-{}", "a".repeat(253)));
        assert_eq!(both.len(), 2);
        assert!(both[1].ends_with(&format!(
            "regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
        )));
    }

    #[test]
    fn label_values_and_keys() {
        assert!(label_value("").is_empty());
        assert!(label_value("My_value.1").is_empty());
        assert_eq!(label_value("-x").len(), 1);
        assert!(qualified_name("example.com/Name").is_empty());
        assert_eq!(qualified_name("/x"), vec!["prefix part must be non-empty"]);
        assert_eq!(
            qualified_name(&"n".repeat(64)),
            vec!["name part must be no more than 63 characters"]
        );
        assert!(qualified_name("a/b/c")[0].starts_with("a qualified name must consist"));
    }

    #[test]
    fn names_per_kind() {
        assert_eq!(name_rule("", "Namespace"), NameRule::Label);
        assert_eq!(name_rule("", "Event"), NameRule::PathSegmentOnly);
        assert_eq!(name_rule("events.k8s.io", "Event"), NameRule::Subdomain);
        assert_eq!(name_rule("example.com", "Widget"), NameRule::Subdomain);
        assert!(object_name(NameRule::Subdomain, "wl1-md-0-", true).is_empty());
        assert_eq!(
            object_name(NameRule::PathSegmentOnly, "a/b%", false),
            vec!["may not contain '/'", "may not contain '%'"]
        );
        assert_eq!(
            object_name(NameRule::PathSegmentOnly, "..", false),
            vec!["may not be '..'"]
        );
        assert!(object_name(NameRule::PathSegmentOnly, "Any_Thing.x", false).is_empty());
    }
}
