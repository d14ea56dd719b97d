//! The object of an admission request as the deciding code reads it: JSON,
//! without `metadata.managedFields`.
//!
//! The API server sends the object and, on update, the stored object, each
//! with its managed fields: one entry per writer, each a tree of every field
//! that writer set, often larger than the rest of the object. Nothing here
//! reads them, so they are skipped while the request is read instead of
//! being built and dropped. The object is kept as JSON only (no typed copy to
//! convert back): [`super::decide`] reads JSON.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::{ApiResource, DynamicResourceScope, Resource};
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

/// The metadata key left out of [`Reviewed::json`].
const MANAGED_FIELDS: &str = "managedFields";

/// An object of an admission request (`request.object`,
/// `request.oldObject`): its JSON without `metadata.managedFields`, and its
/// metadata read from that JSON (kube's admission types need a
/// [`Resource`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Reviewed {
    /// The object as sent, without `metadata.managedFields`.
    pub json: Value,
    metadata: ObjectMeta,
}

impl Reviewed {
    fn from_map(map: Map<String, Value>) -> Result<Reviewed, serde_json::Error> {
        let metadata = match map.get("metadata") {
            Some(m) => ObjectMeta::deserialize(m)?,
            None => ObjectMeta::default(),
        };
        Ok(Reviewed {
            json: Value::Object(map),
            metadata,
        })
    }
}

impl Serialize for Reviewed {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.json.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Reviewed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = Members { metadata: false }.deserialize(d)?;
        Reviewed::from_map(map).map_err(de::Error::custom)
    }
}

/// Reads an object's members as JSON: an object's `metadata` through
/// another `Members` (`metadata: true`), whose `managedFields` is read past
/// without being built.
#[derive(Clone, Copy)]
struct Members {
    /// These are the members of an object's `metadata`.
    metadata: bool,
}

impl<'de> DeserializeSeed<'de> for Members {
    type Value = Map<String, Value>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Members {
    type Value = Map<String, Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.metadata {
            "an object's metadata"
        } else {
            "a Kubernetes object"
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Self::Value, A::Error> {
        let mut out = Map::new();
        while let Some(k) = a.next_key::<String>()? {
            if self.metadata && k == MANAGED_FIELDS {
                a.next_value::<IgnoredAny>()?;
                continue;
            }
            let v = if !self.metadata && k == "metadata" {
                Value::Object(a.next_value_seed(Members { metadata: true })?)
            } else {
                a.next_value::<Value>()?
            };
            out.insert(k, v);
        }
        Ok(out)
    }
}

/// As kube's `DynamicObject`: the kind is known from the request, not from
/// the type.
impl Resource for Reviewed {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn machine() -> Value {
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {
                "name": "m-1",
                "namespace": "ns",
                "labels": {"cluster.x-k8s.io/cluster-name": "c"},
                "managedFields": [{
                    "manager": "capmox",
                    "operation": "Apply",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:full": {}}}
                }]
            },
            "spec": {"full": true},
            "status": {"initialization": {"provisioned": true}}
        })
    }

    #[test]
    fn an_object_is_read_without_its_managed_fields_and_nothing_else_is_lost() {
        let text = serde_json::to_string(&machine()).unwrap();
        let r: Reviewed = serde_json::from_str(&text).unwrap();
        assert_eq!(
            r.json,
            json!({
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
                "kind": "ProxmoxMachine",
                "metadata": {
                    "name": "m-1",
                    "namespace": "ns",
                    "labels": {"cluster.x-k8s.io/cluster-name": "c"}
                },
                "spec": {"full": true},
                "status": {"initialization": {"provisioned": true}}
            })
        );
        assert_eq!(r.meta().name.as_deref(), Some("m-1"));
        assert_eq!(r.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(r.meta().managed_fields, None);
        // Written back as the JSON kept.
        assert_eq!(serde_json::to_value(&r).unwrap(), r.json);
    }

    #[test]
    fn what_is_not_an_object_is_refused() {
        assert!(serde_json::from_str::<Reviewed>("[1]").is_err());
        assert!(serde_json::from_str::<Reviewed>(r#"{"metadata": 3}"#).is_err());
        assert!(
            serde_json::from_str::<Reviewed>(r#"{"metadata": {"labels": "x"}}"#).is_err(),
            "labels must be a map"
        );
    }
}
