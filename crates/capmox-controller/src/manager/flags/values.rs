//! The values the flags take: each flag's parser, with the message that
//! says what to give, and the checks of names (DNS-1123 labels and
//! subdomains, label values) they share.

use std::net::SocketAddr;
use std::time::Duration;

/// The largest `--time-scale`: a 60 s task is expected to take 100
/// minutes. Larger factors make the scaled durations overflow
/// (`Duration::mul_f64` panics on 1e300 s).
pub const MAX_TIME_SCALE: f64 = 100.0;

/// One hour in seconds: the bound of the timeouts and of the leader
/// election timings ([`parse_duration_up_to`]).
pub const HOUR: u64 = 3600;

/// One day in seconds: the bound of the probe periods
/// ([`parse_duration_up_to`]).
pub const DAY: u64 = 24 * HOUR;

/// Parses a duration flag (`--pve-timeout`, `--probe-period`, …): a
/// positive duration in humantime's form (`60s`, `500ms`, `2m`, `1h30m`,
/// `1h 30m`) of at most `MAX_SECS` seconds.
///
/// # Errors
/// A message for clap, in words rather than humantime's (`expected number
/// at 0` for `-5s`), with the expected form: "empty", "must be greater
/// than 0" (a negative duration; a zero timeout or period would fail or
/// spin every call), "must be at most …" (a period of years is a typo,
/// and humantime accepts durations that overflow a deadline), a missing
/// or unknown unit, or not a duration at all.
pub fn parse_duration_up_to<const MAX_SECS: u64>(s: &str) -> Result<Duration, String> {
    const FORM: &str = "give a duration such as 60s, 500ms, 2m or 1h30m";
    let v = s.trim();
    let max = Duration::from_secs(MAX_SECS);
    let too_long = || format!("must be at most {}; {FORM}", in_words(MAX_SECS));
    if v.starts_with('-') {
        return Err(format!("must be greater than 0; {FORM}"));
    }
    match humantime::parse_duration(v) {
        Ok(d) if d.is_zero() => Err(format!("must be greater than 0; {FORM}")),
        Ok(d) if d > max => Err(too_long()),
        Ok(d) => Ok(d),
        Err(humantime::DurationError::Empty) => Err(format!("empty; {FORM}")),
        Err(humantime::DurationError::NumberOverflow) => Err(too_long()),
        Err(humantime::DurationError::UnknownUnit { unit, .. }) if unit.is_empty() => {
            Err(format!("{v:?} has no unit; {FORM}"))
        }
        Err(humantime::DurationError::UnknownUnit { unit, .. }) => {
            Err(format!("{unit:?} is not a unit of time; {FORM}"))
        }
        Err(_) => Err(format!("{v:?} is not a duration; {FORM}")),
    }
}

/// A bound in seconds as `--help` says it: `1 day`, `2 hours`, `90 s`.
fn in_words(secs: u64) -> String {
    let plural = |n: u64, unit: &str| format!("{n} {unit}{}", if n == 1 { "" } else { "s" });
    match secs {
        s if s > 0 && s % DAY == 0 => plural(s / DAY, "day"),
        s if s > 0 && s % HOUR == 0 => plural(s / HOUR, "hour"),
        s => format!("{s} s"),
    }
}

/// Whether `s` is a DNS-1123 label: 1 to 63 lowercase letters, digits and
/// `-`, starting and ending with a letter or digit (a namespace name).
fn is_dns_label(s: &str) -> bool {
    let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    let b = s.as_bytes();
    (1..=63).contains(&b.len())
        && b.iter().all(|&c| ok(c) || c == b'-')
        && ok(b[0])
        && ok(b[b.len() - 1])
}

/// Whether `s` is a DNS-1123 subdomain: at most 253 characters, dot-separated
/// parts of lowercase letters, digits and `-`, each starting and ending with
/// a letter or digit (a Secret name).
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

