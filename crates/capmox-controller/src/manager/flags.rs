//! Command-line flags (each also settable by environment variable).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

use crate::context::ControllerOptions;
use crate::telemetry::LogFormat;

/// `capmox-controller`: the Cluster API infrastructure provider for Proxmox VE.
#[derive(Parser, Debug, Clone, PartialEq)]
#[command(name = "capmox-controller", version, about)]
pub struct Flags {
    /// Kubeconfig to use; default: `KUBECONFIG`, then `~/.kube/config`, then
    /// the in-cluster service account.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,

    /// Watch only this namespace (default: all namespaces); a DNS-1123
    /// label (lowercase letters, digits, `-`).
    #[arg(long, env = "CAPMOX_NAMESPACE", value_parser = parse_namespace)]
    pub namespace: Option<String>,

    /// Only reconcile objects labelled `cluster.x-k8s.io/watch-filter=<value>`;
    /// a label value (at most 63 letters, digits, `-`, `_`, `.`, starting and
    /// ending with a letter or digit).
    #[arg(long, env = "CAPMOX_WATCH_FILTER", value_parser = parse_label_value)]
    pub watch_filter: Option<String>,

    /// Reconciles running at once per controller. A machine reconcile is
    /// short and waits on the network (one Proxmox step, a few reads), so
    /// this is high enough that a few hundred machines never queue behind
    /// each other; memory per slot is negligible.
    #[arg(long, env = "CAPMOX_CONCURRENCY", default_value_t = 32, value_parser = parse_count::<u16>)]
    pub concurrency: u16,

    /// Address of the Prometheus `/metrics` endpoint.
    #[arg(long, env = "CAPMOX_METRICS_ADDR", default_value = "0.0.0.0:8080", value_parser = parse_listen_addr)]
    pub metrics_addr: SocketAddr,

    /// Address of `/healthz` and `/readyz`.
    #[arg(long, env = "CAPMOX_HEALTH_ADDR", default_value = "0.0.0.0:8081", value_parser = parse_listen_addr)]
    pub health_addr: SocketAddr,

    /// Address of the webhook server (HTTPS: the defaulting, validating and
    /// conversion webhooks the API server calls; controller-runtime's port).
    #[arg(long, env = "CAPMOX_WEBHOOK_ADDR", default_value = "0.0.0.0:9443", value_parser = parse_listen_addr)]
    pub webhook_addr: SocketAddr,

