//! Conversion between `v1alpha2` (the Go provider's API, served) and
//! `v1alpha3` (ours, stored), for all four kinds, as kube-apiserver asks for
//! it through the conversion webhook ([`convert_object`], called for each
//! object of a review by [`crate::webhook`]).
//!
//! Pure functions: an object in one version in, the object in the other
//! version out, or an error that names the field ([`ConversionError`]).
//! `docs/migrating-from-capmox.md` lists where every `v1alpha2` field goes.
//!
//! # Lossless both ways
//!
//! Each direction has a plain field-by-field conversion (`cluster`,
//! `machine`, `templates`). What the target version cannot hold is kept in
//! the annotation [`CONVERSION_DATA_ANNOTATION`] of the converted object:
//! the source's `apiVersion`, `kind`, `spec` and `status` as JSON (as CAPI
//! providers keep `cluster.x-k8s.io/conversion-data`; our own key, so that
//! data another provider left cannot be mistaken for ours). It is written
//! only when the plain conversion back would not give the source again —
//! for a `v1alpha3` object also when it would not once kube-apiserver has
//! filled in the `v1alpha2` defaults, since those are not all defaults of
//! `v1alpha3` (`metric: 100` is not an absent metric).
//!
//! Converting an object that carries such data (a `v1alpha3` object read as
//! `v1alpha2` and written back, or the reverse) restores it by a three-way
//! merge (`stash::merge`): *base* is what the plain conversion makes of
//! the kept original's own image in the source version, *ours* the kept
//! original, *theirs* the plain conversion of the object as it is now.
//! Where theirs equals the base nobody changed the field through the other
//! version, and the original (with all it held that the other version
//! cannot) comes back; where it differs, the change wins. For `v1alpha2`
//! the base is taken both as converted and with the Go provider's schema
//! defaults applied ([`defaults`]), because kube-apiserver fills those in
//! before a `v1alpha2` write reaches the webhook. So `v1alpha2 → v1alpha3 →
//! v1alpha2` and `v1alpha3 → v1alpha2 → v1alpha3` give the object back
//! exactly, and an edit made in either version survives the way back.
//!
//! # Refused
//!
//! A `v1alpha2` field whose meaning `v1alpha3` cannot carry out (zones,
//! routes, VRFs, multiqueue, an in-guest MTU, the default pools on another
//! device than `net0`, ...) is refused with its path rather than kept aside:
//! kept aside, the controller would build something else than the Go
//! provider did. A number that does not fit the `v1alpha3` type is refused
//! the same way. Status fields are never refused. Refusing fails the whole
//! ConversionReview, so the request that needed it fails with the message.

mod cluster;
mod defaults;
mod fields;
mod machine;
mod review;
mod stash;
mod templates;

#[cfg(test)]
#[path = "tests/proptests.rs"]
mod proptests;
#[cfg(test)]
#[path = "tests/unit.rs"]
mod tests;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

pub use review::convert_object;

/// Annotation holding what the object's version cannot express of the
/// version it was converted from: `{"apiVersion", "kind", "spec", "status"}`
/// as JSON.
pub const CONVERSION_DATA_ANNOTATION: &str = "infrastructure.cluster.x-k8s.io/conversion-data";

/// `infrastructure.cluster.x-k8s.io/v1alpha2`.
pub const V1ALPHA2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
/// `infrastructure.cluster.x-k8s.io/v1alpha3`.
pub const V1ALPHA3: &str = "infrastructure.cluster.x-k8s.io/v1alpha3";

/// Why an object cannot be converted: the field's path in the object
/// (`spec.zoneConfig`, `spec.network.networkDevices[1].routes`, `apiVersion`)
/// and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConversionError {
    /// Path of the field in the object being converted.
    pub path: String,
    /// What cannot be converted and why.
    pub message: String,
}

impl ConversionError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        ConversionError {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// The versions served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1alpha2,
    V1alpha3,
}

impl Version {
    fn parse(api_version: &str, path: &str) -> Result<Version, ConversionError> {
        match api_version {
            V1ALPHA2 => Ok(Version::V1alpha2),
            V1ALPHA3 => Ok(Version::V1alpha3),
            "infrastructure.cluster.x-k8s.io/v1alpha1" => Err(ConversionError::new(
                path,
                "infrastructure.cluster.x-k8s.io/v1alpha1 (the Go provider's first version) is not served: \
                 objects must be stored as v1alpha2 before the switch (docs/migrating-from-capmox.md)",
            )),
            other => Err(ConversionError::new(
                path,
                format!("{other:?} is not served (served: {V1ALPHA2}, {V1ALPHA3})"),
            )),
        }
    }

