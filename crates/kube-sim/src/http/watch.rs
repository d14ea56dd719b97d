//! Watch streams: newline-delimited `{"type": ..., "object": ...}` events over a chunked
//! `200` response, fed by the resource's broadcast channel (no polling).
//!
//! - `resourceVersion` unset or `"0"`, or `sendInitialEvents=true`: synthetic `ADDED`
//!   events for the current objects first (then, with `sendInitialEvents`, a `BOOKMARK`
//!   annotated `k8s.io/initial-events-end: "true"`);
//! - a version older than the kept history: one `ERROR` event with a `410 Expired`
//!   Status, as kube-apiserver's watch cache answers;
//! - `allowWatchBookmarks=true`: a `BOOKMARK` every bookmark interval carrying a version
//!   up to which every event has been sent;
//! - selectors: an object that stops matching is sent as `DELETED`, one that starts
//!   matching as `ADDED`;
//! - a watcher too slow for the broadcast buffer gets a `410` `ERROR` event and the
//!   stream ends (the client relists); the stream ends at `timeoutSeconds`.

use super::App;
use super::negotiate::Output;
use super::table::{IncludeObject, partial_metadata, table};
use crate::api_error::ApiError;
use crate::engine::{ListOptions, Selectors, Target, WatchStart, to_view, view_ref};
use crate::store::{EventType, Subscription, WatchRecord};
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// Watch request parameters beyond the list options.
#[derive(Clone, Debug)]
pub struct WatchParams {
    /// `timeoutSeconds` (default 1800).
    pub timeout: Duration,
    /// `allowWatchBookmarks`.
    pub bookmarks: bool,
    /// `sendInitialEvents`.
    pub send_initial: bool,
    /// Response representation.
    pub output: Output,
    /// `includeObject` for Table output.
    pub include: IncludeObject,
}

fn line(kind: &str, object: Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    v.push(b'\n');
    Bytes::from(v)
}

struct Renderer {
    t: Target,
    sel: Selectors,
    output: Output,
    include: IncludeObject,
}

impl Renderer {
    fn render(&self, stored: &Value) -> Result<Value, ApiError> {
        let view = to_view(&self.t.rt, &self.t.version, stored)?;
        Ok(match self.output {
            Output::Json => view,
            Output::Meta => partial_metadata(&view),
            Output::Table { beta } => {
                let v = self.t.rt.served_version(&self.t.version).cloned();
                match v {
                    Some(v) => table(&self.t.rt, &v, &[view], json!({}), self.include, beta),
                    None => view,
                }
            }
        })
    }

    /// An event line, or an `ERROR` event when the object cannot be
    /// served (its conversion webhook failed).
    fn rendered_line(&self, kind: &str, stored: &Value) -> Bytes {
        match self.render(stored) {
            Ok(v) => line(kind, v),
            Err(e) => line("ERROR", e.to_status()),
        }
    }

    fn in_scope(&self, obj: &Value) -> bool {
        let ns = self.t.ns();
        ns.is_empty() || crate::json::namespace(obj) == ns
    }

    fn matches(&self, obj: &Value) -> bool {
        self.in_scope(obj) && self.sel.matches(&self.t, obj)
    }

    fn event(&self, rec: &WatchRecord) -> Option<Bytes> {
        let now = self.matches(&rec.object);
        let before = rec.prev.as_deref().is_some_and(|p| self.matches(p));
        let kind = match rec.kind {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => "DELETED",
            EventType::Deleted if now || before => "DELETED",
            _ => return None,
        };
        if self.output == Output::Json {
            return Some(self.json_line(kind, rec));
        }
        Some(self.rendered_line(kind, &rec.object))
    }

    /// The event line for JSON output: the object is encoded once per
    /// record and version and shared by every watcher (the bytes equal
    /// [`line`] over [`Renderer::render`]).
    fn json_line(&self, kind: &str, rec: &WatchRecord) -> Bytes {
        if self.t.rt.conversion.is_some() {
            // Converted per watcher (a blocking call to the webhook).
            return self.object_line(kind, &rec.object);
        }
        let (version, cached) = rec.encoded.get_or_init(|| {
            // Without a conversion webhook encoding cannot fail.
            (
                self.t.version.clone(),
                self.encode(&rec.object).unwrap_or_default(),
            )
        });
        if *version == self.t.version {
            framed(kind, cached)
        } else {
            framed(kind, &self.encode(&rec.object).unwrap_or_default())
        }
    }

