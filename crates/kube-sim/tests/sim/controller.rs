//! A kube-rs `Controller` with `owns` (ConfigMaps) and `watches` (Secrets mapped by
//! label) against kube-sim: reconciles on create, spec update, status change, owned and
//! watched object changes, and deletion through a finalizer.

use crate::common::*;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The Widget of the test CRD, typed.
#[derive(CustomResource, Clone, Debug, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "example.com",
    version = "v1",
    kind = "Widget",
    namespaced,
    status = "WidgetStatus"
)]
pub struct WidgetSpec {
    size: i64,
}

/// Widget status.
#[derive(Clone, Debug, Default, Serialize, Deserialize, JsonSchema)]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    phase: Option<String>,
}

/// What one reconcile saw.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Apply {
        generation: i64,
        phase: Option<String>,
        secrets: usize,
        config_before: Option<String>,
    },
    Cleanup,
}

struct Ctx {
    client: kube::Client,
    tx: mpsc::UnboundedSender<Seen>,
}

#[derive(Debug, thiserror::Error)]
#[error("reconcile failed: {0}")]
struct Failed(String);

async fn reconcile(w: Arc<Widget>, ctx: Arc<Ctx>) -> Result<Action, Failed> {
    let ns = w.namespace().unwrap_or_default();
    let api: Api<Widget> = Api::namespaced(ctx.client.clone(), &ns);
    let client = ctx.client.clone();
    let tx = ctx.tx.clone();
    finalizer(&api, "example.com/cleanup", w, |event| async move {
        match event {
            Finalizer::Apply(w) => {
                let name = w.name_any();
                let cms: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
                let before = cms
                    .get_opt(&name)
                    .await?
                    .and_then(|cm| cm.data)
                    .and_then(|d| d.get("size").cloned());
                let owner = w.controller_owner_ref(&()).expect("owner ref");
                let cm = json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "ownerReferences": [owner]},
                    "data": {"size": w.spec.size.to_string()}
                });
                cms.patch(
                    &name,
                    &PatchParams::apply("widget-controller").force(),
                    &Patch::Apply(&cm),
                )
                .await?;
                let secrets = Api::<Secret>::namespaced(client.clone(), &ns)
                    .list(&ListParams::default().labels(&format!("widget={name}")))
                    .await?
                    .items
                    .len();
                let _ = tx.send(Seen::Apply {
                    generation: w.metadata.generation.unwrap_or(0),
                    phase: w.status.as_ref().and_then(|s| s.phase.clone()),
                    secrets,
                    config_before: before,
                });
                Ok(Action::await_change())
            }
            Finalizer::Cleanup(_) => {
                let _ = tx.send(Seen::Cleanup);
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e: kube::runtime::finalizer::Error<kube::Error>| Failed(e.to_string()))
}

fn error_policy(_: Arc<Widget>, _: &Failed, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

/// Waits for a reconcile that saw `want` (earlier, different observations are skipped).
async fn expect(rx: &mut mpsc::UnboundedReceiver<Seen>, want: Seen) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
    loop {
        let got = tokio::time::timeout_at(deadline, rx.recv())
            .await
            .unwrap_or_else(|_| panic!("no reconcile saw {want:?}"))
            .expect("controller stopped");
        if got == want {
            return;
        }
    }
}

#[tokio::test]
async fn controller_reconciles_create_update_status_owned_watched_and_delete() {
    let (_sim, c) = start().await;
    let widgets: Api<Widget> = Api::namespaced(c.clone(), "default");
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), "default");
    let secrets: Api<Secret> = Api::namespaced(c.clone(), "default");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let ctx = Arc::new(Ctx {
        client: c.clone(),
        tx,
    });
    let controller = Controller::new(widgets.clone(), watcher::Config::default())
        .owns(cms.clone(), watcher::Config::default())
        .watches(secrets.clone(), watcher::Config::default(), |s: Secret| {
            let ns = s.namespace()?;
            s.labels()
                .get("widget")
                .map(|w| ObjectRef::<Widget>::new(w).within(&ns))
        })
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {});
    let handle = tokio::spawn(controller);

    // create
    let w = Widget::new("w1", WidgetSpec { size: 1 });
    widgets.create(&PostParams::default(), &w).await.unwrap();
    expect(
        &mut rx,
        Seen::Apply {
            generation: 1,
            phase: None,
            secrets: 0,
            config_before: Some("1".into()),
        },
    )
    .await;

    // spec update
    widgets
        .patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    expect(
        &mut rx,
        Seen::Apply {
            generation: 2,
            phase: None,
            secrets: 0,
            config_before: Some("1".into()),
        },
    )
    .await;

    // status change
    widgets
        .patch_status(
            "w1",
            &PatchParams::apply("widget-controller"),
            &Patch::Apply(json!({
                "apiVersion": "example.com/v1", "kind": "Widget", "status": {"phase": "Ready"}
            })),
        )
        .await
        .unwrap();
    expect(
        &mut rx,
        Seen::Apply {
            generation: 2,
            phase: Some("Ready".into()),
            secrets: 0,
            config_before: Some("2".into()),
        },
    )
    .await;

    // watched Secret
    let s: Secret = serde_json::from_value(json!({"metadata": {"name": "creds", "labels": {"widget": "w1"}}, "stringData": {"k": "v"}})).unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    expect(
        &mut rx,
        Seen::Apply {
            generation: 2,
            phase: Some("Ready".into()),
            secrets: 1,
            config_before: Some("2".into()),
        },
    )
    .await;

    // owned ConfigMap changed behind the controller's back
    cms.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"size": "tampered"}})),
    )
    .await
    .unwrap();
    expect(
        &mut rx,
        Seen::Apply {
            generation: 2,
            phase: Some("Ready".into()),
            secrets: 1,
            config_before: Some("tampered".into()),
        },
    )
    .await;

    // delete: the finalizer runs cleanup, then the widget and its ConfigMap go away
    let uid = widgets.get("w1").await.unwrap().uid().unwrap();
    widgets
        .delete("w1", &DeleteParams::default())
        .await
        .unwrap();
    expect(&mut rx, Seen::Cleanup).await;
    tokio::time::timeout(
        Duration::from_secs(10),
        kube::runtime::wait::await_condition(
            widgets.clone(),
            "w1",
            kube::runtime::wait::conditions::is_deleted(&uid),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    let cm_uid = cms
        .get("w1")
        .await
        .map(|c| c.uid().unwrap_or_default())
        .unwrap_or_default();
    if !cm_uid.is_empty() {
        tokio::time::timeout(
            Duration::from_secs(10),
            kube::runtime::wait::await_condition(
                cms.clone(),
                "w1",
                kube::runtime::wait::conditions::is_deleted(&cm_uid),
            ),
        )
        .await
        .unwrap()
        .unwrap();
    }
    handle.abort();
}

#[test]
fn derived_crd_matches_the_fixture_names() {
    assert_eq!(Widget::plural(&()), "widgets");
    assert_eq!(Widget::group(&()), "example.com");
}
