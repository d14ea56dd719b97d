//! clusterctl's template variable rules (`clusterctl generate cluster`), as
//! its `SimpleProcessor` applies them through drone/envsubst:
//!
//! - `${VAR}` (spaces inside the braces allowed: `${ VAR }`) and bare `$VAR`;
//! - `${VAR:=default}` / `${VAR:-default}`: the default when VAR is unset or empty;
//! - `${VAR=default}` / `${VAR-default}`: the default when VAR is unset;
//! - defaults may contain variables (`${A:=${B}}`);
//! - `$$` is a literal `$` (`$${COREOS_CUSTOM_HOSTNAME}` renders as
//!   `${COREOS_CUSTOM_HOSTNAME}`, left for the guest's shell or systemd);
//! - a variable without a default and without a value is an error, and all of
//!   them are listed at once, sorted, as clusterctl does.

use std::collections::{BTreeMap, BTreeSet};

/// A variable found in a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variable {
    /// Its name.
    pub name: String,
    /// Its default text, when it has one (first occurrence wins, as in clusterctl).
    pub default: Option<String>,
}

/// Rendering errors.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RenderError {
    /// Variables without a value and without a default (sorted).
    #[error(
        "value for variables [{}] is not set. Please set the value using os environment variables or the clusterctl config file",
        .0.join(", ")
    )]
    Missing(Vec<String>),
    /// `${` without its closing `}`.
    #[error("unterminated variable reference at byte {0}")]
    Unterminated(usize),
    /// `${}` or a name with characters outside `[A-Za-z0-9_]`.
    #[error("bad variable reference {0:?}")]
    BadReference(String),
    /// A Cluster uses a ClusterClass that neither the flavor nor the
    /// repository (`clusterclass-<name>.yaml`) has.
    #[error(
        "ClusterClass {0:?} is not in the template and the repository has no clusterclass-{0}.yaml"
    )]
    MissingClusterClass(String),
    /// The rendered text is not a YAML document stream.
    #[error("the rendered template is not YAML: {0}")]
    Yaml(String),
}

#[derive(Debug)]
enum Node {
    Text(String),
    Var {
        name: String,
        op: Option<Op>,
        default: Vec<Node>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Op {
    /// `:=` or `:-`: default when unset or empty.
    UnsetOrEmpty,
    /// `=` or `-`: default when unset.
    Unset,
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Parses `text[pos..]` until `stop` (a `}` closing a default) or the end.
fn parse(text: &str, mut pos: usize, nested: bool) -> Result<(Vec<Node>, usize), RenderError> {
    let bytes = text.as_bytes();
    let mut nodes = Vec::new();
    let mut buf = String::new();
    while pos < bytes.len() {
        let c = bytes[pos];
        if nested && c == b'}' {
            break;
        }
        if c == b'$' && pos + 1 < bytes.len() {
            let next = bytes[pos + 1];
            if next == b'$' {
                buf.push('$');
                pos += 2;
                continue;
            }
            if next == b'{' {
                if !buf.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut buf)));
                }
                let (node, end) = parse_braced(text, pos)?;
                nodes.push(node);
                pos = end;
                continue;
            }
            if (next as char).is_ascii_alphabetic() || next == b'_' {
                if !buf.is_empty() {
                    nodes.push(Node::Text(std::mem::take(&mut buf)));
                }
                let start = pos + 1;
                let mut end = start;
                while end < bytes.len() && is_name_char(bytes[end] as char) {
                    end += 1;
                }
                nodes.push(Node::Var {
                    name: text[start..end].to_string(),
                    op: None,
                    default: Vec::new(),
                });
                pos = end;
                continue;
            }
        }
        let ch = text[pos..].chars().next().unwrap_or('\u{fffd}');
        buf.push(ch);
        pos += ch.len_utf8();
    }
    if !buf.is_empty() {
        nodes.push(Node::Text(buf));
    }
    Ok((nodes, pos))
}

