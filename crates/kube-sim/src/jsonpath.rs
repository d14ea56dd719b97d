//! The JSONPath subset used by `additionalPrinterColumns`: `.a.b`, `.a[0].b`, `.a[*].b`,
//! `['a.b']`, escaped dots (`.a\.b`), and filters `.a[?(@.type=="Ready")].status`
//! (`==`, `!=` against a string, number or boolean; the filter path may be `@.x.y`).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    Filter {
        path: Vec<String>,
        equal: bool,
        value: Value,
    },
}

/// A parsed path.
#[derive(Clone, Debug, PartialEq)]
pub struct JsonPath {
    steps: Vec<Step>,
}

fn parse_field(chars: &[char], i: &mut usize) -> String {
    let mut out = String::new();
    while *i < chars.len() {
        let c = chars[*i];
        if c == '\\' && *i + 1 < chars.len() {
            out.push(chars[*i + 1]);
            *i += 2;
            continue;
        }
        if c == '.' || c == '[' {
            break;
        }
        out.push(c);
        *i += 1;
    }
    out
}

impl JsonPath {
    /// Parses a path; `{...}` braces around it are accepted. `None` when it is not in the
    /// supported subset.
    pub fn parse(expr: &str) -> Option<JsonPath> {
        let e = expr.trim();
        let e = e
            .strip_prefix('{')
            .and_then(|x| x.strip_suffix('}'))
            .unwrap_or(e);
        let e = e.strip_prefix('$').unwrap_or(e);
        let chars: Vec<char> = e.chars().collect();
        let mut i = 0;
        let mut steps = Vec::new();
        while i < chars.len() {
            match chars[i] {
                '.' => {
                    i += 1;
                    let f = parse_field(&chars, &mut i);
                    if !f.is_empty() {
                        steps.push(Step::Field(f));
                    }
                }
                '[' => {
                    let close = find_close(&chars, i)?;
                    let inner: String = chars[i + 1..close].iter().collect();
                    steps.push(parse_bracket(inner.trim())?);
                    i = close + 1;
                }
                _ => {
                    let f = parse_field(&chars, &mut i);
                    if f.is_empty() {
                        return None;
                    }
                    steps.push(Step::Field(f));
                }
            }
        }
        Some(JsonPath { steps })
    }

    /// All values the path selects.
    pub fn find<'a>(&self, root: &'a Value) -> Vec<&'a Value> {
        let mut cur = vec![root];
        for step in &self.steps {
            let mut next = Vec::new();
            for v in cur {
                match step {
                    Step::Field(f) => next.extend(v.get(f.as_str())),
                    Step::Index(i) => next.extend(v.get(*i)),
                    Step::All => match v {
                        Value::Array(a) => next.extend(a.iter()),
                        Value::Object(m) => next.extend(m.values()),
                        _ => {}
                    },
                    Step::Filter { path, equal, value } => {
                        if let Value::Array(a) = v {
                            for item in a {
                                let mut got = Some(item);
                                for p in path {
                                    got = got.and_then(|g| g.get(p.as_str()));
                                }
                                let hit = got.is_some_and(|g| loose_eq(g, value));
                                if hit == *equal && (got.is_some() || !*equal) {
                                    next.push(item);
                                }
                            }
                        }
                    }
                }
            }
            cur = next;
        }
        cur
    }
}

fn loose_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

fn find_close(chars: &[char], open: usize) -> Option<usize> {
    let mut depth = 0;
    let mut quote: Option<char> = None;
    for (j, c) in chars.iter().enumerate().skip(open) {
        match (quote, c) {
            (Some(q), c) if *c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(*c),
            (None, '[') => depth += 1,
            (None, ']') => {
                depth -= 1;
                if depth == 0 {
                    return Some(j);
                }
            }
            _ => {}
        }
    }
    None
}

fn parse_bracket(inner: &str) -> Option<Step> {
    if inner == "*" {
        return Some(Step::All);
    }
    if let Ok(i) = inner.parse::<usize>() {
        return Some(Step::Index(i));
    }
    if let Some(q) = inner
        .strip_prefix('\'')
        .and_then(|x| x.strip_suffix('\''))
        .or_else(|| inner.strip_prefix('"').and_then(|x| x.strip_suffix('"')))
    {
        // `['cluster\.x-k8s\.io/cluster-name']`, as CAPI's printer columns write label keys
        return Some(Step::Field(q.replace("\\.", ".")));
    }
    let body = inner.strip_prefix("?(")?.strip_suffix(')')?.trim();
    let (lhs, equal, rhs) = if let Some((l, r)) = body.split_once("!=") {
        (l, false, r)
    } else if let Some((l, r)) = body.split_once("==") {
        (l, true, r)
    } else {
        return None;
    };
    let path: Vec<String> = lhs
        .trim()
        .strip_prefix("@.")?
        .split('.')
        .map(str::to_string)
        .collect();
    let rhs = rhs.trim();
    let value = if let Some(s) = rhs
        .strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| rhs.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
    {
        Value::String(s.to_string())
    } else {
        serde_json::from_str(rhs).ok()?
    };
    Some(Step::Filter { path, equal, value })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn printer_column_paths() {
        let obj = json!({
            "metadata": {"annotations": {"a.b/c": "x"}},
            "spec": {"nodes": [{"name": "pve1"}, {"name": "pve2"}], "vmid": 100},
            "status": {"conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Synced", "status": "False"}
            ]}
        });
        let one = |p: &str| {
            JsonPath::parse(p)
                .expect(p)
                .find(&obj)
                .first()
                .map(|v| (*v).clone())
        };
        assert_eq!(one(".spec.vmid"), Some(json!(100)));
        assert_eq!(one(".spec.nodes[1].name"), Some(json!("pve2")));
        assert_eq!(
            one(".status.conditions[?(@.type==\"Ready\")].status"),
            Some(json!("True"))
        );
        assert_eq!(
            one(".status.conditions[?(@.type=='Synced')].status"),
            Some(json!("False"))
        );
        assert_eq!(one(".metadata.annotations.a\\.b/c"), Some(json!("x")));
        assert_eq!(one(".metadata.annotations['a.b/c']"), Some(json!("x")));
        assert_eq!(one(".metadata.annotations['a\\.b/c']"), Some(json!("x")));
        assert_eq!(one(".spec.missing"), None);
        let all = JsonPath::parse(".spec.nodes[*].name").expect("parse");
        assert_eq!(all.find(&obj), vec![&json!("pve1"), &json!("pve2")]);
        assert!(JsonPath::parse(".a[?(@.x<1)]").is_none());
    }
}
