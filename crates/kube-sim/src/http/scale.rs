//! `.../{name}/scale` of custom resources with `subresources.scale`: `GET`, `PUT` and
//! `PATCH` (JSON patch, merge patch, server-side apply) of `autoscaling/v1` `Scale`
//! objects, the way `kubectl scale` and the client-go scale client use them. Answers are
//! always JSON `Scale` objects (no Table form).

use super::json_response;
use super::query::Query;
use super::resource::{header_str, parse_body, write_options};
use crate::api_error::{ApiError, Cause};
use crate::engine::{Engine, Target, Written};
use crate::patch::PatchType;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;

const PATCH_TYPES: [&str; 3] = [
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/apply-patch+yaml",
];

fn written(w: &Written) -> Response {
    json_response(StatusCode::OK, &w.object, &w.warnings, "application/json")
}

/// Handles a request on `.../{name}/scale`. `405` for verbs other than `GET`, `PUT`
/// and `PATCH`; `415` for strategic merge patch (not served for custom resources).
pub fn handle(
    engine: &Engine,
    method: &Method,
    t: &Target,
    name: &str,
    q: &Query,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    match *method {
        Method::GET => {
            let scale = engine.get_scale(t, name)?;
            Ok(json_response(
                StatusCode::OK,
                &scale,
                &[],
                "application/json",
            ))
        }
        Method::PUT => {
            let opts = write_options(q, headers)?;
            let scale = parse_body(headers, body)?;
            Ok(written(&engine.update_scale(t, name, scale, &opts)?))
        }
        Method::PATCH => {
            let opts = write_options(q, headers)?;
            let ct = header_str(headers, header::CONTENT_TYPE).unwrap_or("");
            let pt = PatchType::from_content_type(ct)
                .ok_or_else(|| ApiError::unsupported_media_type(&PATCH_TYPES))?;
            if opts.force && pt != PatchType::Apply {
                return Err(ApiError::invalid(
                    "meta.k8s.io",
                    "PatchOptions",
                    "",
                    vec![Cause::new(
                        "FieldValueForbidden",
                        "force",
                        "Forbidden: may not be specified for non-apply patch",
                    )],
                ));
            }
            Ok(written(&engine.patch_scale(t, name, pt, body, &opts)?))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