    fn api_version(self) -> &'static str {
        match self {
            Version::V1alpha2 => V1ALPHA2,
            Version::V1alpha3 => V1ALPHA3,
        }
    }
}

/// The four kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Cluster,
    ClusterTemplate,
    Machine,
    MachineTemplate,
}

impl Kind {
    fn parse(kind: &str) -> Result<Kind, ConversionError> {
        match kind {
            "ProxmoxCluster" => Ok(Kind::Cluster),
            "ProxmoxClusterTemplate" => Ok(Kind::ClusterTemplate),
            "ProxmoxMachine" => Ok(Kind::Machine),
            "ProxmoxMachineTemplate" => Ok(Kind::MachineTemplate),
            other => Err(ConversionError::new(
                "kind",
                format!("{other:?} is not a kind of this provider"),
            )),
        }
    }
}

/// `spec` and `status` of an object: what the versions differ in.
pub(crate) type Body = Map<String, Value>;

/// Converts one object (`apiVersion` `infrastructure.cluster.x-k8s.io/v1alpha2`
/// or `v1alpha3`, any of the four kinds) to `desired_api_version`. The same
/// version gives the object back unchanged; metadata is kept except
/// [`CONVERSION_DATA_ANNOTATION`] (read, and written when needed).
///
/// # Errors
/// [`ConversionError`] naming the field: an unknown `apiVersion` or `kind`,
/// a field the desired version cannot carry out (module doc, "Refused"),
/// a `spec`/`status` that does not match its version's schema, or an
/// unreadable [`CONVERSION_DATA_ANNOTATION`].
pub fn convert(object: &Value, desired_api_version: &str) -> Result<Value, ConversionError> {
    let Some(obj) = object.as_object() else {
        return Err(ConversionError::new("", "the object is not a JSON object"));
    };
    let text = |key: &str| obj.get(key).and_then(Value::as_str).unwrap_or_default();
    let from = Version::parse(text("apiVersion"), "apiVersion")?;
    let to = Version::parse(desired_api_version, "desiredAPIVersion")?;
    if from == to {
        return Ok(object.clone());
    }
    let kind_name = text("kind").to_string();
    let kind = Kind::parse(&kind_name)?;

    let mut out = Map::new();
    let mut body = Body::new();
    let mut metadata = Map::new();
    for (key, value) in obj {
        match key.as_str() {
            "spec" | "status" => {
                body.insert(key.clone(), value.clone());
            }
            "metadata" => metadata = value.as_object().cloned().unwrap_or_default(),
            "apiVersion" | "kind" => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    let kept = stash::take(&mut metadata)?;

    let src = canonical(kind, from, &body)?;
    let plain = step(kind, from, &src)?;
    let result = match kept {
        None => plain,
        Some(kept) => {
            if kept.api_version != to.api_version() || kept.kind != kind_name {
                return Err(ConversionError::new(
                    stash::PATH,
                    format!(
                        "holds a {} {} on a {} {kind_name}; it can only hold the other version of the same object",
                        kept.api_version,
                        kept.kind,
                        from.api_version()
                    ),
                ));
            }
            let ours = canonical(kind, to, &kept.body)?;
            let image = step(kind, to, &ours)?;
            let mut bases = vec![step(kind, from, &image)?];
            if from == Version::V1alpha2 {
                bases.push(step(kind, from, &defaults::apply(kind, &image)?)?);
            }
            stash::merge_bodies(&bases, &ours, &plain)
        }
    };

    // Whether the way back would not give `src` again. v1alpha2 → v1alpha3:
    // up to the schema defaults kube-apiserver fills in anyway. v1alpha3 →
    // v1alpha2: also once those defaults are filled in (`metric: 100` is not
    // an absent metric in v1alpha3).
    let back = step(kind, to, &result)?;
    let lost = match from {
        Version::V1alpha2 => defaults::apply(kind, &back)? != defaults::apply(kind, &src)?,
        Version::V1alpha3 => {
            back != src || step(kind, to, &defaults::apply(kind, &result)?)? != src
        }
    };
    if lost {
        stash::put(&mut metadata, from.api_version(), &kind_name, &src);
    }

    out.insert("apiVersion".into(), Value::from(to.api_version()));
    out.insert("kind".into(), Value::from(kind_name));
    out.insert("metadata".into(), Value::Object(metadata));
    out.extend(result);
    Ok(Value::Object(out))
}

/// The plain conversion of a body from `from` to the other version.
fn step(kind: Kind, from: Version, body: &Body) -> Result<Body, ConversionError> {
    match (kind, from) {
        (Kind::Cluster, Version::V1alpha2) => cluster::up(body),
        (Kind::Cluster, Version::V1alpha3) => cluster::down(body),
        (Kind::ClusterTemplate, Version::V1alpha2) => templates::cluster_up(body),
        (Kind::ClusterTemplate, Version::V1alpha3) => templates::cluster_down(body),
        (Kind::Machine, Version::V1alpha2) => machine::up(body),
        (Kind::Machine, Version::V1alpha3) => machine::down(body),
        (Kind::MachineTemplate, Version::V1alpha2) => templates::machine_up(body),
        (Kind::MachineTemplate, Version::V1alpha3) => templates::machine_down(body),
    }
}

/// The body as its version's types write it (absent and empty lists alike
/// become absent, ...), so that comparisons see only real differences.
fn canonical(kind: Kind, version: Version, body: &Body) -> Result<Body, ConversionError> {
    use super::{v1alpha2 as v2, *};
    match (kind, version) {
        (Kind::Cluster, Version::V1alpha2) => {
            reparse::<v2::ProxmoxClusterSpec, v2::ProxmoxClusterStatus>(body)
        }
        (Kind::Cluster, Version::V1alpha3) => {
            reparse::<ProxmoxClusterSpec, ProxmoxClusterStatus>(body)
        }
        (Kind::ClusterTemplate, Version::V1alpha2) => {
            reparse::<v2::ProxmoxClusterTemplateSpec, NoStatus>(body)
        }
        (Kind::ClusterTemplate, Version::V1alpha3) => {
            reparse::<ProxmoxClusterTemplateSpec, NoStatus>(body)
        }
        (Kind::Machine, Version::V1alpha2) => {
            reparse::<v2::ProxmoxMachineSpec, v2::ProxmoxMachineStatus>(body)
        }
        (Kind::Machine, Version::V1alpha3) => {
            reparse::<ProxmoxMachineSpec, ProxmoxMachineStatus>(body)
        }
        (Kind::MachineTemplate, Version::V1alpha2) => {
            reparse::<v2::ProxmoxMachineTemplateSpec, NoStatus>(body)
        }
        (Kind::MachineTemplate, Version::V1alpha3) => {
            reparse::<ProxmoxMachineTemplateSpec, ProxmoxMachineTemplateStatus>(body)
        }
    }
}

/// The status of a kind that has none in this version: any `status` is
/// refused when parsed.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NoStatus {}

fn reparse<S, T>(body: &Body) -> Result<Body, ConversionError>
where
    S: Serialize + DeserializeOwned,
    T: Serialize + DeserializeOwned,
{
    let (spec, status) = parse::<S, T>(body)?;
    emit(&spec, status.as_ref())
}

/// Reads `spec` (required) and `status` (optional) of a body.
///
/// # Errors
/// [`ConversionError`] with the path of the first field that does not fit.
pub(crate) fn parse<S: DeserializeOwned, T: DeserializeOwned>(
    body: &Body,
) -> Result<(S, Option<T>), ConversionError> {
    let spec = match body.get("spec") {
        Some(v) => field::<S>(v, "spec")?,
        None => return Err(ConversionError::new("spec", "required")),
    };
    let status = match body.get("status") {
        Some(v) => Some(field::<T>(v, "status")?),
        None => None,
    };
    Ok((spec, status))
}

fn field<T: DeserializeOwned>(value: &Value, at: &str) -> Result<T, ConversionError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let path = if inner == "." {
            at.to_string()
        } else {
            format!("{at}.{inner}")
        };
        ConversionError::new(path, e.into_inner().to_string())
    })
}

/// Writes `spec` and `status` (when present) as a body.
pub(crate) fn emit<S: Serialize, T: Serialize>(
    spec: &S,
    status: Option<&T>,
) -> Result<Body, ConversionError> {
    let mut body = Body::new();
    let json = |v: serde_json::Result<Value>, at: &str| {
        v.map_err(|e| ConversionError::new(at, format!("cannot be written: {e}")))
    };
    body.insert("spec".into(), json(serde_json::to_value(spec), "spec")?);
    if let Some(status) = status {
        body.insert(
            "status".into(),
            json(serde_json::to_value(status), "status")?,
        );
    }
    Ok(body)
}
