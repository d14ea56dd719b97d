//! Command-line flags (each also settable by environment variable).

mod values;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;

pub use values::*;

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
    /// label (lowercase letters, digits, `-`). Leave it out (not empty) to
    /// watch all namespaces.
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
    /// The variable takes true/false, 1/0, yes/no or on/off.
    #[arg(long, env = "CAPMOX_DISABLE_WEBHOOKS", action = clap::ArgAction::SetTrue, value_parser = parse_boolish)]
    pub disable_webhooks: bool,

    /// Elect a leader through a `coordination.k8s.io/v1` Lease before
    /// reconciling. The variable takes true/false, 1/0, yes/no or on/off.
    #[arg(long, env = "CAPMOX_LEADER_ELECT", action = clap::ArgAction::SetTrue, value_parser = parse_boolish)]
    pub leader_elect: bool,

    /// Namespace of the leader Lease (default: `POD_NAMESPACE`, else `default`).
    #[arg(long, env = "POD_NAMESPACE", value_parser = parse_lease_namespace)]
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

/// Whether listening on `a` and on `b` would take the same port: the same
/// non-zero port on the same address, or with either on all addresses
/// (`0.0.0.0`, `::`). Port 0 is a free port each.
fn ports_clash(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0
        && a.port() == b.port()
        && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

#[cfg(test)]
mod tests;
