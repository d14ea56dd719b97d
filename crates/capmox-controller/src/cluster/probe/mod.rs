//! Instance health probes: is this Proxmox cluster usable for this
//! ProxmoxCluster right now?
//!
//! One probe = `GET /version` and `GET /cluster/status` (concurrently), then
//! — when the instance names a template — `GET /cluster/resources?type=vm`,
//! then `GET /access/permissions` (what the token lacks, [`privileges`]),
//! then — when the instance names a resource pool — the pool ([`pool`]),
//! all under one per-instance timeout, so a datacenter that does not answer
//! costs at most that long and never delays the others (the executor probes
//! every instance concurrently).
//!
//! Checks, each with its own message saying what to fix: credentials (401,
//! 403 with the permission path, TLS naming the URL), reachability, the
//! allowed nodes exist and at least one is online, the template is present
//! (by `templateID` on `sourceNode`, or at least one template matching the
//! selector). Messages never carry credential values (`pve-client`
//! guarantees its errors carry none).
//!
//! | module | owns |
//! |---|---|
//! | this file | [`probe`] (the calls) and [`evaluate`] (judging the answers) |
//! | [`describe`] | the message and credential state of an error |
//! | [`template`] | whether the instance's template is usable |
//! | [`privileges`] | the privileges the token lacks for the features in use |
//! | [`pool`] | whether the instance's resource pool exists |

mod describe;
pub mod pool;
pub mod privileges;
mod template;

use std::collections::BTreeSet;
use std::time::Duration;

use describe::fmt_duration;
pub use describe::{describe_error, describe_pve};
pub use template::template_problem;

use crate::clients::identity_from_status;
use crate::instances::EffectiveInstance;
use crate::pve::{ClusterResource, ClusterStatusEntry, ProxmoxApi, ResourceType, VersionInfo};

/// What a probe learned about the credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CredentialState {
    /// An authenticated call succeeded.
    Valid,
    /// The credentials are wrong or unusable (Secret, key, 401, 403, TLS, URL).
    Invalid,
    /// Not known: the instance could not be reached.
    Unverified,
}

/// The outcome of probing one instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    /// Usable: credentials valid, API reachable, an allowed node online, the
    /// template present.
    pub ready: bool,
    /// What the probe learned about the credentials.
    pub credentials: CredentialState,
    /// pve-manager version (`8.4.1`), when `/version` answered.
    pub version: Option<String>,
    /// Online allowed nodes, sorted.
    pub nodes: Vec<String>,
    /// What is wrong (when not ready), in words that say what to fix.
    pub message: Option<String>,
    /// The Proxmox cluster's identity learned from `/cluster/status`.
    pub identity: Option<crate::clients::Identity>,
    /// Privileges the token lacks for the features in use
    /// ([`privileges::missing`]); they do not make the instance unready.
    pub missing_privileges: Vec<crate::api::MissingPrivilege>,
    /// The instance's resource pool is missing or unreadable ([`pool`]):
    /// what to fix. Machines using it wait; the instance stays ready.
    pub pool_problem: Option<String>,
    /// A failed probe's retry: set by [`super::cache::ProbeCache::record`];
    /// `None` when ready or not recorded yet.
    pub retry: Option<ProbeRetry>,
}

/// When a failing instance is probed again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProbeRetry {
    /// Consecutive failed probes (1 = the first).
    pub failures: u32,
    /// When the next probe is due.
    pub at: k8s_openapi::jiff::Timestamp,
    /// The failures began right after the API URL or the instance's spec
    /// changed: the last good state was for other
    /// settings, so it is not held (`cluster::decide::hold`).
    pub after_change: bool,
}

impl ProbeRetry {
    /// "probe N failed; next probe at T" (stable between polls: the time is
    /// absolute, seconds).
    pub fn text(&self) -> String {
        format!(
            "probe {} failed; next probe at {}",
            self.failures,
            self.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        )
    }
}

impl ProbeResult {
    /// A failed probe.
    pub fn failed(credentials: CredentialState, message: impl Into<String>) -> ProbeResult {
        ProbeResult {
            ready: false,
            credentials,
            version: None,
            nodes: Vec::new(),
            message: Some(message.into()),
            identity: None,
            missing_privileges: Vec::new(),
            pool_problem: None,
            retry: None,
        }
    }
}

/// Probes one instance under `timeout`.
pub async fn probe(
    api: &dyn ProxmoxApi,
    inst: &EffectiveInstance,
    timeout: Duration,
) -> ProbeResult {
    match tokio::time::timeout(timeout, probe_calls(api, inst)).await {
        Ok(r) => r,
        Err(_) => ProbeResult::failed(
            CredentialState::Unverified,
            format!(
                "no answer from {} within {} (probe timeout)",
                api.origin(),
                fmt_duration(timeout)
            ),
        ),
    }
}

