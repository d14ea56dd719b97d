//! Client configuration: where the Proxmox cluster is ([`ApiUrl`]), how to
//! authenticate ([`Auth`], [`TokenId`]), how to trust its certificate
//! ([`TlsMode`], [`Fingerprint`]) and the default timeout.
//!
//! Everything is validated when it is parsed, so a bad credentials Secret is
//! reported by name before any request is made (docs/field-cases.md B24, B25).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ParseError;
use crate::secret::Secret;

/// Default per-call timeout: 60 s (docs/proxmox-semantics.md §19: 35–60 s; pveproxy gives
/// up after 30 s of silence on proxied calls).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The API base of one Proxmox cluster: `https://host[:port]` plus
/// `/api2/json`.
///
/// Accepted input: `https://host`, `https://host:8006`, with or without a
/// trailing `/` or `/api2/json[/]` (appended once, never twice). Refused: other
/// schemes (pveproxy serves HTTPS only), a missing scheme, user info, other
/// paths, queries and fragments. Without a port the URL default 443 applies
/// (PVE itself listens on 8006; write it when connecting directly).
#[derive(Clone, PartialEq, Eq)]
pub struct ApiUrl {
    origin: String,
    base: reqwest::Url,
}

impl ApiUrl {
    /// Parses and normalises a cluster URL.
    ///
    /// # Errors
    /// [`ParseError`] saying what is wrong with the URL.
    pub fn parse(input: &str) -> Result<Self, ParseError> {
        let s = input.trim();
        let err = |r: &str| ParseError::new("API URL", input, r);
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("http://") {
            return Err(err(
                "must use https:// (Proxmox VE serves its API over HTTPS only)",
            ));
        }
        if !lower.starts_with("https://") {
            return Err(err(
                "must start with https://, e.g. https://pve.example:8006",
            ));
        }
        let url = reqwest::Url::parse(s).map_err(|e| err(&e.to_string()))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(err(
                "must not contain user info; credentials go in the token",
            ));
        }
        if url.query().is_some() || url.fragment().is_some() {
            return Err(err("must not have a query or fragment"));
        }
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| err("host is missing"))?;
        match url.path() {
            "" | "/" | "/api2/json" | "/api2/json/" => {}
            p => {
                return Err(err(&format!(
                    "unexpected path '{p}'; give only https://host[:port]"
                )));
            }
        }
        let origin = match url.port() {
            Some(p) => format!("https://{host}:{p}"),
            None => format!("https://{host}"),
        };
        let base =
            reqwest::Url::parse(&format!("{origin}/api2/json")).map_err(|e| err(&e.to_string()))?;
        Ok(Self { origin, base })
    }

    /// `https://host[:port]`, as used in error messages.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// `https://host[:port]/api2/json`.
    pub fn api_base(&self) -> &str {
        self.base.as_str()
    }

    /// The host name or IP literal (IPv6 in brackets).
    pub fn host(&self) -> &str {
        self.base.host_str().unwrap_or_default()
    }
}

impl fmt::Debug for ApiUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiUrl({:?})", self.origin)
    }
}

impl fmt::Display for ApiUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.origin)
    }
}

impl FromStr for ApiUrl {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// An API token id: `user@realm!tokenid` (pve-access-control: user
/// `[^\s:/]+`, realm and token name `[A-Za-z][A-Za-z0-9.\-_]+`, the user id at
/// most 64 characters). Not secret: it appears in UPIDs and task lists.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TokenId {
    full: String,
    user_end: usize,
}

