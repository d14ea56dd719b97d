//! Scenario 3: one datacenter's credentials break mid-way (its API token is
//! rotated in Proxmox, the Secret still holds the old one). Its failure
//! domain goes, new control-plane machines avoid it, the other datacenters
//! keep working; the operator fixes the Secret, the failure domain comes back
//! and the control plane is spread again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use capmox_e2e::crds::Cluster;
use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

const CLUSTER: &str = "wl3";

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn cp_per_instance(rows: &[MachineRow]) -> BTreeMap<String, usize> {
    let cp: Vec<MachineRow> = rows.iter().filter(|r| r.control_plane).cloned().collect();
    observe::per_instance(&cp)
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

/// Waits until both the ProxmoxCluster and the Cluster publish exactly `fds`.
async fn wait_failure_domains(env: &mut Env, fds: &[&str]) {
    let want: Vec<String> = fds.iter().map(|s| (*s).to_string()).collect();
    let ns = env.namespace.clone();
    ok(env
        .wait_for(
            &format!("failure domains {want:?}"),
            env.waits.sim(300.0),
            |client| {
                let ns = ns.clone();
                let want = want.clone();
                async move {
                    let pxc = scenario::proxmox_cluster(&client, &ns, CLUSTER)
                        .await?
                        .unwrap();
                    let cluster = Api::<Cluster>::namespaced(client, &ns).get(CLUSTER).await?;
                    let infra = scenario::failure_domain_names(&pxc.data);
                    let capi: Vec<String> = cluster
                        .failure_domains()
                        .iter()
                        .map(|f| f.name.clone())
                        .collect();
                    Ok(if infra == want && capi == want {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!(
                            "ProxmoxCluster {infra:?}, Cluster {capi:?}, instances {:?}",
                            scenario::instance_counts(&pxc.data)
                        ))
                    })
                }
            },
        )
        .await);
}

#[tokio::test]
async fn broken_datacenter_is_avoided_and_comes_back() {
    let mut env = ok(Env::start(EnvOptions::new("creds")).await);
    let need_node = env.nodes_join();
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    ok(env
        .apply_template("multi-instance", env::MULTI_INSTANCE_TEMPLATE, &vars)
        .await);
    let t = env.waits.sim(3.0 * 400.0);
    ok(env
        .wait_machines("3 control-plane machines, one per datacenter", t, |rows| {
            cp_per_instance(rows) == counts(&[("dc-a", 1), ("dc-b", 1), ("dc-c", 1)])
                && rows.iter().all(|r| r.up(need_node))
        })
        .await);

    // Break dc-b: its token is rotated in Proxmox.
    let dc_b = env.pve.cluster("dc-b").unwrap().clone();
    let old_secret = dc_b.token_secret();
    let new_secret = "6d1f3a2e-1b7c-4c1e-9f00-5e2b6c7d8e9f";
    assert!(dc_b.set_token_secret(&dc_b.token_id(), new_secret));
    wait_failure_domains(&mut env, &["dc-a", "dc-c"]).await;
    let pxc = ok(scenario::proxmox_cluster(&env.client, &env.namespace, CLUSTER).await).unwrap();
    let instances = scenario::instance_counts(&pxc.data);
    assert!(!instances["dc-b"].0, "{instances:?}");
    assert!(instances["dc-a"].0 && instances["dc-c"].0, "{instances:?}");
    let status_text = pxc.data["status"].to_string();
    assert!(!status_text.contains(&old_secret) && !status_text.contains(new_secret));

    // New control-plane machines avoid dc-b: 3 → 5 lands one more in dc-a
    // and one more in dc-c.
    ok(scenario::scale_control_plane(&env.client, &env.namespace, "wl3-control-plane", 5).await);
    ok(env
        .wait_machines(
            "5 control-plane machines avoiding dc-b",
            env.waits.sim(3.0 * 400.0),
            |rows| {
                cp_per_instance(rows) == counts(&[("dc-a", 2), ("dc-b", 1), ("dc-c", 2)])
                    && rows.iter().all(|r| r.up(need_node))
            },
        )
        .await);
    // The other datacenters keep working: a worker in dc-c.
    ok(scenario::scale_machine_deployment(&env.client, &env.namespace, "wl3-md-dc-c", 1).await);
    ok(env
        .wait_machines("a worker in dc-c", env.waits.sim(400.0), |rows| {
            rows.iter()
                .filter(|r| !r.control_plane)
                .map(|r| (r.instance.clone(), r.provisioned))
                .collect::<Vec<_>>()
                == [(Some("dc-c".to_string()), true)]
        })
        .await);

    // The operator puts the new token secret into the Secret: dc-b is back.
    let secrets: Api<Secret> = Api::namespaced(env.client.clone(), &env.namespace);
    ok(secrets
        .patch(
            "wl3-dc-b-credentials",
            &PatchParams::default(),
            &Patch::Merge(&json!({"stringData": {"secret": new_secret}})),
        )
        .await
        .map(|_| ())
        .map_err(capmox_e2e::E2eError::from));
    wait_failure_domains(&mut env, &["dc-a", "dc-b", "dc-c"]).await;
    // Scaling the control plane back to 3 removes one machine each from the
    // two datacenters that have two: spread again.
    ok(scenario::scale_control_plane(&env.client, &env.namespace, "wl3-control-plane", 3).await);
    ok(env
        .wait_machines(
            "3 control-plane machines spread again",
            env.waits.sim(3.0 * 300.0),
            |rows| {
                cp_per_instance(rows) == counts(&[("dc-a", 1), ("dc-b", 1), ("dc-c", 1)])
                    && rows.iter().all(|r| !r.deleting)
            },
        )
        .await);
    env.shutdown().await;
}
