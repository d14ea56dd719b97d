//! Request paths to routes: discovery, OpenAPI, health and resource paths
//! (`/api/v1/...`, `/apis/<group>/<version>/...`, namespaced or not, with subresources).

/// What a path addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// `/version`.
    Version,
    /// `/healthz`, `/livez`, `/readyz`.
    Health,
    /// `/api`.
    CoreVersions,
    /// `/apis`.
    Groups,
    /// `/apis/<group>`.
    Group(String),
    /// `/api/v1` or `/apis/<group>/<version>`.
    Resources {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// `/openapi/v2`.
    OpenApiV2,
    /// `/openapi/v3`.
    OpenApiV3,
    /// `/openapi/v3/api/v1` or `/openapi/v3/apis/<group>/<version>`.
    OpenApiV3Doc {
        /// Group ("" for core).
        group: String,
        /// Version.
        version: String,
    },
    /// A resource collection, object or subresource.
    Resource(ResourcePath),
    /// Anything else.
    Unknown,
}

/// The parts of a resource path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourcePath {
    /// Group ("" for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace from `/namespaces/<ns>/...`.
    pub namespace: Option<String>,
    /// Plural resource name.
    pub plural: String,
    /// Object name.
    pub name: Option<String>,
    /// Subresource (`status`).
    pub sub: Option<String>,
}

fn decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

fn resource(group: &str, version: &str, rest: &[String]) -> Route {
    let mk = |namespace: Option<&String>,
              plural: &String,
              name: Option<&String>,
              sub: Option<&String>| {
        Route::Resource(ResourcePath {
            group: group.to_string(),
            version: version.to_string(),
            namespace: namespace.cloned(),
            plural: plural.clone(),
            name: name.cloned(),
            sub: sub.cloned(),
        })
    };
    match rest {
        [plural] => mk(None, plural, None, None),
        [ns_word, ns, plural, tail @ ..]
            if ns_word == "namespaces"
                && !(group.is_empty()
                    && tail.is_empty()
                    && (plural == "status" || plural == "finalize")) =>
        {
            match tail {
                [] => mk(Some(ns), plural, None, None),
                [name] => mk(Some(ns), plural, Some(name), None),
                [name, sub] => mk(Some(ns), plural, Some(name), Some(sub)),
                _ => Route::Unknown,
            }
        }
        [plural, name] => mk(None, plural, Some(name), None),
        [plural, name, sub] => mk(None, plural, Some(name), Some(sub)),
        _ => Route::Unknown,
    }
}

/// Parses a request path.
pub fn parse(path: &str) -> Route {
    let parts: Vec<String> = path
        .split('/')
        .filter(|p| !p.is_empty())
        .map(decode)
        .collect();
    let p: Vec<&str> = parts.iter().map(String::as_str).collect();
    match p.as_slice() {
        ["version"] => Route::Version,
        ["healthz" | "livez" | "readyz", ..] => Route::Health,
        ["api"] => Route::CoreVersions,
        ["api", v] => Route::Resources {
            group: String::new(),
            version: v.to_string(),
        },
        ["api", v, ..] => resource("", v, &parts[2..]),
        ["apis"] => Route::Groups,
        ["apis", g] => Route::Group(g.to_string()),
        ["apis", g, v] => Route::Resources {
            group: g.to_string(),
            version: v.to_string(),
        },
        ["apis", g, v, ..] => resource(g, v, &parts[3..]),
        ["openapi", "v2"] => Route::OpenApiV2,
        ["openapi", "v3"] => Route::OpenApiV3,
        ["openapi", "v3", "api", v] => Route::OpenApiV3Doc {
            group: String::new(),
            version: v.to_string(),
        },
        ["openapi", "v3", "apis", g, v] => Route::OpenApiV3Doc {
            group: g.to_string(),
            version: v.to_string(),
        },
        _ => Route::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        group: &str,
        ns: Option<&str>,
        plural: &str,
        name: Option<&str>,
        sub: Option<&str>,
    ) -> Route {
        Route::Resource(ResourcePath {
            group: group.into(),
            version: "v1".into(),
            namespace: ns.map(Into::into),
            plural: plural.into(),
            name: name.map(Into::into),
            sub: sub.map(Into::into),
        })
    }

    #[test]
    fn resource_paths() {
        assert_eq!(
            parse("/api/v1/namespaces"),
            res("", None, "namespaces", None, None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/default"),
            res("", None, "namespaces", Some("default"), None)
        );
        assert_eq!(
            parse("/api/v1/namespaces/default/status"),
            res("", None, "namespaces", Some("default"), Some("status"))
        );
        assert_eq!(
            parse("/api/v1/namespaces/default/configmaps"),
            res("", Some("default"), "configmaps", None, None)
        );
        assert_eq!(
            parse("/apis/example.com/v1/namespaces/ns/widgets/w1/status"),
            res(
                "example.com",
                Some("ns"),
                "widgets",
                Some("w1"),
                Some("status")
            )
        );
        assert_eq!(
            parse("/apis/example.com/v1/widgets"),
            res("example.com", None, "widgets", None, None)
        );
        assert_eq!(
            parse("/apis/example.com/v1/clusterthings/c1"),
            res("example.com", None, "clusterthings", Some("c1"), None)
        );
        assert_eq!(
            parse("/apis/example.com/v1"),
            Route::Resources {
                group: "example.com".into(),
                version: "v1".into()
            }
        );
        assert_eq!(
            parse("/openapi/v3/apis/example.com/v1"),
            Route::OpenApiV3Doc {
                group: "example.com".into(),
                version: "v1".into()
            }
        );
        assert_eq!(parse("/nope"), Route::Unknown);
    }
}
