//! What the KubeadmControlPlane does next, decided without I/O: create a
//! Machine (in which failure domain), delete one (which), wait (why), or
//! nothing. The controller ([`super`]) observes, calls [`next`] and acts.
//!
//! Source: CAPI `controlplane/kubeadm/reconcilers/kubeadmcontrolplane/`
//! — the order of `reconcile` (a rollout of outdated Machines takes
//! precedence over scaling), `rollingUpdate` in `update.go` (scale up while
//! fewer than `replicas + maxSurge` Machines exist, else delete an outdated
//! one), `selectMachineForInPlaceUpdateOrScaleDown` in `scale.go`, the
//! preflight checks of `preflight.go` (no Machine being deleted, every
//! Machine healthy except the one to delete) — and
//! `controlplane/kubeadm/pkg/control_plane.go` (`NextFailureDomainForScaleUp`,
//! `FailureDomainWithMostMachines`) with `util/failuredomains` (`PickFewest`,
//! `PickMost`).

use k8s_openapi::jiff::Timestamp;

use crate::crds::meta::FailureDomain;

/// One control-plane Machine, as the rules see it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CpMachine {
    /// Machine name.
    pub name: String,
    /// `spec.failureDomain`.
    pub failure_domain: Option<String>,
    /// `metadata.creationTimestamp`.
    pub created: Option<Timestamp>,
    /// Has a `deletionTimestamp`.
    pub deleting: bool,
    /// Healthy: its Node exists (`status.nodeRef`).
    pub has_node: bool,
    /// Made from the KubeadmControlPlane's current InfraMachine template and
    /// version (CAPI `UpToDate`); a Machine whose InfraMachine or cloned-from
    /// annotations cannot be read counts as up to date, as in CAPI.
    pub up_to_date: bool,
}

/// Everything [`next`] decides from.
#[derive(Clone, Copy, Debug)]
pub struct Situation<'a> {
    /// `Cluster.status.failureDomains` (all; only `controlPlane: true` ones
    /// are used).
    pub failure_domains: &'a [FailureDomain],
    /// Every control-plane Machine of the KubeadmControlPlane, deleting ones
    /// included.
    pub machines: &'a [CpMachine],
    /// `spec.replicas`.
    pub replicas: usize,
    /// `spec.rollout.strategy.rollingUpdate.maxSurge` (0 or 1).
    pub max_surge: usize,
    /// `status.initialization.controlPlaneInitialized`.
    pub initialized: bool,
    /// The Cluster's infrastructure is provisioned and its
    /// `controlPlaneEndpoint` is valid.
    pub cluster_ready: bool,
}

/// Why the KubeadmControlPlane waits instead of acting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wait {
    /// The Cluster's infrastructure or endpoint is not ready.
    ClusterNotReady,
    /// A control-plane Machine is being deleted (CAPI preflight
    /// `HasDeletingMachine`).
    MachineDeleting(String),
    /// A control-plane Machine has no Node yet (CAPI preflight: every
    /// Machine healthy).
    WithoutNode(String),
}

/// The next action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Every Machine is up to date and there are `replicas` of them.
    Steady,
    /// Create a control-plane Machine.
    Create {
        /// Its failure domain (`None` without `controlPlane` domains).
        failure_domain: Option<String>,
        /// It initialises the cluster (`initConfiguration`).
        init: bool,
        /// Part of a rollout (it replaces an outdated Machine).
        rollout: bool,
    },
    /// Delete this Machine.
    Delete {
        /// Its name.
        machine: String,
        /// Part of a rollout (it is outdated).
        rollout: bool,
    },
    /// Nothing may be done now.
    Wait(Wait),
}

/// The next action of a KubeadmControlPlane in `s`.
///
/// Outdated Machines (not [`CpMachine::up_to_date`], not deleting) are
/// rolled out first: while fewer than `replicas + max_surge` Machines exist
/// (deleting ones counted) a new one is created, else the outdated Machine
/// [`pick_scale_down`] names is deleted. Without outdated Machines the
/// count of Machines (deleting ones counted) is brought to `replicas`.
/// Both directions pass the preflight first: nothing is created or deleted
/// while a Machine is being deleted or a Machine (other than the one to
/// delete) has no Node — so the rollout goes one Machine at a time and a
/// new Machine is healthy before an old one goes.
pub fn next(s: &Situation<'_>) -> Next {
    if !s.cluster_ready {
        return Next::Wait(Wait::ClusterNotReady);
    }
    let outdated = |m: &CpMachine| !m.up_to_date && !m.deleting;
    let count = s.machines.len();
    if s.machines.iter().any(outdated) {
        if count < s.replicas + s.max_surge {
            return scale_up(s, true);
        }
        return scale_down(
            s,
            pick_scale_down(s.failure_domains, s.machines, outdated),
            true,
        );
    }
    if count < s.replicas {
        return scale_up(s, false);
    }
    if count > s.replicas {
        let victim = pick_scale_down(s.failure_domains, s.machines, |m| !m.deleting);
        return scale_down(s, victim, false);
    }
    Next::Steady
}