impl TokenId {
    /// Validates a token id.
    ///
    /// # Errors
    /// [`ParseError`] naming what is missing or malformed (a common mistake is
    /// pasting `user@realm!id=secret` or only `user@realm`; the error never
    /// repeats anything after a `=`).
    pub fn parse(input: &str) -> Result<Self, ParseError> {
        if let Some((before, _)) = input.split_once('=') {
            // Never echo what follows '=': it is probably the secret.
            return Err(ParseError::new(
                "API token id",
                format!("{before}=…"),
                "contains '=': give the id (user@realm!tokenid) and the secret separately",
            ));
        }
        // Echo the input only when it looks like a user id: a secret pasted
        // into the token id field (no '@') must not end up in a message.
        let shown = if input.contains('@') {
            input.to_owned()
        } else {
            format!("<{} characters, not shown>", input.chars().count())
        };
        let err = |r: &str| ParseError::new("API token id", shown.clone(), r);
        let (userid, token) = input
            .rsplit_once('!')
            .ok_or_else(|| err("expected user@realm!tokenid (the '!tokenid' part is missing)"))?;
        let (user, realm) = userid
            .rsplit_once('@')
            .ok_or_else(|| err("expected user@realm!tokenid (the '@realm' part is missing)"))?;
        if user.is_empty()
            || user
                .chars()
                .any(|c| c.is_whitespace() || c == ':' || c == '/')
        {
            return Err(err(
                "user name must be non-empty without whitespace, ':' or '/'",
            ));
        }
        if userid.len() > 64 {
            return Err(err("user@realm is longer than 64 characters"));
        }
        if !valid_name(realm) {
            return Err(err("realm must match [A-Za-z][A-Za-z0-9.-_]+"));
        }
        if !valid_name(token) {
            return Err(err("token name must match [A-Za-z][A-Za-z0-9.-_]+"));
        }
        Ok(Self {
            full: input.to_owned(),
            user_end: userid.len(),
        })
    }

    /// `user@realm!tokenid`.
    pub fn as_str(&self) -> &str {
        &self.full
    }

    /// `user@realm`, the token's owner.
    pub fn user(&self) -> &str {
        &self.full[..self.user_end]
    }

    /// The token name after `!`.
    pub fn token_name(&self) -> &str {
        &self.full[self.user_end + 1..]
    }
}

fn valid_name(s: &str) -> bool {
    let mut c = s.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic())
        && s.len() >= 2
        && c.all(|ch| ch.is_ascii_alphanumeric() || matches!(ch, '.' | '-' | '_'))
}

impl fmt::Debug for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TokenId({:?})", self.full)
    }
}

impl fmt::Display for TokenId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.full)
    }
}

impl FromStr for TokenId {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// How the client authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    /// API token (recommended for controllers): header
    /// `Authorization: PVEAPIToken=<token_id>=<secret>`; stateless, no CSRF.
    Token {
        /// `user@realm!tokenid`.
        token_id: TokenId,
        /// The token secret (a UUID). Never printed.
        secret: Secret,
    },
    /// Ticket login (`POST /access/ticket`): cookie `PVEAuthCookie` plus
    /// `CSRFPreventionToken` on writes. Tickets live 2 h; the client logs in
    /// again after 90 minutes or on a 401. Users with TFA cannot use this.
    Ticket {
        /// `user@realm`.
        username: String,
        /// The password. Never printed.
        password: Secret,
    },
}

impl Auth {
    /// Token auth from the strings of a credentials Secret.
    ///
    /// # Errors
    /// [`ParseError`] for a malformed token id, or a secret that is empty or
    /// has whitespace inside (surrounding whitespace, e.g. a trailing newline,
    /// is removed). The message never contains the secret.
    pub fn token(token_id: &str, secret: impl Into<Secret>) -> Result<Self, ParseError> {
        let token_id = TokenId::parse(token_id.trim())?;
        let secret = secret.into();
        // A trailing newline from `echo … | kubectl create secret` is common.
        let secret = Secret::new(secret.expose().trim());
        if secret.is_empty() {
            return Err(ParseError::new("API token secret", "***", "is empty"));
        }
        if secret
            .expose()
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ParseError::new(
                "API token secret",
                "***",
                "contains whitespace or control characters",
            ));
        }
        Ok(Self::Token { token_id, secret })
    }
}

/// A SHA-256 fingerprint of a server's leaf certificate (DER).
///
/// Parses Proxmox's form (`GET /nodes/<n>/certificates/info` → `fingerprint`:
/// colon-separated upper-case hex), lower-case, and plain 64 hex digits;
/// prints colon-separated upper-case.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint(pub [u8; 32]);

