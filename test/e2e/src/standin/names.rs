//! Names the stand-in generates: `<prefix>-<5 random characters>` as
//! apimachinery's `SimpleNameGenerator` makes them (alphabet without vowels
//! and look-alike digits), from a seeded generator so runs are reproducible,
//! and a stable hash of a template for MachineSet names.

use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// apimachinery's `utilrand.String` alphabet.
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
/// Length of the random suffix.
pub const SUFFIX_LEN: usize = 5;
/// Longest generated name (`maxGeneratedNameLength` = 63 − 5).
const MAX_PREFIX: usize = 63 - SUFFIX_LEN;

/// A seeded generator of object names.
#[derive(Debug)]
pub struct NameGen {
    rng: Mutex<StdRng>,
}

impl NameGen {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> NameGen {
        NameGen {
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
        }
    }

    /// `<base>-<5 characters>`, the base cut to 57 characters.
    pub fn generate(&self, base: &str) -> String {
        let mut prefix = format!("{base}-");
        if prefix.len() > MAX_PREFIX {
            prefix.truncate(MAX_PREFIX);
        }
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let suffix: String = (0..SUFFIX_LEN)
            .map(|_| char::from(ALPHABET[rng.random_range(0..ALPHABET.len())]))
            .collect();
        format!("{prefix}{suffix}")
    }
}

/// FNV-1a (64 bit) of `bytes`: a hash stable across runs and Rust versions.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// A short label-safe rendering of a hash, in [`ALPHABET`] (10 characters).
pub fn hash_label(mut h: u64) -> String {
    let mut out = String::new();
    for _ in 0..10 {
        out.push(char::from(ALPHABET[(h % ALPHABET.len() as u64) as usize]));
        h /= ALPHABET.len() as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_have_the_apimachinery_shape_and_repeat_per_seed() {
        let a = NameGen::new(7);
        let b = NameGen::new(7);
        let x = a.generate("wl1-md-dc-a-abc");
        assert_eq!(x, b.generate("wl1-md-dc-a-abc"));
        let suffix = x.strip_prefix("wl1-md-dc-a-abc-").unwrap();
        assert_eq!(suffix.len(), 5);
        assert!(suffix.bytes().all(|c| ALPHABET.contains(&c)));
        assert_ne!(a.generate("p"), a.generate("p"));
        let long = a.generate(&"x".repeat(80));
        assert_eq!(long.len(), 63);
    }

    #[test]
    fn fnv_known_values() {
        // Published FNV-1a 64-bit test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
        assert_eq!(hash_label(0), "bbbbbbbbbb");
        assert_eq!(hash_label(1), "cbbbbbbbbb");
    }
}
