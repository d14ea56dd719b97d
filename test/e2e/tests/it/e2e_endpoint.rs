//! The control-plane endpoint claimed from an IP pool
//! (`cluster-template-multi-instance-vip-pool.yaml`,
//! docs/control-plane-endpoint.md): a multi-instance cluster gets its
//! endpoint from the pool through the IPAM stand-in, the address lands in
//! the ProxmoxCluster, its status and (copied by the CAPI stand-in) the
//! Cluster, and a machine comes up behind it. A second cluster whose
//! endpoint the user wrote claims nothing and keeps it. Deleting the first
//! cluster releases the claim, its address and its pool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use capmox_e2e::clusterctl;
use capmox_e2e::crds::Cluster;
use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::scenario::{self, Progress};
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> Option<&'a str> {
    v.pointer(pointer).and_then(Value::as_str)
}

/// The vip-pool flavor's variables for `cluster`, node pools from
/// `first` (`10.N0.0.<first>-<first+20>`), no workers.
fn vars(env: &Env, cluster: &str, first: u8, cp: u32) -> BTreeMap<String, String> {
    let mut v = env.multi_instance_vars(cluster);
    v.remove("CONTROL_PLANE_ENDPOINT_IP");
    v.insert(
        "CONTROL_PLANE_ENDPOINT_IP_RANGES".into(),
        "[10.10.0.5-10.10.0.9]".into(),
    );
    for n in 1..=3 {
        v.insert(
            format!("PROXMOX_{n}_NODE_IP_RANGES"),
            format!("[10.{}.0.{first}-10.{}.0.{}]", 10 * n, 10 * n, first + 20),
        );
    }
    v.insert("CONTROL_PLANE_MACHINE_COUNT".into(), cp.to_string());
    v.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    v
}

#[tokio::test]
async fn endpoint_from_a_pool_is_claimed_once_and_released_with_the_cluster() {
    let mut env = ok(Env::start(EnvOptions::new("vip")).await);
    let need_node = env.nodes_join();
    let ns = env.namespace.clone();
    ok(env
        .apply_template(
            "multi-instance-vip-pool",
            env::VIP_POOL_TEMPLATE,
            &vars(&env, "wl6", 10, 1),
        )
        .await);
    // The second cluster: the same flavor, but the user wrote the endpoint.
    let text = clusterctl::render(env::VIP_POOL_TEMPLATE, &vars(&env, "wl7", 100, 0)).unwrap();
    for mut d in scenario::parse_documents("wl7", &text).unwrap() {
        if d["kind"] == "ProxmoxCluster" {
            d["spec"]["controlPlaneEndpoint"] = json!({"host": "10.10.0.250", "port": 6443});
        }
        ok(scenario::apply_value(&env.client, &ns, d).await);
    }

    let claim_name = "wl6-control-plane-endpoint";
    let ns2 = ns.clone();
    ok(env
        .wait_for(
            "wl6's endpoint from the pool in ProxmoxCluster, status and Cluster",
            env.waits.sim(300.0),
            |client| {
                let ns = ns2.clone();
                async move {
                    let pxc = scenario::proxmox_cluster(&client, &ns, "wl6")
                        .await?
                        .unwrap();
                    let cluster = Api::<Cluster>::namespaced(client.clone(), &ns)
                        .get("wl6")
                        .await
                        .map_err(capmox_e2e::E2eError::from)?;
                    let on_cluster = cluster
                        .spec
                        .control_plane_endpoint
                        .as_ref()
                        .map(|e| (e.host.clone(), e.port));
                    let seen = (
                        str_at(&pxc.data, "/spec/controlPlaneEndpoint/host").map(str::to_string),
                        str_at(&pxc.data, "/status/controlPlaneEndpointClaim/address")
                            .map(str::to_string),
                        on_cluster,
                    );
                    let want = (
                        Some("10.10.0.5".to_string()),
                        Some("10.10.0.5".to_string()),
                        Some(("10.10.0.5".to_string(), 6443)),
                    );
                    Ok(if seen == want {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!("{seen:?}"))
                    })
                }
            },
        )
        .await);
    let pxc = ok(scenario::proxmox_cluster(&env.client, &ns, "wl6").await).unwrap();
    assert_eq!(
        pxc.data.pointer("/status/controlPlaneEndpointClaim"),
        Some(&json!({
            "name": claim_name,
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": claim_name},
            "address": "10.10.0.5"
        }))
    );
    assert_eq!(
        str_at(&pxc.data, "/spec/controlPlaneEndpoint/host"),
        Some("10.10.0.5")
    );
    let claims = ok(scenario::list(
        &env.client,
        &ns,
        "ipam.cluster.x-k8s.io/v1beta2",
        "IPAddressClaim",
    )
    .await);
    let endpoint_claims: Vec<&str> = claims
        .iter()
        .filter_map(|c| c.metadata.name.as_deref())
        .filter(|n| n.ends_with("control-plane-endpoint"))
        .collect();
    assert_eq!(endpoint_claims, [claim_name], "one claim, none for wl7");

    // A machine comes up behind the claimed endpoint.
    ok(env
        .wait_machines(
            "wl6's control-plane machine",
            env.waits.sim(3.0 * 400.0),
            |rows| rows.len() == 1 && rows.iter().all(|r| r.up(need_node)),
        )
        .await);

    // The user's endpoint was left alone.
    let wl7 = ok(scenario::proxmox_cluster(&env.client, &ns, "wl7").await).unwrap();
    assert_eq!(
        str_at(&wl7.data, "/spec/controlPlaneEndpoint/host"),
        Some("10.10.0.250")
    );
    assert_eq!(wl7.data.pointer("/status/controlPlaneEndpointClaim"), None);

    // Deleting wl6 releases its claim, address and pool; wl7 keeps its own.
    Api::<Cluster>::namespaced(env.client.clone(), &ns)
        .delete("wl6", &DeleteParams::default())
        .await
        .unwrap();
    let ns3 = ns.clone();
    ok(env
        .wait_for(
            "wl6's endpoint claim, address and pool gone",
            env.waits.sim(3.0 * 200.0),
            |client| {
                let ns = ns3.clone();
                async move {
                    let mut left = Vec::new();
                    for (api_version, kind) in [
                        ("ipam.cluster.x-k8s.io/v1beta2", "IPAddressClaim"),
                        ("ipam.cluster.x-k8s.io/v1beta2", "IPAddress"),
                        ("ipam.cluster.x-k8s.io/v1alpha2", "InClusterIPPool"),
                        ("infrastructure.cluster.x-k8s.io/v1alpha3", "ProxmoxCluster"),
                    ] {
                        for o in scenario::list(&client, &ns, api_version, kind).await? {
                            let name = o.metadata.name.clone().unwrap_or_default();
                            if name.starts_with("wl6") {
                                left.push(format!("{kind} {name}"));
                            }
                        }
                    }
                    Ok(if left.is_empty() {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!("left: {left:?}"))
                    })
                }
            },
        )
        .await);
    let wl7 = ok(scenario::proxmox_cluster(&env.client, &ns, "wl7").await).unwrap();
    assert_eq!(
        str_at(&wl7.data, "/spec/controlPlaneEndpoint/host"),
        Some("10.10.0.250")
    );
    env.shutdown().await;
}
