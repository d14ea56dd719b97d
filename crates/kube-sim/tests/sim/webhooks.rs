//! Admission and conversion webhooks: kube-sim calls a webhook server over
//! HTTPS (verified against the configuration's `caBundle`, reached through a
//! Service route) with `AdmissionReview` / `ConversionReview` v1 bodies, and
//! honours the answers, `failurePolicy`, `sideEffects` with `dryRun`,
//! selectors, `matchPolicy: Equivalent` and conversion.

use super::common::{call, call_json};
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use axum_server::tls_rustls::RustlsConfig;
use base64::Engine as _;
use kube::Client;
use kube_sim::{KubeSim, KubeSimOptions};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

const NS: &str = "test-system";
const SERVICE: &str = "hooks";
const CRANES: &str = include_str!("../fixtures/cranes.yaml");
const PATH: &str = "/apis/hooks.example.com/v1/namespaces/default/cranes";
const PATH_V2: &str = "/apis/hooks.example.com/v2/namespaces/default/cranes";

/// What the test webhook server received: `(path, review)`.
#[derive(Default)]
struct Seen(Mutex<Vec<(String, Value)>>);

impl Seen {
    fn all(&self, path: &str) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, _)| p == path)
            .map(|(_, v)| v.clone())
            .collect()
    }
}

struct Hooks {
    addr: SocketAddr,
    ca_pem: String,
    seen: Arc<Seen>,
    _server: axum_server::Handle<SocketAddr>,
}

fn allowed(review: &Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "response": {"uid": review["request"]["uid"], "allowed": true}})
}

async fn mutate(State(seen): State<Arc<Seen>>, body: Bytes) -> impl IntoResponse {
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.0
        .lock()
        .unwrap()
        .push(("/mutate".into(), review.clone()));
    let labels = &review["request"]["object"]["metadata"]["labels"];
    let op = if labels.is_object() {
        json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
    } else {
        json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
    };
    let mut out = allowed(&review);
    out["response"]["patchType"] = json!("JSONPatch");
    out["response"]["patch"] =
        json!(base64::engine::general_purpose::STANDARD.encode(op.to_string()));
    out["response"]["warnings"] = json!(["mutated by the test webhook"]);
    axum::Json(out)
}

async fn validate(State(seen): State<Arc<Seen>>, body: Bytes) -> impl IntoResponse {
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.0
        .lock()
        .unwrap()
        .push(("/validate".into(), review.clone()));
    let obj = &review["request"]["object"];
    let size = obj["spec"]["size"].as_i64().unwrap_or(0);
    let mut out = allowed(&review);
    if size > 5 {
        let name = obj["metadata"]["name"].as_str().unwrap_or("");
        out["response"]["allowed"] = json!(false);
        out["response"]["status"] = json!({
            "status": "Failure", "code": 422, "reason": "Invalid",
            "message": format!("Crane.hooks.example.com {name:?} is invalid: spec.size: must be at most 5"),
            "details": {"name": name, "group": "hooks.example.com", "kind": "Crane",
                        "causes": [{"reason": "FieldValueInvalid", "field": "spec.size", "message": "must be at most 5"}]}
        });
    }
    axum::Json(out)
}

async fn broken(State(seen): State<Arc<Seen>>, body: Bytes) -> impl IntoResponse {
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.0.lock().unwrap().push(("/broken".into(), review));
    (StatusCode::INTERNAL_SERVER_ERROR, "boom")
}

/// v1 `spec.size` ⇄ v2 `spec.length`.
async fn convert(State(seen): State<Arc<Seen>>, body: Bytes) -> impl IntoResponse {
    let review: Value = serde_json::from_slice(&body).unwrap();
    seen.0
        .lock()
        .unwrap()
        .push(("/convert".into(), review.clone()));
    let desired = review["request"]["desiredAPIVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let objects: Vec<Value> = review["request"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| {
            let mut o = o.clone();
            let spec = o["spec"].as_object_mut().unwrap();
            if desired.ends_with("/v2") {
                if let Some(v) = spec.remove("size") {
                    spec.insert("length".into(), v);
                }
            } else if let Some(v) = spec.remove("length") {
                spec.insert("size".into(), v);
            }
            o["apiVersion"] = json!(desired);
            // Only labels and annotations may change: the name change is ignored.
            o["metadata"]["name"] = json!("renamed-by-webhook");
            o
        })
        .collect();
    axum::Json(
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": review["request"]["uid"], "result": {"status": "Success"},
                     "convertedObjects": objects}}),
    )
}

