//! Taking over a cluster the Go provider (CAPMOX v0.9) made, following
//! docs/migrating-from-capmox.md ("Switching").
//!
//! Before: CAPMOX's `cluster-template.yaml` (test/e2e/fixtures/capmox/,
//! rendered with clusterctl's rules: 3 control-plane and 3 worker machines)
//! is applied as `v1alpha2`, and [`capmox_e2e::capmox`] plays CAPMOX: pool,
//! claims, VMs at the next free VMIDs without a marker, `providerID =
//! proxmox://<SMBIOS uuid>`, provisioned, Nodes joined. Our CRDs are already
//! in place, so every `v1alpha2` request goes through the conversion
//! webhook of the controller binary; that process watches another
//! namespace (its reconcilers see none of this cluster), as if only
//! CAPMOX ran.
//!
//! The switch (the doc's steps): pause the Cluster, remove CAPMOX, start
//! ours, read everything through `v1alpha3`, unpause. Measured during the
//! takeover, over the Proxmox API: 0 clones, 0 destroys, 0 power changes;
//! every VM carries our marker and keeps CAPMOX's tags; no new address
//! claim. Then the MachineDeployment scales 3 → 4 (one clone, a new
//! address) and 4 → 1 (adopted VMs destroyed by us), and deleting the
//! Cluster leaves no VM, ISO, claim, address, pool or HA resource.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use capmox_e2e::capmox::{self, CapmoxStandIn};
use capmox_e2e::crds::Cluster;
use capmox_e2e::env::{Env, EnvOptions};
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

const CLUSTER: &str = "wl-capmox";
const MD: &str = "wl-capmox-workers";
const DC: &str = "dc-a";
const V1ALPHA3: &str = "infrastructure.cluster.x-k8s.io/v1alpha3";
const IPAM: &str = "ipam.cluster.x-k8s.io/v1beta2";

/// CAPMOX's template, with the header naming its source.
const TEMPLATE: &str = include_str!("../../fixtures/capmox/cluster-template.yaml");

/// The calls that would make, destroy or power a VM.
const FORBIDDEN: &[(&str, &str)] = &[
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"),
    ("DELETE", "/nodes/{node}/qemu/{vmid}"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/start"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reboot"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/reset"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/suspend"),
    ("POST", "/nodes/{node}/qemu/{vmid}/status/resume"),
];

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// The forbidden calls made on every datacenter since the last reset, by
/// endpoint (only those made at least once).
fn forbidden_calls(env: &Env) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for c in env.pve.clusters() {
        let calls = c.calls();
        for (m, p) in FORBIDDEN {
            let n = calls.count(m, p);
            if n > 0 {
                *out.entry(format!("{m} {p}")).or_default() += n;
            }
        }
    }
    out
}

/// The values a CAPMOX user exports for `clusterctl generate cluster`.
fn vars(env: &Env) -> BTreeMap<String, String> {
    let mut v = ok(env.default_vars(CLUSTER, DC));
    for (k, val) in [
        ("IP_PREFIX", "24"),
        ("DNS_SERVERS", "[10.10.0.1]"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "3"),
        (
            "VM_SSH_KEYS",
            "\"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e capmox-e2e\"",
        ),
        ("BOOT_VOLUME_DEVICE", "scsi0"),
        ("BOOT_VOLUME_SIZE", "20"),
        ("BRIDGE", "vmbr0"),
        ("NUM_SOCKETS", "1"),
        ("NUM_CORES", "2"),
        ("MEMORY_MIB", "4096"),
        // The shell variables of the kube-vip script (bare `$NAME`, which
        // clusterctl's envsubst substitutes too): each set to its own
        // reference, so the script stays as written.
        ("KUBEADM_MINOR", "$KUBEADM_MINOR"),
        ("IS_KUBEADM_INIT", "$IS_KUBEADM_INIT"),
    ] {
        v.insert(k.into(), val.into());
    }
    v
}

async fn set_paused(env: &Env, paused: bool) {
    Api::<Cluster>::namespaced(env.client.clone(), &env.namespace)
        .patch(
            CLUSTER,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": paused}})),
        )
        .await
        .unwrap();
}

