//! The conversion webhook's plumbing: an `apiextensions.k8s.io/v1`
//! `ConversionReview` in, each object handed to a plain conversion function,
//! a `ConversionReview` out with the converted objects in the same order
//! (kube-apiserver checks count, order, `apiVersion` and that only labels
//! and annotations of `metadata` change). One failed object fails the whole
//! review with the function's message (the API server then answers the
//! client's request with an error).
//!
//! The function is a plain value given to [`super::serve`]: the manager
//! passes [`crate::api::conversion::convert_object`].

use kube::core::Status;
use kube::core::conversion::{ConversionRequest, ConversionResponse, ConversionReview};
use serde_json::Value;

/// A conversion: `object` (any served version of one of our kinds) to
/// `desired_api_version` (`infrastructure.cluster.x-k8s.io/v1alpha3`, ...),
/// or why not. Must keep `metadata.name`, `namespace` and `uid`.
pub type Convert = fn(object: Value, desired_api_version: &str) -> Result<Value, String>;

/// The conversion kube-apiserver itself does without a webhook (strategy
/// `None`): an object already at `desired_api_version` is returned as it is;
/// any other version is refused, naming both. A test double of the real
/// conversion for the plumbing's tests.
///
/// # Errors
/// A message naming the object's and the desired `apiVersion`.
#[cfg(test)]
pub fn same_version_only(object: Value, desired_api_version: &str) -> Result<Value, String> {
    let from = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if from == desired_api_version {
        Ok(object)
    } else {
        Err(format!(
            "no conversion from {from:?} to {desired_api_version:?} is served by this controller"
        ))
    }
}

/// The kind of a review's objects (for logs and metrics), if they agree.
pub fn review_kind(request: &ConversionRequest) -> Option<&str> {
    let mut kinds = request
        .objects
        .iter()
        .map(|o| o.get("kind").and_then(Value::as_str).unwrap_or(""));
    let first = kinds.next()?;
    kinds.all(|k| k == first).then_some(first)
}

/// How a review ended (the metric's `outcome`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every object converted.
    Converted,
    /// The function refused an object; the review reports its message.
    Failed,
    /// The body was not a `ConversionReview`.
    Unreadable,
}

/// The answer to one review body.
#[derive(Clone, Debug)]
pub struct Answer {
    /// The `ConversionReview` to send back (always `200`).
    pub review: ConversionReview,
    /// The objects' kind, when they share one.
    pub kind: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
}

/// Answers one review body with `convert`.
pub fn answer(body: &[u8], convert: Convert) -> Answer {
    let unreadable = |message: String| Answer {
        review: ConversionResponse::invalid(Status::failure(&message, "BadRequest")).into_review(),
        kind: None,
        outcome: Outcome::Unreadable,
    };
    let review: ConversionReview = match serde_json::from_slice(body) {
        Ok(r) => r,
        Err(e) => return unreadable(format!("cannot read the ConversionReview: {e}")),
    };
    let request = match ConversionRequest::from_review(review) {
        Ok(r) => r,
        Err(e) => return unreadable(e.to_string()),
    };
    let kind = review_kind(&request).map(str::to_string);
    let desired = request.desired_api_version.clone();
    let objects = request.objects.clone();
    let response = ConversionResponse::for_request(request);
    let mut converted = Vec::with_capacity(objects.len());
    for object in objects {
        match convert(object, &desired) {
            Ok(o) => converted.push(o),
            Err(message) => {
                return Answer {
                    review: response
                        .failure(Status::failure(&message, "ConversionFailed"))
                        .into_review(),
                    kind,
                    outcome: Outcome::Failed,
                };
            }
        }
    }
    Answer {
        review: response.success(converted).into_review(),
        kind,
        outcome: Outcome::Converted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn review(desired: &str, objects: Vec<Value>) -> Vec<u8> {
        serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {"uid": "u-1", "desiredAPIVersion": desired, "objects": objects}
        }))
        .unwrap()
    }

    fn machine(version: &str, name: &str) -> Value {
        json!({"apiVersion": format!("infrastructure.cluster.x-k8s.io/{version}"),
               "kind": "ProxmoxMachine", "metadata": {"name": name, "uid": "x"}, "spec": {}})
    }

    #[test]
    fn same_version_objects_come_back_in_order() {
        let body = review(
            "infrastructure.cluster.x-k8s.io/v1alpha3",
            vec![machine("v1alpha3", "a"), machine("v1alpha3", "b")],
        );
        let a = answer(&body, same_version_only);
        assert_eq!(a.outcome, Outcome::Converted);
        assert_eq!(a.kind.as_deref(), Some("ProxmoxMachine"));
        let v = serde_json::to_value(&a.review).unwrap();
        assert_eq!(v["apiVersion"], "apiextensions.k8s.io/v1");
        assert_eq!(v["kind"], "ConversionReview");
        assert_eq!(v["response"]["uid"], "u-1");
        assert_eq!(v["response"]["result"]["status"], "Success");
        assert_eq!(
            v["response"]["convertedObjects"],
            json!([machine("v1alpha3", "a"), machine("v1alpha3", "b")])
        );
    }

    #[test]
    fn another_version_fails_the_review_naming_both() {
        let body = review(
            "infrastructure.cluster.x-k8s.io/v1alpha3",
            vec![machine("v1alpha3", "a"), machine("v1alpha2", "b")],
        );
        let a = answer(&body, same_version_only);
        assert_eq!(a.outcome, Outcome::Failed);
        let v = serde_json::to_value(&a.review).unwrap();
        assert_eq!(v["response"]["uid"], "u-1");
        assert_eq!(v["response"]["result"]["status"], "Failure");
        let msg = v["response"]["result"]["message"].as_str().unwrap();
        assert!(
            msg.contains("v1alpha2") && msg.contains("v1alpha3"),
            "{msg}"
        );
        assert!(
            v["response"]
                .get("convertedObjects")
                .is_none_or(|c| c == &json!([]))
        );
    }

    #[test]
    fn a_function_value_is_called_per_object() {
        fn relabel(mut o: Value, desired: &str) -> Result<Value, String> {
            o["apiVersion"] = json!(desired);
            o["spec"]["converted"] = json!(true);
            Ok(o)
        }
        let body = review(
            "infrastructure.cluster.x-k8s.io/v1alpha3",
            vec![machine("v1alpha2", "a")],
        );
        let a = answer(&body, relabel);
        assert_eq!(a.outcome, Outcome::Converted);
        let v = serde_json::to_value(&a.review).unwrap();
        assert_eq!(
            v["response"]["convertedObjects"][0]["spec"]["converted"],
            true
        );
        assert_eq!(
            v["response"]["convertedObjects"][0]["apiVersion"],
            "infrastructure.cluster.x-k8s.io/v1alpha3"
        );
    }

    #[test]
    fn unreadable_bodies_get_a_failed_review() {
        let a = answer(b"{not json", same_version_only);
        assert_eq!(a.outcome, Outcome::Unreadable);
        let v = serde_json::to_value(&a.review).unwrap();
        assert_eq!(v["kind"], "ConversionReview");
        assert_eq!(v["response"]["result"]["status"], "Failure");
    }
}