/// A CA and a serving certificate for `hooks.test-system.svc`.
fn certs() -> (String, String, String) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec![format!("{SERVICE}.{NS}.svc")])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    (ca.pem(), leaf.pem(), leaf_key.serialize_pem())
}

async fn start_hooks() -> Hooks {
    let (ca_pem, cert, key) = certs();
    let tls = RustlsConfig::from_pem(cert.into_bytes(), key.into_bytes())
        .await
        .unwrap();
    let seen = Arc::new(Seen::default());
    let app = Router::new()
        .route("/mutate", post(mutate))
        .route("/validate", post(validate))
        .route("/broken", post(broken))
        .route("/convert", post(convert))
        .with_state(seen.clone());
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let addr = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, tls)
        .unwrap()
        .handle(handle.clone());
    tokio::spawn(async move {
        let _ = server.serve(app.into_make_service()).await;
    });
    Hooks {
        addr,
        ca_pem,
        seen,
        _server: handle,
    }
}

async fn start() -> (KubeSim, Client, Hooks) {
    let sim = KubeSim::start(KubeSimOptions::default()).await.unwrap();
    let hooks = start_hooks().await;
    sim.route_service(NS, SERVICE, 443, hooks.addr);
    let client = sim.client().await.unwrap();
    (sim, client, hooks)
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// One webhook on the Crane main resource, v1, CREATE and UPDATE.
fn webhook(name: &str, path: &str, ca_pem: &str, extra: Value) -> Value {
    let mut w = json!({
        "name": name,
        "clientConfig": {"service": {"namespace": NS, "name": SERVICE, "path": path},
                         "caBundle": b64(ca_pem)},
        "rules": [{"operations": ["CREATE", "UPDATE"], "apiGroups": ["hooks.example.com"],
                   "apiVersions": ["v1"], "resources": ["cranes"]}],
        "sideEffects": "None",
        "admissionReviewVersions": ["v1"]
    });
    for (k, v) in extra.as_object().unwrap() {
        w[k] = v.clone();
    }
    w
}

async fn configure(client: &Client, kind: &str, name: &str, webhooks: Vec<Value>) {
    let plural = format!("{}s", kind.to_lowercase());
    let r = call_json(
        client,
        "POST",
        &format!("/apis/admissionregistration.k8s.io/v1/{plural}"),
        "application/json",
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
                "metadata": {"name": name}, "webhooks": webhooks}),
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
}

/// Installs one webhook `<path>.hooks.example.com` calling `path` of the
/// test server, in configuration `m` (mutating) or `v` (validating).
async fn configure_one(client: &Client, kind: &str, hooks: &Hooks, path: &str, extra: Value) {
    let config = if kind.starts_with("Mutating") {
        "m"
    } else {
        "v"
    };
    let name = format!("{}.hooks.example.com", path.trim_start_matches('/'));
    configure(
        client,
        kind,
        config,
        vec![webhook(&name, path, &hooks.ca_pem, extra)],
    )
    .await;
}

fn crane(name: &str, size: i64) -> Value {
    json!({"apiVersion": "hooks.example.com/v1", "kind": "Crane",
           "metadata": {"name": name}, "spec": {"size": size}})
}

async fn create(client: &Client, body: &Value, path: &str) -> super::common::Reply {
    call_json(client, "POST", path, "application/json", body).await
}

