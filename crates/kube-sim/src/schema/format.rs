//! The string `format`s checked cheaply (kube-openapi's `strfmt` names): `date-time`,
//! `date`, `byte`, `uuid`, `ipv4`, `ipv6`, `cidr`. Other formats are accepted unchecked, as
//! kube-apiserver does for formats it does not know.

use base64::Engine;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Whether `value` satisfies `format`; `None` when the format is not checked.
pub fn check(format: &str, value: &str) -> Option<bool> {
    let ok = match format {
        "date-time" => crate::clock::parse_rfc3339(value).is_some(),
        "date" => is_date(value),
        "byte" => base64::engine::general_purpose::STANDARD
            .decode(value)
            .is_ok(),
        "uuid" => is_uuid(value),
        "ipv4" => value.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => value.parse::<Ipv6Addr>().is_ok(),
        "cidr" => is_cidr(value),
        _ => return None,
    };
    Some(ok)
}

fn is_date(v: &str) -> bool {
    let parts: Vec<&str> = v.split('-').collect();
    parts.len() == 3
        && parts[0].len() == 4
        && parts[1].len() == 2
        && parts[2].len() == 2
        && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_digit()))
        && (1..=12).contains(&parts[1].parse::<u32>().unwrap_or(0))
        && (1..=31).contains(&parts[2].parse::<u32>().unwrap_or(0))
}

fn is_uuid(v: &str) -> bool {
    let groups: Vec<&str> = v.split('-').collect();
    groups.len() == 5
        && groups
            .iter()
            .zip([8, 4, 4, 4, 12])
            .all(|(g, n)| g.len() == n && g.chars().all(|c| c.is_ascii_hexdigit()))
}

fn is_cidr(v: &str) -> bool {
    let Some((addr, bits)) = v.split_once('/') else {
        return false;
    };
    let Ok(bits) = bits.parse::<u8>() else {
        return false;
    };
    if addr.parse::<Ipv4Addr>().is_ok() {
        bits <= 32
    } else if addr.parse::<Ipv6Addr>().is_ok() {
        bits <= 128
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::check;

    #[test]
    fn known_formats() {
        assert_eq!(check("date-time", "2024-01-02T03:04:05Z"), Some(true));
        assert_eq!(check("date-time", "2024-01-02"), Some(false));
        assert_eq!(check("date", "2024-01-02"), Some(true));
        assert_eq!(check("date", "2024-13-02"), Some(false));
        assert_eq!(check("byte", "aGVsbG8="), Some(true));
        assert_eq!(check("byte", "not base64!"), Some(false));
        assert_eq!(
            check("uuid", "123e4567-e89b-12d3-a456-426614174000"),
            Some(true)
        );
        assert_eq!(check("uuid", "123e4567"), Some(false));
        assert_eq!(check("ipv4", "10.0.0.1"), Some(true));
        assert_eq!(check("ipv4", "10.0.0.256"), Some(false));
        assert_eq!(check("ipv6", "fd00::1"), Some(true));
        assert_eq!(check("cidr", "10.0.0.0/24"), Some(true));
        assert_eq!(check("cidr", "10.0.0.0/33"), Some(false));
        assert_eq!(check("int32", "x"), None);
    }
}
