use std::collections::BTreeMap;

use super::*;
use crate::api::validation::{cluster_warnings, validate_cluster};
use crate::api::{ClusterSettings, InstanceSpec, SecretRef};
use crate::capi::core::Endpoint;
use crate::events::EventKind;
use crate::reasons::Reason;

fn ts(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).unwrap()
}

fn inst(name: &str, control_plane: bool) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        credentials_ref: SecretRef {
            name: format!("{name}-credentials"),
            namespace: None,
        },
        control_plane: (!control_plane).then_some(false),
        ..InstanceSpec::default()
    }
}

/// dc-a and dc-b take control-plane machines, dc-c does not.
fn spec(mode: ClusterMode) -> ProxmoxClusterSpec {
    ProxmoxClusterSpec {
        control_plane_endpoint: Some(ApiEndpoint {
            host: "10.0.0.5".into(),
            port: 6443,
        }),
        settings: Some(ClusterSettings {
            mode: Some(mode),
            instances: vec![inst("dc-a", true), inst("dc-b", true), inst("dc-c", false)],
        }),
        ..ProxmoxClusterSpec::default()
    }
}

fn ok(nodes: &[&str]) -> ProbeResult {
    ProbeResult {
        ready: true,
        credentials: CredentialState::Valid,
        version: Some("8.4.1".into()),
        nodes: nodes.iter().map(|s| s.to_string()).collect(),
        message: None,
        identity: None,
        missing_privileges: Vec::new(),
        pool_problem: None,
        retry: None,
    }
}

const M401: &str = "authentication failed at https://dc-b:8006 (HTTP 401): check the token";
const MNET: &str = "cannot reach https://dc-c:8006: connection refused";

fn bad401() -> ProbeResult {
    ProbeResult::failed(CredentialState::Invalid, M401)
}

fn unreachable() -> ProbeResult {
    ProbeResult::failed(CredentialState::Unverified, MNET)
}

/// `p` as the probe cache records it after `failures` consecutive failed
/// probes, the next one due at 1,000,000 s.
fn failing(mut p: ProbeResult, failures: u32) -> ProbeResult {
    p.retry = Some(crate::cluster::probe::ProbeRetry {
        failures,
        at: ts(1_000_000),
        after_change: false,
    });
    p
}

fn probes(list: &[(&str, ProbeResult)]) -> BTreeMap<String, ProbeResult> {
    list.iter()
        .map(|(n, p)| (n.to_string(), p.clone()))
        .collect()
}

struct Case {
    spec: ProxmoxClusterSpec,
    previous: ProxmoxClusterStatus,
    probes: BTreeMap<String, ProbeResult>,
    machines: MachineCounts,
    cluster_endpoint: Option<Endpoint>,
    now: i64,
}

impl Case {
    fn new(spec: ProxmoxClusterSpec, probes: BTreeMap<String, ProbeResult>) -> Case {
        Case {
            spec,
            previous: ProxmoxClusterStatus::default(),
            probes,
            machines: MachineCounts::default(),
            cluster_endpoint: None,
            now: 1000,
        }
    }

    fn run(&self) -> Decision {
        let validation = validate_cluster(&self.spec);
        let warnings = cluster_warnings(&self.spec);
        decide(&Inputs {
            spec: &self.spec,
            generation: Some(3),
            previous: &self.previous,
            validation: &validation,
            warnings: &warnings,
            cluster_endpoint: self.cluster_endpoint.as_ref(),
            endpoint_claim: None,
            endpoint_wait: None,
            probes: &self.probes,
            machines: &self.machines,
            ip_pools: &[],
            now: ts(self.now),
        })
    }
}

