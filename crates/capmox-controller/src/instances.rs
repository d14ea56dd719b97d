//! The effective instances of a ProxmoxCluster and what each resolves to.
//!
//! - `settings.instances` when listed; else, in legacy `Default` mode, one
//!   implicit instance named [`crate::DEFAULT_INSTANCE_NAME`] built from
//!   `spec.credentialsRef`, `spec.allowedNodes` and the cluster-level network
//!   (multi-instance proposal, "Modes").
//! - Per-instance resolution, field by field: the instance's override ▸ the
//!   cluster's value (network `ipv4Config`, `ipv6Config`, `dnsServers`;
//!   `schedulerHints.memoryAdjustment`, default 100).
//! - Which instances are *in use* per mode, and which IP pool an instance's
//!   machines claim from.
//!
//! IP pools: an instance with its own `network.ipv4Config` / `ipv6Config`
//! gets its own pool `<proxmoxcluster>-<instance>-ipv4` / `-ipv6`; instances
//! without one share the cluster-wide pool `<proxmoxcluster>-ipv4` / `-ipv6`
//! built from the cluster-level config (recorded in `status.ipPools` without
//! an `instance`). Sharing is required for correctness: one pool per instance
//! from the same cluster-level addresses would hand the same address to
//! machines in two instances (validation treats the cluster pool as used by
//! every instance without its own).

use crate::api::{
    ClusterMode, InstanceSpec, IpConfig, IpPoolStatus, ProxmoxCluster, ProxmoxClusterSpec,
    SchedulerHints,
};

/// Default `schedulerHints.memoryAdjustment` (percent): memory counted exactly.
pub const DEFAULT_MEMORY_ADJUSTMENT: u32 = 100;

/// An IP family of a node address pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl IpFamily {
    /// `ipv4` / `ipv6`, as in pool names and `status.ipPools[].family`.
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::V4 => "ipv4",
            IpFamily::V6 => "ipv6",
        }
    }

    /// Both families, v4 first.
    pub const ALL: [IpFamily; 2] = [IpFamily::V4, IpFamily::V6];
}

/// Where an instance's pool of one family comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PoolSource {
    /// The instance's own `network.ipv4Config` / `ipv6Config`.
    Instance(IpConfig),
    /// The cluster-level `spec.ipv4Config` / `ipv6Config`, shared by every
    /// instance without its own.
    Cluster(IpConfig),
}

impl PoolSource {
    /// The pool configuration.
    pub fn config(&self) -> &IpConfig {
        match self {
            PoolSource::Instance(c) | PoolSource::Cluster(c) => c,
        }
    }
}

/// The network of one instance after resolution (instance ▸ cluster).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedNetwork {
    /// IPv4 node pool, if any.
    pub ipv4: Option<PoolSource>,
    /// IPv6 node pool, if any.
    pub ipv6: Option<PoolSource>,
    /// Name servers (instance's when non-empty, else the cluster's).
    pub dns_servers: Vec<String>,
    /// Default bridge for `net0` in this instance, if the instance sets one.
    pub bridge: Option<String>,
}

impl ResolvedNetwork {
    /// The pool source of `family`.
    pub fn pool(&self, family: IpFamily) -> Option<&PoolSource> {
        match family {
            IpFamily::V4 => self.ipv4.as_ref(),
            IpFamily::V6 => self.ipv6.as_ref(),
        }
    }
}

/// One instance as the reconcilers use it.
#[derive(Clone, Debug, PartialEq)]
pub struct EffectiveInstance {
    /// The instance. For the implicit `default` instance: `name = "default"`,
    /// `credentialsRef` = `spec.credentialsRef` (empty name when the manager's
    /// default credentials apply, see `manager_credentials`), `nodes` =
    /// `spec.allowedNodes`, no template, no VMID range, `controlPlane` true.
    pub spec: InstanceSpec,
    /// True for the implicit instance of legacy `Default` mode when the
    /// cluster has no `spec.credentialsRef`: the manager-level default
    /// credentials Secret is used (and only then).
    pub manager_credentials: bool,
    /// True when this is the implicit instance (no `settings.instances`).
    pub implicit: bool,
    /// Resolved network.
    pub network: ResolvedNetwork,
    /// Resolved scheduler hints (`memoryAdjustment` always set).
    pub scheduler_hints: SchedulerHints,
}

