//! The generic `key=value,key=value` splitter and joiner behind every
//! property-string type (pve-common `PVE::JSONSchema::parse_property_string`).

use crate::error::ParseError;

/// Splits a property string into `(key, value)` pairs in input order.
///
/// Rules, as pve-common applies them: parts are separated by `,`; empty parts
/// are skipped; `key=value` splits at the first `=` and the value must not be
/// empty; a bare part is the value of `default_key` (refused when the format
/// has none); a key may appear once. Nothing is trimmed — `ip=…, gw=…` (with a
/// space) yields the key `" gw"`, which the typed parsers refuse like the
/// server does.
pub(crate) fn split(
    input: &str,
    what: &'static str,
    default_key: Option<&str>,
) -> Result<Vec<(String, String)>, ParseError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for part in input.split(',') {
        if part.is_empty() {
            continue;
        }
        let (key, value) = match part.split_once('=') {
            Some((k, v)) => {
                if k.is_empty() {
                    return Err(ParseError::new(
                        what,
                        input,
                        format!("missing key in '{part}'"),
                    ));
                }
                if v.is_empty() {
                    return Err(ParseError::new(
                        what,
                        input,
                        format!("empty value for '{k}'"),
                    ));
                }
                (k.to_owned(), v.to_owned())
            }
            None => match default_key {
                Some(dk) => (dk.to_owned(), part.to_owned()),
                None => {
                    return Err(ParseError::new(
                        what,
                        input,
                        format!("missing key in '{part}'"),
                    ));
                }
            },
        };
        if out.iter().any(|(k, _)| *k == key) {
            return Err(ParseError::new(
                what,
                input,
                format!("duplicate key '{key}'"),
            ));
        }
        out.push((key, value));
    }
    Ok(out)
}

/// Checks that a value can be written into a property string (no `,`, not
/// empty, no control characters).
pub(crate) fn check_value(what: &'static str, key: &str, value: &str) -> Result<(), ParseError> {
    if value.is_empty() {
        return Err(ParseError::new(
            what,
            value,
            format!("empty value for '{key}'"),
        ));
    }
    if value.contains(',') || value.chars().any(char::is_control) {
        return Err(ParseError::new(
            what,
            value,
            format!("value for '{key}' must not contain ',' or control characters"),
        ));
    }
    Ok(())
}

/// Parses `1`/`0` (also `on`/`off`, `yes`/`no`, `true`/`false`, which
/// pve-common accepts for booleans in property strings).
pub(crate) fn parse_bool(what: &'static str, key: &str, v: &str) -> Result<bool, ParseError> {
    match v {
        "1" | "on" | "yes" | "true" => Ok(true),
        "0" | "off" | "no" | "false" => Ok(false),
        _ => Err(ParseError::new(what, v, format!("'{key}' must be 1 or 0"))),
    }
}

/// Formats a boolean as Proxmox prints it.
pub(crate) fn fmt_bool(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// Parses an unsigned integer within `min..=max`.
pub(crate) fn parse_uint(
    what: &'static str,
    key: &str,
    v: &str,
    min: u64,
    max: u64,
) -> Result<u64, ParseError> {
    let n: u64 = if v.bytes().all(|b| b.is_ascii_digit()) && !v.is_empty() {
        v.parse()
            .map_err(|_| ParseError::new(what, v, format!("'{key}' is too large")))?
    } else {
        return Err(ParseError::new(
            what,
            v,
            format!("'{key}' must be an integer"),
        ));
    };
    if n < min || n > max {
        return Err(ParseError::new(
            what,
            v,
            format!("'{key}' must be between {min} and {max}"),
        ));
    }
    Ok(n)
}

/// Joins `(key, value)` pairs; a `None` key prints the value bare.
pub(crate) fn join<'a>(parts: impl IntoIterator<Item = (Option<&'a str>, String)>) -> String {
    let mut out = String::new();
    for (key, value) in parts {
        if !out.is_empty() {
            out.push(',');
        }
        if let Some(k) = key {
            out.push_str(k);
            out.push('=');
        }
        out.push_str(&value);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_with_default_key() {
        let p = split("virtio,bridge=vmbr0,tag=5", "net", Some("model")).unwrap();
        assert_eq!(
            p,
            vec![
                ("model".to_owned(), "virtio".to_owned()),
                ("bridge".to_owned(), "vmbr0".to_owned()),
                ("tag".to_owned(), "5".to_owned())
            ]
        );
    }

    #[test]
    fn value_keeps_later_equals_signs() {
        let p = split("order=scsi0;net0", "boot", Some("legacy")).unwrap();
        assert_eq!(p, vec![("order".to_owned(), "scsi0;net0".to_owned())]);
        let p = split("a=b=c", "x", None).unwrap();
        assert_eq!(p, vec![("a".to_owned(), "b=c".to_owned())]);
    }

    #[test]
    fn refuses_what_pve_refuses() {
        assert!(split("a=1,a=2", "x", None).is_err());
        assert!(split("bare", "x", None).is_err());
        assert!(split("a=", "x", None).is_err());
        assert!(split("=1", "x", None).is_err());
        assert!(split("virtio,e1000", "net", Some("model")).is_err());
    }

    #[test]
    fn skips_empty_parts() {
        assert_eq!(split("a=1,,b=2,", "x", None).unwrap().len(), 2);
        assert!(split("", "x", None).unwrap().is_empty());
    }

    #[test]
    fn joins() {
        assert_eq!(
            join([(None, "virtio".into()), (Some("bridge"), "vmbr0".into())]),
            "virtio,bridge=vmbr0"
        );
    }
}
