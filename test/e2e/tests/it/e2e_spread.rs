//! Concurrent scale-up keeps the spread: a MachineDeployment in dc-a (four
//! equal nodes) scaled 0 → 2 → 7 ends with the busiest node holding at
//! most one VM more than the least busy, because placement counts the
//! placements in flight. And each datacenter's event about the
//! ProxmoxCluster stays visible (its own event series).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario;

const CLUSTER: &str = "wl3";
const MD: &str = "wl3-md-dc-a";

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

async fn settle(env: &mut Env, n: usize) -> Vec<MachineRow> {
    let need_node = env.nodes_join();
    let timeout = env.waits.sim(400.0 + 60.0 * n as f64);
    ok(env
        .wait_machines(&format!("{n} workers in dc-a"), timeout, |rows| {
            let workers: Vec<&MachineRow> = rows.iter().filter(|r| !r.control_plane).collect();
            workers.len() == n && rows.iter().all(|r| r.up(need_node) && !r.deleting)
        })
        .await)
}

/// VMs per node of dc-a, every node listed (0 for an empty one).
fn per_node(env: &Env) -> BTreeMap<String, usize> {
    let dc = env.pve.cluster("dc-a").unwrap();
    let mut out: BTreeMap<String, usize> = dc.nodes().into_iter().map(|n| (n.name, 0)).collect();
    for vm in observe::vms(dc) {
        *out.entry(vm.node).or_default() += 1;
    }
    out
}

#[tokio::test]
async fn concurrent_scale_up_spreads_over_equal_nodes_and_each_instance_keeps_its_event() {
    let mut env = ok(Env::start(EnvOptions::new("spread")).await);
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    ok(env
        .apply_template("multi-instance", env::MULTI_INSTANCE_TEMPLATE, &vars)
        .await);
    settle(&mut env, 0).await;
    assert_eq!(per_node(&env).len(), 4, "dc-a has four nodes");
    for n in [2usize, 7] {
        ok(scenario::scale_machine_deployment(
            &env.client,
            &env.namespace,
            MD,
            i32::try_from(n).unwrap(),
        )
        .await);
        let rows = settle(&mut env, n).await;
        let counts = per_node(&env);
        let vms: usize = counts.values().sum();
        let in_dc_a = rows
            .iter()
            .filter(|r| r.instance.as_deref() == Some("dc-a"))
            .count();
        assert_eq!(vms, in_dc_a, "one VM per machine in dc-a: {counts:?}");
        let (most, least) = (
            *counts.values().max().unwrap(),
            *counts.values().min().unwrap(),
        );
        assert!(
            most <= least + 1,
            "after scaling to {n}: busiest node {most}, least busy {least}: {counts:?}"
        );
    }

    // Each instance's event about the ProxmoxCluster is its own series.
    let events = ok(scenario::list(&env.client, &env.namespace, "events.k8s.io/v1", "Event").await);
    let about: BTreeSet<String> = events
        .iter()
        .filter(|e| e.data["regarding"]["kind"] == "ProxmoxCluster")
        .filter_map(|e| {
            e.data["regarding"]["fieldPath"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    for dc in ["dc-a", "dc-b", "dc-c"] {
        let path = format!("spec.settings.instances{{{dc}}}");
        assert!(about.contains(&path), "no event series for {dc}: {about:?}");
    }
    env.shutdown().await;
}
