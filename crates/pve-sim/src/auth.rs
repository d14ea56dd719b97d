//! Authentication and privileges (docs/proxmox-semantics.md §2, §21).
//!
//! * API tokens: `Authorization: PVEAPIToken=user@realm!id=SECRET` (or a space
//!   instead of the first `=`; split at the last `=`; value URL-unescaped).
//! * Tickets: `POST /access/ticket`, then cookie `PVEAuthCookie` (or the same
//!   in `Authorization`) plus `CSRFPreventionToken` on writes.
//! * Privileges per ACL path: the most specific path with an entry wins,
//!   propagation only from ancestors with `propagate`; a token with privilege
//!   separation gets the intersection of its own and its user's privileges;
//!   `root@pam` has everything.
//!
//! * The privileges that exist depend on the version (docs/field-cases.md
//!   B31): PVE 8 has `VM.Monitor` and no `VM.GuestAgent.*`; PVE 9 removed
//!   `VM.Monitor` and added `VM.GuestAgent.*` ([`privilege_exists`]). An ACL
//!   naming a privilege the version does not have is refused, as `pveum`
//!   refuses it (`invalid privilege '<name>'`).
//!
//! * Resource pools: an ACL on `/pool/<pool>` is inherited by the pool's
//!   members (`/vms/<vmid>`, `/storage/<id>`): the privileges on a member's
//!   path are those of its own path together with those of its pool's
//!   ([`AuthState::set_pool_members`]); a pool-scoped token thus sees and
//!   manages only pool members, and may clone only into its pool (the clone
//!   check of `/pool/{pool}`, docs/field-cases.md B34). `GET
//!   /access/permissions` lists the member paths too.
//!
//! Simplification: no groups, no realms beyond the suffix of the user id, no
//! TFA; roles are a fixed built-in table ([`role_privileges`]); a member's
//! own ACL does not override its pool's (both are joined).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use axum::http::HeaderMap;
use percent_encoding::percent_decode_str;

use crate::config::{AclEntry, ClusterConfig};
use crate::http::envelope::ApiError;
use crate::secret::Secret;

/// Every privilege of PVE 8 and 9 together; [`privileges_of`] gives one
/// version's.
pub const ALL_PRIVILEGES: &[&str] = &[
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "Group.Allocate",
    "Mapping.Audit",
    "Mapping.Modify",
    "Mapping.Use",
    "Permissions.Modify",
    "Pool.Allocate",
    "Pool.Audit",
    "Realm.Allocate",
    "Realm.AllocateUser",
    "SDN.Allocate",
    "SDN.Audit",
    "SDN.Use",
    "Sys.AccessNetwork",
    "Sys.Audit",
    "Sys.Console",
    "Sys.Incoming",
    "Sys.Modify",
    "Sys.PowerMgmt",
    "Sys.Syslog",
    "User.Modify",
    "VM.Allocate",
    "VM.Audit",
    "VM.Backup",
    "VM.Clone",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Cloudinit",
    "VM.Config.Disk",
    "VM.Config.HWType",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.Options",
    "VM.Console",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.FileRead",
    "VM.GuestAgent.FileSystemMgmt",
    "VM.GuestAgent.FileWrite",
    "VM.GuestAgent.Unrestricted",
    "VM.Migrate",
    "VM.Monitor",
    "VM.PowerMgmt",
    "VM.Replicate",
    "VM.Snapshot",
    "VM.Snapshot.Rollback",
];

/// The major version of a `pve_version` (`8.4.1` → 8); 9 when unreadable.
pub fn major_of(version: &str) -> u32 {
    version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(9)
}

/// Whether `privilege` exists on PVE `major`: `VM.Monitor` only before 9,
/// `VM.GuestAgent.*` only from 9 on, the others on both.
pub fn privilege_exists(privilege: &str, major: u32) -> bool {
    if privilege == "VM.Monitor" {
        major < 9
    } else if privilege.starts_with("VM.GuestAgent.") {
        major >= 9
    } else {
        ALL_PRIVILEGES.contains(&privilege)
    }
}

/// Every privilege of PVE `major`.
pub fn privileges_of(major: u32) -> Vec<&'static str> {
    ALL_PRIVILEGES
        .iter()
        .copied()
        .filter(|p| privilege_exists(p, major))
        .collect()
}

