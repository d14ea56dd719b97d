//! [`crate::machine::steps::task`]: an ended task is forgotten with its
//! bookkeeping, and a failed one becomes its step's failure.

use pve_client::TaskFailureKind;

use super::kit::Kit;
use crate::machine::decide::fixtures::{at, configured, media, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, TaskEnd, VmFact};
use crate::machine::steps::task::clear;
use crate::reasons::Reason;

#[tokio::test]
async fn a_finished_start_records_the_running_vm() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    run.status.task_ref = Some("UPID:pve-a1:1:1:1:qmstart:131:capmox@pve!capi:".into());
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let end = TaskEnd::Succeeded(Operation::Start);
    let out = clear(&mut run, &facts, end.clone()).await.unwrap();
    assert_eq!(out, Observed::All(vec![Observed::TaskCleared(end)]));
    assert_eq!(run.status.task_ref, None);
    assert_eq!(run.status.vm_status.as_deref(), Some("running"));
    let memo = kit.ctx.runtime.memo(&run.me.uid);
    assert!(memo.task.is_none() && memo.started_at.is_some());
}

#[tokio::test]
async fn a_finished_volume_delete_clears_the_media_record() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let mut facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    facts.media_recorded = Some(media());
    let end = TaskEnd::Succeeded(Operation::DeleteVolume);
    let out = clear(&mut run, &facts, end.clone()).await.unwrap();
    assert_eq!(
        out,
        Observed::All(vec![
            Observed::TaskCleared(end),
            Observed::MediaDeleted(media().volid),
        ])
    );
}

#[tokio::test]
async fn a_failed_clone_task_is_the_clone_steps_failure_with_backoff() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    let facts = at(VmFact::Absent);
    let mut delays = Vec::new();
    for _ in 0..3 {
        let mut run = kit.run(&m);
        let end = TaskEnd::Failed {
            op: Operation::Clone,
            kind: TaskFailureKind::LockTimeout,
            reason: Reason::CloneFailed(
                "can't lock file '/var/lock/qemu-server/lock-9000.conf' - got timeout".into(),
            ),
        };
        let out = clear(&mut run, &facts, end).await.unwrap();
        let Observed::All(parts) = out else {
            panic!("{out:?}")
        };
        let Observed::Failed(g) = &parts[1] else {
            panic!("{parts:?}")
        };
        assert_eq!(g.step, StepKind::Clone);
        delays.push((g.attempts, g.remaining));
    }
    assert_eq!(
        delays.iter().map(|d| d.0).collect::<Vec<_>>(),
        [1, 2, 3],
        "{delays:?}"
    );
    assert!(
        delays[1].1 > delays[0].1 && delays[2].1 > delays[1].1,
        "{delays:?}"
    );
}
