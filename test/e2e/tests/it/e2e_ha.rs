//! Proxmox HA end to end (docs/field-cases.md B33) with the real
//! controller: one cluster over two simulated datacenters, `dc-a` running
//! PVE 8 (HA groups; `/version` 8.4) and `dc-b` running PVE 9 (HA rules;
//! `/version` 9.0). HA is asked for per instance (`spec.settings.instances[].ha`,
//! used by the control plane) and per machine (the worker
//! ProxmoxMachineTemplate's `spec.ha`, which wins). Every provisioned VM
//! becomes the HA resource `vm:<vmid>` in state `started`: in its group on
//! PVE 8, listed in its node-affinity rule on PVE 9. A VM moved to another
//! node of its Proxmox cluster while it boots (before its machine is
//! provisioned) and one moved after provisioning are followed: status shows
//! the new node, the providerID stays, nothing is cloned again. Scaling a
//! MachineDeployment to 0 and deleting the Cluster leave no HA resource, VM,
//! ISO, address or claim; the operator's HA rules stay.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::leaks;
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use pve_sim::{HaGroupConfig, HaRuleConfig, SimCluster, SimConfig};
use serde_json::{Value, json};

const CLUSTER: &str = "ha1";
const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";
/// The group (PVE 8) and rule (PVE 9) the instances name.
const INSTANCE_HA: &str = "capmox";
/// The group and rule the worker template names (a machine's own HA).
const WORKER_HA: &str = "capmox-workers";
/// A guest boot of 1,200 simulated seconds (6 s at the default scale): the
/// window in which a started VM's machine is not provisioned yet.
const BOOT: f64 = 1200.0;

/// dc-a on PVE 8 with two HA groups over its four nodes, dc-b on PVE 9 with
/// two node-affinity rules over its three (each listing a VM that is no HA
/// resource any more, as a rule file may); dc-c stays unused.
fn sim_config() -> SimConfig {
    let mut sim = SimConfig::builtin_default()
        .with_pve_version("dc-a", "8.4.1")
        .with_pve_version("dc-b", "9.0.6");
    let a = sim.cluster_mut("dc-a").unwrap();
    a.timings.boot = BOOT;
    for group in [INSTANCE_HA, WORKER_HA] {
        a.ha_groups.push(HaGroupConfig {
            group: group.into(),
            nodes: (1..=4).map(|i| format!("pve-a{i}")).collect(),
            restricted: false,
        });
    }
    let b = sim.cluster_mut("dc-b").unwrap();
    for rule in [INSTANCE_HA, WORKER_HA] {
        b.ha_rules.push(HaRuleConfig {
            rule: rule.into(),
            nodes: (1..=3).map(|i| format!("pve-b{i}")).collect(),
            strict: false,
            resources: vec![9999],
        });
    }
    sim
}

/// The multi-instance template over dc-a and dc-b (dc-c's instance,
/// Secret and MachineDeployment left out): two control-plane machines and
/// one worker per datacenter; HA per instance and on the worker template.
fn documents(env: &Env) -> Vec<Value> {
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "2".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "1".into());
    let text = capmox_e2e::clusterctl::render(env::MULTI_INSTANCE_TEMPLATE, &vars).unwrap();
    let mut docs = scenario::parse_documents("multi-instance", &text).unwrap();
    docs.retain(|d| {
        let name = d["metadata"]["name"].as_str().unwrap_or_default();
        name != format!("{CLUSTER}-dc-c-credentials") && name != format!("{CLUSTER}-md-dc-c")
    });
    let ha = |name: &str| json!({"group": name, "rule": name});
    for d in &mut docs {
        if d["kind"] == "ProxmoxCluster" {
            let instances = d["spec"]["settings"]["instances"].as_array_mut().unwrap();
            instances.retain(|i| i["name"] != "dc-c");
            for i in instances {
                i["ha"] = ha(INSTANCE_HA);
            }
        }
        if d["kind"] == "ProxmoxMachineTemplate"
            && d["metadata"]["name"] == format!("{CLUSTER}-worker")
        {
            d["spec"]["template"]["spec"]["ha"] = ha(WORKER_HA);
        }
    }
    docs
}

