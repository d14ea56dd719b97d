//! Objects behind contract references, and CAPI's `GenerateTemplate`: an
//! object cloned from a `...Template` (`spec.template.spec` → `spec`,
//! `spec.template.metadata` merged with the caller's labels and annotations,
//! plus `cluster.x-k8s.io/cloned-from-name` and `cloned-from-groupkind`,
//! kind = template kind minus `Template`, version from the contract label).
//! Source: CAPI `controllers/external/util.go`.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, ObjectMeta, PostParams};
use serde_json::{Value, json};

use super::Ctx;
use super::meta::{CLONED_FROM_GROUPKIND, CLONED_FROM_NAME, CLUSTER_NAME_LABEL};
use crate::crds::meta::ContractRef;
use crate::error::{E2eError, Result};

/// The dynamic API for the kind a reference names, in `namespace`.
///
/// # Errors
/// [`E2eError::Contract`] when the kind is not installed, else as
/// [`super::kinds::Kinds::resolve`].
pub async fn api_for(ctx: &Ctx, namespace: &str, r: &ContractRef) -> Result<Api<DynamicObject>> {
    ctx.kinds
        .api(namespace, &r.api_group, &r.kind)
        .await
        .map_err(|e| super::kinds::not_installed(&r.api_group, &r.kind, e))
}

/// The object a reference names, `None` when it does not exist.
///
/// # Errors
/// As [`api_for`], and [`E2eError::Kube`] for failures other than 404.
pub async fn get(ctx: &Ctx, namespace: &str, r: &ContractRef) -> Result<Option<DynamicObject>> {
    let api = api_for(ctx, namespace, r).await?;
    Ok(api.get_opt(&r.name).await?)
}

/// The object a reference names as a watch last delivered it
/// ([`super::cache`]; shared, not copied), else from the API server (`None`
/// when it does not exist). For paths that must notice a deletion, use
/// [`get`].
///
/// # Errors
/// As [`get`].
pub async fn get_seen(
    ctx: &Ctx,
    namespace: &str,
    r: &ContractRef,
) -> Result<Option<Arc<DynamicObject>>> {
    if let Some(obj) = ctx
        .seen
        .objects
        .get(&r.api_group, &r.kind, namespace, &r.name)
    {
        return Ok(Some(obj));
    }
    Ok(get(ctx, namespace, r).await?.map(Arc::new))
}

/// A field by JSON pointer (`/status/initialization/provisioned`).
pub fn field<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a Value> {
    obj.data.pointer(pointer)
}

/// A boolean field (`false` when absent or not a boolean).
pub fn flag(obj: &DynamicObject, pointer: &str) -> bool {
    field(obj, pointer)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// A string field (`None` when absent, empty or not a string).
pub fn text<'a>(obj: &'a DynamicObject, pointer: &str) -> Option<&'a str> {
    field(obj, pointer)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// What to clone, and how the clone is labelled and owned.
#[derive(Clone, Debug)]
pub struct CloneRequest<'a> {
    /// Namespace of the template and the clone.
    pub namespace: &'a str,
    /// The template (e.g. a ProxmoxMachineTemplate).
    pub template: &'a ContractRef,
    /// Name of the clone (CAPI: the Machine's name).
    pub name: &'a str,
    /// The Cluster's name (label `cluster.x-k8s.io/cluster-name`).
    pub cluster_name: &'a str,
    /// Labels added to the template's `spec.template.metadata.labels`.
    pub labels: BTreeMap<String, String>,
    /// Annotations added to the template's `spec.template.metadata.annotations`.
    pub annotations: BTreeMap<String, String>,
    /// The owner (the MachineSet or KubeadmControlPlane; the Machine controller
    /// later makes the Machine the controller).
    pub owner: OwnerReference,
}

/// The kind a template clones into: `ProxmoxMachineTemplate` → `ProxmoxMachine`.
///
/// # Errors
/// [`E2eError::Contract`] when the kind does not end in `Template`.
pub fn cloned_kind(template_kind: &str) -> Result<&str> {
    template_kind
        .strip_suffix("Template")
        .filter(|k| !k.is_empty())
        .ok_or_else(|| E2eError::Contract(format!("{template_kind} is not a template kind")))
}

/// Builds the clone of `template` (a `...Template` object) as CAPI's
/// `GenerateTemplate` does; `api_version` is the cloned kind's.
pub fn generate(
    template: &DynamicObject,
    req: &CloneRequest<'_>,
    api_version: &str,
    kind: &str,
) -> Value {
    let tmeta = template.data.pointer("/spec/template/metadata");
    let mut labels: BTreeMap<String, String> = tmeta
        .and_then(|m| m.get("labels"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    labels.extend(req.labels.clone());
    labels.insert(CLUSTER_NAME_LABEL.into(), req.cluster_name.into());
    let mut annotations: BTreeMap<String, String> = tmeta
        .and_then(|m| m.get("annotations"))
        .and_then(|l| serde_json::from_value(l.clone()).ok())
        .unwrap_or_default();
    annotations.extend(req.annotations.clone());
    annotations.insert(CLONED_FROM_NAME.into(), req.template.name.clone());
    annotations.insert(
        CLONED_FROM_GROUPKIND.into(),
        format!("{}.{}", req.template.kind, req.template.api_group),
    );
    let spec = template
        .data
        .pointer("/spec/template/spec")
        .cloned()
        .unwrap_or_else(|| json!({}));
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": req.name,
            "namespace": req.namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [req.owner],
        },
        "spec": spec,
    })
}

