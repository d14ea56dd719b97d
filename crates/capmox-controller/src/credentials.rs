//! Credentials Secret → [`pve_client::ClientConfig`] (docs/field-cases.md B24, B25).
//!
//! Keys:
//!
//! | key | required | meaning |
//! |---|---|---|
//! | `url` | yes | `https://host[:port]`; `/api2/json` and a trailing `/` are tolerated |
//! | `token` | yes | API token id `user@realm!tokenid` |
//! | `secret` | yes | the token secret (surrounding whitespace is removed) |
//! | `root_ca` | no | PEM bundle, one or more CA certificates, trusted in addition to the system roots |
//! | `fingerprint` | no | SHA-256 fingerprint(s) of the node certificates (`AB:CD:…`), separated by `,`, `;` or whitespace; pins the certificate instead of verifying the chain |
//! | `insecure` | no | `"true"` or `"false"` (any case); anything else is an error, never silently insecure |
//!
//! Trust: `insecure: "true"` accepts any certificate; else `fingerprint` pins;
//! else the chain is verified against the system roots plus `root_ca`.
//!
//! Invariant: errors name the Secret (`namespace/name`) and the key, never a
//! value — except `url` and `token`, which are not secret and are quoted by
//! the URL/token-id parsers (which themselves never echo anything after a `=`
//! or a value that does not look like a user id).

use k8s_openapi::api::core::v1::Secret;
use pve_client::{ApiUrl, Auth, ClientConfig, Fingerprint, TlsMode};

use crate::error::Error;

/// Key of the API URL.
pub const KEY_URL: &str = "url";
/// Key of the API token id.
pub const KEY_TOKEN: &str = "token";
/// Key of the API token secret.
pub const KEY_SECRET: &str = "secret";
/// Key of the optional CA bundle (PEM).
pub const KEY_ROOT_CA: &str = "root_ca";
/// Key of the optional certificate fingerprint pin(s).
pub const KEY_FINGERPRINT: &str = "fingerprint";
/// Key of the optional `insecure` flag.
pub const KEY_INSECURE: &str = "insecure";

/// Every key [`client_config`] reads; [`keep_credential_keys`] keeps only
/// these.
pub const KEYS: [&str; 6] = [
    KEY_URL,
    KEY_TOKEN,
    KEY_SECRET,
    KEY_ROOT_CA,
    KEY_FINGERPRINT,
    KEY_INSECURE,
];

/// Drops from `secret` what [`client_config`] never reads: every
/// `data`/`stringData` key not in [`KEYS`], the annotations and the
/// managed fields. The ProxmoxCluster controller's Secret watch applies it
/// before storing: the watch sees every Secret of its namespaces, and
/// without this the store kept every bootstrap data Secret in full (the
/// machines' cloud-init, growing with the machines). A credentials Secret
/// keeps exactly what makes its client, so [`client_config`] answers the
/// same, errors included, for the stripped Secret as for the original.
pub fn keep_credential_keys(secret: &mut Secret) {
    if let Some(d) = secret.data.as_mut() {
        d.retain(|k, _| KEYS.contains(&k.as_str()));
    }
    if let Some(d) = secret.string_data.as_mut() {
        d.retain(|k, _| KEYS.contains(&k.as_str()));
    }
    secret.metadata.annotations = None;
    secret.metadata.managed_fields = None;
}

/// `namespace/name` of a Secret, for messages.
pub fn secret_display_name(secret: &Secret) -> String {
    format!(
        "{}/{}",
        secret.metadata.namespace.as_deref().unwrap_or(""),
        secret.metadata.name.as_deref().unwrap_or("")
    )
}