/// Privileges of a built-in role on PVE `major` (`Administrator`,
/// `NoAccess`, `PVEAuditor`, `PVEVMAdmin`, `PVEVMUser`, `PVEDatastoreAdmin`,
/// `PVEDatastoreUser`, `PVESDNUser`, `PVEPoolAdmin`, `PVEPoolUser`); `None`
/// for unknown roles. A role's privileges that the version does not have
/// are left out (PVE 8's `PVEVMUser` has `VM.Monitor` instead of
/// `VM.GuestAgent.Audit`).
pub fn role_privileges(role: &str, major: u32) -> Option<Vec<&'static str>> {
    let mut list = role_table(role)?;
    if major < 9 && list.iter().any(|p| p.starts_with("VM.GuestAgent.")) {
        list.push("VM.Monitor");
    }
    list.retain(|p| privilege_exists(p, major));
    list.sort_unstable();
    list.dedup();
    Some(list)
}

fn role_table(role: &str) -> Option<Vec<&'static str>> {
    let vm_all = || {
        ALL_PRIVILEGES
            .iter()
            .copied()
            .filter(|p| p.starts_with("VM."))
            .collect()
    };
    Some(match role {
        "Administrator" => ALL_PRIVILEGES.to_vec(),
        "NoAccess" => vec![],
        "PVEAuditor" => vec![
            "Datastore.Audit",
            "Mapping.Audit",
            "Pool.Audit",
            "SDN.Audit",
            "Sys.Audit",
            "VM.Audit",
            "VM.GuestAgent.Audit",
        ],
        "PVEVMAdmin" => vm_all(),
        "PVEVMUser" => vec![
            "VM.Audit",
            "VM.Backup",
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.PowerMgmt",
            "VM.GuestAgent.Audit",
        ],
        "PVEDatastoreAdmin" => vec![
            "Datastore.Allocate",
            "Datastore.AllocateSpace",
            "Datastore.AllocateTemplate",
            "Datastore.Audit",
        ],
        "PVEDatastoreUser" => vec!["Datastore.AllocateSpace", "Datastore.Audit"],
        "PVESDNUser" => vec!["SDN.Audit", "SDN.Use"],
        "PVEPoolAdmin" => vec!["Pool.Allocate", "Pool.Audit"],
        "PVEPoolUser" => vec!["Pool.Audit"],
        _ => return None,
    })
}

/// Who is calling.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Principal {
    /// `user@realm`.
    pub userid: String,
    /// Token name (the part after `!`) for token calls.
    pub token: Option<String>,
}

impl Principal {
    /// The owner string in UPIDs: `user@realm` or `user@realm!token`.
    pub fn task_owner(&self) -> String {
        match &self.token {
            Some(t) => format!("{}!{t}", self.userid),
            None => self.userid.clone(),
        }
    }

    pub fn is_root(&self) -> bool {
        self.userid == "root@pam" && self.token.is_none()
    }
}

#[derive(Clone, Debug)]
struct Acl {
    path: String,
    privs: BTreeSet<String>,
    propagate: bool,
}

#[derive(Clone, Debug)]
struct UserState {
    password: Option<Secret>,
    enable: bool,
    acl: Vec<Acl>,
}

#[derive(Clone, Debug)]
struct TokenState {
    secret: Secret,
    privsep: bool,
    expire: u64,
    acl: Vec<Acl>,
}

#[derive(Clone)]
struct Ticket {
    userid: String,
    csrf: String,
    expires: Instant,
}

/// Users, tokens and live tickets of one cluster. `Debug` shows only names
/// (tickets are bearer credentials).
pub(crate) struct AuthState {
    major: u32,
    users: BTreeMap<String, UserState>,
    tokens: BTreeMap<String, TokenState>,
    tickets: HashMap<String, Ticket>,
    /// Member path (`/vms/131`, `/storage/local-lvm`) → its pool.
    pool_members: BTreeMap<String, String>,
}

fn acl_from(entries: &[AclEntry], major: u32) -> Result<Vec<Acl>, String> {
    entries
        .iter()
        .map(|e| {
            let mut privs: BTreeSet<String> = e.privileges.iter().cloned().collect();
            for p in &privs {
                if !privilege_exists(p, major) {
                    return Err(format!("invalid privilege '{p}' (PVE {major})"));
                }
            }
            for r in &e.roles {
                let p = role_privileges(r, major).ok_or_else(|| format!("unknown role '{r}'"))?;
                privs.extend(p.into_iter().map(String::from));
            }
            Ok(Acl {
                path: normalize_path(&e.path),
                privs,
                propagate: e.propagate,
            })
        })
        .collect()
}

