//! Field mapping between `events.k8s.io/v1` Events and the core `v1` Events they are
//! stored as (the mapping kube-apiserver applies, `pkg/apis/events/v1/conversion.go`).

use serde_json::{Map, Value};

/// `(events.k8s.io/v1 field, core v1 field)` pairs that differ in name.
const RENAMES: [(&str, &str); 7] = [
    ("note", "message"),
    ("regarding", "involvedObject"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &Value, to_core: bool, api_version: &str) -> Value {
    let Some(map) = obj.as_object() else {
        return obj.clone();
    };
    let mut out = Map::new();
    for (k, v) in map {
        let mapped = RENAMES.iter().find_map(|(ev1, core)| {
            if to_core && k == ev1 {
                Some(*core)
            } else if !to_core && k == core {
                Some(*ev1)
            } else {
                None
            }
        });
        out.insert(mapped.unwrap_or(k).to_string(), v.clone());
    }
    out.insert("apiVersion".into(), Value::String(api_version.to_string()));
    Value::Object(out)
}

/// An `events.k8s.io/v1` Event in its stored core `v1` form.
pub fn to_core(event: &Value) -> Value {
    rename(event, true, "v1")
}

/// A stored core `v1` Event as `events.k8s.io/v1`.
pub fn from_core(event: &Value) -> Value {
    rename(event, false, "events.k8s.io/v1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn maps_both_ways() {
        let ev1 = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e"}, "note": "hello", "regarding": {"kind": "Widget"},
            "reportingController": "c", "reason": "Made", "deprecatedCount": 2
        });
        let core = to_core(&ev1);
        assert_eq!(
            core,
            json!({
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"},
                "message": "hello", "involvedObject": {"kind": "Widget"},
                "reportingComponent": "c", "reason": "Made", "count": 2
            })
        );
        assert_eq!(from_core(&core), ev1);
    }
}