/// The value of `key` as UTF-8 text: from `data` (what the API server
/// returns), falling back to `stringData` (objects built in memory). `None`
/// when absent or empty after trimming.
///
/// # Errors
/// [`Error::Credentials`] when the bytes are not UTF-8 (the value is not shown).
fn value(instance: &str, secret: &Secret, key: &str) -> Result<Option<String>, Error> {
    let raw = match secret.data.as_ref().and_then(|d| d.get(key)) {
        Some(bytes) => {
            Some(
                String::from_utf8(bytes.0.clone()).map_err(|_| Error::Credentials {
                    instance: instance.to_string(),
                    message: format!(
                        "key '{key}' of Secret {} is not UTF-8 text",
                        secret_display_name(secret)
                    ),
                })?,
            )
        }
        None => secret
            .string_data
            .as_ref()
            .and_then(|d| d.get(key))
            .cloned(),
    };
    Ok(raw.filter(|v| !v.trim().is_empty()))
}

fn required(instance: &str, secret: &Secret, key: &str) -> Result<String, Error> {
    value(instance, secret, key)?.ok_or_else(|| Error::Credentials {
        instance: instance.to_string(),
        message: format!(
            "key '{key}' missing or empty in Secret {}",
            secret_display_name(secret)
        ),
    })
}

