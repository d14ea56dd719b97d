//! The `admission.k8s.io/v1` `AdmissionReview` a webhook receives, and how
//! its answer is read — kube-apiserver's checks
//! (`VerifyAdmissionResponse`): `apiVersion`/`kind` of the review, a
//! `response` with the request's `uid`, a patch only with
//! `patchType: JSONPatch` and only from a mutating webhook. A refusal keeps
//! the webhook's `Status` (code at least 400, reason, causes) with the
//! message prefixed `admission webhook "<name>" denied the request: `.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::api_error::{ApiError, Cause, Subject};

/// `group/version/kind` or `group/version/resource` triple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Gvx {
    /// API group.
    pub group: String,
    /// Version.
    pub version: String,
    /// Kind or plural resource.
    pub name: String,
}

impl Gvx {
    fn kind_json(&self) -> Value {
        json!({"group": self.group, "version": self.version, "kind": self.name})
    }

    fn resource_json(&self) -> Value {
        json!({"group": self.group, "version": self.version, "resource": self.name})
    }
}

/// What an `AdmissionReview` request carries.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// Round-trip id.
    pub uid: String,
    /// Kind in the version sent.
    pub kind: Gvx,
    /// Resource in the version sent.
    pub resource: Gvx,
    /// Kind of the original request (differs after an equivalent match).
    pub request_kind: Gvx,
    /// Resource of the original request.
    pub request_resource: Gvx,
    /// Subresource ("" for the main resource).
    pub subresource: &'a str,
    /// Object name.
    pub name: &'a str,
    /// Namespace ("" for cluster-scoped).
    pub namespace: &'a str,
    /// `CREATE`, `UPDATE`.
    pub operation: &'a str,
    /// The object (in the version sent).
    pub object: Option<&'a Value>,
    /// The stored object (`UPDATE`).
    pub old_object: Option<&'a Value>,
    /// `dryRun`.
    pub dry_run: bool,
    /// `CreateOptions` / `UpdateOptions` / `PatchOptions`.
    pub options: Value,
}

/// The user every kube-sim request is made as (one bearer token, no RBAC).
pub const USER: &str = "kube-sim-admin";

/// The review JSON for `call`.
pub fn review(call: &Call<'_>) -> Value {
    let mut req = json!({
        "uid": call.uid,
        "kind": call.kind.kind_json(),
        "resource": call.resource.resource_json(),
        "requestKind": call.request_kind.kind_json(),
        "requestResource": call.request_resource.resource_json(),
        "name": call.name,
        "operation": call.operation,
        "userInfo": {"username": USER, "groups": ["system:masters", "system:authenticated"]},
        "object": call.object,
        "oldObject": call.old_object,
        "dryRun": call.dry_run,
        "options": call.options,
    });
    if !call.subresource.is_empty() {
        req["subResource"] = json!(call.subresource);
        req["requestSubResource"] = json!(call.subresource);
    }
    if !call.namespace.is_empty() {
        req["namespace"] = json!(call.namespace);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
}

/// A webhook's answer.
#[derive(Debug)]
pub enum Answer {
    /// Allowed, with a JSON patch (RFC 6902, already decoded) for mutating webhooks.
    Allowed {
        /// The patch operations.
        patch: Option<Vec<u8>>,
        /// `warnings`.
        warnings: Vec<String>,
    },
    /// Refused.
    Denied {
        /// The error for the client.
        error: ApiError,
        /// `warnings`.
        warnings: Vec<String>,
    },
}

fn known_reason(r: &str) -> &'static str {
    const KNOWN: [&str; 18] = [
        "Unauthorized",
        "Forbidden",
        "NotFound",
        "AlreadyExists",
        "Conflict",
        "Gone",
        "Invalid",
        "ServerTimeout",
        "Timeout",
        "TooManyRequests",
        "BadRequest",
        "MethodNotAllowed",
        "NotAcceptable",
        "RequestEntityTooLarge",
        "UnsupportedMediaType",
        "InternalError",
        "Expired",
        "ServiceUnavailable",
    ];
    KNOWN.into_iter().find(|k| *k == r).unwrap_or("")
}

