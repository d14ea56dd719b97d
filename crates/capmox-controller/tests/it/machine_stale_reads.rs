//! A reconcile handed an object older than this process's own last write
//! (the informer cache lags behind the status write of the previous
//! reconcile) decides from the current object instead: the clone, the start
//! or any other non-idempotent step is issued exactly once, and no false
//! `CloneFailed` warning appears.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capmox_controller::api::{ProxmoxMachine, ProxmoxMachineSpec};
use capmox_controller::machine::MachineOptions;
use capmox_controller::machine::reconcile::reconcile_once;
use futures::StreamExt;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use support::*;

const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";
const START: &str = "/nodes/{node}/qemu/{vmid}/status/start";

/// A world whose `/cluster/resources` listings are reused for 60 s
/// (unscaled): a listing taken right before the clone does not show the new
/// VM to a reconcile that follows at once — as in a real cluster.
async fn world_with_cached_listings() -> World {
    world_with(WorldOptions {
        machine: MachineOptions {
            resources_ttl: Duration::from_secs(60),
            ..MachineOptions::default()
        },
        ..WorldOptions::default()
    })
    .await
}

/// Every version of the machines the watch delivers, in order (what the
/// controller's informer would have handed to reconciles).
fn record_versions(w: &World) -> (Arc<Mutex<Vec<ProxmoxMachine>>>, tokio::task::JoinHandle<()>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let stream = watcher(w.machines(), watcher::Config::default()).applied_objects();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(Ok(m)) = stream.next().await {
            sink.lock().unwrap().push(m);
        }
    });
    (seen, task)
}

/// Waits (up to 30 s) until the watch delivered a version matching `f`.
async fn version_where(
    seen: &Mutex<Vec<ProxmoxMachine>>,
    f: impl Fn(&ProxmoxMachine) -> bool,
) -> ProxmoxMachine {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(m) = seen.lock().unwrap().iter().find(|m| f(m)).cloned() {
            return m;
        }
        assert!(Instant::now() < deadline, "the watch never delivered it");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn warnings(w: &World, name: &str) -> Vec<(String, String)> {
    Api::<Event>::namespaced(w.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.type_.as_deref() == Some("Warning")
        })
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

fn task_ref(m: &ProxmoxMachine) -> Option<String> {
    m.status.as_ref().and_then(|s| s.task_ref.clone())
}

/// Reconciles `name` until its `status.taskRef` names a task of `worker`;
/// answers the object that reconcile was handed.
async fn reconcile_until_task(w: &World, name: &str, worker: &str) -> ProxmoxMachine {
    for _ in 0..200 {
        w.fulfil_claims().await;
        let before = w.get(name).await.unwrap();
        let r = reconcile_once(Arc::new(before.clone()), w.ctx.clone()).await;
        let after = w.get(name).await.unwrap();
        if task_ref(&after).is_some_and(|t| t.contains(&format!(":{worker}:")))
            && task_ref(&before) != task_ref(&after)
        {
            return before;
        }
        let delay = match r {
            Ok(Some(d)) => d.min(Duration::from_millis(400)),
            _ => Duration::from_millis(20),
        };
        tokio::time::sleep(delay).await;
    }
    panic!("no {worker} task was issued for {name}");
}

#[tokio::test]
async fn a_lagging_watch_does_not_clone_twice() {
    let w = world_with_cached_listings().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let (seen, watch) = record_versions(&w);

    reconcile_until_task(&w, "m1", "qmclone").await;
    // The version between the VMID write and the status write that
    // recorded the clone's UPID: what a lagging informer hands over next.
    let stale = version_where(&seen, |m| {
        m.spec.virtual_machine_id.is_some() && task_ref(m).is_none()
    })
    .await;
    let current = w.get("m1").await.unwrap();
    assert_ne!(stale.resource_version(), current.resource_version());
    assert_eq!(stale.spec.virtual_machine_id, Some(100));

    w.settled().await;
    let r = reconcile_once(Arc::new(stale.clone()), w.ctx.clone()).await;
    assert!(r.is_ok(), "{r:?}");
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", CLONE), 1, "{:?}", calls.by_endpoint);
    assert_eq!(
        task_ref(&w.get("m1").await.unwrap()),
        task_ref(&current),
        "the clone's task is still the one recorded"
    );
    // The same stale object again, once more, even after the clone ended.
    let m = w.provision("m1").await;
    let r = reconcile_once(Arc::new(stale), w.ctx.clone()).await;
    assert!(r.is_ok(), "{r:?}");

    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", CLONE), 1, "{:?}", calls.by_endpoint);
    assert_eq!(
        warnings(&w, "m1").await,
        Vec::<(String, String)>::new(),
        "no CloneFailed (nor any other) warning"
    );
    assert_eq!(m.spec.virtual_machine_id, Some(100));
    assert_eq!(
        w.vms("dc-a").iter().map(|v| v.vmid).collect::<Vec<_>>(),
        vec![100]
    );
    watch.abort();
}

#[tokio::test]
async fn a_lagging_watch_does_not_start_twice() {
    let w = world_with_cached_listings().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;

    // The object the reconcile that started the VM was handed: handing it
    // over again is what a watch that lags behind our status write does.
    let stale = reconcile_until_task(&w, "m1", "qmstart").await;
    let start_upid = task_ref(&w.get("m1").await.unwrap()).unwrap();
    assert_eq!(w.pve("dc-a").calls().count("POST", START), 1);

    w.settled().await;
    let r = reconcile_once(Arc::new(stale.clone()), w.ctx.clone()).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        w.pve("dc-a").calls().count("POST", START),
        1,
        "the start is observed, not issued again"
    );
    let now = w.get("m1").await.unwrap();
    assert!(
        task_ref(&now).is_none_or(|t| t == start_upid),
        "the start task is not replaced: {:?}",
        task_ref(&now)
    );

    w.provision("m1").await;
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", START), 1, "{:?}", calls.by_endpoint);
    let failed_starts = w
        .pve("dc-a")
        .tasks()
        .into_iter()
        .filter(|t| t.kind == "qmstart" && t.exitstatus.as_deref().is_some_and(|e| e != "OK"))
        .count();
    assert_eq!(failed_starts, 0);
    assert_eq!(warnings(&w, "m1").await, Vec::<(String, String)>::new());
}