fn normalize_path(p: &str) -> String {
    let parts: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
    format!("/{}", parts.join("/"))
}

/// Whether `ancestor` is `path` or a parent of it (component-wise).
fn is_ancestor(ancestor: &str, path: &str) -> bool {
    ancestor == "/" || path == ancestor || path.starts_with(&format!("{ancestor}/"))
}

fn effective(acl: &[Acl], path: &str) -> BTreeSet<String> {
    let path = normalize_path(path);
    let mut levels: BTreeMap<usize, Vec<&Acl>> = BTreeMap::new();
    for a in acl {
        if is_ancestor(&a.path, &path) && (a.propagate || a.path == path) {
            let depth = if a.path == "/" {
                0
            } else {
                a.path.matches('/').count()
            };
            levels.entry(depth).or_default().push(a);
        }
    }
    // the most specific level with entries wins
    levels
        .into_iter()
        .next_back()
        .map(|(_, entries)| {
            entries
                .iter()
                .flat_map(|a| a.privs.iter().cloned())
                .collect()
        })
        .unwrap_or_default()
}

impl std::fmt::Debug for AuthState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthState")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("tokens", &self.tokens.keys().collect::<Vec<_>>())
            .field("tickets", &self.tickets.len())
            .finish()
    }
}

impl AuthState {
    /// Builds the state from the config; `token_secrets` holds the resolved
    /// (configured or seeded) secret of every token.
    pub fn new(
        cfg: &ClusterConfig,
        token_secrets: &BTreeMap<String, Secret>,
    ) -> Result<Self, String> {
        let major = major_of(&cfg.pve_version);
        let mut users = BTreeMap::new();
        for u in &cfg.users {
            users.insert(
                u.userid.clone(),
                UserState {
                    password: u.password.clone(),
                    enable: u.enable,
                    acl: acl_from(&u.acl, major)?,
                },
            );
        }
        let mut tokens = BTreeMap::new();
        for t in &cfg.tokens {
            let secret = token_secrets.get(&t.id).cloned().unwrap_or_default();
            tokens.insert(
                t.id.clone(),
                TokenState {
                    secret,
                    privsep: t.privsep,
                    expire: t.expire,
                    acl: acl_from(&t.acl, major)?,
                },
            );
        }
        Ok(AuthState {
            major,
            users,
            tokens,
            tickets: HashMap::new(),
            pool_members: BTreeMap::new(),
        })
    }

    /// Replaces the pool membership the privileges are computed with:
    /// `(pool, vmids, storages)` per pool. Called whenever a pool's members
    /// change (clone with `pool`, `PUT /pools`, destroy).
    pub fn set_pool_members<'a>(
        &mut self,
        pools: impl IntoIterator<Item = (&'a str, Vec<u32>, Vec<String>)>,
    ) {
        self.pool_members.clear();
        for (pool, vms, storages) in pools {
            for v in vms {
                self.pool_members
                    .insert(format!("/vms/{v}"), pool.to_string());
            }
            for s in storages {
                self.pool_members
                    .insert(format!("/storage/{s}"), pool.to_string());
            }
        }
    }

    /// `effective` on `path`, joined with the privileges of the pool
    /// `path` is a member of.
    fn effective_with_pool(&self, acl: &[Acl], path: &str) -> BTreeSet<String> {
        let mut privs = effective(acl, path);
        if let Some(pool) = self.pool_members.get(&normalize_path(path)) {
            privs.extend(effective(acl, &format!("/pool/{pool}")));
        }
        privs
    }

    /// Effective privileges of `who` on `path`.
    pub fn privileges(&self, who: &Principal, path: &str) -> BTreeSet<String> {
        let all = || privileges_of(self.major).into_iter().map(String::from);
        if who.userid == "root@pam" && who.token.is_none() {
            return all().collect();
        }
        let user_privs = if who.userid == "root@pam" {
            all().collect()
        } else {
            self.users
                .get(&who.userid)
                .map(|u| self.effective_with_pool(&u.acl, path))
                .unwrap_or_default()
        };
        match &who.token {
            None => user_privs,
            Some(t) => {
                let Some(tok) = self.tokens.get(&format!("{}!{t}", who.userid)) else {
                    return BTreeSet::new();
                };
                if !tok.privsep {
                    return user_privs;
                }
                let token_privs = self.effective_with_pool(&tok.acl, path);
                if who.userid == "root@pam" {
                    token_privs
                } else {
                    user_privs.intersection(&token_privs).cloned().collect()
                }
            }
        }
    }

