//! `GET /version`.

use serde::Deserialize;

use crate::PveClient;
use crate::client::Call;
use crate::error::PveError;

/// Response of `GET /version`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct VersionInfo {
    /// Full pve-manager version, e.g. `8.4.1`.
    #[serde(default)]
    pub version: String,
    /// Point release `x.y`, e.g. `8.4`.
    #[serde(default)]
    pub release: String,
    /// Short git revision.
    #[serde(default)]
    pub repoid: String,
}

impl VersionInfo {
    /// `(major, minor)` from `release` (falling back to `version`), for
    /// feature gating between PVE 8 and 9 (docs/proxmox-semantics.md §23).
    pub fn major_minor(&self) -> Option<(u32, u32)> {
        let src = if self.release.is_empty() {
            &self.version
        } else {
            &self.release
        };
        let mut it = src.split(['.', '-', '~']);
        let major = it.next()?.parse().ok()?;
        let minor = it.next().and_then(|m| m.parse().ok()).unwrap_or(0);
        Some((major, minor))
    }
}

impl VersionInfo {
    /// The major version (`8`, `9`), for the per-version tables
    /// (privileges: [`crate::privileges`]; HA groups or rules:
    /// [`crate::api::ha`]).
    pub fn major(&self) -> Option<u32> {
        self.major_minor().map(|(m, _)| m)
    }

    /// Whether one pool is read with `GET /pools?poolid=` (PVE ≥ 8.1,
    /// nested pools) rather than the deprecated `GET /pools/{poolid}`
    /// (docs/proxmox-semantics.md §23); an unreadable version is taken as
    /// new.
    pub fn has_pool_query(&self) -> bool {
        self.major_minor().is_none_or(|v| v >= (8, 1))
    }
}

impl PveClient {
    /// `GET /version`: the pve-manager version of the node answering. Needs
    /// no privilege, so it is the cheapest health probe of an instance.
    ///
    /// # Errors
    /// Only the transport errors listed on [`PveClient`] (including
    /// `Unauthorized` for bad credentials and `Tls`).
    pub async fn version(&self) -> Result<VersionInfo, PveError> {
        self.call(Call::get("/version", "/version".to_owned()))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn major_minor() {
        let v: VersionInfo =
            serde_json::from_str(r#"{"version":"9.1.4","release":"9.1","repoid":"a1b2c3d4"}"#)
                .unwrap();
        assert_eq!(v.major_minor(), Some((9, 1)));
        assert_eq!(v.major(), Some(9));
        let v: VersionInfo = serde_json::from_str(r#"{"version":"8.4.1"}"#).unwrap();
        assert_eq!(v.major_minor(), Some((8, 4)));
        assert!(v.has_pool_query());
        let old = VersionInfo {
            version: "8.0.4".into(),
            release: "8.0".into(),
            repoid: String::new(),
        };
        assert!(!old.has_pool_query());
        let v: VersionInfo = serde_json::from_str(r#"{}"#).unwrap();
        assert_eq!(v.major_minor(), None);
    }
}
