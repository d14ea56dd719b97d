//! Resource types the server serves: group, versions, names, scope, schemas and printer
//! columns, for built-in kinds ([`builtin`]) and CustomResourceDefinitions ([`crd`]).

pub mod builtin;
pub mod crd;
pub mod events;

use crate::schema::cel::CelRules;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where the objects of a resource live in the store: the storage resource's group and
/// plural. `events.k8s.io/events` shares the core `events` storage.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StorageKey {
    /// API group ("" for core).
    pub group: String,
    /// Plural resource name.
    pub plural: String,
}

/// How objects are presented by a resource compared with their stored form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Stored as served (only `apiVersion` changes between versions).
    Plain,
    /// `events.k8s.io/v1` Event, stored as a core `v1` Event (field names mapped).
    EventsV1,
}

/// Built-in kinds with behaviour beyond their schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// `v1` Namespace (lifecycle: `Terminating` until its contents are gone).
    Namespace,
    /// `v1` Secret (`stringData` folded into base64 `data`).
    Secret,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `v1` Event.
    CoreEvent,
    /// `events.k8s.io/v1` Event.
    EventsV1Event,
    /// `coordination.k8s.io/v1` Lease.
    Lease,
    /// `v1` Node (cluster-scoped; `status` may be set on create, as kubelet registers).
    Node,
    /// `apiextensions.k8s.io/v1` CustomResourceDefinition (installs resource types).
    Crd,
    /// `admissionregistration.k8s.io/v1` MutatingWebhookConfiguration.
    MutatingWebhookConfiguration,
    /// `admissionregistration.k8s.io/v1` ValidatingWebhookConfiguration.
    ValidatingWebhookConfiguration,
}

/// Where a printer column's cell comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ColumnSource {
    /// A JSONPath (the subset `.a.b`, `.a[0]`, `.a[?(@.k=="v")].b`).
    JsonPath(String),
    /// A JSONPath whose value is shown as is, even for `date` columns (the default table
    /// convertor's `Created At`).
    Raw(String),
    /// Number of keys in `data` plus `binaryData` (ConfigMap, Secret "DATA").
    DataCount,
    /// `<kind>/<name>` of the event's regarding/involved object.
    EventObject,
    /// Age of the newest of an event's times ("LAST SEEN").
    EventLastSeen,
    /// A string at a JSONPath, or the given text when it is absent or empty (Node
    /// `VERSION` prints "", `OS-IMAGE` "<unknown>").
    TextOr(String, String),
    /// Node `STATUS`: `Ready`/`NotReady` from the `Ready` condition (`Unknown` without
    /// one), `,SchedulingDisabled` when `spec.unschedulable`.
    NodeStatus,
    /// Node `ROLES`: the `node-role.kubernetes.io/<role>` label suffixes and the
    /// `kubernetes.io/role` label value, sorted and comma-joined; `<none>` without any.
    NodeRoles,
    /// The first `status.addresses[]` entry of this type (`InternalIP`, `ExternalIP`),
    /// `<none>` without one.
    NodeAddress(String),
}

/// One column of the server-side Table output (`additionalPrinterColumns` for CRDs).
#[derive(Clone, Debug, PartialEq)]
pub struct PrinterColumn {
    /// Column header (`kubectl` upper-cases it).
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `date`.
    pub type_: String,
    /// OpenAPI format hint (`name` for the Name column).
    pub format: String,
    /// Description.
    pub description: String,
    /// 0 for default columns, more for `-o wide`.
    pub priority: i64,
    /// Where the value comes from.
    pub source: ColumnSource,
}

impl PrinterColumn {
    /// A column backed by a JSONPath.
    pub fn path(name: &str, type_: &str, json_path: &str) -> PrinterColumn {
        PrinterColumn {
            name: name.to_string(),
            type_: type_.to_string(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source: ColumnSource::JsonPath(json_path.to_string()),
        }
    }

    /// A computed column.
    pub fn computed(name: &str, type_: &str, source: ColumnSource) -> PrinterColumn {
        PrinterColumn {
            name: name.to_string(),
            type_: type_.to_string(),
            format: String::new(),
            description: String::new(),
            priority: 0,
            source,
        }
    }

    /// The `Age` column (`.metadata.creationTimestamp`, type `date`).
    pub fn age() -> PrinterColumn {
        PrinterColumn::path("Age", "date", ".metadata.creationTimestamp")
    }
}

/// One served (or stored) version of a resource.
#[derive(Clone, Debug)]
pub struct Version {
    /// Version name (`v1`, `v1beta2`).
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether this is the storage version.
    pub storage: bool,
    /// The structural `openAPIV3Schema` (None: no validation, nothing pruned).
    pub schema: Option<Arc<Value>>,
    /// Compiled CEL rules of the schema.
    pub cel: Option<Arc<CelRules>>,
    /// Whether the `status` subresource is enabled.
    pub status_subresource: bool,
    /// The `scale` subresource (`subresources.scale` of a CRD version), if enabled.
    pub scale: Option<ScalePaths>,
    /// Table columns after `Name`.
    pub columns: Vec<PrinterColumn>,
    /// Field-selector labels besides `metadata.name` and `metadata.namespace`
    /// (`spec.selectableFields` for CRDs, e.g. `type` for Secrets).
    pub selectable_fields: Vec<String>,
}

/// `subresources.scale` of a CRD version: where `autoscaling/v1` `Scale`'s fields live
/// in the custom resource (simple dot paths such as `.spec.replicas`), as
/// `apiextensions.k8s.io/v1` `CustomResourceSubresourceScale` declares them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalePaths {
    /// `specReplicasPath` (under `.spec.`): `Scale.spec.replicas`.
    pub spec_replicas: String,
    /// `statusReplicasPath` (under `.status.`): `Scale.status.replicas`.
    pub status_replicas: String,
    /// `labelSelectorPath` (under `.spec.` or `.status.`, a string in the serialized
    /// label-selector form): `Scale.status.selector`. `None` when not declared.
    pub label_selector: Option<String>,
}