fn cond<'a>(st: &'a ProxmoxClusterStatus, t: &str) -> (&'a str, &'a str, &'a str) {
    let c = conditions::get(&st.conditions, t).unwrap_or_else(|| panic!("no {t} condition"));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

fn fd_names(st: &ProxmoxClusterStatus) -> Vec<&str> {
    st.failure_domains.iter().map(|f| f.name.as_str()).collect()
}

fn provisioned(st: &ProxmoxClusterStatus) -> bool {
    st.initialization.as_ref().and_then(|i| i.provisioned) == Some(true)
}

fn reasons(d: &Decision) -> Vec<&str> {
    d.events.iter().map(|e| e.reason.code()).collect()
}

#[test]
fn multi_all_healthy_publishes_every_instance() {
    let d = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1", "a2"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run();
    let st = &d.status;
    assert_eq!(fd_names(st), vec!["dc-a", "dc-b", "dc-c"]);
    assert_eq!(
        st.failure_domains[0],
        FailureDomain {
            name: "dc-a".into(),
            control_plane: Some(true),
            attributes: BTreeMap::from([
                ("nodes".to_string(), "a1,a2".to_string()),
                ("pveVersion".to_string(), "8.4.1".to_string()),
            ]),
        }
    );
    assert_eq!(st.failure_domains[2].control_plane, Some(false));
    assert_eq!(cond(st, READY), ("True", "Ready", ""));
    assert_eq!(cond(st, CREDENTIALS_READY), ("True", "Ready", ""));
    assert_eq!(cond(st, INSTANCES_READY), ("True", "Ready", ""));
    assert_eq!(cond(st, PAUSED), ("False", "NotPaused", ""));
    assert!(provisioned(st));
    assert_eq!(st.instances_ready.as_deref(), Some("3/3"));
    assert_eq!(st.observed_generation, Some(3));
    assert!(st.instances.iter().all(|i| i.selected.is_none()));
    assert_eq!(
        reasons(&d),
        vec![
            "InstanceReady",
            "InstanceReady",
            "InstanceReady",
            "FailureDomainsChanged",
            "Provisioned"
        ]
    );
    assert_eq!(
        d.events[0].reason.message(),
        "instance dc-a ready (Proxmox VE 8.4.1, nodes: a1, a2)"
    );
    assert_eq!(
        d.events[3].reason.message(),
        "failure domains: dc-a, dc-b, dc-c (was: none)"
    );
    assert_eq!(
        d.events[4].reason.message(),
        "infrastructure provisioned; failure domains: dc-a, dc-b, dc-c"
    );
}

#[test]
fn multi_broken_instance_disappears_and_comes_back() {
    let healthy = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run()
    .status;
    let mut c = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", bad401()),
            // Past the hold (`hold::HOLD_FAILURES`): an outage.
            ("dc-c", failing(unreachable(), 3)),
        ]),
    );
    c.previous = healthy.clone();
    c.now = 2000;
    let d = c.run();
    let st = &d.status;
    assert_eq!(fd_names(st), vec!["dc-a"]);
    assert_eq!(
        cond(st, READY),
        (
            "True",
            "Degraded",
            "1 of 3 instances ready; dc-b: authentication failed at https://dc-b:8006 (HTTP 401): check the token; dc-c: cannot reach https://dc-c:8006: connection refused; probe 3 failed; next probe at 1970-01-12T13:46:40Z"
        )
    );
    assert_eq!(
        cond(st, CREDENTIALS_READY),
        (
            "False",
            "CredentialsInvalid",
            "dc-b: authentication failed at https://dc-b:8006 (HTTP 401): check the token"
        )
    );
    assert_eq!(cond(st, INSTANCES_READY).0, "False");
    assert_eq!(cond(st, INSTANCES_READY).1, "InstancesUnavailable");
    let b = st.instances.iter().find(|i| i.name == "dc-b").unwrap();
    assert!(!b.ready);
    assert_eq!(b.message.as_deref(), Some(M401));
    assert!(provisioned(st));
    assert_eq!(st.instances_ready.as_deref(), Some("1/3"));
    assert_eq!(
        d.events,
        vec![
            Note::warning(Reason::InstanceUnavailable(format!(
                "instance dc-b: {M401}"
            )))
            .about("dc-b"),
            Note::warning(Reason::InstanceUnavailable(format!(
                "instance dc-c: {MNET}"
            )))
            .about("dc-c"),
            Note::normal(Reason::FailureDomainsChanged(
                "failure domains: dc-a (was: dc-a, dc-b, dc-c)".to_string()
            )),
        ]
    );
    // Ready stayed True: its transition time did not move; CredentialsReady's did.
    let t = |s: &ProxmoxClusterStatus, ty: &str| {
        conditions::get(&s.conditions, ty)
            .unwrap()
            .last_transition_time
            .clone()
    };
    assert_eq!(t(st, READY), t(&healthy, READY));
    assert_ne!(t(st, CREDENTIALS_READY), t(&healthy, CREDENTIALS_READY));

    // Only dc-c unreachable: credentials are unverified, not invalid.
    let mut c2 = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", unreachable()),
        ]),
    );
    c2.previous = st.clone();
    let d2 = c2.run();
    assert_eq!(
        cond(&d2.status, CREDENTIALS_READY),
        (
            "Unknown",
            "CredentialsUnverified",
            "not verified (instance unreachable): dc-c"
        )
    );
    assert_eq!(fd_names(&d2.status), vec!["dc-a", "dc-b"]);

    // Repaired.
    let mut c3 = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    );
    c3.previous = d2.status.clone();
    let d3 = c3.run();
    assert_eq!(fd_names(&d3.status), vec!["dc-a", "dc-b", "dc-c"]);
    assert_eq!(cond(&d3.status, READY), ("True", "Ready", ""));
    assert_eq!(reasons(&d3), vec!["InstanceReady", "FailureDomainsChanged"]);
}

