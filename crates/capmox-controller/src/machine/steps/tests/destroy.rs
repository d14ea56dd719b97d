//! [`crate::machine::steps::destroy`]: destroy with purge, remove a partial VM.

use pve_client::ConflictKind;

use super::kit::{Kit, event_codes};
use crate::machine::decide::fixtures::{at, configured, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, VmFact};
use crate::machine::steps::destroy::destroy;
use crate::pve::fake::conflict;
use crate::reasons::Reason;

#[tokio::test]
async fn deletion_destroys_the_vm_as_a_task() {
    let kit = Kit::new().await;
    kit.pve.add_vm(131, "pve-a1", false, &[("name", "m1")]);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let mut facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    facts.deleting = true;
    let out = destroy(&mut run, &facts, StepKind::Destroy).await;
    assert!(
        matches!(out, Observed::TaskStarted(Operation::Destroy)),
        "{out:?}"
    );
    assert!(kit.pve.vm(131).is_none());
    assert_eq!(event_codes(&run), ["Deleting"]);
}

#[tokio::test]
async fn a_partial_clone_is_removed_with_its_own_reason() {
    let kit = Kit::new().await;
    kit.pve.add_vm(131, "pve-a1", false, &[("name", "m1")]);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(None, Power::Stopped)));
    let out = destroy(&mut run, &facts, StepKind::RemovePartial).await;
    assert!(
        matches!(out, Observed::TaskStarted(Operation::Destroy)),
        "{out:?}"
    );
    assert!(kit.pve.vm(131).is_none());
    assert!(matches!(run.events[0].1, Reason::RemovingPartialVm(_)));
}

#[tokio::test]
async fn a_running_vm_is_not_destroyed_and_its_power_is_reported() {
    let kit = Kit::new().await;
    kit.pve.add_vm(131, "pve-a1", true, &[("name", "m1")]);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    // The listing lagged: it said stopped.
    let mut facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    facts.deleting = true;
    let out = destroy(&mut run, &facts, StepKind::Destroy).await;
    let Observed::All(parts) = out else {
        panic!("expected a failure and the power state, got {out:?}");
    };
    assert!(
        matches!(&parts[0], Observed::Failed(g) if g.step == StepKind::Destroy
            && matches!(g.reason, Reason::DeletionFailed(_))),
        "{parts:?}"
    );
    assert_eq!(parts[1], Observed::Power(Power::Running));
    assert!(kit.pve.vm(131).is_some());
}

#[tokio::test]
async fn another_conflict_is_a_failure_of_the_step() {
    let kit = Kit::new().await;
    kit.pve.add_vm(131, "pve-a1", false, &[("name", "m1")]);
    kit.pve.fail_next(
        "delete_vm",
        conflict(
            ConflictKind::Protected,
            "cannot destroy: protection mode enabled",
        ),
    );
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let mut facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    facts.deleting = true;
    let out = destroy(&mut run, &facts, StepKind::Destroy).await;
    assert!(
        matches!(&out, Observed::Failed(g) if g.step == StepKind::Destroy),
        "{out:?}"
    );
    assert!(kit.pve.vm(131).is_some());
}
