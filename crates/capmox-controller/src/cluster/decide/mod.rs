//! The pure decision core of the ProxmoxCluster reconciler: from (spec,
//! validation result, the owner Cluster's endpoint, per-instance probe
//! results, machine counts, applied IP pools, previous status, now) to the
//! desired status — conditions, `status.instances`, failure domains, the
//! SingleInstance choice, `initialization.provisioned` — plus the events an
//! operator cares about. No I/O; the executor (`reconcile.rs`) gathers the
//! inputs and writes the outputs.
//!
//! Invariants:
//! - `initialization.provisioned` never flips back once true (CAPI contract
//!   v1beta2; later trouble shows in conditions).
//! - The SingleInstance choice never silently moves: machines already placed
//!   (their `spec.instance`) decide first — this also re-derives the choice
//!   after `clusterctl move`, which drops status — then the recorded choice
//!   while its instance is still listed, then the first healthy instance in
//!   list order (control-plane eligible first).
//! - Failure domains are sorted by name and carry `controlPlane` explicitly,
//!   so repeated reconciles produce identical status (no write loops).
//! - An invalid spec changes only the conditions: instance health, failure
//!   domains and the choice stay as they were, and no Proxmox call is made.
//!
//! | module | owns |
//! |---|---|
//! | this file | [`decide`]: status, conditions, failure domains, events of a normal reconcile |
//! | [`counts`] | the inputs counted elsewhere ([`MachineCounts`]) and the events out ([`Note`]) |
//! | [`hold`] | one failed probe is not an outage: how long a ready instance stays ready |
//! | [`single`] | which instances are probed, the SingleInstance choice |
//! | [`lifecycle`] | the status while paused, waiting for the owner, deleting |

mod counts;
pub mod hold;
mod lifecycle;
mod single;

pub use counts::{MachineCounts, Note};
pub use lifecycle::{decide_deleting, decide_paused, decide_waiting_for_owner};
use single::previous_selected;
pub use single::{instances_to_probe, select_single};

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;

use super::probe::{CredentialState, ProbeResult};
use crate::api::validation::{FieldError, summarize};
use crate::api::{
    ApiEndpoint, ClusterMode, EndpointClaimStatus, FailureDomain, Initialization, InstanceStatus,
    IpPoolStatus, ProxmoxClusterSpec, ProxmoxClusterStatus,
};
use crate::capi::core::Endpoint;
use crate::conditions::{
    self, CREDENTIALS_READY, Desired, INSTANCES_READY, PAUSED, POOLS_READY, PRIVILEGES_READY,
    READY, Status,
};
use crate::instances::{EffectiveInstance, effective_instances};
use crate::reasons::Reason;

/// Everything the decision needs.
#[derive(Clone, Debug)]
pub struct Inputs<'a> {
    /// The spec.
    pub spec: &'a ProxmoxClusterSpec,
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// The current status (default when none).
    pub previous: &'a ProxmoxClusterStatus,
    /// Validation problems (`validate_cluster`); non-empty = invalid.
    pub validation: &'a [FieldError],
    /// Non-blocking spec warnings (`cluster_warnings`).
    pub warnings: &'a [FieldError],
    /// The owner Cluster's `spec.controlPlaneEndpoint`.
    pub cluster_endpoint: Option<&'a Endpoint>,
    /// `status.controlPlaneEndpointClaim` (`super::endpoint`).
    pub endpoint_claim: Option<&'a EndpointClaimStatus>,
    /// Why the endpoint's claim has no address yet.
    pub endpoint_wait: Option<&'a str>,
    /// Probe result per instance name (the instances of [`instances_to_probe`]).
    pub probes: &'a BTreeMap<String, ProbeResult>,
    /// The cluster's machines.
    pub machines: &'a MachineCounts,
    /// The IP pools that exist for this cluster.
    pub ip_pools: &'a [IpPoolStatus],
    /// Now (condition transition times).
    pub now: Timestamp,
}

