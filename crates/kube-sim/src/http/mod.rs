//! The HTTPS front: bearer-token authentication, routing of discovery, OpenAPI, health and
//! resource paths, and `metav1.Status` error responses.

pub mod discovery;
pub mod negotiate;
pub mod openapi;
pub mod path;
pub mod query;
pub mod resource;
pub mod scale;
pub mod table;
pub mod watch;

use crate::api_error::ApiError;
use crate::engine::Engine;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use path::Route;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;

/// Shared state of the HTTP layer.
pub struct App {
    /// The API semantics.
    pub engine: Arc<Engine>,
    /// The bearer token clients must present.
    token: String,
    /// `host:port` the server listens on (for `/api`).
    pub server_address: String,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("server_address", &self.server_address)
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl App {
    /// Builds the HTTP state.
    pub fn new(
        engine: Arc<Engine>,
        token: String,
        server_address: String,
        bookmark_interval: Duration,
    ) -> App {
        App {
            engine,
            token,
            server_address,
            bookmark_interval,
        }
    }
}

/// The axum router (one fallback handler that routes by path).
pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .fallback(dispatch)
        .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
        .with_state(app)
}

/// A JSON response with optional `Warning` headers.
pub fn json_response<T: serde::Serialize + ?Sized>(
    code: StatusCode,
    body: &T,
    warnings: &[String],
    content_type: &str,
) -> Response {
    let mut resp = (code, serde_json::to_vec(body).unwrap_or_default()).into_response();
    let h = resp.headers_mut();
    if let Ok(ct) = HeaderValue::from_str(content_type) {
        h.insert(header::CONTENT_TYPE, ct);
    }
    for w in warnings {
        if let Ok(v) =
            HeaderValue::from_str(&format!("299 - {}", serde_json::Value::String(w.clone())))
        {
            h.append(header::WARNING, v);
        }
    }
    resp
}

/// The `metav1.Status` response of an error.
pub fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = json_response(code, &e.to_status(), &[], "application/json");
    if let Some(secs) = e.retry_after {
        resp.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    let Some(v) = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let Some(tok) = v.strip_prefix("Bearer ") else {
        return false;
    };
    let (a, b) = (tok.trim().as_bytes(), app.token.as_bytes());
    // constant time for equal lengths
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

async fn dispatch(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let route = path::parse(uri.path());
    if route == Route::Health {
        return (StatusCode::OK, "ok").into_response();
    }
    if !authorized(&app, &headers) {
        return error_response(&ApiError::unauthorized());
    }
    let ok = |v: Value| json_response(StatusCode::OK, &v, &[], "application/json");
    let not_found = || error_response(&ApiError::no_route(uri.path()));
    if method != Method::GET && !matches!(route, Route::Resource(_)) {
        return error_response(&ApiError::method_not_allowed());
    }
    match route {
        Route::Health => (StatusCode::OK, "ok").into_response(),
        Route::Version => ok(discovery::version()),
        Route::CoreVersions => ok(discovery::core_versions(&app.server_address)),
        Route::Groups => ok(discovery::groups(&app.engine.registry())),
        Route::Group(g) => discovery::group(&app.engine.registry(), &g)
            .map(ok)
            .unwrap_or_else(not_found),
        Route::Resources { group, version } => {
            discovery::resources(&app.engine.registry(), &group, &version)
                .map(ok)
                .unwrap_or_else(not_found)
        }
        Route::OpenApiV3 => ok(openapi::index(&app.engine.registry())),
        Route::OpenApiV3Doc { group, version } => {
            openapi::document(&app.engine.registry(), &group, &version)
                .map(ok)
                .unwrap_or_else(not_found)
        }
        Route::OpenApiV2 | Route::Unknown => not_found(),
        Route::Resource(p) => {
            let q = query::Query::parse(uri.query());
            // A request that may call a webhook runs on a blocking thread: the
            // engine waits for the webhook's answer synchronously.
            if app.engine.may_call_webhooks(&p.group, &p.plural)
                && !(method == Method::GET && q.flag("watch"))
            {
                let app = app.clone();
                let result = tokio::task::spawn_blocking(move || {
                    resource::handle(&app, &method, p, &q, &headers, &body)
                })
                .await;
                return match result {
                    Ok(Ok(r)) => r,
                    Ok(Err(e)) => error_response(&e),
                    Err(e) => error_response(&ApiError::internal(e.to_string())),
                };
            }
            match resource::handle(&app, &method, p, &q, &headers, &body) {
                Ok(r) => r,
                Err(e) => error_response(&e),
            }
        }
    }
}
