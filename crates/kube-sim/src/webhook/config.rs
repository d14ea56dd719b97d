//! `admissionregistration.k8s.io/v1` `MutatingWebhookConfiguration` and
//! `ValidatingWebhookConfiguration` objects as [`Hook`]s, and which hooks a
//! request meets: `rules` (operations, API groups, versions, resources with
//! `/subresource` and `*` forms, scope), `matchPolicy` (`Equivalent`: another
//! served version of the same resource also matches, the object is then
//! converted for the call), `namespaceSelector` and `objectSelector`.

use std::time::Duration;

use serde_json::Value;

use super::caller::ClientConfig;
use crate::json::strings;
use crate::selector::LabelSelector;

/// One rule of a webhook (`rules[]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    operations: Vec<String>,
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    resources: Vec<String>,
    scope: String,
}

fn any(list: &[String], value: &str) -> bool {
    list.iter().any(|x| x == "*" || x == value)
}

impl Rule {
    fn parse(v: &Value) -> Rule {
        Rule {
            operations: strings(v.get("operations")),
            api_groups: strings(v.get("apiGroups")),
            api_versions: strings(v.get("apiVersions")),
            resources: strings(v.get("resources")),
            scope: v
                .get("scope")
                .and_then(Value::as_str)
                .unwrap_or("*")
                .to_string(),
        }
    }

    /// `resources` entries: `pods` (main resource), `pods/status`, `pods/*`
    /// (every subresource), `*` (every main resource), `*/*` (everything),
    /// `*/status`.
    fn resource_matches(&self, resource: &str, sub: &str) -> bool {
        self.resources.iter().any(|r| {
            let (res, rsub) = r.split_once('/').unwrap_or((r.as_str(), ""));
            (res == "*" || res == resource)
                && (rsub == sub || (rsub == "*" && !sub.is_empty()) || r == "*/*")
        })
    }

    fn matches(&self, a: &Attributes<'_>, version: &str) -> bool {
        let scope_ok = match self.scope.as_str() {
            "Cluster" => !a.namespaced,
            "Namespaced" => a.namespaced,
            _ => true,
        };
        scope_ok
            && any(&self.operations, a.operation)
            && any(&self.api_groups, a.group)
            && any(&self.api_versions, version)
            && self.resource_matches(a.resource, a.subresource)
    }
}

/// What a request is, as rules see it.
#[derive(Clone, Copy, Debug)]
pub struct Attributes<'a> {
    /// `CREATE`, `UPDATE`.
    pub operation: &'a str,
    /// API group.
    pub group: &'a str,
    /// The request's version.
    pub version: &'a str,
    /// Plural resource name.
    pub resource: &'a str,
    /// Subresource ("" for the main resource).
    pub subresource: &'a str,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// Every served version of the resource (for `matchPolicy: Equivalent`).
    pub served: &'a [String],
}

/// One webhook of a configuration, with kube-apiserver's defaults filled in
/// (`failurePolicy: Fail`, `matchPolicy: Equivalent`, empty selectors,
/// `timeoutSeconds: 10`).
#[derive(Clone, Debug)]
pub struct Hook {
    /// The configuration's name.
    pub configuration: String,
    /// The webhook's name (`validation.proxmoxmachine.…`).
    pub name: String,
    /// Where to call it.
    pub client: ClientConfig,
    rules: Vec<Rule>,
    /// `failurePolicy: Fail` (else `Ignore`).
    pub fail: bool,
    equivalent: bool,
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
    /// `sideEffects` (`None`, `NoneOnDryRun`, `Some`, `Unknown`).
    pub side_effects: String,
    /// `timeoutSeconds`.
    pub timeout: Duration,
}

