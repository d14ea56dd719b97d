//! Test world for the ProxmoxMachine reconciler: kube-sim (our CRDs plus
//! shims of the CAPI Cluster/Machine and IPAM kinds) and pve-sim (the three
//! built-in clusters `dc-a`, `dc-b`, `dc-c`) over real HTTPS, the real
//! `PveClient`, and helpers that play the parts of CAPI core, the bootstrap
//! provider, the ProxmoxCluster reconciler's status and the in-cluster IPAM
//! provider (a tiny claim fulfiller).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use capmox_controller::api::common::{IpConfig, SecretRef, TemplateSelector, TemplateSource};
use capmox_controller::api::{
    ClusterMode, ClusterSettings, InstanceNetwork, InstanceSpec, InstanceStatus, IpPoolStatus,
    MatchPolicy, ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterStatus, ProxmoxMachine,
    ProxmoxMachineSpec,
};
use capmox_controller::capi::core::{Bootstrap, ClusterInitialization, ClusterStatus, ContractRef};
use capmox_controller::capi::ipam::{
    IPAddress, IPAddressClaim, InClusterIPPool, InClusterIpPoolSpec, IpAddressSpec, NameRef,
};
use capmox_controller::capi::{
    CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, Cluster, ClusterSpec, Machine, MachineSpec,
};
use capmox_controller::context::{ControllerOptions, Shared, ShutdownHandle};
use capmox_controller::machine::{
    Context, MachineOptions, MachineRuntime, reconcile::reconcile_once,
};
use capmox_controller::metrics::Metrics;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::events::Reporter;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Api, CustomResourceExt, Resource, ResourceExt};
use kube_sim::{KubeSim, KubeSimOptions};
use pve_sim::{SimCluster, SimConfig, Simulator};

/// Namespace of every test object.
pub const NS: &str = "default";
/// Time scale of the simulator and the controller: a 60 s clone takes 300 ms.
pub const SCALE: f64 = 0.005;
/// A bootstrap payload.
pub const USER_DATA: &str = "#cloud-config\nruncmd:\n- [sh, -c, 'echo hello']\n";

/// Everything a machine test needs.
pub struct World {
    pub kube: KubeSim,
    pub client: kube::Client,
    pub sim: Simulator,
    pub shared: Arc<Shared>,
    pub ctx: Arc<Context>,
    pub shutdown: ShutdownHandle,
}

/// Options of the world.
pub struct WorldOptions {
    pub sim: SimConfig,
    pub machine: MachineOptions,
    /// The controller's time scale (the simulator's is in `sim`).
    pub time_scale: f64,
}

impl Default for WorldOptions {
    fn default() -> Self {
        WorldOptions {
            sim: fast_sim(),
            machine: MachineOptions::default(),
            time_scale: SCALE,
        }
    }
}

/// The built-in three clusters with shorter clones and boots (20 simulated
/// seconds each) so tests stay short.
pub fn fast_sim() -> SimConfig {
    SimConfig::builtin_default()
        .with_time_scale(SCALE)
        .with_seed(7)
        .with_timings(|t| {
            t.clone_full = 20.0;
            t.boot = 20.0;
        })
}

fn crd_yaml<T: serde::Serialize>(crd: &T) -> String {
    serde_saphyr::to_string(crd).unwrap()
}

/// Starts both simulators and the machine controller's context.
pub async fn world() -> World {
    world_with(WorldOptions::default()).await
}

/// [`world`] with options.
pub async fn world_with(opts: WorldOptions) -> World {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = KubeSim::start(KubeSimOptions::default()).await.unwrap();
    for crd in capmox_controller::api::crd::all() {
        kube.install_crd_yaml(&capmox_controller::api::crd::to_yaml(&crd).unwrap())
            .unwrap();
    }
    for yaml in [
        crd_yaml(&Cluster::crd()),
        crd_yaml(&Machine::crd()),
        crd_yaml(&IPAddressClaim::crd()),
        crd_yaml(&IPAddress::crd()),
        crd_yaml(&InClusterIPPool::crd()),
    ] {
        kube.install_crd_yaml(&yaml).unwrap();
    }
    let client = kube.client().await.unwrap();
    let sim = Simulator::start(opts.sim).await.unwrap();
    let options = ControllerOptions {
        time_scale: opts.time_scale,
        ..ControllerOptions::default()
    };
    let (shared, shutdown) = Shared::new(
        client.clone(),
        options,
        Arc::new(Metrics::new()),
        Reporter {
            controller: "capmox-controller".into(),
            instance: None,
        },
        None,
    );
    let shared = Arc::new(shared);
    let runtime = Arc::new(MachineRuntime::new(&shared.options, opts.machine));
    let ctx = Arc::new(Context {
        shared: shared.clone(),
        runtime,
        stores: super::watched_stores(&shared),
    });
    World {
        kube,
        client,
        sim,
        shared,
        ctx,
        shutdown,
    }
}

