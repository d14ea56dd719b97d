//! REST verbs on resource paths: query parameters and bodies to engine calls, engine
//! results to responses (objects, lists, Tables, `PartialObjectMetadata`, Status).

use super::negotiate::{Output, negotiate};
use super::path::ResourcePath;
use super::query::Query;
use super::table::{IncludeObject, partial_metadata, partial_metadata_list, table};
use super::watch::{self, WatchParams};
use super::{App, json_response};
use crate::api_error::{ApiError, Cause};
use crate::engine::{
    DeleteOptions, DeleteOutcome, FieldValidation, ListOptions, ListResult, Propagation,
    Subresource, Target, ViewRef, WriteOptions, Written, to_view, view_ref,
};
use crate::patch::PatchType;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

pub(super) fn header_str(h: &HeaderMap, name: header::HeaderName) -> Option<&str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

fn list_options(q: &Query) -> Result<ListOptions, ApiError> {
    let limit = match q.non_empty("limit") {
        Some(l) => Some(
            l.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid limit {l:?}")))?,
        ),
        None => None,
    };
    Ok(ListOptions {
        label_selector: q.get("labelSelector").unwrap_or("").to_string(),
        field_selector: q.get("fieldSelector").unwrap_or("").to_string(),
        limit,
        continue_token: q.non_empty("continue"),
        resource_version: q.non_empty("resourceVersion"),
        resource_version_match: q.non_empty("resourceVersionMatch"),
    })
}

pub(super) fn write_options(q: &Query, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
    let dry_run = match q.get("dryRun") {
        None | Some("") => false,
        Some("All") => true,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "Invalid dry run value: {other}"
            )));
        }
    };
    let field_validation = match q.get("fieldValidation") {
        None | Some("") | Some("Warn") => FieldValidation::Warn,
        Some("Ignore") => FieldValidation::Ignore,
        Some("Strict") => FieldValidation::Strict,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "fieldValidation parameter unsupported: {other:?}"
            )));
        }
    };
    let ua = header_str(headers, header::USER_AGENT).unwrap_or("");
    let default_manager = match ua.split('/').next() {
        Some(p) if !p.trim().is_empty() => p.trim().to_string(),
        _ => "unknown".to_string(),
    };
    Ok(WriteOptions {
        dry_run,
        field_manager: q.non_empty("fieldManager"),
        default_manager,
        field_validation,
        force: q.flag("force"),
    })
}

fn propagation(s: &str) -> Result<Propagation, ApiError> {
    match s {
        "Orphan" => Ok(Propagation::Orphan),
        "Background" => Ok(Propagation::Background),
        "Foreground" => Ok(Propagation::Foreground),
        other => Err(ApiError::invalid(
            "meta.k8s.io",
            "DeleteOptions",
            "",
            vec![Cause::new(
                "FieldValueNotSupported",
                "propagationPolicy",
                format!(
                    "Unsupported value: {other:?}: supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            )],
        )),
    }
}

fn delete_options(q: &Query, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut o = DeleteOptions::default();
    if !body.is_empty() {
        let v: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
        if let Some(p) = v.get("propagationPolicy").and_then(Value::as_str) {
            o.propagation = Some(propagation(p)?);
        }
        o.orphan_dependents = v.get("orphanDependents").and_then(Value::as_bool);
        o.uid = v
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.resource_version = v
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string);
        o.dry_run = v
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|x| x == "All"));
    }
    if let Some(p) = q.non_empty("propagationPolicy") {
        o.propagation = Some(propagation(&p)?);
    }
    if let Some(b) = q.non_empty("orphanDependents") {
        o.orphan_dependents = Some(b == "true");
    }
    if q.get("dryRun") == Some("All") {
        o.dry_run = true;
    }
    Ok(o)
}

pub(super) fn parse_body(headers: &HeaderMap, body: &[u8]) -> Result<Value, ApiError> {
    let ct = header_str(headers, header::CONTENT_TYPE).unwrap_or("application/json");
    let media = ct.split(';').next().unwrap_or("").trim();
    match media {
        "" | "application/json" | "*/*" => serde_json::from_slice(body).map_err(|e| {
            ApiError::bad_request(format!("the body of the request could not be decoded: {e}"))
        }),
        "application/yaml" => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request("the body of the request is not UTF-8"))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))
        }
        _ => Err(ApiError::unsupported_media_type(&[
            "application/json",
            "application/yaml",
        ])),
    }
}