fn scale_up(s: &Situation<'_>, rollout: bool) -> Next {
    if let Some(w) = preflight(s.machines, None) {
        return Next::Wait(w);
    }
    Next::Create {
        failure_domain: pick_fewest(s.failure_domains, s.machines),
        init: s.machines.is_empty() && !s.initialized,
        rollout,
    }
}

fn scale_down(s: &Situation<'_>, victim: Option<String>, rollout: bool) -> Next {
    if let Some(w) = preflight(s.machines, victim.as_deref()) {
        return Next::Wait(w);
    }
    match victim {
        Some(machine) => Next::Delete { machine, rollout },
        // Only when every Machine is deleting, which the preflight caught.
        None => Next::Steady,
    }
}

/// CAPI's preflight checks: the first Machine being deleted, else the first
/// Machine other than `except` without a Node.
fn preflight(machines: &[CpMachine], except: Option<&str>) -> Option<Wait> {
    if let Some(m) = machines.iter().find(|m| m.deleting) {
        return Some(Wait::MachineDeleting(m.name.clone()));
    }
    machines
        .iter()
        .find(|m| !m.has_node && Some(m.name.as_str()) != except)
        .map(|m| Wait::WithoutNode(m.name.clone()))
}

fn control_plane_domains(fds: &[FailureDomain]) -> impl Iterator<Item = &str> {
    fds.iter()
        .filter(|f| f.control_plane == Some(true))
        .map(|f| f.name.as_str())
}

fn in_domain(m: &CpMachine, fd: &str) -> bool {
    m.failure_domain.as_deref() == Some(fd)
}

/// `PickFewest` (`NextFailureDomainForScaleUp`): among the `controlPlane:
/// true` failure domains, the one with the fewest up-to-date Machines not
/// being deleted; ties go to the one with the fewest Machines overall,
/// then to the first by name (CAPI: the order of a map, i.e. random).
/// `None` without such domains.
pub fn pick_fewest(fds: &[FailureDomain], machines: &[CpMachine]) -> Option<String> {
    control_plane_domains(fds)
        .map(|fd| {
            let all = machines.iter().filter(|m| in_domain(m, fd)).count();
            let current = machines
                .iter()
                .filter(|m| in_domain(m, fd) && m.up_to_date && !m.deleting)
                .count();
            (current, all, fd)
        })
        .min()
        .map(|(_, _, fd)| fd.to_string())
}