    /// Directory of the webhook serving certificate (where the cert-manager
    /// Secret is mounted; controller-runtime's default). Re-read every 10 s:
    /// a rotated certificate is served without a restart.
    #[arg(
        long,
        env = "CAPMOX_WEBHOOK_CERT_DIR",
        default_value = crate::webhook::DEFAULT_CERT_DIR
    )]
    pub webhook_cert_dir: PathBuf,

    /// File name of the PEM certificate chain in `--webhook-cert-dir`.
    #[arg(long, env = "CAPMOX_WEBHOOK_CERT_NAME", default_value = "tls.crt")]
    pub webhook_cert_name: String,

    /// File name of the PEM private key in `--webhook-cert-dir`.
    #[arg(long, env = "CAPMOX_WEBHOOK_KEY_NAME", default_value = "tls.key")]
    pub webhook_key_name: String,

    /// Do not serve webhooks (e.g. running outside the cluster without a
    /// certificate). Where the webhook configurations are installed, the API
    /// server then refuses writes of our kinds (`failurePolicy: Fail`).
    #[arg(long, env = "CAPMOX_DISABLE_WEBHOOKS")]
    pub disable_webhooks: bool,

    /// Elect a leader through a `coordination.k8s.io/v1` Lease before reconciling.
    #[arg(long, env = "CAPMOX_LEADER_ELECT")]
    pub leader_elect: bool,

    /// Namespace of the leader Lease (default: `POD_NAMESPACE`, else `default`).
    #[arg(long, env = "POD_NAMESPACE", value_parser = parse_namespace)]
    pub leader_election_namespace: Option<String>,

    /// Name of the leader Lease.
    #[arg(
        long,
        env = "CAPMOX_LEADER_ELECTION_ID",
        default_value = "capmox-controller-leader",
        value_parser = parse_lease_name
    )]
    pub leader_election_id: String,

    /// Leader lease duration; at most 1 hour (a longer lease only delays
    /// a successor after a crash).
    #[arg(
        long,
        env = "CAPMOX_LEADER_LEASE_DURATION",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "15s"
    )]
    pub leader_lease_duration: Duration,

    /// The leader steps down when it could not renew for this long; at most
    /// 1 hour.
    #[arg(
        long,
        env = "CAPMOX_LEADER_RENEW_DEADLINE",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "10s"
    )]
    pub leader_renew_deadline: Duration,

    /// Pause between leader election attempts and renewals; at most 1 hour.
    #[arg(
        long,
        env = "CAPMOX_LEADER_RETRY_PERIOD",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "2s"
    )]
    pub leader_retry_period: Duration,

    /// Log format.
    #[arg(long, env = "CAPMOX_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,

    /// Log level or env-filter directives (e.g. `info,capmox_controller=debug`).
    #[arg(long, env = "CAPMOX_LOG_LEVEL", default_value = "info", value_parser = parse_log_level)]
    pub log_level: String,

    /// Manager-level default credentials Secret, `name` (in the manager's
    /// namespace, `POD_NAMESPACE`) or `namespace/name`; used only by
    /// ProxmoxClusters in mode Default without `spec.credentialsRef`.
    #[arg(long, env = "CAPMOX_DEFAULT_CREDENTIALS_SECRET", value_parser = parse_secret_ref)]
    pub default_credentials_secret: Option<String>,

    /// TESTS AND BENCHMARKS ONLY: multiply the controller's pacing durations
    /// (probe period, requeue and poll delays, backoff, expected task and boot
    /// times) by this factor. Timeouts of real requests (`--pve-timeout`,
    /// `--probe-timeout`) are wall-clock limits and are not scaled.
    /// A number greater than 0 and at most 100.
    #[arg(long, env = "CAPMOX_TIME_SCALE", default_value_t = 1.0, allow_negative_numbers = true, value_parser = parse_time_scale)]
    pub time_scale: f64,

    /// Re-probe period of healthy Proxmox instances; at most 1 day.
    #[arg(
        long,
        env = "CAPMOX_PROBE_PERIOD",
        value_parser = parse_duration_up_to::<DAY>,
        default_value = "60s"
    )]
    pub probe_period: Duration,

    /// First re-probe delay of an unhealthy instance (doubles per failed
    /// probe up to 5 minutes, jittered); at most 1 day.
    #[arg(
        long,
        env = "CAPMOX_PROBE_RETRY",
        value_parser = parse_duration_up_to::<DAY>,
        default_value = "10s"
    )]
    pub probe_retry: Duration,

    /// Per-instance probe timeout (all probe calls of one instance; wall-clock,
    /// not scaled by `--time-scale`); at most 1 hour.
    #[arg(
        long,
        env = "CAPMOX_PROBE_TIMEOUT",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "10s"
    )]
    pub probe_timeout: Duration,

    /// Default timeout of one Proxmox API call (wall-clock, not scaled by
    /// `--time-scale`); at most 1 hour.
    #[arg(
        long,
        env = "CAPMOX_PVE_TIMEOUT",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "60s"
    )]
    pub pve_timeout: Duration,

    /// Most clones running at once per (Proxmox cluster, template). The
    /// controller starts there and halves its window when a clone fails on
    /// a storage lock timeout, growing it again by one per successful clone;
    /// lower it for storages known to serialise allocations.
    #[arg(long, env = "CAPMOX_CLONE_CONCURRENCY", default_value_t = 128, value_parser = parse_count::<usize>)]
    pub clone_concurrency: usize,

    /// How long a graceful shutdown may take before in-flight reconciles are
    /// dropped; at most 1 hour.
    #[arg(
        long,
        env = "CAPMOX_SHUTDOWN_TIMEOUT",
        value_parser = parse_duration_up_to::<HOUR>,
        default_value = "20s"
    )]
    pub shutdown_timeout: Duration,
}