impl Fingerprint {
    /// Parses a fingerprint.
    ///
    /// # Errors
    /// [`ParseError`] unless it is 32 bytes of hex (with or without `:`).
    pub fn parse(s: &str) -> Result<Self, ParseError> {
        let hex: String = s.trim().chars().filter(|c| *c != ':').collect();
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ParseError::new(
                "SHA-256 fingerprint",
                s,
                "expected 32 hex bytes, e.g. AB:CD:…",
            ));
        }
        let mut out = [0u8; 32];
        for (i, slot) in out.iter_mut().enumerate() {
            let pair = hex.get(i * 2..i * 2 + 2).unwrap_or("00");
            *slot = u8::from_str_radix(pair, 16)
                .map_err(|_| ParseError::new("SHA-256 fingerprint", s, "bad hex"))?;
        }
        Ok(Self(out))
    }

    /// The fingerprint of a DER certificate.
    pub fn of_der(der: &[u8]) -> Self {
        let d = ring::digest::digest(&ring::digest::SHA256, der);
        let mut out = [0u8; 32];
        out.copy_from_slice(d.as_ref());
        Self(out)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02X}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({self})")
    }
}

impl FromStr for Fingerprint {
    type Err = ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// How the server certificate is trusted (docs/proxmox-semantics.md §20, docs/field-cases.md B25).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TlsMode {
    /// Verify the chain and the host name. Trust roots: the operating
    /// system's store (loaded with `rustls-native-certs`) plus every
    /// certificate in `ca_pem` (e.g. the cluster's `pve-root-ca.pem`, or an
    /// intermediate + root bundle). rustls has no CN fallback: the URL's host
    /// must be in the certificate's SANs.
    Verify {
        /// PEM bundle with one or more CA certificates.
        ca_pem: Option<String>,
    },
    /// Accept a server whose leaf certificate has one of these SHA-256
    /// fingerprints (one per node, or old and new during rotation). The chain
    /// and name are not checked; the handshake signature still is.
    Fingerprints(Vec<Fingerprint>),
    /// Accept any certificate (development only; logged as a warning when the
    /// client is built). The handshake signature is still checked.
    Insecure,
}

impl Default for TlsMode {
    fn default() -> Self {
        Self::Verify { ca_pem: None }
    }
}

impl TlsMode {
    /// Parses the `insecure` value of a credentials Secret strictly: only
    /// `true`/`false`/`1`/`0`/`yes`/`no` (any case) — anything else is an
    /// error, never silently insecure (docs/field-cases.md B25).
    ///
    /// # Errors
    /// [`ParseError`] for any other value.
    pub fn parse_insecure_flag(value: &str) -> Result<bool, ParseError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(ParseError::new(
                "insecure flag",
                value,
                "expected true or false",
            )),
        }
    }
}

/// Everything needed to build a [`crate::PveClient`].
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Name of this Proxmox cluster in logs, errors and call records (e.g. the
    /// ProxmoxCluster instance name `dc-a`).
    pub instance: String,
    /// API base URL.
    pub url: ApiUrl,
    /// Credentials.
    pub auth: Auth,
    /// Certificate trust.
    pub tls: TlsMode,
    /// Default per-call timeout (overridable with
    /// [`crate::PveClient::with_timeout`]).
    pub timeout: Duration,
}

