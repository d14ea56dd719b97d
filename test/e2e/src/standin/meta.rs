//! CAPI's labels, annotations and finalizers, and the small metadata
//! operations every stand-in controller needs: owner references, finalizers,
//! conditions. Metadata writes are JSON merge patches carrying
//! `resourceVersion`, so a write computed from a stale copy fails with 409;
//! [`update_metadata`] then recomputes it from a fresh read.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::api::{Api, Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::error::Result;

/// Label naming the owning Cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label KubeadmControlPlane puts on its Machines (empty value).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// Label naming the KubeadmControlPlane of a Machine.
pub const CONTROL_PLANE_NAME_LABEL: &str = "cluster.x-k8s.io/control-plane-name";
/// Label naming the MachineSet of a Machine.
pub const SET_NAME_LABEL: &str = "cluster.x-k8s.io/set-name";
/// Label naming the MachineDeployment of a MachineSet and its Machines.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// Label with the hash of a MachineDeployment's template on its MachineSet.
pub const TEMPLATE_HASH_LABEL: &str = "machine-template-hash";
/// Annotation on cloned InfraMachines: the template's name.
pub const CLONED_FROM_NAME: &str = "cluster.x-k8s.io/cloned-from-name";
/// Annotation on cloned InfraMachines: the template's `Kind.group`.
pub const CLONED_FROM_GROUPKIND: &str = "cluster.x-k8s.io/cloned-from-groupkind";
/// Annotation pausing one object.
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Annotation marking a Machine to be removed first on scale-down.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";

/// Finalizer of the Cluster controller.
pub const CLUSTER_FINALIZER: &str = "cluster.cluster.x-k8s.io";
/// Finalizer of the Machine controller.
pub const MACHINE_FINALIZER: &str = "machine.cluster.x-k8s.io";
/// Finalizer of the MachineSet controller.
pub const MACHINESET_FINALIZER: &str = "cluster.x-k8s.io/machineset";
/// Finalizer of the MachineDeployment controller.
pub const MACHINEDEPLOYMENT_FINALIZER: &str = "cluster.x-k8s.io/machinedeployment";
/// Finalizer of the KubeadmControlPlane controller.
pub const KCP_FINALIZER: &str = "kubeadm.controlplane.cluster.x-k8s.io";
/// Finalizer the IPAM provider puts on claims it allocated for.
pub const RELEASE_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";
/// Finalizer the IPAM provider puts on the addresses it created.
pub const PROTECT_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";
/// Finalizer the IPAM provider puts on pools while addresses are allocated.
pub const PROTECT_POOL_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectPool";

/// An owner reference to an object of `api_version`/`kind`.
pub fn owner_ref(
    api_version: &str,
    kind: &str,
    meta: &ObjectMeta,
    controller: bool,
    block_owner_deletion: bool,
) -> OwnerReference {
    OwnerReference {
        api_version: api_version.to_string(),
        kind: kind.to_string(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(controller),
        block_owner_deletion: Some(block_owner_deletion),
    }
}

/// The metadata fields of a merge patch that label an object with its
/// Cluster's name (`cluster.x-k8s.io/cluster-name`) and, with `owner` (the
/// Cluster's metadata), append the Cluster as a non-controller owner
/// reference to the object's own (`md`), as CAPI's Cluster, Machine and
/// MachineDeployment controllers do.
pub fn cluster_label_fields(
    md: &ObjectMeta,
    cluster_name: &str,
    owner: Option<&ObjectMeta>,
) -> Value {
    let mut fields = json!({"labels": {CLUSTER_NAME_LABEL: cluster_name}});
    if let Some(cluster) = owner {
        let mut refs = md.owner_references.clone().unwrap_or_default();
        refs.push(owner_ref(
            "cluster.x-k8s.io/v1beta2",
            "Cluster",
            cluster,
            false,
            true,
        ));
        fields["ownerReferences"] = json!(refs);
    }
    fields
}

/// The owner reference of `kind` in `group` (any version).
pub fn owner_of<'a>(meta: &'a ObjectMeta, group: &str, kind: &str) -> Option<&'a OwnerReference> {
    meta.owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .find(|o| o.kind == kind && super::kinds::group_of(&o.api_version) == group)
}

