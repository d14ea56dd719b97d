//! [`crate::machine::steps::media`]: the bootstrap ISO is deleted by its
//! record, and a failed delete keeps the record (docs/field-cases.md B20).

use super::kit::Kit;
use crate::api::machine::BootstrapMedia;
use crate::api::{ProxmoxMachine, ProxmoxMachineStatus};
use crate::machine::decide::fixtures::{ISO, at, configured, media, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, VmFact};
use crate::machine::steps::media::delete;
use crate::pve::fake::transient;
use crate::reasons::Reason;

/// The machine with its ISO recorded in `status.bootstrapMedia`, and the
/// ISO on `cephfs` when `on_storage`.
async fn recorded(kit: &Kit, on_storage: bool) -> ProxmoxMachine {
    let volid = media().volid;
    if on_storage {
        kit.pve.add_volume("cephfs", &volid);
    }
    kit.machine(Default::default()).await;
    let status = ProxmoxMachineStatus {
        bootstrap_media: Some(BootstrapMedia {
            node: "pve-a1".into(),
            volume: volid,
        }),
        ..Default::default()
    };
    kit.machines()
        .patch_status(
            "m1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn the_iso_is_deleted_by_its_record_as_a_task() {
    let kit = Kit::new().await;
    let m = recorded(&kit, true).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    assert_eq!(out, Observed::TaskStarted(Operation::DeleteVolume));
    assert!(kit.pve.volumes("cephfs").is_empty());
    // The record stays until the task's end is seen.
    assert!(kit.stored().await.status.unwrap().bootstrap_media.is_some());
    let memo = kit.ctx.runtime.memo(&run.me.uid);
    assert_eq!(memo.task.unwrap().volume, Some(media().volid));
    assert!(matches!(
        run.events[0].1,
        Reason::CleaningUpBootstrapData(_)
    ));
}

#[tokio::test]
async fn a_failed_delete_keeps_the_record_and_backs_off() {
    let kit = Kit::new().await;
    let m = recorded(&kit, true).await;
    kit.pve.fail_next("delete_volume", transient("/storage"));
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    let Observed::Failed(g) = out else {
        panic!("expected a failure, got {out:?}");
    };
    assert_eq!(g.step, StepKind::DeleteMedia);
    assert!(matches!(g.reason, Reason::MediaDeletionFailed(_)));
    assert!(!g.remaining.is_zero(), "a retry is due later, not dropped");
    assert_eq!(kit.pve.volumes("cephfs"), [media().volid]);
    assert_eq!(
        kit.stored()
            .await
            .status
            .unwrap()
            .bootstrap_media
            .unwrap()
            .volume,
        media().volid
    );
}

#[tokio::test]
async fn an_iso_already_gone_clears_the_record() {
    let kit = Kit::new().await;
    // Gone already: a crash after the delete, before the record was cleared.
    let m = recorded(&kit, false).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    assert_eq!(out, Observed::MediaDeleted(media().volid));
    assert_eq!(kit.stored().await.status.unwrap().bootstrap_media, None);
    assert!(media().volid.ends_with(ISO));
}
