//! Test support for the ProxmoxCluster reconciler and the manager: an
//! in-memory Kubernetes (kube-sim) with our CRDs and CAPI shims installed,
//! pve-sim's three built-in clusters over real HTTPS, credentials Secrets,
//! and builders for CAPI Clusters, ProxmoxClusters and ProxmoxMachines.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capmox_controller::api::{
    ApiEndpoint, ClusterMode, ClusterSettings, InstanceSpec, ProxmoxCluster, ProxmoxClusterSpec,
    ProxmoxMachine, ProxmoxMachineSpec, SecretRef,
};
use capmox_controller::capi::core::{Cluster, ClusterSpec, ContractRef, Machine};
use capmox_controller::capi::ipam::{IPAddress, IPAddressClaim, InClusterIPPool};
use capmox_controller::cluster::ClusterContext;
use capmox_controller::context::{ControllerOptions, Shared, ShutdownHandle};
use capmox_controller::metrics::Metrics;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::{Api, CustomResourceExt, Resource, ResourceExt};
use kube_sim::{KubeSim, KubeSimOptions};
use pve_sim::{AclEntry, SimConfig, Simulator, TokenConfig};

/// Namespace of the test objects.
pub const NS: &str = "wl";
/// Token of dc-b that lacks `Sys.Audit` (403 on `/cluster/status`).
pub const WEAK_TOKEN: &str = "capmox@pve!weak";
/// Its secret.
pub const WEAK_SECRET: &str = "0c0ffee0-0000-4000-8000-00000000beef";

/// One test's world.
pub struct Env {
    pub kube_sim: KubeSim,
    pub kube: kube::Client,
    pub pve: Simulator,
    /// Shutdown handles of the contexts made by [`Env::context`]: their
    /// watches run as long as the world.
    handles: std::sync::Mutex<Vec<ShutdownHandle>>,
}

fn crd_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases")
}

/// pve-sim's built-in three clusters (dc-a 4 nodes, dc-b 3, dc-c 3; each a
/// template 9000/9100/9200 tagged `capmox;ubuntu-24.04`), fast timings, no
/// schema file (the probes use three read-only endpoints), plus a weak
/// token on dc-b.
pub fn sim_config() -> SimConfig {
    let mut cfg = SimConfig::builtin_default()
        .with_time_scale(0.001)
        .with_seed(7)
        .with_schema_path(None);
    if let Some(b) = cfg.cluster_mut("dc-b") {
        b.tokens.push(TokenConfig {
            id: WEAK_TOKEN.into(),
            secret: Some(pve_sim::Secret::new(WEAK_SECRET)),
            privsep: true,
            expire: 0,
            acl: vec![AclEntry {
                path: "/".into(),
                roles: vec![],
                privileges: vec!["VM.Audit".into()],
                propagate: true,
            }],
        });
    }
    cfg
}

impl Env {
    /// Starts kube-sim (our CRDs + CAPI shims) and pve-sim.
    pub async fn start() -> Env {
        Env::start_with(sim_config()).await
    }