/// The Machine to delete among those `eligible` accepts
/// (`MachineInFailureDomainWithMostMachines`): the oldest eligible one
/// outside the `controlPlane: true` failure domains (no domain, or one that
/// is gone), else the oldest eligible one in the domain with the most
/// eligible Machines, ties to the most Machines overall, then to the first
/// by name (`PickMost`; CAPI: random). `None` when none is eligible.
pub fn pick_scale_down(
    fds: &[FailureDomain],
    machines: &[CpMachine],
    eligible: impl Fn(&CpMachine) -> bool,
) -> Option<String> {
    let domains: Vec<&str> = control_plane_domains(fds).collect();
    let candidates: Vec<&CpMachine> = machines.iter().filter(|m| eligible(m)).collect();
    let oldest = |list: &mut dyn Iterator<Item = &&CpMachine>| {
        list.min_by_key(|m| (m.created, m.name.as_str()))
            .map(|m| m.name.clone())
    };
    let outside = |m: &&&CpMachine| {
        m.failure_domain
            .as_deref()
            .is_none_or(|fd| !domains.contains(&fd))
    };
    if let Some(name) = oldest(&mut candidates.iter().filter(outside)) {
        return Some(name);
    }
    let (_, _, fd) = domains
        .iter()
        .map(|fd| {
            let priority = candidates.iter().filter(|m| in_domain(m, fd)).count();
            let all = machines.iter().filter(|m| in_domain(m, fd)).count();
            (priority, all, std::cmp::Reverse(*fd))
        })
        .filter(|(priority, _, _)| *priority > 0)
        .max()?;
    oldest(&mut candidates.iter().filter(|m| in_domain(m, fd.0)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn fd(name: &str, cp: bool) -> FailureDomain {
        FailureDomain {
            name: name.into(),
            control_plane: Some(cp),
            attributes: BTreeMap::new(),
        }
    }

    fn three() -> Vec<FailureDomain> {
        vec![fd("dc-a", true), fd("dc-b", true), fd("dc-c", true)]
    }

    fn m(name: &str, fd: Option<&str>, created: i64) -> CpMachine {
        CpMachine {
            name: name.into(),
            failure_domain: fd.map(str::to_string),
            created: Some(Timestamp::from_second(created).unwrap()),
            deleting: false,
            has_node: true,
            up_to_date: true,
        }
    }

    fn old(name: &str, fd: Option<&str>, created: i64) -> CpMachine {
        CpMachine {
            up_to_date: false,
            ..m(name, fd, created)
        }
    }

    fn situation<'a>(fds: &'a [FailureDomain], machines: &'a [CpMachine]) -> Situation<'a> {
        Situation {
            failure_domains: fds,
            machines,
            replicas: 3,
            max_surge: 1,
            initialized: true,
            cluster_ready: true,
        }
    }

    #[test]
    fn fewest_up_to_date_then_fewest_overall_then_name() {
        let mut fds = three();
        fds.push(fd("dc-w", false));
        assert_eq!(pick_fewest(&fds, &[]).as_deref(), Some("dc-a"));
        let a = m("a", Some("dc-a"), 1);
        let b = m("b", Some("dc-b"), 2);
        assert_eq!(
            pick_fewest(&fds, std::slice::from_ref(&a)).as_deref(),
            Some("dc-b")
        );
        assert_eq!(
            pick_fewest(&fds, &[a.clone(), b.clone()]).as_deref(),
            Some("dc-c")
        );
        // dc-a holds an outdated and a current Machine, dc-b and dc-c one
        // outdated each: dc-b and dc-c tie on current (0) and overall (1).
        let machines = [
            old("a0", Some("dc-a"), 1),
            m("a1", Some("dc-a"), 9),
            old("b0", Some("dc-b"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        assert_eq!(pick_fewest(&fds, &machines).as_deref(), Some("dc-b"));
        // Fewer current Machines wins over fewer Machines overall.
        let machines = [
            old("a0", Some("dc-a"), 1),
            old("a1", Some("dc-a"), 2),
            m("b0", Some("dc-b"), 3),
            m("c0", Some("dc-c"), 4),
        ];
        assert_eq!(pick_fewest(&fds, &machines).as_deref(), Some("dc-a"));
        // A Machine being deleted is not current.
        let mut gone = m("b1", Some("dc-b"), 5);
        gone.deleting = true;
        assert_eq!(
            pick_fewest(&fds, &[a.clone(), gone, m("c", Some("dc-c"), 6)]).as_deref(),
            Some("dc-b")
        );
        // A domain gone from the list (credentials broken) is not used.
        let fds2 = [fd("dc-a", true), fd("dc-c", true)];
        let c = m("c", Some("dc-c"), 3);
        assert_eq!(pick_fewest(&fds2, &[a, b, c]).as_deref(), Some("dc-a"));
        assert_eq!(pick_fewest(&[fd("dc-w", false)], &[]), None);
    }

    #[test]
    fn scale_down_prefers_vanished_domains_then_most_populated_oldest() {
        let fds = [fd("dc-a", true), fd("dc-c", true)];
        let all = [
            m("a1", Some("dc-a"), 5),
            m("a2", Some("dc-a"), 1),
            m("b1", Some("dc-b"), 9),
            m("c1", Some("dc-c"), 2),
        ];
        let any = |_: &CpMachine| true;
        assert_eq!(pick_scale_down(&fds, &all, any).as_deref(), Some("b1"));
        assert_eq!(pick_scale_down(&fds, &all[..2], any).as_deref(), Some("a2"));
        let no_fd = [m("x", None, 7), m("a1", Some("dc-a"), 1)];
        assert_eq!(pick_scale_down(&fds, &no_fd, any).as_deref(), Some("x"));
        assert_eq!(pick_scale_down(&fds, &[], any), None);
        // Without failure domains: the oldest.
        assert_eq!(pick_scale_down(&[], &all, any).as_deref(), Some("a2"));
    }

    #[test]
    fn rollout_deletes_from_the_domain_with_most_outdated_then_most_overall() {
        let fds = three();
        // dc-a: a new one and its outdated one; dc-b, dc-c: one outdated each.
        let machines = [
            old("a0", Some("dc-a"), 1),
            m("a1", Some("dc-a"), 9),
            old("b0", Some("dc-b"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        let outdated = |m: &CpMachine| !m.up_to_date;
        assert_eq!(
            pick_scale_down(&fds, &machines, outdated).as_deref(),
            Some("a0")
        );
        // Two outdated in dc-c beat one outdated in a fuller dc-a.
        let machines = [
            old("a0", Some("dc-a"), 1),
            m("a1", Some("dc-a"), 9),
            m("a2", Some("dc-a"), 10),
            old("c0", Some("dc-c"), 4),
            old("c1", Some("dc-c"), 3),
        ];
        assert_eq!(
            pick_scale_down(&fds, &machines, outdated).as_deref(),
            Some("c1")
        );
        // Only eligible Machines are picked, even in the fullest domain.
        let machines = [
            m("a1", Some("dc-a"), 1),
            m("a2", Some("dc-a"), 2),
            old("b0", Some("dc-b"), 3),
        ];
        assert_eq!(
            pick_scale_down(&fds, &machines, outdated).as_deref(),
            Some("b0")
        );
    }

    #[test]
    fn preflight_waits_for_deletions_and_nodes() {
        let fds = three();
        let mut machines = vec![
            m("a", Some("dc-a"), 1),
            m("b", Some("dc-b"), 2),
            old("c", Some("dc-c"), 3),
        ];
        machines[1].has_node = false;
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Wait(Wait::WithoutNode("b".into()))
        );
        machines[1].has_node = true;
        machines[0].deleting = true;
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Wait(Wait::MachineDeleting("a".into()))
        );
        // At the surge limit the Machine to delete may lack a Node; the
        // others may not.
        let mut machines = vec![
            m("a1", Some("dc-a"), 9),
            old("a0", Some("dc-a"), 1),
            old("b0", Some("dc-b"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        machines[1].has_node = false;
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Delete {
                machine: "a0".into(),
                rollout: true
            }
        );
        machines[0].has_node = false;
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Wait(Wait::WithoutNode("a1".into()))
        );
        let mut s = situation(&fds, &machines);
        s.cluster_ready = false;
        assert_eq!(next(&s), Next::Wait(Wait::ClusterNotReady));
    }

    #[test]
    fn scaling_without_rollout() {
        let fds = three();
        let mut s = situation(&fds, &[]);
        s.initialized = false;
        assert_eq!(
            next(&s),
            Next::Create {
                failure_domain: Some("dc-a".into()),
                init: true,
                rollout: false
            }
        );
        let machines = [m("a", Some("dc-a"), 1), m("b", Some("dc-b"), 2)];
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Create {
                failure_domain: Some("dc-c".into()),
                init: false,
                rollout: false
            }
        );
        let machines = [
            m("a", Some("dc-a"), 1),
            m("b", Some("dc-b"), 2),
            m("c", Some("dc-c"), 3),
        ];
        assert_eq!(next(&situation(&fds, &machines)), Next::Steady);
        let mut s = situation(&fds, &machines);
        s.replicas = 2;
        assert_eq!(
            next(&s),
            Next::Delete {
                machine: "a".into(),
                rollout: false
            }
        );
        // A Machine deleted by someone else is waited for, then replaced.
        let mut machines = machines.to_vec();
        machines[1].deleting = true;
        assert_eq!(next(&situation(&fds, &machines)), Next::Steady);
        machines.remove(1);
        assert_eq!(
            next(&situation(&fds, &machines)),
            Next::Create {
                failure_domain: Some("dc-b".into()),
                init: false,
                rollout: false
            }
        );
    }

    /// Plays a rollout to its end against a world model: a created Machine
    /// is up to date and gets its Node one step later; a deleted Machine is
    /// gone one step later. Returns the actions taken, and checks on every
    /// state that no domain holds more than `limit` Machines, at most
    /// `doubled` domains hold two or more, and at least `min_ready` Machines
    /// not being deleted have a Node.
    fn play(
        fds: &[FailureDomain],
        mut machines: Vec<CpMachine>,
        max_surge: usize,
        (limit, doubled): (usize, usize),
        min_ready: usize,
    ) -> (Vec<Next>, Vec<CpMachine>) {
        let mut actions = Vec::new();
        let mut clock = 100;
        for _ in 0..100 {
            let per_fd: BTreeMap<Option<String>, usize> =
                machines.iter().fold(BTreeMap::new(), |mut acc, m| {
                    *acc.entry(m.failure_domain.clone()).or_default() += 1;
                    acc
                });
            assert!(per_fd.values().all(|n| *n <= limit), "{machines:?}");
            assert!(
                per_fd.values().filter(|n| **n >= 2).count() <= doubled,
                "{machines:?}"
            );
            let ready = machines
                .iter()
                .filter(|m| m.has_node && !m.deleting)
                .count();
            assert!(ready >= min_ready, "{machines:?}");
            let mut s = situation(fds, &machines);
            s.max_surge = max_surge;
            let n = next(&s);
            let settled = machines.iter().all(|m| !m.deleting && m.has_node);
            // The world moves: Nodes join, deletions finish.
            machines.retain(|m| !m.deleting);
            for m in &mut machines {
                m.has_node = true;
            }
            match &n {
                Next::Steady if settled => return (actions, machines),
                Next::Steady | Next::Wait(_) => continue,
                Next::Create { failure_domain, .. } => {
                    clock += 1;
                    machines.push(CpMachine {
                        has_node: false,
                        ..m(&format!("new{clock}"), failure_domain.as_deref(), clock)
                    });
                }
                Next::Delete { machine, .. } => {
                    machines
                        .iter_mut()
                        .find(|m| &m.name == machine)
                        .unwrap()
                        .deleting = true;
                }
            }
            actions.push(n);
        }
        panic!("no steady state: {machines:?}");
    }

    fn create(fd: &str) -> Next {
        Next::Create {
            failure_domain: Some(fd.into()),
            init: false,
            rollout: true,
        }
    }

    fn delete(machine: &str) -> Next {
        Next::Delete {
            machine: machine.into(),
            rollout: true,
        }
    }

    #[test]
    fn rollout_with_surge_replaces_one_domain_at_a_time() {
        let fds = three();
        let start = vec![
            old("b0", Some("dc-b"), 1),
            old("a0", Some("dc-a"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        let (actions, end) = play(&fds, start, 1, (2, 1), 3);
        assert_eq!(
            actions,
            vec![
                create("dc-a"),
                delete("a0"),
                create("dc-b"),
                delete("b0"),
                create("dc-c"),
                delete("c0"),
            ]
        );
        let fds_end: Vec<_> = end
            .iter()
            .map(|m| (m.failure_domain.clone().unwrap(), m.up_to_date))
            .collect();
        assert_eq!(
            fds_end,
            vec![
                ("dc-a".to_string(), true),
                ("dc-b".to_string(), true),
                ("dc-c".to_string(), true)
            ]
        );
    }

    #[test]
    fn rollout_without_surge_deletes_first() {
        let fds = three();
        let start = vec![
            old("a0", Some("dc-a"), 1),
            old("b0", Some("dc-b"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        let (actions, end) = play(&fds, start, 0, (1, 0), 2);
        assert_eq!(
            actions,
            vec![
                delete("a0"),
                create("dc-a"),
                delete("b0"),
                create("dc-b"),
                delete("c0"),
                // No outdated Machine left: an ordinary scale-up.
                Next::Create {
                    failure_domain: Some("dc-c".into()),
                    init: false,
                    rollout: false
                },
            ]
        );
        assert!(end.iter().all(|m| m.up_to_date) && end.len() == 3);
    }

    #[test]
    fn rollout_moves_a_machine_out_of_a_vanished_domain_first() {
        // dc-b left the failure domains: its outdated Machine goes first,
        // its replacement goes to the domain with the fewest current ones.
        let fds = [fd("dc-a", true), fd("dc-c", true)];
        let start = vec![
            old("a0", Some("dc-a"), 1),
            old("b0", Some("dc-b"), 2),
            old("c0", Some("dc-c"), 3),
        ];
        let (actions, end) = play(&fds, start, 1, (2, 2), 3);
        assert_eq!(
            actions,
            vec![
                create("dc-a"),
                delete("b0"),
                create("dc-c"),
                delete("a0"),
                create("dc-a"),
                delete("c0"),
            ]
        );
        assert_eq!(end.len(), 3);
    }
}
