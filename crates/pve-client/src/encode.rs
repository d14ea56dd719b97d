//! Form and query encoding exactly as Proxmox parses it.
//!
//! pve-http-server splits `application/x-www-form-urlencoded` bodies and query
//! strings on **both `&` and `;`**, and takes a value only up to the second raw
//! `=` (docs/proxmox-semantics.md §1). So every byte outside the RFC 3986 unreserved set
//! (`A–Z a–z 0–9 - . _ ~`) is percent-encoded here, `;`, `=`, `,`, `&`, `+` and
//! space included. Booleans are `1`/`0` (`true`/`false` fail the server's type
//! check). `sshkeys` must be percent-encoded once more before form encoding
//! ([`encode_sshkeys`]).

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// Everything except `A–Z a–z 0–9 - . _ ~` is encoded (RFC 3986 unreserved).
const FORM: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The characters pve-common's `urlencoded` format allows unencoded
/// (`[-%a-zA-Z0-9_.!~*'()]`); everything else is encoded — the same set as
/// JavaScript's `encodeURIComponent`, which the PVE GUI uses for `sshkeys`.
const URI_COMPONENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// Percent-encodes one key or value for a form body, query string or URL
/// path segment.
pub fn encode_component(s: &str) -> String {
    utf8_percent_encode(s, FORM).to_string()
}

/// Encodes the `sshkeys` value the way Proxmox stores it: the keys (newline
/// separated) percent-encoded like `encodeURIComponent`. The result is then
/// form-encoded again by [`Form::push`] (docs/proxmox-semantics.md §13).
pub fn encode_sshkeys(keys: &str) -> String {
    utf8_percent_encode(keys, URI_COMPONENT).to_string()
}

/// Decodes a stored `sshkeys` value (inverse of [`encode_sshkeys`]). Invalid
/// UTF-8 after decoding is replaced with U+FFFD.
pub fn decode_sshkeys(stored: &str) -> String {
    percent_encoding::percent_decode_str(stored)
        .decode_utf8_lossy()
        .into_owned()
}

/// An ordered list of form parameters, encoded for Proxmox.
///
/// Keys may repeat (Proxmox turns repeated keys into an array).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Form {
    pairs: Vec<(String, String)>,
}

impl Form {
    /// An empty form.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a string parameter.
    pub fn push(&mut self, key: &str, value: impl Into<String>) -> &mut Self {
        self.pairs.push((key.to_owned(), value.into()));
        self
    }

    /// Adds a boolean parameter as `1` or `0`.
    pub fn push_bool(&mut self, key: &str, value: bool) -> &mut Self {
        self.push(key, if value { "1" } else { "0" })
    }

    /// Adds the parameter only when `value` is `Some`.
    pub fn push_opt<T: ToString>(&mut self, key: &str, value: Option<T>) -> &mut Self {
        if let Some(v) = value {
            self.push(key, v.to_string());
        }
        self
    }

    /// Adds the boolean parameter (`1`/`0`) only when `value` is `Some`.
    pub fn push_opt_bool(&mut self, key: &str, value: Option<bool>) -> &mut Self {
        if let Some(v) = value {
            self.push_bool(key, v);
        }
        self
    }

    /// Whether no parameter was added.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The parameters in insertion order.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.pairs
    }

    /// Encodes as `k=v&k2=v2` with every reserved byte percent-encoded.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (i, (k, v)) in self.pairs.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            out.push_str(&encode_component(k));
            out.push('=');
            out.push_str(&encode_component(v));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reserved_characters_are_encoded() {
        let mut f = Form::new();
        f.push("tags", "capi;ubuntu-24.04")
            .push("boot", "order=scsi0;net0")
            .push("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,tag=12")
            .push("description", "a & b = c + d")
            .push_bool("full", true)
            .push_bool("onboot", false);
        assert_eq!(
            f.encode(),
            "tags=capi%3Bubuntu-24.04\
             &boot=order%3Dscsi0%3Bnet0\
             &net0=virtio%3DBC%3A24%3A11%3AAA%3ABB%3ACC%2Cbridge%3Dvmbr0%2Ctag%3D12\
             &description=a%20%26%20b%20%3D%20c%20%2B%20d\
             &full=1\
             &onboot=0"
        );
    }

    #[test]
    fn optional_values() {
        let mut f = Form::new();
        f.push_opt("a", Some(5))
            .push_opt::<u32>("b", None)
            .push_opt_bool("c", Some(false));
        f.push_opt_bool("d", None);
        assert_eq!(f.encode(), "a=5&c=0");
        assert!(Form::new().is_empty());
    }

    #[test]
    fn sshkeys_are_double_encoded() {
        let keys = "ssh-ed25519 AAAAC3Nza+/= user@host\nssh-rsa AAAAB3 other";
        let once = encode_sshkeys(keys);
        assert_eq!(
            once,
            "ssh-ed25519%20AAAAC3Nza%2B%2F%3D%20user%40host%0Assh-rsa%20AAAAB3%20other"
        );
        let mut f = Form::new();
        f.push("sshkeys", once.clone());
        assert_eq!(
            f.encode(),
            "sshkeys=ssh-ed25519%2520AAAAC3Nza%252B%252F%253D%2520user%2540host%250Assh-rsa%2520AAAAB3%2520other"
        );
        assert_eq!(decode_sshkeys(&once), keys);
    }

    /// Splits and decodes the way pve-http-server does: pairs on `&` and `;`,
    /// value between the first and the second raw `=`.
    fn pve_decode(body: &str) -> Vec<(String, String)> {
        body.split(['&', ';'])
            .filter(|p| !p.is_empty())
            .map(|p| {
                let mut it = p.split('=');
                let k = it.next().unwrap_or_default();
                let v = it.next().unwrap_or_default();
                let dec = |s: &str| {
                    percent_encoding::percent_decode_str(s)
                        .decode_utf8()
                        .unwrap()
                        .into_owned()
                };
                (dec(k), dec(v))
            })
            .collect()
    }

    proptest! {
        #![proptest_config(crate::test_support::proptest_config())]
        #[test]
        fn pve_parser_gets_back_every_value(
            pairs in proptest::collection::vec(("[a-z][a-z0-9_-]{0,10}", any::<String>()), 0..6)
        ) {
            let mut f = Form::new();
            for (k, v) in &pairs {
                f.push(k, v.clone());
            }
            prop_assert_eq!(pve_decode(&f.encode()), pairs);
        }

        #[test]
        fn sshkeys_round_trip(keys in any::<String>()) {
            let enc = encode_sshkeys(&keys);
            prop_assert!(enc.bytes().all(|b| b.is_ascii_alphanumeric() || b"-%_.!~*'()".contains(&b)));
            prop_assert_eq!(decode_sshkeys(&enc), keys);
        }
    }
}