/// The client's error for a refusal by webhook `hook` with `status`
/// (webhook `ToStatusErr`).
pub fn denial(hook: &str, status: &Value) -> ApiError {
    let denied = format!("admission webhook {hook:?} denied the request");
    let message = status.get("message").and_then(Value::as_str).unwrap_or("");
    let reason = status.get("reason").and_then(Value::as_str).unwrap_or("");
    let code = status
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|c| u16::try_from(c).ok())
        .filter(|c| *c >= 400)
        .unwrap_or(400);
    let text = if !message.is_empty() {
        format!("{denied}: {message}")
    } else if !reason.is_empty() {
        format!("{denied}: {reason}")
    } else {
        format!("{denied} without explanation")
    };
    let details = status.get("details");
    let s = |v: Option<&Value>, k: &str| {
        v.and_then(|d| d.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let mut e = ApiError::internal(text);
    e.code = code;
    e.reason = known_reason(reason);
    if details.is_some() {
        e.subject = Some(Box::new(Subject {
            group: s(details, "group"),
            kind: s(details, "kind"),
            name: s(details, "name"),
        }));
    }
    e.causes = details
        .and_then(|d| d.get("causes"))
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| Cause {
                    reason: s(Some(c), "reason"),
                    message: s(Some(c), "message"),
                    field: s(Some(c), "field"),
                })
                .collect()
        })
        .unwrap_or_default();
    e
}

/// Reads a webhook's response body for request `uid`.
///
/// # Errors
/// What is wrong with the response (kube-apiserver's wording); the caller
/// treats it as a failed call (`failurePolicy` applies).
pub fn read_answer(hook: &str, body: &[u8], uid: &str, mutating: bool) -> Result<Answer, String> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("the response is not an AdmissionReview: {e}"))?;
    let (av, kind) = (
        v.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
        v.get("kind").and_then(Value::as_str).unwrap_or(""),
    );
    if av != "admission.k8s.io/v1" || kind != "AdmissionReview" {
        return Err(format!(
            "expected webhook response of admission.k8s.io/v1, Kind=AdmissionReview, got {av}, Kind={kind}"
        ));
    }
    let r = v.get("response").ok_or("webhook response was absent")?;
    let got = r.get("uid").and_then(Value::as_str).unwrap_or("");
    if got != uid {
        return Err(format!("expected response.uid={uid:?}, got {got:?}"));
    }
    let warnings = crate::json::strings(r.get("warnings"));
    if r.get("allowed").and_then(Value::as_bool) != Some(true) {
        let status = r.get("status").cloned().unwrap_or(Value::Null);
        return Ok(Answer::Denied {
            error: denial(hook, &status),
            warnings,
        });
    }
    let patch_type = r.get("patchType").and_then(Value::as_str);
    let patch = match (patch_bytes(r.get("patch"))?, patch_type) {
        (None, None) => None,
        (Some(_), None) => {
            return Err("webhook returned response.patch but not response.patchType".into());
        }
        (None, Some(_)) => {
            return Err("webhook returned response.patchType but not response.patch".into());
        }
        (Some(_), Some(t)) if t != "JSONPatch" => {
            return Err(format!(
                "webhook returned invalid response.patchType of {t:?}"
            ));
        }
        (Some(_), Some(_)) if !mutating => {
            return Err("validating webhook may not return response.patch".into());
        }
        (Some(p), Some(_)) => Some(p),
    };
    Ok(Answer::Allowed { patch, warnings })
}

