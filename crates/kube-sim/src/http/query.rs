//! Query-string parsing (`a=b&c=d`, percent-decoding, `+` as space; a leading `&` as
//! kube-rs sends it is fine; the last value of a repeated key wins).

use std::collections::HashMap;

/// Parsed query parameters.
#[derive(Clone, Debug, Default)]
pub struct Query {
    params: HashMap<String, String>,
}

fn decode(s: &str) -> String {
    let plus = s.replace('+', " ");
    percent_encoding::percent_decode_str(&plus)
        .decode_utf8_lossy()
        .into_owned()
}

impl Query {
    /// Parses a raw query string.
    pub fn parse(raw: Option<&str>) -> Query {
        let mut params = HashMap::new();
        for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.insert(decode(k), decode(v));
        }
        Query { params }
    }

    /// A parameter's value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// A parameter's value, `None` when empty.
    pub fn non_empty(&self, key: &str) -> Option<String> {
        self.get(key).filter(|v| !v.is_empty()).map(str::to_string)
    }

    /// A boolean parameter (`true`/`1`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some("true" | "1" | "True"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_rs_style_queries() {
        let q = Query::parse(Some(
            "&watch=true&timeoutSeconds=290&labelSelector=app%3Dweb%2Ctier+in+%28a%29&fieldSelector=metadata.name%3Dx",
        ));
        assert!(q.flag("watch"));
        assert_eq!(q.get("timeoutSeconds"), Some("290"));
        assert_eq!(q.get("labelSelector"), Some("app=web,tier in (a)"));
        assert_eq!(q.get("fieldSelector"), Some("metadata.name=x"));
        assert_eq!(q.get("missing"), None);
    }
}