/// A ProxmoxCluster instance entry for a simulated cluster: template by
/// selector `capmox` + `ubuntu-24.04` (exact), its own IPv4 pool.
pub fn instance(name: &str, subnet: u8) -> InstanceSpec {
    InstanceSpec {
        name: name.into(),
        credentials_ref: SecretRef {
            name: format!("{name}-credentials"),
            namespace: None,
        },
        template: Some(TemplateSource {
            source_node: None,
            template_id: None,
            template_selector: Some(TemplateSelector {
                match_tags: vec!["capmox".into(), "ubuntu-24.04".into()],
                match_policy: Some(MatchPolicy::Exact),
            }),
        }),
        network: Some(InstanceNetwork {
            ipv4_config: Some(IpConfig {
                addresses: vec![format!("10.{subnet}.0.20-10.{subnet}.0.60")],
                prefix: 24,
                gateway: Some(format!("10.{subnet}.0.1")),
                metric: None,
            }),
            dns_servers: vec![format!("10.{subnet}.0.53")],
            ..InstanceNetwork::default()
        }),
        ..InstanceSpec::default()
    }
}

/// A MultiInstance cluster spec over the given instances.
pub fn multi(instances: Vec<InstanceSpec>) -> ProxmoxClusterSpec {
    ProxmoxClusterSpec {
        control_plane_endpoint: Some(capmox_controller::api::ApiEndpoint {
            host: "10.99.0.10".into(),
            port: 6443,
        }),
        settings: Some(ClusterSettings {
            mode: Some(ClusterMode::MultiInstance),
            instances,
        }),
        ..ProxmoxClusterSpec::default()
    }
}

