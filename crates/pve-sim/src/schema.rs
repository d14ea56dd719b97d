//! The official API schema (`apidoc.json`, the API viewer's data) loaded once
//! and used to validate every request the way pve-common's
//! `PVE::JSONSchema::validate` does: unknown parameters, missing required
//! ones, types (`1`/`0` booleans), enums, ranges, lengths, patterns, named
//! formats and inline property-string formats, `requires`. Error texts follow
//! pve-common; the 400 shape is built by the internal `http::envelope` module.
//!
//! Simplifications: named formats the simulator does not know (firewall
//! specs, PCI mappings, …) are accepted unchecked.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use regex::Regex;
use serde_json::Value;

use crate::error::SimError;
use crate::http::params::{display, value_as_string};
use crate::props;

/// The parsed schema: every method of every path.
#[derive(Debug)]
pub struct Schema {
    methods: HashMap<(String, String), MethodSchema>,
}

/// One method of one path.
#[derive(Debug)]
pub(crate) struct MethodSchema {
    props: BTreeMap<String, PropSchema>,
    indexed: Vec<(String, u32, PropSchema)>,
    additional: bool,
    permissions: Value,
    allowtoken: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ty {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
    Null,
    Any,
}

#[derive(Debug)]
struct PropSchema {
    ty: Ty,
    optional: bool,
    format: Fmt,
    enum_values: Option<Vec<String>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    min_len: Option<usize>,
    max_len: Option<usize>,
    /// Perl pattern, compiled on first use (regex compilation is the slow part of loading).
    pattern: Option<LazyRegex>,
    requires: Option<String>,
    items: Option<Box<PropSchema>>,
}

#[derive(Debug)]
enum Fmt {
    None,
    Named(String),
    Inline(InlineFormat),
}

#[derive(Debug)]
struct InlineFormat {
    keys: BTreeMap<String, InlineKey>,
    default_key: Option<String>,
}

#[derive(Debug)]
enum InlineKey {
    Prop(PropSchema),
    /// `alias` (and, for `virtio=MAC`, the `keyAlias` that receives the key name).
    Alias {
        target: String,
        key_alias: Option<String>,
    },
}

/// Highest index of indexed config keys (`net[n]` → `net0`…`net31`).
fn index_max(prefix: &str) -> u32 {
    match prefix {
        "net" | "ipconfig" => 31,
        "scsi" => 30,
        "virtio" | "hostpci" => 15,
        "sata" => 5,
        "ide" | "serial" => 3,
        "parallel" => 2,
        "usb" => 13,
        "numa" => 7,
        "virtiofs" => 9,
        _ => 255,
    }
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

fn truthy(v: Option<&Value>) -> bool {
    match v {
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => !s.is_empty() && s != "0",
        _ => false,
    }
}

/// A schema pattern compiled on first use.
#[derive(Debug)]
struct LazyRegex {
    source: String,
    compiled: OnceLock<Option<Regex>>,
}

impl LazyRegex {
    /// The compiled pattern; `None` if it is not valid for the `regex` crate.
    fn get(&self) -> Option<&Regex> {
        self.compiled
            .get_or_init(|| compile_pattern(&self.source))
            .as_ref()
    }
}

/// Converts a Perl regex from the schema into a `regex` crate pattern anchored
/// at both ends (`(?^:…)` → `(?:…)`).
fn compile_pattern(p: &str) -> Option<Regex> {
    let converted = p.replace("(?^i:", "(?i:").replace("(?^:", "(?:");
    Regex::new(&format!("^(?:{converted})$")).ok()
}

impl PropSchema {
    fn from_json(v: &Value) -> PropSchema {
        let ty = match v.get("type").and_then(Value::as_str) {
            Some("string") => Ty::String,
            Some("integer") => Ty::Integer,
            Some("number") => Ty::Number,
            Some("boolean") => Ty::Boolean,
            Some("array") => Ty::Array,
            Some("object") => Ty::Object,
            Some("null") => Ty::Null,
            _ => Ty::Any,
        };
        let format = match v.get("format") {
            Some(Value::String(s)) => Fmt::Named(s.clone()),
            Some(Value::Object(map)) => {
                let mut keys = BTreeMap::new();
                let mut default_key = None;
                for (k, sub) in map {
                    if let Some(target) = sub.get("alias").and_then(Value::as_str) {
                        keys.insert(
                            k.clone(),
                            InlineKey::Alias {
                                target: target.to_string(),
                                key_alias: sub
                                    .get("keyAlias")
                                    .and_then(Value::as_str)
                                    .map(String::from),
                            },
                        );
                    } else {
                        if truthy(sub.get("default_key")) {
                            default_key = Some(k.clone());
                        }
                        keys.insert(k.clone(), InlineKey::Prop(PropSchema::from_json(sub)));
                    }
                }
                Fmt::Inline(InlineFormat { keys, default_key })
            }
            _ => Fmt::None,
        };
        PropSchema {
            ty,
            optional: truthy(v.get("optional")),
            format,
            enum_values: v
                .get("enum")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(value_as_string).collect()),
            minimum: v.get("minimum").and_then(num),
            maximum: v.get("maximum").and_then(num),
            min_len: v.get("minLength").and_then(num).map(|f| f as usize),
            max_len: v.get("maxLength").and_then(num).map(|f| f as usize),
            pattern: v.get("pattern").and_then(Value::as_str).map(|p| LazyRegex {
                source: p.to_string(),
                compiled: OnceLock::new(),
            }),
            requires: v.get("requires").and_then(Value::as_str).map(String::from),
            items: v.get("items").map(|i| Box::new(PropSchema::from_json(i))),
        }
    }
}

fn cache() -> &'static Mutex<HashMap<PathBuf, Arc<Schema>>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Arc<Schema>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

impl Schema {
    /// Loads (once per process and path) and indexes `apidoc.json`.
    ///
    /// # Errors
    /// [`SimError::Schema`] if the file cannot be read or is not the API
    /// viewer's tree of `{path, info, children}` nodes.
    pub fn load(path: &Path) -> Result<Arc<Schema>, SimError> {
        let key = path.to_path_buf();
        if let Some(s) = cache().lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
            return Ok(s.clone());
        }
        let err = |reason: String| SimError::Schema {
            path: key.clone(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let schema = Arc::new(Self::parse(&text).map_err(err)?);
        cache()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key, schema.clone());
        Ok(schema)
    }

