//! [`crate::machine::steps::power`]: start, shut down, stop.

use super::kit::{Kit, event_codes};
use crate::machine::decide::fixtures::{at, configured, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, VmFact};
use crate::machine::steps::power;
use crate::pve::fake::transient;
use crate::reasons::Reason;

fn stopped_vm(kit: &Kit, running: bool) {
    kit.pve.add_vm(131, "pve-a1", running, &[("name", "m1")]);
}

#[tokio::test]
async fn start_issues_the_start_and_records_its_task() {
    let kit = Kit::new().await;
    stopped_vm(&kit, false);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let out = power::start(&mut run, &facts).await;
    assert!(
        matches!(out, Observed::TaskStarted(Operation::Start)),
        "{out:?}"
    );
    assert_eq!(kit.pve.calls(), ["start_vm"]);
    assert!(kit.pve.vm(131).unwrap().running);
    let upid = run.status.task_ref.clone().unwrap();
    assert!(upid.contains(":qmstart:131:"), "{upid}");
    assert_eq!(event_codes(&run), ["PoweringOn"]);
}

#[tokio::test]
async fn a_vm_gone_from_its_node_is_reported_moved_not_failed() {
    let kit = Kit::new().await;
    kit.pve.add_vm(131, "pve-a2", false, &[("name", "m1")]);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    run.status.proxmox_node = Some("pve-a1".into());
    // The facts say pve-a1; the VM is on pve-a2: Proxmox answers 404.
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let out = power::start(&mut run, &facts).await;
    assert!(matches!(out, Observed::VmMoved), "{out:?}");
    assert_eq!(run.status.proxmox_node, None);
    assert!(!kit.pve.vm(131).unwrap().running);
    assert!(run.events.is_empty());
}

#[tokio::test]
async fn a_failed_start_starts_the_steps_backoff() {
    let kit = Kit::new().await;
    stopped_vm(&kit, false);
    kit.pve.fail_next("start_vm", transient("/status/start"));
    kit.pve.fail_next("start_vm", transient("/status/start"));
    let m = kit.machine(Default::default()).await;
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let mut attempts = Vec::new();
    for _ in 0..2 {
        let mut run = kit.run(&m);
        match power::start(&mut run, &facts).await {
            Observed::Failed(g) => {
                assert_eq!(g.step, StepKind::Start);
                assert!(
                    matches!(g.reason, Reason::PowerOnFailed(_)),
                    "{:?}",
                    g.reason
                );
                attempts.push((g.attempts, g.remaining));
            }
            other => panic!("expected a failure, got {other:?}"),
        }
    }
    assert_eq!(attempts[0].0, 1);
    assert_eq!(attempts[1].0, 2);
    assert!(
        attempts[1].1 > attempts[0].1,
        "the second delay grows: {attempts:?}"
    );
    assert!(!kit.pve.vm(131).unwrap().running);
}

#[tokio::test]
async fn shutdown_and_stop_power_the_vm_off_as_tasks() {
    let kit = Kit::new().await;
    stopped_vm(&kit, true);
    let m = kit.machine(Default::default()).await;
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let mut run = kit.run(&m);
    let out = power::shutdown(&mut run, &facts).await;
    assert!(
        matches!(out, Observed::TaskStarted(Operation::Shutdown)),
        "{out:?}"
    );
    assert!(!kit.pve.vm(131).unwrap().running);
    kit.pve.add_vm(131, "pve-a1", true, &[("name", "m1")]);
    let mut run = kit.run(&m);
    let out = power::stop(&mut run, &facts).await;
    assert!(
        matches!(out, Observed::TaskStarted(Operation::Stop)),
        "{out:?}"
    );
    assert!(!kit.pve.vm(131).unwrap().running);
    assert_eq!(kit.pve.calls(), ["shutdown_vm", "stop_vm"]);
}