#[tokio::test]
async fn mutating_and_validating_webhooks_are_called_with_admission_reviews() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(CRANES).unwrap();
    configure_one(
        &client,
        "MutatingWebhookConfiguration",
        &hooks,
        "/mutate",
        json!({}),
    )
    .await;
    configure_one(
        &client,
        "ValidatingWebhookConfiguration",
        &hooks,
        "/validate",
        json!({}),
    )
    .await;

    let r = create(&client, &crane("small", 3), PATH).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        r.body["metadata"]["labels"]["mutated"], "yes",
        "the patch was applied"
    );
    let warning = r.headers.get("warning").unwrap().to_str().unwrap();
    assert!(warning.contains("mutated by the test webhook"), "{warning}");

    let m = hooks.seen.all("/mutate");
    assert_eq!(m.len(), 1);
    let req = &m[0]["request"];
    assert_eq!(m[0]["apiVersion"], "admission.k8s.io/v1");
    assert_eq!(m[0]["kind"], "AdmissionReview");
    assert_eq!(req["operation"], "CREATE");
    assert_eq!(
        req["kind"],
        json!({"group": "hooks.example.com", "version": "v1", "kind": "Crane"})
    );
    assert_eq!(
        req["resource"],
        json!({"group": "hooks.example.com", "version": "v1", "resource": "cranes"})
    );
    assert_eq!(req["namespace"], "default");
    assert_eq!(req["name"], "small");
    assert_eq!(req["dryRun"], false);
    assert_eq!(req["oldObject"], Value::Null);
    assert_eq!(req["options"]["kind"], "CreateOptions");
    assert!(req["uid"].as_str().is_some_and(|u| !u.is_empty()));
    assert!(
        req["object"]["metadata"].get("labels").is_none(),
        "mutating sees the object before the patch"
    );
    // The validating webhook sees the stored form: patched, with server metadata.
    let v = hooks.seen.all("/validate");
    assert_eq!(v.len(), 1);
    assert_eq!(
        v[0]["request"]["object"]["metadata"]["labels"]["mutated"],
        "yes"
    );
    assert!(v[0]["request"]["object"]["metadata"]["uid"].is_string());

    // Refused: the webhook's Status reaches the client, nothing is stored.
    let r = create(&client, &crane("big", 9), PATH).await;
    assert_eq!(r.code, 422, "{}", r.body);
    assert_eq!(r.body["reason"], "Invalid");
    assert_eq!(
        r.body["message"],
        "admission webhook \"validate.hooks.example.com\" denied the request: Crane.hooks.example.com \"big\" is invalid: spec.size: must be at most 5"
    );
    assert_eq!(r.body["details"]["causes"][0]["field"], "spec.size");
    let got = call(&client, "GET", &format!("{PATH}/big"), None, None).await;
    assert_eq!(got.code, 404);

    // An update: oldObject is the stored object; UPDATE operation.
    let r = call_json(
        &client,
        "PATCH",
        &format!("{PATH}/small"),
        "application/merge-patch+json",
        &json!({"spec": {"size": 4}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let v = hooks.seen.all("/validate");
    let last = &v.last().unwrap()["request"];
    assert_eq!(last["operation"], "UPDATE");
    assert_eq!(last["options"]["kind"], "PatchOptions");
    assert_eq!(last["oldObject"]["spec"]["size"], 3);
    assert_eq!(last["object"]["spec"]["size"], 4);
    // The status subresource is not matched by `resources: [cranes]`.
    let before = hooks.seen.all("/validate").len();
    let r = call_json(
        &client,
        "PATCH",
        &format!("{PATH}/small/status"),
        "application/merge-patch+json",
        &json!({"status": {"phase": "Up"}}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    assert_eq!(hooks.seen.all("/validate").len(), before);
    sim.shutdown().await;
}

#[tokio::test]
async fn failure_policy_decides_when_a_call_fails() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(CRANES).unwrap();
    configure_one(
        &client,
        "ValidatingWebhookConfiguration",
        &hooks,
        "/broken",
        json!({"failurePolicy": "Ignore"}),
    )
    .await;
    let r = create(&client, &crane("ignored", 1), PATH).await;
    assert_eq!(
        r.code, 201,
        "Ignore: the failed call is skipped: {}",
        r.body
    );
    assert_eq!(hooks.seen.all("/broken").len(), 1, "it was called");

    let r = call_json(
        &client,
        "PATCH",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
        "application/json-patch+json",
        &json!([{"op": "replace", "path": "/webhooks/0/failurePolicy", "value": "Fail"}]),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = create(&client, &crane("refused", 1), PATH).await;
    assert_eq!(r.code, 500, "{}", r.body);
    assert_eq!(r.body["reason"], "InternalError");
    let msg = r.body["message"].as_str().unwrap();
    assert!(
        msg.starts_with("Internal error occurred: failed calling webhook \"broken.hooks.example.com\": failed to call webhook: Post \"https://hooks.test-system.svc:443/broken?timeout=10s\""),
        "{msg}"
    );
    assert!(msg.contains("500"), "{msg}");
    sim.shutdown().await;
}

#[tokio::test]
async fn the_ca_bundle_is_verified_and_a_missing_route_fails() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(CRANES).unwrap();
    let (other_ca, _, _) = certs();
    configure(
        &client,
        "ValidatingWebhookConfiguration",
        "v",
        vec![webhook(
            "validate.hooks.example.com",
            "/validate",
            &other_ca,
            json!({}),
        )],
    )
    .await;
    let r = create(&client, &crane("x", 1), PATH).await;
    assert_eq!(r.code, 500, "{}", r.body);
    let msg = r.body["message"].as_str().unwrap().to_lowercase();
    assert!(
        msg.contains("certificate") || msg.contains("issuer"),
        "{msg}"
    );
    assert!(
        hooks.seen.all("/validate").is_empty(),
        "no request reached the server"
    );

    let mut unrouted = webhook(
        "validate.hooks.example.com",
        "/validate",
        &hooks.ca_pem,
        json!({}),
    );
    unrouted["clientConfig"]["service"]["name"] = json!("elsewhere");
    let r = call_json(
        &client,
        "PUT",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/v",
        "application/json",
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "v"}, "webhooks": [unrouted]}),
    )
    .await;
    assert_eq!(r.code, 200, "{}", r.body);
    let r = create(&client, &crane("y", 1), PATH).await;
    assert_eq!(r.code, 500);
    assert!(
        r.body["message"]
            .as_str()
            .unwrap()
            .contains("service \"elsewhere\" not found"),
        "{}",
        r.body
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn dry_runs_selectors_and_side_effects() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(CRANES).unwrap();
    configure_one(&client, "ValidatingWebhookConfiguration", &hooks, "/validate", json!({"objectSelector": {"matchExpressions": [{"key": "skip-webhooks", "operator": "DoesNotExist"}]},
                   "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "default"}}})).await;
    // Dry run: called with dryRun true, nothing stored.
    let r = create(&client, &crane("dry", 2), &format!("{PATH}?dryRun=All")).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(
        hooks.seen.all("/validate").last().unwrap()["request"]["dryRun"],
        true
    );
    assert_eq!(
        call(&client, "GET", &format!("{PATH}/dry"), None, None)
            .await
            .code,
        404
    );
    // objectSelector: a labelled object skips the webhook (and its refusal).
    let mut skipped = crane("skipped", 9);
    skipped["metadata"]["labels"] = json!({"skip-webhooks": "true"});
    let n = hooks.seen.all("/validate").len();
    assert_eq!(create(&client, &skipped, PATH).await.code, 201);
    assert_eq!(hooks.seen.all("/validate").len(), n);
    // namespaceSelector: another namespace is not matched.
    let ns = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}});
    assert_eq!(create(&client, &ns, "/api/v1/namespaces").await.code, 201);
    let r = create(
        &client,
        &crane("elsewhere", 9),
        "/apis/hooks.example.com/v1/namespaces/other/cranes",
    )
    .await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(hooks.seen.all("/validate").len(), n);
    sim.shutdown().await;
}

#[tokio::test]
async fn webhook_configurations_are_checked_when_written() {
    let (sim, client, hooks) = start().await;
    let mut bad = webhook(
        "short.name",
        "/validate",
        &hooks.ca_pem,
        json!({"sideEffects": "Some"}),
    );
    bad["admissionReviewVersions"] = json!(["v1beta1"]);
    let r = create(
        &client,
        &json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "bad"}, "webhooks": [bad]}),
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
    )
    .await;
    assert_eq!(r.code, 422, "{}", r.body);
    let fields: Vec<&str> = r.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "webhooks[0].name",
            "webhooks[0].sideEffects",
            "webhooks[0].admissionReviewVersions"
        ]
    );
    // Defaults of the v1 API are filled in.
    configure_one(
        &client,
        "MutatingWebhookConfiguration",
        &hooks,
        "/mutate",
        json!({}),
    )
    .await;
    let r = call(
        &client,
        "GET",
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/m",
        None,
        None,
    )
    .await;
    let w = &r.body["webhooks"][0];
    assert_eq!(w["failurePolicy"], "Fail");
    assert_eq!(w["matchPolicy"], "Equivalent");
    assert_eq!(w["timeoutSeconds"], 10);
    assert_eq!(w["reinvocationPolicy"], "Never");
    assert_eq!(w["clientConfig"]["service"]["port"], 443);
    assert_eq!(w["namespaceSelector"], json!({}));
    sim.shutdown().await;
}

