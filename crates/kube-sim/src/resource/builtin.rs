//! The built-in kinds the provider and its tests use: Namespace, Secret, ConfigMap, Event
//! (`v1` and `events.k8s.io/v1`), Lease, Node, CustomResourceDefinition and the
//! admission webhook configurations (`admissionregistration.k8s.io/v1`).
//!
//! Their schemas list the fields of the Go types in `k8s.io/api` (v1.33) so unknown fields
//! are dropped (or refused with `fieldValidation=Strict`) the way the Go decoder does; value
//! validation of built-ins is limited to what is noted on each kind.

use super::{Builtin, ColumnSource, PrinterColumn, ResourceType, StorageKey, Version, View};
use serde_json::{Value, json};
use std::sync::Arc;

fn string() -> Value {
    json!({"type": "string"})
}

fn int32() -> Value {
    json!({"type": "integer", "format": "int32"})
}

fn string_map() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "string"}})
}

fn object_reference() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": string(), "fieldPath": string(), "kind": string(), "name": string(),
            "namespace": string(), "resourceVersion": string(), "uid": string()
        },
        "x-kubernetes-map-type": "atomic"
    })
}

fn event_series() -> Value {
    json!({"type": "object", "properties": {"count": int32(), "lastObservedTime": string()}})
}

fn event_source() -> Value {
    json!({"type": "object", "properties": {"component": string(), "host": string()}})
}

fn root(properties: Value) -> Value {
    let mut props = json!({
        "apiVersion": string(),
        "kind": string(),
        "metadata": {"type": "object"}
    });
    if let (Some(p), Some(extra)) = (props.as_object_mut(), properties.as_object()) {
        for (k, v) in extra {
            p.insert(k.clone(), v.clone());
        }
    }
    json!({"type": "object", "properties": props})
}

fn version(name: &str, schema: Value, status: bool, columns: Vec<PrinterColumn>) -> Version {
    Version {
        selectable_fields: Vec::new(),
        name: name.to_string(),
        served: true,
        storage: true,
        schema: Some(Arc::new(schema)),
        cel: None,
        status_subresource: status,
        scale: None,
        columns,
    }
}

struct Names<'a> {
    group: &'a str,
    kind: &'a str,
    plural: &'a str,
    short: &'a [&'a str],
    namespaced: bool,
}

fn resource(n: Names<'_>, v: Version, builtin: Builtin) -> ResourceType {
    ResourceType {
        group: n.group.to_string(),
        kind: n.kind.to_string(),
        list_kind: format!("{}List", n.kind),
        plural: n.plural.to_string(),
        singular: n.kind.to_lowercase(),
        short_names: n.short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced: n.namespaced,
        versions: vec![v],
        storage: StorageKey {
            group: n.group.to_string(),
            plural: n.plural.to_string(),
        },
        view: View::Plain,
        builtin: Some(builtin),
        return_deleted_object: false,
        allow_unconditional_update: true,
        conversion: None,
    }
}