    /// Parses the JSON text of `apidoc.json`.
    pub(crate) fn parse(text: &str) -> Result<Schema, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
        let nodes = root.as_array().ok_or("top level is not an array")?;
        let mut methods = HashMap::new();
        let mut stack: Vec<&Value> = nodes.iter().collect();
        while let Some(n) = stack.pop() {
            if let (Some(path), Some(info)) = (
                n.get("path").and_then(Value::as_str),
                n.get("info").and_then(Value::as_object),
            ) {
                for (method, m) in info {
                    methods.insert(
                        (method.clone(), path.to_string()),
                        MethodSchema::from_json(m),
                    );
                }
            }
            if let Some(children) = n.get("children").and_then(Value::as_array) {
                stack.extend(children.iter());
            }
        }
        if methods.is_empty() {
            return Err("no API methods found".into());
        }
        Ok(Schema { methods })
    }

    /// Whether the schema has this method on this path template.
    pub fn has_method(&self, method: &str, path: &str) -> bool {
        self.methods
            .contains_key(&(method.to_string(), path.to_string()))
    }

    /// The `permissions` object of a method.
    pub fn permissions(&self, method: &str, path: &str) -> Option<&Value> {
        self.method(method, path).map(|m| &m.permissions)
    }

    /// `allowtoken` of a method.
    pub fn allows_token(&self, method: &str, path: &str) -> Option<bool> {
        self.method(method, path).map(|m| m.allowtoken)
    }

    /// The parameter names of a method (indexed ones as `net[n]`).
    pub fn parameter_names(&self, method: &str, path: &str) -> Option<Vec<String>> {
        self.method(method, path).map(MethodSchema::parameter_names)
    }

    /// Number of methods in the schema.
    pub fn method_count(&self) -> usize {
        self.methods.len()
    }

    pub(crate) fn method(&self, method: &str, path: &str) -> Option<&MethodSchema> {
        self.methods.get(&(method.to_string(), path.to_string()))
    }

