//! Which instance (Proxmox cluster, = CAPI failure domain) a machine goes to
//! (docs/proposals/multi-instance.md, "Placement of a machine").
//!
//! 1. `ProxmoxMachine.spec.instance` (a pin, or an earlier choice): it must
//!    name an instance the cluster uses; if the owner Machine names another
//!    failure domain that is a [`PlacementError::FailureDomainMismatch`],
//!    never a guess.
//! 2. The owner Machine's `spec.failureDomain` (KubeadmControlPlane and
//!    MachineDeployments set it): the instance of that name.
//! 3. The mode's policy: `Default` → the first instance (or the implicit
//!    `default`); `SingleInstance` → the instance recorded in
//!    `ProxmoxCluster.status`, else the one this cluster's machines already
//!    use, else the first healthy one; `MultiInstance` → the healthy instance
//!    with the fewest machines of this cluster, ties broken by free memory,
//!    then name. Control-plane machines only go to instances with
//!    `controlPlane: true`.
//!
//! An instance that is not healthy is never chosen for a machine that has no
//! VM yet; the error says which and why.

use crate::api::cluster::ClusterMode;

/// Why the instance was chosen (`InstanceSelected=True`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected {
    /// `spec.instance` was set by the user.
    Pinned,
    /// The owner Machine's `spec.failureDomain`.
    FailureDomain,
    /// The mode's policy (least loaded eligible instance).
    Policy,
}

/// One instance as placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceFacts {
    /// Instance name (= failure-domain name).
    pub name: String,
    /// `ProxmoxCluster.status.instances[].ready`.
    pub ready: bool,
    /// Why it is not ready (from the cluster's status), if known.
    pub message: Option<String>,
    /// Whether control-plane machines may go here.
    pub control_plane: bool,
    /// Machines of this cluster already placed here (not counting this one).
    pub machines: u32,
    /// Free memory over its allowed online nodes, **bytes** (tie breaker;
    /// `None` when unknown).
    pub free_memory: Option<i128>,
    /// `status.instances[].selected` (SingleInstance's choice).
    pub selected: bool,
}

/// Everything placement needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Input {
    /// The cluster's mode.
    pub mode: ClusterMode,
    /// Effective instances in `spec.settings.instances` order (in legacy
    /// Default mode the one implicit instance).
    pub instances: Vec<InstanceFacts>,
    /// `spec.instance`.
    pub pinned: Option<String>,
    /// The owner Machine's `spec.failureDomain`.
    pub failure_domain: Option<String>,
    /// Whether the owner Machine is a control-plane machine.
    pub control_plane: bool,
    /// Whether the machine already has a VM (then health does not matter:
    /// the machine stays where it is).
    pub has_vm: bool,
}

/// The decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The instance.
    pub instance: String,
    /// Why.
    pub reason: Selected,
}

/// Why no instance could be chosen (the `InstanceSelected` condition's
/// reason is [`crate::reasons::Reason::InstanceNotSelected`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// `spec.instance` names no instance of the cluster.
    #[error("spec.instance {name:?} is not an instance of the ProxmoxCluster (known: {known})")]
    UnknownInstance {
        /// The pin.
        name: String,
        /// Known instance names.
        known: String,
    },
    /// The pin and the owner Machine's failure domain disagree.
    #[error(
        "spec.instance is {pinned:?} but the owner Machine's failureDomain is {failure_domain:?}"
    )]
    FailureDomainMismatch {
        /// `spec.instance`.
        pinned: String,
        /// `Machine.spec.failureDomain`.
        failure_domain: String,
    },
    /// The failure domain names no instance of the cluster.
    #[error(
        "the owner Machine's failureDomain {name:?} is not an instance of the ProxmoxCluster (known: {known})"
    )]
    UnknownFailureDomain {
        /// The failure domain.
        name: String,
        /// Known instance names.
        known: String,
    },
    /// The instance exists but the mode does not use it.
    #[error("instance {name:?} is not in use in mode {mode}: machines go to {in_use}")]
    NotInUse {
        /// The instance.
        name: String,
        /// The mode.
        mode: &'static str,
        /// The instances in use.
        in_use: String,
    },
    /// The instance is not healthy.
    #[error("instance {name:?} is not ready: {message}")]
    NotReady {
        /// The instance.
        name: String,
        /// Why (from the ProxmoxCluster's status).
        message: String,
    },
    /// A control-plane machine targets an instance without `controlPlane`.
    #[error("instance {name:?} does not take control-plane machines (controlPlane: false)")]
    NotForControlPlane {
        /// The instance.
        name: String,
    },
    /// The policy found no healthy eligible instance.
    #[error("no instance is eligible: {0}")]
    NoneEligible(String),
}