    /// Starts kube-sim and pve-sim with `cfg`.
    pub async fn start_with(cfg: SimConfig) -> Env {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kube_sim = KubeSim::start(KubeSimOptions::default()).await.unwrap();
        kube_sim.install_crds_from_dir(&crd_dir()).unwrap();
        for crd in [
            Cluster::crd(),
            Machine::crd(),
            InClusterIPPool::crd(),
            IPAddressClaim::crd(),
            IPAddress::crd(),
        ] {
            kube_sim
                .install_crd_yaml(&serde_json::to_string(&crd).unwrap())
                .unwrap();
        }
        let kube = kube_sim.client().await.unwrap();
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(NS.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        Api::<Namespace>::all(kube.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let pve = Simulator::start(cfg).await.unwrap();
        Env {
            kube_sim,
            kube,
            pve,
            handles: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Shared controller state with test-friendly options.
    pub fn shared(&self, options: ControllerOptions) -> (Arc<Shared>, ShutdownHandle) {
        let (s, h) = Shared::new(
            self.kube.clone(),
            options,
            Arc::new(Metrics::new()),
            Reporter {
                controller: "capmox-controller".into(),
                instance: Some("test".into()),
            },
            None,
        );
        (Arc::new(s), h)
    }

    /// A reconcile context; `probe_period` tiny makes every reconcile probe again.
    pub fn context(&self, probe_period: Duration) -> Arc<ClusterContext> {
        self.context_with(options(probe_period))
    }

    /// A reconcile context with `options`.
    pub fn context_with(&self, options: ControllerOptions) -> Arc<ClusterContext> {
        let (shared, handle) = self.shared(options);
        let stores = super::watched_stores(&shared);
        self.handles
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(handle);
        Arc::new(ClusterContext::new(shared, stores))
    }

    /// Credentials key/values of a simulated cluster (url, token, secret, root_ca).
    pub fn credentials(&self, dc: &str) -> BTreeMap<String, String> {
        let c = self.pve.cluster(dc).unwrap();
        BTreeMap::from([
            ("url".to_string(), c.url()),
            ("token".to_string(), c.token_id()),
            ("secret".to_string(), c.token_secret()),
            ("root_ca".to_string(), c.ca_pem()),
        ])
    }

    /// Creates or replaces the Secret `name` with `data`.
    pub async fn put_secret(&self, name: &str, data: &BTreeMap<String, String>) {
        let api: Api<Secret> = Api::namespaced(self.kube.clone(), NS);
        let s = Secret {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(NS.into()),
                ..ObjectMeta::default()
            },
            data: Some(
                data.iter()
                    .map(|(k, v)| (k.clone(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        };
        match api.get_opt(name).await.unwrap() {
            Some(cur) => {
                let mut s = s;
                s.metadata.resource_version = cur.resource_version();
                api.replace(name, &PostParams::default(), &s).await.unwrap();
            }
            None => {
                api.create(&PostParams::default(), &s).await.unwrap();
            }
        }
    }

    /// Secrets `<dc>-credentials` for dc-a, dc-b, dc-c.
    pub async fn put_all_credentials(&self) {
        for dc in ["dc-a", "dc-b", "dc-c"] {
            self.put_secret(&format!("{dc}-credentials"), &self.credentials(dc))
                .await;
        }
    }

    /// Creates the CAPI Cluster `name` whose infrastructureRef names the
    /// ProxmoxCluster `name`, and that ProxmoxCluster (owned by the Cluster,
    /// labelled with its name). Returns the created ProxmoxCluster.
    pub async fn create_cluster(&self, name: &str, spec: ProxmoxClusterSpec) -> ProxmoxCluster {
        let clusters: Api<Cluster> = Api::namespaced(self.kube.clone(), NS);
        let mut c = Cluster::new(
            name,
            ClusterSpec {
                infrastructure_ref: Some(ContractRef {
                    api_group: "infrastructure.cluster.x-k8s.io".into(),
                    kind: "ProxmoxCluster".into(),
                    name: name.into(),
                }),
                ..ClusterSpec::default()
            },
        );
        c.metadata.namespace = Some(NS.into());
        let c = clusters.create(&PostParams::default(), &c).await.unwrap();
        let mut pc = ProxmoxCluster::new(name, spec);
        pc.metadata.namespace = Some(NS.into());
        pc.metadata.labels = Some(BTreeMap::from([(
            "cluster.x-k8s.io/cluster-name".to_string(),
            name.to_string(),
        )]));
        pc.metadata.owner_references = Some(vec![OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Cluster".into(),
            name: name.into(),
            uid: c.uid().unwrap(),
            controller: Some(false),
            block_owner_deletion: Some(true),
        }]);
        self.pcs()
            .create(&PostParams::default(), &pc)
            .await
            .unwrap()
    }

    /// ProxmoxClusters in [`NS`].
    pub fn pcs(&self) -> Api<ProxmoxCluster> {
        Api::namespaced(self.kube.clone(), NS)
    }

    /// ProxmoxMachines in [`NS`].
    pub fn machines(&self) -> Api<ProxmoxMachine> {
        Api::namespaced(self.kube.clone(), NS)
    }

    /// InClusterIPPools in [`NS`].
    pub fn pools(&self) -> Api<InClusterIPPool> {
        Api::namespaced(self.kube.clone(), NS)
    }

    /// The ProxmoxCluster as stored now.
    pub async fn get(&self, name: &str) -> ProxmoxCluster {
        self.pcs().get(name).await.unwrap()
    }

    /// Creates a ProxmoxMachine of cluster `cluster`, placed in `instance`.
    pub async fn create_machine(&self, cluster: &str, name: &str, instance: Option<&str>) {
        self.machines()
            .create(&PostParams::default(), &machine_of(cluster, name, instance))
            .await
            .unwrap();
    }

    /// Merge-patches the spec of the ProxmoxCluster `name`.
    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.pcs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({ "spec": spec })),
            )
            .await
            .unwrap();
    }

    /// Stops both servers.
    pub async fn stop(self) {
        self.pve.shutdown().await;
        self.kube_sim.shutdown().await;
    }
}

/// A ProxmoxMachine `name` in [`NS`] of CAPI cluster `cluster` (label),
/// placed in `instance`.
pub fn machine_of(cluster: &str, name: &str, instance: Option<&str>) -> ProxmoxMachine {
    let mut m = ProxmoxMachine::new(
        name,
        ProxmoxMachineSpec {
            instance: instance.map(str::to_string),
            ..ProxmoxMachineSpec::default()
        },
    );
    m.metadata.namespace = Some(NS.into());
    m.metadata.labels = Some(BTreeMap::from([(
        "cluster.x-k8s.io/cluster-name".to_string(),
        cluster.to_string(),
    )]));
    m
}

/// Options for reconcile-level tests (real time; `probe_period` chosen by the test).
pub fn options(probe_period: Duration) -> ControllerOptions {
    ControllerOptions {
        probe_period,
        unhealthy_retry: probe_period,
        probe_timeout: Duration::from_secs(10),
        pve_call_timeout: Duration::from_secs(10),
        backoff_base: Duration::from_millis(50),
        backoff_max: Duration::from_secs(1),
        wait_period: Duration::from_millis(200),
        ..ControllerOptions::default()
    }
}

/// An instance `name` with credentials `<name>-credentials`.
pub fn instance(name: &str) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        credentials_ref: SecretRef {
            name: format!("{name}-credentials"),
            namespace: None,
        },
        ..InstanceSpec::default()
    }
}

/// A spec in `mode` over `instances`, with an endpoint.
pub fn spec(mode: ClusterMode, instances: Vec<InstanceSpec>) -> ProxmoxClusterSpec {
    ProxmoxClusterSpec {
        control_plane_endpoint: Some(ApiEndpoint {
            host: "10.99.0.5".into(),
            port: 6443,
        }),
        settings: Some(ClusterSettings {
            mode: Some(mode),
            instances,
        }),
        ..ProxmoxClusterSpec::default()
    }
}

/// `(status, reason, message)` of condition `t`.
pub fn condition(pc: &ProxmoxCluster, t: &str) -> (String, String, String) {
    let c = pc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == t))
        .unwrap_or_else(|| panic!("{} has no {t} condition: {:?}", pc.name_any(), pc.status));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// Names of the failure domains.
