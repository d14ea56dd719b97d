//! Building blocks of scenarios, usable against any API server: apply
//! rendered YAML with server-side apply, wait for a condition with a bound
//! (failing with what was waited for and the last state seen), and list
//! objects by kind.

use std::future::Future;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{self, Scope};
use serde_json::Value;

use crate::error::{E2eError, Result};

/// The field manager of everything the suite applies.
pub const FIELD_MANAGER: &str = "capmox-e2e";

/// One step of a bounded wait: done with a value, or not yet with a
/// description of what is seen now (reported if the wait times out).
#[derive(Debug)]
pub enum Progress<T> {
    /// The condition holds.
    Done(T),
    /// Not yet; the current state for a human.
    Pending(String),
}

/// How long waits may take and how often they look.
#[derive(Clone, Copy, Debug)]
pub struct Waits {
    /// Seconds of real time per simulated second (the simulator's time scale).
    pub time_scale: f64,
    /// Lower bound of every wait, whatever the scale (slow CI machines).
    pub floor: Duration,
    /// Interval between looks.
    pub poll: Duration,
}

impl Waits {
    /// Waits for a simulator running at `time_scale`, at least `floor` each.
    pub fn new(time_scale: f64, floor: Duration) -> Waits {
        Waits {
            time_scale,
            floor,
            poll: Duration::from_millis(100),
        }
    }

    /// A bound for work that takes `sim_seconds` of simulated time: ten
    /// times its scaled duration, at least [`Waits::floor`].
    pub fn sim(&self, sim_seconds: f64) -> Duration {
        let scaled = Duration::from_secs_f64((sim_seconds * self.time_scale * 10.0).max(0.0));
        scaled.max(self.floor)
    }
}

/// Calls `check` until it reports [`Progress::Done`] or `timeout` passes.
///
/// # Errors
/// [`E2eError::Timeout`] naming `what` and the last [`Progress::Pending`]
/// text; errors of `check` are returned at once.
pub async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    poll: Duration,
    mut check: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Progress<T>>>,
{
    let start = Instant::now();
    loop {
        let last = match check().await? {
            Progress::Done(v) => return Ok(v),
            Progress::Pending(s) => s,
        };
        if start.elapsed() >= timeout {
            return Err(E2eError::Timeout {
                what: what.to_string(),
                after: start.elapsed(),
                last_seen: last,
            });
        }
        tokio::time::sleep(poll).await;
    }
}

/// The API resource of `apiVersion`/`kind`, by discovery.
///
/// # Errors
/// [`E2eError::Kube`] when the server does not serve the kind.
pub async fn resource_of(
    client: &kube::Client,
    api_version: &str,
    kind: &str,
) -> Result<(ApiResource, bool)> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (ar, caps) = discovery::pinned_kind(client, &gvk).await?;
    Ok((ar, caps.scope == Scope::Namespaced))
}