/// A VM moved by the test: the machine, its VMID, the nodes.
#[derive(Clone, Debug)]
struct Moved {
    machine: String,
    vmid: u32,
    from: String,
    to: String,
    provider_id: Option<String>,
}

/// Another online node of `sim` than `node` (the first by name).
fn other_node(sim: &SimCluster, node: &str) -> String {
    let mut nodes: Vec<String> = sim
        .nodes()
        .into_iter()
        .filter(|n| n.online && n.name != node)
        .map(|n| n.name)
        .collect();
    nodes.sort();
    nodes.remove(0)
}

fn clones(sims: &[SimCluster]) -> u64 {
    sims.iter().map(|c| c.calls().count("POST", CLONE)).sum()
}

fn up(rows: &[MachineRow], need_node: bool) -> bool {
    rows.len() == 4 && rows.iter().all(|r| r.up(need_node))
}

/// What machine `r`'s datacenter says of its VM's HA resource: `(state,
/// group, the rule listing it)`; `None` when it is no HA resource.
type HaSeen = Option<(String, Option<String>, Option<String>)>;

fn ha_of(sims: &[SimCluster], r: &MachineRow) -> HaSeen {
    let dc = r.instance.as_deref()?;
    let vmid = r.vmid?;
    let sim = sims.iter().find(|c| c.name() == dc)?;
    let res = sim.ha_resources().into_iter().find(|h| h.vmid == vmid)?;
    let sid = format!("vm:{vmid}");
    let rule = [INSTANCE_HA, WORKER_HA]
        .into_iter()
        .find(|rule| {
            sim.ha_rule_resources(rule)
                .is_some_and(|l| l.contains(&sid))
        })
        .map(str::to_string);
    Some((res.state, res.group, rule))
}

