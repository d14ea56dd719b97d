//! IP addresses through the CAPI IPAM contract: dual stack (B14), DHCP,
//! explicit pool references, pool exhaustion and recovery (B15), and
//! claims released only after the VM is gone (B18).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::common::{IpConfig, IpPoolReference};
use capmox_controller::api::machine::{NetworkDevice, NetworkSpec};
use capmox_controller::capi::ipam::{InClusterIPPool, InClusterIpPoolSpec};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, ResourceExt};
use support::*;

#[tokio::test]
async fn b14_dual_stack_claims_two_addresses_and_reports_both() {
    let w = world().await;
    let mut dc = instance("dc-a", 10);
    dc.network.as_mut().unwrap().ipv6_config = Some(IpConfig {
        addresses: vec!["2001:db8:10::10-2001:db8:10::20".into()],
        prefix: 64,
        gateway: Some("2001:db8:10::1".into()),
        metric: None,
    });
    w.cluster("wl1", multi(vec![dc])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w.provision("m1").await;
    let v6 = w.claims().get("m1-net0-ipv6").await.unwrap();
    assert_eq!(v6.spec.pool_ref.name, "wl1-dc-a-ipv6");
    let st = m.status.unwrap();
    let addrs: Vec<(&str, &str)> = st
        .addresses
        .iter()
        .map(|a| (a.type_.as_str(), a.address.as_str()))
        .collect();
    assert_eq!(
        addrs,
        vec![
            ("InternalIP", "10.10.0.20"),
            ("InternalIP", "2001:db8:10::10"),
            ("Hostname", "m1"),
        ]
    );
    assert_eq!(st.ip_addresses[0].ipv6, vec!["2001:db8:10::10".to_string()]);
    let vm = w
        .pve("dc-a")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    let guest: Vec<&String> = vm.guest_addresses.values().flatten().collect();
    assert!(
        guest.iter().any(|a| *a == "2001:db8:10::10/64"),
        "{guest:?}"
    );
    // Link-local addresses the guest also has are not reported.
    assert!(guest.iter().any(|a| a.starts_with("fe80:")), "{guest:?}");
    assert!(!st.addresses.iter().any(|a| a.address.starts_with("fe80")));
}

#[tokio::test]
async fn dhcp_without_pools_takes_no_claim() {
    let w = world().await;
    let mut dc = instance("dc-a", 10);
    dc.network = None;
    w.cluster("wl1", multi(vec![dc])).await;
    w.machine("wl1", "m1", ProxmoxMachineSpec::default()).await;
    let m = w.provision("m1").await;
    assert!(
        w.claims()
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        condition(&m, "IPAddressesClaimed").unwrap().1,
        "NoStaticAddresses"
    );
    // The simulator's DHCP range on vmbr0 starts at 10.10.0.100.
    assert_eq!(m.status.unwrap().addresses[0].address, "10.10.0.100");
}

#[tokio::test]
async fn an_explicit_pool_reference_is_claimed_from() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let mut pool = InClusterIPPool::new(
        "special",
        InClusterIpPoolSpec {
            addresses: vec!["10.10.0.200/29".into()],
            prefix: 24,
            gateway: Some("10.10.0.1".into()),
            excluded_addresses: vec![],
            allocate_reserved_ip_addresses: None,
        },
    );
    pool.metadata.namespace = Some(NS.into());
    Api::<InClusterIPPool>::namespaced(w.client.clone(), NS)
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    let spec = ProxmoxMachineSpec {
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net0".into(),
                ip_pool_ref: vec![IpPoolReference {
                    api_group: "ipam.cluster.x-k8s.io".into(),
                    kind: "InClusterIPPool".into(),
                    name: "special".into(),
                }],
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    let m = w.provision("m1").await;
    let claims = w.claims().list(&ListParams::default()).await.unwrap().items;
    assert_eq!(
        claims.iter().map(|c| c.name_any()).collect::<Vec<_>>(),
        vec!["m1-net0-0"]
    );
    assert_eq!(claims[0].spec.cluster_name.as_deref(), Some("wl1"));
    let owner = &claims[0].owner_references()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.controller,
            owner.block_owner_deletion
        ),
        ("ProxmoxMachine", Some(true), Some(true))
    );
    // The lowest address of the entry 10.10.0.200/29; network and broadcast
    // are those of the pool's /24 subnet, not of the entry.
    assert_eq!(m.status.unwrap().addresses[0].address, "10.10.0.200");
}

#[tokio::test]
async fn a_slow_ipam_provider_is_waited_for_not_called_exhausted() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    // No provider serves this pool kind here: the claim never gets an address.
    let spec = ProxmoxMachineSpec {
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net0".into(),
                ip_pool_ref: vec![IpPoolReference {
                    api_group: "ipam.cluster.x-k8s.io".into(),
                    kind: "GlobalInClusterIPPool".into(),
                    name: "shared".into(),
                }],
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m1", spec).await;
    // Past the (scaled) patience the message says so; the reason stays a wait.
    let m = w
        .drive("m1", 100, |m| {
            m.and_then(|m| condition(m, "IPAddressesClaimed"))
                .is_some_and(|c| c.2.contains("is the IPAM provider running?"))
                && vm_reason(m) == "WaitingForIPAddresses"
        })
        .await
        .unwrap();
    let c = condition(&m, "IPAddressesClaimed").unwrap();
    assert_eq!(
        (c.0.as_str(), c.1.as_str()),
        ("False", "WaitingForIPAddresses")
    );
    assert!(
        c.2.starts_with(
            "waiting for addresses from GlobalInClusterIPPool shared: m1-net0-0: no address since "
        ),
        "names the pool, the claim and the wait: {}",
        c.2
    );
    assert_eq!(vm_reason(Some(&m)), "WaitingForIPAddresses");
    assert!(!c.2.contains("xhausted"), "{}", c.2);
    // Polls while it waits write nothing: the message tells since when the
    // claim waits, not for how long, so the status stays as it is (a
    // status write per poll per waiting machine loaded the API server and
    // every watcher of ProxmoxMachines in the fault scenario).
    let version = m.resource_version();
    for _ in 0..5 {
        w.reconcile("m1").await.unwrap().unwrap();
    }
    let again = w.get("m1").await.unwrap();
    assert_eq!(
        again.resource_version(),
        version,
        "{:?}",
        condition(&again, "IPAddressesClaimed")
    );
}

