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