#[test]
fn multi_needs_a_control_plane_instance_to_provision() {
    let d = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", bad401()),
            ("dc-b", unreachable()),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run();
    let st = &d.status;
    assert_eq!(fd_names(st), vec!["dc-c"]);
    assert!(!provisioned(st));
    assert!(st.initialization.is_none());
    let (s, r, m) = cond(st, READY);
    assert_eq!((s, r), ("False", "InstancesUnavailable"));
    assert!(
        m.starts_with(
            "no healthy instance eligible for control-plane machines; dc-a: authentication failed"
        ),
        "{m}"
    );
    assert!(!reasons(&d).contains(&"Provisioned"));
}

#[test]
fn provisioned_never_flips_back() {
    let mut c = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", bad401()),
            ("dc-b", bad401()),
            ("dc-c", unreachable()),
        ]),
    );
    c.previous.initialization = Some(Initialization {
        provisioned: Some(true),
    });
    let d = c.run();
    assert!(provisioned(&d.status));
    assert!(d.status.failure_domains.is_empty());
    assert_eq!(cond(&d.status, READY).0, "False");
}

#[test]
fn default_mode_uses_the_first_instance_only() {
    let d = Case::new(spec(ClusterMode::Default), probes(&[("dc-a", ok(&["a1"]))])).run();
    assert_eq!(d.status.instances.len(), 1);
    assert_eq!(d.status.instances[0].name, "dc-a");
    assert_eq!(fd_names(&d.status), vec!["dc-a"]);
    assert!(provisioned(&d.status));
    // Unhealthy: the failure domain stays (it is the only one), Ready says why.
    let mut c = Case::new(
        spec(ClusterMode::Default),
        probes(&[("dc-a", failing(unreachable(), 3))]),
    );
    c.previous = d.status.clone();
    let d2 = c.run();
    assert_eq!(fd_names(&d2.status), vec!["dc-a"]);
    assert_eq!(
        d2.status.failure_domains[0]
            .attributes
            .get("pveVersion")
            .map(String::as_str),
        Some("8.4.1")
    );
    assert_eq!(
        cond(&d2.status, READY),
        (
            "False",
            "InstancesUnavailable",
            "dc-a: cannot reach https://dc-c:8006: connection refused; probe 3 failed; next probe at 1970-01-12T13:46:40Z; warning: spec.settings.mode: settings.mode Default uses only the first instance (\"dc-a\"); \"dc-b\", \"dc-c\" are never used: set settings.mode to MultiInstance to spread machines over them, or remove them"
        )
    );
    assert!(provisioned(&d2.status));
}

