use pve_client::{CallContext, PveError, TransientCause};

use super::*;
use crate::api::{InstanceSpec, MatchPolicy, SecretRef, TemplateSelector, TemplateSource};
use crate::error::Error;
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
            missing_privileges: Vec::new(),
            pool_problem: None,
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
        Some("https://pve-a.example:8006: no allowed node online (allowed: pve2; online: pve1)")
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
