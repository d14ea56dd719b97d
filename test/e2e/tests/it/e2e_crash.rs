//! Scenario 5: the controller is killed with SIGKILL in the middle of a
//! scale-up and started again: no duplicate VMs, no leaked VMIDs, ISOs or
//! addresses.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;

use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::observe;
use capmox_e2e::scenario::{self, Progress};

const CLUSTER: &str = "wl6";

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn sigkill_during_scale_up_leaks_nothing() {
    let mut env = ok(Env::start(EnvOptions::new("crash")).await);
    let need_node = env.nodes_join();
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    ok(env
        .apply_template("multi-instance", env::MULTI_INSTANCE_TEMPLATE, &vars)
        .await);
    ok(env
        .wait_machines("the control-plane machine", env.waits.sim(400.0), |rows| {
            rows.len() == 1 && rows[0].up(need_node)
        })
        .await);

    // Scale up, and kill the controller once work is in flight: some worker
    // has its VMID written (a clone issued or about to be) and some worker is
    // not provisioned yet.
    ok(scenario::scale_machine_deployment(&env.client, &env.namespace, "wl6-md-dc-c", 4).await);
    ok(env
        .wait_machines("a scale-up in flight", env.waits.sim(400.0), |rows| {
            let w: Vec<_> = rows.iter().filter(|r| !r.control_plane).collect();
            w.len() == 4 && w.iter().any(|r| r.vmid.is_some()) && w.iter().any(|r| !r.provisioned)
        })
        .await);
    ok(env.kill_controller().await);
    ok(env.start_controller().await);

    let rows = ok(env
        .wait_machines(
            "4 workers provisioned after the restart",
            env.waits.sim(3.0 * 400.0),
            |rows| {
                rows.iter().filter(|r| !r.control_plane).count() == 4
                    && rows.iter().all(|r| r.up(need_node))
            },
        )
        .await);
    let worker_vmids: BTreeSet<u32> = rows
        .iter()
        .filter(|r| !r.control_plane)
        .map(|r| {
            assert_eq!(r.instance.as_deref(), Some("dc-c"), "{r:?}");
            r.vmid.unwrap()
        })
        .collect();
    assert_eq!(worker_vmids.len(), 4, "distinct VMIDs: {rows:?}");
    let dc_c = env.pve.cluster("dc-c").unwrap().clone();
    let ns = env.namespace.clone();
    let machines = rows.len();
    ok(env
        .wait_for("exactly the machines' VMs, no ISO, one address each", env.waits.sim(200.0), |client| {
            let vms: BTreeSet<u32> = observe::vms(&dc_c).iter().map(|v| v.vmid).collect();
            let isos = observe::isos(&dc_c).len();
            let want = worker_vmids.clone();
            let ns = ns.clone();
            async move {
                let addrs = scenario::list(&client, &ns, "ipam.cluster.x-k8s.io/v1beta2", "IPAddress").await?;
                let distinct: BTreeSet<String> = addrs
                    .iter()
                    .filter_map(|a| a.data.pointer("/spec/address").and_then(|v| v.as_str()).map(str::to_string))
                    .collect();
                Ok(if vms == want && isos == 0 && addrs.len() == machines && distinct.len() == machines {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!(
                        "dc-c VMs {vms:?} (want {want:?}), ISOs {isos}, addresses {} ({} distinct, want {machines})",
                        addrs.len(),
                        distinct.len()
                    ))
                })
            }
        })
        .await);
    // Nothing landed elsewhere.
    assert_eq!(observe::vms(env.pve.cluster("dc-b").unwrap()).len(), 0);
    env.shutdown().await;
}