fn respond_object(
    t: &Target,
    output: Output,
    obj: &Value,
    code: StatusCode,
    warnings: &[String],
    include: IncludeObject,
) -> Response {
    match output {
        Output::Json => json_response(code, obj, warnings, "application/json"),
        Output::Meta => json_response(code, &partial_metadata(obj), warnings, "application/json"),
        Output::Table { beta } => match t.rt.served_version(&t.version) {
            Some(v) => json_response(
                code,
                &table(
                    &t.rt,
                    v,
                    std::slice::from_ref(obj),
                    json!({"resourceVersion": crate::json::resource_version(obj)}),
                    include,
                    beta,
                ),
                warnings,
                "application/json;as=Table;v=v1;g=meta.k8s.io",
            ),
            None => json_response(code, obj, warnings, "application/json"),
        },
    }
}

fn written(t: &Target, output: Output, w: Written) -> Response {
    let code = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    respond_object(
        t,
        output,
        &w.object,
        code,
        &w.warnings,
        IncludeObject::Metadata,
    )
}

/// A JSON list response over stored objects; fields in the order
/// `serde_json` writes a `json!` document (sorted keys), so the bytes equal
/// those of the list built from copied views.
#[derive(serde::Serialize)]
struct StoredList<'a> {
    #[serde(rename = "apiVersion")]
    api_version: String,
    items: Vec<ViewRef<'a>>,
    kind: &'a str,
    metadata: Value,
}

/// A list's `metadata`: `resourceVersion`, `continue`, `remainingItemCount`.
fn list_meta<T>(res: &ListResult<T>) -> Value {
    let mut meta = json!({"resourceVersion": res.resource_version.to_string()});
    if let Some(c) = &res.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(r) = res.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    meta
}