/// Parses `${...}` starting at `start` (the `$`); returns the node and the
/// position after the closing brace.
fn parse_braced(text: &str, start: usize) -> Result<(Node, usize), RenderError> {
    let bytes = text.as_bytes();
    let mut pos = start + 2;
    while pos < bytes.len() && bytes[pos] == b' ' {
        pos += 1;
    }
    let name_start = pos;
    while pos < bytes.len() && is_name_char(bytes[pos] as char) {
        pos += 1;
    }
    let name = text[name_start..pos].to_string();
    while pos < bytes.len() && bytes[pos] == b' ' {
        pos += 1;
    }
    if name.is_empty() {
        let end = text[start..]
            .find('}')
            .map_or(text.len(), |i| start + i + 1);
        return Err(RenderError::BadReference(text[start..end].to_string()));
    }
    let rest = &text[pos..];
    let (op, skip) = if rest.starts_with(":=") || rest.starts_with(":-") {
        (Some(Op::UnsetOrEmpty), 2)
    } else if rest.starts_with('=') || rest.starts_with('-') {
        (Some(Op::Unset), 1)
    } else if rest.starts_with('}') {
        (None, 0)
    } else if rest.is_empty() {
        return Err(RenderError::Unterminated(start));
    } else {
        let end = text[start..]
            .find('}')
            .map_or(text.len(), |i| start + i + 1);
        return Err(RenderError::BadReference(text[start..end].to_string()));
    };
    pos += skip;
    let mut default = Vec::new();
    if op.is_some() {
        let (nodes, end) = parse(text, pos, true)?;
        default = nodes;
        pos = end;
    }
    if pos >= bytes.len() || bytes[pos] != b'}' {
        return Err(RenderError::Unterminated(start));
    }
    Ok((Node::Var { name, op, default }, pos + 1))
}

fn default_text(nodes: &[Node]) -> String {
    nodes
        .iter()
        .map(|n| match n {
            Node::Text(t) => t.clone(),
            Node::Var { name, .. } => format!("${{{name}}}"),
        })
        .collect()
}

fn collect(nodes: &[Node], out: &mut BTreeMap<String, Option<String>>) {
    for n in nodes {
        if let Node::Var { name, op, default } = n {
            out.entry(name.clone())
                .or_insert_with(|| op.map(|_| default_text(default)));
        }
    }
}

/// Every variable of `template` (top-level references, as clusterctl's
/// `--list-variables` shows them), sorted by name.
///
/// # Errors
/// [`RenderError`] when the template has a malformed reference.
pub fn variables(template: &str) -> Result<Vec<Variable>, RenderError> {
    let (nodes, _) = parse(template, 0, false)?;
    let mut found = BTreeMap::new();
    collect(&nodes, &mut found);
    Ok(found
        .into_iter()
        .map(|(name, default)| Variable { name, default })
        .collect())
}

fn eval(nodes: &[Node], vars: &BTreeMap<String, String>, out: &mut String) {
    for n in nodes {
        match n {
            Node::Text(t) => out.push_str(t),
            Node::Var { name, op, default } => {
                let value = vars.get(name);
                let use_default = match op {
                    None => false,
                    Some(Op::Unset) => value.is_none(),
                    Some(Op::UnsetOrEmpty) => value.is_none_or(String::is_empty),
                };
                if use_default {
                    eval(default, vars, out);
                } else if let Some(v) = value {
                    out.push_str(v);
                }
            }
        }
    }
}

/// Renders `template` with `vars`.
///
/// # Errors
/// [`RenderError::Missing`] listing every variable that has neither a value
/// nor a default; [`RenderError::Unterminated`] / [`RenderError::BadReference`]
/// for malformed references.
pub fn render(template: &str, vars: &BTreeMap<String, String>) -> Result<String, RenderError> {
    let (nodes, _) = parse(template, 0, false)?;
    let mut found = BTreeMap::new();
    collect(&nodes, &mut found);
    let missing: BTreeSet<String> = found
        .into_iter()
        .filter(|(name, default)| default.is_none() && !vars.contains_key(name))
        .map(|(name, _)| name)
        .collect();
    if !missing.is_empty() {
        return Err(RenderError::Missing(missing.into_iter().collect()));
    }
    let mut out = String::with_capacity(template.len());
    eval(&nodes, vars, &mut out);
    Ok(out)
}