#[tokio::test]
async fn b15_exhaustion_waits_without_starting_then_recovers() {
    let w = world().await;
    let mut dc = instance("dc-a", 10);
    dc.network
        .as_mut()
        .unwrap()
        .ipv4_config
        .as_mut()
        .unwrap()
        .addresses = vec!["10.10.0.20-10.10.0.21".into()];
    w.cluster("wl1", multi(vec![dc])).await;
    for n in ["m1", "m2"] {
        w.machine("wl1", n, ProxmoxMachineSpec::default()).await;
        w.provision(n).await;
    }
    w.machine("wl1", "m3", ProxmoxMachineSpec::default()).await;
    let m3 = w
        .drive("m3", 100, |m| {
            m.is_some_and(|m| {
                condition(m, "IPAddressesClaimed").is_some_and(|c| c.1 == "IPAddressPoolExhausted")
            }) && vm_reason(m) == "IPAddressPoolExhausted"
        })
        .await
        .unwrap();
    let c = condition(&m3, "IPAddressesClaimed").unwrap();
    assert_eq!(c.0, "False");
    assert!(
        c.2.contains("InClusterIPPool wl1-dc-a-ipv4"),
        "names the pool: {}",
        c.2
    );
    assert!(c.2.contains("PoolExhausted"), "{}", c.2);
    // Cloned but never started without its address (documented).
    let vmid = m3.spec.virtual_machine_id.unwrap();
    assert_eq!(w.pve("dc-a").vm(vmid).unwrap().status, "stopped");
    assert!(
        !w.pve("dc-a")
            .tasks()
            .iter()
            .any(|t| t.kind == "qmstart" && t.id == vmid.to_string())
    );

    // One machine goes away: its address comes back only after its VM is gone.
    let m1_vmid = w.get("m1").await.unwrap().spec.virtual_machine_id.unwrap();
    w.machines()
        .delete("m1", &DeleteParams::default())
        .await
        .unwrap();
    for _ in 0..200 {
        let claim = w.claims().get_opt("m1-net0-ipv4").await.unwrap();
        let vm = w.pve("dc-a").vm(m1_vmid);
        assert!(
            vm.is_none() || claim.is_some(),
            "B18: claim released while VM {m1_vmid} still exists"
        );
        if w.get("m1").await.is_none() {
            break;
        }
        w.reconcile("m1").await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(w.get("m1").await.is_none());
    let m3 = w.provision("m3").await;
    assert_eq!(m3.status.unwrap().addresses[0].address, "10.10.0.20");
}

#[tokio::test]
async fn b16_a_duplicate_address_in_the_same_network_is_not_started() {
    let w = world().await;
    // Two clusters on the same Proxmox cluster with overlapping pools.
    w.cluster_mapped(
        "wl1",
        multi(vec![instance("east", 10)]),
        &[("east", "dc-a")],
    )
    .await;
    w.cluster_mapped(
        "wl2",
        multi(vec![instance("west", 10)]),
        &[("west", "dc-a")],
    )
    .await;
    w.machine("wl1", "wl1-md-0-x", ProxmoxMachineSpec::default())
        .await;
    let first = w.provision("wl1-md-0-x").await;
    assert_eq!(first.status.unwrap().addresses[0].address, "10.10.0.20");
    w.machine("wl2", "wl2-md-0-y", ProxmoxMachineSpec::default())
        .await;
    let m = w
        .drive("wl2-md-0-y", 100, |m| vm_reason(m) == "DuplicateIPAddress")
        .await
        .unwrap();
    let msg = condition(&m, "VirtualMachineProvisioned").unwrap().2;
    assert_eq!(
        msg,
        "address 10.10.0.20 claimed for default/wl2-md-0-y is already held by machine default/wl1-md-0-x in the same network (the Proxmox cluster of instance west, bridge vmbr0, no VLAN); the VM is not started until this is resolved"
    );
    let vmid = m.spec.virtual_machine_id.unwrap();
    assert_eq!(w.pve("dc-a").vm(vmid).unwrap().status, "stopped");

    // The same range on another VLAN is another network: allowed.
    let vlan30 = ProxmoxMachineSpec {
        network: Some(NetworkSpec {
            network_devices: vec![NetworkDevice {
                name: "net0".into(),
                vlan: Some(30),
                ..NetworkDevice::default()
            }],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.cluster_mapped(
        "wl3",
        multi(vec![instance("south", 10)]),
        &[("south", "dc-a")],
    )
    .await;
    w.machine("wl3", "wl3-md-0-z", vlan30).await;
    let z = w.provision("wl3-md-0-z").await;
    assert_eq!(z.status.unwrap().addresses[0].address, "10.10.0.20");
}