/// What is asked: state `started`; on PVE 8 (dc-a) the group, on PVE 9
/// the rule — the instance's for the control plane, the worker
/// template's for workers.
fn ha_wanted(r: &MachineRow) -> HaSeen {
    let name = if r.control_plane {
        INSTANCE_HA
    } else {
        WORKER_HA
    };
    Some(match r.instance.as_deref() {
        Some("dc-a") => ("started".to_string(), Some(name.to_string()), None),
        _ => ("started".to_string(), None, Some(name.to_string())),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_on_pve8_and_pve9_followed_when_moved_and_nothing_left() {
    let mut env = Env::start(EnvOptions {
        sim: Some(sim_config()),
        ..EnvOptions::new("ha")
    })
    .await
    .unwrap();
    for doc in documents(&env) {
        scenario::apply_value(&env.client, &env.namespace, doc)
            .await
            .unwrap();
    }
    let need_node = env.nodes_join();
    let sims: Vec<SimCluster> = ["dc-a", "dc-b"]
        .iter()
        .map(|dc| env.pve.cluster(dc).unwrap().clone())
        .collect();

    // Provisioning; the first dc-a VM seen running while its machine is not
    // provisioned yet (it boots) is moved to another node.
    let moved: Arc<Mutex<Option<Moved>>> = Arc::default();
    let ns = env.namespace.clone();
    let (dc_a, slot) = (sims[0].clone(), moved.clone());
    let started = std::time::Instant::now();
    let rows = env
        .wait_for(
            "4 machines provisioned, a dc-a VM moved while it boots",
            env.waits.sim(3.0 * 400.0 + 3.0 * BOOT),
            |client| {
                let (ns, dc_a, slot) = (ns.clone(), dc_a.clone(), slot.clone());
                async move {
                    let rows = observe::machine_rows(&client, &ns).await?;
                    let done = slot.lock().unwrap().is_some();
                    let booting = rows.iter().find_map(|r| {
                        let vm = dc_a.vm(r.vmid?)?;
                        (!done
                            && !r.provisioned
                            && r.instance.as_deref() == Some("dc-a")
                            && vm.status == "running"
                            && vm.lock.is_none())
                        .then(|| (r.clone(), vm.node))
                    });
                    if let Some((r, from)) = booting {
                        let to = other_node(&dc_a, &from);
                        let vmid = r.vmid.unwrap();
                        if dc_a.migrate_vm(vmid, &to).await.is_ok() {
                            eprintln!(
                                "[e2e] moved VM {vmid} of {} {from} -> {to} while it boots",
                                r.name
                            );
                            *slot.lock().unwrap() = Some(Moved {
                                machine: r.name.clone(),
                                vmid,
                                from,
                                to,
                                provider_id: None,
                            });
                        }
                    }
                    let moved = slot.lock().unwrap().clone();
                    let followed = moved.as_ref().is_some_and(|m| {
                        rows.iter().any(|r| {
                            r.name == m.machine && r.proxmox_node.as_deref() == Some(&m.to)
                        })
                    });
                    Ok(if up(&rows, need_node) && followed {
                        Progress::Done(rows)
                    } else {
                        Progress::Pending(format!("moved {moved:?}; {}", observe::summary(&rows)))
                    })
                }
            },
        )
        .await
        .unwrap();
    let provisioned_in = started.elapsed();
    let during = moved.lock().unwrap().clone().unwrap();
    assert_ne!(during.from, during.to);
    assert_eq!(sims[0].vm(during.vmid).unwrap().node, during.to);
    let per_dc: BTreeMap<String, usize> = observe::per_instance(&rows);
    assert_eq!(
        per_dc,
        BTreeMap::from([("dc-a".to_string(), 2), ("dc-b".to_string(), 2)])
    );
    assert!(
        env.pve
            .cluster("dc-c")
            .unwrap()
            .vms()
            .iter()
            .all(|v| v.template)
    );

    // Each VM becomes the HA resource vm:<vmid>, state started: in its group
    // on PVE 8, listed in its rule (no group) on PVE 9; control plane by the
    // instance's settings, workers by their own. Registration follows
    // provisioning.
    let sims_ha = sims.clone();
    let rows_ha = rows.clone();
    env.wait_for(
        "every VM the HA resource asked for",
        env.waits.sim(600.0),
        |_| {
            let wrong: Vec<(String, HaSeen)> = rows_ha
                .iter()
                .map(|r| (r.name.clone(), ha_of(&sims_ha, r)))
                .filter(|(name, seen)| {
                    let r = rows_ha.iter().find(|r| &r.name == name).unwrap();
                    *seen != ha_wanted(r)
                })
                .collect();
            async move {
                Ok(if wrong.is_empty() {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("not as asked: {wrong:?}"))
                })
            }
        },
    )
    .await
    .unwrap();
    // Each ProxmoxMachine records its resource (what deletion removes).
    let mut want_records: Vec<String> = rows
        .iter()
        .map(|r| format!("vm:{}", r.vmid.unwrap()))
        .collect();
    want_records.sort();
    let ns_rec = ns.clone();
    env.wait_for(
        "every ProxmoxMachine records its HA resource",
        env.waits.sim(600.0),
        |client| {
            let (ns, want) = (ns_rec.clone(), want_records.clone());
            async move {
                let pms = scenario::list(
                    &client,
                    &ns,
                    "infrastructure.cluster.x-k8s.io/v1alpha3",
                    "ProxmoxMachine",
                )
                .await?;
                let mut got: Vec<String> = pms
                    .iter()
                    .filter_map(|o| o.data["status"]["haResource"].as_str().map(String::from))
                    .collect();
                got.sort();
                Ok(if got == want {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("recorded {got:?}, want {want:?}"))
                })
            }
        },
    )
    .await
    .unwrap();
    let clones_provisioned = clones(&sims);
    assert_eq!(clones_provisioned, 4, "one clone per machine");

    // After provisioning: the PVE 9 control-plane VM, an HA resource, is
    // moved; the machine follows, its providerID stays.
    let rows = observe::machine_rows(&env.client, &ns).await.unwrap();
    let cp_b = rows
        .iter()
        .find(|r| r.control_plane && r.instance.as_deref() == Some("dc-b"))
        .unwrap()
        .clone();
    let vmid = cp_b.vmid.unwrap();
    let from = sims[1].vm(vmid).unwrap().node;
    let after = Moved {
        machine: cp_b.name.clone(),
        vmid,
        to: other_node(&sims[1], &from),
        from,
        provider_id: cp_b.provider_id.clone(),
    };
    assert!(after.provider_id.is_some(), "{cp_b:?}");
    sims[1].migrate_vm(vmid, &after.to).await.unwrap();
    let moved_at = std::time::Instant::now();
    let target = after.clone();
    let rows = env
        .wait_machines(
            "the PVE 9 control-plane machine follows its VM",
            env.waits.sim(600.0),
            move |rows| {
                rows.iter().any(|r| {
                    r.name == target.machine && r.proxmox_node.as_deref() == Some(&target.to)
                })
            },
        )
        .await
        .unwrap();
    let followed_in = moved_at.elapsed();
    for m in [&during, &after] {
        let r = rows.iter().find(|r| r.name == m.machine).unwrap();
        assert_eq!(r.vmid, Some(m.vmid), "{r:?}");
        assert!(r.provisioned, "{r:?}");
        if m.provider_id.is_some() {
            assert_eq!(r.provider_id, m.provider_id, "providerID unchanged");
        }
    }
    assert_eq!(
        sims[1]
            .ha_resources()
            .iter()
            .filter(|h| h.vmid == vmid)
            .count(),
        1,
        "still an HA resource after the move"
    );
    assert_eq!(clones(&sims), clones_provisioned, "nothing cloned again");

    // Scale dc-b's workers to 0: the worker's HA resource goes, then its VM;
    // the operator's rule stays (PVE 9 refuses a rule without resources, so
    // a rule whose last resource it was keeps naming the removed one).
    scenario::scale_machine_deployment(&env.client, &ns, &format!("{CLUSTER}-md-dc-b"), 0)
        .await
        .unwrap();
    let worker_b = rows
        .iter()
        .find(|r| !r.control_plane && r.instance.as_deref() == Some("dc-b"))
        .unwrap()
        .vmid
        .unwrap();
    let dc_b = sims[1].clone();
    env.wait_for(
        "dc-b's worker, its VM and its HA resource gone",
        env.waits.sim(600.0),
        |_| {
            let vm = dc_b.vm(worker_b).is_some();
            let ha = dc_b.ha_resources().iter().any(|h| h.vmid == worker_b);
            let listed = dc_b.ha_rule_resources(WORKER_HA);
            async move {
                Ok(if !vm && !ha && listed.is_some() {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("VM {vm}, HA resource {ha}, rule {listed:?}"))
                })
            }
        },
    )
    .await
    .unwrap();

    // Delete the Cluster: nothing of it is left, in Kubernetes or Proxmox;
    // the operator's HA rules stay.
    leaks::delete_cluster_and_wait(&mut env, CLUSTER)
        .await
        .unwrap();
    for rule in [INSTANCE_HA, WORKER_HA] {
        assert!(sims[1].ha_rule_resources(rule).is_some(), "{rule}");
    }
    assert_eq!(
        clones(&sims),
        clones_provisioned,
        "no clone after provisioning"
    );
    let ha_writes: u64 = sims
        .iter()
        .map(|c| c.calls().count("POST", "/cluster/ha/resources"))
        .sum();
    eprintln!(
        "[e2e] HA: provisioned and moved during boot in {:.1} s, followed a move after provisioning in {:.1} s; {} clone calls, {ha_writes} HA resource creations",
        provisioned_in.as_secs_f64(),
        followed_in.as_secs_f64(),
        clones(&sims)
    );
    assert_eq!(ha_writes, 4, "one HA resource per machine");
    env.shutdown().await;
}