impl EffectiveInstance {
    /// Instance name (= failure-domain name).
    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

/// The effective instances, in list order: `settings.instances`, or the one
/// implicit `default` instance when none are listed.
pub fn effective_instances(cluster: &ProxmoxClusterSpec) -> Vec<EffectiveInstance> {
    let listed = cluster.instances();
    if listed.is_empty() {
        let spec = InstanceSpec {
            name: crate::DEFAULT_INSTANCE_NAME.to_string(),
            credentials_ref: cluster.credentials_ref.clone().unwrap_or_default(),
            nodes: cluster.allowed_nodes.clone(),
            ..InstanceSpec::default()
        };
        return vec![EffectiveInstance {
            network: resolve_network(cluster, None),
            scheduler_hints: resolve_hints(cluster, None),
            manager_credentials: cluster.credentials_ref.is_none(),
            implicit: true,
            spec,
        }];
    }
    listed.iter().map(|i| listed_instance(cluster, i)).collect()
}

/// The effective instance of `i`, an instance `cluster` lists.
fn listed_instance(cluster: &ProxmoxClusterSpec, i: &InstanceSpec) -> EffectiveInstance {
    EffectiveInstance {
        spec: i.clone(),
        manager_credentials: false,
        implicit: false,
        network: resolve_network(cluster, Some(i)),
        scheduler_hints: resolve_hints(cluster, Some(i)),
    }
}

/// The effective instance named `name` (the first of that name, as in
/// [`effective_instances`]); only that one is built, not every instance
/// of the cluster (each reconcile asks).
pub fn effective_instance(cluster: &ProxmoxClusterSpec, name: &str) -> Option<EffectiveInstance> {
    let listed = cluster.instances();
    if listed.is_empty() {
        return effective_instances(cluster)
            .into_iter()
            .find(|i| i.spec.name == name);
    }
    listed
        .iter()
        .find(|i| i.name == name)
        .map(|i| listed_instance(cluster, i))
}

fn resolve_network(cluster: &ProxmoxClusterSpec, inst: Option<&InstanceSpec>) -> ResolvedNetwork {
    let net = inst.and_then(|i| i.network.as_ref());
    let pick = |own: Option<&IpConfig>, shared: Option<&IpConfig>| match (own, shared) {
        (Some(c), _) => Some(PoolSource::Instance(c.clone())),
        (None, Some(c)) => Some(PoolSource::Cluster(c.clone())),
        (None, None) => None,
    };
    ResolvedNetwork {
        ipv4: pick(
            net.and_then(|n| n.ipv4_config.as_ref()),
            cluster.ipv4_config.as_ref(),
        ),
        ipv6: pick(
            net.and_then(|n| n.ipv6_config.as_ref()),
            cluster.ipv6_config.as_ref(),
        ),
        dns_servers: match net {
            Some(n) if !n.dns_servers.is_empty() => n.dns_servers.clone(),
            _ => cluster.dns_servers.clone(),
        },
        bridge: net.and_then(|n| n.bridge.clone()),
    }
}

fn resolve_hints(cluster: &ProxmoxClusterSpec, inst: Option<&InstanceSpec>) -> SchedulerHints {
    let adj = inst
        .and_then(|i| i.scheduler_hints)
        .and_then(|h| h.memory_adjustment)
        .or_else(|| cluster.scheduler_hints.and_then(|h| h.memory_adjustment))
        .unwrap_or(DEFAULT_MEMORY_ADJUSTMENT);
    SchedulerHints {
        memory_adjustment: Some(adj),
    }
}

/// The instance the SingleInstance choice recorded in
/// `status.instances[].selected`, if any.
pub fn selected_instance(cluster: &ProxmoxCluster) -> Option<&str> {
    cluster
        .status
        .as_ref()?
        .instances
        .iter()
        .find(|i| i.selected == Some(true))
        .map(|i| i.name.as_str())
}

/// The instances machines of this cluster may be placed in, by mode:
/// `Default` → the first effective instance; `SingleInstance` → the one
/// recorded as selected in status (empty until the cluster reconciler chose);
/// `MultiInstance` → all listed instances (healthy or not: health is in
/// `status.instances[].ready`).
pub fn instances_in_use(cluster: &ProxmoxCluster) -> Vec<String> {
    let all = effective_instances(&cluster.spec);
    match cluster.spec.mode() {
        ClusterMode::Default => all
            .first()
            .map(|i| i.spec.name.clone())
            .into_iter()
            .collect(),
        ClusterMode::SingleInstance => selected_instance(cluster)
            .filter(|s| all.iter().any(|i| i.spec.name == *s))
            .map(str::to_string)
            .into_iter()
            .collect(),
        ClusterMode::MultiInstance => all.into_iter().map(|i| i.spec.name).collect(),
    }
}

/// Whether `status.instances[]` marks `instance` ready.
pub fn instance_ready(cluster: &ProxmoxCluster, instance: &str) -> bool {
    cluster
        .status
        .as_ref()
        .is_some_and(|s| s.instances.iter().any(|i| i.name == instance && i.ready))
}

/// The pool machines of `instance` claim `family` addresses from, as recorded
/// by the cluster reconciler in `status.ipPools`: the instance's own pool if
/// recorded, else the cluster-wide one (entry without `instance`) — but only
/// when the instance has no config of its own (otherwise its pool is not
/// created yet and `None` is returned, so no address comes from the wrong
/// subnet).
pub fn ip_pool_for<'a>(
    cluster: &'a ProxmoxCluster,
    instance: &str,
    family: IpFamily,
) -> Option<&'a IpPoolStatus> {
    let pools = &cluster.status.as_ref()?.ip_pools;
    let own = effective_instance(&cluster.spec, instance)?;
    match own.network.pool(family)? {
        PoolSource::Instance(_) => pools
            .iter()
            .find(|p| p.family == family.as_str() && p.instance.as_deref() == Some(instance)),
        PoolSource::Cluster(_) => pools
            .iter()
            .find(|p| p.family == family.as_str() && p.instance.is_none()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{
        ClusterSettings, InstanceNetwork, InstanceStatus, ProxmoxClusterStatus, SecretRef,
    };

    fn ipc(addr: &str) -> IpConfig {
        IpConfig {
            addresses: vec![addr.into()],
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
            metric: None,
        }
    }

    fn inst(name: &str) -> InstanceSpec {
        InstanceSpec {
            name: name.into(),
            credentials_ref: SecretRef {
                name: format!("{name}-credentials"),
                namespace: None,
            },
            ..InstanceSpec::default()
        }
    }

    fn spec(mode: ClusterMode, instances: Vec<InstanceSpec>) -> ProxmoxClusterSpec {
        ProxmoxClusterSpec {
            settings: Some(ClusterSettings {
                mode: Some(mode),
                instances,
            }),
            ..ProxmoxClusterSpec::default()
        }
    }

    #[test]
    fn implicit_default_instance() {
        let s = ProxmoxClusterSpec {
            credentials_ref: Some(SecretRef {
                name: "pve".into(),
                namespace: Some("capi".into()),
            }),
            allowed_nodes: vec!["pve1".into()],
            ipv4_config: Some(ipc("10.0.0.10-10.0.0.20")),
            dns_servers: vec!["10.0.0.2".into()],
            scheduler_hints: Some(SchedulerHints {
                memory_adjustment: Some(150),
            }),
            ..ProxmoxClusterSpec::default()
        };
        let all = effective_instances(&s);
        assert_eq!(all.len(), 1);
        let d = &all[0];
        assert_eq!(d.name(), "default");
        assert!(d.implicit);
        assert!(!d.manager_credentials);
        assert_eq!(d.spec.credentials_ref.name, "pve");
        assert_eq!(d.spec.credentials_ref.namespace.as_deref(), Some("capi"));
        assert_eq!(d.spec.nodes, vec!["pve1".to_string()]);
        assert!(d.spec.is_control_plane());
        assert_eq!(
            d.network.ipv4,
            Some(PoolSource::Cluster(ipc("10.0.0.10-10.0.0.20")))
        );
        assert_eq!(d.network.ipv6, None);
        assert_eq!(d.network.dns_servers, vec!["10.0.0.2".to_string()]);
        assert_eq!(d.scheduler_hints.memory_adjustment, Some(150));
        // No credentialsRef: the manager's default credentials apply.
        let bare = effective_instances(&ProxmoxClusterSpec::default());
        assert!(bare[0].manager_credentials);
        assert_eq!(bare[0].scheduler_hints.memory_adjustment, Some(100));
    }

    #[test]
    fn instance_overrides_win_field_by_field() {
        let mut a = inst("dc-a");
        a.network = Some(InstanceNetwork {
            ipv4_config: Some(ipc("10.1.0.10-10.1.0.20")),
            ipv6_config: None,
            dns_servers: vec!["10.1.0.2".into()],
            bridge: Some("vmbr1".into()),
        });
        a.scheduler_hints = Some(SchedulerHints {
            memory_adjustment: Some(0),
        });
        let b = inst("dc-b");
        let mut s = spec(ClusterMode::MultiInstance, vec![a, b]);
        s.ipv4_config = Some(ipc("10.0.0.10-10.0.0.20"));
        s.dns_servers = vec!["10.0.0.2".into()];
        let all = effective_instances(&s);
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0].network.ipv4,
            Some(PoolSource::Instance(ipc("10.1.0.10-10.1.0.20")))
        );
        assert_eq!(all[0].network.dns_servers, vec!["10.1.0.2".to_string()]);
        assert_eq!(all[0].network.bridge.as_deref(), Some("vmbr1"));
        assert_eq!(all[0].scheduler_hints.memory_adjustment, Some(0));
        assert_eq!(
            all[1].network.ipv4,
            Some(PoolSource::Cluster(ipc("10.0.0.10-10.0.0.20")))
        );
        assert_eq!(all[1].network.dns_servers, vec!["10.0.0.2".to_string()]);
        assert_eq!(all[1].network.bridge, None);
        assert!(!all[1].implicit);
    }

    fn with_status(spec: ProxmoxClusterSpec, status: ProxmoxClusterStatus) -> ProxmoxCluster {
        let mut c = ProxmoxCluster::new("wl1", spec);
        c.status = Some(status);
        c
    }

    fn st(name: &str, ready: bool, selected: Option<bool>) -> InstanceStatus {
        InstanceStatus {
            name: name.into(),
            ready,
            selected,
            ..InstanceStatus::default()
        }
    }

    #[test]
    fn instances_in_use_by_mode() {
        let three = vec![inst("dc-a"), inst("dc-b"), inst("dc-c")];
        let status = ProxmoxClusterStatus {
            instances: vec![
                st("dc-a", true, None),
                st("dc-b", false, Some(true)),
                st("dc-c", true, None),
            ],
            ..ProxmoxClusterStatus::default()
        };
        let c = with_status(spec(ClusterMode::Default, three.clone()), status.clone());
        assert_eq!(instances_in_use(&c), vec!["dc-a"]);
        let c = with_status(
            spec(ClusterMode::SingleInstance, three.clone()),
            status.clone(),
        );
        assert_eq!(instances_in_use(&c), vec!["dc-b"]);
        assert!(!instance_ready(&c, "dc-b"));
        assert!(instance_ready(&c, "dc-c"));
        let c = with_status(
            spec(ClusterMode::SingleInstance, three.clone()),
            ProxmoxClusterStatus::default(),
        );
        assert!(instances_in_use(&c).is_empty());
        let c = with_status(spec(ClusterMode::MultiInstance, three), status);
        assert_eq!(instances_in_use(&c), vec!["dc-a", "dc-b", "dc-c"]);
        let legacy = ProxmoxCluster::new("wl1", ProxmoxClusterSpec::default());
        assert_eq!(instances_in_use(&legacy), vec!["default"]);
    }

    #[test]
    fn pool_lookup_prefers_own_pool_and_never_crosses_subnets() {
        let mut a = inst("dc-a");
        a.network = Some(InstanceNetwork {
            ipv4_config: Some(ipc("10.1.0.10-10.1.0.20")),
            ..InstanceNetwork::default()
        });
        let mut s = spec(
            ClusterMode::MultiInstance,
            vec![a, inst("dc-b"), inst("dc-c")],
        );
        s.ipv4_config = Some(ipc("10.0.0.10-10.0.0.20"));
        let pool = |instance: Option<&str>, name: &str| IpPoolStatus {
            instance: instance.map(str::to_string),
            family: "ipv4".into(),
            api_group: "ipam.cluster.x-k8s.io".into(),
            kind: "InClusterIPPool".into(),
            name: name.into(),
        };
        let c = with_status(
            s.clone(),
            ProxmoxClusterStatus {
                ip_pools: vec![pool(None, "wl1-ipv4"), pool(Some("dc-a"), "wl1-dc-a-ipv4")],
                ..ProxmoxClusterStatus::default()
            },
        );
        assert_eq!(
            ip_pool_for(&c, "dc-a", IpFamily::V4).unwrap().name,
            "wl1-dc-a-ipv4"
        );
        assert_eq!(
            ip_pool_for(&c, "dc-b", IpFamily::V4).unwrap().name,
            "wl1-ipv4"
        );
        assert!(ip_pool_for(&c, "dc-b", IpFamily::V6).is_none());
        assert!(ip_pool_for(&c, "dc-x", IpFamily::V4).is_none());
        // dc-a's own pool not recorded yet: no fallback to the cluster pool.
        let c = with_status(
            s,
            ProxmoxClusterStatus {
                ip_pools: vec![pool(None, "wl1-ipv4")],
                ..ProxmoxClusterStatus::default()
            },
        );
        assert!(ip_pool_for(&c, "dc-a", IpFamily::V4).is_none());
    }
}