/// Names of the objects of `kind` in the namespace.
async fn names(env: &Env, api_version: &str, kind: &str) -> BTreeSet<String> {
    ok(scenario::list(&env.client, &env.namespace, api_version, kind).await)
        .iter()
        .map(ResourceExt::name_any)
        .collect()
}

/// `IPAddress` name → address.
async fn addresses(env: &Env) -> BTreeMap<String, String> {
    ok(scenario::list(&env.client, &env.namespace, IPAM, "IPAddress").await)
        .iter()
        .map(|a| {
            let addr = a.data.pointer("/spec/address").and_then(|v| v.as_str());
            (a.name_any(), addr.unwrap_or_default().to_string())
        })
        .collect()
}

/// Waits until the namespace has `cp` control-plane and `workers` worker
/// machines, all provisioned with Nodes and none being deleted.
async fn machines_up(env: &mut Env, what: &str, cp: usize, workers: usize) -> Vec<MachineRow> {
    let timeout = env.waits.sim(600.0);
    ok(env
        .wait_machines(what, timeout, |rows| {
            rows.iter().filter(|r| r.control_plane).count() == cp
                && rows.iter().filter(|r| !r.control_plane).count() == workers
                && rows.iter().all(|r| r.up(true) && !r.deleting)
        })
        .await)
}

