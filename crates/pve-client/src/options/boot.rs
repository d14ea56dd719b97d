//! `boot`: boot order (`order=scsi0;ide2;net0`).

use std::fmt;
use std::str::FromStr;

use super::propstr::{join, split};
use crate::error::ParseError;

const WHAT: &str = "boot property string";

/// A `boot` value (PVE format `pve-qm-boot`: `[[legacy=]<[acdn]{1,4}>]
/// [,order=<device[;device...]>]`). `order` lists config keys of devices
/// (`scsi0`, `ide2`, `net0`, …), `;`-separated; the server checks that each
/// exists. The `;` must be percent-encoded on the wire, which the client's form
/// encoder does.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Boot {
    /// Device keys in boot order.
    pub order: Vec<String>,
    /// Deprecated legacy order letters (`a` floppy, `c` disk, `d` cdrom, `n`
    /// network); kept only to round-trip old configs.
    pub legacy: Option<String>,
}

impl Boot {
    /// A boot order over the given device keys.
    ///
    /// # Errors
    /// [`ParseError`] when a key is not `<letters><digits>`.
    pub fn order<I, S>(devices: I) -> Result<Self, ParseError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let order: Vec<String> = devices.into_iter().map(Into::into).collect();
        for d in &order {
            check_device(d)?;
        }
        Ok(Self {
            order,
            legacy: None,
        })
    }

    /// Parses a `boot` value.
    ///
    /// # Errors
    /// [`ParseError`] for unknown keys, bad device keys or legacy letters.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut b = Self::default();
        for (k, v) in split(s, WHAT, Some("legacy"))? {
            match k.as_str() {
                "order" => b.order = Self::order(v.split(';').filter(|d| !d.is_empty()))?.order,
                "legacy" => {
                    let ok = (1..=4).contains(&v.len()) && v.bytes().all(|c| b"acdn".contains(&c));
                    if !ok {
                        return Err(ParseError::new(
                            WHAT,
                            s,
                            "legacy order must be 1 to 4 of a, c, d, n",
                        ));
                    }
                    b.legacy = Some(v);
                }
                _ => return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'"))),
            }
        }
        Ok(b)
    }
}

fn check_device(d: &str) -> Result<(), ParseError> {
    let digits = d.trim_start_matches(|c: char| c.is_ascii_lowercase());
    let prefix_len = d.len() - digits.len();
    if prefix_len == 0 || digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ParseError::new(
            "boot device",
            d,
            "expected a device key like scsi0 or net0",
        ));
    }
    Ok(())
}

impl fmt::Display for Boot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            self.legacy.clone().map(|l| (None, l)),
            (!self.order.is_empty()).then(|| (Some("order"), self.order.join(";"))),
        ];
        f.write_str(&join(parts.into_iter().flatten()))
    }
}

impl FromStr for Boot {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn order_round_trip() {
        let b = Boot::parse("order=scsi0;ide2;net0").unwrap();
        assert_eq!(b.order, vec!["scsi0", "ide2", "net0"]);
        assert_eq!(b.to_string(), "order=scsi0;ide2;net0");
        assert_eq!(
            Boot::order(["virtio0", "net0"]).unwrap().to_string(),
            "order=virtio0;net0"
        );
    }

    #[test]
    fn legacy_form() {
        let b = Boot::parse("cdn").unwrap();
        assert_eq!(b.legacy.as_deref(), Some("cdn"));
        assert_eq!(b.to_string(), "cdn");
        assert!(Boot::parse("legacy=xyz").is_err());
    }

    #[test]
    fn refuses_bad_devices() {
        for bad in [
            "order=scsi",
            "order=0",
            "order=scsi0;net 0",
            "order=SCSI0",
            "foo=1",
        ] {
            assert!(Boot::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            order in proptest::collection::vec("(scsi|virtio|ide|sata|net|usb|hostpci)[0-9]{1,2}", 0..5),
            legacy in proptest::option::of("[acdn]{1,4}"),
        ) {
            let b = Boot { order, legacy };
            let s = b.to_string();
            prop_assert_eq!(Boot::parse(&s).unwrap(), b);
        }
    }
}
