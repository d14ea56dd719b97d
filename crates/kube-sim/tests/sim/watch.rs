//! List selectors and pagination; watches from a version, bookmarks, `410 Gone`,
//! selector transitions and streaming lists.

use crate::common::*;
use futures::{AsyncBufReadExt, StreamExt};
use kube::api::{ListParams, Patch, PatchParams, WatchEvent, WatchParams};
use kube_sim::KubeSimOptions;
use serde_json::{Value, json};
use std::time::Duration;

async fn labelled(c: &kube::Client, name: &str, labels: Value, color: &str) {
    let mut w = widget(name, 1);
    w["metadata"]["labels"] = labels;
    w["spec"]["color"] = json!(color);
    let r = call_json(
        c,
        "POST",
        "/apis/example.com/v1/namespaces/default/widgets",
        "application/json",
        &w,
    )
    .await;
    assert_eq!(r.code, 201, "{:?}", r.body);
}

fn names(list: &Value) -> Vec<String> {
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn label_and_field_selectors() {
    let (_sim, c) = start().await;
    labelled(&c, "a", json!({"app": "web", "tier": "front"}), "red").await;
    labelled(&c, "b", json!({"app": "web", "tier": "back"}), "blue").await;
    labelled(&c, "c", json!({"app": "db"}), "red").await;
    let base = "/apis/example.com/v1/namespaces/default/widgets";
    for (q, want) in [
        ("labelSelector=app%3Dweb", vec!["a", "b"]),
        ("labelSelector=app%3Dweb%2Ctier%21%3Dback", vec!["a"]),
        ("labelSelector=tier+in+%28front%2Cback%29", vec!["a", "b"]),
        ("labelSelector=%21tier", vec!["c"]),
        ("fieldSelector=metadata.name%3Db", vec!["b"]),
        (
            "fieldSelector=metadata.namespace%3Ddefault%2Cmetadata.name%21%3Da",
            vec!["b", "c"],
        ),
        ("fieldSelector=spec.color%3Dred", vec!["a", "c"]),
    ] {
        let r = call(&c, "GET", &format!("{base}?{q}"), None, None).await;
        assert_eq!(r.code, 200, "{q}");
        assert_eq!(names(&r.body), want, "{q}");
    }
    let r = call(
        &c,
        "GET",
        &format!("{base}?fieldSelector=spec.size%3D1"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(r.body["message"], "field label not supported: spec.size");
    let r = call(
        &c,
        "GET",
        &format!("{base}?labelSelector=app+in+web"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 400);
    // all namespaces
    let r = call(
        &c,
        "GET",
        "/apis/example.com/v1/widgets?labelSelector=app%3Ddb",
        None,
        None,
    )
    .await;
    assert_eq!(names(&r.body), vec!["c"]);
}

#[tokio::test]
async fn pagination_with_limit_and_continue() {
    let (_sim, c) = start().await;
    for i in 0..5 {
        create_widget(&c, &format!("w{i}"), 1).await;
    }
    let base = "/apis/example.com/v1/namespaces/default/widgets";
    let p1 = call(&c, "GET", &format!("{base}?limit=2"), None, None).await;
    assert_eq!(names(&p1.body), vec!["w0", "w1"]);
    assert_eq!(p1.body["metadata"]["remainingItemCount"], 3);
    let tok = p1.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let p2 = call(
        &c,
        "GET",
        &format!("{base}?limit=2&continue={tok}"),
        None,
        None,
    )
    .await;
    assert_eq!(names(&p2.body), vec!["w2", "w3"]);
    assert_eq!(
        p2.body["metadata"]["resourceVersion"],
        p1.body["metadata"]["resourceVersion"]
    );
    let tok = p2.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let p3 = call(
        &c,
        "GET",
        &format!("{base}?limit=2&continue={tok}"),
        None,
        None,
    )
    .await;
    assert_eq!(names(&p3.body), vec!["w4"]);
    assert!(p3.body["metadata"].get("continue").is_none());
    let bad = call(
        &c,
        "GET",
        &format!("{base}?limit=2&continue=garbage!"),
        None,
        None,
    )
    .await;
    assert_eq!(bad.code, 400);

    // with a selector the remaining count is unknown
    let sel = call(
        &c,
        "GET",
        &format!("{base}?limit=2&labelSelector=%21nope"),
        None,
        None,
    )
    .await;
    assert_eq!(names(&sel.body), vec!["w0", "w1"]);
    assert!(sel.body["metadata"]["continue"].is_string());
    assert!(sel.body["metadata"].get("remainingItemCount").is_none());

    // kube-rs gets the first page
    let all = widgets(&c, "default")
        .list(&ListParams::default().limit(2))
        .await
        .unwrap();
    assert_eq!(all.items.len(), 2);
}

#[tokio::test]
async fn expired_continue_token_and_exact_version_answer_410() {
    let (sim, c) = start_with(KubeSimOptions {
        watch_history: 16,
        ..KubeSimOptions::default()
    })
    .await;
    for i in 0..3 {
        create_widget(&c, &format!("w{i}"), 1).await;
    }
    let base = "/apis/example.com/v1/namespaces/default/widgets";
    let p1 = call(&c, "GET", &format!("{base}?limit=1"), None, None).await;
    let tok = p1.body["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let old_rv = p1.body["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    // push the history window past the token
    let api = widgets(&c, "default");
    for i in 0..20 {
        api.patch(
            "w0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
        )
        .await
        .unwrap();
    }
    let r = call(
        &c,
        "GET",
        &format!("{base}?limit=1&continue={tok}"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 410);
    assert_eq!(r.body["reason"], "Expired");
    let r = call(
        &c,
        "GET",
        &format!("{base}?resourceVersion={old_rv}&resourceVersionMatch=Exact"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 410);
    // kube-rs retries 504s by default; look at the first answer
    let mut cfg = sim.kube_config();
    cfg.default_retry = false;
    let no_retry = kube::Client::try_from(cfg).unwrap();
    let r = call(
        &no_retry,
        "GET",
        &format!("{base}?resourceVersion=999999&resourceVersionMatch=NotOlderThan"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 504);
    assert_eq!(r.headers.get("retry-after").unwrap(), "1");
    assert_eq!(
        r.body["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    let r = call(
        &c,
        "GET",
        &format!("{base}?resourceVersionMatch=NotOlderThan"),
        None,
        None,
    )
    .await;
    assert_eq!(r.code, 422);
}

#[tokio::test]
async fn watch_from_a_version_sees_every_change_in_order() {
    let (_sim, c) = start().await;
    let api = widgets(&c, "default");
    let w = create_widget(&c, "w1", 1).await;
    let from = w["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut stream = api
        .watch(&WatchParams::default(), &from)
        .await
        .unwrap()
        .boxed();
    create_widget(&c, "w2", 2).await;
    api.patch(
        "w1",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 5}})),
    )
    .await
    .unwrap();
    api.delete("w2", &Default::default()).await.unwrap();
    let mut seen = Vec::new();
    let mut last_rv = 0u64;
    for _ in 0..3 {
        let ev = next(&mut stream).await.unwrap();
        let (kind, obj) = match ev {
            WatchEvent::Added(o) => ("ADDED", o),
            WatchEvent::Modified(o) => ("MODIFIED", o),
            WatchEvent::Deleted(o) => ("DELETED", o),
            other => panic!("unexpected {other:?}"),
        };
        let this_rv: u64 = obj
            .metadata
            .resource_version
            .clone()
            .unwrap()
            .parse()
            .unwrap();
        assert!(this_rv > last_rv);
        last_rv = this_rv;
        seen.push((
            kind,
            obj.metadata.name.clone().unwrap(),
            obj.data["spec"]["size"].as_i64().unwrap(),
        ));
    }
    assert_eq!(
        seen,
        vec![
            ("ADDED", "w2".to_string(), 2),
            ("MODIFIED", "w1".to_string(), 5),
            ("DELETED", "w2".to_string(), 2)
        ]
    );
}

#[tokio::test]
async fn watch_at_zero_starts_with_current_objects() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    create_widget(&c, "w2", 1).await;
    let mut stream = widgets(&c, "default")
        .watch(&WatchParams::default(), "0")
        .await
        .unwrap()
        .boxed();
    let mut names = Vec::new();
    for _ in 0..2 {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(o) => names.push(o.metadata.name.unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(names, vec!["w1", "w2"]);
}

#[tokio::test]
async fn watch_from_an_expired_version_gets_a_410_error_event() {
    let (_sim, c) = start_with(KubeSimOptions {
        watch_history: 16,
        ..KubeSimOptions::default()
    })
    .await;
    let w = create_widget(&c, "w1", 1).await;
    let api = widgets(&c, "default");
    for i in 0..20 {
        api.patch(
            "w1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"i": i.to_string()}}})),
        )
        .await
        .unwrap();
    }
    let old = w["metadata"]["resourceVersion"].as_str().unwrap();
    let mut stream = api
        .watch(&WatchParams::default(), old)
        .await
        .unwrap()
        .boxed();
    match next(&mut stream).await.unwrap() {
        WatchEvent::Error(e) => {
            assert_eq!(e.code, 410);
            assert_eq!(e.reason, "Expired");
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn bookmarks_carry_the_latest_version() {
    let (_sim, c) = start_with(KubeSimOptions {
        bookmark_interval: Duration::from_millis(50),
        ..KubeSimOptions::default()
    })
    .await;
    let w = create_widget(&c, "w1", 1).await;
    let api = widgets(&c, "default");
    let mut stream = api
        .watch(
            &WatchParams::default(),
            w["metadata"]["resourceVersion"].as_str().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let w2 = create_widget(&c, "w2", 1).await;
    let w2_rv = rv(&w2);
    // bookmarks before the ADDED event carry older versions; the first one after it
    // carries w2's version (nothing else is written)
    let mut added = false;
    loop {
        match next(&mut stream).await.unwrap() {
            WatchEvent::Added(o) => {
                assert_eq!(o.metadata.name.unwrap(), "w2");
                added = true;
            }
            WatchEvent::Bookmark(b) => {
                let b_rv: u64 = b.metadata.resource_version.parse().unwrap();
                assert_eq!(b.types.kind, "Widget");
                if added {
                    assert_eq!(b_rv, w2_rv);
                    break;
                }
                assert!(b_rv < w2_rv);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
}

#[tokio::test]
async fn selector_transitions_become_added_and_deleted() {
    let (_sim, c) = start().await;
    let api = widgets(&c, "default");
    let w = create_widget(&c, "w1", 1).await;
    let mut stream = api
        .watch(
            &WatchParams::default().labels("team=x"),
            w["metadata"]["resourceVersion"].as_str().unwrap(),
        )
        .await
        .unwrap()
        .boxed();
    let pp = PatchParams::default();
    api.patch(
        "w1",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"team": "x"}}})),
    )
    .await
    .unwrap();
    api.patch("w1", &pp, &Patch::Merge(json!({"spec": {"size": 2}})))
        .await
        .unwrap();
    api.patch(
        "w1",
        &pp,
        &Patch::Merge(json!({"metadata": {"labels": {"team": "y"}}})),
    )
    .await
    .unwrap();
    let kinds: Vec<&str> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(match next(&mut stream).await.unwrap() {
                WatchEvent::Added(_) => "ADDED",
                WatchEvent::Modified(_) => "MODIFIED",
                WatchEvent::Deleted(_) => "DELETED",
                other => panic!("unexpected {other:?}"),
            });
        }
        v
    };
    assert_eq!(kinds, vec!["ADDED", "MODIFIED", "DELETED"]);
}

#[tokio::test]
async fn streaming_list_ends_initial_events_with_an_annotated_bookmark() {
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    // read the raw stream through kube's request_stream to see each line
    let req = axum::http::Request::get(
        "/apis/example.com/v1/namespaces/default/widgets?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&timeoutSeconds=5",
    )
    .body(Vec::new())
    .unwrap();
    let mut lines = c.request_stream(req).await.unwrap().lines();
    let first: Value = serde_json::from_str(&next(&mut lines).await.unwrap()).unwrap();
    assert_eq!(first["type"], "ADDED");
    assert_eq!(first["object"]["metadata"]["name"], "w1");
    let second: Value = serde_json::from_str(&next(&mut lines).await.unwrap()).unwrap();
    assert_eq!(second["type"], "BOOKMARK");
    assert_eq!(
        second["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );

    let bad = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets?watch=true&sendInitialEvents=true",
        None,
        None,
    )
    .await;
    assert_eq!(bad.code, 422);
}

#[tokio::test]
async fn kube_runtime_watcher_with_streaming_lists() {
    use kube::runtime::watcher;
    let (_sim, c) = start().await;
    create_widget(&c, "w1", 1).await;
    let api = widgets(&c, "default");
    let mut events = watcher(api, watcher::Config::default().streaming_lists()).boxed();
    let mut init = Vec::new();
    loop {
        match next(&mut events).await.unwrap() {
            watcher::Event::Init => {}
            watcher::Event::InitApply(o) => init.push(o.metadata.name.unwrap()),
            watcher::Event::InitDone => break,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(init, vec!["w1"]);
    create_widget(&c, "w2", 1).await;
    match next(&mut events).await.unwrap() {
        watcher::Event::Apply(o) => assert_eq!(o.metadata.name.unwrap(), "w2"),
        other => panic!("unexpected {other:?}"),
    }
}