/// Handles a request on a resource path.
pub fn handle(
    app: &Arc<App>,
    method: &Method,
    p: ResourcePath,
    q: &Query,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<Response, ApiError> {
    let not_found = || ApiError::no_route(&format!("{}/{}", p.version, p.plural));
    let rt = app
        .engine
        .resolve(&p.group, &p.version, &p.plural)
        .ok_or_else(not_found)?;
    if !rt.namespaced && p.namespace.is_some() {
        return Err(not_found());
    }
    let t = Target {
        rt,
        version: p.version.clone(),
        namespace: p.namespace.clone(),
    };
    let v = t.version_def()?.clone();
    let sub = match p.sub.as_deref() {
        None => Subresource::Main,
        Some("status") if v.status_subresource => Subresource::Status,
        Some("scale") if v.scale.is_some() => Subresource::Scale,
        Some(_) => return Err(not_found()),
    };
    let output = negotiate(header_str(headers, header::ACCEPT))?;
    if sub == Subresource::Scale {
        let name = p.name.as_deref().ok_or_else(not_found)?;
        return super::scale::handle(&app.engine, method, &t, name, q, headers, body);
    }
    let include = IncludeObject::parse(q.get("includeObject"));
    let engine = &app.engine;
    match (method.clone(), p.name.as_deref()) {
        (Method::GET, None) => {
            let opts = list_options(q)?;
            if q.flag("watch") {
                let timeout = q
                    .non_empty("timeoutSeconds")
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or(1800);
                let send_initial = q.flag("sendInitialEvents");
                if send_initial && opts.resource_version_match.as_deref() != Some("NotOlderThan") {
                    return Err(ApiError::invalid(
                        "meta.k8s.io",
                        "ListOptions",
                        "",
                        vec![Cause::new(
                            "FieldValueForbidden",
                            "resourceVersionMatch",
                            "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                        )],
                    ));
                }
                return watch::serve(
                    app,
                    t,
                    opts,
                    WatchParams {
                        timeout: Duration::from_secs(timeout),
                        bookmarks: q.flag("allowWatchBookmarks"),
                        send_initial,
                        output,
                        include,
                    },
                );
            }
            if output == Output::Json && t.rt.conversion.is_none() {
                let res = engine.list_stored(&t, &opts)?;
                let doc = StoredList {
                    api_version: t.api_version(),
                    items: res
                        .items
                        .iter()
                        .map(|o| view_ref(&t.rt, &t.version, o))
                        .collect::<Result<_, _>>()?,
                    kind: &t.rt.list_kind,
                    metadata: list_meta(&res),
                };
                return Ok(json_response(StatusCode::OK, &doc, &[], "application/json"));
            }
            let res = engine.list(&t, &opts)?;
            let meta = list_meta(&res);
            let doc = match output {
                Output::Json => json!({
                    "apiVersion": t.api_version(),
                    "kind": t.rt.list_kind,
                    "metadata": meta,
                    "items": res.items
                }),
                Output::Meta => partial_metadata_list(&res.items, meta),
                Output::Table { beta } => table(&t.rt, &v, &res.items, meta, include, beta),
            };
            let ct = if matches!(output, Output::Table { .. }) {
                "application/json;as=Table;v=v1;g=meta.k8s.io"
            } else {
                "application/json"
            };
            Ok(json_response(StatusCode::OK, &doc, &[], ct))
        }
        (Method::GET, Some(name)) if output == Output::Json => {
            let obj = engine.get_stored(&t, name)?;
            Ok(json_response(
                StatusCode::OK,
                &view_ref(&t.rt, &t.version, &obj)?,
                &[],
                "application/json",
            ))
        }
        (Method::GET, Some(name)) => {
            let obj = engine.get(&t, name)?;
            Ok(respond_object(
                &t,
                output,
                &obj,
                StatusCode::OK,
                &[],
                include,
            ))
        }
        (Method::POST, None) if sub == Subresource::Main => {
            if t.rt.namespaced && t.namespace.is_none() {
                return Err(ApiError::method_not_allowed());
            }
            let opts = write_options(q, headers)?;
            let obj = parse_body(headers, body)?;
            Ok(written(&t, output, engine.create(&t, obj, &opts)?))
        }
        (Method::PUT, Some(name)) => {
            let opts = write_options(q, headers)?;
            let obj = parse_body(headers, body)?;
            Ok(written(
                &t,
                output,
                engine.update(&t, name, obj, sub, &opts)?,
            ))
        }
        (Method::PATCH, Some(name)) => {
            let opts = write_options(q, headers)?;
            let ct = header_str(headers, header::CONTENT_TYPE).unwrap_or("");
            let accepted: &[&str] = if t.rt.builtin.is_some() {
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/strategic-merge-patch+json",
                    "application/apply-patch+yaml",
                ]
            } else {
                &[
                    "application/json-patch+json",
                    "application/merge-patch+json",
                    "application/apply-patch+yaml",
                ]
            };
            let pt = PatchType::from_content_type(ct)
                .ok_or_else(|| ApiError::unsupported_media_type(accepted))?;
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
            Ok(written(
                &t,
                output,
                engine.patch(&t, name, pt, body, sub, &opts)?,
            ))
        }
        (Method::DELETE, Some(name)) if sub == Subresource::Main => {
            let opts = delete_options(q, body)?;
            match engine.delete(&t, name, &opts)? {
                DeleteOutcome::Pending(obj) => {
                    let view = to_view(&t.rt, &t.version, &obj)?;
                    Ok(respond_object(
                        &t,
                        output,
                        &view,
                        StatusCode::OK,
                        &[],
                        include,
                    ))
                }
                DeleteOutcome::Deleted(obj) if t.rt.return_deleted_object => {
                    let view = to_view(&t.rt, &t.version, &obj)?;
                    Ok(respond_object(
                        &t,
                        output,
                        &view,
                        StatusCode::OK,
                        &[],
                        include,
                    ))
                }
                DeleteOutcome::Deleted(obj) => {
                    let status = json!({
                        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                        "details": {"name": name, "group": t.rt.group, "kind": t.rt.plural, "uid": crate::json::uid(&obj)}
                    });
                    Ok(json_response(
                        StatusCode::OK,
                        &status,
                        &[],
                        "application/json",
                    ))
                }
            }
        }
        (Method::DELETE, None) if sub == Subresource::Main => {
            let opts = delete_options(q, body)?;
            let list = list_options(q)?;
            let items = engine.delete_collection(&t, &list, &opts)?;
            let doc = json!({
                "apiVersion": t.api_version(),
                "kind": t.rt.list_kind,
                "metadata": {"resourceVersion": engine.current_rv().to_string()},
                "items": items
            });
            Ok(json_response(StatusCode::OK, &doc, &[], "application/json"))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}
