//! CRD conversion by webhook (`spec.conversion.strategy: Webhook`): objects
//! are sent in an `apiextensions.k8s.io/v1` `ConversionReview` and the
//! answer is checked the way kube-apiserver's webhook converter checks it —
//! the same `uid`, `result.status: Success`, as many objects as sent, each
//! with the desired `apiVersion` and the original `kind`; of `metadata` only
//! `labels` and `annotations` are taken from the answer, the rest is kept
//! from the original. A failure is a `500` naming the CRD and the reason.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::caller::{Caller, ClientConfig};
use crate::api_error::ApiError;

/// kube-apiserver's fixed timeout for conversion webhooks.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The conversion webhook of one CRD.
pub struct Converter {
    /// `<plural>.<group>` (for messages).
    pub crd: String,
    /// Where it is called.
    pub client: ClientConfig,
    caller: Arc<Caller>,
}

impl std::fmt::Debug for Converter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Converter")
            .field("crd", &self.crd)
            .field("client", &self.client)
            .finish_non_exhaustive()
    }
}

/// `spec.conversion` of a CRD: `Ok(None)` for strategy `None` (or absent),
/// the webhook's client configuration for `Webhook`.
///
/// # Errors
/// `(field, message)` for an unknown strategy, a missing or unusable
/// `webhook.clientConfig`, or `conversionReviewVersions` without `v1`.
pub fn parse_spec(crd: &Value) -> Result<Option<ClientConfig>, (String, String)> {
    let Some(conv) = crd.pointer("/spec/conversion") else {
        return Ok(None);
    };
    match conv
        .get("strategy")
        .and_then(Value::as_str)
        .unwrap_or("None")
    {
        "None" => Ok(None),
        "Webhook" => {
            let versions: Vec<&str> = conv
                .pointer("/webhook/conversionReviewVersions")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if !versions.contains(&"v1") {
                return Err((
                    "spec.conversion.webhook.conversionReviewVersions".into(),
                    "Invalid value: must include v1 (the only ConversionReview version kube-sim sends)".into(),
                ));
            }
            let cc = conv.pointer("/webhook/clientConfig").ok_or_else(|| {
                (
                    "spec.conversion.webhook.clientConfig".to_string(),
                    "Required value".to_string(),
                )
            })?;
            ClientConfig::parse(cc).map(Some).map_err(|e| {
                (
                    "spec.conversion.webhook.clientConfig".into(),
                    format!("Invalid value: {e}"),
                )
            })
        }
        other => Err((
            "spec.conversion.strategy".into(),
            format!("Unsupported value: {other:?}: supported values: \"None\", \"Webhook\""),
        )),
    }
}

impl Converter {
    /// A converter for CRD `crd` calling `client` through `caller`.
    pub fn new(crd: String, client: ClientConfig, caller: Arc<Caller>) -> Converter {
        Converter {
            crd,
            client,
            caller,
        }
    }

    fn failed(&self, desired: &str, kind: &str, why: impl std::fmt::Display) -> ApiError {
        ApiError::internal(format!(
            "conversion webhook for {desired}, Kind={kind} failed: {why}"
        ))
    }

    /// Converts `objects` (one kind) to `desired` (`group/version`) in one
    /// review; blocks the calling thread for the call.
    ///
    /// # Errors
    /// `500` naming the CRD's desired version and kind and what went wrong.
    pub fn convert(&self, objects: &[&Value], desired: &str) -> Result<Vec<Value>, ApiError> {
        if objects.is_empty() {
            return Ok(Vec::new());
        }
        let kind = objects[0].get("kind").and_then(Value::as_str).unwrap_or("");
        let uid = uuid::Uuid::new_v4().to_string();
        let review = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects}
        });
        let body = serde_json::to_vec(&review).map_err(|e| self.failed(desired, kind, e))?;
        let answer = self
            .caller
            .post(&self.client, body, TIMEOUT)
            .map_err(|e| self.failed(desired, kind, e))?;
        let answer: Value = serde_json::from_slice(&answer)
            .map_err(|e| self.failed(desired, kind, format!("the response is not JSON: {e}")))?;
        if answer.get("apiVersion").and_then(Value::as_str) != Some("apiextensions.k8s.io/v1")
            || answer.get("kind").and_then(Value::as_str) != Some("ConversionReview")
        {
            return Err(self.failed(
                desired,
                kind,
                format!(
                    "expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got {}, Kind={}",
                    answer.get("apiVersion").and_then(Value::as_str).unwrap_or(""),
                    answer.get("kind").and_then(Value::as_str).unwrap_or("")
                ),
            ));
        }
        let response = answer
            .get("response")
            .ok_or_else(|| self.failed(desired, kind, "conversion webhook response was absent"))?;
        let got_uid = response.get("uid").and_then(Value::as_str).unwrap_or("");
        if got_uid != uid {
            return Err(self.failed(
                desired,
                kind,
                format!("expected response.uid={uid:?}, got {got_uid:?}"),
            ));
        }
        if response.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
            let msg = response
                .pointer("/result/message")
                .and_then(Value::as_str)
                .unwrap_or("");
            return Err(self.failed(desired, kind, msg));
        }
        let converted = response
            .get("convertedObjects")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        if converted.len() != objects.len() {
            return Err(self.failed(
                desired,
                kind,
                format!(
                    "returned {} objects, expected {}",
                    converted.len(),
                    objects.len()
                ),
            ));
        }
        objects
            .iter()
            .zip(converted)
            .map(|(orig, conv)| self.check(orig, conv, desired, kind))
            .collect()
    }

    fn check(
        &self,
        original: &Value,
        mut converted: Value,
        desired: &str,
        kind: &str,
    ) -> Result<Value, ApiError> {
        let got_av = converted
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        if got_av != desired {
            return Err(self.failed(
                desired,
                kind,
                format!(
                    "invalid converted object: expected apiVersion {desired:?}, got {got_av:?}"
                ),
            ));
        }
        let got_kind = converted.get("kind").and_then(Value::as_str).unwrap_or("");
        if got_kind != kind {
            return Err(self.failed(
                desired,
                kind,
                format!("invalid converted object: expected kind {kind:?}, got {got_kind:?}"),
            ));
        }
        let answered = converted
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .ok_or_else(|| self.failed(desired, kind, "missing metadata in converted object"))?;
        let mut meta: Map<String, Value> = original
            .get("metadata")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        for field in ["labels", "annotations"] {
            match answered.get(field) {
                None | Some(Value::Null) => {
                    meta.remove(field);
                }
                Some(Value::Object(m)) if m.values().all(Value::is_string) => {
                    meta.insert(field.to_string(), Value::Object(m.clone()));
                }
                Some(_) => {
                    return Err(self.failed(
                        desired,
                        kind,
                        format!("invalid metadata.{field} in the converted object"),
                    ));
                }
            }
        }
        crate::json::ensure_object(&mut converted).insert("metadata".into(), Value::Object(meta));
        Ok(converted)
    }
}
