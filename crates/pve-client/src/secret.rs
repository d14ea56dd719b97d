//! [`Secret`]: a string that never shows itself.
//!
//! Token secrets, passwords and tickets are held in this type. Its `Debug` and
//! `Display` print `***`; the only way to read the value is [`Secret::expose`],
//! which the client calls exactly where it builds the `Authorization` header or
//! the ticket request. Grep for `expose(` to audit every use.

use std::fmt;

/// A secret string (API token secret, password, ticket, CSRF token).
///
/// `Debug` and `Display` print `***`, so a `Secret` can sit inside structs that
/// derive `Debug` and inside error messages without leaking.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value. Call this only to put the value on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the secret is the empty string (a misconfigured credential).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_hide_the_value() {
        let s = Secret::new("5f0c9a2e-1111-2222-3333-444455556666");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{s}"), "***");
        assert_eq!(s.expose(), "5f0c9a2e-1111-2222-3333-444455556666");
    }

    #[test]
    fn empty_is_detected() {
        assert!(Secret::new("").is_empty());
        assert!(!Secret::from("x").is_empty());
    }
}