    /// Validates `params` against a method; returns the per-parameter errors.
    pub(crate) fn validate(
        &self,
        method: &str,
        path: &str,
        params: &BTreeMap<String, Value>,
    ) -> Result<(), BTreeMap<String, String>> {
        match self.method(method, path) {
            Some(m) => m.validate(params),
            None => Ok(()),
        }
    }
}

impl MethodSchema {
    fn from_json(m: &Value) -> MethodSchema {
        let params = m.get("parameters");
        let mut props = BTreeMap::new();
        let mut indexed = Vec::new();
        if let Some(map) = params
            .and_then(|p| p.get("properties"))
            .and_then(Value::as_object)
        {
            for (k, v) in map {
                let schema = PropSchema::from_json(v);
                if let Some(prefix) = k.strip_suffix("[n]") {
                    indexed.push((prefix.to_string(), index_max(prefix), schema));
                } else {
                    props.insert(k.clone(), schema);
                }
            }
        }
        let additional = params
            .map(|p| truthy(p.get("additionalProperties")))
            .unwrap_or(false)
            && params.is_some_and(|p| p.get("additionalProperties").is_some());
        MethodSchema {
            props,
            indexed,
            additional,
            permissions: m.get("permissions").cloned().unwrap_or(Value::Null),
            allowtoken: m.get("allowtoken").map(|v| truthy(Some(v))).unwrap_or(true),
        }
    }

    fn lookup(&self, key: &str) -> Option<&PropSchema> {
        if let Some(p) = self.props.get(key) {
            return Some(p);
        }
        self.indexed
            .iter()
            .find(|(prefix, max, _)| props::indexed(key, prefix, *max))
            .map(|(_, _, s)| s)
    }

    /// The names this method accepts (indexed ones as `net[n]`).
    fn parameter_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.props.keys().cloned().collect();
        v.extend(self.indexed.iter().map(|(p, _, _)| format!("{p}[n]")));
        v
    }

    fn validate(&self, params: &BTreeMap<String, Value>) -> Result<(), BTreeMap<String, String>> {
        let mut errors = BTreeMap::new();
        for (k, v) in params {
            match self.lookup(k) {
                Some(schema) => {
                    check_prop(v, schema, k, &mut errors);
                    if let Some(req) = &schema.requires
                        && !params.contains_key(req)
                    {
                        errors.entry(req.clone()).or_insert_with(|| {
                            format!("missing property - '{k}' requires this property")
                        });
                    }
                }
                None if !self.additional => {
                    errors.insert(
                        k.clone(),
                        "property is not defined in schema and the schema does not allow additional properties"
                            .into(),
                    );
                }
                None => {}
            }
        }
        for (k, s) in &self.props {
            if !s.optional && !params.contains_key(k) {
                errors.insert(
                    k.clone(),
                    "property is missing and it is not optional".into(),
                );
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors)
        }
    }
}

fn add(errors: &mut BTreeMap<String, String>, path: &str, msg: String) {
    errors.entry(path.to_string()).or_insert(msg);
}

