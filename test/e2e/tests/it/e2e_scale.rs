//! Scenario 2: a MachineDeployment scaled 0 → 6 → 2 → 0. Every step ends
//! with exactly the VMs, addresses and claims the replicas need in the
//! deployment's datacenter, distinct VMIDs, and no seed ISO left.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};

const CLUSTER: &str = "wl2";
const MD: &str = "wl2-md-dc-b";

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn workers(rows: &[MachineRow]) -> Vec<&MachineRow> {
    rows.iter().filter(|r| !r.control_plane).collect()
}

/// Waits until the deployment has exactly `n` provisioned workers in dc-b and
/// nothing else is in flight, then checks the simulated datacenters.
async fn settle(env: &mut Env, n: usize) {
    let need_node = env.nodes_join();
    let timeout = env.waits.sim(400.0 + 60.0 * n as f64);
    let rows = ok(env
        .wait_machines(&format!("{n} workers in dc-b"), timeout, |rows| {
            let w = workers(rows);
            w.len() == n
                && w.iter().all(|r| r.up(need_node) && !r.deleting)
                && rows
                    .iter()
                    .filter(|r| r.control_plane)
                    .all(|r| r.provisioned)
        })
        .await);
    for r in workers(&rows) {
        assert_eq!(r.instance.as_deref(), Some("dc-b"), "{r:?}");
        assert_eq!(r.failure_domain.as_deref(), Some("dc-b"), "{r:?}");
    }
    // The simulated datacenters hold exactly the machines' VMs (the
    // controller may still be destroying the VMs of deleted machines:
    // wait for that, bounded), no seed ISO, one address per machine.
    let want: BTreeMap<String, BTreeSet<u32>> = ["dc-a", "dc-b", "dc-c"]
        .iter()
        .map(|dc| {
            let ids = rows
                .iter()
                .filter(|r| r.instance.as_deref() == Some(*dc))
                .map(|r| r.vmid.unwrap())
                .collect();
            ((*dc).to_string(), ids)
        })
        .collect();
    let clusters = env.pve.clusters().to_vec();
    let ns = env.namespace.clone();
    let machines = rows.len();
    ok(env
        .wait_for(&format!("datacenters settled at {n} workers"), env.waits.sim(200.0), |client| {
            let got: BTreeMap<String, BTreeSet<u32>> = clusters
                .iter()
                .map(|c| (c.name().to_string(), observe::vms(c).iter().map(|v| v.vmid).collect()))
                .collect();
            let isos: usize = clusters.iter().map(|c| observe::isos(c).len()).sum();
            let want = want.clone();
            let ns = ns.clone();
            async move {
                let addresses = scenario::list(&client, &ns, "ipam.cluster.x-k8s.io/v1beta2", "IPAddress").await?.len();
                let claims = scenario::list(&client, &ns, "ipam.cluster.x-k8s.io/v1beta2", "IPAddressClaim").await?.len();
                Ok(if got == want && isos == 0 && addresses == machines && claims == machines {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!(
                        "VMs {got:?} (want {want:?}), ISOs {isos}, addresses {addresses}, claims {claims} (want {machines})"
                    ))
                })
            }
        })
        .await);
}

#[tokio::test]
async fn machine_deployment_scales_0_6_2_0() {
    let mut env = ok(Env::start(EnvOptions::new("scale")).await);
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    ok(env
        .apply_template("multi-instance", env::MULTI_INSTANCE_TEMPLATE, &vars)
        .await);
    settle(&mut env, 0).await;
    let mut seen_vmids = BTreeSet::new();
    for n in [6usize, 2, 0] {
        ok(scenario::scale_machine_deployment(
            &env.client,
            &env.namespace,
            MD,
            i32::try_from(n).unwrap(),
        )
        .await);
        settle(&mut env, n).await;
        let rows = ok(observe::machine_rows(&env.client, &env.namespace).await);
        let vmids: Vec<u32> = workers(&rows).iter().map(|r| r.vmid.unwrap()).collect();
        let unique: BTreeSet<u32> = vmids.iter().copied().collect();
        assert_eq!(unique.len(), vmids.len(), "duplicate VMIDs: {vmids:?}");
        assert!(
            vmids.iter().all(|v| (1000..=1999).contains(v)),
            "VMIDs outside the range: {vmids:?}"
        );
        seen_vmids.extend(unique);
    }
    assert!(seen_vmids.len() >= 6);
    env.shutdown().await;
}
