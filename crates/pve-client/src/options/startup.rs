//! `startup`: boot order and delays (`order=1,up=30,down=60`).

use std::fmt;
use std::str::FromStr;

use super::propstr::{join, parse_uint, split};
use crate::error::ParseError;

const WHAT: &str = "startup property string";

/// A `startup` value (PVE format `pve-startup-order`:
/// `[[order=]\d+] [,up=\d+] [,down=\d+]`). `order` is the default key and may
/// be written bare on input; output always names it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Startup {
    /// Start order (lower first; shutdown in reverse).
    pub order: Option<u32>,
    /// Seconds to wait after starting this VM before the next one.
    pub up: Option<u32>,
    /// Seconds to wait for shutdown; also the default `shutdown` timeout.
    pub down: Option<u32>,
}

impl Startup {
    /// Parses a `startup` value.
    ///
    /// # Errors
    /// [`ParseError`] for unknown keys or non-numeric values.
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let mut st = Self::default();
        for (k, v) in split(s, WHAT, Some("order"))? {
            let n = u32::try_from(parse_uint(WHAT, &k, &v, 0, u64::from(u32::MAX))?)
                .unwrap_or(u32::MAX);
            match k.as_str() {
                "order" => st.order = Some(n),
                "up" => st.up = Some(n),
                "down" => st.down = Some(n),
                _ => return Err(ParseError::new(WHAT, s, format!("invalid key '{k}'"))),
            }
        }
        Ok(st)
    }
}

impl fmt::Display for Startup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts = [
            self.order.map(|v| (Some("order"), v.to_string())),
            self.up.map(|v| (Some("up"), v.to_string())),
            self.down.map(|v| (Some("down"), v.to_string())),
        ];
        f.write_str(&join(parts.into_iter().flatten()))
    }
}

impl FromStr for Startup {
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
    fn parses_bare_and_named_order() {
        let a = Startup::parse("3,up=30").unwrap();
        assert_eq!(
            a,
            Startup {
                order: Some(3),
                up: Some(30),
                down: None
            }
        );
        assert_eq!(a.to_string(), "order=3,up=30");
        assert_eq!(Startup::parse("order=3,up=30").unwrap(), a);
        assert_eq!(Startup::parse("down=60").unwrap().down, Some(60));
        for bad in ["order=-1", "left=3", "up=x", "3,4"] {
            assert!(Startup::parse(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn format_then_parse_round_trips(
            order in proptest::option::of(any::<u32>()),
            up in proptest::option::of(any::<u32>()),
            down in proptest::option::of(any::<u32>()),
        ) {
            let s = Startup { order, up, down };
            let text = s.to_string();
            prop_assert_eq!(Startup::parse(&text).unwrap(), s);
        }
    }
}
