//! Request parameters as pve-http-server decodes them (docs/proxmox-semantics.md §1):
//! query string and `application/x-www-form-urlencoded` bodies are split on
//! **both** `&` and `;`, the value is what lies between the first and the
//! second raw `=`, `+` is a space, repeated keys become arrays; JSON bodies
//! keep their JSON types; query parameters override body parameters.

use std::collections::BTreeMap;

use percent_encoding::percent_decode_str;
use serde_json::Value;

use super::envelope::ApiError;

/// Decoded request parameters (path parameters included).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Params {
    pub map: BTreeMap<String, Value>,
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_decode_str(&plus).decode_utf8_lossy().into_owned()
}

/// Decodes a urlencoded string into `into` (repeated keys → arrays).
pub(crate) fn parse_urlencoded(s: &str, into: &mut BTreeMap<String, Value>) {
    for pair in s.split(['&', ';']) {
        if pair.is_empty() {
            continue;
        }
        let mut it = pair.split('=');
        let key = decode(it.next().unwrap_or(""));
        let value = decode(it.next().unwrap_or(""));
        if key.is_empty() {
            continue;
        }
        match into.get_mut(&key) {
            Some(Value::Array(a)) => a.push(Value::String(value)),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, Value::String(value)]);
            }
            None => {
                into.insert(key, Value::String(value));
            }
        }
    }
}

impl Params {
    /// Whether the parameter is present.
    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// The value as a string (numbers printed, booleans 1/0); `None` if absent
    /// or an array/object.
    pub fn str(&self, key: &str) -> Option<String> {
        value_as_string(self.map.get(key)?)
    }

    /// A boolean: `1`/`0`, JSON booleans, JSON 1/0.
    pub fn bool(&self, key: &str) -> Result<Option<bool>, ApiError> {
        let Some(v) = self.map.get(key) else {
            return Ok(None);
        };
        match v {
            Value::Bool(b) => Ok(Some(*b)),
            Value::Number(n) if n.as_u64() == Some(1) => Ok(Some(true)),
            Value::Number(n) if n.as_u64() == Some(0) => Ok(Some(false)),
            Value::String(s) if s == "1" => Ok(Some(true)),
            Value::String(s) if s == "0" => Ok(Some(false)),
            other => Err(ApiError::param(
                key,
                format!("type check ('boolean') failed - got '{}'", display(other)),
            )),
        }
    }

    /// An integer.
    pub fn int(&self, key: &str) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.map.get(key) else {
            return Ok(None);
        };
        let parsed = match v {
            Value::Number(n) => n.as_i64(),
            Value::String(s) => s.trim_start_matches('+').parse::<i64>().ok().filter(|_| {
                let t = s.strip_prefix(['+', '-']).unwrap_or(s);
                !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit())
            }),
            _ => None,
        };
        parsed.map(Some).ok_or_else(|| {
            ApiError::param(
                key,
                format!("type check ('integer') failed - got '{}'", display(v)),
            )
        })
    }

    /// A VMID-like unsigned integer.
    pub fn u32(&self, key: &str) -> Result<Option<u32>, ApiError> {
        match self.int(key)? {
            None => Ok(None),
            Some(i) => u32::try_from(i).map(Some).map_err(|_| {
                ApiError::param(
                    key,
                    format!("value must have a minimum value of 0 - got '{i}'"),
                )
            }),
        }
    }

    /// Required string (400 "property is missing and it is not optional").
    pub fn req_str(&self, key: &str) -> Result<String, ApiError> {
        self.str(key)
            .ok_or_else(|| ApiError::param(key, "property is missing and it is not optional"))
    }

    /// All values of a key (array or single).
    pub fn list(&self, key: &str) -> Vec<String> {
        match self.map.get(key) {
            Some(Value::Array(a)) => a.iter().filter_map(value_as_string).collect(),
            Some(v) => value_as_string(v).into_iter().collect(),
            None => vec![],
        }
    }
}

/// A scalar JSON value as Proxmox sees it in Perl (a string).
pub(crate) fn value_as_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
        _ => None,
    }
}

/// How a value is shown inside an error text.
pub(crate) fn display(v: &Value) -> String {
    value_as_string(v).unwrap_or_else(|| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn splits_on_ampersand_and_semicolon_and_second_equals() {
        let mut m = BTreeMap::new();
        parse_urlencoded(
            "tags=a;b&net0=virtio=BC:24:11:00:00:01,bridge=vmbr0&x=1%3B2&sp=a+b",
            &mut m,
        );
        // ';' inside the raw value splits: "a" then a key "b" with empty value
        assert_eq!(m["tags"], json!("a"));
        assert_eq!(m["b"], json!(""));
        // anything after a second raw '=' is dropped
        assert_eq!(m["net0"], json!("virtio"));
        assert_eq!(m["x"], json!("1;2"));
        assert_eq!(m["sp"], json!("a b"));
    }

    #[test]
    fn repeated_keys_become_arrays() {
        let mut m = BTreeMap::new();
        parse_urlencoded("command=ls&command=-l&command=%2Ftmp", &mut m);
        let p = Params { map: m };
        assert_eq!(p.list("command"), vec!["ls", "-l", "/tmp"]);
    }

    #[test]
    fn typed_getters() {
        let p = Params {
            map: BTreeMap::from([
                ("a".into(), json!("1")),
                ("b".into(), json!(false)),
                ("c".into(), json!("true")),
                ("n".into(), json!("104")),
                ("m".into(), json!(7)),
                ("bad".into(), json!("abc")),
            ]),
        };
        assert_eq!(p.bool("a").unwrap(), Some(true));
        assert_eq!(p.bool("b").unwrap(), Some(false));
        assert_eq!(
            p.bool("c").unwrap_err(),
            ApiError::param("c", "type check ('boolean') failed - got 'true'")
        );
        assert_eq!(p.int("n").unwrap(), Some(104));
        assert_eq!(p.u32("m").unwrap(), Some(7));
        assert_eq!(p.str("m").as_deref(), Some("7"));
        assert_eq!(
            p.int("bad").unwrap_err(),
            ApiError::param("bad", "type check ('integer') failed - got 'abc'")
        );
        assert_eq!(p.bool("zz").unwrap(), None);
    }
}
