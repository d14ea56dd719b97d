//! The environment a scenario runs in — one code path, two backends:
//!
//! - **simulated** (default): `pve-sim` (in-process, its three built-in
//!   datacenters unless configured otherwise) and `kube-sim` (in-process),
//!   the CAPI CRDs of [`crate::crds`] and this provider's CRDs installed, the
//!   CAPI-core stand-in and the kubelet stand-in running;
//! - **real** (`E2E_REAL=1` and `KUBECONFIG`): the management cluster
//!   `KUBECONFIG` names, with real CAPI core, the kubeadm providers and the
//!   in-cluster IPAM provider already installed (the stand-in is not
//!   started); this provider's CRDs are applied; Proxmox is still `pve-sim`
//!   in-process (its URLs are on 127.0.0.1, reachable by the controller,
//!   which runs on this machine). Without a kubelet in the simulated VMs no
//!   Node ever joins there, so waits that need Nodes (control-plane scaling
//!   past the first machine) only complete with real Proxmox images.
//!
//! In both, the real `capmox-controller` binary runs as a child process
//! pointed at the API server by a kubeconfig file, watching the scenario's
//! own namespace. Without `E2E_REAL` the user's `KUBECONFIG` is never read.
//!
//! The simulated backend also plays cert-manager ([`crate::certmanager`]):
//! it issues the webhook's serving certificate into the working directory,
//! injects its CA into the webhook configurations of
//! `config/webhook/manifests.yaml` (installed before anything else is
//! written) and into CRDs that convert by webhook, and routes the webhook
//! Service to the controller's webhook server, so every write of our kinds
//! goes through the real webhook server over HTTPS. Against a real cluster
//! the controller runs on this machine, out of the API server's reach: it
//! runs with `--disable-webhooks` and no webhook configuration is installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use pve_sim::{SimConfig, Simulator};

use crate::certmanager::{self, Issued, WEBHOOK_SERVICE};
use crate::controller::{ControllerArgs, ControllerProcess, WebhookArgs};
use crate::error::{E2eError, Result};
use crate::observe::{self, MachineRow};
use crate::scenario::{self, Progress, Waits};
use crate::standin::node::{NodeOptions, NodeStandIn};
use crate::standin::workload::WorkloadNodes;
use crate::standin::{StandIn, StandInOptions};
use crate::{clusterctl, crds, setup};

/// `templates/cluster-template-multi-instance.yaml`.
pub const MULTI_INSTANCE_TEMPLATE: &str =
    include_str!("../../../templates/cluster-template-multi-instance.yaml");
/// `templates/cluster-template-multi-instance-vip-pool.yaml`.
pub const VIP_POOL_TEMPLATE: &str =
    include_str!("../../../templates/cluster-template-multi-instance-vip-pool.yaml");
/// `templates/cluster-template-flatcar.yaml`.
pub const FLATCAR_TEMPLATE: &str = include_str!("../../../templates/cluster-template-flatcar.yaml");
/// `templates/cluster-template.yaml`.
pub const DEFAULT_TEMPLATE: &str = include_str!("../../../templates/cluster-template.yaml");

