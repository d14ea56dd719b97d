//! Instance health probes: is this Proxmox cluster usable for this
//! ProxmoxCluster right now?
//!
//! One probe = `GET /version` and `GET /cluster/status` (concurrently), then
//! — when the instance names a template — `GET /cluster/resources?type=vm`,
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

use std::collections::BTreeSet;
use std::time::Duration;

use pve_client::{PveError, TransientCause};

use crate::api::{MatchPolicy, TemplateSource};
use crate::clients::identity_from_status;
use crate::error::Error;
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
            retry: None,
        }
    }
}

/// The message and credential state for an error of `ClientMap::get`
/// (Secret missing, key missing or malformed) or of a probe call.
pub fn describe_error(e: &Error, origin: Option<&str>) -> (String, CredentialState) {
    match e {
        Error::Credentials { message, .. } => (message.clone(), CredentialState::Invalid),
        Error::Pve { source, .. } => describe_pve(source, origin.unwrap_or("the instance")),
        Error::Timeout { what, after } => (
            format!("{what} got no answer within {}", fmt_duration(*after)),
            CredentialState::Unverified,
        ),
        other => (other.to_string(), CredentialState::Unverified),
    }
}

fn fmt_duration(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The message and credential state for a Proxmox error from `origin`.
pub fn describe_pve(e: &PveError, origin: &str) -> (String, CredentialState) {
    use CredentialState::{Invalid, Unverified};
    match e {
        PveError::Unauthorized { .. } => (
            format!(
                "authentication failed at {origin} (HTTP 401): the token id or secret in the credentials Secret is wrong, or the token was removed or expired"
            ),
            Invalid,
        ),
        PveError::PermissionDenied {
            path,
            privileges,
            message,
            ..
        } => {
            let what = match (path, privileges.is_empty()) {
                (Some(p), false) => format!("lacks {} on {p}", privileges.join(" or ")),
                (Some(p), true) => format!("lacks a privilege on {p}"),
                (None, _) => format!("was refused: {message}"),
            };
            (
                format!(
                    "permission denied at {origin} (HTTP 403): the API token {what}; grant it to the token (with privilege separation, to the token itself)"
                ),
                Invalid,
            )
        }
        PveError::Tls { url, message, .. } => (
            format!(
                "TLS verification of {url} failed: {message}; put the cluster's CA certificate into root_ca of the credentials Secret (or pin the certificate with fingerprint)"
            ),
            Invalid,
        ),
        PveError::InvalidConfig { message, .. } => (message.clone(), Invalid),
        PveError::Unsupported {
            status, message, ..
        } => (
            format!(
                "{origin} does not serve the Proxmox VE API (HTTP {status}: {message}); check url in the credentials Secret"
            ),
            Invalid,
        ),
        PveError::Transient { cause, message, .. } => match cause {
            TransientCause::ConnectFailed => {
                (format!("cannot reach {origin}: {message}"), Unverified)
            }
            TransientCause::Timeout => (
                format!("no answer from {origin} within the call timeout"),
                Unverified,
            ),
            TransientCause::ConnectionLost => (
                format!("connection to {origin} lost: {message}"),
                Unverified,
            ),
            TransientCause::Status(s) => {
                (format!("{origin} answered HTTP {s}: {message}"), Unverified)
            }
        },
        PveError::NodeUnreachable {
            status, message, ..
        } => (
            format!(
                "{origin}: the answering node cannot reach another node (HTTP {status}: {message})"
            ),
            Unverified,
        ),
        other => (format!("{origin}: {other}"), Unverified),
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
    evaluate(&origin, inst, &version, &status, resources.as_deref())
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

fn lower_set<'a>(tags: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
    tags.map(str::to_ascii_lowercase).collect()
}

/// Why the instance's template is not usable, if it is not: `templateID`
/// must be a template on `sourceNode`; a selector must match at least one
/// template (`exact`: same tag set; `uniqueSubset` / `bestSubset`: the
/// template carries every `matchTags` entry — which one wins, and ambiguity,
/// is the machine reconciler's call).
pub fn template_problem(t: &TemplateSource, vms: &[ClusterResource]) -> Option<String> {
    if let Some(id) = t.template_id {
        let node = t.source_node.as_deref().unwrap_or("");
        let Some(vm) = vms
            .iter()
            .find(|r| r.is_qemu() && r.vmid.map(|v| v.get()) == Some(id))
        else {
            return Some(format!(
                "template {id} (templateID) does not exist (or the token lacks VM.Audit on /vms/{id})"
            ));
        };
        if !vm.template {
            return Some(format!(
                "VM {id} is not a template; convert it or pick another templateID"
            ));
        }
        let on = vm.node.as_ref().map(|n| n.as_str()).unwrap_or("");
        if on != node {
            return Some(format!(
                "template {id} is on node {on}, not on sourceNode {node}"
            ));
        }
        return None;
    }
    let sel = t.template_selector.as_ref()?;
    let want = lower_set(sel.match_tags.iter().map(String::as_str));
    let exact = matches!(sel.match_policy.unwrap_or_default(), MatchPolicy::Exact);
    let templates: Vec<(&ClusterResource, BTreeSet<String>)> = vms
        .iter()
        .filter(|r| r.is_qemu() && r.template)
        .map(|r| {
            let tags = r.tags_raw.as_deref().unwrap_or("");
            let set = lower_set(tags.split([';', ',', ' ']).filter(|s| !s.is_empty()));
            (r, set)
        })
        .collect();
    let matched = templates.iter().any(|(_, tags)| {
        if exact {
            *tags == want
        } else {
            want.is_subset(tags)
        }
    });
    if matched {
        return None;
    }
    let policy = match sel.match_policy.unwrap_or_default() {
        MatchPolicy::Exact => "exact",
        MatchPolicy::UniqueSubset => "uniqueSubset",
        MatchPolicy::BestSubset => "bestSubset",
    };
    let mut seen: Vec<String> = templates
        .iter()
        .take(5)
        .map(|(r, tags)| {
            format!(
                "{} ({}) [{}]",
                r.vmid.map(|v| v.get()).unwrap_or(0),
                r.name.as_deref().unwrap_or("?"),
                tags.iter().cloned().collect::<Vec<_>>().join(", ")
            )
        })
        .collect();
    if templates.len() > 5 {
        seen.push(format!("… {} more", templates.len() - 5));
    }
    Some(format!(
        "no template matches templateSelector tags [{}] (matchPolicy {policy}); templates: {}",
        want.iter().cloned().collect::<Vec<_>>().join(", "),
        if seen.is_empty() {
            "none".to_string()
        } else {
            seen.join(", ")
        }
    ))
}

#[cfg(test)]
mod tests {
    use pve_client::CallContext;

    use super::*;
    use crate::api::{InstanceSpec, SecretRef, TemplateSelector};
    use crate::instances::{EffectiveInstance, ResolvedNetwork};

    fn inst(nodes: &[&str], template: Option<TemplateSource>) -> EffectiveInstance {
        EffectiveInstance {
            spec: InstanceSpec {
                name: "dc-a".into(),
                credentials_ref: SecretRef {
                    name: "a".into(),
                    namespace: None,
                },
                nodes: nodes.iter().map(|s| s.to_string()).collect(),
                template,
                ..InstanceSpec::default()
            },
            manager_credentials: false,
            implicit: false,
            network: ResolvedNetwork::default(),
            scheduler_hints: Default::default(),
        }
    }

    fn node(name: &str, online: bool) -> ClusterStatusEntry {
        ClusterStatusEntry {
            id: format!("node/{name}"),
            name: name.into(),
            kind: "node".into(),
            ip: None,
            online,
            local: false,
            nodeid: None,
            quorate: false,
            nodes: None,
        }
    }

    fn cluster_entry(name: &str) -> ClusterStatusEntry {
        ClusterStatusEntry {
            id: "cluster".into(),
            name: name.into(),
            kind: "cluster".into(),
            ip: None,
            online: false,
            local: false,
            nodeid: None,
            quorate: true,
            nodes: Some(3),
        }
    }

    fn vm(vmid: u32, node: &str, template: bool, tags: &str) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "id": format!("qemu/{vmid}"), "type": "qemu", "vmid": vmid, "node": node,
            "name": format!("vm{vmid}"), "template": u8::from(template), "tags": tags,
        }))
        .unwrap()
    }

    fn version() -> VersionInfo {
        VersionInfo {
            version: "8.4.1".into(),
            release: "8.4".into(),
            repoid: "abc".into(),
        }
    }

    const ORIGIN: &str = "https://pve-a.example:8006";

    #[test]
    fn healthy_instance() {
        let status = [
            cluster_entry("dc-a"),
            node("pve1", true),
            node("pve2", false),
            node("pve3", true),
        ];
        let r = evaluate(ORIGIN, &inst(&[], None), &version(), &status, None);
        assert_eq!(
            r,
            ProbeResult {
                ready: true,
                credentials: CredentialState::Valid,
                version: Some("8.4.1".into()),
                nodes: vec!["pve1".into(), "pve3".into()],
                message: None,
                identity: Some(crate::clients::Identity::new("cluster:dc-a")),
                retry: None,
            }
        );
        let r = evaluate(
            ORIGIN,
            &inst(&["pve3", "pve2"], None),
            &version(),
            &status,
            None,
        );
        assert!(r.ready);
        assert_eq!(r.nodes, vec!["pve3".to_string()]);
    }

    #[test]
    fn node_problems_are_named() {
        let status = [node("pve1", true), node("pve2", false)];
        let r = evaluate(ORIGIN, &inst(&["pve2"], None), &version(), &status, None);
        assert!(!r.ready);
        assert_eq!(
            r.message.as_deref(),
            Some(
                "https://pve-a.example:8006: no allowed node online (allowed: pve2; online: pve1)"
            )
        );
        assert_eq!(r.identity, Some(crate::clients::Identity::new(ORIGIN)));
        // An unknown allowed node is reported but does not block while another is online.
        let r = evaluate(
            ORIGIN,
            &inst(&["pve1", "pve9"], None),
            &version(),
            &status,
            None,
        );
        assert!(r.ready);
        assert_eq!(r.nodes, vec!["pve1".to_string()]);
        assert_eq!(
            r.message.as_deref(),
            Some(
                "https://pve-a.example:8006: allowed node(s) pve9 are not nodes of this Proxmox cluster (nodes: pve1, pve2)"
            )
        );
        let r = evaluate(
            ORIGIN,
            &inst(&[], None),
            &version(),
            &[node("pve1", false)],
            None,
        );
        assert_eq!(
            r.message.as_deref(),
            Some("https://pve-a.example:8006: no node online (nodes: pve1)")
        );
    }

    #[test]
    fn template_by_id() {
        let by_id = |id: u32, node: &str| TemplateSource {
            source_node: Some(node.into()),
            template_id: Some(id),
            template_selector: None,
        };
        let vms = [vm(9000, "pve1", true, "capmox"), vm(100, "pve1", false, "")];
        assert_eq!(template_problem(&by_id(9000, "pve1"), &vms), None);
        assert_eq!(
            template_problem(&by_id(9000, "pve2"), &vms).as_deref(),
            Some("template 9000 is on node pve1, not on sourceNode pve2")
        );
        assert_eq!(
            template_problem(&by_id(100, "pve1"), &vms).as_deref(),
            Some("VM 100 is not a template; convert it or pick another templateID")
        );
        assert_eq!(
            template_problem(&by_id(9001, "pve1"), &vms).as_deref(),
            Some(
                "template 9001 (templateID) does not exist (or the token lacks VM.Audit on /vms/9001)"
            )
        );
        // Through evaluate: the instance is not ready and says why.
        let status = [node("pve1", true)];
        let r = evaluate(
            ORIGIN,
            &inst(&[], Some(by_id(9001, "pve1"))),
            &version(),
            &status,
            Some(&vms),
        );
        assert!(!r.ready);
        assert!(r.message.unwrap().ends_with(
            "template 9001 (templateID) does not exist (or the token lacks VM.Audit on /vms/9001)"
        ));
    }

    #[test]
    fn template_by_selector() {
        let sel = |tags: &[&str], policy: Option<MatchPolicy>| TemplateSource {
            source_node: None,
            template_id: None,
            template_selector: Some(TemplateSelector {
                match_tags: tags.iter().map(|s| s.to_string()).collect(),
                match_policy: policy,
            }),
        };
        let vms = [
            vm(9000, "pve1", true, "capmox;ubuntu-24.04"),
            vm(9001, "pve2", true, "other"),
            vm(105, "pve1", false, "capmox"),
        ];
        assert_eq!(
            template_problem(&sel(&["Ubuntu-24.04", "capmox"], None), &vms),
            None
        );
        assert_eq!(
            template_problem(&sel(&["capmox"], None), &vms).as_deref(),
            Some(
                "no template matches templateSelector tags [capmox] (matchPolicy exact); templates: 9000 (vm9000) [capmox, ubuntu-24.04], 9001 (vm9001) [other]"
            )
        );
        assert_eq!(
            template_problem(&sel(&["capmox"], Some(MatchPolicy::UniqueSubset)), &vms),
            None
        );
        assert_eq!(
            template_problem(&sel(&["capmox"], Some(MatchPolicy::BestSubset)), &vms),
            None
        );
        assert_eq!(
            template_problem(&sel(&["debian"], Some(MatchPolicy::BestSubset)), &[]).as_deref(),
            Some(
                "no template matches templateSelector tags [debian] (matchPolicy bestSubset); templates: none"
            )
        );
    }

    fn ctx() -> Box<CallContext> {
        Box::new(CallContext {
            instance: "dc-a".into(),
            method: "GET",
            path: "/version".into(),
        })
    }

    #[test]
    fn errors_have_distinct_messages() {
        let (m401, c) = describe_pve(
            &PveError::Unauthorized {
                ctx: ctx(),
                message: "authentication failure".into(),
            },
            ORIGIN,
        );
        assert_eq!(c, CredentialState::Invalid);
        assert_eq!(
            m401,
            "authentication failed at https://pve-a.example:8006 (HTTP 401): the token id or secret in the credentials Secret is wrong, or the token was removed or expired"
        );
        let (m403, c) = describe_pve(
            &PveError::PermissionDenied {
                ctx: ctx(),
                path: Some("/".into()),
                privileges: vec!["Sys.Audit".into()],
                message: "Permission check failed (/, Sys.Audit)".into(),
            },
            ORIGIN,
        );
        assert_eq!(c, CredentialState::Invalid);
        assert_eq!(
            m403,
            "permission denied at https://pve-a.example:8006 (HTTP 403): the API token lacks Sys.Audit on /; grant it to the token (with privilege separation, to the token itself)"
        );
        let (mtls, c) = describe_pve(
            &PveError::Tls {
                instance: "dc-a".into(),
                url: ORIGIN.into(),
                message: "invalid peer certificate: UnknownIssuer".into(),
            },
            ORIGIN,
        );
        assert_eq!(c, CredentialState::Invalid);
        assert_eq!(
            mtls,
            "TLS verification of https://pve-a.example:8006 failed: invalid peer certificate: UnknownIssuer; put the cluster's CA certificate into root_ca of the credentials Secret (or pin the certificate with fingerprint)"
        );
        let (mnet, c) = describe_pve(
            &PveError::Transient {
                ctx: ctx(),
                cause: TransientCause::ConnectFailed,
                message: "connection refused".into(),
            },
            ORIGIN,
        );
        assert_eq!(c, CredentialState::Unverified);
        assert_eq!(
            mnet,
            "cannot reach https://pve-a.example:8006: connection refused"
        );
        let (mcred, c) = describe_error(
            &Error::Credentials {
                instance: "dc-a".into(),
                message: "Secret wl1/pve-a not found".into(),
            },
            None,
        );
        assert_eq!(c, CredentialState::Invalid);
        assert_eq!(mcred, "Secret wl1/pve-a not found");
        let all = [m401, m403, mtls, mnet, mcred];
        let distinct: BTreeSet<&String> = all.iter().collect();
        assert_eq!(distinct.len(), all.len());
    }
}