/// What the reconcile should make true.
#[derive(Clone, Debug, PartialEq)]
pub struct Decision {
    /// The status to write (when it differs from the previous one).
    pub status: ProxmoxClusterStatus,
    /// Copy this endpoint into `spec.controlPlaneEndpoint` (externally
    /// managed control plane whose Cluster has an endpoint now).
    pub copy_endpoint: Option<ApiEndpoint>,
    /// Events to publish.
    pub events: Vec<Note>,
}

fn set(st: &mut ProxmoxClusterStatus, d: Desired, generation: Option<i64>, now: Timestamp) {
    conditions::set(&mut st.conditions, &d, generation, now);
}

fn endpoint_usable(e: &Endpoint) -> bool {
    !e.host.trim().is_empty() && (1..=65535).contains(&e.port)
}

fn with_warnings(message: String, warnings: &[String]) -> String {
    if warnings.is_empty() {
        message
    } else if message.is_empty() {
        format!("warning: {}", warnings.join("; "))
    } else {
        format!("{message}; warning: {}", warnings.join("; "))
    }
}

/// The desired state after a normal (not deleting, not paused, owner
/// present) reconcile.
pub fn decide(inp: &Inputs<'_>) -> Decision {
    let gen_ = inp.generation;
    let now = inp.now;
    let prev = inp.previous;
    let mut st = prev.clone();
    st.observed_generation = gen_;
    let mut events = Vec::new();
    set(
        &mut st,
        Desired::new(PAUSED, Status::False, &Reason::NotPaused),
        gen_,
        now,
    );

    if !inp.validation.is_empty() {
        let msg = format!(
            "{}; fix the spec (no Proxmox call is made until it is valid)",
            summarize(inp.validation)
        );
        let was = conditions::get(&prev.conditions, READY);
        let invalid = Reason::InvalidSpec(msg.clone());
        if was.is_none_or(|c| c.reason != invalid.code() || c.message != msg) {
            events.push(Note::warning(invalid));
        }
        set(
            &mut st,
            Desired::new(READY, Status::False, &Reason::InvalidSpec(msg)),
            gen_,
            now,
        );
        let unknown = "not checked: the spec is invalid";
        set(
            &mut st,
            Desired::new(
                CREDENTIALS_READY,
                Status::Unknown,
                &Reason::InvalidSpec(unknown.into()),
            ),
            gen_,
            now,
        );
        set(
            &mut st,
            Desired::new(
                INSTANCES_READY,
                Status::Unknown,
                &Reason::InvalidSpec(unknown.into()),
            ),
            gen_,
            now,
        );
        return Decision {
            status: st,
            copy_endpoint: None,
            events,
        };
    }

    // Endpoint: ours, or copied from the Cluster when externally managed.
    let mut copy_endpoint = None;
    let endpoint_ok = match &inp.spec.control_plane_endpoint {
        Some(_) => true,
        None => match inp.cluster_endpoint.filter(|e| endpoint_usable(e)) {
            Some(e) => {
                let ep = ApiEndpoint {
                    host: e.host.clone(),
                    port: e.port,
                };
                events.push(Note::normal(Reason::ControlPlaneEndpointSet(format!(
                        "spec.controlPlaneEndpoint set to {}:{} from the Cluster (externally managed control plane)",
                        ep.host, ep.port
                    ))));
                copy_endpoint = Some(ep);
                true
            }
            None => false,
        },
    };

    let mode = inp.spec.mode();
    let probed = instances_to_probe(inp.spec);
    // A ready instance whose probe failed stays ready for a bounded number
    // of probes (`hold`): from here on, its last known good state stands in
    // for the failed probe.
    let (probes, held) = held_probes(inp.probes, prev);
    let (selected, spread_note) = match mode {
        ClusterMode::SingleInstance => {
            select_single(&probed, &probes, inp.machines, previous_selected(prev))
        }
        _ => (None, None),
    };
    if mode == ClusterMode::SingleInstance
        && let Some(s) = &selected
        && previous_selected(prev) != Some(s.as_str())
    {
        events.push(Note::normal(Reason::SingleInstanceSelected(format!(
            "SingleInstance mode: every machine of this cluster goes to instance {s}"
        ))));
    }

    // status.instances
    let not_probed = ProbeResult::failed(CredentialState::Unverified, "not probed yet");
    let probe_of = |name: &str| probes.get(name).unwrap_or(&not_probed);
    st.instances = probed
        .iter()
        .map(|i| {
            let p = probe_of(i.name());
            InstanceStatus {
                name: i.name().to_string(),
                ready: p.ready,
                machines: inp.machines.in_instance(i.name()),
                nodes: p.nodes.clone(),
                version: p.version.clone(),
                message: p.message.clone(),
                selected: (selected.as_deref() == Some(i.name())).then_some(true),
                missing_privileges: p.missing_privileges.clone(),
                pool_problem: p.pool_problem.clone(),
            }
        })
        .collect();
    let ready_count = st.instances.iter().filter(|i| i.ready).count();
    st.instances_ready = Some(format!("{ready_count}/{}", st.instances.len()));

    // Instance transitions → events.
    for i in &st.instances {
        let before = prev.instances.iter().find(|p| p.name == i.name);
        match (before.map(|b| b.ready), i.ready) {
            (Some(true), true) => {}
            (_, true) => events.push(
                Note::normal(Reason::InstanceReady(format!(
                    "instance {} ready (Proxmox VE {}, nodes: {})",
                    i.name,
                    i.version.as_deref().unwrap_or("?"),
                    i.nodes.join(", ")
                )))
                .about(&i.name),
            ),
            (_, false) => {
                if before.is_none_or(|b| b.ready || b.message != i.message) {
                    events.push(
                        Note::warning(Reason::InstanceUnavailable(format!(
                            "instance {}: {}",
                            i.name,
                            i.message.as_deref().unwrap_or("not ready")
                        )))
                        .about(&i.name),
                    );
                }
            }
        }
    }

    // Failure domains.
    let fd = |i: &EffectiveInstance| {
        let p = probe_of(i.name());
        let attributes = if p.ready {
            let mut a = BTreeMap::new();
            if let Some(v) = &p.version {
                a.insert("pveVersion".to_string(), v.clone());
            }
            if !p.nodes.is_empty() {
                a.insert("nodes".to_string(), p.nodes.join(","));
            }
            a
        } else {
            prev.failure_domains
                .iter()
                .find(|f| f.name == i.name())
                .map(|f| f.attributes.clone())
                .unwrap_or_default()
        };
        FailureDomain {
            name: i.name().to_string(),
            control_plane: Some(i.spec.is_control_plane()),
            attributes,
        }
    };
    let mut fds: Vec<FailureDomain> = match mode {
        ClusterMode::MultiInstance => probed
            .iter()
            .filter(|i| probe_of(i.name()).ready)
            .map(fd)
            .collect(),
        ClusterMode::Default => probed.iter().take(1).map(fd).collect(),
        ClusterMode::SingleInstance => probed
            .iter()
            .filter(|i| selected.as_deref() == Some(i.name()))
            .map(fd)
            .collect(),
    };
    fds.sort_by(|a, b| a.name.cmp(&b.name));
    let names = |v: &[FailureDomain]| v.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
    if names(&fds) != names(&prev.failure_domains)
        && !(fds.is_empty() && prev.failure_domains.is_empty())
    {
        events.push(Note::normal(Reason::FailureDomainsChanged(format!(
            "failure domains: {} (was: {})",
            or_none(&names(&fds)),
            or_none(&names(&prev.failure_domains))
        ))));
    }
    st.failure_domains = fds;

    let mut pools = inp.ip_pools.to_vec();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    st.ip_pools = pools;

    // Usable: an instance in use that can take control-plane machines is healthy.
    let ready_of = |name: &str| probe_of(name).ready;
    let usable = match mode {
        ClusterMode::MultiInstance => probed
            .iter()
            .any(|i| i.spec.is_control_plane() && ready_of(i.name())),
        ClusterMode::Default => probed.first().is_some_and(|i| ready_of(i.name())),
        ClusterMode::SingleInstance => selected.as_deref().is_some_and(ready_of),
    };

    // Conditions.
    // A failing instance's entry says when it is probed again.
    let broken: Vec<String> = st
        .instances
        .iter()
        .filter(|i| !i.ready)
        .map(|i| {
            let retry = probe_of(&i.name)
                .retry
                .map(|r| format!("; {}", r.text()))
                .unwrap_or_default();
            format!(
                "{}: {}{retry}",
                i.name,
                i.message.as_deref().unwrap_or("not ready")
            )
        })
        .collect();
    let invalid_creds: Vec<String> = probed
        .iter()
        .filter(|i| probe_of(i.name()).credentials == CredentialState::Invalid)
        .map(|i| {
            format!(
                "{}: {}",
                i.name(),
                probe_of(i.name()).message.as_deref().unwrap_or("invalid")
            )
        })
        .collect();
    let unverified: Vec<&str> = probed
        .iter()
        .filter(|i| probe_of(i.name()).credentials == CredentialState::Unverified)
        .map(EffectiveInstance::name)
        .collect();
    let creds = if !invalid_creds.is_empty() {
        Desired::new(
            CREDENTIALS_READY,
            Status::False,
            &Reason::CredentialsInvalid(invalid_creds.join("; ")),
        )
    } else if !unverified.is_empty() {
        Desired::new(
            CREDENTIALS_READY,
            Status::Unknown,
            &Reason::CredentialsUnverified(format!(
                "not verified (instance unreachable): {}",
                unverified.join(", ")
            )),
        )
    } else {
        Desired::new(
            CREDENTIALS_READY,
            Status::True,
            &Reason::CredentialsValid("".into()),
        )
    };
    set(&mut st, creds, gen_, now);
    let instances_cond = if broken.is_empty() {
        Desired::new(
            INSTANCES_READY,
            Status::True,
            &Reason::InstancesReady(held.join("; ")),
        )
    } else {
        Desired::new(
            INSTANCES_READY,
            Status::False,
            &Reason::InstancesUnavailable(broken.join("; ")),
        )
    };
    set(&mut st, instances_cond, gen_, now);
    let privileges = privileges_condition(&st.instances);
    set(&mut st, privileges, gen_, now);
    let pools = pools_condition(&st.instances);
    set(&mut st, pools, gen_, now);

    let mut warnings: Vec<String> = inp.warnings.iter().map(ToString::to_string).collect();
    if let Some(n) = spread_note {
        warnings.push(n);
    }
    let listed_names: BTreeSet<String> = effective_instances(inp.spec)
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    let orphans: Vec<String> = inp
        .machines
        .by_instance
        .iter()
        .filter(|(name, n)| **n > 0 && !listed_names.contains(*name))
        .map(|(name, n)| format!("{name} ({n})"))
        .collect();
    if !orphans.is_empty() {
        warnings.push(format!(
            "machines are placed in instances no longer listed: {}",
            orphans.join(", ")
        ));
    }

    st.control_plane_endpoint_claim = inp.endpoint_claim.cloned();
    let ready = if !endpoint_ok {
        let why = inp.endpoint_wait.map_or_else(|| "spec.controlPlaneEndpoint is not set and spec.externalManagedControlPlane is true: waiting for the control plane provider to set Cluster.spec.controlPlaneEndpoint".to_string(), str::to_string);
        Desired::new(
            READY,
            Status::False,
            &Reason::WaitingForControlPlaneEndpoint(why),
        )
    } else if !usable {
        let why = match mode {
            ClusterMode::MultiInstance => format!(
                "no healthy instance eligible for control-plane machines; {}",
                broken.join("; ")
            ),
            ClusterMode::SingleInstance if selected.is_none() => format!(
                "SingleInstance mode: no healthy instance to choose; {}",
                broken.join("; ")
            ),
            _ => broken.join("; "),
        };
        Desired::new(
            READY,
            Status::False,
            &Reason::InstancesUnavailable(with_warnings(why, &warnings)),
        )
    } else if !broken.is_empty() {
        Desired::new(
            READY,
            Status::True,
            &Reason::Degraded(with_warnings(
                format!(
                    "{ready_count} of {} instances ready; {}",
                    st.instances.len(),
                    broken.join("; ")
                ),
                &warnings,
            )),
        )
    } else {
        Desired::new(
            READY,
            Status::True,
            &Reason::ClusterReady(with_warnings(String::new(), &warnings)),
        )
    };
    set(&mut st, ready, gen_, now);

    let was_provisioned = prev
        .initialization
        .as_ref()
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    if was_provisioned || (endpoint_ok && usable) {
        st.initialization = Some(Initialization {
            provisioned: Some(true),
        });
        if !was_provisioned {
            events.push(Note::normal(Reason::Provisioned(format!(
                "infrastructure provisioned; failure domains: {}",
                or_none(&names(&st.failure_domains))
            ))));
        }
    }

    Decision {
        status: st,
        copy_endpoint,
        events,
    }
}