pub fn failure_domains(pc: &ProxmoxCluster) -> Vec<String> {
    pc.status
        .as_ref()
        .map(|s| s.failure_domains.iter().map(|f| f.name.clone()).collect())
        .unwrap_or_default()
}

/// `(name, ready, machines, selected)` of `status.instances`.
pub fn instances(pc: &ProxmoxCluster) -> Vec<(String, bool, u32, bool)> {
    pc.status
        .as_ref()
        .map(|s| {
            s.instances
                .iter()
                .map(|i| {
                    (
                        i.name.clone(),
                        i.ready,
                        i.machines,
                        i.selected == Some(true),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The message of instance `name` in status.
pub fn instance_message(pc: &ProxmoxCluster, name: &str) -> String {
    pc.status
        .as_ref()
        .and_then(|s| s.instances.iter().find(|i| i.name == name))
        .and_then(|i| i.message.clone())
        .unwrap_or_default()
}

/// Whether `status.initialization.provisioned` is true.
pub fn provisioned(pc: &ProxmoxCluster) -> bool {
    pc.status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        == Some(true)
}

/// Waits (up to 10 s) until the reconciler's ProxmoxMachine store holds
/// exactly `names`: the store is filled by a watch, so a machine created or
/// deleted a moment ago may not be in it yet, and the reconciler counts
/// machines from the store (as it does in the manager, where the same watch
/// event wakes the cluster again).
pub async fn machines_seen(ctx: &ClusterContext, names: &[&str]) {
    let want: std::collections::BTreeSet<String> = names.iter().map(|n| n.to_string()).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let seen: std::collections::BTreeSet<String> = ctx
            .stores
            .machines
            .state()
            .iter()
            .map(|m| m.name_any())
            .collect();
        if seen == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the machine store holds {seen:?}, not {want:?}, after 10 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Runs one reconcile of `name` against the stored object.
pub async fn reconcile(env: &Env, ctx: &Arc<ClusterContext>, name: &str) -> ProxmoxCluster {
    let pc = env.get(name).await;
    capmox_controller::cluster::reconcile_once(&pc, ctx)
        .await
        .unwrap_or_else(|e| panic!("reconcile of {name} failed: {e}"));
    env.get(name).await
}

/// Total PVE calls across the three simulated clusters.
pub fn pve_calls(env: &Env) -> u64 {
    env.pve.clusters().iter().map(|c| c.calls().total).sum()
}

/// Resets the call counters of every simulated cluster.
pub fn reset_pve_calls(env: &Env) {
    for c in env.pve.clusters() {
        c.reset_calls();
    }
}

/// The owner references of an object, as `(kind, name, controller)`.
pub fn owners<K: Resource>(obj: &K) -> Vec<(String, String, bool)> {
    obj.meta()
        .owner_references
        .as_deref()
        .unwrap_or(&[])
        .iter()
        .map(|o| (o.kind.clone(), o.name.clone(), o.controller == Some(true)))
        .collect()
}
