//! A string that must never be printed: API token secrets, user passwords,
//! tickets. `Debug` and `Display` print `***`.

use serde::{Deserialize, Serialize};

/// A secret string (token secret, password). Compare with [`Secret::matches`];
/// read the clear text only with [`Secret::expose`].
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a clear-text secret.
    pub fn new(text: impl Into<String>) -> Self {
        Secret(text.into())
    }

    /// The clear text. Callers must not log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Constant-time comparison with a presented value.
    pub fn matches(&self, presented: &str) -> bool {
        let a = self.0.as_bytes();
        let b = presented.as_bytes();
        if a.len() != b.len() {
            return false;
        }
        a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

impl std::fmt::Display for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("***")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed() {
        let s = Secret::new("0f7a3c2e-aaaa-bbbb-cccc-1234567890ab");
        assert_eq!(format!("{s:?}"), "***");
        assert_eq!(format!("{s}"), "***");
        assert!(s.matches("0f7a3c2e-aaaa-bbbb-cccc-1234567890ab"));
        assert!(!s.matches("0f7a3c2e-aaaa-bbbb-cccc-1234567890ac"));
        assert!(!s.matches(""));
    }
}