impl ScalePaths {
    /// The path's field names (`.spec.replicas` → `["spec", "replicas"]`).
    pub fn fields(path: &str) -> Vec<&str> {
        path.trim_start_matches('.')
            .split('.')
            .filter(|p| !p.is_empty())
            .collect()
    }
}

impl Version {
    /// All field-selector labels of this version.
    pub fn field_labels(&self) -> Vec<String> {
        let mut out = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
        ];
        out.extend(self.selectable_fields.iter().cloned());
        out
    }
}

/// A resource type as served at `/api[s]/<group>/<version>/<plural>`.
#[derive(Clone, Debug)]
pub struct ResourceType {
    /// API group ("" for core).
    pub group: String,
    /// Kind (`Widget`).
    pub kind: String,
    /// List kind (`WidgetList`).
    pub list_kind: String,
    /// Plural (`widgets`).
    pub plural: String,
    /// Singular (`widget`).
    pub singular: String,
    /// Short names (`wd`).
    pub short_names: Vec<String>,
    /// Categories (`all`, `cluster-api`).
    pub categories: Vec<String>,
    /// Namespaced (true) or cluster-scoped.
    pub namespaced: bool,
    /// Versions in priority order (preferred first).
    pub versions: Vec<Version>,
    /// Where objects are stored.
    pub storage: StorageKey,
    /// Stored form vs served form.
    pub view: View,
    /// Special behaviour for built-in kinds.
    pub builtin: Option<Builtin>,
    /// DELETE answers with the deleted object (CRs) instead of a success Status.
    pub return_deleted_object: bool,
    /// PUT without `metadata.resourceVersion` is allowed (core kinds) or refused (CRs).
    pub allow_unconditional_update: bool,
    /// The conversion webhook of a CRD with `spec.conversion.strategy: Webhook`
    /// (`None`: versions differ only in `apiVersion`).
    pub conversion: Option<Arc<crate::webhook::Converter>>,
}

impl ResourceType {
    /// A served version by name.
    pub fn served_version(&self, name: &str) -> Option<&Version> {
        self.versions.iter().find(|v| v.served && v.name == name)
    }

    /// The storage version's name ("" only for a type without versions, which the
    /// constructors never build).
    pub fn storage_version(&self) -> &str {
        self.versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| self.versions.first())
            .map(|v| v.name.as_str())
            .unwrap_or("")
    }

    /// The preferred (first served) version.
    #[cfg(test)]
    pub fn preferred_version(&self) -> &str {
        self.versions
            .iter()
            .find(|v| v.served)
            .map(|v| v.name.as_str())
            .unwrap_or("")
    }

    /// `apiVersion` for a version (`v1` or `group/v1`).
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    /// The key under which this resource is registered.
    pub fn key(&self) -> (String, String) {
        (self.group.clone(), self.plural.clone())
    }
}

/// Sort key putting Kubernetes versions in discovery priority order: GA before beta before
/// alpha, higher numbers first, non-Kubernetes-style names last (alphabetically).
pub fn version_priority(v: &str) -> (u8, i64, u8, i64, String) {
    let rest = match v.strip_prefix('v') {
        Some(r) => r,
        None => return (9, 0, 0, 0, v.to_string()),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<i64>() else {
        return (9, 0, 0, 0, v.to_string());
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (0, -major, 0, 0, String::new());
    }
    for (class, word) in [(1u8, "beta"), (2u8, "alpha")] {
        if let Some(n) = tail.strip_prefix(word)
            && let Ok(minor) = n.parse::<i64>()
        {
            return (class, -major, 0, -minor, String::new());
        }
    }
    (9, 0, 0, 0, v.to_string())
}

/// The set of served resource types, keyed by `(group, plural)`.
#[derive(Debug, Default, Clone)]
pub struct Registry {
    types: BTreeMap<(String, String), Arc<ResourceType>>,
}

impl Registry {
    /// Registers (or replaces) a resource type.
    pub fn insert(&mut self, rt: ResourceType) -> Arc<ResourceType> {
        let rt = Arc::new(rt);
        self.types.insert(rt.key(), rt.clone());
        rt
    }

    /// Removes a resource type.
    pub fn remove(&mut self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types.remove(&(group.to_string(), plural.to_string()))
    }

    /// Looks a resource up by group and plural.
    pub fn get(&self, group: &str, plural: &str) -> Option<Arc<ResourceType>> {
        self.types
            .get(&(group.to_string(), plural.to_string()))
            .cloned()
    }

    /// All resource types.
    pub fn all(&self) -> impl Iterator<Item = &Arc<ResourceType>> {
        self.types.values()
    }

    /// Served groups with their versions in priority order.
    pub fn groups(&self) -> BTreeMap<String, Vec<String>> {
        let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for rt in self.types.values() {
            let e = out.entry(rt.group.clone()).or_default();
            for v in rt.versions.iter().filter(|v| v.served) {
                if !e.contains(&v.name) {
                    e.push(v.name.clone());
                }
            }
        }
        for versions in out.values_mut() {
            versions.sort_by_key(|v| version_priority(v));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_like_kubernetes_discovery() {
        let mut v = vec![
            "v1alpha1", "v1beta1", "v1", "v2", "v1beta2", "foo", "v2alpha3", "v10",
        ];
        v.sort_by_key(|x| version_priority(x));
        assert_eq!(
            v,
            vec![
                "v10", "v2", "v1", "v1beta2", "v1beta1", "v2alpha3", "v1alpha1", "foo"
            ]
        );
    }
}