fn names(list: &[&InstanceFacts]) -> String {
    if list.is_empty() {
        "none".into()
    } else {
        list.iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The instances the mode uses (SingleInstance: the recorded choice ▸ the
/// instance this cluster's machines already use ▸ the first healthy one).
pub fn in_use(mode: ClusterMode, instances: &[InstanceFacts]) -> Vec<&InstanceFacts> {
    match mode {
        ClusterMode::Default => instances.iter().take(1).collect(),
        ClusterMode::MultiInstance => instances.iter().collect(),
        ClusterMode::SingleInstance => instances
            .iter()
            .find(|i| i.selected)
            .or_else(|| instances.iter().find(|i| i.machines > 0))
            .or_else(|| instances.iter().find(|i| i.ready))
            .into_iter()
            .collect(),
    }
}

fn health(i: &InstanceFacts, input: &Input) -> Result<(), PlacementError> {
    if !input.has_vm && !i.ready {
        return Err(PlacementError::NotReady {
            name: i.name.clone(),
            message: i
                .message
                .clone()
                .unwrap_or_else(|| "the ProxmoxCluster reports it unhealthy".into()),
        });
    }
    if !input.has_vm && input.control_plane && !i.control_plane {
        return Err(PlacementError::NotForControlPlane {
            name: i.name.clone(),
        });
    }
    Ok(())
}

fn check_in_use(name: &str, input: &Input) -> Result<(), PlacementError> {
    let used = in_use(input.mode, &input.instances);
    if used.iter().any(|i| i.name == name) || (input.has_vm && input.mode != ClusterMode::Default) {
        return Ok(());
    }
    if input.mode == ClusterMode::SingleInstance && used.is_empty() {
        // Nothing chosen yet and nothing healthy: health() will say so.
        return Ok(());
    }
    Err(PlacementError::NotInUse {
        name: name.to_string(),
        mode: input.mode.as_str(),
        in_use: names(&used),
    })
}

/// The instances whose free memory would decide the choice: in
/// `MultiInstance` without pin or failure domain, the eligible instances
/// sharing the lowest machine count — when there are two or more. Free
/// memory is only worth reading for them.
pub fn tied(input: &Input) -> Vec<String> {
    if input.mode != ClusterMode::MultiInstance
        || input.pinned.is_some()
        || input.failure_domain.is_some()
    {
        return Vec::new();
    }
    let eligible: Vec<&InstanceFacts> = input
        .instances
        .iter()
        .filter(|i| i.ready && (!input.control_plane || i.control_plane))
        .collect();
    let Some(min) = eligible.iter().map(|i| i.machines).min() else {
        return Vec::new();
    };
    let least: Vec<String> = eligible
        .iter()
        .filter(|i| i.machines == min)
        .map(|i| i.name.clone())
        .collect();
    if least.len() > 1 { least } else { Vec::new() }
}

/// Chooses (or checks) the machine's instance.
///
/// # Errors
/// A [`PlacementError`] whose [`reason`](PlacementError::reason) becomes the
/// `InstanceSelected=False` condition.
pub fn choose(input: &Input) -> Result<Choice, PlacementError> {
    let all: Vec<&InstanceFacts> = input.instances.iter().collect();
    let find = |name: &str| input.instances.iter().find(|i| i.name == name);

    if let Some(pin) = &input.pinned {
        let inst = find(pin).ok_or_else(|| PlacementError::UnknownInstance {
            name: pin.clone(),
            known: names(&all),
        })?;
        if let Some(fd) = &input.failure_domain
            && fd != pin
        {
            return Err(PlacementError::FailureDomainMismatch {
                pinned: pin.clone(),
                failure_domain: fd.clone(),
            });
        }
        check_in_use(pin, input)?;
        health(inst, input)?;
        return Ok(Choice {
            instance: pin.clone(),
            reason: Selected::Pinned,
        });
    }

    if let Some(fd) = &input.failure_domain {
        let inst = find(fd).ok_or_else(|| PlacementError::UnknownFailureDomain {
            name: fd.clone(),
            known: names(&all),
        })?;
        check_in_use(fd, input)?;
        health(inst, input)?;
        return Ok(Choice {
            instance: fd.clone(),
            reason: Selected::FailureDomain,
        });
    }

    let used = in_use(input.mode, &input.instances);
    let choice = match input.mode {
        ClusterMode::Default | ClusterMode::SingleInstance => {
            let inst = used.first().ok_or_else(|| {
                let why = if input.instances.is_empty() {
                    "the ProxmoxCluster lists no instance".to_string()
                } else {
                    format!("no instance is ready ({})", names(&all))
                };
                PlacementError::NoneEligible(why)
            })?;
            health(inst, input)?;
            inst.name.clone()
        }
        ClusterMode::MultiInstance => {
            let mut eligible: Vec<&InstanceFacts> = used
                .iter()
                .copied()
                .filter(|i| i.ready && (!input.control_plane || i.control_plane))
                .collect();
            if eligible.is_empty() {
                let reasons: Vec<String> = used
                    .iter()
                    .map(|i| {
                        if !i.ready {
                            format!(
                                "{}: not ready ({})",
                                i.name,
                                i.message.as_deref().unwrap_or("unhealthy")
                            )
                        } else {
                            format!("{}: controlPlane is false", i.name)
                        }
                    })
                    .collect();
                return Err(PlacementError::NoneEligible(if reasons.is_empty() {
                    "the ProxmoxCluster lists no instance".into()
                } else {
                    reasons.join("; ")
                }));
            }
            eligible.sort_by(|a, b| {
                a.machines
                    .cmp(&b.machines)
                    .then_with(|| {
                        b.free_memory
                            .unwrap_or(i128::MIN)
                            .cmp(&a.free_memory.unwrap_or(i128::MIN))
                    })
                    .then_with(|| a.name.cmp(&b.name))
            });
            eligible[0].name.clone()
        }
    };
    Ok(Choice {
        instance: choice,
        reason: Selected::Policy,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(name: &str, ready: bool, machines: u32, free_gib: Option<i128>) -> InstanceFacts {
        InstanceFacts {
            name: name.into(),
            ready,
            message: (!ready).then(|| "401 authentication failure".to_string()),
            control_plane: true,
            machines,
            free_memory: free_gib.map(|g| g << 30),
            selected: false,
        }
    }

    fn multi(instances: Vec<InstanceFacts>) -> Input {
        Input {
            mode: ClusterMode::MultiInstance,
            instances,
            pinned: None,
            failure_domain: None,
            control_plane: false,
            has_vm: false,
        }
    }

    #[test]
    fn least_loaded_healthy_then_free_memory_then_name() {
        let mut input = multi(vec![
            inst("dc-a", true, 2, Some(100)),
            inst("dc-b", true, 1, Some(10)),
            inst("dc-c", false, 0, Some(500)),
        ]);
        let c = choose(&input).unwrap();
        assert_eq!((c.instance.as_str(), c.reason), ("dc-b", Selected::Policy));
        // Tie on machines: more free memory wins.
        input.instances[0].machines = 1;
        assert_eq!(choose(&input).unwrap().instance, "dc-a");
        // Tie on memory too: name.
        input.instances[1].free_memory = Some(100 << 30);
        assert_eq!(choose(&input).unwrap().instance, "dc-a");
        input.instances[0].name = "dc-z".into();
        assert_eq!(choose(&input).unwrap().instance, "dc-b");
    }

    #[test]
    fn free_memory_is_read_only_for_ties() {
        let mut input = multi(vec![
            inst("dc-a", true, 1, None),
            inst("dc-b", true, 1, None),
            inst("dc-c", true, 3, None),
            inst("dc-d", false, 0, None),
        ]);
        assert_eq!(tied(&input), vec!["dc-a".to_string(), "dc-b".to_string()]);
        input.instances[1].machines = 2;
        assert!(tied(&input).is_empty(), "dc-a wins outright");
        input.failure_domain = Some("dc-c".into());
        assert!(tied(&input).is_empty());
    }

    #[test]
    fn control_plane_machines_need_control_plane_instances() {
        let mut a = inst("dc-a", true, 0, None);
        a.control_plane = false;
        let mut input = multi(vec![a, inst("dc-b", true, 5, None)]);
        input.control_plane = true;
        assert_eq!(choose(&input).unwrap().instance, "dc-b");
        input.instances.truncate(1);
        assert_eq!(
            choose(&input).unwrap_err().to_string(),
            "no instance is eligible: dc-a: controlPlane is false"
        );
    }

    #[test]
    fn none_healthy_says_why() {
        let input = multi(vec![
            inst("dc-a", false, 0, None),
            inst("dc-b", false, 0, None),
        ]);
        let e = choose(&input).unwrap_err();
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(e.clone()).code(),
            "NoEligibleInstance"
        );
        assert_eq!(
            e.to_string(),
            "no instance is eligible: dc-a: not ready (401 authentication failure); dc-b: not ready (401 authentication failure)"
        );
    }

    #[test]
    fn failure_domain_is_followed() {
        let mut input = multi(vec![
            inst("dc-a", true, 0, None),
            inst("dc-b", true, 9, None),
        ]);
        input.failure_domain = Some("dc-b".into());
        let c = choose(&input).unwrap();
        assert_eq!(
            (c.instance.as_str(), c.reason),
            ("dc-b", Selected::FailureDomain)
        );
        input.failure_domain = Some("dc-x".into());
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(choose(&input).unwrap_err().clone()).code(),
            "UnknownFailureDomain"
        );
        input.failure_domain = Some("dc-b".into());
        input.instances[1].ready = false;
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(choose(&input).unwrap_err().clone()).code(),
            "InstanceNotReady"
        );
    }

    #[test]
    fn pins_are_checked_not_guessed() {
        let mut input = multi(vec![
            inst("dc-a", true, 0, None),
            inst("dc-b", true, 0, None),
        ]);
        input.pinned = Some("dc-b".into());
        assert_eq!(choose(&input).unwrap().reason, Selected::Pinned);
        input.failure_domain = Some("dc-a".into());
        let e = choose(&input).unwrap_err();
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(e.clone()).code(),
            "FailureDomainMismatch"
        );
        assert_eq!(
            e.to_string(),
            "spec.instance is \"dc-b\" but the owner Machine's failureDomain is \"dc-a\""
        );
        input.failure_domain = None;
        input.pinned = Some("dc-q".into());
        assert_eq!(
            choose(&input).unwrap_err().to_string(),
            "spec.instance \"dc-q\" is not an instance of the ProxmoxCluster (known: dc-a, dc-b)"
        );
        // A pin on an unhealthy instance waits — unless the VM exists already.
        input.pinned = Some("dc-b".into());
        input.instances[1].ready = false;
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(choose(&input).unwrap_err().clone()).code(),
            "InstanceNotReady"
        );
        input.has_vm = true;
        assert_eq!(choose(&input).unwrap().instance, "dc-b");
    }

    #[test]
    fn default_mode_uses_the_first_instance() {
        let input = Input {
            mode: ClusterMode::Default,
            instances: vec![inst("dc-a", true, 0, None), inst("dc-b", true, 0, None)],
            pinned: None,
            failure_domain: None,
            control_plane: false,
            has_vm: false,
        };
        assert_eq!(choose(&input).unwrap().instance, "dc-a");
        let mut pinned = input.clone();
        pinned.pinned = Some("dc-b".into());
        assert_eq!(
            choose(&pinned).unwrap_err().to_string(),
            "instance \"dc-b\" is not in use in mode Default: machines go to dc-a"
        );
    }

    #[test]
    fn single_instance_follows_the_recorded_then_the_used_instance() {
        let mut input = Input {
            mode: ClusterMode::SingleInstance,
            instances: vec![inst("dc-a", true, 0, None), inst("dc-b", true, 3, None)],
            pinned: None,
            failure_domain: None,
            control_plane: false,
            has_vm: false,
        };
        // Machines already live in dc-b: that is the choice, not the first in the list.
        assert_eq!(choose(&input).unwrap().instance, "dc-b");
        input.instances[1].machines = 0;
        assert_eq!(choose(&input).unwrap().instance, "dc-a");
        input.instances[1].selected = true;
        assert_eq!(choose(&input).unwrap().instance, "dc-b");
        // The selected instance is down: wait, never move.
        input.instances[1].ready = false;
        assert_eq!(
            crate::reasons::Reason::InstanceNotSelected(choose(&input).unwrap_err().clone()).code(),
            "InstanceNotReady"
        );
    }
}
