//! Bootstrap: a machine is provisioned only once the bootstrap sentinel
//! (`/run/cluster-api/bootstrap-success.complete`, read through the guest
//! agent's `exec` / `exec-status`) says `success`, unless
//! `checks.skipCloudInitStatus` or `checks.skipQemuGuestAgent` is set; a
//! bootstrap that does not finish keeps the machine waiting (and says so
//! after long), never failed; bootstrap data in a format that cannot be
//! delivered (an unknown one) is refused before any Proxmox call
//! (Ignition: `machine_ignition.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use std::time::Duration;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::machine::Checks;
use capmox_controller::machine::MachineOptions;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::{ListParams, Patch, PatchParams};
use pve_sim::{Fault, FaultKind};
use support::*;

const EXEC: &str = "/nodes/{node}/qemu/{vmid}/agent/exec";
const EXEC_STATUS: &str = "/nodes/{node}/qemu/{vmid}/agent/exec-status";
const INTERFACES: &str = "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces";

fn checks(skip_cloud_init: Option<bool>, skip_agent: Option<bool>) -> ProxmoxMachineSpec {
    ProxmoxMachineSpec {
        checks: Some(Checks {
            skip_cloud_init_status: skip_cloud_init,
            skip_qemu_guest_agent: skip_agent,
        }),
        ..ProxmoxMachineSpec::default()
    }
}

#[tokio::test]
async fn default_checks_read_the_sentinel_once_before_provisioned() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    // Up to the addresses nothing about the bootstrap is asked.
    let m = w
        .drive("m1", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.vm_status.as_deref())
                == Some("running")
        })
        .await
        .unwrap();
    assert!(!provisioned(Some(&m)));
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", EXEC), 0, "{:?}", calls.by_endpoint);

    let m = w.provision("m1").await;
    assert!(m.spec.provider_id.is_some());
    let calls = w.pve("dc-a").calls();
    // One `cat` of the sentinel (pve-sim prints `success` only for that
    // path), its result read exactly once (QGA forgets it after that).
    assert_eq!(calls.count("POST", EXEC), 1, "{:?}", calls.by_endpoint);
    assert_eq!(
        calls.count("GET", EXEC_STATUS),
        1,
        "{:?}",
        calls.by_endpoint
    );
    assert_eq!(calls.count("GET", INTERFACES), 1, "{:?}", calls.by_endpoint);
    assert_eq!(
        condition(&m, "VirtualMachineProvisioned"),
        Some(("True".into(), "Provisioned".into(), String::new()))
    );
}

#[tokio::test]
async fn an_unfinished_bootstrap_waits_and_says_so_after_long() {
    let w = world_with(WorldOptions {
        machine: MachineOptions {
            // 40 s × the time scale 0.005 = 200 ms: several checks fit
            // before it, however loaded the machine is.
            bootstrap_patience: Duration::from_secs(40),
            ..MachineOptions::default()
        },
        ..WorldOptions::default()
    })
    .await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let fault = w.pve("dc-a").add_fault(Fault {
        method: Some("GET".into()),
        path: Some(EXEC_STATUS.into()),
        node: None,
        probability: 1.0,
        count: None,
        kind: FaultKind::Error {
            status: 500,
            message: "QEMU guest agent is not running".into(),
        },
    });
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w
        .drive("m1", 300, |m| {
            m.and_then(|m| condition(m, "VirtualMachineProvisioned"))
                .is_some_and(|c| c.2.starts_with("no bootstrap success after more than"))
        })
        .await
        .unwrap();
    assert!(!provisioned(Some(&m)));
    let (status, reason, message) = condition(&m, "Ready").unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "WaitingForBootstrap")
    );
    assert_eq!(
        message,
        "no bootstrap success after more than 200ms: waiting for the bootstrap to finish: the guest agent did not run the check: QEMU guest agent is not running; look at cloud-init in the guest (/var/log/cloud-init-output.log). The machine is not marked failed: a MachineHealthCheck decides"
    );
    assert_eq!(m.spec.provider_id, None);
    let st = m.status.clone().unwrap();
    assert_eq!(st.vm_status.as_deref(), Some("running"));
    assert!(st.addresses.is_empty(), "addresses come with provisioned");
    let calls = w.pve("dc-a").calls();
    let execs = calls.count("POST", EXEC);
    assert!(execs >= 2, "checked again: {:?}", calls.by_endpoint);
    assert_eq!(
        calls.count("GET", EXEC_STATUS),
        execs,
        "each check's result read once: {:?}",
        calls.by_endpoint
    );

    // The bootstrap finishes: provisioned at the next check.
    w.pve("dc-a").remove_fault(fault);
    let m = w.provision("m1").await;
    assert_eq!(
        condition(&m, "Ready").map(|c| c.0),
        Some("True".to_string())
    );
}