/// Whether the object's owner references include the object with `uid`.
pub fn is_owned_by(meta: &ObjectMeta, uid: &str) -> bool {
    meta.owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|o| o.uid == uid)
}

/// A label value.
pub fn label<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// Whether the object is being deleted.
pub fn is_deleting(meta: &ObjectMeta) -> bool {
    meta.deletion_timestamp.is_some()
}

/// Whether the object carries a finalizer.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .any(|f| f == finalizer)
}

/// Whether the object carries the `cluster.x-k8s.io/paused` annotation.
pub fn has_paused_annotation(meta: &ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(PAUSED_ANNOTATION))
}

fn rv(meta: &ObjectMeta) -> Value {
    meta.resource_version
        .as_ref()
        .map_or(Value::Null, |v| Value::String(v.clone()))
}

/// How many writes [`update_metadata`] makes before a conflict is returned.
const CONFLICT_ATTEMPTS: usize = 3;

/// Merge-patches the `metadata` fields (`ownerReferences`, `labels`,
/// `finalizers`, ...) that `change` computes from the object's metadata,
/// guarded by its `resourceVersion`. `change` returns `None` when nothing
/// needs writing. Returns whether it wrote.
///
/// `meta` is usually a watch's copy, which lags behind the API server. On a
/// 409 the object is read again and `change` applied to the fresh metadata
/// (client-go's `RetryOnConflict`), up to [`CONFLICT_ATTEMPTS`] writes:
/// requeueing the whole reconcile per conflict instead let 1,000 Machines
/// conflict ~700 times a second on a loaded machine, each retry a reconcile
/// that read and wrote more.
///
/// # Errors
/// [`crate::E2eError::Kube`]: 409 after [`CONFLICT_ATTEMPTS`] conflicts, 404
/// when the object is gone, other API errors.
pub async fn update_metadata<K, F>(api: &Api<K>, meta: &ObjectMeta, change: F) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
    F: Fn(&ObjectMeta) -> Option<Value>,
{
    let name = meta.name.clone().unwrap_or_default();
    let Some(mut fields) = change(meta) else {
        return Ok(false);
    };
    let mut version = rv(meta);
    let mut attempt = 1;
    loop {
        let mut m = match fields {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        m.insert("resourceVersion".into(), version);
        let body = json!({ "metadata": Value::Object(m) });
        let err = match api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(_) => return Ok(true),
            Err(e) => crate::E2eError::from(e),
        };
        if !err.is_conflict() || attempt == CONFLICT_ATTEMPTS {
            return Err(err);
        }
        attempt += 1;
        let fresh = api.get(&name).await?;
        match change(fresh.meta()) {
            Some(f) => fields = f,
            None => return Ok(false),
        }
        version = rv(fresh.meta());
    }
}

/// Adds `finalizer` if missing. Returns whether it wrote.
///
/// # Errors
/// As [`update_metadata`].
pub async fn add_finalizer<K>(api: &Api<K>, meta: &ObjectMeta, finalizer: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    update_metadata(api, meta, |m| {
        if has_finalizer(m, finalizer) {
            return None;
        }
        let mut list = m.finalizers.clone().unwrap_or_default();
        list.push(finalizer.to_string());
        Some(json!({ "finalizers": list }))
    })
    .await
}

/// Removes `finalizer` if present (a 404 counts as done). Returns whether it
/// wrote (or found the object gone).
///
/// # Errors
/// As [`update_metadata`].
pub async fn remove_finalizer<K>(api: &Api<K>, meta: &ObjectMeta, finalizer: &str) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug,
{
    let change = |m: &ObjectMeta| {
        if !has_finalizer(m, finalizer) {
            return None;
        }
        let list: Vec<String> = m
            .finalizers
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|f| f != finalizer)
            .collect();
        Some(json!({ "finalizers": list }))
    };
    match update_metadata(api, meta, change).await {
        Ok(wrote) => Ok(wrote),
        Err(e) if e.is_not_found() => Ok(true),
        Err(e) => Err(e),
    }
}

/// Deletes an object; a 404 counts as done.
///
/// # Errors
/// [`crate::E2eError::Kube`] for other failures.
pub async fn delete_ignoring_missing<K>(api: &Api<K>, name: &str) -> Result<()>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Gets an object, `None` on 404.
///
/// # Errors
/// [`crate::E2eError::Kube`] for other failures.
pub async fn get_opt<K>(api: &Api<K>, name: &str) -> Result<Option<K>>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    Ok(api.get_opt(name).await?)
}