fn with_conversion(ca_pem: &str) -> String {
    let mut crd: Value = serde_saphyr::from_str(CRANES).unwrap();
    crd["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": NS, "name": SERVICE, "path": "/convert"},
                         "caBundle": b64(ca_pem)}}});
    serde_json::to_string(&crd).unwrap()
}

#[tokio::test]
async fn conversion_webhooks_convert_reads_and_writes() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(&with_conversion(&hooks.ca_pem))
        .unwrap();
    // Written as v2, stored as v1 (converted), served in either.
    let v2 = json!({"apiVersion": "hooks.example.com/v2", "kind": "Crane",
                    "metadata": {"name": "c", "labels": {"a": "b"}}, "spec": {"length": 7}});
    let r = create(&client, &v2, PATH_V2).await;
    assert_eq!(r.code, 201, "{}", r.body);
    assert_eq!(r.body["apiVersion"], "hooks.example.com/v2");
    assert_eq!(r.body["spec"]["length"], 7);
    assert_eq!(
        r.body["metadata"]["name"], "c",
        "only labels and annotations may change"
    );
    let reviews = hooks.seen.all("/convert");
    assert_eq!(reviews[0]["apiVersion"], "apiextensions.k8s.io/v1");
    assert_eq!(reviews[0]["kind"], "ConversionReview");
    assert_eq!(
        reviews[0]["request"]["desiredAPIVersion"],
        "hooks.example.com/v1"
    );
    let v1 = call(&client, "GET", &format!("{PATH}/c"), None, None).await;
    assert_eq!(v1.body["spec"], json!({"size": 7}), "{}", v1.body);
    let n = hooks.seen.all("/convert").len();
    assert_eq!(
        n,
        reviews.len(),
        "reading the storage version converts nothing"
    );
    let got = call(&client, "GET", &format!("{PATH_V2}/c"), None, None).await;
    assert_eq!(got.body["spec"], json!({"length": 7}));
    assert_eq!(got.body["metadata"]["labels"], json!({"a": "b"}));
    // A list converts its items in one review.
    assert_eq!(create(&client, &crane("d", 2), PATH).await.code, 201);
    let before = hooks.seen.all("/convert").len();
    let list = call(&client, "GET", PATH_V2, None, None).await;
    assert_eq!(list.code, 200, "{}", list.body);
    let lengths: Vec<i64> = list.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["spec"]["length"].as_i64().unwrap())
        .collect();
    assert_eq!(lengths, [7, 2]);
    let after = hooks.seen.all("/convert");
    assert_eq!(after.len(), before + 1);
    assert_eq!(
        after.last().unwrap()["request"]["objects"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn equivalent_requests_reach_the_webhook_in_its_version() {
    let (sim, client, hooks) = start().await;
    sim.install_crd_yaml(&with_conversion(&hooks.ca_pem))
        .unwrap();
    configure_one(
        &client,
        "ValidatingWebhookConfiguration",
        &hooks,
        "/validate",
        json!({}),
    )
    .await;
    let v2 = json!({"apiVersion": "hooks.example.com/v2", "kind": "Crane",
                    "metadata": {"name": "long"}, "spec": {"length": 9}});
    let r = create(&client, &v2, PATH_V2).await;
    assert_eq!(
        r.code, 422,
        "the v1 webhook judged the converted object: {}",
        r.body
    );
    let req = &hooks.seen.all("/validate")[0]["request"];
    assert_eq!(req["kind"]["version"], "v1");
    assert_eq!(req["requestKind"]["version"], "v2");
    assert_eq!(req["object"]["spec"]["size"], 9);
    sim.shutdown().await;
}