/// How to build an [`Env`].
#[derive(Clone, Debug)]
pub struct EnvOptions {
    /// Short scenario name: the namespace is `e2e-<name>` (plus a random
    /// suffix against a real cluster).
    pub name: String,
    /// pve-sim's time scale, also passed to the controller (`--time-scale`).
    pub time_scale: f64,
    /// Seed of the simulator and of the stand-in's generated names.
    pub seed: u64,
    /// The simulated datacenters (`None`: the built-in three).
    pub sim: Option<SimConfig>,
    /// Start the controller binary.
    pub start_controller: bool,
    /// Controller log level / filter.
    pub log_level: String,
    /// The least any wait may take (slow CI machines).
    pub wait_floor: Duration,
    /// Keep the working directory (kubeconfig, controller log) on shutdown.
    pub keep_workdir: bool,
    /// The kube-sim port (0: any free port).
    pub kube_port: u16,
    /// Extra command-line arguments for the controller binary, appended
    /// after the ones [`ControllerArgs::to_args`] derives (e.g.
    /// `--clone-concurrency 8` in the benchmark).
    pub controller_args: Vec<String>,
    /// How often each CAPI stand-in controller re-reconciles all its objects
    /// besides reacting to watch events ([`StandInOptions::resync`]; CAPI's
    /// own `--sync-period` defaults to 10 min). Default 5 s: a safety net
    /// the tests can afford. At 1,000 Machines each resync is 1,000
    /// reconciles per controller, which the benchmark cannot.
    pub standin_resync: Duration,
    /// Simulated backend: install the webhook configurations and run the
    /// controller's webhook server (default). Off, the controller runs with
    /// `--disable-webhooks` (to measure what the webhooks cost).
    pub webhooks: bool,
    /// A simulated datacenter whose credentials become the manager's
    /// default credentials ([`DEFAULT_CREDENTIALS`], as `clusterctl init`
    /// makes the Secret from `PROXMOX_URL`, `PROXMOX_TOKEN`,
    /// `PROXMOX_SECRET`), passed as `--default-credentials-secret`; for
    /// ProxmoxClusters without `spec.credentialsRef` (CAPMOX's templates).
    pub default_credentials: Option<String>,
}

/// The manager's default credentials Secret `(namespace, name)`
/// (`config/`'s `capmox-default-credentials` in `capmox-system`).
pub const DEFAULT_CREDENTIALS: (&str, &str) = ("capmox-system", "capmox-default-credentials");

impl EnvOptions {
    /// Defaults for a scenario called `name`: time scale 0.005 (a 60 s clone
    /// takes 0.3 s), seed 1, controller started, waits of at least 150 s
    /// (a wait that passes ends when its condition holds; the floor only
    /// matters on a machine slowed by other work, such as a CI runner).
    pub fn new(name: &str) -> EnvOptions {
        EnvOptions {
            name: name.to_string(),
            time_scale: 0.005,
            seed: 1,
            sim: None,
            start_controller: true,
            log_level: "info".into(),
            wait_floor: Duration::from_secs(150),
            keep_workdir: false,
            kube_port: 0,
            controller_args: Vec::new(),
            standin_resync: Duration::from_secs(5),
            webhooks: true,
            default_credentials: None,
        }
    }
}

/// The simulated Kubernetes side.
struct Simulated {
    kube: kube_sim::KubeSim,
    /// The webhook's serving certificate (cert-manager's part).
    certs: Issued,
    standin: StandIn,
    kubelets: NodeStandIn,
    nodes: Arc<WorkloadNodes>,
}

/// A running environment.
pub struct Env {
    /// Client of the API server (kube-sim or the real cluster).
    pub client: kube::Client,
    /// The scenario's namespace.
    pub namespace: String,
    /// Wait bounds derived from the time scale.
    pub waits: Waits,
    /// The simulated Proxmox datacenters.
    pub pve: Simulator,
    workdir: WorkDir,
    kubeconfig: PathBuf,
    simulated: Option<Simulated>,
    controller: Option<ControllerProcess>,
    /// The namespace the controller watches instead of the scenario's.
    watch: Option<String>,
    opts: EnvOptions,
}

impl std::fmt::Debug for Env {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Env")
            .field("namespace", &self.namespace)
            .field("real", &self.is_real())
            .field("workdir", &self.workdir.path)
            .finish_non_exhaustive()
    }
}

/// The largest time scale: the controller refuses a `--time-scale` above
/// it (`MAX_TIME_SCALE` in the controller's `manager/flags.rs`; the
/// integration test `time_scale` keeps the two equal), so the demo and the
/// benchmark refuse it before starting anything.
pub const MAX_TIME_SCALE: f64 = 100.0;

