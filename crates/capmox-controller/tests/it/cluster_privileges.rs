//! The privileges each Proxmox VE version has (docs/field-cases.md B31),
//! against pve-sim: a PVE 8 and a PVE 9 instance whose tokens lack the
//! guest-agent privilege of their version. The ProxmoxCluster names each
//! missing privilege with its path and operation, the instances stay
//! usable, and a probe asks `GET /access/permissions` once, nothing more.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;

use std::time::Duration;

use capmox_controller::api::{ClusterMode, MissingPrivilege};
use support::*;

const PERMISSIONS: &str = "/access/permissions";

fn lacks(privilege: &str, operation: &str) -> MissingPrivilege {
    MissingPrivilege {
        privilege: privilege.into(),
        path: "/vms/{vmid}".into(),
        operation: operation.into(),
    }
}

#[tokio::test]
async fn missing_agent_privileges_are_named_per_version() {
    let mut cfg = sim_config().with_pve_version("dc-a", "8.4.1");
    for name in ["dc-a", "dc-b"] {
        let c = cfg.cluster_mut(name).unwrap();
        for t in &mut c.tokens {
            for a in &mut t.acl {
                a.privileges
                    .retain(|p| p != "VM.Monitor" && !p.starts_with("VM.GuestAgent."));
            }
        }
    }
    let env = Env::start_with(cfg).await;
    env.put_all_credentials().await;
    let ctx = env.context(Duration::from_millis(1));
    env.create_cluster(
        "wl1",
        spec(
            ClusterMode::MultiInstance,
            vec![instance("dc-a"), instance("dc-b")],
        ),
    )
    .await;
    reset_pve_calls(&env);
    let pc = reconcile(&env, &ctx, "wl1").await;
    let st = pc.status.unwrap();
    let of = |name: &str| st.instances.iter().find(|i| i.name == name).unwrap();
    assert!(of("dc-a").ready && of("dc-b").ready, "{:?}", st.instances);
    assert_eq!(of("dc-a").version.as_deref(), Some("8.4.1"));
    assert_eq!(
        of("dc-a").missing_privileges,
        [
            lacks("VM.Monitor", "agentRead"),
            lacks("VM.Monitor", "agentExec")
        ]
    );
    assert_eq!(
        of("dc-b").missing_privileges,
        [
            lacks(
                "VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted",
                "agentRead"
            ),
            lacks("VM.GuestAgent.Unrestricted", "agentExec"),
        ]
    );
    let cond = st
        .conditions
        .iter()
        .find(|c| c.type_ == "PrivilegesReady")
        .expect("PrivilegesReady");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "MissingPrivileges")
    );
    assert!(
        cond.message
            .contains("dc-a: the token lacks VM.Monitor on /vms/{vmid} (agentRead)"),
        "{}",
        cond.message
    );
    assert!(
        cond.message.contains("dc-b: the token lacks VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted on /vms/{vmid} (agentRead)"),
        "{}",
        cond.message
    );
    // One permissions read per instance and probe; no retry.
    for name in ["dc-a", "dc-b"] {
        let calls = env.pve.cluster(name).unwrap().calls();
        assert_eq!(
            calls.count("GET", PERMISSIONS),
            1,
            "{name}: {:?}",
            calls.by_endpoint
        );
    }
}

/// docs/field-cases.md B34: a token scoped to pool `k8s` lacks nothing in
/// an instance that names the pool, lacks the clone's privileges (named
/// with their paths) in one that does not, and a pool that does not exist
/// is named with its instance in `PoolsReady` (`PoolNotFound`).
#[tokio::test]
async fn pool_scoped_tokens_and_missing_pools() {
    let mut cfg = sim_config();
    crate::support::scope_to_pool(cfg.cluster_mut("dc-a").unwrap(), "k8s");
    crate::support::scope_to_pool(cfg.cluster_mut("dc-b").unwrap(), "k8s");
    let env = Env::start_with(cfg).await;
    env.put_all_credentials().await;
    let ctx = env.context(Duration::from_millis(1));
    let with_pool = |name: &str, pool: &str| capmox_controller::api::InstanceSpec {
        pool: Some(pool.into()),
        ..instance(name)
    };
    env.create_cluster(
        "wl1",
        spec(
            ClusterMode::MultiInstance,
            vec![
                with_pool("dc-a", "k8s"),
                instance("dc-b"),
                with_pool("dc-c", "k8s-wl9"),
            ],
        ),
    )
    .await;
    let pc = reconcile(&env, &ctx, "wl1").await;
    let st = pc.status.unwrap();
    let of = |name: &str| st.instances.iter().find(|i| i.name == name).unwrap();
    assert!(of("dc-a").missing_privileges.is_empty(), "{:?}", of("dc-a"));
    assert_eq!(of("dc-a").pool_problem, None);
    let clone: Vec<String> = of("dc-b")
        .missing_privileges
        .iter()
        .filter(|m| m.operation == "vmClone")
        .map(|m| format!("{} on {}", m.privilege, m.path))
        .collect();
    assert_eq!(
        clone,
        [
            "VM.Clone on /vms/{vmid}",
            "VM.Allocate on /vms/{vmid}",
            "Datastore.AllocateSpace on /storage/{storage}"
        ]
    );
    let problem = of("dc-c").pool_problem.clone().unwrap();
    // The problem names the pool and the instance (the reason code is
    // checked on the condition below).
    assert!(
        problem.contains("k8s-wl9") && problem.contains("dc-c"),
        "{problem}"
    );
    assert!(
        of("dc-c").ready,
        "a missing pool leaves the instance usable"
    );
    let cond = st
        .conditions
        .iter()
        .find(|c| c.type_ == "PoolsReady")
        .expect("PoolsReady");
    assert_eq!(
        (cond.status.as_str(), cond.reason.as_str()),
        ("False", "PoolNotFound")
    );
    assert!(cond.message.contains("k8s-wl9") && cond.message.contains("dc-c"));
    // One pool read per instance that names a pool; none for dc-b.
    for (name, reads) in [("dc-a", 1), ("dc-b", 0), ("dc-c", 1)] {
        let calls = env.pve.cluster(name).unwrap().calls();
        assert_eq!(
            calls.count("GET", "/pools"),
            reads,
            "{name}: {:?}",
            calls.by_endpoint
        );
    }
}
