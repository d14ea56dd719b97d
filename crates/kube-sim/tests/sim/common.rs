//! Shared helpers: a server with the test CRDs, raw HTTP calls, dynamic APIs.

use axum::http::{HeaderMap, Request};
use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use kube::core::GroupVersionKind;
use kube_sim::{KubeSim, KubeSimOptions};
use serde_json::{Value, json};
use std::time::Duration;

/// The test CRDs (Widget, Gadget).
pub const WIDGETS: &str = include_str!("../fixtures/widgets.yaml");

/// Starts a server with the test CRDs and returns it with a client.
pub async fn start() -> (KubeSim, Client) {
    start_with(KubeSimOptions::default()).await
}

/// Starts a server with options and the test CRDs.
pub async fn start_with(opts: KubeSimOptions) -> (KubeSim, Client) {
    let sim = KubeSim::start(opts).await.expect("start");
    sim.install_crd_yaml(WIDGETS).expect("install test CRDs");
    let client = sim.client().await.expect("client");
    (sim, client)
}

/// The Widget API resource (`example.com/v1`).
pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

/// Widgets in a namespace.
pub fn widgets(client: &Client, ns: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &widget_resource())
}

/// Gadgets (cluster-scoped).
pub fn gadgets(client: &Client) -> Api<DynamicObject> {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Gadget"),
        "gadgets",
    );
    Api::all_with(client.clone(), &ar)
}

/// A Widget body.
pub fn widget(name: &str, size: i64) -> Value {
    json!({
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": {"size": size}
    })
}

/// Creates a Widget in `default` and returns it as JSON.
pub async fn create_widget(client: &Client, name: &str, size: i64) -> Value {
    let obj: DynamicObject = serde_json::from_value(widget(name, size)).unwrap();
    let created = widgets(client, "default")
        .create(&PostParams::default(), &obj)
        .await
        .expect("create widget");
    serde_json::to_value(created).unwrap()
}

/// A raw HTTP response.
#[derive(Debug)]
pub struct Reply {
    /// Status code.
    pub code: u16,
    /// Parsed JSON body (Null when empty or not JSON).
    pub body: Value,
    /// Headers.
    pub headers: HeaderMap,
}

/// Sends a raw request with an optional JSON (or text) body and content type.
pub async fn call(
    client: &Client,
    method: &str,
    path: &str,
    content_type: Option<&str>,
    body: Option<Vec<u8>>,
) -> Reply {
    let mut b = Request::builder().method(method).uri(path);
    if let Some(ct) = content_type {
        b = b.header("content-type", ct);
    }
    let req = b.body(body.unwrap_or_default()).unwrap();
    let res = client
        .send(req.map(kube::client::Body::from))
        .await
        .expect("send");
    let code = res.status().as_u16();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect_bytes().await.expect("body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    Reply {
        code,
        body,
        headers,
    }
}

/// `call` with a JSON body.
pub async fn call_json(
    client: &Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: &Value,
) -> Reply {
    call(
        client,
        method,
        path,
        Some(content_type),
        Some(serde_json::to_vec(body).unwrap()),
    )
    .await
}

/// The next item of a stream, failing the test if none arrives within 10 s (a hang
/// guard, not a timing assertion).
pub async fn next<S: Stream + Unpin>(s: &mut S) -> S::Item {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("no event within 10 s")
        .expect("stream ended")
}

/// `metadata.resourceVersion` as a number.
pub fn rv(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}