/// Merge-patches the status subresource with `status`.
///
/// # Errors
/// [`crate::E2eError::Kube`].
pub async fn patch_status<K>(api: &Api<K>, name: &str, status: Value) -> Result<K>
where
    K: Clone + DeserializeOwned + std::fmt::Debug,
{
    let body = json!({ "status": status });
    Ok(api
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&body))
        .await?)
}

/// The current time as a Kubernetes `Time`.
pub fn now() -> Time {
    Time(Timestamp::now())
}

/// Sets condition `type_` in `conditions`, keeping `lastTransitionTime` when
/// the status did not change. Returns whether anything changed.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: bool,
    reason: &str,
    message: &str,
) -> bool {
    let status = if status { "True" } else { "False" };
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            let changed = c.status != status || c.reason != reason || c.message != message;
            if c.status != status {
                c.last_transition_time = now();
            }
            c.status = status.to_string();
            c.reason = reason.to_string();
            c.message = message.to_string();
            changed
        }
        None => {
            conditions.push(Condition {
                type_: type_.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
                last_transition_time: now(),
                observed_generation: None,
            });
            true
        }
    }
}

/// Labels as a selector string (`a=b,c=d`), sorted.
pub fn selector_string(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .map(|(k, v)| {
            if v.is_empty() {
                k.clone()
            } else {
                format!("{k}={v}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn condition_transition_time_kept_when_status_stays() {
        let mut list = Vec::new();
        assert!(set_condition(&mut list, "Ready", false, "Waiting", "for x"));
        let first = list[0].last_transition_time.clone();
        assert!(set_condition(&mut list, "Ready", false, "Waiting", "for y"));
        assert_eq!(list[0].last_transition_time, first);
        assert_eq!(list[0].message, "for y");
        assert!(!set_condition(
            &mut list, "Ready", false, "Waiting", "for y"
        ));
        assert!(set_condition(&mut list, "Ready", true, "Ready", ""));
        assert_eq!(list[0].status, "True");
        assert_eq!(list.len(), 1);
    }

    #[test]
    fn cluster_label_fields_append_the_cluster_as_owner_only_when_asked() {
        let obj = ObjectMeta {
            owner_references: Some(vec![OwnerReference {
                api_version: "cluster.x-k8s.io/v1beta2".into(),
                kind: "MachineSet".into(),
                name: "ms".into(),
                uid: "u-ms".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        };
        let cluster = ObjectMeta {
            name: Some("c1".into()),
            uid: Some("u-c1".into()),
            ..ObjectMeta::default()
        };

        assert_eq!(
            cluster_label_fields(&obj, "c1", None),
            json!({"labels": {"cluster.x-k8s.io/cluster-name": "c1"}})
        );
        assert_eq!(
            cluster_label_fields(&obj, "c1", Some(&cluster)),
            json!({
                "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
                "ownerReferences": [
                    {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet", "name": "ms",
                     "uid": "u-ms", "controller": true, "blockOwnerDeletion": true},
                    {"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": "c1",
                     "uid": "u-c1", "controller": false, "blockOwnerDeletion": true}
                ]
            })
        );
    }

    #[test]
    fn owner_lookup_by_group_and_kind() {
        let m = ObjectMeta {
            owner_references: Some(vec![
                owner_ref("apps/v1", "Machine", &ObjectMeta::default(), true, true),
                OwnerReference {
                    api_version: "cluster.x-k8s.io/v1beta1".into(),
                    kind: "Machine".into(),
                    name: "m".into(),
                    uid: "u1".into(),
                    controller: Some(true),
                    block_owner_deletion: None,
                },
            ]),
            ..ObjectMeta::default()
        };
        assert_eq!(
            owner_of(&m, "cluster.x-k8s.io", "Machine").unwrap().name,
            "m"
        );
        assert!(is_owned_by(&m, "u1"));
        assert!(!is_owned_by(&m, "u2"));
    }

    #[test]
    fn selector_strings() {
        let l: BTreeMap<String, String> = [
            ("b".to_string(), "2".to_string()),
            ("a".to_string(), String::new()),
        ]
        .into();
        assert_eq!(selector_string(&l), "a,b=2");
    }
}
