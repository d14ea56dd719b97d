//! [`DiskSize`]: Proxmox's `disk-size` format.

use std::fmt;
use std::str::FromStr;

use crate::error::ParseError;

const K: u64 = 1024;
const UNITS: [(char, u64); 4] = [
    ('T', K * K * K * K),
    ('G', K * K * K),
    ('M', K * K),
    ('K', K),
];

/// A disk size in bytes, as in `size=32G` of a disk string or the `size`
/// parameter of `PUT …/resize` (pve-common format `disk-size`:
/// `\d+(\.\d+)?([KMGT](iB)?)?`, units are powers of 1024, **a bare number is
/// bytes**). Printed with the largest unit that divides the size exactly,
/// like the server stores it (`34G`, `528K`, `4M`, `1536` bytes).
///
/// Note the other meanings of bare numbers in the API: `STORAGE:32` in a new
/// disk means 32 **GiB** ([`crate::options::Disk::new_volume`]) and `memory`
/// is in **MiB**.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DiskSize(u64);

impl DiskSize {
    /// A size of `bytes` bytes.
    pub const fn from_bytes(bytes: u64) -> Self {
        Self(bytes)
    }

    /// A size of `mib` MiB (saturating).
    pub const fn from_mib(mib: u64) -> Self {
        Self(mib.saturating_mul(K * K))
    }

    /// A size of `gib` GiB (saturating).
    pub const fn from_gib(gib: u64) -> Self {
        Self(gib.saturating_mul(K * K * K))
    }

    /// The size in bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }

    /// Whole GiB (rounded down).
    pub const fn gib_floor(self) -> u64 {
        self.0 / (K * K * K)
    }

    /// Parses the `disk-size` format. A fractional value is truncated to whole
    /// bytes (`1.5K` = 1536, `0.1K` = 102), as pve-common does.
    ///
    /// # Errors
    /// [`ParseError`] on anything else (signs, spaces, unknown units, overflow).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let err = |reason: &str| ParseError::new("disk size", s, reason);
        let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
            Some(i) => (&s[..i], &s[i..]),
            None => (s, ""),
        };
        let mult = match unit {
            "" => 1,
            "K" | "KiB" => K,
            "M" | "MiB" => K * K,
            "G" | "GiB" => K * K * K,
            "T" | "TiB" => K * K * K * K,
            _ => return Err(err("unit must be K, M, G or T (optionally with 'iB')")),
        };
        let (int_part, frac_part) = match num.split_once('.') {
            Some((i, f)) => (i, f),
            None => (num, ""),
        };
        let digits_ok = |d: &str| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit());
        if !digits_ok(int_part) || (num.contains('.') && !digits_ok(frac_part)) {
            return Err(err("expected a number like 32, 32G or 1.5T"));
        }
        let int: u128 = int_part.parse().map_err(|_| err("number too large"))?;
        let mut bytes = int * u128::from(mult);
        if !frac_part.is_empty() {
            let frac_digits = frac_part
                .get(..frac_part.len().min(18))
                .unwrap_or(frac_part);
            let frac: u128 = frac_digits.parse().map_err(|_| err("bad fraction"))?;
            let scale =
                10u128.pow(u32::try_from(frac_digits.len()).map_err(|_| err("bad fraction"))?);
            bytes += frac * u128::from(mult) / scale;
        }
        u64::try_from(bytes)
            .map(Self)
            .map_err(|_| err("size too large"))
    }
}

impl fmt::Display for DiskSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 > 0 {
            for (unit, mult) in UNITS {
                if self.0.is_multiple_of(mult) {
                    return write!(f, "{}{unit}", self.0 / mult);
                }
            }
        }
        write!(f, "{}", self.0)
    }
}

impl FromStr for DiskSize {
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
    fn parses_units() {
        assert_eq!(
            DiskSize::parse("32G").unwrap().bytes(),
            32 * 1024 * 1024 * 1024
        );
        assert_eq!(DiskSize::parse("528K").unwrap().bytes(), 528 * 1024);
        assert_eq!(DiskSize::parse("4M").unwrap().bytes(), 4 * 1024 * 1024);
        assert_eq!(DiskSize::parse("1T").unwrap().bytes(), 1024u64.pow(4));
        assert_eq!(DiskSize::parse("20GiB").unwrap(), DiskSize::from_gib(20));
        assert_eq!(DiskSize::parse("1536").unwrap().bytes(), 1536);
        assert_eq!(DiskSize::parse("1.5G").unwrap().bytes(), 1_610_612_736);
        assert_eq!(DiskSize::parse("0.1K").unwrap().bytes(), 102);
        assert_eq!(DiskSize::parse("0").unwrap().bytes(), 0);
    }

    #[test]
    fn refuses_malformed() {
        for bad in [
            "",
            "G",
            "32 G",
            "+8G",
            "-1",
            "32g",
            "32GB",
            "1.G",
            ".5G",
            "1e3",
            "99999999999T",
        ] {
            assert!(DiskSize::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn prints_largest_exact_unit() {
        assert_eq!(DiskSize::from_gib(34).to_string(), "34G");
        assert_eq!(DiskSize::from_bytes(528 * 1024).to_string(), "528K");
        assert_eq!(DiskSize::from_mib(4).to_string(), "4M");
        assert_eq!(DiskSize::from_mib(1536).to_string(), "1536M");
        assert_eq!(DiskSize::from_gib(2048).to_string(), "2T");
        assert_eq!(DiskSize::from_bytes(1000).to_string(), "1000");
        assert_eq!(DiskSize::from_bytes(0).to_string(), "0");
    }

    #[test]
    fn compares_in_bytes() {
        // B08: template disk 32G, request 20 GiB → shrink.
        let template = DiskSize::parse("32G").unwrap();
        assert!(DiskSize::from_gib(20) < template);
        assert_eq!(DiskSize::from_gib(32), template);
        assert_eq!(DiskSize::parse("32768M").unwrap(), template);
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn print_then_parse_round_trips(bytes in any::<u64>()) {
            let s = DiskSize::from_bytes(bytes);
            prop_assert_eq!(DiskSize::parse(&s.to_string()).unwrap(), s);
        }

        #[test]
        fn unit_values_print_with_the_unit(n in 1u64..4096, unit in 0usize..4) {
            let (u, mult) = UNITS[unit];
            let s = DiskSize::from_bytes(n * mult);
            let printed = s.to_string();
            prop_assert!(printed.ends_with(u) || n % 1024 == 0, "{}", printed);
            prop_assert_eq!(DiskSize::parse(&printed).unwrap(), s);
        }
    }
}