/// A JSON `LabelSelector` (`matchLabels`, `matchExpressions`) in the string
/// form of `crate::selector` (`k=v`, `k in (a,b)`, `k notin (a)`, `k`, `!k`).
///
/// # Errors
/// A message for an unknown operator or a malformed selector.
pub fn label_selector(v: Option<&Value>) -> Result<LabelSelector, String> {
    let mut parts = Vec::new();
    if let Some(m) = v
        .and_then(|s| s.get("matchLabels"))
        .and_then(Value::as_object)
    {
        for (k, val) in m {
            parts.push(format!("{k}={}", val.as_str().unwrap_or("")));
        }
    }
    for e in v
        .and_then(|s| s.get("matchExpressions"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let key = e.get("key").and_then(Value::as_str).unwrap_or("");
        let values = strings(e.get("values")).join(",");
        parts.push(
            match e.get("operator").and_then(Value::as_str).unwrap_or("") {
                "In" => format!("{key} in ({values})"),
                "NotIn" => format!("{key} notin ({values})"),
                "Exists" => key.to_string(),
                "DoesNotExist" => format!("!{key}"),
                other => return Err(format!("unknown selector operator {other:?}")),
            },
        );
    }
    LabelSelector::parse(&parts.join(",")).map_err(|e| e.message)
}

impl Hook {
    /// Parses `webhooks[i]` of configuration `configuration`.
    ///
    /// # Errors
    /// A message when the client configuration or a selector is unusable.
    pub fn parse(configuration: &str, v: &Value) -> Result<Hook, String> {
        let client = ClientConfig::parse(v.get("clientConfig").unwrap_or(&Value::Null))?;
        let timeout = v
            .get("timeoutSeconds")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .clamp(1, 30);
        Ok(Hook {
            configuration: configuration.to_string(),
            name: v
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            client,
            rules: v
                .get("rules")
                .and_then(Value::as_array)
                .map(|rs| rs.iter().map(Rule::parse).collect())
                .unwrap_or_default(),
            fail: v.get("failurePolicy").and_then(Value::as_str) != Some("Ignore"),
            equivalent: v.get("matchPolicy").and_then(Value::as_str) != Some("Exact"),
            namespace_selector: label_selector(v.get("namespaceSelector"))?,
            object_selector: label_selector(v.get("objectSelector"))?,
            side_effects: v
                .get("sideEffects")
                .and_then(Value::as_str)
                .unwrap_or("Unknown")
                .to_string(),
            timeout: Duration::from_secs(timeout),
        })
    }

    /// The version the object is sent in when the rules match the request:
    /// the request's own, or (with `matchPolicy: Equivalent`) the first
    /// other served version that matches; `None` when nothing matches.
    pub fn version_for(&self, a: &Attributes<'_>) -> Option<String> {
        if self.rules.iter().any(|r| r.matches(a, a.version)) {
            return Some(a.version.to_string());
        }
        if !self.equivalent {
            return None;
        }
        a.served
            .iter()
            .filter(|v| v.as_str() != a.version)
            .find(|v| self.rules.iter().any(|r| r.matches(a, v)))
            .cloned()
    }

    /// `namespaceSelector` on the labels of the request's namespace
    /// (namespaced resources; a Namespace itself is matched by its own
    /// labels; other cluster-scoped resources always match).
    pub fn namespace_matches(&self, namespace_object: Option<&Value>) -> bool {
        match namespace_object {
            Some(ns) => self.namespace_selector.matches(ns),
            None => true,
        }
    }

    /// `objectSelector` on the object's or the old object's labels.
    pub fn object_matches(&self, object: Option<&Value>, old: Option<&Value>) -> bool {
        [object, old]
            .into_iter()
            .flatten()
            .any(|o| self.object_selector.matches(o))
    }

    /// Whether some rule names `group` and `resource` (or a subresource of
    /// it), whatever the operation and version.
    pub fn may_match(&self, group: &str, resource: &str) -> bool {
        self.rules.iter().any(|r| {
            any(&r.api_groups, group)
                && r.resources.iter().any(|x| {
                    let res = x.split_once('/').map_or(x.as_str(), |(res, _)| res);
                    res == "*" || res == resource
                })
        })
    }

    /// Whether the webhook may be called for a dry-run request.
    pub fn dry_run_safe(&self) -> bool {
        matches!(self.side_effects.as_str(), "None" | "NoneOnDryRun")
    }
}

/// The hooks of a set of configurations of one kind, in the order
/// kube-apiserver calls them: configurations by name, webhooks in their
/// order. Configurations are checked when written ([`validate`]); a webhook
/// that still cannot be parsed is skipped with a log line.
pub fn hooks(mut configurations: Vec<&Value>) -> Vec<Hook> {
    configurations.sort_by_key(|c| crate::json::name(c).to_string());
    let mut out = Vec::new();
    for c in configurations {
        let name = crate::json::name(c);
        for w in c
            .get("webhooks")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            match Hook::parse(name, w) {
                Ok(h) => out.push(h),
                Err(e) => {
                    tracing::warn!(configuration = name, error = %e, "unusable webhook skipped")
                }
            }
        }
    }
    out
}

