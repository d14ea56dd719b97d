//! Scenario 4: the `SingleInstance` mode (multi-instance template, one
//! datacenter chosen once and used for every machine) and the `Default`
//! mode (`cluster-template.yaml`: one Proxmox cluster through
//! `spec.credentialsRef`, the implicit instance `default`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::observe;
use capmox_e2e::scenario::{self, Progress};
use serde_json::Value;

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn vm_counts(env: &Env) -> BTreeMap<String, usize> {
    observe::vm_counts(&env.pve)
}

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), *v)).collect()
}

#[tokio::test]
async fn single_instance_mode_uses_one_datacenter() {
    let mut env = ok(Env::start(EnvOptions::new("single")).await);
    let need_node = env.nodes_join();
    let mut vars = env.multi_instance_vars("wl4");
    vars.insert("PROXMOX_MODE".into(), "SingleInstance".into());
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "2".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    ok(env
        .apply_template("multi-instance", env::MULTI_INSTANCE_TEMPLATE, &vars)
        .await);
    // The only failure domain is the chosen instance: the first healthy one.
    let ns = env.namespace.clone();
    ok(env
        .wait_for(
            "SingleInstance chooses dc-a",
            env.waits.sim(300.0),
            |client| {
                let ns = ns.clone();
                async move {
                    let pxc = scenario::proxmox_cluster(&client, &ns, "wl4")
                        .await?
                        .unwrap();
                    let fds = scenario::failure_domain_names(&pxc.data);
                    let selected: Vec<String> = pxc
                        .data
                        .pointer("/status/instances")
                        .and_then(Value::as_array)
                        .map(|l| {
                            l.iter()
                                .filter(|i| {
                                    i.get("selected").and_then(Value::as_bool) == Some(true)
                                })
                                .filter_map(|i| {
                                    i.get("name").and_then(Value::as_str).map(str::to_string)
                                })
                                .collect()
                        })
                        .unwrap_or_default();
                    Ok(if fds == ["dc-a"] && selected == ["dc-a"] {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!("failure domains {fds:?}, selected {selected:?}"))
                    })
                }
            },
        )
        .await);
    ok(scenario::scale_machine_deployment(&env.client, &env.namespace, "wl4-md-dc-a", 1).await);
    let rows = ok(env
        .wait_machines(
            "2 control-plane machines and a worker",
            env.waits.sim(3.0 * 400.0),
            |rows| rows.len() == 3 && rows.iter().all(|r| r.up(need_node)),
        )
        .await);
    assert!(
        rows.iter().all(|r| r.instance.as_deref() == Some("dc-a")),
        "{rows:?}"
    );
    assert_eq!(
        vm_counts(&env),
        counts(&[("dc-a", 3), ("dc-b", 0), ("dc-c", 0)])
    );
    env.shutdown().await;
}

#[tokio::test]
async fn default_mode_with_the_default_template() {
    let mut env = ok(Env::start(EnvOptions::new("default")).await);
    let need_node = env.nodes_join();
    let mut vars = ok(env.default_vars("wl5", "dc-b"));
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "1".into());
    vars.insert("PROXMOX_PROVIDER_ID_FORMAT".into(), "InstanceVMID".into());
    ok(env
        .apply_template("cluster-template.yaml", env::DEFAULT_TEMPLATE, &vars)
        .await);
    let rows = ok(env
        .wait_machines(
            "a control-plane machine and a worker",
            env.waits.sim(3.0 * 400.0),
            |rows| rows.len() == 2 && rows.iter().all(|r| r.up(need_node)),
        )
        .await);
    for r in &rows {
        assert_eq!(r.instance.as_deref(), Some("default"), "{r:?}");
        // InstanceVMID: the Proxmox CCM's form, region = instance.
        assert_eq!(
            r.provider_id.as_deref(),
            Some(format!("proxmox://default/{}", r.vmid.unwrap()).as_str()),
            "{r:?}"
        );
    }
    assert_eq!(
        vm_counts(&env),
        counts(&[("dc-a", 0), ("dc-b", 2), ("dc-c", 0)])
    );
    let pxc = ok(scenario::proxmox_cluster(&env.client, &env.namespace, "wl5").await).unwrap();
    assert_eq!(scenario::failure_domain_names(&pxc.data), ["default"]);
    env.shutdown().await;
}
