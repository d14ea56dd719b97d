//! Get, list (selectors, `limit`/`continue`, `resourceVersion` semantics) and the start of
//! a watch (initial state and subscription taken atomically).

use super::{Engine, Target, to_view};
use crate::api_error::{ApiError, Cause};
use crate::resource::View;
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{ObjKey, Subscription};
use base64::Engine as _;
use serde_json::{Value, json};
use std::ops::Bound;
use std::sync::Arc;

/// List and watch query options.
#[derive(Clone, Debug, Default)]
pub struct ListOptions {
    /// `labelSelector`.
    pub label_selector: String,
    /// `fieldSelector`.
    pub field_selector: String,
    /// `limit` (page size).
    pub limit: Option<u64>,
    /// `continue`.
    pub continue_token: Option<String>,
    /// `resourceVersion`.
    pub resource_version: Option<String>,
    /// `resourceVersionMatch` (`NotOlderThan`, `Exact`).
    pub resource_version_match: Option<String>,
}

/// A page of a list.
#[derive(Clone, Debug)]
pub struct ListResult<T = Value> {
    /// Items in the request's version (`Value`), or in stored form (`Arc<Value>`,
    /// from [`Engine::list_stored`]: serialise them through [`super::view_ref`]).
    pub items: Vec<T>,
    /// The list's `resourceVersion`.
    pub resource_version: u64,
    /// `continue` token when more items follow.
    pub continue_token: Option<String>,
    /// `remainingItemCount` when more items follow.
    pub remaining: Option<u64>,
}

/// The start of a watch.
#[derive(Debug)]
pub struct WatchStart {
    /// Objects to send as synthetic `ADDED` events first (stored form, namespace-filtered).
    pub initial: Vec<Arc<Value>>,
    /// Subscription to later changes.
    pub sub: Subscription,
    /// Events at or below this version are not sent.
    pub start_rv: u64,
}

/// Parsed selectors of a request.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    /// Labels.
    pub labels: LabelSelector,
    /// Fields.
    pub fields: FieldSelector,
}

impl Selectors {
    /// Parses the selectors of a request against the target's field labels (`400` on
    /// errors).
    pub fn parse(t: &Target, opts: &ListOptions) -> Result<Selectors, ApiError> {
        let v = t.version_def()?;
        Ok(Selectors {
            labels: LabelSelector::parse(&opts.label_selector)?,
            fields: FieldSelector::parse(&opts.field_selector, &v.field_labels())?,
        })
    }

    /// Whether a stored object matches (converted to the target's view for field
    /// selectors).
    pub fn matches(&self, t: &Target, stored: &Value) -> bool {
        if !self.labels.matches(stored) {
            return false;
        }
        if self.fields.is_empty() {
            return true;
        }
        if t.rt.view == View::Plain {
            self.fields.matches(stored)
        } else {
            // Only EventsV1 views differ here, and they never convert by webhook.
            to_view(&t.rt, &t.version, stored).is_ok_and(|v| self.fields.matches(&v))
        }
    }
}

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let raw = json!({"rv": rv, "ns": last.namespace, "name": last.name}).to_string();
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

fn decode_continue(token: &str) -> Result<(u64, ObjKey), ApiError> {
    let bad = || ApiError::bad_request("continue key is not valid: illegal base64 data or JSON");
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(token)
        .map_err(|_| bad())?;
    let v: Value = serde_json::from_slice(&raw).map_err(|_| bad())?;
    let rv = v.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = v.get("ns").and_then(Value::as_str).ok_or_else(bad)?;
    let name = v.get("name").and_then(Value::as_str).ok_or_else(bad)?;
    Ok((rv, ObjKey::new(ns, name)))
}

fn parse_rv(s: &str) -> Result<u64, ApiError> {
    s.parse::<u64>().map_err(|_| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: {s:?}: must be a non-negative integer"
        ))
    })
}

const EXPIRED_CONTINUE: &str = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.";

impl Engine {
    /// Reads one object in the request's version (`404` when missing).
    pub fn get(&self, t: &Target, name: &str) -> Result<Value, ApiError> {
        let obj = self.get_stored(t, name)?;
        to_view(&t.rt, &t.version, &obj)
    }

    /// Reads one object in stored form (`404` when missing); serve it through
    /// [`super::view_ref`].
    pub fn get_stored(&self, t: &Target, name: &str) -> Result<Arc<Value>, ApiError> {
        t.version_def()?;
        self.lock()
            .get(&t.rt.storage, &t.key(name))
            .ok_or_else(|| t.not_found(name))
    }

    /// Lists objects. `400` for bad selectors or tokens, `410` for an expired `continue`
    /// token or an `Exact` version that is not the current one, `504` for a version
    /// newer than the server's.
    pub fn list(&self, t: &Target, opts: &ListOptions) -> Result<ListResult, ApiError> {
        let res = self.list_stored(t, opts)?;
        Ok(ListResult {
            items: super::to_views(&t.rt, &t.version, &res.items)?,
            resource_version: res.resource_version,
            continue_token: res.continue_token,
            remaining: res.remaining,
        })
    }

