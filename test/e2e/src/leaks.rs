//! What a deleted cluster must not leave behind, counted in one place for
//! every scenario: the CAPI, IPAM and provider objects of the scenario's
//! namespace, and in the simulated datacenters the VMs (each holding a
//! VMID), the uploaded ISOs and the HA resources (`/cluster/ha/resources`).

use std::collections::BTreeMap;
use std::time::Duration;

use kube::api::DynamicObject;
use pve_sim::SimCluster;

use crate::env::Env;
use crate::error::Result;
use crate::observe;
use crate::scenario::{self, Progress};

/// The kinds `(apiVersion, kind)` of a workload cluster that go with it:
/// CAPI core, kubeadm, this provider's, IPAM claims, addresses and the
/// in-cluster pools the templates create.
pub const CLUSTER_KINDS: &[(&str, &str)] = &[
    ("cluster.x-k8s.io/v1beta2", "Cluster"),
    ("cluster.x-k8s.io/v1beta2", "Machine"),
    ("cluster.x-k8s.io/v1beta2", "MachineSet"),
    ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
    (
        "controlplane.cluster.x-k8s.io/v1beta2",
        "KubeadmControlPlane",
    ),
    ("bootstrap.cluster.x-k8s.io/v1beta2", "KubeadmConfig"),
    ("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxCluster"),
    ("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxMachine"),
    ("ipam.cluster.x-k8s.io/v1beta2", "IPAddressClaim"),
    ("ipam.cluster.x-k8s.io/v1beta2", "IPAddress"),
    ("ipam.cluster.x-k8s.io/v1alpha2", "InClusterIPPool"),
];

/// The kinds a ClusterClass topology copies per cluster (labelled
/// `cluster.x-k8s.io/cluster-name`); the user's own objects of these kinds
/// (the ClusterClass's templates) stay.
pub const TOPOLOGY_KINDS: &[(&str, &str)] = &[
    (
        "infrastructure.cluster.x-k8s.io/v1alpha3",
        "ProxmoxMachineTemplate",
    ),
    (
        "bootstrap.cluster.x-k8s.io/v1beta2",
        "KubeadmConfigTemplate",
    ),
];

/// The label CAPI puts on every object of a cluster.
const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";

/// What is left, as counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// Objects left per kind (kinds with none are absent).
    pub objects: BTreeMap<String, usize>,
    /// Non-template VMs over all simulated datacenters (each holds a VMID).
    pub vms: usize,
    /// ISO volumes over all simulated datacenters.
    pub isos: usize,
    /// HA resources over all simulated datacenters.
    pub ha_resources: usize,
}

impl Leftovers {
    /// Nothing at all is left.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty() && self.vms == 0 && self.isos == 0 && self.ha_resources == 0
    }
}

impl std::fmt::Display for Leftovers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "objects {:?}, VMs {}, ISOs {}, HA resources {}",
            self.objects, self.vms, self.isos, self.ha_resources
        )
    }
}

/// Counts what is left in namespace `ns` of [`CLUSTER_KINDS`] (every
/// object) and of `labelled` (only objects carrying the cluster-name
/// label), and in `sims` the VMs, ISOs and HA resources.
///
/// # Errors
/// The errors of [`scenario::list`].
pub async fn leftovers(
    client: &kube::Client,
    ns: &str,
    sims: &[SimCluster],
    labelled: &[(&str, &str)],
) -> Result<Leftovers> {
    let mut objects = BTreeMap::new();
    for (api_version, kind) in CLUSTER_KINDS {
        let n = scenario::list(client, ns, api_version, kind).await?.len();
        if n > 0 {
            objects.insert((*kind).to_string(), n);
        }
    }
    for (api_version, kind) in labelled {
        let n = scenario::list(client, ns, api_version, kind)
            .await?
            .iter()
            .filter(|o| has_cluster_label(o))
            .count();
        if n > 0 {
            *objects.entry((*kind).to_string()).or_default() += n;
        }
    }
    Ok(Leftovers {
        objects,
        vms: sims.iter().map(|c| observe::vms(c).len()).sum(),
        isos: sims.iter().map(|c| observe::isos(c).len()).sum(),
        ha_resources: sims.iter().map(|c| c.ha_resources().len()).sum(),
    })
}

