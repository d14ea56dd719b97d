//! What an admission request gets, decided without I/O: the defaults to add
//! (a JSON patch), the problems that refuse it (each with its field path),
//! and warnings. The one I/O a decision may need — the machine's
//! ProxmoxCluster — is named by [`cluster_to_read`] and passed in by the
//! server.
//!
//! Validation is [`crate::api::validation`]'s, whatever checks it holds:
//! this module only routes a kind to its entry points, moves their paths
//! under `spec.template.spec` for templates, and adds the update rules of
//! [`super::immutable`].

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use kube::core::admission::Operation;
use serde_json::Value;

use super::Kind;
use super::immutable;
use crate::api::validation::{self, FieldError};
use crate::api::{
    ClusterMode, ProviderIdFormat, ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterTemplate,
    ProxmoxMachine, ProxmoxMachineTemplate,
};

/// CAPI's label naming a machine's (or template's) Cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// An admission request, as far as a decision needs it.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The kind the webhook serves.
    pub kind: Kind,
    /// `CREATE`, `UPDATE`, ...
    pub operation: &'a Operation,
    /// The object as it would be stored (absent for `DELETE`).
    pub object: Option<&'a Value>,
    /// The stored object (`UPDATE`).
    pub old_object: Option<&'a Value>,
    /// `dryRun`.
    pub dry_run: bool,
}

/// How a problem is reported (apimachinery's `field.Error` types).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The value is not acceptable (`FieldValueInvalid`).
    Invalid,
    /// The change is not allowed (`FieldValueForbidden`).
    Forbidden,
}

impl Reason {
    /// The `StatusCause.reason` (`FieldValueInvalid`, `FieldValueForbidden`).
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Invalid => "FieldValueInvalid",
            Reason::Forbidden => "FieldValueForbidden",
        }
    }
}

/// One reason to refuse a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// How it is reported.
    pub reason: Reason,
    /// The field path and what to write.
    pub error: FieldError,
}

/// The outcome of validating one request.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Empty: allowed.
    pub problems: Vec<Problem>,
    /// Returned to the client as `Warning` headers (e.g. fields that are ignored).
    pub warnings: Vec<String>,
}

/// The request's object is not a readable object of its kind.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the {kind} in the request: {message}")]
pub struct Unreadable {
    /// The kind expected.
    pub kind: &'static str,
    /// serde's reason.
    pub message: String,
}

fn read<T: serde::de::DeserializeOwned>(kind: Kind, v: &Value) -> Result<T, Unreadable> {
    serde_json::from_value(v.clone()).map_err(|e| Unreadable {
        kind: kind.as_str(),
        message: e.to_string(),
    })
}

/// Where the spec of a kind lies that its defaults apply to: the spec
/// itself, or the spec inside a template's `spec.template`.
fn spec_pointer(kind: Kind) -> &'static [&'static str] {
    match kind {
        Kind::ProxmoxCluster | Kind::ProxmoxMachine => &["spec"],
        Kind::ProxmoxClusterTemplate | Kind::ProxmoxMachineTemplate => {
            &["spec", "template", "spec"]
        }
    }
}

