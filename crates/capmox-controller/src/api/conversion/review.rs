//! The conversion webhook's exchange: an `apiextensions.k8s.io/v1`
//! `ConversionReview` request in, the review with its response out.

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

use super::convert;

/// Answers a `ConversionReview` (`apiextensions.k8s.io/v1`) as the
/// conversion webhook must: `response.uid` = `request.uid`, and either
/// `result.status: Success` with `convertedObjects` (every object of
/// `request.objects`, in order, converted to `request.desiredAPIVersion`,
/// same-version objects unchanged), or `result.status: Failure` with a
/// `message` naming the object and the field that could not be converted
/// and no objects (kube-apiserver then fails the request that needed the
/// conversion). A body that is not a review gets a `Failure` with an empty
/// `uid`.
///
/// Pure: the HTTP server passes the request body as JSON and sends back
/// what this returns.
pub fn convert_review(review: Value) -> Value {
    let response = match serde_json::from_value::<ConversionReview>(review)
        .map_err(|e| e.to_string())
        .and_then(|r| ConversionRequest::from_review(r).map_err(|e| e.to_string()))
    {
        Ok(request) => respond(request),
        Err(e) => ConversionResponse::invalid(Status::failure(
            &format!("not a ConversionReview request: {e}"),
            "BadRequest",
        )),
    };
    serde_json::to_value(response.into_review()).unwrap_or_else(|e| {
        serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "response": {"uid": "", "result": {"status": "Failure", "message": e.to_string()}}
        })
    })
}

fn respond(request: ConversionRequest) -> ConversionResponse {
    let desired = request.desired_api_version.clone();
    let converted: Result<Vec<Value>, String> = request
        .objects
        .iter()
        .map(|o| convert(o, &desired).map_err(|e| format!("{}: {e}", describe(o, &desired))))
        .collect();
    let response = ConversionResponse::for_request(request);
    match converted {
        Ok(objects) => response.success(objects),
        Err(message) => response.failure(Status::failure(&message, "Invalid")),
    }
}

/// `ProxmoxCluster ns/name (infrastructure.cluster.x-k8s.io/v1alpha2 → …/v1alpha3)`.
fn describe(o: &Value, desired: &str) -> String {
    let s = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("?").to_string();
    let meta = o.get("metadata");
    let name = s(meta.and_then(|m| m.get("name")));
    let object = match meta
        .and_then(|m| m.get("namespace"))
        .and_then(Value::as_str)
    {
        Some(ns) => format!("{ns}/{name}"),
        None => name,
    };
    format!(
        "{} {object} ({} to {desired})",
        s(o.get("kind")),
        s(o.get("apiVersion"))
    )
}
