//! Errors the API answers with, rendered as `metav1.Status` JSON with the HTTP code,
//! `reason` and `details` kube-apiserver uses (see `k8s.io/apimachinery/pkg/api/errors`).

use serde_json::{Map, Value, json};

/// One `details.causes[]` entry of a `Status`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cause {
    /// Machine-readable cause, e.g. `FieldValueInvalid`, `FieldValueRequired`,
    /// `FieldManagerConflict`.
    pub reason: String,
    /// Human-readable message without the field prefix.
    pub message: String,
    /// The field path, e.g. `spec.replicas` (or `.spec.replicas` for apply conflicts).
    pub field: String,
}

impl Cause {
    /// A cause with the given reason, field and message.
    pub fn new(reason: &str, field: impl Into<String>, message: impl Into<String>) -> Cause {
        Cause {
            reason: reason.to_string(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// `"<field>: <message>"`, the form kube-apiserver puts into the Status message.
    pub fn display(&self) -> String {
        if self.field.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.field, self.message)
        }
    }
}

/// The object an error is about (for `details`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Subject {
    /// API group ("" for core).
    pub group: String,
    /// Plural resource name (`widgets`) or, for `Invalid`, the Kind.
    pub kind: String,
    /// Object name ("" when not about one object).
    pub name: String,
}

/// An API error: HTTP code, `reason`, message and optional details.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status code (404, 409, 422, ...).
    pub code: u16,
    /// `metav1.StatusReason` (`NotFound`, `AlreadyExists`, `Conflict`, `Invalid`, `Expired`,
    /// `BadRequest`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details.{group,kind,name}` when the error is about an object.
    pub subject: Option<Box<Subject>>,
    /// `details.causes`.
    pub causes: Vec<Cause>,
    /// `details.retryAfterSeconds` (also sent as a `Retry-After` header).
    pub retry_after: Option<u64>,
}