#[test]
fn legacy_default_mode_uses_the_implicit_instance() {
    let s = ProxmoxClusterSpec {
        control_plane_endpoint: Some(ApiEndpoint {
            host: "10.0.0.5".into(),
            port: 6443,
        }),
        credentials_ref: Some(SecretRef {
            name: "pve".into(),
            namespace: None,
        }),
        ..ProxmoxClusterSpec::default()
    };
    let d = Case::new(s, probes(&[("default", ok(&["pve1"]))])).run();
    assert_eq!(fd_names(&d.status), vec!["default"]);
    assert_eq!(d.status.failure_domains[0].control_plane, Some(true));
    assert_eq!(d.status.instances[0].name, "default");
    assert!(provisioned(&d.status));
}

#[test]
fn single_instance_picks_first_healthy_control_plane_instance() {
    let d = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", unreachable()),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run();
    let st = &d.status;
    let selected: Vec<&str> = st
        .instances
        .iter()
        .filter(|i| i.selected == Some(true))
        .map(|i| i.name.as_str())
        .collect();
    assert_eq!(selected, vec!["dc-b"]);
    assert_eq!(fd_names(st), vec!["dc-b"]);
    assert_eq!(st.instances.len(), 3);
    assert!(provisioned(st));
    assert_eq!(cond(st, READY).1, "Degraded");
    assert!(
        d.events
            .contains(&Note::normal(Reason::SingleInstanceSelected(
                "SingleInstance mode: every machine of this cluster goes to instance dc-b"
                    .to_string()
            )))
    );
    // Only a non-control-plane instance healthy: it is chosen.
    let d = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", unreachable()),
            ("dc-b", bad401()),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run();
    assert_eq!(fd_names(&d.status), vec!["dc-c"]);
}

#[test]
fn single_instance_choice_is_stable() {
    let all_ok = probes(&[
        ("dc-a", ok(&["a1"])),
        ("dc-b", ok(&["b1"])),
        ("dc-c", ok(&["c1"])),
    ]);
    // Recorded choice dc-c stays although dc-a is healthy and first.
    let mut c = Case::new(spec(ClusterMode::SingleInstance), all_ok.clone());
    c.previous.instances = vec![InstanceStatus {
        name: "dc-c".into(),
        ready: true,
        selected: Some(true),
        ..InstanceStatus::default()
    }];
    let d = c.run();
    assert_eq!(fd_names(&d.status), vec!["dc-c"]);
    assert!(!reasons(&d).contains(&"InstanceSelected"));
    // Reordering / extending the instance list does not move it either.
    let mut s = spec(ClusterMode::SingleInstance);
    if let Some(set) = s.settings.as_mut() {
        set.instances.reverse();
        set.instances.insert(0, inst("dc-d", true));
    }
    let mut c2 = Case::new(
        s,
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
            ("dc-d", ok(&["d1"])),
        ]),
    );
    c2.previous = d.status.clone();
    assert_eq!(fd_names(&c2.run().status), vec!["dc-c"]);
    // Even while the chosen instance is down, the choice stays.
    let mut c3 = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", failing(unreachable(), 3)),
        ]),
    );
    c3.previous = d.status.clone();
    let d3 = c3.run();
    assert_eq!(fd_names(&d3.status), vec!["dc-c"]);
    assert_eq!(cond(&d3.status, READY).0, "False");
}

#[test]
fn single_instance_choice_follows_existing_machines() {
    // Status lost (clusterctl move): machines in dc-b decide.
    let mut c = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    );
    c.machines.by_instance = BTreeMap::from([("dc-b".to_string(), 2)]);
    c.previous.instances = vec![InstanceStatus {
        name: "dc-a".into(),
        ready: true,
        selected: Some(true),
        ..InstanceStatus::default()
    }];
    let d = c.run();
    assert_eq!(fd_names(&d.status), vec!["dc-b"]);
    assert_eq!(d.status.instances[1].machines, 2);
    assert_eq!(d.status.instances[1].selected, Some(true));
    assert_eq!(d.status.instances[0].selected, None);
    // Spread (should not happen): most machines win, with a warning.
    c.machines.by_instance = BTreeMap::from([("dc-a".to_string(), 1), ("dc-c".to_string(), 2)]);
    let d = c.run();
    assert_eq!(fd_names(&d.status), vec!["dc-c"]);
    assert_eq!(
        cond(&d.status, READY),
        (
            "True",
            "Ready",
            "warning: machines of this cluster are in several instances (dc-a: 1, dc-c: 2); SingleInstance uses dc-c"
        )
    );
}