#[tokio::test]
async fn a_lagging_watch_does_not_destroy_twice_and_deletion_finishes() {
    let w = world_with_cached_listings().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.provision("m1").await;
    w.machines()
        .delete("m1", &kube::api::DeleteParams::default())
        .await
        .unwrap();

    // The object handed to the reconcile that issued the destroy (it still
    // names the finished shutdown task, or none).
    let stale = reconcile_until_task(&w, "m1", "qmdestroy").await;
    w.settled().await;
    let r = reconcile_once(Arc::new(stale.clone()), w.ctx.clone()).await;
    assert!(r.is_ok(), "{r:?}");
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("DELETE", "/nodes/{node}/qemu/{vmid}"),
        1,
        "the destroy is observed, not issued again"
    );
    w.drive("m1", 200, |m| m.is_none()).await;
    let calls = w.pve("dc-a").calls();
    assert_eq!(
        calls.count("DELETE", "/nodes/{node}/qemu/{vmid}"),
        1,
        "{:?}",
        calls.by_endpoint
    );
    assert!(w.vms("dc-a").is_empty());
    assert_eq!(warnings(&w, "m1").await, Vec::<(String, String)>::new());
}

#[tokio::test]
async fn pve_calls_per_provisioned_machine() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.pve("dc-a").reset_calls();
    w.provision("m1").await;
    let calls = w.pve("dc-a").calls();
    eprintln!(
        "PVE calls to provision one machine: {} ({} failed): {:?}",
        calls.total, calls.errors, calls.by_endpoint
    );
    // One clone, one upload, one config write and one eject (synchronous
    // `PUT`s), one start, one ISO deletion: no write is repeated.
    for (method, path, n) in [
        ("POST", CLONE, 1),
        ("POST", "/nodes/{node}/storage/{storage}/upload", 1),
        ("PUT", "/nodes/{node}/qemu/{vmid}/config", 2),
        ("POST", START, 1),
        (
            "DELETE",
            "/nodes/{node}/storage/{storage}/content/{volume}",
            1,
        ),
    ] {
        assert_eq!(
            calls.count(method, path),
            n,
            "{method} {path}: {:?}",
            calls.by_endpoint
        );
    }
    assert_eq!(calls.errors, 0, "{:?}", calls.by_endpoint);
}