/// Parses a time scale given on a command line (`demo`, `bench`): a number
/// greater than 0 and at most [`MAX_TIME_SCALE`] (0.1: a 60 s clone takes
/// 6 s).
///
/// # Errors
/// A message for clap: "empty", "not a number" (text, `NaN`) or "out of
/// range" (0, negative, infinite, above [`MAX_TIME_SCALE`]).
pub fn parse_time_scale(s: &str) -> std::result::Result<f64, String> {
    let hint = format!(
        "give a number greater than 0 and at most {MAX_TIME_SCALE} (0.1: a 60 s clone takes 6 s)"
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

/// Whether `E2E_REAL=1` asks for the real backend.
pub fn real_requested() -> bool {
    std::env::var("E2E_REAL").is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true"))
}

impl Env {
    /// Starts pve-sim, the API server side (kube-sim + stand-in, or the real
    /// cluster), installs CRDs, creates the namespace and starts the
    /// controller binary.
    ///
    /// # Errors
    /// [`E2eError::Contract`] when `E2E_REAL=1` without `KUBECONFIG`; any
    /// start-up failure of the pieces.
    pub async fn start(opts: EnvOptions) -> Result<Env> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let workdir = std::env::temp_dir().join(format!(
            "capmox-e2e-{}-{}",
            opts.name,
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&workdir).map_err(|source| E2eError::Io {
            path: workdir.clone(),
            source,
        })?;
        let workdir = WorkDir {
            keep: opts.keep_workdir,
            path: workdir,
        };
        let sim_config = opts
            .sim
            .clone()
            .unwrap_or_else(SimConfig::builtin_default)
            .with_time_scale(opts.time_scale)
            .with_seed(opts.seed);
        let pve = Simulator::start(sim_config)
            .await
            .map_err(|e| E2eError::Sim(e.to_string()))?;
        let waits = Waits::new(opts.time_scale, opts.wait_floor);
        let crd_wait = Duration::from_secs(30);
        // The provider is installed from the artifacts `make release` writes,
        // as `clusterctl init` installs it from a clusterctl repository: the
        // CRDs of its infrastructure-components.yaml. (kube-sim serves no
        // Deployments or RBAC; the controller runs as a local process.)
        let release = setup::build_release(&workdir.path.join("release"))?;
        let provider_crds = setup::release_crds(&release)?;
        let (client, kubeconfig, namespace, simulated) = if real_requested() {
            let kubeconfig = std::env::var_os("KUBECONFIG")
                .map(|v| std::env::split_paths(&v).next().unwrap_or_default())
                .filter(|p| !p.as_os_str().is_empty())
                .ok_or_else(|| E2eError::Contract("E2E_REAL=1 needs KUBECONFIG".into()))?;
            let config = kube::Config::from_kubeconfig(&kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| E2eError::Contract(format!("KUBECONFIG: {e}")))?;
            let client = kube::Client::try_from(config)?;
            let suffix = &uuid::Uuid::new_v4().simple().to_string()[..6];
            let namespace = format!("e2e-{}-{suffix}", opts.name);
            setup::install_crds(&client, &provider_crds, crd_wait).await?;
            (client, kubeconfig, namespace, None)
        } else {
            let kube = kube_sim::KubeSim::start(kube_sim::KubeSimOptions {
                port: opts.kube_port,
                ..kube_sim::KubeSimOptions::default()
            })
            .await?;
            let kubeconfig = workdir.path.join("kubeconfig");
            kube.write_kubeconfig(&kubeconfig)?;
            let client = kube.client().await?;
            let namespace = format!("e2e-{}", opts.name);
            let certs = certmanager::issue(
                &workdir.path.join("serving-certs"),
                &certmanager::webhook_dns_names(),
            )?;
            setup::install_crds(&client, &crds::all(), crd_wait).await?;
            let provider = setup::with_ca(provider_crds, &certs.ca_pem)?;
            setup::install_crds(&client, &provider, crd_wait).await?;
            if opts.webhooks {
                setup::install_webhooks(&client, &certs.ca_pem).await?;
            }
            let nodes = Arc::new(WorkloadNodes::new(client.clone()));
            let poll = Duration::from_secs_f64((opts.time_scale * 20.0).clamp(0.1, 0.5));
            let standin = StandIn::start(
                client.clone(),
                nodes.clone(),
                StandInOptions {
                    namespace: Some(namespace.clone()),
                    seed: opts.seed,
                    resync: opts.standin_resync,
                    retry: poll,
                    ..StandInOptions::default()
                },
            )
            .await?;
            let kubelets = NodeStandIn::start(
                client.clone(),
                pve.clusters().to_vec(),
                nodes.clone(),
                NodeOptions {
                    namespace: Some(namespace.clone()),
                    poll,
                    time_scale: opts.time_scale,
                    default_credentials: opts.default_credentials.as_ref().map(|_| {
                        (
                            DEFAULT_CREDENTIALS.0.to_string(),
                            DEFAULT_CREDENTIALS.1.to_string(),
                        )
                    }),
                },
            );
            (
                client,
                kubeconfig,
                namespace,
                Some(Simulated {
                    kube,
                    certs,
                    standin,
                    kubelets,
                    nodes,
                }),
            )
        };
        setup::ensure_namespace(&client, &namespace).await?;
        if let Some(dc) = &opts.default_credentials {
            let c = pve
                .cluster(dc)
                .ok_or_else(|| E2eError::Sim(format!("no simulated datacenter {dc}")))?;
            setup::ensure_namespace(&client, DEFAULT_CREDENTIALS.0).await?;
            let secret = serde_json::json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": DEFAULT_CREDENTIALS.1, "namespace": DEFAULT_CREDENTIALS.0},
                "data": {
                    "url": base64(c.url().as_bytes()),
                    "token": base64(c.token_id().as_bytes()),
                    "secret": base64(c.token_secret().as_bytes()),
                    "root_ca": base64(c.ca_pem().as_bytes()),
                },
            });
            scenario::apply_value(&client, DEFAULT_CREDENTIALS.0, secret).await?;
        }
        let mut env = Env {
            client,
            namespace,
            waits,
            pve,
            workdir,
            kubeconfig,
            simulated,
            controller: None,
            watch: None,
            opts,
        };
        if env.opts.start_controller {
            env.start_controller().await?;
        }
        Ok(env)
    }

    /// Whether this runs against a real management cluster.
    pub fn is_real(&self) -> bool {
        self.simulated.is_none()
    }

    /// Whether Nodes join for provisioned machines: the simulated backend's
    /// kubelets register them; against a real cluster with simulated
    /// Proxmox no kubelet ever runs.
    pub fn nodes_join(&self) -> bool {
        self.simulated.is_some()
    }

    /// The kubeconfig file of the API server.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The working directory (kubeconfig, controller log).
    pub fn workdir(&self) -> &Path {
        &self.workdir.path
    }

    /// The kube-sim URL (`None` on a real cluster).
    pub fn kube_url(&self) -> Option<String> {
        self.simulated.as_ref().map(|s| s.kube.url())
    }

    /// The workload cluster's Nodes (simulated backend only).
    pub fn nodes(&self) -> Option<Arc<WorkloadNodes>> {
        self.simulated.as_ref().map(|s| s.nodes.clone())
    }

    /// The NoCloud seeds the simulated VMs booted with, by machine name
    /// (simulated backend only).
    pub fn seeds(&self) -> BTreeMap<String, crate::standin::node::SeenSeed> {
        self.simulated
            .as_ref()
            .map(|s| {
                s.kubelets
                    .seeds()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })
            .unwrap_or_default()
    }

    /// The controller's log file.
    pub fn controller_log(&self) -> PathBuf {
        self.workdir.path.join("capmox-controller.log")
    }

    /// Starts the controller binary (if not running). On the simulated
    /// backend its webhook server listens on a free port of 127.0.0.1 that
    /// the webhook Service is routed to, and this returns once it accepts
    /// connections (writes of our kinds are refused until then, as in a
    /// cluster whose webhook pod is not ready).
    ///
    /// # Errors
    /// As [`ControllerProcess::start`]; [`E2eError::Controller`] when the
    /// controller exits or its webhook server does not listen within 60 s.
    pub async fn start_controller(&mut self) -> Result<()> {
        if self.controller.is_some() {
            return Ok(());
        }
        let webhook = match &self.simulated {
            Some(s) if self.opts.webhooks => {
                let addr = free_local_addr()?;
                s.kube
                    .route_service(WEBHOOK_SERVICE.0, WEBHOOK_SERVICE.1, 443, addr);
                Some(WebhookArgs {
                    addr,
                    cert_dir: s.certs.dir.clone(),
                })
            }
            _ => None,
        };
        let args = ControllerArgs {
            kubeconfig: self.kubeconfig.clone(),
            namespace: Some(self.watch.clone().unwrap_or_else(|| self.namespace.clone())),
            time_scale: self.opts.time_scale,
            log_file: self.controller_log(),
            log_level: self.opts.log_level.clone(),
            webhook: webhook.clone(),
            extra: self
                .opts
                .default_credentials
                .iter()
                .flat_map(|_| {
                    [
                        "--default-credentials-secret".to_string(),
                        format!("{}/{}", DEFAULT_CREDENTIALS.0, DEFAULT_CREDENTIALS.1),
                    ]
                })
                .chain(self.opts.controller_args.iter().cloned())
                .collect(),
        };
        self.controller = Some(ControllerProcess::start(args).await?);
        if let Some(w) = webhook {
            self.wait_webhooks_listening(w.addr).await?;
        }
        Ok(())
    }

    async fn wait_webhooks_listening(&mut self, addr: std::net::SocketAddr) -> Result<()> {
        let start = std::time::Instant::now();
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                return Ok(());
            }
            self.check_controller()?;
            if start.elapsed() > Duration::from_secs(60) {
                return Err(E2eError::Controller(format!(
                    "its webhook server does not listen on {addr} after 60 s; log tail:\n{}",
                    self.controller_log_tail(30)
                )));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The namespace the next [`Env::start_controller`] watches: `Some` of
    /// another namespace runs the webhook server while the reconcilers see
    /// nothing of the scenario's; `None` (the default) is the scenario's.
    pub fn set_controller_namespace(&mut self, namespace: Option<&str>) {
        self.watch = namespace.map(str::to_string);
    }

    /// The process id of the running controller (`None` when it is not
    /// running).
    pub fn controller_pid(&self) -> Option<u32> {
        self.controller.as_ref().and_then(ControllerProcess::pid)
    }

    /// Kills the controller with SIGKILL (a crash) and waits until it is gone.
    ///
    /// # Errors
    /// [`E2eError::Controller`] when it is not running or does not die.
    pub async fn kill_controller(&mut self) -> Result<()> {
        let c = self
            .controller
            .take()
            .ok_or_else(|| E2eError::Controller("not running".into()))?;
        c.kill(Duration::from_secs(10)).await
    }

    /// Fails when the controller process has exited (naming its status and
    /// log tail), so a wait does not run into its timeout for nothing.
    ///
    /// # Errors
    /// [`E2eError::Controller`].
    pub fn check_controller(&mut self) -> Result<()> {
        if let Some(c) = self.controller.as_mut()
            && let Some(status) = c.exited()?
        {
            let tail = c.log_tail(30);
            return Err(E2eError::Controller(format!(
                "exited with {status}; log tail:\n{tail}"
            )));
        }
        Ok(())
    }

    /// The last lines of the controller log.
    pub fn controller_log_tail(&self, lines: usize) -> String {
        crate::controller::log_tail(&self.controller_log(), lines)
    }

    /// Calls `check` with the API client until it reports
    /// [`Progress::Done`] or `timeout` passes; fails early when the
    /// controller process died. A timeout names `what`, the last state seen
    /// and the tail of the controller's log.
    ///
    /// # Errors
    /// [`E2eError::Timeout`], [`E2eError::Controller`], errors of `check`.
    pub async fn wait_for<T, F, Fut>(
        &mut self,
        what: &str,
        timeout: Duration,
        mut check: F,
    ) -> Result<T>
    where
        F: FnMut(kube::Client) -> Fut,
        Fut: std::future::Future<Output = Result<Progress<T>>>,
    {
        let start = std::time::Instant::now();
        loop {
            self.check_controller()?;
            let last = match check(self.client.clone()).await? {
                Progress::Done(v) => {
                    eprintln!(
                        "[e2e] {what}: {:.1} s (bound {:.0} s)",
                        start.elapsed().as_secs_f64(),
                        timeout.as_secs_f64()
                    );
                    return Ok(v);
                }
                Progress::Pending(s) => s,
            };
            if start.elapsed() >= timeout {
                return Err(E2eError::Timeout {
                    what: what.to_string(),
                    after: start.elapsed(),
                    last_seen: format!(
                        "{last}\n--- controller log (last 40 lines) ---\n{}",
                        self.controller_log_tail(40)
                    ),
                });
            }
            tokio::time::sleep(self.waits.poll).await;
        }
    }

    /// Waits until `ok` holds for the machine rows of the namespace.
    ///
    /// # Errors
    /// As [`Env::wait_for`].
    pub async fn wait_machines(
        &mut self,
        what: &str,
        timeout: Duration,
        ok: impl Fn(&[MachineRow]) -> bool,
    ) -> Result<Vec<MachineRow>> {
        let ns = self.namespace.clone();
        self.wait_for(what, timeout, |client| {
            let ns = ns.clone();
            let rows = async move { observe::machine_rows(&client, &ns).await };
            let ok = &ok;
            async move {
                let rows = rows.await?;
                Ok(if ok(&rows) {
                    Progress::Done(rows)
                } else {
                    Progress::Pending(observe::summary(&rows))
                })
            }
        })
        .await
    }

    /// The variables of `cluster-template-multi-instance.yaml` for this
    /// environment: the three simulated datacenters (`dc-a`, `dc-b`, `dc-c`,
    /// in configuration order) with their URLs, tokens, CAs and node pools
    /// `10.<10|20|30>.0.10-10.<..>.0.60/24`.
    pub fn multi_instance_vars(&self, cluster: &str) -> BTreeMap<String, String> {
        let mut v = base_vars(cluster, &self.namespace);
        for (i, c) in self.pve.clusters().iter().take(3).enumerate() {
            let n = i + 1;
            let net = 10 * n;
            v.insert(format!("PROXMOX_{n}_NAME"), c.name().to_string());
            v.insert(format!("PROXMOX_{n}_URL"), c.url());
            v.insert(format!("PROXMOX_{n}_TOKEN"), c.token_id());
            v.insert(format!("PROXMOX_{n}_SECRET"), c.token_secret());
            v.insert(
                format!("PROXMOX_{n}_ROOT_CA_B64"),
                base64(c.ca_pem().as_bytes()),
            );
            v.insert(
                format!("PROXMOX_{n}_NODE_IP_RANGES"),
                format!("[10.{net}.0.10-10.{net}.0.60]"),
            );
            v.insert(format!("PROXMOX_{n}_GATEWAY"), format!("10.{net}.0.1"));
        }
        v
    }

    /// The variables of `cluster-template.yaml` (mode `Default`, one Proxmox
    /// cluster) for the simulated datacenter `dc` and its template.
    ///
    /// # Errors
    /// [`E2eError::Sim`] when `dc` is not simulated or has no template.
    pub fn default_vars(&self, cluster: &str, dc: &str) -> Result<BTreeMap<String, String>> {
        let c = self
            .pve
            .cluster(dc)
            .ok_or_else(|| E2eError::Sim(format!("no simulated datacenter {dc}")))?;
        let template = c
            .config()
            .templates
            .first()
            .ok_or_else(|| E2eError::Sim(format!("{dc} has no template")))?;
        let net = match self.pve.clusters().iter().position(|x| x.name() == dc) {
            Some(i) => 10 * (i + 1),
            None => 10,
        };
        let mut v = base_vars(cluster, &self.namespace);
        v.insert("PROXMOX_URL".into(), c.url());
        v.insert("PROXMOX_TOKEN".into(), c.token_id());
        v.insert("PROXMOX_SECRET".into(), c.token_secret());
        v.insert("PROXMOX_ROOT_CA_B64".into(), base64(c.ca_pem().as_bytes()));
        v.insert("PROXMOX_SOURCENODE".into(), template.node.clone());
        v.insert("TEMPLATE_VMID".into(), template.vmid.to_string());
        v.insert(
            "NODE_IP_RANGES".into(),
            format!("[10.{net}.0.10-10.{net}.0.60]"),
        );
        v.insert("GATEWAY".into(), format!("10.{net}.0.1"));
        Ok(v)
    }

    /// Renders `template` (one of the repository's cluster templates) with
    /// clusterctl's rules and applies it with server-side apply.
    ///
    /// # Errors
    /// [`E2eError::Render`], and the errors of [`scenario::apply_yaml`].
    pub async fn apply_template(
        &self,
        name: &str,
        template: &str,
        vars: &BTreeMap<String, String>,
    ) -> Result<usize> {
        let text = clusterctl::render(template, vars).map_err(|source| E2eError::Render {
            template: name.to_string(),
            source,
        })?;
        Ok(
            scenario::apply_yaml(&self.client, &self.namespace, name, &text)
                .await?
                .len(),
        )
    }

    /// Stops the controller, the stand-ins and both simulators; removes the
    /// working directory unless asked to keep it.
    pub async fn shutdown(mut self) {
        if let Some(c) = self.controller.take() {
            let _ = c.kill(Duration::from_secs(10)).await;
        }
        if let Some(s) = self.simulated.take() {
            s.kubelets.shutdown().await;
            s.standin.shutdown().await;
            s.kube.shutdown().await;
        }
        self.pve.shutdown().await;
    }
}

/// The working directory (kubeconfig, controller log), removed when dropped
/// unless kept. A test that panics keeps it: its output names the
/// controller log, which is what a reader of the failure opens next.
struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("[e2e] kept {} (the test failed)", self.path.display());
        } else if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// A free port on 127.0.0.1 (bound and released: the controller binds it a