/// `clusterctl generate cluster` for a flavor: renders `flavor` and, for
/// every ClusterClass its Clusters name (`spec.topology.classRef.name`) that
/// it does not define, the repository's `clusterclass-<name>.yaml` (read
/// through `class_file`) rendered with the same variables, put before the
/// flavor's objects (clusterctl provider contract, "ClusterClass
/// definitions"). Missing variables of all files are listed together.
///
/// # Errors
/// [`RenderError::Missing`] (the union, sorted), [`RenderError::MissingClusterClass`],
/// [`RenderError::Yaml`], and the reference errors of [`render`].
pub fn generate_cluster(
    flavor: &str,
    class_file: impl Fn(&str) -> Option<String>,
    vars: &BTreeMap<String, String>,
) -> Result<String, RenderError> {
    // The class names before rendering: classRef names are literals here.
    let mut classes = BTreeSet::new();
    let mut defined = BTreeSet::new();
    let defaults_only: BTreeMap<String, String> = variables(flavor)?
        .into_iter()
        .map(|v| (v.name, "x".to_string()))
        .collect();
    let probe = render(flavor, &defaults_only)?;
    let docs: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&probe).map_err(|e| RenderError::Yaml(e.to_string()))?;
    for d in &docs {
        if d["kind"] == "ClusterClass"
            && let Some(n) = d["metadata"]["name"].as_str()
        {
            defined.insert(n.to_string());
        }
        if d["kind"] == "Cluster"
            && let Some(n) = d
                .pointer("/spec/topology/classRef/name")
                .and_then(|v| v.as_str())
        {
            classes.insert(n.to_string());
        }
    }
    let mut texts = Vec::new();
    for name in classes.difference(&defined) {
        texts.push(class_file(name).ok_or_else(|| RenderError::MissingClusterClass(name.clone()))?);
    }
    texts.push(flavor.to_string());
    let mut missing = BTreeSet::new();
    let mut out = Vec::new();
    for t in &texts {
        match render(t, vars) {
            Ok(r) => out.push(r),
            Err(RenderError::Missing(m)) => missing.extend(m),
            Err(e) => return Err(e),
        }
    }
    if !missing.is_empty() {
        return Err(RenderError::Missing(missing.into_iter().collect()));
    }
    Ok(out
        .iter()
        .map(|r| r.trim_end().to_string())
        .collect::<Vec<_>>()
        .join("\n---\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn substitutes_and_defaults() {
        let t = "a: ${A}\nb: ${B:=two}\nc: ${ C }\nd: ${D=four}\ne: $E!";
        let out = render(t, &vars(&[("A", "1"), ("C", "3"), ("E", "5")])).unwrap();
        assert_eq!(out, "a: 1\nb: two\nc: 3\nd: four\ne: 5!");
    }

    #[test]
    fn colon_forms_replace_empty_values_plain_forms_do_not() {
        let t = "${A:=x} ${B=y} ${C:-z} ${D-w}";
        let out = render(t, &vars(&[("A", ""), ("B", ""), ("C", ""), ("D", "")])).unwrap();
        assert_eq!(out, "x  z ");
    }

    #[test]
    fn double_dollar_is_a_literal_dollar() {
        let t = "echo \"$${COREOS_CUSTOM_HOSTNAME}\" ${A} $$HOME";
        assert_eq!(
            render(t, &vars(&[("A", "1")])).unwrap(),
            "echo \"${COREOS_CUSTOM_HOSTNAME}\" 1 $HOME"
        );
        let names: Vec<String> = variables(t).unwrap().into_iter().map(|v| v.name).collect();
        assert_eq!(names, ["A"]);
    }

    /// A default ends at the first `}` (drone/envsubst's `acceptNotClosing`),
    /// so `${A:={}}` looks right unset and breaks when set: the templates
    /// write `cpu: {${WORKER_CPU:=}}` instead (docs/templates.md).
    #[test]
    fn a_default_ends_at_the_first_closing_brace() {
        let t = "cpu: ${A:={}}";
        assert_eq!(render(t, &vars(&[])).unwrap(), "cpu: {}");
        assert_eq!(
            render(t, &vars(&[("A", "{type: host}")])).unwrap(),
            "cpu: {type: host}}"
        );
        let t = "cpu: {${A:=}}";
        assert_eq!(render(t, &vars(&[])).unwrap(), "cpu: {}");
        assert_eq!(
            render(t, &vars(&[("A", "type: host")])).unwrap(),
            "cpu: {type: host}"
        );
    }

    #[test]
    fn nested_defaults() {
        let t = "${A:=${B:=inner}-x}";
        assert_eq!(render(t, &vars(&[])).unwrap(), "inner-x");
        assert_eq!(render(t, &vars(&[("B", "b")])).unwrap(), "b-x");
        assert_eq!(render(t, &vars(&[("A", "a")])).unwrap(), "a");
    }

    #[test]
    fn missing_variables_are_listed_sorted() {
        let err = render("${ZED} ${ALPHA} ${ZED} ${OK:=1}", &vars(&[])).unwrap_err();
        assert_eq!(
            err,
            RenderError::Missing(vec!["ALPHA".into(), "ZED".into()])
        );
        assert_eq!(
            err.to_string(),
            "value for variables [ALPHA, ZED] is not set. Please set the value using os environment variables or the clusterctl config file"
        );
    }

    #[test]
    fn variables_lists_defaults() {
        let v = variables("${A} ${B:=[x, y]} ${A:=late}").unwrap();
        assert_eq!(
            v,
            vec![
                Variable {
                    name: "A".into(),
                    default: None
                },
                Variable {
                    name: "B".into(),
                    default: Some("[x, y]".into())
                },
            ]
        );
    }

    #[test]
    fn malformed_references() {
        assert_eq!(
            render("${A", &vars(&[])).unwrap_err(),
            RenderError::Unterminated(0)
        );
        assert!(matches!(
            render("${}", &vars(&[])),
            Err(RenderError::BadReference(_))
        ));
        assert!(matches!(
            render("${A B}", &vars(&[])),
            Err(RenderError::BadReference(_))
        ));
    }

    #[test]
    fn generate_cluster_adds_the_referenced_class_first() {
        let flavor =
            "kind: Cluster\nmetadata: {name: ${N}}\nspec: {topology: {classRef: {name: c1}}}\n";
        let class = "kind: ClusterClass\nmetadata: {name: c1, namespace: ${NS}}\n";
        let files = |n: &str| (n == "c1").then(|| class.to_string());
        let out = generate_cluster(flavor, files, &vars(&[("N", "a"), ("NS", "b")])).unwrap();
        let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&out).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0]["kind"], "ClusterClass");
        assert_eq!(docs[0]["metadata"]["namespace"], "b");
        assert_eq!(docs[1]["metadata"]["name"], "a");
        assert_eq!(
            generate_cluster(flavor, files, &vars(&[])).unwrap_err(),
            RenderError::Missing(vec!["N".into(), "NS".into()])
        );
        assert_eq!(
            generate_cluster(flavor, |_| None, &vars(&[("N", "a")])).unwrap_err(),
            RenderError::MissingClusterClass("c1".into())
        );
    }

    #[test]
    fn a_lone_dollar_is_text() {
        assert_eq!(
            render("cost: 5$ and $1", &vars(&[])).unwrap(),
            "cost: 5$ and $1"
        );
    }
}