fn check_prop(v: &Value, s: &PropSchema, path: &str, errors: &mut BTreeMap<String, String>) {
    if s.ty == Ty::Array {
        let items: Vec<&Value> = match v {
            Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        if let Some(item_schema) = &s.items {
            for it in items {
                check_prop(it, item_schema, path, errors);
            }
        }
        return;
    }
    if matches!(v, Value::Array(_) | Value::Object(_)) && !matches!(s.ty, Ty::Object | Ty::Any) {
        let kind = if v.is_array() { "ARRAY" } else { "HASH" };
        add(
            errors,
            path,
            format!("type check ('{}') failed - got {kind}", ty_name(s.ty)),
        );
        return;
    }
    let text = display(v);
    match s.ty {
        Ty::Boolean => {
            let ok = matches!(v, Value::Bool(_)) || text == "1" || text == "0";
            if !ok {
                add(
                    errors,
                    path,
                    format!("type check ('boolean') failed - got '{text}'"),
                );
                return;
            }
        }
        Ty::Integer => {
            let t = text.strip_prefix(['+', '-']).unwrap_or(&text);
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                add(
                    errors,
                    path,
                    format!("type check ('integer') failed - got '{text}'"),
                );
                return;
            }
        }
        Ty::Number
            if text
                .trim()
                .parse::<f64>()
                .map(|f| !f.is_finite())
                .unwrap_or(true) =>
        {
            add(
                errors,
                path,
                format!("type check ('number') failed - got '{text}'"),
            );
            return;
        }
        _ => {}
    }
    if matches!(s.ty, Ty::Integer | Ty::Number) {
        let n: f64 = text.trim().parse().unwrap_or(0.0);
        if let Some(min) = s.minimum
            && n < min
        {
            add(
                errors,
                path,
                format!("value must have a minimum value of {}", fmt_num(min)),
            );
            return;
        }
        if let Some(max) = s.maximum
            && n > max
        {
            add(
                errors,
                path,
                format!("value must have a maximum value of {}", fmt_num(max)),
            );
            return;
        }
    }
    if s.ty == Ty::String || s.ty == Ty::Any {
        let len = text.chars().count();
        if let Some(max) = s.max_len
            && len > max
        {
            add(
                errors,
                path,
                format!("value may only be {max} characters long"),
            );
            return;
        }
        if let Some(min) = s.min_len
            && len < min
        {
            add(
                errors,
                path,
                format!("value must be at least {min} characters long"),
            );
            return;
        }
    }
    if let Some(values) = &s.enum_values
        && !values.contains(&text)
    {
        add(
            errors,
            path,
            format!(
                "value '{text}' does not have a value in the enumeration '{}'",
                values.join(", ")
            ),
        );
        return;
    }
    if let Some(re) = &s.pattern
        && re.get().is_some_and(|re| !re.is_match(&text))
    {
        add(
            errors,
            path,
            "value does not match the regex pattern".into(),
        );
        return;
    }
    let res = match &s.format {
        Fmt::None => Ok(()),
        Fmt::Named(name) => check_named(name, &text),
        Fmt::Inline(f) => check_inline(f, &text, path),
    };
    if let Err(e) = res {
        add(errors, path, format!("invalid format - {e}"));
    }
}

fn ty_name(t: Ty) -> &'static str {
    match t {
        Ty::String => "string",
        Ty::Integer => "integer",
        Ty::Number => "number",
        Ty::Boolean => "boolean",
        Ty::Array => "array",
        Ty::Object => "object",
        Ty::Null => "null",
        Ty::Any => "any",
    }
}

fn fmt_num(f: f64) -> String {
    if f.fract() == 0.0 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}