#[tokio::test]
async fn skipped_checks_make_no_exec_call() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "no-ci", checks(Some(true), None)).await;
    w.provision("no-ci").await;
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", EXEC), 0, "{:?}", calls.by_endpoint);
    assert_eq!(calls.count("GET", EXEC_STATUS), 0);
    assert_eq!(calls.count("GET", INTERFACES), 1, "addresses still read");

    // No agent: neither addresses nor the sentinel are asked for.
    w.pve("dc-a").reset_calls();
    w.machine("wl1", "no-agent", checks(None, Some(true))).await;
    w.provision("no-agent").await;
    let calls = w.pve("dc-a").calls();
    assert_eq!(calls.count("POST", EXEC), 0, "{:?}", calls.by_endpoint);
    assert_eq!(calls.count("GET", EXEC_STATUS), 0);
    assert_eq!(calls.count("GET", INTERFACES), 0);
}

#[tokio::test]
async fn unknown_formats_are_refused_before_any_proxmox_call() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    for (name, format) in [("odd", "yaml"), ("odd2", "Ignition")] {
        w.machine_with(
            "wl1",
            name,
            ProxmoxMachineSpec::default(),
            None,
            false,
            false,
        )
        .await;
        w.bootstrap_secret_with(
            "wl1",
            name,
            "{\"ignition\":{\"version\":\"3.4.0\"}}",
            Some(format),
        )
        .await;
    }
    for (name, message) in [
        (
            "odd",
            "bootstrap data format \"yaml\" is unknown; supported formats: cloud-config, ignition",
        ),
        (
            "odd2",
            "bootstrap data format \"Ignition\" is unknown; supported formats: cloud-config, ignition",
        ),
    ] {
        // Several reconciles: the refusal is stable and announced once.
        for _ in 0..3 {
            w.reconcile(name).await.unwrap().unwrap();
        }
        let m = w.get(name).await.unwrap();
        assert_eq!(
            condition(&m, "VirtualMachineProvisioned"),
            Some((
                "False".into(),
                "UnsupportedBootstrapFormat".into(),
                message.into()
            ))
        );
        assert_eq!(m.spec.instance, None, "no instance chosen");
        assert_eq!(m.spec.virtual_machine_id, None, "no VMID written");
        let events: Vec<Event> = Api::<Event>::namespaced(w.client.clone(), NS)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                    && e.reason.as_deref() == Some("UnsupportedBootstrapFormat")
            })
            .collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].type_.as_deref(), Some("Warning"));
        assert_eq!(events[0].note.as_deref(), Some(message));
        assert_eq!(events[0].series, None, "published once, not per reconcile");
    }
    assert_eq!(w.pve("dc-a").calls().total, 0, "no Proxmox call at all");
    assert!(w.vms("dc-a").is_empty());
    assert_eq!(
        w.runtime().vmids.holder(
            &capmox_controller::clients::Identity::new("cluster:dc-a"),
            100
        ),
        None,
        "no VMID reserved"
    );

    // The bootstrap provider switches to cloud-config: the machine goes on.
    Api::<Secret>::namespaced(w.client.clone(), NS)
        .patch(
            "odd-bootstrap",
            &PatchParams::default(),
            &Patch::Merge(serde_json::json!({
                "data": {
                    "value": ByteString(USER_DATA.as_bytes().to_vec()),
                    "format": ByteString(b"cloud-config".to_vec()),
                }
            })),
        )
        .await
        .unwrap();
    let m = w.provision("odd").await;
    assert_eq!(m.spec.virtual_machine_id, Some(100));
}