/// Checks of a webhook configuration on write, as kube-apiserver makes them
/// (`ValidateMutatingWebhookConfiguration` / `ValidatingWebhookConfiguration`
/// for the v1 API): each webhook has a unique, fully qualified name
/// (at least three dot-separated segments), `sideEffects` `None` or
/// `NoneOnDryRun`, `admissionReviewVersions` containing `v1` (the only
/// version kube-sim sends), a usable `clientConfig`, `failurePolicy` and
/// `matchPolicy` values it knows, `timeoutSeconds` in 1..=30, and selectors
/// with known operators. Returns `(field, message)` pairs.
pub fn validate(config: &Value) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    let mut names = Vec::new();
    for (i, w) in config
        .get("webhooks")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let p = format!("webhooks[{i}]");
        let name = w.get("name").and_then(Value::as_str).unwrap_or("");
        if name.split('.').filter(|s| !s.is_empty()).count() < 3 {
            errs.push((
                format!("{p}.name"),
                format!("Invalid value: {name:?}: should be a domain with at least three segments separated by dots"),
            ));
        } else if names.contains(&name) {
            errs.push((format!("{p}.name"), format!("Duplicate value: {name:?}")));
        }
        names.push(name);
        match w.get("sideEffects").and_then(Value::as_str) {
            Some("None" | "NoneOnDryRun") => {}
            None => errs.push((format!("{p}.sideEffects"), "Required value".into())),
            Some(other) => errs.push((
                format!("{p}.sideEffects"),
                format!(
                    "Unsupported value: {other:?}: supported values: \"None\", \"NoneOnDryRun\""
                ),
            )),
        }
        let versions = strings(w.get("admissionReviewVersions"));
        if !versions.iter().any(|v| v == "v1") {
            errs.push((
                format!("{p}.admissionReviewVersions"),
                "Invalid value: must include v1 (the only AdmissionReview version kube-sim sends)"
                    .into(),
            ));
        }
        if let Err(e) = ClientConfig::parse(w.get("clientConfig").unwrap_or(&Value::Null)) {
            errs.push((format!("{p}.clientConfig"), format!("Required value: {e}")));
        }
        for (field, allowed) in [
            ("failurePolicy", &["Fail", "Ignore"][..]),
            ("matchPolicy", &["Exact", "Equivalent"][..]),
            ("reinvocationPolicy", &["Never"][..]),
        ] {
            if let Some(v) = w.get(field).and_then(Value::as_str)
                && !allowed.contains(&v)
            {
                errs.push((
                    format!("{p}.{field}"),
                    format!("Unsupported value: {v:?}: supported values: {allowed:?} (kube-sim)"),
                ));
            }
        }
        if let Some(t) = w.get("timeoutSeconds").and_then(Value::as_i64)
            && !(1..=30).contains(&t)
        {
            errs.push((
                format!("{p}.timeoutSeconds"),
                format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
            ));
        }
        for sel in ["namespaceSelector", "objectSelector"] {
            if let Err(e) = label_selector(w.get(sel)) {
                errs.push((format!("{p}.{sel}"), format!("Invalid value: {e}")));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn hook(rules: Value, extra: Value) -> Hook {
        let mut w = json!({
            "name": "v.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/x"}, "rules": rules
        });
        for (k, v) in extra.as_object().unwrap() {
            w[k] = v.clone();
        }
        Hook::parse("c", &w).unwrap()
    }

    fn attrs<'a>(
        op: &'a str,
        version: &'a str,
        sub: &'a str,
        served: &'a [String],
    ) -> Attributes<'a> {
        Attributes {
            operation: op,
            group: "example.com",
            version,
            resource: "widgets",
            subresource: sub,
            namespaced: true,
            served,
        }
    }

    #[test]
    fn rules_match_operations_versions_and_subresources() {
        let served = vec!["v1".to_string(), "v2".to_string()];
        let h = hook(
            json!([{"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"],
                    "apiVersions": ["v1"], "resources": ["widgets"]}]),
            json!({}),
        );
        assert_eq!(
            h.version_for(&attrs("CREATE", "v1", "", &served))
                .as_deref(),
            Some("v1")
        );
        assert_eq!(h.version_for(&attrs("DELETE", "v1", "", &served)), None);
        assert!(h.may_match("example.com", "widgets"));
        assert!(!h.may_match("example.com", "gadgets"));
        assert!(!h.may_match("other.example.com", "widgets"));
        assert_eq!(
            h.version_for(&attrs("UPDATE", "v1", "status", &served)),
            None,
            "status is a subresource"
        );
        // Equivalent (the default): a v2 request is sent as v1.
        assert_eq!(
            h.version_for(&attrs("CREATE", "v2", "", &served))
                .as_deref(),
            Some("v1")
        );
        let exact = hook(
            json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["widgets"]}]),
            json!({"matchPolicy": "Exact"}),
        );
        assert_eq!(exact.version_for(&attrs("CREATE", "v2", "", &served)), None);
        let subs = hook(
            json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["widgets/*"]}]),
            json!({}),
        );
        assert!(
            subs.version_for(&attrs("UPDATE", "v1", "status", &served))
                .is_some()
        );
        assert!(
            subs.version_for(&attrs("UPDATE", "v1", "", &served))
                .is_none()
        );
        let all = hook(
            json!([{"operations": ["*"], "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*/*"], "scope": "Cluster"}]),
            json!({}),
        );
        assert!(
            all.version_for(&attrs("UPDATE", "v1", "", &served))
                .is_none(),
            "scope Cluster"
        );
    }

    #[test]
    fn selectors_and_defaults() {
        let h = hook(
            json!([]),
            json!({"objectSelector": {"matchLabels": {"a": "1"},
                                       "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]},
                   "namespaceSelector": {"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]}}),
        );
        assert!(h.fail, "failurePolicy defaults to Fail");
        assert_eq!(h.timeout, Duration::from_secs(10));
        let labelled = |l: Value| json!({"metadata": {"labels": l}});
        assert!(h.object_matches(Some(&labelled(json!({"a": "1"}))), None));
        assert!(!h.object_matches(Some(&labelled(json!({"a": "1", "b": "x"}))), None));
        assert!(
            h.object_matches(
                Some(&labelled(json!({}))),
                Some(&labelled(json!({"a": "1"})))
            ),
            "old object's labels count"
        );
        assert!(h.namespace_matches(Some(&labelled(json!({"x": "y"})))));
        assert!(!h.namespace_matches(Some(&labelled(json!({"skip": "yes"})))));
        assert!(h.namespace_matches(None), "cluster-scoped objects");
        assert!(h.dry_run_safe());
    }

    #[test]
    fn configurations_are_checked_on_write() {
        let bad = json!({"webhooks": [
            {"name": "short.name", "clientConfig": {}, "admissionReviewVersions": ["v1beta1"],
             "sideEffects": "Some", "timeoutSeconds": 60, "failurePolicy": "Sometimes"}
        ]});
        let fields: Vec<String> = validate(&bad).into_iter().map(|(f, _)| f).collect();
        assert_eq!(
            fields,
            [
                "webhooks[0].name",
                "webhooks[0].sideEffects",
                "webhooks[0].admissionReviewVersions",
                "webhooks[0].clientConfig",
                "webhooks[0].failurePolicy",
                "webhooks[0].timeoutSeconds"
            ]
        );
        let good = json!({"webhooks": [
            {"name": "v.example.com", "clientConfig": {"service": {"namespace": "n", "name": "s", "path": "/v"}},
             "admissionReviewVersions": ["v1"], "sideEffects": "None", "rules": []}
        ]});
        assert!(validate(&good).is_empty());
    }
}