impl ClientConfig {
    /// A config with TLS verification against the system roots and the
    /// default 60 s timeout.
    pub fn new(instance: impl Into<String>, url: ApiUrl, auth: Auth) -> Self {
        Self {
            instance: instance.into(),
            url,
            auth,
            tls: TlsMode::default(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Sets the TLS mode.
    pub fn with_tls(mut self, tls: TlsMode) -> Self {
        self.tls = tls;
        self
    }

    /// Sets the default per-call timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_normalisation_b24() {
        for (input, origin) in [
            ("https://pve-a.example:8006", "https://pve-a.example:8006"),
            ("https://pve-a.example:8006/", "https://pve-a.example:8006"),
            (
                "https://pve-a.example:8006/api2/json",
                "https://pve-a.example:8006",
            ),
            (
                "  https://pve-a.example:8006/api2/json/ ",
                "https://pve-a.example:8006",
            ),
            ("https://10.0.0.5:8006", "https://10.0.0.5:8006"),
            ("https://[2001:db8::5]:8006", "https://[2001:db8::5]:8006"),
            ("HTTPS://PVE.example", "https://pve.example"),
            ("https://pve.example:443", "https://pve.example"),
        ] {
            let u = ApiUrl::parse(input).unwrap();
            assert_eq!(u.origin(), origin, "{input}");
            assert_eq!(u.api_base(), format!("{origin}/api2/json"));
        }
    }

    #[test]
    fn url_refusals_say_why() {
        for (input, needle) in [
            ("http://pve:8006", "https"),
            ("pve-a.example:8006", "https://"),
            ("https://user:pw@pve:8006", "user info"),
            ("https://pve:8006/api2/extjs", "path"),
            ("https://pve:8006/?x=1", "query"),
            ("https://", "URL"),
            ("https://pve:99999", "URL"),
        ] {
            let e = ApiUrl::parse(input).unwrap_err();
            assert!(e.to_string().contains(needle), "{input}: {e}");
        }
    }

    #[test]
    fn token_ids() {
        let t = TokenId::parse("capmox@pve!capi").unwrap();
        assert_eq!(t.user(), "capmox@pve");
        assert_eq!(t.token_name(), "capi");
        let t = TokenId::parse("first.last@company.com@ldap-ad!k8s_prod").unwrap();
        assert_eq!(t.user(), "first.last@company.com@ldap-ad");
        for bad in [
            "capmox@pve",
            "capmox!capi",
            "@pve!capi",
            "capmox@p!capi",
            "capmox@pve!1x",
            "capmox@pve!",
            "cap mox@pve!capi",
        ] {
            assert!(TokenId::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn token_id_error_never_echoes_the_secret() {
        let e = TokenId::parse("capmox@pve!capi=0b3c8f6e-secret-uuid").unwrap_err();
        let text = format!("{e} {e:?}");
        assert!(!text.contains("0b3c8f6e"), "{text}");
        assert!(text.contains("capmox@pve!capi=…"));
    }

    #[test]
    fn token_auth_validates_secret_without_echo() {
        assert!(Auth::token("capmox@pve!capi", "5f0c9a2e-aaaa").is_ok());
        let e = Auth::token("capmox@pve!capi", "").unwrap_err();
        assert!(e.to_string().contains("empty"));
        let e = Auth::token("capmox@pve!capi", "abc def-secret").unwrap_err();
        assert!(!e.to_string().contains("def-secret"));
        match Auth::token("capmox@pve!capi", "5f0c9a2e-aaaa\n").unwrap() {
            Auth::Token { secret, .. } => assert_eq!(secret.expose(), "5f0c9a2e-aaaa"),
            Auth::Ticket { .. } => panic!("token expected"),
        }
        // Token id and secret swapped: the secret is not echoed.
        let e = Auth::token("5f0c9a2e-aaaa-bbbb", "capmox@pve!capi").unwrap_err();
        assert!(!e.to_string().contains("5f0c9a2e"), "{e}");
        assert!(e.to_string().contains("18 characters, not shown"), "{e}");
        let dbg = format!(
            "{:?}",
            Auth::token("capmox@pve!capi", "5f0c9a2e-aaaa").unwrap()
        );
        assert!(!dbg.contains("5f0c9a2e"), "{dbg}");
    }

    #[test]
    fn fingerprints() {
        let pve = "AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89:AB:CD:EF:01:23:45:67:89";
        let f = Fingerprint::parse(pve).unwrap();
        assert_eq!(f.to_string(), pve);
        assert_eq!(Fingerprint::parse(&pve.to_lowercase()).unwrap(), f);
        assert_eq!(Fingerprint::parse(&pve.replace(':', "")).unwrap(), f);
        assert!(Fingerprint::parse("AB:CD").is_err());
        assert!(Fingerprint::parse(&pve.replace('A', "G")).is_err());
        // SHA-256 of the empty input, a known value.
        assert_eq!(
            Fingerprint::of_der(b"").to_string(),
            "E3:B0:C4:42:98:FC:1C:14:9A:FB:F4:C8:99:6F:B9:24:27:AE:41:E4:64:9B:93:4C:A4:95:99:1B:78:52:B8:55"
        );
    }

    #[test]
    fn insecure_flag_is_strict() {
        assert!(TlsMode::parse_insecure_flag("true").unwrap());
        assert!(TlsMode::parse_insecure_flag("True").unwrap());
        assert!(!TlsMode::parse_insecure_flag("False").unwrap());
        assert!(!TlsMode::parse_insecure_flag("no").unwrap());
        assert!(!TlsMode::parse_insecure_flag("0").unwrap());
        for bad in ["", "maybe", "ture", "2"] {
            assert!(TlsMode::parse_insecure_flag(bad).is_err(), "{bad}");
        }
    }
}