/// moment later; a restarted controller gets a new one).
fn free_local_addr() -> Result<std::net::SocketAddr> {
    let io = |source| E2eError::Io {
        path: "127.0.0.1:0".into(),
        source,
    };
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io)?;
    l.local_addr().map_err(io)
}

/// The variables both templates share.
fn base_vars(cluster: &str, namespace: &str) -> BTreeMap<String, String> {
    [
        ("CLUSTER_NAME", cluster),
        ("NAMESPACE", namespace),
        ("KUBERNETES_VERSION", "v1.33.4"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.0.5"),
        (
            "SSH_AUTHORIZED_KEYS",
            "[\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e capmox-e2e\"]",
        ),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
    .collect()
}

/// Standard base64 (as Kubernetes writes Secret `data`).
pub fn base64(bytes: &[u8]) -> String {
    match serde_json::to_value(ByteString(bytes.to_vec())) {
        Ok(serde_json::Value::String(s)) => s,
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_scales_are_finite_numbers_above_zero() {
        assert_eq!(parse_time_scale("0.25"), Ok(0.25));
        assert_eq!(parse_time_scale("1"), Ok(1.0));
        for bad in ["0", "-1", "-0.5", "inf", "NaN", "abc", ""] {
            assert!(parse_time_scale(bad).is_err(), "{bad} accepted");
        }
        for bad in ["inf", "1e300", "100.5", "0"] {
            let e = parse_time_scale(bad).unwrap_err();
            assert!(e.starts_with("out of range; give a number"), "{bad}: {e}");
        }
        for bad in ["abc", "NaN"] {
            let e = parse_time_scale(bad).unwrap_err();
            assert!(e.starts_with("not a number; give a number"), "{bad}: {e}");
        }
        assert!(parse_time_scale(" ").unwrap_err().starts_with("empty; "));
        assert_eq!(parse_time_scale("100"), Ok(100.0));
    }

    #[test]
    fn base64_matches_rfc4648() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    }
}