/// `(field under the spec, value)` pairs to add where absent. The values
/// are the types' own defaults, written down once so that a later change of
/// a default cannot change what an existing object means:
/// - clusters: `providerIDFormat` ([`ProviderIdFormat`]'s default; a cluster's
///   providerIDs must keep one format), `settings.mode` ([`ClusterMode`]'s
///   default) when `settings` is given;
/// - machines: `full: true` (a full clone, what `validate_machine` and the
///   clone assume when `full` is absent).
fn spec_defaults(kind: Kind, spec: &serde_json::Map<String, Value>) -> Vec<(Vec<String>, Value)> {
    let mut out = Vec::new();
    let mut add = |path: &[&str], value: Value| {
        let parent = path[..path.len() - 1]
            .iter()
            .try_fold(spec, |m, k| m.get(*k).and_then(Value::as_object));
        if let (Some(parent), Some(last)) = (parent, path.last())
            && !parent.contains_key(*last)
        {
            out.push((path.iter().map(|s| (*s).to_string()).collect(), value));
        }
    };
    match kind {
        Kind::ProxmoxCluster | Kind::ProxmoxClusterTemplate => {
            add(
                &["providerIDFormat"],
                serde_json::to_value(ProviderIdFormat::default()).unwrap_or(Value::Null),
            );
            add(
                &["settings", "mode"],
                serde_json::to_value(ClusterMode::default()).unwrap_or(Value::Null),
            );
        }
        Kind::ProxmoxMachine | Kind::ProxmoxMachineTemplate => {
            add(&["full"], Value::Bool(true));
        }
    }
    out.retain(|(_, v)| !v.is_null());
    out
}

/// The defaulting webhook's JSON patch for `object` (empty: nothing to add).
/// Only adds fields that are absent, under a spec that is an object.
pub fn defaults(kind: Kind, object: &Value) -> Patch {
    let base = spec_pointer(kind);
    let Some(spec) = base
        .iter()
        .try_fold(object, |v, k| v.get(*k))
        .and_then(Value::as_object)
    else {
        return Patch(Vec::new());
    };
    Patch(
        spec_defaults(kind, spec)
            .into_iter()
            .map(|(path, value)| {
                PatchOperation::Add(AddOperation {
                    path: PointerBuf::from_tokens(
                        base.iter().copied().chain(path.iter().map(String::as_str)),
                    ),
                    value,
                })
            })
            .collect(),
    )
}

/// `object`'s `spec` with [`defaults`] applied (`Null` without a spec).
/// Only the spec is copied, not the rest of the object (metadata, status).
pub fn defaulted_spec(kind: Kind, object: &Value) -> Value {
    let Some(spec) = object.get("spec") else {
        return Value::Null;
    };
    let mut v = serde_json::json!({ "spec": spec });
    // The defaults' paths all lie under `spec`; adding absent keys to
    // existing objects cannot fail.
    let _ = json_patch::patch(&mut v, &defaults(kind, object));
    v["spec"].take()
}

/// Whether the request may change what the spec means: every create, an
/// update whose spec differs once [`defaults`] are applied to both (the
/// defaulting webhook writes defaults into objects stored before it existed;
/// that alone changes nothing).
fn spec_changed(req: &Request<'_>) -> bool {
    match (req.operation, req.object, req.old_object) {
        (Operation::Update, Some(new), Some(old)) => {
            defaulted_spec(req.kind, old) != defaulted_spec(req.kind, new)
        }
        _ => true,
    }
}