/// Builds the client configuration of `instance` from its credentials Secret.
///
/// # Errors
/// [`Error::Credentials`] naming the Secret and the key that is missing,
/// empty or malformed: `url` not `https://host[:port]`, `token` not
/// `user@realm!tokenid`, `secret` with inner whitespace, `root_ca` without a
/// PEM certificate, `fingerprint` not 32 hex bytes, `insecure` not
/// `true`/`false`. Nothing is sent anywhere.
pub fn client_config(instance: &str, secret: &Secret) -> Result<ClientConfig, Error> {
    let name = secret_display_name(secret);
    let bad = |key: &str, why: String| Error::Credentials {
        instance: instance.to_string(),
        message: format!("key '{key}' of Secret {name}: {why}"),
    };
    let url_text = required(instance, secret, KEY_URL)?;
    let token = required(instance, secret, KEY_TOKEN)?;
    let token_secret = required(instance, secret, KEY_SECRET)?;
    let url = ApiUrl::parse(&url_text).map_err(|e| bad(KEY_URL, e.to_string()))?;
    let auth = Auth::token(&token, token_secret).map_err(|e| {
        // The token-id parser never echoes a secret; the secret parser prints `***`.
        let key = if e.what == "API token secret" {
            KEY_SECRET
        } else {
            KEY_TOKEN
        };
        bad(key, e.to_string())
    })?;
    let insecure = match value(instance, secret, KEY_INSECURE)? {
        None => false,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "true" => true,
            "false" => false,
            _ => {
                return Err(bad(
                    KEY_INSECURE,
                    "must be \"true\" or \"false\"".to_string(),
                ));
            }
        },
    };
    let tls = if insecure {
        TlsMode::Insecure
    } else if let Some(pins) = value(instance, secret, KEY_FINGERPRINT)? {
        let mut list = Vec::new();
        for p in pins
            .split([',', ';', ' ', '\n', '\t', '\r'])
            .filter(|p| !p.is_empty())
        {
            list.push(Fingerprint::parse(p).map_err(|e| bad(KEY_FINGERPRINT, e.reason))?);
        }
        TlsMode::Fingerprints(list)
    } else {
        let ca = value(instance, secret, KEY_ROOT_CA)?;
        if let Some(pem) = &ca
            && !pem.contains("-----BEGIN CERTIFICATE-----")
        {
            return Err(bad(
                KEY_ROOT_CA,
                "holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)".to_string(),
            ));
        }
        TlsMode::Verify { ca_pem: ca }
    };
    Ok(ClientConfig::new(instance, url, auth).with_tls(tls))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    const SECRET: &str = "5f0c9a2e-1111-2222-3333-444455556666";

    fn secret(pairs: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some("pve-a".into()),
                namespace: Some("wl1".into()),
                ..ObjectMeta::default()
            },
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..Secret::default()
        }
    }

    #[test]
    fn stripping_keeps_what_makes_the_client_and_drops_bootstrap_data() {
        let cases: [&[(&str, &str)]; 4] = [
            &[
                ("url", "https://pve-a.example:8006"),
                ("token", "capmox@pve!capi"),
                ("secret", SECRET),
                ("insecure", "true"),
                ("notes", "who made this token"),
            ],
            &[
                ("url", "https://pve-a.example:8006"),
                ("token", "capmox@pve!capi"),
                ("secret", SECRET),
                ("fingerprint", "not hex"),
            ],
            &[
                ("url", "https://pve-a.example:8006"),
                ("token", "capmox@pve!capi"),
            ],
            &[
                ("value", "#cloud-config\nruncmd: [kubeadm join]"),
                ("format", "cloud-config"),
            ],
        ];
        for pairs in cases {
            let original = secret(pairs);
            let mut stripped = original.clone();
            stripped.metadata.annotations = Some(BTreeMap::from([(
                "kubectl.kubernetes.io/last-applied-configuration".to_string(),
                "{\"data\":{}}".to_string(),
            )]));
            stripped.string_data = Some(BTreeMap::from([("value".to_string(), "x".to_string())]));
            keep_credential_keys(&mut stripped);
            assert_eq!(
                format!("{:?}", client_config("dc-a", &stripped)),
                format!("{:?}", client_config("dc-a", &original)),
            );
            let kept: Vec<&str> = stripped
                .data
                .iter()
                .flatten()
                .map(|(k, _)| k.as_str())
                .collect();
            assert!(kept.iter().all(|k| KEYS.contains(k)), "{kept:?}");
            assert_eq!(stripped.string_data, Some(BTreeMap::new()));
            assert_eq!(stripped.metadata.annotations, None);
        }
        let mut bootstrap = secret(cases[3]);
        keep_credential_keys(&mut bootstrap);
        assert_eq!(bootstrap.data, Some(BTreeMap::new()));
    }

    fn err(pairs: &[(&str, &str)]) -> String {
        let e = client_config("dc-a", &secret(pairs)).unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(!text.contains(SECRET), "{text}");
        e.to_string()
    }

    #[test]
    fn complete_secret_builds_a_verifying_config() {
        let c = client_config(
            "dc-a",
            &secret(&[
                ("url", "https://pve-a.example:8006/api2/json"),
                ("token", "capmox@pve!capi"),
                ("secret", SECRET),
            ]),
        )
        .unwrap();
        assert_eq!(c.instance, "dc-a");
        assert_eq!(c.url.origin(), "https://pve-a.example:8006");
        assert_eq!(c.tls, TlsMode::Verify { ca_pem: None });
        assert!(!format!("{c:?}").contains(SECRET));
    }

    #[test]
    fn string_data_is_read_too() {
        let mut s = secret(&[]);
        s.data = None;
        s.string_data = Some(
            [
                ("url".to_string(), "https://10.0.0.5:8006".to_string()),
                ("token".to_string(), "capmox@pve!capi".to_string()),
                ("secret".to_string(), SECRET.to_string()),
                ("insecure".to_string(), "True".to_string()),
            ]
            .into(),
        );
        let c = client_config("dc-a", &s).unwrap();
        assert_eq!(c.tls, TlsMode::Insecure);
    }

    #[test]
    fn missing_keys_are_named_b24() {
        assert_eq!(
            err(&[
                ("url", "https://pve-a.example:8006"),
                ("token", "capmox@pve!capi")
            ]),
            "credentials of instance dc-a: key 'secret' missing or empty in Secret wl1/pve-a"
        );
        assert_eq!(
            err(&[("token", "capmox@pve!capi"), ("secret", SECRET)]),
            "credentials of instance dc-a: key 'url' missing or empty in Secret wl1/pve-a"
        );
        assert_eq!(
            err(&[
                ("url", "https://pve-a.example:8006"),
                ("token", "  "),
                ("secret", SECRET)
            ]),
            "credentials of instance dc-a: key 'token' missing or empty in Secret wl1/pve-a"
        );
    }

    #[test]
    fn malformed_values_are_named() {
        let m = err(&[
            ("url", "pve-a.example:8006"),
            ("token", "capmox@pve!capi"),
            ("secret", SECRET),
        ]);
        assert!(m.contains("key 'url' of Secret wl1/pve-a"), "{m}");
        assert!(m.contains("https://"), "{m}");
        let m = err(&[
            ("url", "https://pve-a.example:8006"),
            ("token", "capmox@pve"),
            ("secret", SECRET),
        ]);
        assert!(m.contains("key 'token' of Secret wl1/pve-a"), "{m}");
        assert!(m.contains("'!tokenid' part is missing"), "{m}");
        // Token id and secret swapped: neither is echoed.
        let m = err(&[
            ("url", "https://pve-a.example:8006"),
            ("token", SECRET),
            ("secret", "capmox@pve!capi"),
        ]);
        assert!(m.contains("key 'token'"), "{m}");
    }

    #[test]
    fn insecure_is_strict_b25() {
        let base = [
            ("url", "https://pve-a.example:8006"),
            ("token", "capmox@pve!capi"),
            ("secret", SECRET),
        ];
        for bad in ["no", "0", "yes", "ture"] {
            let mut pairs = base.to_vec();
            pairs.push(("insecure", bad));
            assert_eq!(
                err(&pairs),
                "credentials of instance dc-a: key 'insecure' of Secret wl1/pve-a: must be \"true\" or \"false\""
            );
        }
        let mut pairs = base.to_vec();
        pairs.push(("insecure", "False"));
        assert_eq!(
            client_config("dc-a", &secret(&pairs)).unwrap().tls,
            TlsMode::Verify { ca_pem: None }
        );
    }

    #[test]
    fn root_ca_and_fingerprints() {
        let base = [
            ("url", "https://pve-a.example:8006"),
            ("token", "capmox@pve!capi"),
            ("secret", SECRET),
        ];
        let mut pairs = base.to_vec();
        pairs.push(("root_ca", "garbage"));
        assert!(
            err(&pairs).contains("key 'root_ca' of Secret wl1/pve-a: holds no PEM certificate")
        );
        let pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
        let mut pairs = base.to_vec();
        pairs.push(("root_ca", pem));
        assert_eq!(
            client_config("dc-a", &secret(&pairs)).unwrap().tls,
            TlsMode::Verify {
                ca_pem: Some(pem.to_string())
            }
        );
        let fp = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89";
        let both = format!("{fp}, {}", fp.replace("AB", "00"));
        let mut pairs = base.to_vec();
        pairs.push(("fingerprint", &both));
        match client_config("dc-a", &secret(&pairs)).unwrap().tls {
            TlsMode::Fingerprints(list) => {
                assert_eq!(list.len(), 2);
                assert_eq!(list[0].to_string(), fp);
            }
            other => panic!("expected fingerprints, got {other:?}"),
        }
        let mut pairs = base.to_vec();
        pairs.push(("fingerprint", "AB:CD"));
        assert!(
            err(&pairs).contains("key 'fingerprint' of Secret wl1/pve-a: expected 32 hex bytes")
        );
    }

    #[test]
    fn non_utf8_is_reported_without_value() {
        let mut s = secret(&[
            ("url", "https://pve-a.example:8006"),
            ("token", "capmox@pve!capi"),
        ]);
        if let Some(d) = s.data.as_mut() {
            d.insert("secret".into(), ByteString(vec![0xff, 0xfe]));
        }
        assert_eq!(
            client_config("dc-a", &s).unwrap_err().to_string(),
            "credentials of instance dc-a: key 'secret' of Secret wl1/pve-a is not UTF-8 text"
        );
    }
}