    /// As [`Engine::list`], the items in stored form.
    ///
    /// # Errors
    /// As [`Engine::list`].
    pub fn list_stored(
        &self,
        t: &Target,
        opts: &ListOptions,
    ) -> Result<ListResult<Arc<Value>>, ApiError> {
        let sel = Selectors::parse(t, opts)?;
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        if opts.continue_token.is_some() && rv_param.is_some_and(|r| r != "0") {
            return Err(ApiError::bad_request(
                "specifying resource version is not allowed when using continue",
            ));
        }
        if opts.resource_version_match.is_some() && rv_param.is_none() {
            return Err(ApiError::invalid(
                "meta.k8s.io",
                "ListOptions",
                "",
                vec![Cause::new(
                    "FieldValueForbidden",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
                )],
            ));
        }
        let continued = match &opts.continue_token {
            Some(tok) if !tok.is_empty() => Some(decode_continue(tok)?),
            _ => None,
        };
        let (raw, rv, next, remaining) = {
            let st = self.lock();
            if let Some(r) = rv_param.filter(|r| *r != "0") {
                let want = parse_rv(r)?;
                if want > st.rv {
                    return Err(ApiError::too_large_resource_version(want, st.rv));
                }
                if opts.resource_version_match.as_deref() == Some("Exact") && want != st.rv {
                    return Err(ApiError::gone(format!(
                        "too old resource version: {want} ({})",
                        st.rv
                    )));
                }
            }
            let (list_rv, start) = match &continued {
                Some((tok_rv, last)) => {
                    if *tok_rv < st.floor(&t.rt.storage) {
                        return Err(ApiError::gone(EXPIRED_CONTINUE));
                    }
                    (*tok_rv, Bound::Excluded(last.clone()))
                }
                None => {
                    let ns = t.ns();
                    let b = if ns.is_empty() {
                        Bound::Unbounded
                    } else {
                        Bound::Included(ObjKey::new(ns, ""))
                    };
                    (st.rv, b)
                }
            };
            let mut items: Vec<Arc<Value>> = Vec::new();
            let mut next = None;
            let mut remaining = 0u64;
            let ns = t.ns().to_string();
            if let Some(objs) = st.objects(&t.rt.storage) {
                for (k, obj) in objs.range((start, Bound::Unbounded)) {
                    if !ns.is_empty() && k.namespace != ns {
                        if k.namespace > ns {
                            break;
                        }
                        continue;
                    }
                    if !sel.matches(t, obj) {
                        continue;
                    }
                    match opts.limit {
                        Some(l) if l > 0 && items.len() as u64 >= l => {
                            if next.is_none() {
                                let last = items
                                    .last()
                                    .map(|o| {
                                        ObjKey::new(crate::json::namespace(o), crate::json::name(o))
                                    })
                                    .unwrap_or_else(|| k.clone());
                                next = Some(encode_continue(list_rv, &last));
                            }
                            remaining += 1;
                        }
                        _ => items.push(obj.clone()),
                    }
                }
            }
            (items, list_rv, next, remaining)
        };
        Ok(ListResult {
            items: raw,
            resource_version: rv,
            // unknown (unset) when selectors filter the list, as kube-apiserver does
            remaining: next
                .as_ref()
                .filter(|_| opts.label_selector.is_empty() && opts.field_selector.is_empty())
                .map(|_| remaining),
            continue_token: next,
        })
    }

    /// Starts a watch: with `resourceVersion` unset or `"0"` (or `sendInitialEvents`)
    /// the current objects come first as `ADDED`; with a version, every change after it.
    /// `410 Gone` when that version is older than the kept history.
    pub fn watch_start(
        &self,
        t: &Target,
        opts: &ListOptions,
        send_initial: bool,
    ) -> Result<WatchStart, ApiError> {
        t.version_def()?;
        let rv_param = opts.resource_version.as_deref().filter(|s| !s.is_empty());
        let st = self.lock();
        let ns = t.ns().to_string();
        let snapshot = |from: u64| -> Vec<Arc<Value>> {
            let _ = from;
            st.objects(&t.rt.storage)
                .map(|m| {
                    m.iter()
                        .filter(|(k, _)| ns.is_empty() || k.namespace == ns)
                        .map(|(_, v)| v.clone())
                        .collect()
                })
                .unwrap_or_default()
        };
        match rv_param {
            Some(r) if r != "0" && !send_initial => {
                let from = parse_rv(r)?;
                match st.subscribe(&t.rt.storage, from) {
                    Ok(sub) => Ok(WatchStart {
                        initial: Vec::new(),
                        sub,
                        start_rv: from,
                    }),
                    Err(floor) => Err(ApiError::gone(format!(
                        "too old resource version: {from} ({floor})"
                    ))),
                }
            }
            _ => {
                let now = st.rv;
                let initial = snapshot(now);
                let sub = st
                    .subscribe(&t.rt.storage, now)
                    .map_err(|_| ApiError::internal("watch history unavailable"))?;
                Ok(WatchStart {
                    initial,
                    sub,
                    start_rv: now,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_tokens_round_trip_and_reject_garbage() {
        let tok = encode_continue(42, &ObjKey::new("ns", "w3"));
        assert_eq!(
            decode_continue(&tok).expect("valid"),
            (42, ObjKey::new("ns", "w3"))
        );
        assert_eq!(decode_continue("!!").expect_err("garbage").code, 400);
    }
}