/// The CAPI Cluster (by name, in the object's namespace) whose ProxmoxCluster
/// a machine or machine template must be checked against: on create, and on
/// update when the spec changed, for objects labelled
/// `cluster.x-k8s.io/cluster-name`.
pub fn cluster_to_read(req: &Request<'_>) -> Option<String> {
    if !matches!(
        req.kind,
        Kind::ProxmoxMachine | Kind::ProxmoxMachineTemplate
    ) || !matches!(req.operation, Operation::Create | Operation::Update)
        || !spec_changed(req)
    {
        return None;
    }
    req.object?
        .pointer("/metadata/labels")?
        .get(CLUSTER_NAME_LABEL)?
        .as_str()
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// `spec.<rest>` → `<base>.<rest>` (paths of a spec validated on its own,
/// moved to where the spec lies in a template).
fn rebase(mut e: FieldError, base: &str) -> FieldError {
    if let Some(rest) = e.path.strip_prefix("spec") {
        e.path = format!("{base}{rest}");
    }
    e
}

fn invalid(errs: Vec<FieldError>) -> impl Iterator<Item = Problem> {
    errs.into_iter().map(|error| Problem {
        reason: Reason::Invalid,
        error,
    })
}

fn forbidden(errs: Vec<FieldError>) -> impl Iterator<Item = Problem> {
    errs.into_iter().map(|error| Problem {
        reason: Reason::Forbidden,
        error,
    })
}

/// The validating webhook's verdict. `cluster` is the machine's
/// ProxmoxCluster spec when [`cluster_to_read`] named one and it was found.
/// Only `CREATE` and `UPDATE` are judged; on `UPDATE` an unchanged spec is
/// allowed as it is (only metadata, status or written-down defaults changed).
///
/// # Errors
/// [`Unreadable`] when the object is not of its kind's shape.
pub fn validate(
    req: &Request<'_>,
    cluster: Option<&ProxmoxClusterSpec>,
) -> Result<Verdict, Unreadable> {
    let mut verdict = Verdict::default();
    let Some(object) = req.object else {
        return Ok(verdict);
    };
    if !matches!(req.operation, Operation::Create | Operation::Update) {
        return Ok(verdict);
    }
    let kind = req.kind;
    let old = match req.operation {
        Operation::Update => req.old_object,
        _ => None,
    };
    // On update, the defaulted specs: compared here (as `spec_changed`
    // does) and by the update rules below.
    let specs = old.map(|old| (defaulted_spec(kind, old), defaulted_spec(kind, object)));
    if specs.as_ref().is_some_and(|(o, n)| o == n) {
        return Ok(verdict);
    }
    let problems = &mut verdict.problems;
    match kind {
        Kind::ProxmoxCluster => {
            let pc: ProxmoxCluster = read(kind, object)?;
            problems.extend(invalid(validation::validate_cluster(&pc.spec)));
            verdict.warnings = to_strings(validation::cluster_warnings(&pc.spec));
        }
        Kind::ProxmoxClusterTemplate => {
            let t: ProxmoxClusterTemplate = read(kind, object)?;
            let base = "spec.template.spec";
            let spec = &t.spec.template.spec;
            problems.extend(invalid(
                validation::validate_cluster(spec)
                    .into_iter()
                    .map(|e| rebase(e, base))
                    .collect(),
            ));
            verdict.warnings = to_strings(
                validation::cluster_warnings(spec)
                    .into_iter()
                    .map(|e| rebase(e, base))
                    .collect(),
            );
        }
        Kind::ProxmoxMachine => {
            let m: ProxmoxMachine = read(kind, object)?;
            problems.extend(invalid(validation::validate_machine(&m.spec)));
            if let Some(c) = cluster {
                problems.extend(invalid(validation::validate_machine_for_cluster(
                    &m.spec, c,
                )));
            }
        }
        Kind::ProxmoxMachineTemplate => {
            let t: ProxmoxMachineTemplate = read(kind, object)?;
            problems.extend(invalid(validation::validate_machine_template(&t.spec)));
            if let Some(c) = cluster {
                problems.extend(invalid(
                    validation::validate_machine_for_cluster(&t.spec.template.spec, c)
                        .into_iter()
                        .map(|e| rebase(e, "spec.template.spec"))
                        .collect(),
                ));
            }
        }
    }
    if let (Some(old), Some((o, n))) = (old, specs) {
        let errs = match kind {
            Kind::ProxmoxMachineTemplate
                if !immutable::is_topology_dry_run(req.dry_run, object) =>
            {
                immutable::machine_template(&o, &n)
            }
            Kind::ProxmoxMachine => {
                let provisioned = old
                    .pointer("/status/initialization/provisioned")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                immutable::machine(&o, &n, provisioned)
            }
            Kind::ProxmoxCluster => immutable::cluster(&o, &n),
            _ => Vec::new(),
        };
        problems.extend(forbidden(errs));
    }
    Ok(verdict)
}

fn to_strings(errs: Vec<FieldError>) -> Vec<String> {
    errs.iter().map(ToString::to_string).collect()
}

#[cfg(test)]
mod tests;