/// Parses `--namespace`: a DNS-1123 label.
///
/// # Errors
/// A message for clap saying what a namespace name is, or, for an empty
/// value (which once meant every namespace, unnoticed when a variable was
/// set empty by mistake), to leave the flag out to watch every namespace.
pub fn parse_namespace(s: &str) -> Result<String, String> {
    namespace_name(
        s,
        "leave out --namespace (and unset CAPMOX_NAMESPACE) to watch all namespaces",
    )
}

/// Parses `--leader-election-namespace`: a DNS-1123 label.
///
/// # Errors
/// As [`parse_namespace`]; an empty value is refused saying that leaving
/// the flag out takes `POD_NAMESPACE`, else `default`.
pub fn parse_lease_namespace(s: &str) -> Result<String, String> {
    namespace_name(
        s,
        "leave out --leader-election-namespace (and unset POD_NAMESPACE) to use the namespace default",
    )
}

/// `s` when it is a namespace name (a DNS-1123 label); `if_empty` is what
/// to do instead of giving an empty value.
fn namespace_name(s: &str, if_empty: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err(format!("empty; give a namespace name, or {if_empty}"))
    } else if is_dns_label(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a namespace name; give at most 63 lowercase letters, digits or '-', starting and ending with a letter or digit"
        ))
    }
}

/// Parses a listen address (`--metrics-addr`, `--health-addr`,
/// `--webhook-addr`): `IP:port` (`[v6]:port`), or controller-runtime's
/// `:port`, which means every IPv4 address (`0.0.0.0:port`).
///
/// # Errors
/// A message for clap with the forms accepted (a host name is not one:
/// the address is bound as given, not looked up).
pub fn parse_listen_addr(s: &str) -> Result<SocketAddr, String> {
    let v = s.trim();
    let text = match v.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => v.to_string(),
    };
    text.parse().map_err(|_| {
        format!("{v:?} is not a listen address; give IP:port (0.0.0.0:8080, 127.0.0.1:8080, [::]:8080) or :port")
    })
}

/// Parses `--leader-election-id`: the Lease's name, a DNS-1123 subdomain.
///
/// # Errors
/// A message for clap saying what a Lease name is (the API server refuses
/// any other name on every attempt, so the manager would never lead).
pub fn parse_lease_name(s: &str) -> Result<String, String> {
    if is_dns_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a Lease name; give lowercase letters, digits, '-' and '.', at most 253, each dot-separated part starting and ending with a letter or digit"
        ))
    }
}

/// Parses `--watch-filter`: a Kubernetes label value (at most 63
/// characters, letters, digits, `-`, `_`, `.`, starting and ending with a
/// letter or digit), or empty (not set).
///
/// # Errors
/// A message for clap saying what a label value is.
pub fn parse_label_value(s: &str) -> Result<String, String> {
    let alnum = |c: u8| c.is_ascii_alphanumeric();
    let b = s.as_bytes();
    if b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|&c| alnum(c) || matches!(c, b'-' | b'_' | b'.'))
            && alnum(b[0])
            && alnum(b[b.len() - 1]))
    {
        Ok(s.to_string())
    } else {
        Err(format!(
            "{s:?} is not a label value; give at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
        ))
    }
}

/// Parses `--default-credentials-secret`: `name` or `namespace/name`, the
/// namespace a DNS-1123 label and the name a DNS-1123 subdomain, or empty
/// (not set).
///
/// # Errors
/// A message for clap saying which part is wrong, or how many parts there
/// are when there are more than two, and the expected form.
pub fn parse_secret_ref(s: &str) -> Result<String, String> {
    const FORM: &str =
        "give name or namespace/name, in lowercase letters, digits, '-' (and '.' in the name)";
    let v = s.trim();
    if v.is_empty() {
        return Ok(String::new());
    }
    let parts = v.split('/').count();
    if parts > 2 {
        return Err(format!("{v:?} has {parts} parts separated by '/'; {FORM}"));
    }
    let (ns, name) = match v.split_once('/') {
        Some((ns, name)) => (Some(ns), name),
        None => (None, v),
    };
    if let Some(ns) = ns
        && !is_dns_label(ns)
    {
        return Err(format!("{ns:?} is not a namespace name; {FORM}"));
    }
    if !is_dns_subdomain(name) {
        return Err(format!("{name:?} is not a Secret name; {FORM}"));
    }
    Ok(v.to_string())
}