/// Clones the template into a new object and returns a reference to it.
///
/// # Errors
/// [`E2eError::Contract`] for a missing template or kind; [`E2eError::Kube`],
/// including `409` when an object of that name exists (a collision of
/// generated names: the caller never owns it and picks another name).
pub async fn clone_from_template(ctx: &Ctx, req: &CloneRequest<'_>) -> Result<ContractRef> {
    let tapi = api_for(ctx, req.namespace, req.template).await?;
    let template = tapi.get_opt(&req.template.name).await?.ok_or_else(|| {
        E2eError::Contract(format!(
            "template {} {}/{} not found",
            req.template.kind, req.namespace, req.template.name
        ))
    })?;
    let kind = cloned_kind(&req.template.kind)?;
    let ar = ctx
        .kinds
        .resolve(&req.template.api_group, kind)
        .await
        .map_err(|e| super::kinds::not_installed(&req.template.api_group, kind, e))?;
    let body = generate(&template, req, &ar.api_version, kind);
    let obj: DynamicObject = serde_json::from_value(body)?;
    let api: Api<DynamicObject> = Api::namespaced_with(ctx.client.clone(), req.namespace, &ar);
    api.create(&PostParams::default(), &obj).await?;
    Ok(ContractRef {
        api_group: req.template.api_group.clone(),
        kind: kind.to_string(),
        name: req.name.to_string(),
    })
}

/// The `ObjectMeta` of a dynamic object.
pub fn meta(obj: &DynamicObject) -> &ObjectMeta {
    &obj.metadata
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generate_matches_capi_generate_template() {
        let template: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
            "kind": "ProxmoxMachineTemplate",
            "metadata": {"name": "wl1-worker", "namespace": "ns", "uid": "t-uid",
                         "resourceVersion": "7", "finalizers": ["x"]},
            "spec": {"template": {
                "metadata": {"labels": {"from-template": "1"}, "annotations": {"a": "b"}},
                "spec": {"numCores": 4, "memoryMiB": 8192}
            }}
        }))
        .unwrap();
        let template_ref = ContractRef {
            api_group: "infrastructure.cluster.x-k8s.io".into(),
            kind: "ProxmoxMachineTemplate".into(),
            name: "wl1-worker".into(),
        };
        let owner = OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "MachineSet".into(),
            name: "ms".into(),
            uid: "ms-uid".into(),
            controller: Some(false),
            block_owner_deletion: Some(true),
        };
        let req = CloneRequest {
            namespace: "ns",
            template: &template_ref,
            name: "ms-abcde",
            cluster_name: "wl1",
            labels: [("cluster.x-k8s.io/set-name".to_string(), "ms".to_string())].into(),
            annotations: BTreeMap::new(),
            owner,
        };
        let got = generate(
            &template,
            &req,
            "infrastructure.cluster.x-k8s.io/v1alpha3",
            "ProxmoxMachine",
        );
        assert_eq!(
            got,
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3",
                "kind": "ProxmoxMachine",
                "metadata": {
                    "name": "ms-abcde",
                    "namespace": "ns",
                    "labels": {
                        "cluster.x-k8s.io/cluster-name": "wl1",
                        "cluster.x-k8s.io/set-name": "ms",
                        "from-template": "1"
                    },
                    "annotations": {
                        "a": "b",
                        "cluster.x-k8s.io/cloned-from-groupkind": "ProxmoxMachineTemplate.infrastructure.cluster.x-k8s.io",
                        "cluster.x-k8s.io/cloned-from-name": "wl1-worker"
                    },
                    "ownerReferences": [{
                        "apiVersion": "cluster.x-k8s.io/v1beta2",
                        "kind": "MachineSet",
                        "name": "ms",
                        "uid": "ms-uid",
                        "controller": false,
                        "blockOwnerDeletion": true
                    }]
                },
                "spec": {"numCores": 4, "memoryMiB": 8192}
            })
        );
    }

    #[test]
    fn cloned_kinds() {
        assert_eq!(
            cloned_kind("ProxmoxMachineTemplate").unwrap(),
            "ProxmoxMachine"
        );
        assert_eq!(
            cloned_kind("KubeadmConfigTemplate").unwrap(),
            "KubeadmConfig"
        );
        assert!(cloned_kind("ProxmoxMachine").is_err());
        assert!(cloned_kind("Template").is_err());
    }
}