/// Parses a multi-document YAML stream (empty documents skipped).
///
/// # Errors
/// [`E2eError::Yaml`].
pub fn parse_documents(what: &str, yaml: &str) -> Result<Vec<Value>> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(yaml).map_err(|e| E2eError::Yaml {
        what: what.to_string(),
        message: e.to_string(),
    })?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Server-side applies every document (field manager [`FIELD_MANAGER`],
/// forced), in order; namespaced objects without a namespace go to
/// `namespace`. Returns the applied objects.
///
/// # Errors
/// [`E2eError::Yaml`], [`E2eError::Contract`] for a document without
/// `apiVersion`/`kind`/name, [`E2eError::Kube`] when the server refuses one.
pub async fn apply_yaml(
    client: &kube::Client,
    namespace: &str,
    what: &str,
    yaml: &str,
) -> Result<Vec<DynamicObject>> {
    let mut out = Vec::new();
    for doc in parse_documents(what, yaml)? {
        out.push(apply_value(client, namespace, doc).await?);
    }
    Ok(out)
}

/// Server-side applies one object given as JSON.
///
/// # Errors
/// As [`apply_yaml`].
pub async fn apply_value(
    client: &kube::Client,
    namespace: &str,
    mut doc: Value,
) -> Result<DynamicObject> {
    let field = |k: &str| doc.get(k).and_then(Value::as_str).map(str::to_string);
    let (Some(api_version), Some(kind)) = (field("apiVersion"), field("kind")) else {
        return Err(E2eError::Contract(format!(
            "document without apiVersion/kind: {doc}"
        )));
    };
    let name = doc
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| E2eError::Contract(format!("{kind} without metadata.name")))?;
    let (ar, namespaced) = resource_of(client, &api_version, &kind).await?;
    let api: Api<DynamicObject> = if namespaced {
        let ns = doc
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(namespace)
            .to_string();
        if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.insert("namespace".into(), Value::String(ns.clone()));
        }
        Api::namespaced_with(client.clone(), &ns, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    let pp = PatchParams::apply(FIELD_MANAGER).force();
    Ok(api.patch(&name, &pp, &Patch::Apply(&doc)).await?)
}

/// Every object of `api_version`/`kind` in `namespace`.
///
/// # Errors
/// As [`resource_of`], and [`E2eError::Kube`].
pub async fn list(
    client: &kube::Client,
    namespace: &str,
    api_version: &str,
    kind: &str,
) -> Result<Vec<DynamicObject>> {
    let (ar, namespaced) = resource_of(client, api_version, kind).await?;
    let api: Api<DynamicObject> = if namespaced {
        Api::namespaced_with(client.clone(), namespace, &ar)
    } else {
        Api::all_with(client.clone(), &ar)
    };
    Ok(api.list(&ListParams::default()).await?.items)
}

/// Scales a MachineDeployment to `replicas` the way `kubectl scale
/// machinedeployment` does: a merge patch of its `autoscaling/v1` `Scale`
/// (the `/scale` subresource, `spec.replicas` through `specReplicasPath`).
///
/// # Errors
/// [`E2eError::Kube`].
pub async fn scale_machine_deployment(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> Result<()> {
    let api: Api<crate::crds::MachineDeployment> = Api::namespaced(client.clone(), namespace);
    scale(&api, name, replicas).await
}

/// Scales a KubeadmControlPlane to `replicas` through its `/scale`
/// subresource, as `kubectl scale kubeadmcontrolplane` does.
///
/// # Errors
/// [`E2eError::Kube`].
pub async fn scale_control_plane(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    replicas: i32,
) -> Result<()> {
    let api: Api<crate::crds::KubeadmControlPlane> = Api::namespaced(client.clone(), namespace);
    scale(&api, name, replicas).await
}

/// `kubectl scale`'s request: a merge patch `{"spec":{"replicas":N}}` of the
/// object's `Scale` (field manager [`FIELD_MANAGER`]).
async fn scale<K>(api: &Api<K>, name: &str, replicas: i32) -> Result<()>
where
    K: Clone + serde::de::DeserializeOwned,
{
    let body = serde_json::json!({"spec": {"replicas": replicas}});
    let pp = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    api.patch_scale(name, &pp, &Patch::Merge(&body)).await?;
    Ok(())
}

/// A ProxmoxCluster as JSON (`None` when absent).
///
/// # Errors
/// [`E2eError::Kube`].
pub async fn proxmox_cluster(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<DynamicObject>> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &crate::observe::proxmox_cluster_resource(),
    );
    Ok(api.get_opt(name).await?)
}

/// `status.failureDomains[].name` of a ProxmoxCluster (or a Cluster) object.
pub fn failure_domain_names(obj: &Value) -> Vec<String> {
    obj.pointer("/status/failureDomains")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|f| f.get("name").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// `status.instances[]` of a ProxmoxCluster as `name → (ready, machines)`.
pub fn instance_counts(obj: &Value) -> std::collections::BTreeMap<String, (bool, u64)> {
    obj.pointer("/status/instances")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(|i| {
                    Some((
                        i.get("name")?.as_str()?.to_string(),
                        (
                            i.get("ready").and_then(Value::as_bool).unwrap_or(false),
                            i.get("machines").and_then(Value::as_u64).unwrap_or(0),
                        ),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn wait_reports_what_and_last_state() {
        let mut n = 0;
        let e = wait_until(
            "three ticks",
            Duration::from_millis(30),
            Duration::from_millis(5),
            || {
                n += 1;
                let seen = format!("tick {n}");
                async move { Ok::<_, E2eError>(Progress::<()>::Pending(seen)) }
            },
        )
        .await
        .unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("timed out after "), "{text}");
        assert!(
            text.contains("waiting for three ticks; last seen: tick "),
            "{text}"
        );
        let got = wait_until(
            "done",
            Duration::from_secs(1),
            Duration::from_millis(1),
            || async { Ok::<_, E2eError>(Progress::Done(7)) },
        )
        .await
        .unwrap();
        assert_eq!(got, 7);
    }

    #[test]
    fn sim_bounds_scale_with_the_simulator() {
        let w = Waits::new(0.01, Duration::from_secs(5));
        assert_eq!(w.sim(100.0), Duration::from_secs(10));
        assert_eq!(w.sim(1.0), Duration::from_secs(5));
    }

    #[test]
    fn documents_skip_empty_ones() {
        let docs = parse_documents("t", "---\na: 1\n---\n---\nb: 2\n").unwrap();
        assert_eq!(
            docs,
            vec![serde_json::json!({"a": 1}), serde_json::json!({"b": 2})]
        );
    }
}
