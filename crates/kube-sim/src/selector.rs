//! Label selectors (`a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`) and
//! field selectors (`metadata.name=x`, `==`, `!=`, comma-separated) as in
//! `k8s.io/apimachinery/pkg/labels` and `.../fields`.

use crate::api_error::ApiError;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    NotEq,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

/// A parsed label selector (all requirements must hold).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<Requirement>,
}

fn parse_error(msg: String) -> ApiError {
    ApiError::bad_request(format!("unable to parse requirement: {msg}"))
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn valid_key(k: &str) -> bool {
    !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    /// Parses a selector string; an empty string selects everything. Errors are `400`.
    pub fn parse(s: &str) -> Result<LabelSelector, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            reqs.push(parse_requirement(&part)?);
        }
        Ok(LabelSelector { reqs })
    }

    /// Whether an object's `metadata.labels` satisfy the selector.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj
            .get("metadata")
            .and_then(|m| m.get("labels"))
            .and_then(Value::as_object);
        self.reqs.iter().all(|r| {
            let v = labels.and_then(|l| l.get(&r.key)).and_then(Value::as_str);
            match r.op {
                Op::Eq => v == Some(r.values[0].as_str()),
                Op::NotEq => v != Some(r.values[0].as_str()),
                Op::In => v.is_some_and(|v| r.values.iter().any(|x| x == v)),
                Op::NotIn => v.is_none_or(|v| !r.values.iter().any(|x| x == v)),
                Op::Exists => v.is_some(),
                Op::DoesNotExist => v.is_none(),
            }
        })
    }
}

fn parse_set(rest: &str) -> Result<Vec<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| parse_error(format!("found '{rest}', expected: '('")))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

fn parse_requirement(part: &str) -> Result<Requirement, ApiError> {
    if let Some(k) = part.strip_prefix('!') {
        let k = k.trim();
        if !valid_key(k) {
            return Err(parse_error(format!("invalid label key {k:?}")));
        }
        return Ok(Requirement {
            key: k.to_string(),
            op: Op::DoesNotExist,
            values: vec![],
        });
    }
    for (token, op) in [("!=", Op::NotEq), ("==", Op::Eq), ("=", Op::Eq)] {
        if let Some((k, v)) = part.split_once(token) {
            let k = k.trim();
            if !valid_key(k) {
                return Err(parse_error(format!("invalid label key {k:?}")));
            }
            return Ok(Requirement {
                key: k.to_string(),
                op,
                values: vec![v.trim().to_string()],
            });
        }
    }
    let words: Vec<&str> = part.splitn(2, char::is_whitespace).collect();
    if words.len() == 2 {
        let rest = words[1].trim_start();
        let k = words[0];
        if let Some(r) = rest.strip_prefix("notin") {
            return Ok(Requirement {
                key: k.to_string(),
                op: Op::NotIn,
                values: parse_set(r)?,
            });
        }
        if let Some(r) = rest.strip_prefix("in") {
            return Ok(Requirement {
                key: k.to_string(),
                op: Op::In,
                values: parse_set(r)?,
            });
        }
        return Err(parse_error(format!(
            "found '{rest}', expected: in, notin, =, ==, !=, gt, lt"
        )));
    }
    if !valid_key(part) {
        return Err(parse_error(format!("invalid label key {part:?}")));
    }
    Ok(Requirement {
        key: part.to_string(),
        op: Op::Exists,
        values: vec![],
    })
}

/// A parsed field selector.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses `a=b,c!=d`; every field must be in `allowed` (else `400 field label not
    /// supported`).
    pub fn parse(s: &str, allowed: &[String]) -> Result<FieldSelector, ApiError> {
        let mut terms = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (field, eq, value) = if let Some((f, v)) = part.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                )));
            };
            let field = field.trim();
            if !allowed.iter().any(|a| a == field) {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {field}"
                )));
            }
            terms.push((field.to_string(), eq, value.trim().to_string()));
        }
        Ok(FieldSelector { terms })
    }

    /// Whether the selector has no terms.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// The value of `metadata.name=<v>` when the selector pins one name.
    #[cfg(test)]
    pub fn pinned_name(&self) -> Option<&str> {
        self.terms
            .iter()
            .find(|(f, eq, _)| f == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether an object satisfies every term (missing fields read as "").
    pub fn matches(&self, obj: &Value) -> bool {
        self.terms.iter().all(|(field, eq, want)| {
            let mut cur = Some(obj);
            for p in field.split('.') {
                cur = cur.and_then(|c| c.get(p));
            }
            let got = match cur {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (got == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(labels: Value) -> Value {
        json!({"metadata": {"name": "n1", "namespace": "ns", "labels": labels}, "type": "Opaque"})
    }

    #[test]
    fn label_selector_operators() {
        let o = obj(json!({"app": "web", "tier": "front"}));
        for (sel, want) in [
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing", true),
            ("app=web,tier=back", false),
            ("missing notin (x)", true),
            ("", true),
        ] {
            assert_eq!(
                LabelSelector::parse(sel).expect(sel).matches(&o),
                want,
                "{sel}"
            );
        }
        let err = LabelSelector::parse("app in web").expect_err("bad set");
        assert_eq!(err.code, 400);
    }

    #[test]
    fn field_selector_checks_allowed_fields() {
        let allowed = vec![
            "metadata.name".to_string(),
            "metadata.namespace".to_string(),
            "type".to_string(),
        ];
        let o = obj(json!({}));
        let s = FieldSelector::parse("metadata.name=n1,type!=tls", &allowed).expect("parse");
        assert!(s.matches(&o));
        assert_eq!(s.pinned_name(), Some("n1"));
        let s = FieldSelector::parse("metadata.namespace==other", &allowed).expect("parse");
        assert!(!s.matches(&o));
        let e = FieldSelector::parse("spec.x=1", &allowed).expect_err("unsupported");
        assert_eq!(e.message, "field label not supported: spec.x");
    }
}