async fn probe_calls(api: &dyn ProxmoxApi, inst: &EffectiveInstance) -> ProbeResult {
    let origin = api.origin().to_string();
    let (version, status) = tokio::join!(api.version(), api.cluster_status());
    let version = match version {
        Ok(v) => v,
        Err(e) => {
            let (m, c) = describe_pve(&e, &origin);
            return ProbeResult::failed(c, m);
        }
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            let (m, c) = describe_pve(&e, &origin);
            let mut r = ProbeResult::failed(c, m);
            r.version = Some(version_text(&version));
            return r;
        }
    };
    let resources = match &inst.spec.template {
        Some(_) => match api.cluster_resources(Some(ResourceType::Vm)).await {
            Ok(r) => Some(r),
            Err(e) => {
                let (m, c) = describe_pve(&e, &origin);
                let mut r = ProbeResult::failed(c, m);
                r.version = Some(version_text(&version));
                return r;
            }
        },
        None => None,
    };
    let held = match api.permissions(None).await {
        Ok(p) => p,
        Err(e) => {
            let (m, c) = describe_pve(&e, &origin);
            let mut r = ProbeResult::failed(c, m);
            r.version = Some(version_text(&version));
            return r;
        }
    };
    let pool = match pool::check(api, inst, &version).await {
        Ok(p) => p,
        Err(e) => {
            let (m, c) = describe_pve(&e, &origin);
            let mut r = ProbeResult::failed(c, m);
            r.version = Some(version_text(&version));
            return r;
        }
    };
    let mut r = evaluate(&origin, inst, &version, &status, resources.as_deref());
    // An unreadable version is taken as the newest table (PVE 9).
    let major = version.major().unwrap_or(9);
    r.missing_privileges = privileges::missing(inst, major, &held);
    if let Some(pool::PoolCheck::Problem(m)) = pool {
        r.pool_problem = Some(m);
    }
    r
}

fn version_text(v: &VersionInfo) -> String {
    if v.version.is_empty() {
        v.release.clone()
    } else {
        v.version.clone()
    }
}

/// Judges the answers of a reachable instance (pure): allowed nodes exist and
/// one is online; the template is present.
pub fn evaluate(
    origin: &str,
    inst: &EffectiveInstance,
    version: &VersionInfo,
    status: &[ClusterStatusEntry],
    vms: Option<&[ClusterResource]>,
) -> ProbeResult {
    let known: BTreeSet<&str> = status
        .iter()
        .filter(|e| e.is_node())
        .map(|e| e.name.as_str())
        .collect();
    let online: BTreeSet<&str> = status
        .iter()
        .filter(|e| e.is_node() && e.online)
        .map(|e| e.name.as_str())
        .collect();
    let allowed = &inst.spec.nodes;
    let usable: Vec<String> = if allowed.is_empty() {
        online.iter().map(|s| s.to_string()).collect()
    } else {
        let mut v: Vec<String> = allowed
            .iter()
            .filter(|n| online.contains(n.as_str()))
            .cloned()
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut problems = Vec::new();
    let mut notes = Vec::new();
    let unknown: Vec<&str> = allowed
        .iter()
        .map(String::as_str)
        .filter(|n| !known.contains(n))
        .collect();
    if !unknown.is_empty() {
        notes.push(format!(
            "allowed node(s) {} are not nodes of this Proxmox cluster (nodes: {})",
            unknown.join(", "),
            join_or_none(known.iter().copied())
        ));
    }
    if usable.is_empty() {
        if allowed.is_empty() {
            problems.push(format!(
                "no node online (nodes: {})",
                join_or_none(known.iter().copied())
            ));
        } else {
            problems.push(format!(
                "no allowed node online (allowed: {}; online: {})",
                allowed.join(", "),
                join_or_none(online.iter().copied())
            ));
        }
    }
    if let (Some(t), Some(vms)) = (&inst.spec.template, vms)
        && let Some(p) = template_problem(t, vms)
    {
        problems.push(p);
    }
    let ready = problems.is_empty();
    problems.extend(notes);
    ProbeResult {
        ready,
        credentials: CredentialState::Valid,
        version: Some(version_text(version)),
        nodes: usable,
        message: if problems.is_empty() {
            None
        } else {
            Some(format!("{origin}: {}", problems.join("; ")))
        },
        identity: Some(identity_from_status(origin, status)),
        missing_privileges: Vec::new(),
        pool_problem: None,
        retry: None,
    }
}

fn join_or_none<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests;