fn has_cluster_label(o: &DynamicObject) -> bool {
    o.metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(CLUSTER_NAME_LABEL))
}

/// Waits (`what`, at most `timeout`) until [`leftovers`] of the scenario's
/// namespace and every simulated datacenter of `env` is empty.
///
/// # Errors
/// As [`Env::wait_for`]; a timeout names what is still there.
pub async fn wait_nothing_left(
    env: &mut Env,
    what: &str,
    timeout: Duration,
    labelled: &[(&'static str, &'static str)],
) -> Result<()> {
    let sims = env.pve.clusters().to_vec();
    let ns = env.namespace.clone();
    let labelled = labelled.to_vec();
    env.wait_for(what, timeout, |client| {
        let sims = sims.clone();
        let ns = ns.clone();
        let labelled = labelled.clone();
        async move {
            let left = leftovers(&client, &ns, &sims, &labelled).await?;
            Ok(if left.is_empty() {
                Progress::Done(())
            } else {
                Progress::Pending(left.to_string())
            })
        }
    })
    .await
}

/// Deletes the Cluster `cluster` of the scenario's namespace and waits (at
/// most three times 200 simulated seconds) until nothing of it is left
/// ([`wait_nothing_left`], nothing labelled kept).
///
/// # Errors
/// [`crate::error::E2eError::Kube`] of the delete; as [`wait_nothing_left`].
pub async fn delete_cluster_and_wait(env: &mut Env, cluster: &str) -> Result<()> {
    kube::Api::<crate::crds::Cluster>::namespaced(env.client.clone(), &env.namespace)
        .delete(cluster, &kube::api::DeleteParams::default())
        .await?;
    let bound = env.waits.sim(3.0 * 200.0);
    wait_nothing_left(env, "the whole cluster deleted", bound, &[]).await
}

/// The names of the Secrets left in `namespace` after a multi-instance
/// cluster `cluster` over `datacenters` was deleted, and the names that
/// should be left: the user's credentials Secrets
/// (`<cluster>-<datacenter>-credentials`, the template's), nothing else
/// (bootstrap Secrets go with their configs).
///
/// # Errors
/// [`crate::error::E2eError::Kube`] when the Secrets cannot be listed.
pub async fn secrets_left(
    client: &kube::Client,
    namespace: &str,
    cluster: &str,
    datacenters: &[&str],
) -> Result<(
    std::collections::BTreeSet<String>,
    std::collections::BTreeSet<String>,
)> {
    use kube::ResourceExt;
    let left =
        kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), namespace)
            .list(&kube::api::ListParams::default())
            .await?
            .items
            .iter()
            .map(|s| s.name_any())
            .collect();
    let expected = datacenters
        .iter()
        .map(|dc| format!("{cluster}-{dc}-credentials"))
        .collect();
    Ok((left, expected))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_only_when_nothing_is_left() {
        assert!(Leftovers::default().is_empty());
        for left in [
            Leftovers {
                objects: BTreeMap::from([("Machine".to_string(), 1)]),
                ..Leftovers::default()
            },
            Leftovers {
                vms: 1,
                ..Leftovers::default()
            },
            Leftovers {
                isos: 1,
                ..Leftovers::default()
            },
            Leftovers {
                ha_resources: 1,
                ..Leftovers::default()
            },
        ] {
            assert!(!left.is_empty(), "{left}");
        }
        let left = Leftovers {
            objects: BTreeMap::from([("IPAddress".to_string(), 2)]),
            vms: 1,
            isos: 0,
            ha_resources: 3,
        };
        assert_eq!(
            left.to_string(),
            "objects {\"IPAddress\": 2}, VMs 1, ISOs 0, HA resources 3"
        );
    }
}