    /// Whether `who` has all (or, with `any`, one) of `privs` on `path`.
    pub fn has(&self, who: &Principal, path: &str, privs: &[&str], any: bool) -> bool {
        let have = self.privileges(who, path);
        if any {
            privs.iter().any(|p| have.contains(*p))
        } else {
            privs.iter().all(|p| have.contains(*p))
        }
    }

    /// Whether `who` (its user, or its token) has an ACL entry exactly on `path`.
    pub fn has_acl_on(&self, who: &Principal, path: &str) -> bool {
        let path = normalize_path(path);
        let user = self
            .users
            .get(&who.userid)
            .is_some_and(|u| u.acl.iter().any(|a| a.path == path));
        let token = who.token.as_ref().is_some_and(|t| {
            self.tokens
                .get(&format!("{}!{t}", who.userid))
                .is_some_and(|tok| tok.acl.iter().any(|a| a.path == path))
        });
        user || token
    }

    /// A per-VM `VM.Audit` filter for listings: computes the privileges of
    /// `/vms/*` once and only re-evaluates VMs with their own ACL entry.
    pub fn vm_audit_filter<'a>(&'a self, who: &'a Principal) -> impl Fn(u32) -> bool + 'a {
        // "/vms/0" stands for any VM without its own entry (0 is never a VMID)
        let base = self.has(who, "/vms/0", &["VM.Audit"], false);
        move |vmid| {
            let path = format!("/vms/{vmid}");
            if self.has_acl_on(who, &path) || self.pool_members.contains_key(&path) {
                self.has(who, &path, &["VM.Audit"], false)
            } else {
                base
            }
        }
    }

    /// Like [`AuthState::has`] but as the 403 Proxmox raises.
    pub fn check(
        &self,
        who: &Principal,
        path: &str,
        privs: &[&str],
        any: bool,
    ) -> Result<(), ApiError> {
        if self.has(who, path, privs, any) {
            Ok(())
        } else {
            Err(ApiError::forbidden(&format!("{path}, {}", privs.join("|"))))
        }
    }