/// Parses a property string against an inline format (pve-common
/// `parse_property_string`) and checks every sub-key.
fn check_inline(f: &InlineFormat, text: &str, path: &str) -> Result<(), String> {
    let mut res: BTreeMap<String, String> = BTreeMap::new();
    for part in text.split(',') {
        if part.is_empty() {
            continue;
        }
        let (mut k, v) = match part.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match &f.default_key {
                Some(d) => (d.clone(), part.to_string()),
                None => {
                    return Err(
                        "value without key, but schema does not define a default key".into(),
                    );
                }
            },
        };
        if let Some(InlineKey::Alias { target, key_alias }) = f.keys.get(&k) {
            if let Some(ka) = key_alias
                && res.insert(ka.clone(), k.clone()).is_some()
            {
                return Err(format!(
                    "duplicate key in comma-separated list property: {ka}"
                ));
            }
            k = target.clone();
        }
        if !f.keys.contains_key(&k) {
            return Err(format!("invalid key in comma-separated list property: {k}"));
        }
        if res.insert(k.clone(), v).is_some() {
            return Err(format!(
                "duplicate key in comma-separated list property: {k}"
            ));
        }
    }
    let mut errors = BTreeMap::new();
    for (k, key) in &f.keys {
        let InlineKey::Prop(schema) = key else {
            continue;
        };
        let sub_path = format!("{path}.{k}");
        match res.get(k) {
            Some(v) => {
                let v = if schema.ty == Ty::Boolean {
                    match props::parse_bool_word(v) {
                        Some(b) => (if b { "1" } else { "0" }).to_string(),
                        None => v.clone(),
                    }
                } else {
                    v.clone()
                };
                check_prop(&Value::String(v), schema, &sub_path, &mut errors);
            }
            None if !schema.optional => {
                errors.insert(
                    sub_path,
                    "property is missing and it is not optional".into(),
                );
            }
            None => {}
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    let mut msg = "format error".to_string();
    for (k, v) in errors {
        msg.push_str(&format!("\n{k}: {v}"));
    }
    Err(msg)
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (a, p) = s.split_once('/')?;
    let ip: IpAddr = a.parse().ok()?;
    let prefix: u8 = p.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (prefix <= max && !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .then_some((ip, prefix))
}

fn volume_id_ok(s: &str) -> bool {
    match s.split_once(':') {
        Some((store, vol)) => storage_id_ok(store) && !vol.is_empty(),
        None => false,
    }
}

fn storage_id_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn configid_ok(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 2
        && b[0].is_ascii_alphabetic()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_'))
}

fn dns_name_ok(s: &str) -> bool {
    !s.is_empty() && s.split('.').all(props::node_name_ok)
}

/// Checks `text` against the named format `name` of the schema (pve-common
/// `check_format`): `dns-name`, `pve-tag-list`, `pve-node`, `mac-addr`, `pve-vmid`,
/// `pve-bridge-id`, `*-list` of a known format, … — the same check every request
/// parameter with that format gets. Formats the simulator does not know pass.
///
/// # Errors
/// pve-common's message, e.g. `value does not look like a valid DNS name`.
pub fn check_format(name: &str, text: &str) -> Result<(), String> {
    check_named(name, text)
}

/// Checks a named format (pve-common `check_format`), including `*-list`.
fn check_named(name: &str, text: &str) -> Result<(), String> {
    if let Some(base) = name.strip_suffix("-list")
        && !matches!(name, "pve-tag-list" | "pve-vmid-list")
    {
        for item in props::split_list(text) {
            check_named(base, item)?;
        }
        return Ok(());
    }
    let ok = |c: bool, msg: String| if c { Ok(()) } else { Err(msg) };
    match name {
        "pve-vmid" => ok(
            text.len() >= 3
                && text.len() <= 9
                && !text.starts_with('0')
                && text.bytes().all(|b| b.is_ascii_digit()),
            "value does not look like a valid VM ID".into(),
        ),
        "pve-vmid-list" => {
            for item in props::split_list(text) {
                check_named("pve-vmid", item)?;
            }
            Ok(())
        }
        "pve-node" => ok(
            props::node_name_ok(text),
            "value does not look like a valid node name".into(),
        ),
        "pve-storage-id" => ok(
            storage_id_ok(text),
            format!("storage ID '{text}' contains illegal characters"),
        ),
        "pve-configid" => ok(
            configid_ok(text),
            format!("invalid configuration ID '{text}'"),
        ),
        "pve-bridge-id" => ok(
            !text.is_empty()
                && text
                    .chars()
                    .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.')),
            format!("invalid bridge ID '{text}'"),
        ),
        "pve-poolid" => ok(
            !text.is_empty()
                && text.split('/').count() <= 3
                && text.split('/').all(|p| {
                    !p.is_empty()
                        && p.chars()
                            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                }),
            format!("invalid pool ID '{text}'"),
        ),
        "dns-name" => ok(
            dns_name_ok(text),
            "value does not look like a valid DNS name".into(),
        ),
        "mac-addr" => ok(
            props::mac_ok(text),
            "value does not look like a valid unicast MAC address".into(),
        ),
        "ipv4" => ok(
            text.parse::<Ipv4Addr>().is_ok(),
            "value does not look like a valid IPv4 address".into(),
        ),
        "ipv6" => ok(
            text.parse::<Ipv6Addr>().is_ok(),
            "value does not look like a valid IPv6 address".into(),
        ),
        "ip" | "address" => ok(
            text.parse::<IpAddr>().is_ok(),
            "value does not look like a valid IP address".into(),
        ),
        "CIDR" | "IPorCIDR" => ok(
            parse_cidr(text).is_some() || (name == "IPorCIDR" && text.parse::<IpAddr>().is_ok()),
            "value does not look like a valid CIDR network".into(),
        ),
        "CIDRv4" => ok(
            parse_cidr(text).is_some_and(|(ip, _)| ip.is_ipv4()),
            "value does not look like a valid IPv4 CIDR network".into(),
        ),
        "CIDRv6" => ok(
            parse_cidr(text).is_some_and(|(ip, _)| ip.is_ipv6()),
            "value does not look like a valid IPv6 CIDR network".into(),
        ),
        "pve-tag-list" => {
            for t in props::split_list(text) {
                if !props::tag_ok(t) {
                    return Err(format!("invalid characters in tag '{t}'"));
                }
            }
            Ok(())
        }
        "disk-size" => ok(
            props::parse_size(text).is_some(),
            format!("unable to parse size '{text}'"),
        ),
        "urlencoded" => ok(
            text.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-%_.!~*'()".contains(c)),
            format!("invalid urlencoded string: {text}"),
        ),
        "pve-volume-id" => ok(
            volume_id_ok(text),
            format!("unable to parse volume ID '{text}'"),
        ),
        "pve-volume-id-or-qm-path" => ok(
            matches!(text, "none" | "cdrom") || text.starts_with('/') || volume_id_ok(text),
            format!("unable to parse volume ID '{text}'"),
        ),
        "pve-volume-id-or-absolute-path" => ok(
            text.starts_with('/') || volume_id_ok(text),
            format!("unable to parse volume ID '{text}'"),
        ),
        "pve-qm-ipconfig" => check_ipconfig(text),
        "pve-qm-bootdisk" => ok(
            props::is_drive_key(text),
            format!("invalid drive name '{text}'"),
        ),
        "pve-qm-boot" => check_boot(text),
        "pve-startup-order" => check_startup(text),
        "pve-qm-smbios1" => check_smbios1(text),
        "pve-vm-cpu-conf" => crate::cpu_conf::check(text),
        "pve-qm-hostpci" => crate::pci::check_format(text),
        "pve-hotplug-features" => ok(
            text == "0"
                || text == "1"
                || text.split(',').all(|f| {
                    matches!(
                        f,
                        "network" | "disk" | "cpu" | "memory" | "usb" | "cloudinit"
                    )
                }),
            format!("invalid hotplug feature '{text}'"),
        ),
        "pve-userid" => ok(
            text.split_once('@')
                .is_some_and(|(u, r)| !u.is_empty() && !r.is_empty() && !u.contains(':')),
            format!("value '{text}' does not look like a valid user name"),
        ),
        "pve-storage-content" => ok(
            matches!(
                text,
                "images" | "rootdir" | "vztmpl" | "iso" | "backup" | "snippets" | "import" | "none"
            ),
            format!("invalid content type '{text}'"),
        ),
        _ => Ok(()),
    }
}

fn check_ipconfig(text: &str) -> Result<(), String> {
    let map = props::parse_ipconfig(text)?;
    let mut errors = Vec::new();
    if let Some(ip) = map.get("ip")
        && !(ip == "dhcp" || ip == "manual" || parse_cidr(ip).is_some_and(|(a, _)| a.is_ipv4()))
    {
        errors.push(format!("ip: invalid format - value does not look like a valid IPv4 network configuration: '{ip}'"));
    }
    if let Some(ip) = map.get("ip6")
        && !(matches!(ip.as_str(), "dhcp" | "auto" | "manual")
            || parse_cidr(ip).is_some_and(|(a, _)| a.is_ipv6()))
    {
        errors.push(format!("ip6: invalid format - value does not look like a valid IPv6 network configuration: '{ip}'"));
    }
    if let Some(gw) = map.get("gw") {
        if gw.parse::<Ipv4Addr>().is_err() {
            errors
                .push("gw: invalid format - value does not look like a valid IPv4 address".into());
        } else if !map.contains_key("ip") {
            errors.push("gw: missing property - 'ip' is required".into());
        }
    }
    if let Some(gw) = map.get("gw6")
        && gw.parse::<Ipv6Addr>().is_err()
    {
        errors.push("gw6: invalid format - value does not look like a valid IPv6 address".into());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("format error\n{}", errors.join("\n")))
    }
}

fn check_boot(text: &str) -> Result<(), String> {
    for (k, v) in props::split_pairs(text, Some("legacy"))? {
        match k.as_str() {
            "legacy" => {
                if v.is_empty() || v.len() > 4 || !v.chars().all(|c| "acdn".contains(c)) {
                    return Err(
                        "format error\nlegacy: value does not match the regex pattern".into(),
                    );
                }
            }
            "order" => {
                for dev in props::split_list(&v) {
                    let ok = props::is_drive_key(dev)
                        || props::is_net_key(dev)
                        || props::indexed(dev, "usb", 13)
                        || props::indexed(dev, "hostpci", 15);
                    if !ok {
                        return Err(format!(
                            "format error\norder: invalid format - invalid boot device '{dev}'"
                        ));
                    }
                }
            }
            other => {
                return Err(format!(
                    "invalid key in comma-separated list property: {other}"
                ));
            }
        }
    }
    Ok(())
}

fn check_startup(text: &str) -> Result<(), String> {
    for (k, v) in props::split_pairs(text, Some("order"))? {
        if !matches!(k.as_str(), "order" | "up" | "down") {
            return Err(format!("invalid key in comma-separated list property: {k}"));
        }
        if v.parse::<u64>().is_err() {
            return Err(format!(
                "format error\n{k}: type check ('integer') failed - got '{v}'"
            ));
        }
    }
    Ok(())
}

fn check_smbios1(text: &str) -> Result<(), String> {
    for (k, v) in props::split_pairs(text, None)? {
        match k.as_str() {
            "uuid" => {
                if uuid::Uuid::parse_str(&v).is_err() || v.len() != 36 {
                    return Err("format error\nuuid: value does not match the regex pattern".into());
                }
            }
            "base64" => {
                if props::parse_bool_word(&v).is_none() {
                    return Err(format!(
                        "format error\nbase64: type check ('boolean') failed - got '{v}'"
                    ));
                }
            }
            "version" | "serial" | "manufacturer" | "product" | "sku" | "family" => {}
            other => {
                return Err(format!(
                    "invalid key in comma-separated list property: {other}"
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mini() -> Schema {
        let doc = r#"[{
            "path": "/nodes", "text": "nodes", "leaf": 0,
            "children": [{
                "path": "/nodes/{node}/qemu/{vmid}/config", "text": "config", "leaf": 1,
                "info": {"POST": {
                    "allowtoken": 1, "method": "POST", "name": "update_vm_async",
                    "permissions": {"check": ["perm", "/vms/{vmid}", ["VM.Config.Disk"], "any", 1]},
                    "returns": {"type": "string"},
                    "parameters": {"additionalProperties": 0, "properties": {
                        "node": {"type": "string", "format": "pve-node"},
                        "vmid": {"type": "integer", "format": "pve-vmid", "minimum": 100, "maximum": 999999999},
                        "cores": {"type": "integer", "minimum": 1, "optional": 1},
                        "onboot": {"type": "boolean", "optional": 1},
                        "force": {"type": "boolean", "optional": 1, "requires": "delete"},
                        "delete": {"type": "string", "format": "pve-configid-list", "optional": 1},
                        "ostype": {"type": "string", "enum": ["l26", "win11"], "optional": 1},
                        "tags": {"type": "string", "format": "pve-tag-list", "optional": 1},
                        "net[n]": {"type": "string", "optional": 1, "format": {
                            "model": {"type": "string", "default_key": 1, "enum": ["virtio", "e1000"]},
                            "virtio": {"alias": "macaddr", "keyAlias": "model"},
                            "macaddr": {"type": "string", "format": "mac-addr", "optional": 1},
                            "bridge": {"type": "string", "optional": 1},
                            "firewall": {"type": "boolean", "optional": 1},
                            "tag": {"type": "integer", "minimum": 1, "maximum": 4094, "optional": 1},
                            "trunks": {"type": "string", "optional": 1, "pattern": "(?^:\\d+(?:-\\d+)?(?:;\\d+(?:-\\d+)?)*)"}
                        }}
                    }}
                }}
            }]
        }]"#;
        Schema::parse(doc).unwrap()
    }

    fn check(p: serde_json::Value) -> Result<(), BTreeMap<String, String>> {
        let map: BTreeMap<String, Value> = serde_json::from_value(p).unwrap();
        mini().validate("POST", "/nodes/{node}/qemu/{vmid}/config", &map)
    }

    #[test]
    fn accepts_valid() {
        check(json!({"node": "pve-a1", "vmid": "100", "cores": "2", "onboot": "1",
                     "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0,tag=112,firewall=on,trunks=10;20-30",
                     "tags": "a;b+c", "delete": "ide2,net1", "force": "1", "ostype": "l26"}))
            .unwrap();
        check(json!({"node": "pve-a1", "vmid": 100, "onboot": true})).unwrap();
    }

    #[test]
    fn refuses_like_pve() {
        let e = check(
            json!({"node": "pve-a1", "vmid": "100", "bogus": "1", "onboot": "true",
                             "cores": "0", "ostype": "dos"}),
        )
        .unwrap_err();
        assert_eq!(
            e["bogus"],
            "property is not defined in schema and the schema does not allow additional properties"
        );
        assert_eq!(e["onboot"], "type check ('boolean') failed - got 'true'");
        assert_eq!(e["cores"], "value must have a minimum value of 1");
        assert_eq!(
            e["ostype"],
            "value 'dos' does not have a value in the enumeration 'l26, win11'"
        );
        let e = check(json!({"vmid": "99", "net32": "virtio"})).unwrap_err();
        assert_eq!(e["node"], "property is missing and it is not optional");
        assert_eq!(e["vmid"], "value must have a minimum value of 100");
        assert!(e["net32"].starts_with("property is not defined"));
        let e = check(json!({"node": "-x", "vmid": "abc", "force": "1"})).unwrap_err();
        assert_eq!(
            e["node"],
            "invalid format - value does not look like a valid node name"
        );
        assert_eq!(e["vmid"], "type check ('integer') failed - got 'abc'");
        assert_eq!(
            e["delete"],
            "missing property - 'force' requires this property"
        );
    }

    #[test]
    fn inline_property_strings() {
        let e = check(json!({"node": "n", "vmid": 100, "net0": "virtio,bridge=vmbr0,tag=4095"}))
            .unwrap_err();
        assert_eq!(
            e["net0"],
            "invalid format - format error\nnet0.tag: value must have a maximum value of 4094"
        );
        let e = check(json!({"node": "n", "vmid": 100, "net1": "virtio,speed=10"})).unwrap_err();
        assert_eq!(
            e["net1"],
            "invalid format - invalid key in comma-separated list property: speed"
        );
        let e = check(json!({"node": "n", "vmid": 100, "net1": "virtio=01:00:00:00:00:00"}))
            .unwrap_err();
        assert_eq!(
            e["net1"],
            "invalid format - format error\nnet1.macaddr: invalid format - value does not look like a valid unicast MAC address"
        );
        let e = check(json!({"node": "n", "vmid": 100, "net1": "bridge=vmbr0"})).unwrap_err();
        assert_eq!(
            e["net1"],
            "invalid format - format error\nnet1.model: property is missing and it is not optional"
        );
        let e = check(json!({"node": "n", "vmid": 100, "tags": "ok;-bad"})).unwrap_err();
        assert_eq!(
            e["tags"],
            "invalid format - invalid characters in tag '-bad'"
        );
    }

    #[test]
    fn named_formats() {
        assert!(check_named("pve-qm-ipconfig", "ip=10.0.0.5/24,gw=10.0.0.1").is_ok());
        assert!(check_named("pve-qm-ipconfig", "ip=dhcp,ip6=auto").is_ok());
        assert!(check_named("pve-qm-ipconfig", "ip=10.0.0.5,gw=10.0.0.1").is_err());
        assert!(check_named("pve-qm-ipconfig", "ip=10.0.0.1391/24").is_err());
        assert!(check_named("pve-qm-ipconfig", "ip=10.0.0.21/24, gw=10.0.0.1").is_err());
        assert!(check_named("pve-qm-boot", "order=scsi0;net0;ide2").is_ok());
        assert!(check_named("pve-qm-boot", "order=scsi0;efidisk1").is_err());
        assert!(check_named("pve-configid-list", "ide2, net0;scsi1").is_ok());
        assert!(check_named("pve-configid-list", "ide2,0net").is_err());
        assert!(check_named("dns-name", "wl1-md-0.example").is_ok());
        assert!(check_named("dns-name", "bad_name").is_err());
        assert!(
            check_named(
                "pve-qm-smbios1",
                "uuid=5b0f7e0a-2c35-4d7e-9a7e-0123456789ab"
            )
            .is_ok()
        );
    }

    #[test]
    fn perl_pattern_conversion() {
        let re = compile_pattern("(?^:\\d+(?:-\\d+)?)").unwrap();
        assert!(re.is_match("10-20"));
        assert!(!re.is_match("x10"));
        let re = compile_pattern("\\+?\\d+(\\.\\d+)?[KMGT]?").unwrap();
        assert!(re.is_match("+8G") && re.is_match("40G") && !re.is_match("-1G"));
    }
}