#[tokio::test]
async fn a_capmox_cluster_is_taken_over_scaled_and_deleted() {
    let mut opts = EnvOptions::new("takeover");
    opts.default_credentials = Some(DC.into());
    opts.start_controller = false;
    let mut env = ok(Env::start(opts).await);
    if env.is_real() {
        env.shutdown().await;
        panic!(
            "e2e_takeover cannot run against a real cluster (E2E_REAL=1): it plays CAPMOX and the kubelets with the simulated backend's stand-ins. Run it without E2E_REAL."
        );
    }

    // ---- CAPMOX's era ----
    env.set_controller_namespace(Some("capmox-system"));
    ok(env.start_controller().await);
    let sim = env.pve.cluster(DC).unwrap().clone();
    let capmox = CapmoxStandIn::start(
        env.client.clone(),
        env.namespace.clone(),
        sim.clone(),
        env.nodes().unwrap(),
        Duration::from_millis(200),
    );
    let vars = vars(&env);
    ok(env
        .apply_template("CAPMOX cluster-template.yaml", TEMPLATE, &vars)
        .await);
    let before = machines_up(&mut env, "CAPMOX's 3 + 3 machines", 3, 3).await;
    let made = capmox.made();
    assert_eq!(made.len(), 6, "{made:?}");
    for r in &before {
        let m = &made[&r.name];
        assert_eq!(r.vmid, Some(m.vmid), "{r:?}");
        assert_eq!(r.provider_id, Some(format!("proxmox://{}", m.uuid)));
    }
    let vms_before: BTreeMap<u32, pve_sim::VmSnapshot> = observe::vms(&sim)
        .into_iter()
        .map(|v| (v.vmid, v))
        .collect();
    assert_eq!(vms_before.len(), 6);
    let claims_before = names(&env, IPAM, "IPAddressClaim").await;
    let want_claims: BTreeSet<String> = made.keys().map(|m| capmox::claim_name(m)).collect();
    assert_eq!(claims_before, want_claims);
    let addresses_before = addresses(&env).await;
    assert_eq!(addresses_before.len(), 6);

    // ---- The switch (docs/migrating-from-capmox.md, "Switching") ----
    // 2. Pause the cluster.
    set_paused(&env, true).await;
    // 4. Remove CAPMOX's controller; its CRDs and objects stay.
    capmox.shutdown().await;
    ok(env.kill_controller().await);
    // 5. Install this provider (its CRDs are in place): the manager now
    //    watches the cluster's namespace.
    env.set_controller_namespace(None);
    for c in env.pve.clusters() {
        c.reset_calls();
    }
    ok(env.start_controller().await);
    // 6. Everything reads through v1alpha3.
    assert_eq!(names(&env, V1ALPHA3, "ProxmoxMachine").await.len(), 6);
    assert_eq!(
        names(&env, V1ALPHA3, "ProxmoxCluster").await,
        BTreeSet::from([CLUSTER.to_string()])
    );
    // 7. Unpause: every machine is adopted.
    set_paused(&env, false).await;
    let ns = env.namespace.clone();
    let sim2 = sim.clone();
    let adopted = ok(env
        .wait_for("every CAPMOX VM adopted", env.waits.sim(300.0), |client| {
            let ns = ns.clone();
            let sim = sim2.clone();
            async move {
                let pms = scenario::list(&client, &ns, V1ALPHA3, "ProxmoxMachine").await?;
                let mut missing = Vec::new();
                let mut uids = BTreeMap::new();
                for pm in &pms {
                    let uid = pm.uid().unwrap_or_default();
                    let vmid = pm
                        .data
                        .pointer("/spec/virtualMachineID")
                        .and_then(|v| v.as_u64())
                        .and_then(|v| u32::try_from(v).ok());
                    let marked = vmid
                        .and_then(|v| sim.vm(v))
                        .is_some_and(|vm| vm.tags.contains(&format!("capmox-{uid}")));
                    if !marked {
                        missing.push(pm.name_any());
                    }
                    uids.insert(pm.name_any(), (uid, vmid));
                }
                Ok(if missing.is_empty() && pms.len() == 6 {
                    Progress::Done(uids)
                } else {
                    Progress::Pending(format!("not adopted yet: {missing:?}"))
                })
            }
        })
        .await);
    // Provisioned and stable.
    let rows = machines_up(&mut env, "the adopted machines up", 3, 3).await;
    let calls = sim.calls();
    eprintln!(
        "takeover: {} Proxmox calls ({} errors), by endpoint: {:?}",
        calls.total, calls.errors, calls.by_endpoint
    );
    assert_eq!(
        forbidden_calls(&env),
        BTreeMap::new(),
        "the takeover touched VMs"
    );
    let clones = env
        .pve
        .clusters()
        .iter()
        .map(|c| c.calls().count("POST", "/nodes/{node}/qemu/{vmid}/clone"))
        .sum::<u64>();
    assert_eq!(clones, 0);
    for r in &rows {
        assert_eq!(r.vmid, Some(made[&r.name].vmid), "{r:?}");
        assert_eq!(
            r.provider_id,
            Some(format!("proxmox://{}", made[&r.name].uuid)),
            "{r:?}"
        );
    }
    let vms_after: BTreeMap<u32, pve_sim::VmSnapshot> = observe::vms(&sim)
        .into_iter()
        .map(|v| (v.vmid, v))
        .collect();
    assert_eq!(
        vms_after.keys().collect::<Vec<_>>(),
        vms_before.keys().collect::<Vec<_>>(),
        "no VM made or lost"
    );
    for (name, (uid, vmid)) in &adopted {
        let vmid = vmid.unwrap();
        let (was, now) = (&vms_before[&vmid], &vms_after[&vmid]);
        assert_eq!(now.status, "running", "{name}");
        assert_eq!(
            now.config.get("smbios1"),
            was.config.get("smbios1"),
            "{name}"
        );
        // CAPMOX's tags kept, our marker added.
        for t in &was.tags {
            assert!(now.tags.contains(t), "{name}: {t} lost: {:?}", now.tags);
        }
        assert!(now.tags.contains(&format!("capmox-{uid}")), "{name}");
        let description = now.config.get("description").cloned().unwrap_or_default();
        assert!(
            description.contains(&format!("capmox: {}/{name} uid={uid}", env.namespace)),
            "{name}: {description:?}"
        );
    }
    assert_eq!(
        names(&env, IPAM, "IPAddressClaim").await,
        claims_before,
        "no new address claim for machines that had addresses"
    );
    assert_eq!(addresses(&env).await, addresses_before);
    let isos: usize = env
        .pve
        .clusters()
        .iter()
        .map(|c| observe::isos(c).len())
        .sum();
    assert_eq!(isos, 0, "CAPMOX had removed its ISOs; none made");

    // ---- Scale up: a machine of ours, cloned and provisioned ----
    ok(scenario::scale_machine_deployment(&env.client, &env.namespace, MD, 4).await);
    let rows = machines_up(&mut env, "4 workers", 3, 4).await;
    let clones = env
        .pve
        .clusters()
        .iter()
        .map(|c| c.calls().count("POST", "/nodes/{node}/qemu/{vmid}/clone"))
        .sum::<u64>();
    assert_eq!(clones, 1, "one clone for the new worker");
    let new: Vec<&MachineRow> = rows
        .iter()
        .filter(|r| !made.contains_key(&r.name))
        .collect();
    assert_eq!(new.len(), 1, "{rows:?}");
    let new = new[0];
    let new_vm = sim.vm(new.vmid.unwrap()).unwrap();
    assert!(
        new_vm.tags.iter().any(|t| t.starts_with("capmox-")),
        "{:?}",
        new_vm.tags
    );
    let capmox_ips: BTreeSet<&String> = addresses_before.values().collect();
    let all_ips = addresses(&env).await;
    let ips: BTreeSet<&String> = all_ips.values().collect();
    assert_eq!(
        ips.len(),
        all_ips.len(),
        "an address given twice: {all_ips:?}"
    );
    assert!(
        new.address
            .as_ref()
            .is_some_and(|a| !capmox_ips.contains(a)),
        "the new machine's address {:?} is one of CAPMOX's {capmox_ips:?}",
        new.address
    );

    // ---- Scale down: adopted workers go, by our marker ----
    ok(scenario::scale_machine_deployment(&env.client, &env.namespace, MD, 1).await);
    let rows = machines_up(&mut env, "1 worker", 3, 1).await;
    let live: BTreeSet<u32> = rows.iter().filter_map(|r| r.vmid).collect();
    let sim3 = sim.clone();
    let ns = env.namespace.clone();
    ok(env
        .wait_for(
            "the VMs, claims and addresses of removed workers gone",
            env.waits.sim(300.0),
            |client| {
                let got: BTreeSet<u32> = observe::vms(&sim3).iter().map(|v| v.vmid).collect();
                let live = live.clone();
                let ns = ns.clone();
                async move {
                    let claims = scenario::list(&client, &ns, IPAM, "IPAddressClaim").await?;
                    let addresses = scenario::list(&client, &ns, IPAM, "IPAddress").await?;
                    let (c, a) = (claims.len(), addresses.len());
                    Ok(if got == live && c == live.len() && a == live.len() {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!(
                            "VMs {got:?}, machines {live:?}, claims {c}, addresses {a}"
                        ))
                    })
                }
            },
        )
        .await);
    let destroys: u64 = env
        .pve
        .clusters()
        .iter()
        .map(|c| c.calls().count("DELETE", "/nodes/{node}/qemu/{vmid}"))
        .sum();
    eprintln!("scaled 4 -> 1 workers: {destroys} VM destroy calls");

    // ---- Delete the cluster: nothing left behind ----
    Api::<Cluster>::namespaced(env.client.clone(), &env.namespace)
        .delete(CLUSTER, &DeleteParams::default())
        .await
        .unwrap();
    let clusters = env.pve.clusters().to_vec();
    let ns = env.namespace.clone();
    ok(env
        .wait_for(
            "the whole cluster deleted",
            env.waits.sim(600.0),
            |client| {
                let ns = ns.clone();
                let vms: usize = clusters.iter().map(|c| observe::vms(c).len()).sum();
                let isos: usize = clusters.iter().map(|c| observe::isos(c).len()).sum();
                let ha: usize = clusters.iter().map(|c| c.ha_resources().len()).sum();
                async move {
                    let mut left = BTreeMap::new();
                    for (api_version, kind) in [
                        ("cluster.x-k8s.io/v1beta2", "Cluster"),
                        ("cluster.x-k8s.io/v1beta2", "Machine"),
                        (V1ALPHA3, "ProxmoxCluster"),
                        (V1ALPHA3, "ProxmoxMachine"),
                        (IPAM, "IPAddressClaim"),
                        (IPAM, "IPAddress"),
                        ("ipam.cluster.x-k8s.io/v1alpha2", "InClusterIPPool"),
                    ] {
                        let n = scenario::list(&client, &ns, api_version, kind).await?.len();
                        if n > 0 {
                            left.insert(kind.to_string(), n);
                        }
                    }
                    Ok(if left.is_empty() && vms == 0 && isos == 0 && ha == 0 {
                        Progress::Done(())
                    } else {
                        Progress::Pending(format!(
                            "objects {left:?}, VMs {vms}, ISOs {isos}, HA resources {ha}"
                        ))
                    })
                }
            },
        )
        .await);
    env.shutdown().await;
}
