//! `GET /access/permissions`: the caller's effective privileges.

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;

use crate::PveClient;
use crate::client::Call;
use crate::encode::Form;
use crate::error::PveError;

/// Effective privileges per ACL path, as `GET /access/permissions` answers:
/// `{"/vms": {"VM.Audit": 1, …}}` (the value is the ACL's propagate flag;
/// a privilege listed with `0` is held on that path but not below it).
///
/// For an API token with privilege separation the answer is already the
/// intersection of the token's and its user's privileges
/// (docs/proxmox-semantics.md §2).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Permissions(BTreeMap<String, BTreeMap<String, serde_json::Value>>);

impl Permissions {
    /// Permissions from `(path, privileges)` pairs (tests and fakes).
    pub fn from_paths<'a>(
        paths: impl IntoIterator<Item = (&'a str, &'a [&'a str])>,
    ) -> Permissions {
        Permissions(
            paths
                .into_iter()
                .map(|(p, privs)| {
                    (
                        p.to_owned(),
                        privs
                            .iter()
                            .map(|x| ((*x).to_owned(), serde_json::Value::from(1)))
                            .collect(),
                    )
                })
                .collect(),
        )
    }

    /// The paths the answer covers.
    pub fn paths(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// The privileges held on `path` (empty when the answer does not cover it).
    pub fn on(&self, path: &str) -> BTreeSet<&str> {
        self.0
            .get(path)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Whether `privilege` is held on `path`.
    pub fn has(&self, path: &str, privilege: &str) -> bool {
        self.0.get(path).is_some_and(|m| m.contains_key(privilege))
    }

    /// Adds the answer for other paths (one query per path is merged into one value).
    pub fn merge(&mut self, other: Permissions) {
        for (p, privs) in other.0 {
            self.0.entry(p).or_default().extend(privs);
        }
    }
}

impl PveClient {
    /// `GET /access/permissions[?path=<path>]`: the caller's effective
    /// privileges on `path` (propagation from parent paths applied), or on
    /// every path its ACLs name. Needs no privilege: everyone may read their
    /// own.
    ///
    /// # Errors
    /// Transport errors only (see [`PveClient`]).
    pub async fn permissions(&self, path: Option<&str>) -> Result<Permissions, PveError> {
        let mut q = Form::new();
        q.push_opt("path", path);
        self.call(Call::get("/access/permissions", "/access/permissions".to_owned()).with_query(q))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_answers() {
        let p: Permissions = serde_json::from_str(
            r#"{"/vms":{"VM.Audit":1,"VM.Clone":"1","VM.PowerMgmt":0},"/":{"Sys.Audit":1}}"#,
        )
        .unwrap();
        assert!(p.has("/vms", "VM.Audit"));
        // Held but not propagated is still held on the path itself.
        assert!(p.has("/vms", "VM.PowerMgmt"));
        assert!(!p.has("/vms", "VM.Monitor"));
        assert!(!p.has("/storage", "Datastore.Audit"));
        assert_eq!(
            p.on("/vms").into_iter().collect::<Vec<_>>(),
            ["VM.Audit", "VM.Clone", "VM.PowerMgmt"]
        );
        let mut q = Permissions::from_paths([("/storage", &["Datastore.Audit"][..])]);
        q.merge(p);
        assert_eq!(q.paths().collect::<Vec<_>>(), ["/", "/storage", "/vms"]);
    }
}