/// `"<plural>.<group>"` or just `"<plural>"` for the core group, as used in messages.
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn plain(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason,
            message: message.into(),
            subject: None,
            causes: Vec::new(),
            retry_after: None,
        }
    }

    fn about(mut self, group: &str, kind: &str, name: &str) -> ApiError {
        self.subject = Some(Box::new(Subject {
            group: group.to_string(),
            kind: kind.to_string(),
            name: name.to_string(),
        }));
        self
    }

    /// 404 NotFound: `widgets.example.com "w1" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::plain(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(plural, group)),
        )
        .about(group, plural, name)
    }

    /// 404 NotFound for a path that names no known resource.
    pub fn no_route(path: &str) -> ApiError {
        ApiError::plain(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({path})"),
        )
    }

    /// 409 AlreadyExists: `widgets.example.com "w1" already exists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::plain(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(plural, group)),
        )
        .about(group, plural, name)
    }

    /// 409 Conflict with kube-apiserver's stale-update message.
    pub fn stale(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict: `Operation cannot be fulfilled on <res> "<name>": <why>`.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
        ApiError::plain(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(plural, group)
            ),
        )
        .about(group, plural, name)
    }

    /// 409 Conflict for server-side apply with `FieldManagerConflict` causes.
    pub fn apply_conflict(
        group: &str,
        plural: &str,
        name: &str,
        message: String,
        causes: Vec<Cause>,
    ) -> ApiError {
        let mut e = ApiError::plain(409, "Conflict", message).about(group, plural, name);
        e.causes = causes;
        e
    }

    /// 422 Invalid: `Widget.example.com "w1" is invalid: <causes>`.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let list: Vec<String> = causes.iter().map(Cause::display).collect();
        let joined = if list.len() == 1 {
            list.join("")
        } else {
            format!("[{}]", list.join(", "))
        };
        let mut e = ApiError::plain(
            422,
            "Invalid",
            format!("{} \"{name}\" is invalid: {joined}", qualified(kind, group)),
        )
        .about(group, kind, name);
        e.causes = causes;
        e
    }

    /// 410 Gone (reason `Expired`).
    pub fn gone(message: impl Into<String>) -> ApiError {
        ApiError::plain(410, "Expired", message)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::plain(400, "BadRequest", message)
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> ApiError {
        ApiError::plain(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden: `<res> "<name>" is forbidden: <why>`.
    pub fn forbidden(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
        ApiError::plain(
            403,
            "Forbidden",
            format!(
                "{} \"{name}\" is forbidden: {why}",
                qualified(plural, group)
            ),
        )
        .about(group, plural, name)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> ApiError {
        ApiError::plain(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    /// 406 NotAcceptable.
    pub fn not_acceptable(accept: &str) -> ApiError {
        ApiError::plain(
            406,
            "NotAcceptable",
            format!(
                "only the following media types are accepted: application/json (requested: {accept})"
            ),
        )
    }

    /// 415 UnsupportedMediaType listing the accepted types.
    pub fn unsupported_media_type(accepted: &[&str]) -> ApiError {
        ApiError::plain(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 500 InternalError.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::plain(500, "InternalError", message)
    }

    /// 504 Timeout (used for a `resourceVersion` newer than the server's).
    pub fn too_large_resource_version(requested: u64, current: u64) -> ApiError {
        let mut e = ApiError::plain(
            504,
            "Timeout",
            format!("Timeout: Too large resource version: {requested}, current: {current}"),
        );
        e.causes = vec![Cause::new(
            "ResourceVersionTooLarge",
            "",
            "Too large resource version",
        )];
        e.retry_after = Some(1);
        e
    }

    /// The `metav1.Status` JSON body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        let mut details = Map::new();
        if let Some(s) = &self.subject {
            if !s.name.is_empty() {
                details.insert("name".into(), Value::String(s.name.clone()));
            }
            if !s.group.is_empty() {
                details.insert("group".into(), Value::String(s.group.clone()));
            }
            if !s.kind.is_empty() {
                details.insert("kind".into(), Value::String(s.kind.clone()));
            }
        }
        if !self.causes.is_empty() {
            let causes: Vec<Value> = self
                .causes
                .iter()
                .map(|c| {
                    let mut m = Map::new();
                    m.insert("reason".into(), Value::String(c.reason.clone()));
                    m.insert("message".into(), Value::String(c.message.clone()));
                    if !c.field.is_empty() {
                        m.insert("field".into(), Value::String(c.field.clone()));
                    }
                    Value::Object(m)
                })
                .collect();
            details.insert("causes".into(), Value::Array(causes));
        }
        if let Some(secs) = self.retry_after {
            details.insert("retryAfterSeconds".into(), Value::from(secs));
        }
        if !details.is_empty()
            && let Some(obj) = status.as_object_mut()
        {
            obj.insert("details".into(), Value::Object(details));
        }
        status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_with_two_causes_lists_them_in_brackets() {
        let e = ApiError::invalid(
            "example.com",
            "Widget",
            "w1",
            vec![
                Cause::new("FieldValueRequired", "spec.a", "Required value"),
                Cause::new("FieldValueInvalid", "spec.b", "Invalid value: 3: too big"),
            ],
        );
        assert_eq!(
            e.message,
            "Widget.example.com \"w1\" is invalid: [spec.a: Required value, spec.b: Invalid value: 3: too big]"
        );
        let s = e.to_status();
        assert_eq!(s["code"], 422);
        assert_eq!(s["details"]["causes"][1]["field"], "spec.b");
        assert_eq!(s["details"]["kind"], "Widget");
    }

    #[test]
    fn not_found_in_core_group_has_no_group_suffix() {
        let e = ApiError::not_found("", "configmaps", "c");
        assert_eq!(e.message, "configmaps \"c\" not found");
        assert_eq!(
            e.to_status()["details"],
            json!({"name": "c", "kind": "configmaps"})
        );
    }
}