/// The probes as the status takes them, and the held instances' messages:
/// a held instance ([`hold::health`]) is ready with its last known good
/// state (the previous status' nodes, version, missing privileges and pool problem, valid
/// credentials) and says in its message why and for how long.
fn held_probes(
    probes: &BTreeMap<String, ProbeResult>,
    prev: &ProxmoxClusterStatus,
) -> (BTreeMap<String, ProbeResult>, Vec<String>) {
    let mut out = probes.clone();
    let mut held = Vec::new();
    for (name, p) in &mut out {
        let before = prev.instances.iter().find(|i| &i.name == name);
        let hold::Health::Held { message, .. } = hold::health(p, before.is_some_and(|b| b.ready))
        else {
            continue;
        };
        let Some(before) = before else { continue };
        held.push(format!("{name}: {message}"));
        *p = ProbeResult {
            ready: true,
            credentials: CredentialState::Valid,
            version: before.version.clone(),
            nodes: before.nodes.clone(),
            message: Some(message),
            identity: None,
            missing_privileges: before.missing_privileges.clone(),
            pool_problem: before.pool_problem.clone(),
            retry: p.retry,
        };
    }
    (out, held)
}

/// `PrivilegesReady`: what each instance's token lacks, by privilege and
/// path (docs/field-cases.md B31); only the operations needing them wait.
fn privileges_condition(instances: &[InstanceStatus]) -> Desired {
    let lacking: Vec<String> = instances
        .iter()
        .filter(|i| !i.missing_privileges.is_empty())
        .map(|i| {
            format!(
                "{}: the token lacks {}",
                i.name,
                super::probe::privileges::describe(&i.missing_privileges)
            )
        })
        .collect();
    if lacking.is_empty() {
        Desired::new(
            PRIVILEGES_READY,
            Status::True,
            &Reason::CredentialsValid(String::new()),
        )
    } else {
        Desired::new(
            PRIVILEGES_READY,
            Status::False,
            &Reason::MissingPrivileges(lacking.join("; ")),
        )
    }
}

/// `PoolsReady`: every instance's resource pool exists and can be read
/// (docs/field-cases.md B34); `PoolNotFound` names each pool and instance.
fn pools_condition(instances: &[InstanceStatus]) -> Desired {
    let problems: Vec<&str> = instances
        .iter()
        .filter_map(|i| i.pool_problem.as_deref())
        .collect();
    if problems.is_empty() {
        Desired::new(
            POOLS_READY,
            Status::True,
            &Reason::PoolsReady(String::new()),
        )
    } else {
        Desired::new(
            POOLS_READY,
            Status::False,
            &Reason::PoolNotFound(problems.join("; ")),
        )
    }
}

fn or_none(v: &[String]) -> String {
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests;
