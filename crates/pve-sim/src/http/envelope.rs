//! The Proxmox response envelope (docs/proxmox-semantics.md §3) and the simulated API's
//! error type.
//!
//! * success: `200`, body `{"data": …}` (plus `total` for some lists);
//! * handler errors: status, reason phrase = first line of the message, body
//!   `{"data": null, "message": "<text>\n"}` plus `"errors": {param: text}` for
//!   parameter errors (400 "Parameter verification failed.");
//! * authentication errors (401) carry only the status line, like pveproxy's
//!   auth handler, and are delayed;
//! * every error response closes the connection (`Connection: close`).

use std::collections::BTreeMap;

use axum::body::Body;
use axum::http::{HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

/// An error answer of the simulated API.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ApiError {
    /// 400 "Parameter verification failed." with the per-parameter map.
    Param(BTreeMap<String, String>),
    /// Any status with a message; `json_body = false` sends only the status line.
    Http {
        /// HTTP status code (400–599).
        status: u16,
        /// Message without trailing newline.
        message: String,
        /// Whether a JSON body is sent.
        json_body: bool,
    },
}

impl ApiError {
    /// 500 with Proxmox's message (most runtime failures).
    pub fn internal(msg: impl Into<String>) -> Self {
        ApiError::Http {
            status: 500,
            message: msg.into(),
            json_body: true,
        }
    }

    /// 400 with one parameter error.
    pub fn param(key: impl Into<String>, msg: impl Into<String>) -> Self {
        ApiError::Param(BTreeMap::from([(key.into(), msg.into())]))
    }

    /// 403 `Permission check failed (<what>)`.
    pub fn forbidden(what: &str) -> Self {
        let message = if what.is_empty() {
            "Permission check failed".to_string()
        } else {
            format!("Permission check failed ({what})")
        };
        ApiError::Http {
            status: 403,
            message,
            json_body: true,
        }
    }

    /// 401 with only a status line (`No ticket`, `authentication failure`, …).
    pub fn unauthorized(reason: impl Into<String>) -> Self {
        ApiError::Http {
            status: 401,
            message: reason.into(),
            json_body: false,
        }
    }

    /// Any status with a JSON body.
    pub fn status(status: u16, msg: impl Into<String>) -> Self {
        ApiError::Http {
            status,
            message: msg.into(),
            json_body: true,
        }
    }

    /// The "missing VM" error of qemu-server's `load_config`.
    pub fn no_vm_config(node: &str, vmid: u32) -> Self {
        Self::internal(format!(
            "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
        ))
    }

    /// Status code.
    pub fn code(&self) -> u16 {
        match self {
            ApiError::Param(_) => 400,
            ApiError::Http { status, .. } => *status,
        }
    }

    /// The message as Proxmox would put it into `message` (without the newline).
    pub fn message(&self) -> String {
        match self {
            ApiError::Param(_) => "Parameter verification failed.".to_string(),
            ApiError::Http { message, .. } => message.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApiError::Param(errors) => {
                write!(f, "400 Parameter verification failed.")?;
                for (k, v) in errors {
                    write!(f, " {k}: {v};")?;
                }
                Ok(())
            }
            ApiError::Http {
                status, message, ..
            } => write!(f, "{status} {message}"),
        }
    }
}

/// A successful answer: `data` plus optional `total`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Reply {
    pub data: Value,
    pub total: Option<u64>,
}

impl Reply {
    pub fn data(data: Value) -> Self {
        Reply { data, total: None }
    }

    pub fn null() -> Self {
        Reply {
            data: Value::Null,
            total: None,
        }
    }
}

/// Result of a handler.
pub(crate) type ApiResult = Result<Reply, ApiError>;

/// Builds the 200 response.
pub(crate) fn ok_response(reply: Reply) -> Response<Body> {
    let mut body = json!({ "data": reply.data });
    if let Some(t) = reply.total {
        body["total"] = json!(t);
    }
    json_response(StatusCode::OK, None, body.to_string(), false)
}

/// Builds the error response (status, reason phrase, body, connection close).
pub(crate) fn error_response(err: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(err.code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let message = err.message();
    let reason = message.lines().next().unwrap_or("").to_string();
    let body = match err {
        ApiError::Param(errors) => Some(json!({
            "data": null,
            "errors": errors,
            "message": format!("{message}\n"),
        })),
        ApiError::Http {
            json_body: true, ..
        } => Some(json!({
            "data": null,
            "message": format!("{message}\n"),
        })),
        ApiError::Http {
            json_body: false, ..
        } => None,
    };
    match body {
        Some(b) => json_response(status, Some(&reason), b.to_string(), true),
        None => {
            let mut resp = Response::new(Body::empty());
            *resp.status_mut() = status;
            set_reason(&mut resp, &reason);
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
            resp
        }
    }
}

/// A JSON response with an optional custom reason phrase.
pub(crate) fn json_response(
    status: StatusCode,
    reason: Option<&str>,
    body: String,
    close: bool,
) -> Response<Body> {
    let mut resp = Response::new(Body::from(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json;charset=UTF-8"),
    );
    if close {
        resp.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    if let Some(r) = reason {
        set_reason(&mut resp, r);
    }
    resp
}

/// Sets the HTTP/1 reason phrase (non-visible characters replaced).
fn set_reason(resp: &mut Response<Body>, reason: &str) {
    let clean: String = reason
        .chars()
        .map(|c| {
            if c == '\t' || (' '..='~').contains(&c) {
                c
            } else {
                '?'
            }
        })
        .collect();
    if clean.is_empty() {
        return;
    }
    if let Ok(p) = hyper::ext::ReasonPhrase::try_from(clean.into_bytes()) {
        resp.extensions_mut().insert(p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_json(r: Response<Body>) -> Value {
        let b = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        serde_json::from_slice(&b).unwrap()
    }

    #[tokio::test]
    async fn param_error_shape() {
        let r = error_response(&ApiError::param("vmid", "VM 105 already exists"));
        assert_eq!(r.status(), 400);
        assert_eq!(r.headers()["connection"], "close");
        assert_eq!(
            r.extensions()
                .get::<hyper::ext::ReasonPhrase>()
                .unwrap()
                .as_bytes(),
            b"Parameter verification failed."
        );
        assert_eq!(
            body_json(r).await,
            json!({"data": null, "errors": {"vmid": "VM 105 already exists"},
                   "message": "Parameter verification failed.\n"})
        );
    }

    #[tokio::test]
    async fn runtime_error_and_401() {
        let r = error_response(&ApiError::internal("VM 105 is running - destroy failed"));
        assert_eq!(r.status(), 500);
        assert_eq!(
            body_json(r).await,
            json!({"data": null, "message": "VM 105 is running - destroy failed\n"})
        );
        let r = error_response(&ApiError::unauthorized("authentication failure"));
        assert_eq!(r.status(), 401);
        let b = axum::body::to_bytes(r.into_body(), 100).await.unwrap();
        assert!(b.is_empty());
    }

    #[tokio::test]
    async fn ok_with_total() {
        let r = ok_response(Reply {
            data: json!([1]),
            total: Some(1),
        });
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("connection").is_none());
        assert_eq!(body_json(r).await, json!({"data": [1], "total": 1}));
    }
}