impl Flags {
    /// Checks what clap cannot check flag by flag: the leader-election
    /// timings must nest, lease duration > renew deadline > retry period
    /// (client-go's rule: a leader that cannot renew within its lease, or
    /// retries no more than once per renew deadline, loses the lease while
    /// it still works); and no two listen addresses may take the same port
    /// (except `--metrics-addr` equal to `--health-addr`: one listener then
    /// serves both).
    ///
    /// # Errors
    /// The rule broken, naming both flags, for clap to report as a usage
    /// error.
    pub fn check(&self) -> Result<(), String> {
        let mut addrs = vec![
            ("--metrics-addr", self.metrics_addr),
            ("--health-addr", self.health_addr),
        ];
        if !self.disable_webhooks {
            addrs.push(("--webhook-addr", self.webhook_addr));
        }
        for (i, (flag_a, a)) in addrs.iter().enumerate() {
            for (flag_b, b) in &addrs[i + 1..] {
                let shared = *flag_a == "--metrics-addr" && *flag_b == "--health-addr" && a == b;
                if ports_clash(*a, *b) && !shared {
                    return Err(format!(
                        "{flag_a} ({a}) and {flag_b} ({b}) take the same port; give them different ports"
                    ));
                }
            }
        }
        if self.leader_renew_deadline >= self.leader_lease_duration {
            return Err(format!(
                "--leader-renew-deadline ({}) must be shorter than --leader-lease-duration ({})",
                humantime::format_duration(self.leader_renew_deadline),
                humantime::format_duration(self.leader_lease_duration)
            ));
        }
        if self.leader_retry_period >= self.leader_renew_deadline {
            return Err(format!(
                "--leader-retry-period ({}) must be shorter than --leader-renew-deadline ({})",
                humantime::format_duration(self.leader_retry_period),
                humantime::format_duration(self.leader_renew_deadline)
            ));
        }
        Ok(())
    }

    /// The controller options these flags describe.
    pub fn controller_options(&self) -> ControllerOptions {
        ControllerOptions {
            namespace: self.namespace.clone().filter(|s| !s.is_empty()),
            watch_filter: self.watch_filter.clone().filter(|s| !s.is_empty()),
            concurrency: self.concurrency,
            time_scale: self.time_scale,
            probe_period: self.probe_period,
            unhealthy_retry: self.probe_retry,
            probe_timeout: self.probe_timeout,
            pve_call_timeout: self.pve_timeout,
            ..ControllerOptions::default()
        }
    }

    /// The ProxmoxMachine controller's options these flags describe.
    pub fn machine_options(&self) -> crate::machine::MachineOptions {
        crate::machine::MachineOptions {
            clone_concurrency: self.clone_concurrency,
            ..crate::machine::MachineOptions::default()
        }
    }

    /// The webhook server's options, or `None` with `--disable-webhooks`.
    pub fn webhook_options(&self) -> Option<crate::webhook::WebhookOptions> {
        (!self.disable_webhooks).then(|| crate::webhook::WebhookOptions {
            addr: self.webhook_addr,
            cert_dir: self.webhook_cert_dir.clone(),
            cert_name: self.webhook_cert_name.clone(),
            key_name: self.webhook_key_name.clone(),
            reload_period: crate::webhook::CERT_RELOAD_PERIOD,
        })
    }

    /// The manager's own namespace: `--leader-election-namespace` /
    /// `POD_NAMESPACE`, else `default`.
    pub fn manager_namespace(&self) -> String {
        self.leader_election_namespace
            .clone()
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }

    /// The default credentials Secret as `(namespace, name)`.
    pub fn default_credentials(&self) -> Option<(String, String)> {
        let v = self.default_credentials_secret.as_deref()?.trim();
        if v.is_empty() {
            return None;
        }
        Some(match v.split_once('/') {
            Some((ns, name)) => (ns.to_string(), name.to_string()),
            None => (self.manager_namespace(), v.to_string()),
        })
    }
}

/// `e` with the flag's environment variable named beside the flag, when
/// `e` refuses a flag's value: clap names only the flag (`invalid value '0'
/// for '--concurrency <CONCURRENCY>'`), also for a value that came from
/// the variable, and the operator looks for the flag in vain. Other errors
/// are returned as they are.
pub fn name_the_variable(mut e: clap::Error) -> clap::Error {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(
        e.kind(),
        ErrorKind::InvalidValue | ErrorKind::ValueValidation
    ) {
        return e;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return e;
    };
    let long = arg
        .split_whitespace()
        .next()
        .and_then(|f| f.strip_prefix("--"));
    let command = <Flags as clap::CommandFactory>::command();
    let Some(var) = command
        .get_arguments()
        .find(|a| a.get_long().is_some() && a.get_long() == long)
        .and_then(|a| a.get_env())
    else {
        return e;
    };
    let named = format!("{arg} (or {})", var.to_string_lossy());
    e.insert(ContextKind::InvalidArg, ContextValue::String(named));
    e
}