#[test]
fn single_instance_without_healthy_instance_waits() {
    let d = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", unreachable()),
            ("dc-b", bad401()),
            ("dc-c", unreachable()),
        ]),
    )
    .run();
    assert!(d.status.failure_domains.is_empty());
    assert!(d.status.instances.iter().all(|i| i.selected.is_none()));
    let (s, r, m) = cond(&d.status, READY);
    assert_eq!((s, r), ("False", "InstancesUnavailable"));
    assert!(
        m.starts_with("SingleInstance mode: no healthy instance to choose; dc-a: cannot reach"),
        "{m}"
    );
    assert!(!provisioned(&d.status));
}

#[test]
fn invalid_spec_changes_only_conditions() {
    let good = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run()
    .status;
    let mut s = spec(ClusterMode::MultiInstance);
    if let Some(set) = s.settings.as_mut() {
        set.instances[1].name = "dc-a".into();
    }
    let mut c = Case::new(s, BTreeMap::new());
    c.previous = good.clone();
    let d = c.run();
    assert_eq!(d.status.failure_domains, good.failure_domains);
    assert_eq!(d.status.instances, good.instances);
    assert_eq!(d.status.initialization, good.initialization);
    assert_eq!(
        cond(&d.status, READY),
        (
            "False",
            "InvalidSpec",
            "spec.settings.instances[1].name: duplicate instance name \"dc-a\": give each instance its own name; fix the spec (no Proxmox call is made until it is valid)"
        )
    );
    assert_eq!(cond(&d.status, CREDENTIALS_READY).0, "Unknown");
    assert_eq!(cond(&d.status, INSTANCES_READY).0, "Unknown");
    assert_eq!(reasons(&d), vec!["InvalidSpec"]);
    assert_eq!(d.events[0].kind, EventKind::Warning);
    // Same problem again: no new event, no change.
    c.previous = d.status.clone();
    let d2 = c.run();
    assert!(d2.events.is_empty());
    assert_eq!(d2.status, d.status);
}

#[test]
fn externally_managed_control_plane_waits_for_the_cluster_endpoint() {
    let mut s = spec(ClusterMode::MultiInstance);
    s.control_plane_endpoint = None;
    s.external_managed_control_plane = Some(true);
    let all_ok = probes(&[
        ("dc-a", ok(&["a1"])),
        ("dc-b", ok(&["b1"])),
        ("dc-c", ok(&["c1"])),
    ]);
    let mut c = Case::new(s, all_ok);
    let d = c.run();
    assert_eq!(d.copy_endpoint, None);
    assert!(!provisioned(&d.status));
    assert_eq!(
        cond(&d.status, READY),
        (
            "False",
            "WaitingForControlPlaneEndpoint",
            "spec.controlPlaneEndpoint is not set and spec.externalManagedControlPlane is true: waiting for the control plane provider to set Cluster.spec.controlPlaneEndpoint"
        )
    );
    // The failure domains are published meanwhile.
    assert_eq!(fd_names(&d.status), vec!["dc-a", "dc-b", "dc-c"]);
    // An empty endpoint on the Cluster is no endpoint.
    c.cluster_endpoint = Some(Endpoint {
        host: String::new(),
        port: 0,
    });
    assert_eq!(c.run().copy_endpoint, None);
    c.cluster_endpoint = Some(Endpoint {
        host: "cp.example".into(),
        port: 443,
    });
    let d = c.run();
    assert_eq!(
        d.copy_endpoint,
        Some(ApiEndpoint {
            host: "cp.example".into(),
            port: 443
        })
    );
    assert!(provisioned(&d.status));
    assert_eq!(cond(&d.status, READY).0, "True");
}