    /// An object line (`ADDED` of the initial list and the like).
    fn object_line(&self, kind: &str, stored: &Value) -> Bytes {
        if self.output == Output::Json {
            match self.encode(stored) {
                Ok(b) => framed(kind, &b),
                Err(e) => line("ERROR", e.to_status()),
            }
        } else {
            self.rendered_line(kind, stored)
        }
    }

    /// A stored object as JSON in the watched version.
    fn encode(&self, stored: &Value) -> Result<Vec<u8>, ApiError> {
        Ok(serde_json::to_vec(&view_ref(&self.t.rt, &self.t.version, stored)?).unwrap_or_default())
    }
}

/// `{"object":<object>,"type":"<kind>"}` and a newline, as [`line`] writes it.
fn framed(kind: &str, object: &[u8]) -> Bytes {
    let mut v = Vec::with_capacity(object.len() + kind.len() + 24);
    v.extend_from_slice(br#"{"object":"#);
    v.extend_from_slice(object);
    v.extend_from_slice(br#","type":""#);
    v.extend_from_slice(kind.as_bytes());
    v.extend_from_slice(b"\"}\n");
    Bytes::from(v)
}

impl Renderer {
    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (av, kind) = match self.output {
            Output::Json => (self.t.api_version(), self.t.rt.kind.clone()),
            Output::Meta => (
                "meta.k8s.io/v1".to_string(),
                "PartialObjectMetadata".to_string(),
            ),
            Output::Table { .. } => ("meta.k8s.io/v1".to_string(), "Table".to_string()),
        };
        let mut meta = json!({"resourceVersion": rv.to_string()});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line(
            "BOOKMARK",
            json!({"apiVersion": av, "kind": kind, "metadata": meta}),
        )
    }
}

fn streaming(rx: mpsc::Receiver<Bytes>, output: Output) -> Response {
    let mut rx = rx;
    let stream = futures::stream::poll_fn(move |cx| {
        rx.poll_recv(cx)
            .map(|o| o.map(Ok::<Bytes, std::convert::Infallible>))
    });
    let ct = match output {
        Output::Table { .. } => "application/json;as=Table;v=v1;g=meta.k8s.io",
        _ => "application/json",
    };
    (
        StatusCode::OK,
        [
            (header::CONTENT_TYPE, ct),
            (header::CACHE_CONTROL, "no-cache, private"),
        ],
        Body::from_stream(stream),
    )
        .into_response()
}

fn expired(e: &ApiError, output: Output) -> Response {
    let (tx, rx) = mpsc::channel(1);
    let _ = tx.try_send(line("ERROR", e.to_status()));
    streaming(rx, output)
}

/// The line of a record (`None`: not for this watcher). With a conversion
/// webhook the conversion is a blocking call: it runs on a blocking thread.
async fn event_line(r: &Arc<Renderer>, rec: &Arc<WatchRecord>) -> Option<Bytes> {
    if r.t.rt.conversion.is_none() {
        return r.event(rec);
    }
    let (r, rec) = (r.clone(), rec.clone());
    tokio::task::spawn_blocking(move || r.event(&rec))
        .await
        .ok()
        .flatten()
}

/// The `ADDED` line of an initial object (see [`event_line`]).
async fn added_line(r: &Arc<Renderer>, obj: &Arc<Value>) -> Option<Bytes> {
    if r.t.rt.conversion.is_none() {
        return Some(r.object_line("ADDED", obj));
    }
    let (r, obj) = (r.clone(), obj.clone());
    tokio::task::spawn_blocking(move || r.object_line("ADDED", &obj))
        .await
        .ok()
}

/// Serves a watch request.
pub fn serve(
    app: &Arc<App>,
    t: Target,
    opts: ListOptions,
    params: WatchParams,
) -> Result<Response, ApiError> {
    let sel = Selectors::parse(&t, &opts)?;
    let start = match app.engine.watch_start(&t, &opts, params.send_initial) {
        Ok(s) => s,
        Err(e) if e.code == 410 => return Ok(expired(&e, params.output)),
        Err(e) => return Err(e),
    };
    let r = Arc::new(Renderer {
        t,
        sel,
        output: params.output,
        include: params.include,
    });
    let (tx, rx) = mpsc::channel::<Bytes>(256);
    let engine = app.engine.clone();
    let interval = app.bookmark_interval;
    let WatchStart {
        initial,
        sub,
        start_rv,
    } = start;
    let Subscription {
        backlog,
        rx: mut events,
    } = sub;
    tokio::spawn(async move {
        for obj in &initial {
            if r.matches(obj)
                && let Some(l) = added_line(&r, obj).await
                && tx.send(l).await.is_err()
            {
                return;
            }
        }
        if params.send_initial && tx.send(r.bookmark(start_rv, true)).await.is_err() {
            return;
        }
        for rec in &backlog {
            if rec.rv > start_rv
                && let Some(ev) = event_line(&r, rec).await
                && tx.send(ev).await.is_err()
            {
                return;
            }
        }
        let deadline = tokio::time::sleep(params.timeout);
        tokio::pin!(deadline);
        let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
        loop {
            tokio::select! {
                _ = &mut deadline => return,
                _ = tx.closed() => return,
                _ = tick.tick(), if params.bookmarks => {
                    // Everything committed up to `rv` is already in the channel: send it
                    // first, then the bookmark.
                    let rv = engine.current_rv();
                    loop {
                        match events.try_recv() {
                            Ok(rec) => {
                                if rec.rv > start_rv
                                    && let Some(ev) = event_line(&r, &rec).await
                                    && tx.send(ev).await.is_err()
                                {
                                    return;
                                }
                            }
                            Err(broadcast::error::TryRecvError::Empty) => break,
                            Err(broadcast::error::TryRecvError::Lagged(_)) => {
                                let _ = tx.send(line("ERROR", ApiError::gone("too old resource version: watcher fell behind").to_status())).await;
                                return;
                            }
                            Err(broadcast::error::TryRecvError::Closed) => return,
                        }
                    }
                    if tx.send(r.bookmark(rv.max(start_rv), false)).await.is_err() {
                        return;
                    }
                }
                rec = events.recv() => match rec {
                    Ok(rec) => {
                        if rec.rv > start_rv
                            && let Some(ev) = event_line(&r, &rec).await
                            && tx.send(ev).await.is_err()
                        {
                            return;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        let _ = tx.send(line("ERROR", ApiError::gone("too old resource version: watcher fell behind").to_status())).await;
                        return;
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        }
    });
    Ok(streaming(rx, params.output))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin;

    fn renderer(version: &str) -> Renderer {
        let rt = builtin::all()
            .into_iter()
            .find(|r| r.kind == "Secret")
            .map(Arc::new)
            .unwrap();
        let t = Target {
            rt,
            version: version.into(),
            namespace: Some("ns".into()),
        };
        let sel = Selectors::parse(&t, &ListOptions::default()).unwrap();
        Renderer {
            t,
            sel,
            output: Output::Json,
            include: IncludeObject::default(),
        }
    }

    #[test]
    fn shared_json_lines_equal_the_rendered_ones() {
        let r = renderer("v1");
        let object = json!({
            "apiVersion": "v1", "data": {"k": "dg=="},
            "metadata": {"name": "s", "namespace": "ns", "resourceVersion": "7"},
            "type": "Opaque"
        });
        let rec = WatchRecord {
            rv: 7,
            kind: EventType::Modified,
            object: Arc::new(object.clone()),
            prev: Some(Arc::new(object)),
            encoded: std::sync::OnceLock::new(),
        };
        let want = concat!(
            r#"{"object":{"apiVersion":"v1","data":{"k":"dg=="},"kind":"Secret","#,
            r#""metadata":{"name":"s","namespace":"ns","resourceVersion":"7"},"type":"Opaque"},"#,
            r#""type":"MODIFIED"}"#,
            "\n"
        );
        let first = r.event(&rec).unwrap();
        assert_eq!(std::str::from_utf8(&first).unwrap(), want);
        assert_eq!(first, line("MODIFIED", r.render(&rec.object).unwrap()));
        // A second watcher reuses the encoding.
        assert!(rec.encoded.get().is_some());
        assert_eq!(renderer("v1").event(&rec).unwrap(), first);
        assert_eq!(
            r.object_line("ADDED", &rec.object),
            line("ADDED", r.render(&rec.object).unwrap())
        );
    }
}