/// The largest `--time-scale`: a 60 s task is expected to take 100
/// minutes. Larger factors make the scaled durations overflow
/// (`Duration::mul_f64` panics on 1e300 s).
pub const MAX_TIME_SCALE: f64 = 100.0;

/// Whether listening on `a` and on `b` would take the same port: the same
/// non-zero port on the same address, or with either on all addresses
/// (`0.0.0.0`, `::`). Port 0 is a free port each.
fn ports_clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

/// One hour in seconds: the bound of the timeouts and of the leader
/// election timings ([`parse_duration_up_to`]).
pub const HOUR: u64 = 3600;

/// One day in seconds: the bound of the probe periods
/// ([`parse_duration_up_to`]).
pub const DAY: u64 = 24 * HOUR;

/// Parses a duration flag (`--pve-timeout`, `--probe-period`, …): a
/// positive duration in humantime's form (`60s`, `500ms`, `2m`, `1h 30m`)
/// of at most `MAX_SECS` seconds.
///
/// # Errors
/// A message for clap: the parser's complaint with the expected form,
/// "must be greater than 0" (a zero timeout or period would fail or spin
/// every call) or "must be at most …" (a period of years is a typo, and
/// humantime accepts durations that overflow a deadline).
pub fn parse_duration_up_to<const MAX_SECS: u64>(s: &str) -> Result<Duration, String> {
    const FORM: &str = "give a duration such as 60s, 500ms or 2m";
    let max = Duration::from_secs(MAX_SECS);
    match humantime::parse_duration(s.trim()) {
        Ok(d) if d.is_zero() => Err(format!("must be greater than 0; {FORM}")),
        Ok(d) if d > max => Err(format!("must be at most {}; {FORM}", in_words(MAX_SECS))),
        Ok(d) => Ok(d),
        Err(e) => Err(format!("{e}; {FORM}")),
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

/// Parses `--namespace` and `--leader-election-namespace`: a DNS-1123 label,
/// or empty (not set).
///
/// # Errors
/// A message for clap saying what a namespace name is.
pub fn parse_namespace(s: &str) -> Result<String, String> {
    if s.is_empty() || is_dns_label(s) {
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
/// A message for clap saying which part is wrong and the expected form.
pub fn parse_secret_ref(s: &str) -> Result<String, String> {
    const FORM: &str =
        "give name or namespace/name, in lowercase letters, digits, '-' (and '.' in the name)";
    let v = s.trim();
    if v.is_empty() {
        return Ok(String::new());
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Asserts that each `flag value` is refused with a message holding
    /// `says`.
    fn assert_refused(cases: &[(&str, &str, &str)]) {
        for (flag, value, says) in cases {
            let e = Flags::try_parse_from(["capmox-controller", flag, value])
                .err()
                .unwrap_or_else(|| panic!("{flag} {value} was accepted"))
                .to_string();
            assert!(e.contains(says), "{flag} {value}: {e}");
        }
    }

    #[test]
    fn bad_durations_are_refused_with_what_to_give() {
        assert_refused(&[
            ("--pve-timeout", "abc", "give a duration such as 60s"),
            ("--pve-timeout", "0s", "must be greater than 0"),
            ("--probe-period", "0s", "must be greater than 0"),
            ("--shutdown-timeout", "10", "give a duration such as 60s"),
        ]);
        let f = Flags::try_parse_from(["capmox-controller", "--pve-timeout", " 1m 30s "]).unwrap();
        assert_eq!(f.pve_timeout, Duration::from_secs(90));
    }

    #[test]
    fn a_refused_value_names_the_flag_and_its_variable() {
        let refused = |args: &[&str]| {
            let e = Flags::try_parse_from(args).unwrap_err();
            name_the_variable(e).to_string()
        };
        let e = refused(&["capmox-controller", "--concurrency", "0"]);
        assert!(
            e.contains(
                "invalid value '0' for '--concurrency <CONCURRENCY> (or CAPMOX_CONCURRENCY)': must be at least 1"
            ),
            "{e}"
        );
        let e = refused(&["capmox-controller", "--log-format", "yaml"]);
        assert!(
            e.contains("'--log-format <LOG_FORMAT> (or CAPMOX_LOG_FORMAT)'"),
            "{e}"
        );
        // --kubeconfig has no variable; an unknown flag is left as it is.
        let e = refused(&["capmox-controller", "--kubeconfig"]);
        assert!(!e.contains("(or "), "{e}");
        let e = refused(&["capmox-controller", "--nope"]);
        assert!(e.contains("unexpected argument '--nope'"), "{e}");
    }

    #[test]
    fn durations_above_their_bound_are_refused() {
        assert_refused(&[
            ("--probe-period", "25h", "must be at most 1 day;"),
            ("--probe-retry", "2days", "must be at most 1 day;"),
            ("--pve-timeout", "61m", "must be at most 1 hour;"),
            ("--shutdown-timeout", "100years", "must be at most 1 hour;"),
            ("--leader-lease-duration", "2h", "must be at most 1 hour;"),
        ]);
        let f = Flags::try_parse_from([
            "capmox-controller",
            "--probe-period=24h",
            "--pve-timeout=1h",
        ])
        .unwrap();
        assert_eq!(f.probe_period, Duration::from_secs(86_400));
        assert_eq!(f.pve_timeout, Duration::from_secs(3_600));
    }

    #[test]
    fn names_and_label_values_are_checked() {
        let too_long = "a".repeat(64);
        assert_refused(&[
            (
                "--namespace",
                "Bad_NS!",
                "\"Bad_NS!\" is not a namespace name",
            ),
            ("--namespace", "a-", "is not a namespace name"),
            (
                "--leader-election-namespace",
                "a.b",
                "\"a.b\" is not a namespace name",
            ),
            ("--watch-filter", "a b,c", "\"a b,c\" is not a label value"),
            ("--watch-filter", "team-", "is not a label value"),
            (
                "--watch-filter",
                too_long.as_str(),
                "give at most 63 letters, digits, '-', '_' or '.'",
            ),
            (
                "--default-credentials-secret",
                "a/b/c",
                "\"b/c\" is not a Secret name; give name or namespace/name",
            ),
            (
                "--default-credentials-secret",
                "NS/creds",
                "\"NS\" is not a namespace name",
            ),
            (
                "--leader-election-id",
                "A/B",
                "\"A/B\" is not a Lease name; give lowercase letters",
            ),
            ("--leader-election-id", "UPPER", "is not a Lease name"),
            ("--leader-election-id", "", "is not a Lease name"),
        ]);
        let f = Flags::try_parse_from([
            "capmox-controller",
            "--namespace=team-a1",
            "--watch-filter=Team_A.1",
            "--default-credentials-secret=capmox-system/pve.creds",
        ])
        .unwrap();
        assert_eq!(f.namespace.as_deref(), Some("team-a1"));
        assert_eq!(f.watch_filter.as_deref(), Some("Team_A.1"));
        assert_eq!(
            f.default_credentials(),
            Some(("capmox-system".to_string(), "pve.creds".to_string()))
        );
        // Empty (an empty environment variable) is "not set".
        let f = Flags::try_parse_from(["capmox-controller", "--namespace=", "--watch-filter="])
            .unwrap();
        assert_eq!(f.controller_options().namespace, None);
        assert_eq!(f.controller_options().watch_filter, None);
    }

    #[test]
    fn counts_below_one_are_refused_with_what_to_give() {
        assert_refused(&[
            ("--concurrency", "0", "must be at least 1"),
            ("--clone-concurrency", "0", "must be at least 1"),
            ("--concurrency", "1.5", "give a whole number such as 32"),
            ("--concurrency", "70000", "give a whole number such as 32"),
            (
                "--clone-concurrency",
                "many",
                "give a whole number such as 32",
            ),
        ]);
        let f = Flags::try_parse_from(["capmox-controller", "--concurrency", "1"]).unwrap();
        assert_eq!(f.controller_options().concurrency, 1);
        assert_eq!(f.machine_options().clone_concurrency, 128);
    }

    #[test]
    fn a_bad_log_level_is_refused_with_what_to_give() {
        assert_refused(&[
            ("--log-level", "garbage[", "give a level (error, warn"),
            ("--log-level", "LOUD", "\"LOUD\" is not a level"),
        ]);
        for ok in ["debug", "WARN", "info,capmox_controller=debug,kube=warn"] {
            let f = Flags::try_parse_from(["capmox-controller", "--log-level", ok]).unwrap();
            assert_eq!(f.log_level, ok);
        }
    }

    #[test]
    fn leader_timings_must_nest() {
        let parse = |args: &[&str]| {
            let mut all = vec!["capmox-controller"];
            all.extend_from_slice(args);
            Flags::try_parse_from(all).unwrap().check()
        };
        assert_eq!(parse(&[]), Ok(()));
        let e = parse(&["--leader-renew-deadline", "20s"]).unwrap_err();
        assert!(
            e.contains(
                "--leader-renew-deadline (20s) must be shorter than --leader-lease-duration"
            ),
            "{e}"
        );
        let e = parse(&["--leader-retry-period", "10s"]).unwrap_err();
        assert!(
            e.contains(
                "--leader-retry-period (10s) must be shorter than --leader-renew-deadline (10s)"
            ),
            "{e}"
        );
    }

    #[test]
    fn listen_addresses_take_ip_and_port_or_port_alone() {
        let f = Flags::try_parse_from([
            "capmox-controller",
            "--metrics-addr=:18080",
            "--health-addr=127.0.0.1:18081",
            "--webhook-addr=[::1]:19443",
        ])
        .unwrap();
        assert_eq!(f.metrics_addr, "0.0.0.0:18080".parse().unwrap());
        assert_eq!(f.health_addr, "127.0.0.1:18081".parse().unwrap());
        assert_eq!(f.webhook_addr, "[::1]:19443".parse().unwrap());
        assert_refused(&[
            (
                "--metrics-addr",
                "localhost:8080",
                "\"localhost:8080\" is not a listen address; give IP:port",
            ),
            ("--health-addr", ":http", "is not a listen address"),
            ("--webhook-addr", "9443", "is not a listen address"),
        ]);
    }

    #[test]
    fn listen_addresses_may_not_take_the_same_port() {
        let check = |args: &[&str]| {
            let mut all = vec!["capmox-controller"];
            all.extend_from_slice(args);
            Flags::try_parse_from(all).unwrap().check()
        };
        assert_eq!(
            check(&["--webhook-addr=0.0.0.0:8080"]),
            Err("--metrics-addr (0.0.0.0:8080) and --webhook-addr (0.0.0.0:8080) take the same port; give them different ports".to_string())
        );
        assert_eq!(
            check(&["--health-addr=127.0.0.1:8080"]),
            Err("--metrics-addr (0.0.0.0:8080) and --health-addr (127.0.0.1:8080) take the same port; give them different ports".to_string())
        );
        // Equal metrics and health addresses share one listener; port 0
        // is a free port each; a disabled webhook server listens nowhere.
        assert_eq!(check(&["--health-addr=0.0.0.0:8080"]), Ok(()));
        assert_eq!(
            check(&[
                "--metrics-addr=127.0.0.1:0",
                "--health-addr=127.0.0.1:0",
                "--webhook-addr=127.0.0.1:0"
            ]),
            Ok(())
        );
        assert_eq!(
            check(&["--webhook-addr=0.0.0.0:8081", "--disable-webhooks"]),
            Ok(())
        );
        assert_eq!(
            check(&[
                "--metrics-addr=127.0.0.1:8080",
                "--health-addr=127.0.0.2:8080"
            ]),
            Ok(())
        );
    }

    #[test]
    fn defaults_and_overrides() {
        let f = Flags::try_parse_from(["capmox-controller"]).unwrap();
        assert_eq!(f.metrics_addr, "0.0.0.0:8080".parse().unwrap());
        assert_eq!(f.health_addr, "0.0.0.0:8081".parse().unwrap());
        assert!(!f.leader_elect);
        assert_eq!(f.log_format, LogFormat::Text);
        let o = f.controller_options();
        assert_eq!(o.namespace, None);
        assert_eq!(o.concurrency, 32);
        assert_eq!(o.probe_period, Duration::from_secs(60));
        assert_eq!(o.probe_timeout, Duration::from_secs(10));
        assert_eq!(o.pve_call_timeout, Duration::from_secs(60));
        assert_eq!(f.machine_options().clone_concurrency, 128);
        let w = f.webhook_options().unwrap();
        assert_eq!(w.addr, "0.0.0.0:9443".parse().unwrap());
        assert_eq!(
            w.cert_dir,
            PathBuf::from("/tmp/k8s-webhook-server/serving-certs")
        );
        assert_eq!(
            (w.cert_name.as_str(), w.key_name.as_str()),
            ("tls.crt", "tls.key")
        );
        assert_eq!(w.reload_period, Duration::from_secs(10));

        let f = Flags::try_parse_from([
            "capmox-controller",
            "--namespace=wl",
            "--watch-filter=team-a",
            "--concurrency=1",
            "--leader-elect",
            "--leader-election-namespace=capmox-system",
            "--log-format=json",
            "--default-credentials-secret=capmox-default-credentials",
            "--time-scale=0.01",
            "--probe-period=30s",
            "--probe-timeout=500ms",
        ])
        .unwrap();
        let o = f.controller_options();
        assert_eq!(o.namespace.as_deref(), Some("wl"));
        assert_eq!(o.watch_filter.as_deref(), Some("team-a"));
        assert_eq!(o.concurrency, 1);
        assert_eq!(o.time_scale, 0.01);
        assert_eq!(o.probe_period, Duration::from_secs(30));
        assert_eq!(o.probe_timeout, Duration::from_millis(500));
        assert_eq!(f.log_format, LogFormat::Json);
        assert_eq!(
            f.default_credentials(),
            Some((
                "capmox-system".to_string(),
                "capmox-default-credentials".to_string()
            ))
        );
        let f = Flags::try_parse_from([
            "capmox-controller",
            "--default-credentials-secret=other/creds",
        ])
        .unwrap();
        assert_eq!(
            f.default_credentials(),
            Some(("other".to_string(), "creds".to_string()))
        );
        assert!(Flags::try_parse_from(["capmox-controller", "--log-format=yaml"]).is_err());
        for bad in ["0", "-1", "inf", "1e300", "100.5"] {
            let e = parse_time_scale(bad).unwrap_err();
            assert!(
                e.starts_with("out of range; give a number greater than 0"),
                "{bad}: {e}"
            );
            let arg = format!("--time-scale={bad}");
            assert!(
                Flags::try_parse_from(["capmox-controller", arg.as_str()]).is_err(),
                "{bad}"
            );
        }
        // `--time-scale -1` (a separate value) gets the range, not
        // "unexpected argument".
        let e = Flags::try_parse_from(["capmox-controller", "--time-scale", "-1"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("out of range; give a number greater than 0"),
            "{e}"
        );
        for bad in ["abc", "NaN"] {
            let e = parse_time_scale(bad).unwrap_err();
            assert!(e.starts_with("not a number;"), "{bad}: {e}");
        }
        for empty in ["", " "] {
            let e = parse_time_scale(empty).unwrap_err();
            assert!(e.starts_with("empty;"), "{empty:?}: {e}");
            assert!(e.contains("CAPMOX_TIME_SCALE"), "{e}");
        }
        // The help names the bound as a number, not as a rustdoc link.
        let help = <Flags as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        assert!(
            help.contains(&format!("at most {MAX_TIME_SCALE}"))
                && !help.contains("`MAX_TIME_SCALE`"),
            "{help}"
        );
        assert_eq!(parse_time_scale("100"), Ok(100.0));
        assert_eq!(parse_time_scale("0.005"), Ok(0.005));
        let f = Flags::try_parse_from([
            "capmox-controller",
            "--webhook-addr=127.0.0.1:0",
            "--webhook-cert-dir=/certs",
            "--webhook-cert-name=a.pem",
            "--webhook-key-name=b.pem",
        ])
        .unwrap();
        let w = f.webhook_options().unwrap();
        assert_eq!(w.addr, "127.0.0.1:0".parse().unwrap());
        assert_eq!(w.cert_dir, PathBuf::from("/certs"));
        assert_eq!(
            (w.cert_name.as_str(), w.key_name.as_str()),
            ("a.pem", "b.pem")
        );
        let f = Flags::try_parse_from(["capmox-controller", "--disable-webhooks"]).unwrap();
        assert_eq!(f.webhook_options(), None);
    }
}