#[test]
fn machine_counts_and_orphans() {
    let mut c = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    );
    c.machines = MachineCounts {
        by_instance: BTreeMap::from([
            ("dc-a".to_string(), 3),
            ("dc-c".to_string(), 1),
            ("dc-z".to_string(), 2),
        ]),
        unplaced: 1,
        names: vec![],
        ..MachineCounts::default()
    };
    let d = c.run();
    let counts: Vec<(&str, u32)> = d
        .status
        .instances
        .iter()
        .map(|i| (i.name.as_str(), i.machines))
        .collect();
    assert_eq!(counts, vec![("dc-a", 3), ("dc-b", 0), ("dc-c", 1)]);
    assert_eq!(c.machines.total(), 7);
    assert_eq!(
        cond(&d.status, READY),
        (
            "True",
            "Ready",
            "warning: machines are placed in instances no longer listed: dc-z (2)"
        )
    );
}

#[test]
fn repeated_decisions_are_stable() {
    let mut c = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", bad401()),
            ("dc-c", ok(&["c1"])),
        ]),
    );
    let first = c.run();
    c.previous = first.status.clone();
    c.now = 5000;
    let second = c.run();
    assert_eq!(second.status, first.status);
    assert!(second.events.is_empty(), "{:?}", second.events);
}

