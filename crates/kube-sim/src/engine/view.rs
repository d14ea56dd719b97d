//! An object as served in a version, serialised straight from its stored form:
//! the same JSON as [`super::to_view`] followed by `serde_json::to_vec`, without
//! copying the stored tree first (GET, LIST and watch responses are most of what
//! the server does; copying every object before writing it out doubled their cost).

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::resource::{ResourceType, View};

/// A stored object in a served version, ready to serialise. `apiVersion` and
/// `kind` are those of the served version; every other field is borrowed.
#[derive(Debug)]
pub enum ViewRef<'a> {
    /// A plain view over a stored object (the fields as stored).
    Borrowed {
        /// The stored object (a JSON object).
        stored: &'a serde_json::Map<String, Value>,
        /// `apiVersion` of the served version.
        api_version: String,
        /// `kind`.
        kind: &'a str,
    },
    /// A converted view (e.g. `events.k8s.io/v1` Events over stored core Events).
    Owned(Value),
}

/// The view of `stored` served as `version` of `rt`; serialises exactly as
/// `to_view(rt, version, stored)` does (borrowed unless a conversion
/// webhook or a field mapping changes the object).
///
/// Errors: `500` when the conversion webhook fails.
pub fn view_ref<'a>(
    rt: &'a ResourceType,
    version: &str,
    stored: &'a Value,
) -> Result<ViewRef<'a>, crate::api_error::ApiError> {
    match (&rt.view, stored) {
        (View::Plain, Value::Object(map))
            if !super::needs_conversion(rt, crate::json::api_version(stored), version) =>
        {
            Ok(ViewRef::Borrowed {
                stored: map,
                api_version: rt.api_version(version),
                kind: &rt.kind,
            })
        }
        _ => Ok(ViewRef::Owned(super::to_view(rt, version, stored)?)),
    }
}

/// A field value: borrowed from the stored object or one of the two replaced.
enum Field<'a> {
    Stored(&'a Value),
    Text(&'a str),
}

impl Serialize for Field<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Field::Stored(v) => v.serialize(s),
            Field::Text(t) => s.serialize_str(t),
        }
    }
}

impl Serialize for ViewRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ViewRef::Owned(v) => v.serialize(s),
            ViewRef::Borrowed {
                stored,
                api_version,
                kind,
            } => {
                // serde_json's map is sorted by key (no `preserve_order`): keep that order
                // with the two replaced fields in their places.
                let mut fields: Vec<(&str, Field<'_>)> = Vec::with_capacity(stored.len() + 2);
                fields.push(("apiVersion", Field::Text(api_version)));
                fields.push(("kind", Field::Text(kind)));
                for (k, v) in stored.iter() {
                    if k != "apiVersion" && k != "kind" {
                        fields.push((k.as_str(), Field::Stored(v)));
                    }
                }
                fields.sort_by(|a, b| a.0.cmp(b.0));
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in &fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::builtin;
    use serde_json::json;

    fn rt(kind: &str) -> std::sync::Arc<ResourceType> {
        builtin::all()
            .into_iter()
            .find(|r| r.kind == kind)
            .map(std::sync::Arc::new)
            .unwrap()
    }

    #[test]
    fn serialises_as_the_copied_view() {
        let secret = rt("Secret");
        // Keys before and after apiVersion/kind, a stale apiVersion, no kind.
        let stored = json!({
            "apiVersion": "v0", "data": {"a": "Yg=="}, "immutable": true,
            "metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque"
        });
        let borrowed = serde_json::to_string(&view_ref(&secret, "v1", &stored).unwrap()).unwrap();
        assert_eq!(
            borrowed,
            r#"{"apiVersion":"v1","data":{"a":"Yg=="},"immutable":true,"kind":"Secret","metadata":{"name":"s","namespace":"ns"},"type":"Opaque"}"#
        );
        let copied =
            serde_json::to_string(&super::super::to_view(&secret, "v1", &stored).unwrap()).unwrap();
        assert_eq!(borrowed, copied);
    }
}
