//! Temporary baseline call count.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "support/machine.rs"]
mod support;
use capmox_controller::api::ProxmoxMachineSpec;
use support::*;

#[tokio::test]
async fn baseline_calls() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    w.pve("dc-a").reset_calls();
    w.provision("m1").await;
    let c = w.pve("dc-a").calls();
    eprintln!("TOTAL {} {:#?}", c.total, c.by_endpoint);
}