    /// Authenticates a request. `is_write` enables the CSRF check for tickets.
    pub fn authenticate(
        &self,
        headers: &HeaderMap,
        is_write: bool,
        now_epoch: u64,
    ) -> Result<Principal, ApiError> {
        let authz = headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::trim);
        let cookie_ticket = headers
            .get_all(axum::http::header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().strip_prefix("PVEAuthCookie="))
            .map(|t| percent_decode_str(t).decode_utf8_lossy().into_owned())
            .next();
        let header_ticket = authz
            .and_then(|a| a.strip_prefix("PVEAuthCookie="))
            .map(|t| percent_decode_str(t).decode_utf8_lossy().into_owned());
        if let Some(ticket) = cookie_ticket.or(header_ticket) {
            let t = self
                .tickets
                .get(&ticket)
                .filter(|t| t.expires > Instant::now())
                .ok_or_else(|| ApiError::unauthorized("permission denied - invalid PVE ticket"))?;
            if is_write {
                let csrf = headers
                    .get("CSRFPreventionToken")
                    .and_then(|v| v.to_str().ok());
                if csrf != Some(t.csrf.as_str()) {
                    return Err(ApiError::unauthorized(
                        "Permission denied - invalid csrf token",
                    ));
                }
            }
            return Ok(Principal {
                userid: t.userid.clone(),
                token: None,
            });
        }
        let Some(value) = authz.and_then(|a| a.strip_prefix("PVEAPIToken")) else {
            return Err(ApiError::unauthorized("No ticket"));
        };
        let value = value.strip_prefix(['=', ' ']).unwrap_or(value);
        let value = percent_decode_str(value).decode_utf8_lossy().into_owned();
        let (tokenid, secret) = value
            .rsplit_once('=')
            .ok_or_else(|| ApiError::unauthorized("no token value specified"))?;
        let (userid, name) = tokenid
            .split_once('!')
            .ok_or_else(|| ApiError::unauthorized("no tokenid specified"))?;
        let user = self
            .users
            .get(userid)
            .filter(|u| u.enable)
            .ok_or_else(|| ApiError::unauthorized("invalid token owner!"))?;
        let _ = user;
        let tok = self
            .tokens
            .get(tokenid)
            .ok_or_else(|| ApiError::unauthorized("no such token"))?;
        if tok.expire != 0 && tok.expire <= now_epoch {
            return Err(ApiError::unauthorized("token expired"));
        }
        if !tok.secret.matches(secret) {
            return Err(ApiError::unauthorized("invalid token value!"));
        }
        Ok(Principal {
            userid: userid.to_string(),
            token: Some(name.to_string()),
        })
    }

    /// Checks a password (or a still-valid ticket of the same user, which
    /// renews it) for `POST /access/ticket`.
    pub fn login(&self, userid: &str, password: &str) -> bool {
        let Some(u) = self.users.get(userid).filter(|u| u.enable) else {
            return false;
        };
        if u.password.as_ref().is_some_and(|p| p.matches(password)) {
            return true;
        }
        self.tickets
            .get(password)
            .is_some_and(|t| t.userid == userid && t.expires > Instant::now())
    }

    /// Stores a new ticket.
    pub fn add_ticket(&mut self, ticket: String, userid: &str, csrf: String, expires: Instant) {
        let now = Instant::now();
        self.tickets.retain(|_, t| t.expires > now);
        self.tickets.insert(
            ticket,
            Ticket {
                userid: userid.to_string(),
                csrf,
                expires,
            },
        );
    }

    /// Replaces a token's secret (rotation). Returns false for unknown tokens.
    pub fn set_token_secret(&mut self, tokenid: &str, secret: Secret) -> bool {
        match self.tokens.get_mut(tokenid) {
            Some(t) => {
                t.secret = secret;
                true
            }
            None => false,
        }
    }

    /// The current secret of a token.
    pub fn token_secret(&self, tokenid: &str) -> Option<Secret> {
        self.tokens.get(tokenid).map(|t| t.secret.clone())
    }

    /// Paths with ACL entries relevant to `who` (for `/access/permissions`).
    pub fn acl_paths(&self, who: &Principal) -> BTreeSet<String> {
        let mut paths: BTreeSet<String> = BTreeSet::from(["/".to_string()]);
        if let Some(u) = self.users.get(&who.userid) {
            paths.extend(u.acl.iter().map(|a| a.path.clone()));
        }
        if let Some(t) = &who.token
            && let Some(tok) = self.tokens.get(&format!("{}!{t}", who.userid))
        {
            paths.extend(tok.acl.iter().map(|a| a.path.clone()));
        }
        // Proxmox lists every pool member's path too.
        paths.extend(self.pool_members.keys().cloned());
        paths
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SimConfig;
    use axum::http::HeaderValue;

    fn state() -> AuthState {
        let mut cfg = SimConfig::builtin_default().clusters.remove(0);
        cfg.users.push(crate::config::UserConfig {
            userid: "alice@pve".into(),
            password: Some(Secret::new("pw")),
            enable: true,
            acl: vec![
                AclEntry {
                    path: "/".into(),
                    roles: vec!["PVEAuditor".into()],
                    privileges: vec![],
                    propagate: true,
                },
                AclEntry {
                    path: "/vms/100".into(),
                    roles: vec!["PVEVMAdmin".into()],
                    privileges: vec![],
                    propagate: true,
                },
            ],
        });
        cfg.tokens.push(crate::config::TokenConfig {
            id: "alice@pve!ro".into(),
            secret: None,
            privsep: true,
            expire: 0,
            acl: vec![AclEntry {
                path: "/vms".into(),
                roles: vec![],
                privileges: vec!["VM.Audit".into(), "VM.Clone".into()],
                propagate: true,
            }],
        });
        let secrets = BTreeMap::from([
            ("capmox@pve!capi".to_string(), Secret::new("s1")),
            ("alice@pve!ro".to_string(), Secret::new("s2")),
        ]);
        AuthState::new(&cfg, &secrets).unwrap()
    }

    fn hdr(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn token_header_variants() {
        let s = state();
        let p = s
            .authenticate(&hdr("PVEAPIToken=capmox@pve!capi=s1"), true, 0)
            .unwrap();
        assert_eq!(p.task_owner(), "capmox@pve!capi");
        assert!(
            s.authenticate(&hdr("PVEAPIToken capmox@pve!capi=s1"), true, 0)
                .is_ok()
        );
        assert!(
            s.authenticate(&hdr("PVEAPIToken=capmox%40pve%21capi%3Ds1"), true, 0)
                .is_ok()
        );
        let e = s
            .authenticate(&hdr("PVEAPIToken=capmox@pve!capi=s2"), false, 0)
            .unwrap_err();
        assert_eq!(e, ApiError::unauthorized("invalid token value!"));
        let e = s.authenticate(&HeaderMap::new(), false, 0).unwrap_err();
        assert_eq!(e, ApiError::unauthorized("No ticket"));
    }

    #[test]
    fn most_specific_acl_wins_and_privsep_intersects() {
        let s = state();
        let alice = Principal {
            userid: "alice@pve".into(),
            token: None,
        };
        assert!(s.has(&alice, "/vms/100", &["VM.Config.Disk"], false));
        assert!(!s.has(&alice, "/vms/101", &["VM.Config.Disk"], false));
        assert!(s.has(&alice, "/vms/101", &["VM.Audit"], false));
        let tok = Principal {
            userid: "alice@pve".into(),
            token: Some("ro".into()),
        };
        // token grants VM.Clone on /vms, user has it only on /vms/100
        assert!(s.has(&tok, "/vms/100", &["VM.Clone"], false));
        assert!(!s.has(&tok, "/vms/101", &["VM.Clone"], false));
        assert!(!s.has(&tok, "/vms/100", &["VM.Config.Disk"], false));
        assert_eq!(
            s.check(&tok, "/vms/101", &["VM.Clone"], false).unwrap_err(),
            ApiError::forbidden("/vms/101, VM.Clone")
        );
    }

    /// docs/field-cases.md B34: a user whose only VM rights are on
    /// `/pool/k8s` holds them on the pool's members and nowhere else, and
    /// `/access/permissions` lists the member paths.
    #[test]
    fn pool_acl_is_inherited_by_members_only() {
        let mut cfg = SimConfig::builtin_default().clusters.remove(0);
        cfg.users.push(crate::config::UserConfig {
            userid: "bob@pve".into(),
            password: Some(Secret::new("pw")),
            enable: true,
            acl: vec![AclEntry {
                path: "/pool/k8s".into(),
                roles: vec!["PVEVMAdmin".into()],
                privileges: vec![],
                propagate: true,
            }],
        });
        let mut s = AuthState::new(&cfg, &BTreeMap::new()).unwrap();
        let bob = Principal {
            userid: "bob@pve".into(),
            token: None,
        };
        assert!(!s.has(&bob, "/vms/131", &["VM.Audit"], false));
        s.set_pool_members([("k8s", vec![131], vec!["local-lvm".to_string()])]);
        assert!(s.has(&bob, "/vms/131", &["VM.Allocate", "VM.Audit"], false));
        assert!(!s.has(&bob, "/vms/132", &["VM.Audit"], false));
        assert!(s.has(&bob, "/pool/k8s", &["VM.Allocate"], false));
        assert!(s.vm_audit_filter(&bob)(131));
        assert!(!s.vm_audit_filter(&bob)(132));
        let paths = s.acl_paths(&bob);
        assert!(paths.contains("/vms/131") && paths.contains("/storage/local-lvm"));
        s.set_pool_members([]);
        assert!(!s.has(&bob, "/vms/131", &["VM.Audit"], false));
    }

    #[test]
    fn debug_hides_credentials() {
        let mut s = state();
        s.add_ticket(
            "PVE:root@pam:1::sekrit".into(),
            "root@pam",
            "csrf-sekrit".into(),
            Instant::now() + std::time::Duration::from_secs(60),
        );
        let d = format!("{s:?}");
        assert!(
            !d.contains("sekrit") && !d.contains("s1") && d.contains("capmox@pve!capi"),
            "{d}"
        );
    }

    #[test]
    fn tickets_and_csrf() {
        let mut s = state();
        assert!(s.login("root@pam", "pve-sim"));
        assert!(!s.login("root@pam", "nope"));
        s.add_ticket(
            "PVE:root@pam:1::x".into(),
            "root@pam",
            "csrf1".into(),
            Instant::now() + std::time::Duration::from_secs(60),
        );
        let mut h = HeaderMap::new();
        h.insert(
            "cookie",
            HeaderValue::from_static("a=b; PVEAuthCookie=PVE%3Aroot%40pam%3A1%3A%3Ax"),
        );
        assert!(s.authenticate(&h, false, 0).unwrap().is_root());
        assert_eq!(
            s.authenticate(&h, true, 0).unwrap_err(),
            ApiError::unauthorized("Permission denied - invalid csrf token")
        );
        h.insert("CSRFPreventionToken", HeaderValue::from_static("csrf1"));
        assert!(s.authenticate(&h, true, 0).is_ok());
        assert!(
            s.login("root@pam", "PVE:root@pam:1::x"),
            "a valid ticket renews"
        );
    }
}