fn meta(name: &str, labels: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(NS.into()),
        labels: Some(
            labels
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

impl World {
    /// The simulated cluster `name`.
    pub fn pve(&self, name: &str) -> &SimCluster {
        self.sim.cluster(name).unwrap()
    }

    pub fn machines(&self) -> Api<ProxmoxMachine> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn claims(&self) -> Api<IPAddressClaim> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn addresses(&self) -> Api<IPAddress> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn runtime(&self) -> &MachineRuntime {
        &self.ctx.runtime
    }

    /// The credentials Secret of instance `name` pointing at `pve`.
    pub async fn credentials(&self, name: &str, pve: &str) {
        let c = self.pve(pve);
        let data: BTreeMap<String, ByteString> = [
            ("url", c.url()),
            ("token", c.token_id()),
            ("secret", c.token_secret()),
            ("root_ca", c.ca_pem()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.into_bytes())))
        .collect();
        let s = Secret {
            metadata: meta(&format!("{name}-credentials"), &[]),
            data: Some(data),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &s)
            .await
            .unwrap();
    }

    /// Creates the CAPI Cluster `name` (infrastructure provisioned), its
    /// ProxmoxCluster with `spec`, credentials for every instance (instance
    /// name = simulated cluster name unless mapped), the IPv4 pools, and the
    /// ProxmoxCluster status a healthy cluster reconciler would write.
    pub async fn cluster(&self, name: &str, spec: ProxmoxClusterSpec) -> ProxmoxCluster {
        self.cluster_mapped(name, spec, &[]).await
    }

    /// [`World::cluster`] with instance → simulated cluster mapping.
    pub async fn cluster_mapped(
        &self,
        name: &str,
        spec: ProxmoxClusterSpec,
        map: &[(&str, &str)],
    ) -> ProxmoxCluster {
        let clusters: Api<Cluster> = Api::namespaced(self.client.clone(), NS);
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
        clusters.create(&PostParams::default(), &c).await.unwrap();
        let status = ClusterStatus {
            initialization: Some(ClusterInitialization {
                infrastructure_provisioned: Some(true),
                control_plane_initialized: Some(true),
            }),
        };
        clusters
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(serde_json::json!({ "status": status })),
            )
            .await
            .unwrap();

        let pcs: Api<ProxmoxCluster> = Api::namespaced(self.client.clone(), NS);
        let mut pc = ProxmoxCluster::new(name, spec.clone());
        pc.metadata.namespace = Some(NS.into());
        pc.metadata.labels = Some([(CLUSTER_NAME_LABEL.to_string(), name.to_string())].into());
        pcs.create(&PostParams::default(), &pc).await.unwrap();

        let mut instances = Vec::new();
        let mut pools = Vec::new();
        let pools_api: Api<InClusterIPPool> = Api::namespaced(self.client.clone(), NS);
        for (i, inst) in spec.instances().iter().enumerate() {
            let pve = map
                .iter()
                .find(|(a, _)| *a == inst.name)
                .map(|(_, b)| *b)
                .unwrap_or(inst.name.as_str());
            self.credentials(&inst.name, pve).await;
            instances.push(InstanceStatus {
                name: inst.name.clone(),
                ready: true,
                machines: 0,
                nodes: vec![],
                version: Some("9.1.9".into()),
                message: None,
                selected: (spec.mode() == ClusterMode::SingleInstance && i == 0).then_some(true),
                missing_privileges: Vec::new(),
                pool_problem: None,
            });
            for (family, cfg) in [
                (
                    "ipv4",
                    inst.network.as_ref().and_then(|n| n.ipv4_config.as_ref()),
                ),
                (
                    "ipv6",
                    inst.network.as_ref().and_then(|n| n.ipv6_config.as_ref()),
                ),
            ] {
                let Some(cfg) = cfg else { continue };
                let pool_name = format!("{name}-{}-{family}", inst.name);
                let mut p = InClusterIPPool::new(
                    &pool_name,
                    InClusterIpPoolSpec {
                        addresses: cfg.addresses.clone(),
                        prefix: i32::from(cfg.prefix),
                        gateway: cfg.gateway.clone(),
                        excluded_addresses: vec![],
                        allocate_reserved_ip_addresses: None,
                    },
                );
                p.metadata.namespace = Some(NS.into());
                pools_api.create(&PostParams::default(), &p).await.unwrap();
                pools.push(IpPoolStatus {
                    instance: Some(inst.name.clone()),
                    family: family.into(),
                    api_group: "ipam.cluster.x-k8s.io".into(),
                    kind: "InClusterIPPool".into(),
                    name: pool_name,
                });
            }
        }
        let status = ProxmoxClusterStatus {
            instances,
            ip_pools: pools,
            ..ProxmoxClusterStatus::default()
        };
        self.set_cluster_status(name, &status).await;
        pcs.get(name).await.unwrap()
    }

    /// Writes a ProxmoxCluster's status (as the cluster reconciler would).
    pub async fn set_cluster_status(&self, name: &str, status: &ProxmoxClusterStatus) {
        let pcs: Api<ProxmoxCluster> = Api::namespaced(self.client.clone(), NS);
        pcs.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .unwrap();
    }

    /// Marks instance `inst` of cluster `name` (un)healthy in status.
    pub async fn set_instance_ready(&self, name: &str, inst: &str, ready: bool) {
        let pcs: Api<ProxmoxCluster> = Api::namespaced(self.client.clone(), NS);
        let mut st = pcs.get(name).await.unwrap().status.unwrap_or_default();
        for i in &mut st.instances {
            if i.name == inst {
                i.ready = ready;
                i.message = (!ready).then(|| "401 authentication failure".to_string());
            }
        }
        self.set_cluster_status(name, &st).await;
    }

    /// Creates a Machine (owner), its bootstrap Secret and the ProxmoxMachine.
    pub async fn machine(
        &self,
        cluster: &str,
        name: &str,
        spec: ProxmoxMachineSpec,
    ) -> ProxmoxMachine {
        self.machine_with(cluster, name, spec, None, false, true)
            .await
    }

    /// [`World::machine`] with a failure domain, control-plane label and
    /// whether the bootstrap Secret exists yet.
    pub async fn machine_with(
        &self,
        cluster: &str,
        name: &str,
        spec: ProxmoxMachineSpec,
        failure_domain: Option<&str>,
        control_plane: bool,
        bootstrap: bool,
    ) -> ProxmoxMachine {
        let machines: Api<Machine> = Api::namespaced(self.client.clone(), NS);
        let mut labels = vec![(CLUSTER_NAME_LABEL, cluster)];
        if control_plane {
            labels.push((CONTROL_PLANE_LABEL, ""));
        }
        let m = Machine {
            metadata: meta(name, &labels),
            spec: MachineSpec {
                cluster_name: cluster.into(),
                bootstrap: Bootstrap {
                    data_secret_name: Some(format!("{name}-bootstrap")),
                },
                infrastructure_ref: Some(ContractRef {
                    api_group: "infrastructure.cluster.x-k8s.io".into(),
                    kind: "ProxmoxMachine".into(),
                    name: name.into(),
                }),
                failure_domain: failure_domain.map(str::to_string),
                version: Some("v1.33.1".into()),
            },
            status: None,
        };
        let m = machines.create(&PostParams::default(), &m).await.unwrap();
        if bootstrap {
            self.bootstrap_secret(cluster, name).await;
        }
        let owner = OwnerReference {
            api_version: "cluster.x-k8s.io/v1beta2".into(),
            kind: "Machine".into(),
            name: name.into(),
            uid: m.uid().unwrap(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let mut pm = ProxmoxMachine::new(name, spec);
        pm.metadata = meta(name, &[(CLUSTER_NAME_LABEL, cluster)]);
        pm.metadata.owner_references = Some(vec![owner]);
        self.machines()
            .create(&PostParams::default(), &pm)
            .await
            .unwrap()
    }

    /// The bootstrap data Secret of machine `name` ([`USER_DATA`], `cloud-config`).
    pub async fn bootstrap_secret(&self, cluster: &str, name: &str) {
        self.bootstrap_secret_with(cluster, name, USER_DATA, Some("cloud-config"))
            .await;
    }

    /// The bootstrap data Secret of machine `name` with `value` and, when
    /// given, `format`.
    pub async fn bootstrap_secret_with(
        &self,
        cluster: &str,
        name: &str,
        value: &str,
        format: Option<&str>,
    ) {
        let mut data =
            BTreeMap::from([("value".to_string(), ByteString(value.as_bytes().to_vec()))]);
        if let Some(f) = format {
            data.insert("format".to_string(), ByteString(f.as_bytes().to_vec()));
        }
        let s = Secret {
            metadata: meta(
                &format!("{name}-bootstrap"),
                &[(CLUSTER_NAME_LABEL, cluster)],
            ),
            data: Some(data),
            ..Secret::default()
        };
        Api::<Secret>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &s)
            .await
            .unwrap();
    }

    /// Waits until the controller's stores hold every Cluster,
    /// ProxmoxCluster, Machine and cluster-labelled Secret at the version
    /// the API server has. The controller reconciles on watch events, so
    /// its stores are current when it runs; a test that calls
    /// [`reconcile_once`] itself right after writing must wait for them
    /// first, or the reconcile sees an older world (on a loaded machine,
    /// one without the ProxmoxCluster's status) and rightly waits.
    ///
    /// # Panics
    /// When the stores have not caught up after 10 s.
    pub async fn settled(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let st = &self.ctx.stores;
            let labelled = ListParams::default().labels(CLUSTER_NAME_LABEL);
            if current(&self.api::<Cluster>(), &st.clusters, &ListParams::default()).await
                && current(
                    &self.api::<ProxmoxCluster>(),
                    &st.proxmox_clusters,
                    &ListParams::default(),
                )
                .await
                && current(&self.api::<Machine>(), &st.owners, &ListParams::default()).await
                && current(&self.api::<Secret>(), &st.secrets, &labelled).await
            {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the controller's stores did not catch up in 10 s: {st:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), NS)
    }

    pub async fn get(&self, name: &str) -> Option<ProxmoxMachine> {
        self.machines().get_opt(name).await.unwrap()
    }

    /// One reconcile of machine `name` (as the controller would run it);
    /// `None` when the object is gone.
    pub async fn reconcile(
        &self,
        name: &str,
    ) -> Option<Result<Option<Duration>, capmox_controller::error::Error>> {
        self.settled().await;
        let pm = self.get(name).await?;
        Some(reconcile_once(Arc::new(pm), self.ctx.clone()).await)
    }

    /// A context with a fresh runtime: what a restarted controller process
    /// knows (nothing but the cluster state).
    pub fn restarted(&self) -> Arc<Context> {
        Arc::new(Context {
            shared: self.shared.clone(),
            runtime: Arc::new(MachineRuntime::new(
                &self.shared.options,
                MachineOptions::default(),
            )),
            stores: self.ctx.stores.clone(),
        })
    }

    /// Reconciles `name` (fulfilling claims in between, sleeping as the
    /// reconcile asks) until `done` holds or `max` reconciles ran; returns
    /// the last observed object (`None` when it is gone).
    pub async fn drive(
        &self,
        name: &str,
        max: usize,
        done: impl Fn(Option<&ProxmoxMachine>) -> bool,
    ) -> Option<ProxmoxMachine> {
        self.drive_inner(name, max, done, false).await
    }

    /// [`World::drive`] restarting the controller (fresh memory) before
    /// every reconcile: a crash between any two reconciles.
    pub async fn drive_restarting(
        &self,
        name: &str,
        max: usize,
        done: impl Fn(Option<&ProxmoxMachine>) -> bool,
    ) -> Option<ProxmoxMachine> {
        self.drive_inner(name, max, done, true).await
    }

    async fn drive_inner(
        &self,
        name: &str,
        max: usize,
        done: impl Fn(Option<&ProxmoxMachine>) -> bool,
        restart: bool,
    ) -> Option<ProxmoxMachine> {
        for _ in 0..max {
            self.fulfil_claims().await;
            let pm = self.get(name).await;
            if done(pm.as_ref()) {
                return pm;
            }
            let result = match pm {
                None => None,
                Some(pm) => {
                    let ctx = if restart {
                        self.restarted()
                    } else {
                        self.ctx.clone()
                    };
                    Some(reconcile_once(Arc::new(pm), ctx).await)
                }
            };
            let delay = match result {
                None => Duration::from_millis(1),
                Some(Ok(Some(d))) => d,
                Some(Ok(None)) => Duration::from_millis(20),
                Some(Err(e)) => {
                    eprintln!("reconcile of {name} failed: {e}");
                    Duration::from_millis(50)
                }
            };
            tokio::time::sleep(delay.min(Duration::from_millis(400))).await;
        }
        let pm = self.get(name).await;
        assert!(
            done(pm.as_ref()),
            "{name} did not get there in {max} reconciles: {:#?}",
            pm.map(|p| p.status)
        );
        pm
    }

    /// Drives until provisioned and the bootstrap ISO's deletion task ended.
    pub async fn provision(&self, name: &str) -> ProxmoxMachine {
        self.drive(name, 200, |m| {
            provisioned(m)
                && m.and_then(|m| m.status.as_ref())
                    .is_some_and(|s| s.task_ref.is_none())
        })
        .await
        .unwrap()
    }

    /// Deletes machine `name` and drives until it is gone.
    pub async fn delete_and_drive(&self, name: &str) {
        self.machines()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        self.drive(name, 200, |m| m.is_none()).await;
    }

    /// The in-cluster IPAM provider's part, in miniature: every claim
    /// without an address gets the lowest free address of its
    /// `InClusterIPPool` (an `IPAddress` named after the claim, owned by it)
    /// and `status.addressRef`. Claims whose pool is exhausted get a
    /// `Ready=False, reason=PoolExhausted` condition.
    pub async fn fulfil_claims(&self) {
        fulfil_claims(&self.client).await;
    }

    /// Runs [`World::fulfil_claims`] in the background every 10 ms (for
    /// tests that run the controller itself).
    pub fn spawn_fulfiller(&self) -> tokio::task::JoinHandle<()> {
        let client = self.client.clone();
        tokio::spawn(async move {
            loop {
                fulfil_claims(&client).await;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    }
}

/// Whether `store` holds every object `api` lists (with `lp`) at the
/// listed `resourceVersion`; `false` when the list fails.
async fn current<K>(api: &Api<K>, store: &Store<K>, lp: &ListParams) -> bool
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let Ok(list) = api.list(lp).await else {
        return false;
    };
    list.items.iter().all(|o| {
        store
            .get(&ObjectRef::from_obj(o))
            .is_some_and(|s| s.resource_version() == o.resource_version())
    })
}

/// See [`World::fulfil_claims`].
pub async fn fulfil_claims(client: &kube::Client) {
    let claims_api: Api<IPAddressClaim> = Api::namespaced(client.clone(), NS);
    let addresses_api: Api<IPAddress> = Api::namespaced(client.clone(), NS);
    {
        let pools: Api<InClusterIPPool> = Api::namespaced(client.clone(), NS);
        let Ok(claims) = claims_api.list(&ListParams::default()).await else {
            return;
        };
        let Ok(addresses) = addresses_api.list(&ListParams::default()).await else {
            return;
        };
        let claims = claims.items;
        let addresses = addresses.items;
        let mut used: BTreeMap<String, BTreeSet<IpAddr>> = BTreeMap::new();
        for a in &addresses {
            used.entry(a.spec.pool_ref.name.clone())
                .or_default()
                .insert(a.spec.address.parse().unwrap());
        }
        for c in claims {
            if c.metadata.deletion_timestamp.is_some()
                || c.status
                    .as_ref()
                    .and_then(|s| s.address_ref.as_ref())
                    .is_some()
                || c.spec.pool_ref.kind != "InClusterIPPool"
            {
                continue;
            }
            let Ok(Some(pool)) = pools.get_opt(&c.spec.pool_ref.name).await else {
                continue;
            };
            let spec = ipam::PoolSpec {
                addresses: pool.spec.addresses.clone(),
                prefix: i64::from(pool.spec.prefix),
                gateway: pool.spec.gateway.clone(),
                ..ipam::PoolSpec::default()
            };
            let p = ipam::Pool::parse(&pool.name_any(), &spec).unwrap();
            let in_use = used.entry(pool.name_any()).or_default();
            let name = c.name_any();
            match p.first_free(in_use) {
                Ok(addr) => {
                    in_use.insert(addr);
                    let mut a = IPAddress::new(
                        &name,
                        IpAddressSpec {
                            claim_ref: NameRef { name: name.clone() },
                            pool_ref: c.spec.pool_ref.clone(),
                            address: addr.to_string(),
                            prefix: Some(pool.spec.prefix),
                            gateway: pool.spec.gateway.clone(),
                        },
                    );
                    a.metadata.namespace = Some(NS.into());
                    let mut owner = c.controller_owner_ref(&()).unwrap();
                    owner.block_owner_deletion = Some(true);
                    a.metadata.owner_references = Some(vec![owner]);
                    if addresses_api
                        .create(&PostParams::default(), &a)
                        .await
                        .is_err()
                    {
                        continue;
                    }
                    let _ = claims_api
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(serde_json::json!({ "status": { "addressRef": { "name": name }, "conditions": [] } })),
                        )
                        .await;
                }
                Err(_) => {
                    let cond = serde_json::json!({
                        "type": "Ready", "status": "False", "reason": "PoolExhausted",
                        "message": format!("pool {} has no free address", pool.name_any()),
                        "lastTransitionTime": "2026-01-01T00:00:00Z"
                    });
                    let _ = claims_api
                        .patch_status(
                            &name,
                            &PatchParams::default(),
                            &Patch::Merge(
                                serde_json::json!({ "status": { "conditions": [cond] } }),
                            ),
                        )
                        .await;
                }
            }
        }
    }
}

impl World {
    /// VMs of a simulated cluster that are not templates.
    pub fn vms(&self, pve: &str) -> Vec<pve_sim::VmSnapshot> {
        self.pve(pve)
            .vms()
            .into_iter()
            .filter(|v| !v.template)
            .collect()
    }

    /// ISO volumes on a simulated cluster's shared ISO storage.
    pub fn isos(&self, pve: &str) -> Vec<String> {
        let c = self.pve(pve);
        let node = c.nodes()[0].name.clone();
        c.storage_content(&node, "cephfs")
            .into_iter()
            .filter(|v| v.content == "iso")
            .map(|v| v.volid)
            .collect()
    }
}

/// Whether the machine is provisioned.
pub fn provisioned(m: Option<&ProxmoxMachine>) -> bool {
    m.and_then(|m| m.status.as_ref())
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false)
}

/// The condition `type_` of a machine: `(status, reason, message)`.
pub fn condition(m: &ProxmoxMachine, type_: &str) -> Option<(String, String, String)> {
    m.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// A failed step's message without its retry suffix (`; attempt N failed;
/// next attempt at T`); panics when the suffix is missing.
pub fn without_retry(message: &str) -> &str {
    let (head, tail) = message
        .rsplit_once("; attempt ")
        .unwrap_or_else(|| panic!("no retry in {message:?}"));
    assert!(
        tail.contains(" failed; next attempt at "),
        "retry suffix: {tail:?}"
    );
    head
}

/// The reason of `VirtualMachineProvisioned`.
pub fn vm_reason(m: Option<&ProxmoxMachine>) -> String {
    m.and_then(|m| condition(m, "VirtualMachineProvisioned"))
        .map(|c| c.1)
        .unwrap_or_default()
}