/// `response.patch` as Go's JSON decoder reads a `[]byte`: a base64 string,
/// or an array of byte values (what some webhook libraries write).
fn patch_bytes(v: Option<&Value>) -> Result<Option<Vec<u8>>, String> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => base64::engine::general_purpose::STANDARD
            .decode(s)
            .map(Some)
            .map_err(|e| format!("response.patch is not base64: {e}")),
        Some(Value::Array(items)) => items
            .iter()
            .map(|b| b.as_u64().and_then(|b| u8::try_from(b).ok()))
            .collect::<Option<Vec<u8>>>()
            .map(Some)
            .ok_or_else(|| "response.patch is not an array of bytes".to_string()),
        Some(other) => Err(format!(
            "response.patch must be base64 bytes, not {}",
            crate::json::type_name(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_keep_the_webhooks_status() {
        let status = json!({"status": "Failure", "code": 422, "reason": "Invalid",
            "message": "W.example.com \"w\" is invalid: spec.a: bad",
            "details": {"name": "w", "group": "example.com", "kind": "W",
                        "causes": [{"reason": "FieldValueInvalid", "field": "spec.a", "message": "bad"}]}});
        let e = denial("v.example.com", &status);
        assert_eq!(e.code, 422);
        assert_eq!(e.reason, "Invalid");
        assert_eq!(
            e.message,
            "admission webhook \"v.example.com\" denied the request: W.example.com \"w\" is invalid: spec.a: bad"
        );
        assert_eq!(
            e.causes,
            vec![Cause::new("FieldValueInvalid", "spec.a", "bad")]
        );
        let bare = denial("v.example.com", &json!({"code": 200}));
        assert_eq!(bare.code, 400, "a refusal is never below 400");
        assert_eq!(
            bare.message,
            "admission webhook \"v.example.com\" denied the request without explanation"
        );
    }

    #[test]
    fn answers_are_checked() {
        let ok = |r: Value| {
            serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": r})).unwrap()
        };
        let patch = base64::engine::general_purpose::STANDARD
            .encode(br#"[{"op":"add","path":"/a","value":1}]"#);
        match read_answer("h", &ok(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch", "warnings": ["w"]})), "u", true).unwrap() {
            Answer::Allowed { patch, warnings } => {
                assert_eq!(patch.unwrap(), br#"[{"op":"add","path":"/a","value":1}]"#);
                assert_eq!(warnings, ["w"]);
            }
            other => panic!("{other:?}"),
        }
        // Go reads a []byte from an array of byte values too.
        let bytes: Vec<u8> = br#"[{"op":"add","path":"/a","value":1}]"#.to_vec();
        let arr =
            ok(json!({"uid": "u", "allowed": true, "patch": bytes, "patchType": "JSONPatch"}));
        match read_answer("h", &arr, "u", true).unwrap() {
            Answer::Allowed { patch, .. } => assert_eq!(patch.unwrap(), bytes),
            other => panic!("{other:?}"),
        }
        let err = read_answer(
            "h",
            &ok(json!({"uid": "other", "allowed": true})),
            "u",
            true,
        )
        .unwrap_err();
        assert!(err.contains("expected response.uid"), "{err}");
        let err = read_answer(
            "h",
            &ok(json!({"uid": "u", "allowed": true, "patch": patch, "patchType": "JSONPatch"})),
            "u",
            false,
        )
        .unwrap_err();
        assert!(err.contains("validating webhook"), "{err}");
        let err = read_answer(
            "h",
            &ok(json!({"uid": "u", "allowed": true, "patch": patch})),
            "u",
            true,
        )
        .unwrap_err();
        assert!(err.contains("patchType"), "{err}");
        let v1beta1 = serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "response": {"uid": "u", "allowed": true}})).unwrap();
        assert!(read_answer("h", &v1beta1, "u", true).is_err());
        assert!(matches!(
            read_answer("h", &ok(json!({"uid": "u", "allowed": false})), "u", false).unwrap(),
            Answer::Denied { .. }
        ));
    }

    #[test]
    fn reviews_carry_the_request() {
        let g = |v: &str, n: &str| Gvx {
            group: "example.com".into(),
            version: v.into(),
            name: n.into(),
        };
        let obj = json!({"metadata": {"name": "w"}});
        let r = review(&Call {
            uid: "u".into(),
            kind: g("v1", "Widget"),
            resource: g("v1", "widgets"),
            request_kind: g("v2", "Widget"),
            request_resource: g("v2", "widgets"),
            subresource: "",
            name: "w",
            namespace: "ns",
            operation: "CREATE",
            object: Some(&obj),
            old_object: None,
            dry_run: true,
            options: json!({"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}),
        });
        assert_eq!(r["apiVersion"], "admission.k8s.io/v1");
        assert_eq!(
            r["request"]["kind"],
            json!({"group": "example.com", "version": "v1", "kind": "Widget"})
        );
        assert_eq!(r["request"]["requestKind"]["version"], "v2");
        assert_eq!(r["request"]["namespace"], "ns");
        assert_eq!(r["request"]["oldObject"], Value::Null);
        assert_eq!(r["request"]["dryRun"], true);
        assert!(r["request"].get("subResource").is_none());
    }
}