/// Parses a count of things at once (`--concurrency`,
/// `--clone-concurrency`): a whole number of at least 1.
///
/// # Errors
/// A message for clap: "must be at least 1" (none at once would never
/// reconcile or clone), or the number's complaint (text, negative, too
/// large for the type).
pub fn parse_count<T>(s: &str) -> Result<T, String>
where
    T: std::str::FromStr + PartialEq + From<u8>,
    T::Err: std::fmt::Display,
{
    const FORM: &str = "give a whole number such as 32";
    match s.trim().parse::<T>() {
        Ok(n) if n == T::from(0) => Err(format!("must be at least 1; {FORM}")),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{e}; {FORM}")),
    }
}

/// Parses `--log-level`: a level or env-filter directives, as
/// `tracing_subscriber::EnvFilter` reads them. A bare word that is not a
/// level is refused: the filter would read it as a module name and keep
/// that module's logs only (`--log-level LOUD` silenced everything).
///
/// # Errors
/// A message for clap: the filter's complaint, or the word that is not a
/// level, and the expected form.
pub fn parse_log_level(s: &str) -> Result<String, String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    if let Some(word) = s.split(',').map(str::trim).find(|d| {
        !d.is_empty()
            && !d.contains(['=', '[', ':'])
            && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(d))
    }) {
        return Err(format!(
            "{word:?} is not a level; give a level (error, warn, info, debug, trace) or directives such as info,capmox_controller=debug"
        ));
    }
    match tracing_subscriber::EnvFilter::try_new(s) {
        Ok(_) => Ok(s.to_string()),
        Err(e) => Err(format!(
            "{e}; give a level (error, warn, info, debug, trace) or directives such as info,capmox_controller=debug"
        )),
    }
}

/// Parses `--time-scale`: a number greater than 0 and at most
/// [`MAX_TIME_SCALE`].
///
/// # Errors
/// A message for clap that names the flag and its environment variable
/// (clap names only the flag, also for a value from the variable): "empty",
/// "not a number" (text, `NaN`) or "out of range" (0, negative, infinite,
/// above the maximum).
pub fn parse_time_scale(s: &str) -> Result<f64, String> {
    let hint = format!(
        "give a number greater than 0 and at most {MAX_TIME_SCALE} (--time-scale or CAPMOX_TIME_SCALE)"
    );
    if s.trim().is_empty() {
        return Err(format!("empty; {hint}"));
    }
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_nan() => Err(format!("not a number; {hint}")),
        Ok(v) if v > 0.0 && v <= MAX_TIME_SCALE => Ok(v),
        Ok(_) => Err(format!("out of range; {hint}")),
        Err(_) => Err(format!("not a number; {hint}")),
    }
}

/// Parses a boolean flag's environment variable (`CAPMOX_DISABLE_WEBHOOKS`,
/// `CAPMOX_LEADER_ELECT`; on the command line the flag takes no value):
/// `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off` (also `y`/`n`,
/// `t`/`f`), in any case. clap's own parser of a `bool` flag takes only
/// `true` and `false`, and refused `CAPMOX_DISABLE_WEBHOOKS=1`.
///
/// # Errors
/// A message for clap with the values accepted.
pub fn parse_boolish(s: &str) -> Result<bool, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" | "on" | "y" | "t" => Ok(true),
        "false" | "0" | "no" | "off" | "n" | "f" => Ok(false),
        _ => Err(format!(
            "{s:?} is not true or false; give true or false (also 1 or 0, yes or no, on or off)"
        )),
    }
}
