//! [`crate::machine::steps::finalizer`]: added first, removed last.

use kube::api::DeleteParams;

use super::kit::Kit;
use crate::machine::decide::Observed;
use crate::machine::decide::fixtures::base;
use crate::machine::report::FINALIZER;
use crate::machine::steps::finalizer;

#[tokio::test]
async fn the_finalizer_is_added_then_removed_and_the_machine_forgotten() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let out = finalizer::add(&mut run).await.unwrap();
    assert_eq!(out, Observed::FinalizerAdded);
    assert_eq!(
        kit.stored().await.metadata.finalizers,
        Some(vec![FINALIZER.into()])
    );
    assert_eq!(run.finalizers, [FINALIZER]);

    let uid = run.me.uid.clone();
    kit.ctx
        .runtime
        .update_memo(&uid, |m| m.media_uploaded = Some(131));
    let out = finalizer::remove(&mut run, &base()).await.unwrap();
    assert_eq!(out, Observed::FinalizerRemoved);
    assert!(
        kit.stored()
            .await
            .metadata
            .finalizers
            .unwrap_or_default()
            .is_empty()
    );
    assert_eq!(kit.ctx.runtime.memo(&uid).media_uploaded, None);
}

#[tokio::test]
async fn removing_it_from_an_object_already_gone_is_done() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    kit.machines()
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    let mut run = kit.run(&m);
    run.resource_version = None;
    let out = finalizer::remove(&mut run, &base()).await.unwrap();
    assert_eq!(out, Observed::FinalizerRemoved);
}

#[tokio::test]
async fn a_stale_object_is_a_conflict_not_a_silent_overwrite() {
    let kit = Kit::new().await;
    let m = kit.machine(Default::default()).await;
    // Someone else wrote the object after it was read.
    kit.machines()
        .patch(
            "m1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
    let mut run = kit.run(&m);
    let e = finalizer::add(&mut run).await.unwrap_err();
    assert!(
        matches!(&e, crate::error::Error::Kube(kube::Error::Api(s)) if s.code == 409),
        "{e:?}"
    );
    assert_eq!(kit.stored().await.metadata.finalizers, None);
}