/// `v1` Namespace: cluster-scoped, `status` subresource, `spec.finalizers`,
/// `status.phase`.
pub fn namespace() -> ResourceType {
    let schema = root(json!({
        "spec": {"type": "object", "properties": {
            "finalizers": {"type": "array", "items": string()}
        }},
        "status": {"type": "object", "properties": {
            "phase": string(),
            "conditions": {"type": "array", "items": {"type": "object", "properties": {
                "type": string(), "status": string(), "lastTransitionTime": string(),
                "reason": string(), "message": string()
            }}, "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]}
        }}
    }));
    let cols = vec![
        PrinterColumn::path("Status", "string", ".status.phase"),
        PrinterColumn::age(),
    ];
    let mut v = version("v1", schema, true, cols);
    v.selectable_fields = vec!["status.phase".into()];
    let mut rt = resource(
        Names {
            group: "",
            kind: "Namespace",
            plural: "namespaces",
            short: &["ns"],
            namespaced: false,
        },
        v,
        Builtin::Namespace,
    );
    rt.return_deleted_object = true;
    rt
}

/// `v1` Secret: `data` (base64), `stringData` (folded into `data` on write), `type`,
/// `immutable`.
pub fn secret() -> ResourceType {
    let schema = root(json!({
        "data": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
        "stringData": string_map(),
        "type": string(),
        "immutable": {"type": "boolean"}
    }));
    let cols = vec![
        PrinterColumn::path("Type", "string", ".type"),
        PrinterColumn::computed("Data", "integer", ColumnSource::DataCount),
        PrinterColumn::age(),
    ];
    let mut v = version("v1", schema, false, cols);
    v.selectable_fields = vec!["type".into()];
    resource(
        Names {
            group: "",
            kind: "Secret",
            plural: "secrets",
            short: &[],
            namespaced: true,
        },
        v,
        Builtin::Secret,
    )
}

/// `v1` ConfigMap: `data`, `binaryData` (base64), `immutable`.
pub fn config_map() -> ResourceType {
    let schema = root(json!({
        "data": string_map(),
        "binaryData": {"type": "object", "additionalProperties": {"type": "string", "format": "byte"}},
        "immutable": {"type": "boolean"}
    }));
    let cols = vec![
        PrinterColumn::computed("Data", "integer", ColumnSource::DataCount),
        PrinterColumn::age(),
    ];
    resource(
        Names {
            group: "",
            kind: "ConfigMap",
            plural: "configmaps",
            short: &["cm"],
            namespaced: true,
        },
        version("v1", schema, false, cols),
        Builtin::ConfigMap,
    )
}

fn event_columns() -> Vec<PrinterColumn> {
    vec![
        PrinterColumn::computed("Last Seen", "string", ColumnSource::EventLastSeen),
        PrinterColumn::path("Type", "string", ".type"),
        PrinterColumn::path("Reason", "string", ".reason"),
        PrinterColumn::computed("Object", "string", ColumnSource::EventObject),
        PrinterColumn::path("Message", "string", ".message"),
    ]
}

/// `v1` Event (core): the storage of both Event APIs.
pub fn core_event() -> ResourceType {
    let schema = root(json!({
        "involvedObject": object_reference(),
        "reason": string(),
        "message": string(),
        "source": event_source(),
        "firstTimestamp": string(),
        "lastTimestamp": string(),
        "count": int32(),
        "type": string(),
        "eventTime": string(),
        "series": event_series(),
        "action": string(),
        "related": object_reference(),
        "reportingComponent": string(),
        "reportingInstance": string()
    }));
    let mut v = version("v1", schema, false, event_columns());
    v.selectable_fields = [
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    resource(
        Names {
            group: "",
            kind: "Event",
            plural: "events",
            short: &["ev"],
            namespaced: true,
        },
        v,
        Builtin::CoreEvent,
    )
}

/// `events.k8s.io/v1` Event, served from the core `events` storage with field names
/// mapped (`note`↔`message`, `regarding`↔`involvedObject`, ...).
pub fn events_v1_event() -> ResourceType {
    let schema = root(json!({
        "eventTime": string(),
        "series": event_series(),
        "reportingController": string(),
        "reportingInstance": string(),
        "action": string(),
        "reason": string(),
        "regarding": object_reference(),
        "related": object_reference(),
        "note": string(),
        "type": string(),
        "deprecatedSource": event_source(),
        "deprecatedFirstTimestamp": string(),
        "deprecatedLastTimestamp": string(),
        "deprecatedCount": int32()
    }));
    let mut columns = event_columns();
    for c in &mut columns {
        if c.name == "Message" {
            c.source = ColumnSource::JsonPath(".note".into());
        }
    }
    let mut v = version("v1", schema, false, columns);
    v.selectable_fields = [
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "reason",
        "reportingController",
        "type",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut rt = resource(
        Names {
            group: "events.k8s.io",
            kind: "Event",
            plural: "events",
            short: &["ev"],
            namespaced: true,
        },
        v,
        Builtin::EventsV1Event,
    );
    rt.storage = StorageKey {
        group: String::new(),
        plural: "events".into(),
    };
    rt.view = View::EventsV1;
    rt
}

/// `coordination.k8s.io/v1` Lease (leader election).
pub fn lease() -> ResourceType {
    let schema = root(json!({
        "spec": {"type": "object", "properties": {
            "holderIdentity": string(),
            "leaseDurationSeconds": int32(),
            "acquireTime": string(),
            "renewTime": string(),
            "leaseTransitions": int32(),
            "strategy": string(),
            "preferredHolder": string()
        }}
    }));
    let cols = vec![
        PrinterColumn::path("Holder", "string", ".spec.holderIdentity"),
        PrinterColumn::age(),
    ];
    resource(
        Names {
            group: "coordination.k8s.io",
            kind: "Lease",
            plural: "leases",
            short: &[],
            namespaced: true,
        },
        version("v1", schema, false, cols),
        Builtin::Lease,
    )
}

fn object(properties: Value) -> Value {
    json!({"type": "object", "properties": properties})
}

fn string_list() -> Value {
    json!({"type": "array", "items": string()})
}

fn quantity_map() -> Value {
    json!({"type": "object", "additionalProperties": {"x-kubernetes-int-or-string": true}})
}

fn node_config_source() -> Value {
    object(json!({"configMap": object(json!({
        "kubeletConfigKey": string(), "name": string(), "namespace": string(),
        "resourceVersion": string(), "uid": string()
    }))}))
}

/// `v1` Node: cluster-scoped, `status` subresource (its `status` is kept on create, as
/// kubelet registers a Node with its status). `status.conditions` is a list-map keyed by
/// `type`, `spec.podCIDRs` a set, `status.addresses` atomic, as in `k8s.io/api/core/v1`
/// (v1.33). The table follows kube-apiserver's node printer
/// (`STATUS`, `ROLES`, `AGE`, `VERSION`; `-o wide` adds addresses and `nodeInfo`).
pub fn node() -> ResourceType {
    let schema = root(json!({
        "spec": object(json!({
            "podCIDR": string(),
            "podCIDRs": {"type": "array", "items": string(), "x-kubernetes-list-type": "set"},
            "providerID": string(),
            "unschedulable": {"type": "boolean"},
            "taints": {"type": "array", "items": object(json!({
                "key": string(), "value": string(), "effect": string(), "timeAdded": string()
            })), "x-kubernetes-list-type": "atomic"},
            "configSource": node_config_source(),
            "externalID": string()
        })),
        "status": object(json!({
            "capacity": quantity_map(),
            "allocatable": quantity_map(),
            "phase": string(),
            "conditions": {"type": "array", "items": object(json!({
                "type": string(), "status": string(), "lastHeartbeatTime": string(),
                "lastTransitionTime": string(), "reason": string(), "message": string()
            })), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
            // `+listType=atomic` (a dual-stack node has two `InternalIP`s); the
            // `patchMergeKey=type` of strategic merge patch is not honoured.
            "addresses": {"type": "array", "items": object(json!({
                "type": string(), "address": string()
            })), "x-kubernetes-list-type": "atomic"},
            "daemonEndpoints": object(json!({
                "kubeletEndpoint": object(json!({"Port": int32()}))
            })),
            "nodeInfo": object(json!({
                "machineID": string(), "systemUUID": string(), "bootID": string(),
                "kernelVersion": string(), "osImage": string(),
                "containerRuntimeVersion": string(), "kubeletVersion": string(),
                "kubeProxyVersion": string(), "operatingSystem": string(),
                "architecture": string(),
                "swap": object(json!({"capacity": {"type": "integer", "format": "int64"}}))
            })),
            "images": {"type": "array", "items": object(json!({
                "names": string_list(), "sizeBytes": {"type": "integer", "format": "int64"}
            }))},
            "volumesInUse": string_list(),
            "volumesAttached": {"type": "array", "items": object(json!({
                "name": string(), "devicePath": string()
            }))},
            "config": object(json!({
                "assigned": node_config_source(), "active": node_config_source(),
                "lastKnownGood": node_config_source(), "error": string()
            })),
            "runtimeHandlers": {"type": "array", "items": object(json!({
                "name": string(),
                "features": object(json!({
                    "recursiveReadOnlyMounts": {"type": "boolean"},
                    "userNamespaces": {"type": "boolean"}
                }))
            }))},
            "features": object(json!({"supplementalGroupsPolicy": {"type": "boolean"}}))
        }))
    }));
    let text_or = |name: &str, path: &str, missing: &str| {
        PrinterColumn::computed(
            name,
            "string",
            ColumnSource::TextOr(path.to_string(), missing.to_string()),
        )
    };
    let wide = |mut c: PrinterColumn| {
        c.priority = 1;
        c
    };
    let cols = vec![
        PrinterColumn::computed("Status", "string", ColumnSource::NodeStatus),
        PrinterColumn::computed("Roles", "string", ColumnSource::NodeRoles),
        PrinterColumn::age(),
        text_or("Version", ".status.nodeInfo.kubeletVersion", ""),
        wide(PrinterColumn::computed(
            "Internal-IP",
            "string",
            ColumnSource::NodeAddress("InternalIP".into()),
        )),
        wide(PrinterColumn::computed(
            "External-IP",
            "string",
            ColumnSource::NodeAddress("ExternalIP".into()),
        )),
        wide(text_or("OS-Image", ".status.nodeInfo.osImage", "<unknown>")),
        wide(text_or(
            "Kernel-Version",
            ".status.nodeInfo.kernelVersion",
            "<unknown>",
        )),
        wide(text_or(
            "Container-Runtime",
            ".status.nodeInfo.containerRuntimeVersion",
            "<unknown>",
        )),
    ];
    let mut v = version("v1", schema, true, cols);
    v.selectable_fields = vec!["spec.unschedulable".into()];
    resource(
        Names {
            group: "",
            kind: "Node",
            plural: "nodes",
            short: &["no"],
            namespaced: false,
        },
        v,
        Builtin::Node,
    )
}

/// `apiextensions.k8s.io/v1` CustomResourceDefinition (cluster-scoped, `status`
/// subresource; `spec` and `status` are kept as sent).
pub fn crd() -> ResourceType {
    let schema = root(json!({
        "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
    }));
    let cols = vec![PrinterColumn::computed(
        "Created At",
        "date",
        ColumnSource::Raw(".metadata.creationTimestamp".into()),
    )];
    let mut rt = resource(
        Names {
            group: "apiextensions.k8s.io",
            kind: "CustomResourceDefinition",
            plural: "customresourcedefinitions",
            short: &["crd", "crds"],
            namespaced: false,
        },
        version("v1", schema, true, cols),
        Builtin::Crd,
    );
    rt.categories = vec!["api-extensions".into()];
    rt.return_deleted_object = true;
    rt.allow_unconditional_update = false;
    rt
}

/// A `LabelSelector` defaulting to `{}` (selects everything).
fn label_selector() -> Value {
    json!({"type": "object", "default": {}, "properties": {
        "matchLabels": string_map(),
        "matchExpressions": {"type": "array", "items": {"type": "object", "properties": {
            "key": string(), "operator": string(), "values": {"type": "array", "items": string()}
        }}}
    }})
}

/// `admissionregistration.k8s.io/v1` Mutating/ValidatingWebhookConfiguration
/// (cluster-scoped): the fields of `MutatingWebhook`/`ValidatingWebhook`
/// with kube-apiserver's v1 defaults (`failurePolicy: Fail`, `matchPolicy:
/// Equivalent`, empty selectors, `timeoutSeconds: 10`, `service.port: 443`,
/// `rules[].scope: "*"`, mutating `reinvocationPolicy: Never`); the checks on
/// write are `crate::webhook::config::validate`.
fn webhook_configuration(
    kind: &str,
    plural: &str,
    mutating: bool,
    builtin: Builtin,
) -> ResourceType {
    let mut webhook = json!({
        "name": string(),
        "clientConfig": {"type": "object", "properties": {
            "url": string(),
            "caBundle": {"type": "string", "format": "byte"},
            "service": {"type": "object", "properties": {
                "namespace": string(), "name": string(), "path": string(),
                "port": {"type": "integer", "format": "int32", "default": 443}
            }}
        }},
        "rules": {"type": "array", "items": {"type": "object", "properties": {
            "operations": {"type": "array", "items": string()},
            "apiGroups": {"type": "array", "items": string()},
            "apiVersions": {"type": "array", "items": string()},
            "resources": {"type": "array", "items": string()},
            "scope": {"type": "string", "default": "*"}
        }}},
        "failurePolicy": {"type": "string", "default": "Fail"},
        "matchPolicy": {"type": "string", "default": "Equivalent"},
        "namespaceSelector": label_selector(),
        "objectSelector": label_selector(),
        "sideEffects": string(),
        "timeoutSeconds": {"type": "integer", "format": "int32", "default": 10},
        "admissionReviewVersions": {"type": "array", "items": string()},
        "matchConditions": {"type": "array", "items": {"type": "object", "properties": {
            "name": string(), "expression": string()
        }}}
    });
    if mutating {
        webhook["reinvocationPolicy"] = json!({"type": "string", "default": "Never"});
    }
    let schema = root(json!({
        "webhooks": {"type": "array", "items": {"type": "object", "properties": webhook},
                     "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}
    }));
    resource(
        Names {
            group: "admissionregistration.k8s.io",
            kind,
            plural,
            short: &[],
            namespaced: false,
        },
        version("v1", schema, false, vec![PrinterColumn::age()]),
        builtin,
    )
}

/// `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration.
pub fn mutating_webhook_configuration() -> ResourceType {
    webhook_configuration(
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        true,
        Builtin::MutatingWebhookConfiguration,
    )
}

/// `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration.
pub fn validating_webhook_configuration() -> ResourceType {
    webhook_configuration(
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        Builtin::ValidatingWebhookConfiguration,
    )
}

/// All built-in resource types.
pub fn all() -> Vec<ResourceType> {
    vec![
        namespace(),
        secret(),
        config_map(),
        core_event(),
        events_v1_event(),
        lease(),
        node(),
        crd(),
        mutating_webhook_configuration(),
        validating_webhook_configuration(),
    ]
}

/// Namespaces that exist from the start, as on a fresh cluster.
pub const INITIAL_NAMESPACES: [&str; 4] =
    ["default", "kube-system", "kube-public", "kube-node-lease"];
