//! Events through kube-runtime's Recorder (`events.k8s.io/v1`, shared with core `v1`
//! Events) and Leases for leader election.

use crate::common::*;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event as RecEvent, EventType, Recorder, Reporter};
use serde_json::json;

#[tokio::test]
async fn recorder_events_are_visible_in_both_apis_and_series_patch() {
    let (_sim, c) = start().await;
    let w = create_widget(&c, "w1", 1).await;
    let obj: kube::api::DynamicObject = serde_json::from_value(w).unwrap();
    let reference = obj.object_ref(&widget_resource());
    let recorder = Recorder::new(
        c.clone(),
        Reporter {
            controller: "widget-controller".into(),
            instance: None,
        },
    );
    let ev = RecEvent {
        type_: EventType::Normal,
        reason: "Provisioned".into(),
        note: Some("VM 100 created".into()),
        action: "Provision".into(),
        secondary: None,
    };
    recorder.publish(&ev, &reference).await.unwrap();
    recorder.publish(&ev, &reference).await.unwrap();

    let v1: Api<Event> = Api::namespaced(c.clone(), "default");
    let list = v1.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let e = &list.items[0];
    assert_eq!(e.reason.as_deref(), Some("Provisioned"));
    assert_eq!(e.note.as_deref(), Some("VM 100 created"));
    assert_eq!(e.series.as_ref().map(|s| s.count), Some(2));
    assert_eq!(
        e.regarding.as_ref().and_then(|r| r.name.as_deref()),
        Some("w1")
    );

    let core: Api<CoreEvent> = Api::namespaced(c.clone(), "default");
    let list = core
        .list(&ListParams::default().fields("involvedObject.name=w1,reason=Provisioned"))
        .await
        .unwrap();
    assert_eq!(list.items.len(), 1);
    assert_eq!(list.items[0].message.as_deref(), Some("VM 100 created"));
    assert_eq!(
        list.items[0].reporting_component.as_deref(),
        Some("widget-controller")
    );
}

#[tokio::test]
async fn lease_updates_conflict_on_stale_versions() {
    let (_sim, c) = start().await;
    let leases: Api<Lease> = Api::namespaced(c.clone(), "kube-system");
    let l: Lease = serde_json::from_value(json!({"metadata": {"name": "capmox"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}})).unwrap();
    let created = leases.create(&PostParams::default(), &l).await.unwrap();
    let mut mine = created.clone();
    mine.spec.as_mut().unwrap().holder_identity = Some("b".into());
    let updated = leases
        .replace("capmox", &PostParams::default(), &mine)
        .await
        .unwrap();
    assert_eq!(updated.spec.unwrap().holder_identity.as_deref(), Some("b"));
    // the other candidate still holds the old version
    let mut theirs = created;
    theirs.spec.as_mut().unwrap().holder_identity = Some("c".into());
    match leases
        .replace("capmox", &PostParams::default(), &theirs)
        .await
    {
        Err(kube::Error::Api(s)) => {
            assert_eq!(s.code, 409);
            assert_eq!(s.reason, "Conflict");
        }
        other => panic!("unexpected {other:?}"),
    }
}