#[test]
fn warnings_are_appended_to_ready() {
    let mut s = spec(ClusterMode::MultiInstance);
    s.allowed_nodes = vec!["pve1".into()];
    let d = Case::new(
        s,
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run();
    assert_eq!(
        cond(&d.status, READY),
        (
            "True",
            "Ready",
            "warning: spec.allowedNodes: ignored because spec.settings.instances is set; use settings.instances[].nodes"
        )
    );
}

#[test]
fn deleting_paused_and_waiting() {
    let prev = ProxmoxClusterStatus::default();
    let m = MachineCounts {
        by_instance: BTreeMap::from([("dc-a".to_string(), 6)]),
        unplaced: 1,
        names: (1..=7).map(|i| format!("wl1-md-{i}")).collect(),
        ..MachineCounts::default()
    };
    let st = decide_deleting(&prev, Some(2), ts(10), &m);
    assert_eq!(
        cond(&st, READY),
        (
            "False",
            "WaitingForMachines",
            "deleting: waiting for 7 ProxmoxMachines of this cluster to be deleted (wl1-md-1, wl1-md-2, wl1-md-3, wl1-md-4, wl1-md-5, … 2 more)"
        )
    );
    let one = MachineCounts {
        by_instance: BTreeMap::from([("dc-a".to_string(), 1)]),
        unplaced: 0,
        names: vec!["wl1-cp-x".into()],
        ..MachineCounts::default()
    };
    assert_eq!(
        cond(&decide_deleting(&prev, Some(2), ts(10), &one), READY).2,
        "deleting: waiting for 1 ProxmoxMachine of this cluster to be deleted (wl1-cp-x)"
    );
    let st = decide_deleting(&prev, Some(2), ts(10), &MachineCounts::default());
    assert_eq!(cond(&st, READY).1, "Deleting");

    let good = Case::new(
        spec(ClusterMode::MultiInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run()
    .status;
    let paused = decide_paused(&good, Some(3), ts(20));
    assert_eq!(cond(&paused, PAUSED).0, "True");
    assert_eq!(cond(&paused, PAUSED).1, "Paused");
    let mut without_paused = paused.clone();
    without_paused.conditions.retain(|c| c.type_ != PAUSED);
    let mut good_without = good.clone();
    good_without.conditions.retain(|c| c.type_ != PAUSED);
    assert_eq!(without_paused, good_without);

    let st = decide_waiting_for_owner(&prev, Some(1), ts(5), "waiting for the owner Cluster");
    assert_eq!(
        cond(&st, READY),
        (
            "False",
            "WaitingForCluster",
            "waiting for the owner Cluster"
        )
    );
}

/// One failed probe is not an outage (`hold`): a ready instance keeps its
/// failure domain, nodes and version through two consecutive failed probes,
/// and the third removes it; failed credentials are never held.
#[test]
fn one_failed_probe_keeps_the_failure_domain_an_outage_removes_it() {
    let all_ok = probes(&[
        ("dc-a", ok(&["a1"])),
        ("dc-b", ok(&["b1", "b2"])),
        ("dc-c", ok(&["c1"])),
    ]);
    let healthy = Case::new(spec(ClusterMode::MultiInstance), all_ok.clone())
        .run()
        .status;
    let e503 = "Proxmox at https://dc-b:8006 answered 503: service unavailable";
    let step = |previous: &ProxmoxClusterStatus, b: ProbeResult| {
        let mut c = Case::new(
            spec(ClusterMode::MultiInstance),
            probes(&[("dc-a", ok(&["a1"])), ("dc-b", b), ("dc-c", ok(&["c1"]))]),
        );
        c.previous = previous.clone();
        c.now = 2000;
        c.run()
    };
    let transient = || ProbeResult::failed(CredentialState::Unverified, e503);

    // Failed probes 1 and 2: held.
    let mut prev = healthy.clone();
    for n in 1..=2 {
        let d = step(&prev, failing(transient(), n));
        let st = &d.status;
        assert_eq!(fd_names(st), vec!["dc-a", "dc-b", "dc-c"], "probe {n}");
        assert_eq!(st.failure_domains, healthy.failure_domains, "probe {n}");
        let b = st.instances.iter().find(|i| i.name == "dc-b").unwrap();
        assert!(b.ready, "probe {n}");
        assert_eq!(b.nodes, vec!["b1", "b2"]);
        assert_eq!(b.version.as_deref(), Some("8.4.1"));
        let held = format!(
            "probe {n} of 3 failed: {e503}; the instance stays ready until 3 consecutive probes fail; next probe at 1970-01-12T13:46:40Z"
        );
        assert_eq!(b.message.as_deref(), Some(held.as_str()));
        assert_eq!(
            cond(st, INSTANCES_READY),
            ("True", "Ready", format!("dc-b: {held}").as_str())
        );
        assert_eq!(cond(st, READY), ("True", "Ready", ""));
        assert_eq!(cond(st, CREDENTIALS_READY).0, "True");
        assert_eq!(st.instances_ready.as_deref(), Some("3/3"));
        assert!(d.events.is_empty(), "probe {n}: {:?}", d.events);
        prev = d.status;
    }
    // Failed probe 3: an outage.
    let d = step(&prev, failing(transient(), 3));
    assert_eq!(fd_names(&d.status), vec!["dc-a", "dc-c"]);
    let b = d
        .status
        .instances
        .iter()
        .find(|i| i.name == "dc-b")
        .unwrap();
    assert!(!b.ready);
    assert_eq!(b.message.as_deref(), Some(e503));
    assert_eq!(cond(&d.status, READY).1, "Degraded");
    assert_eq!(
        reasons(&d),
        vec!["InstanceUnavailable", "FailureDomainsChanged"]
    );
    // Unready now: a later first failure (a restarted controller's count)
    // does not bring it back.
    let d2 = step(&d.status, failing(transient(), 1));
    assert_eq!(fd_names(&d2.status), vec!["dc-a", "dc-c"]);
    // A good probe does.
    let mut c = Case::new(spec(ClusterMode::MultiInstance), all_ok);
    c.previous = d2.status.clone();
    assert_eq!(fd_names(&c.run().status), vec!["dc-a", "dc-b", "dc-c"]);

    // Failed credentials: dropped at the first probe.
    let d = step(&healthy, failing(bad401(), 1));
    assert_eq!(fd_names(&d.status), vec!["dc-a", "dc-c"]);
    assert_eq!(cond(&d.status, CREDENTIALS_READY).1, "CredentialsInvalid");
}

/// SingleInstance: a held instance stays the chosen one.
#[test]
fn single_instance_choice_survives_one_failed_probe() {
    let first = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", ok(&["a1"])),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    )
    .run()
    .status;
    assert_eq!(fd_names(&first), vec!["dc-a"]);
    let mut c = Case::new(
        spec(ClusterMode::SingleInstance),
        probes(&[
            ("dc-a", failing(unreachable(), 1)),
            ("dc-b", ok(&["b1"])),
            ("dc-c", ok(&["c1"])),
        ]),
    );
    c.previous = first.clone();
    let d = c.run();
    assert_eq!(fd_names(&d.status), vec!["dc-a"]);
    assert_eq!(d.status.failure_domains, first.failure_domains);
    assert!(d.events.is_empty(), "{:?}", d.events);
}
