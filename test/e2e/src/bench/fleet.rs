//! The simulated fleet of the benchmark: `N` Proxmox VE datacenters of `M`
//! nodes each (up to [`MAX_DATACENTERS`] × [`MAX_NODES_PER_DATACENTER`]), the workload cluster's manifests over all of them (the
//! repository's multi-instance template, extended past its three instances
//! when more datacenters are simulated), and the lower-bound request for the
//! machines as they were actually placed.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use pve_sim::{FleetRequest, FleetSteps, Placement, SimConfig};
use serde_json::Value;

use crate::env::{self, Env};
use crate::error::{E2eError, Result};
use crate::{clusterctl, scenario};

/// The most nodes per simulated datacenter (`pve-<letter>1` … `pve-<letter>8`).
pub const MAX_NODES_PER_DATACENTER: u32 = 8;

/// Memory of every simulated node, GiB (a common hypervisor size; the
/// 1,000-machine run puts 100 workers of 8 GiB on each datacenter of eight nodes).
pub const NODE_MEMORY_GIB: u64 = 512;

/// Cores of every simulated node.
pub const NODE_CORES: u32 = 64;

/// The most datacenters the benchmark simulates (`dc-a` … `dc-j`; the
/// second octet of their networks, `10 × (i + 1)`, stays below 256).
pub const MAX_DATACENTERS: usize = 10;

/// Name of datacenter `i` (0-based): `dc-a`, `dc-b`, …
pub fn datacenter(i: usize) -> String {
    format!("dc-{}", letter(i))
}

fn letter(i: usize) -> char {
    char::from(b'a' + u8::try_from(i % 26).unwrap_or(0))
}

/// The second octet of datacenter `i`'s networks: 10, 20, 30, …
fn net(i: usize) -> u8 {
    u8::try_from(10 * (i + 1)).unwrap_or(250)
}

/// `datacenters` simulated Proxmox VE clusters (`dc-a` …), each a copy of
/// pve-sim's built-in `dc-a` with `nodes` nodes
/// `pve-<letter>1…<nodes>` of [`NODE_CORES`] cores and [`NODE_MEMORY_GIB`] GiB,
/// its template (VMID `9000 + 100 × i`, `ubuntu-2404-kube`, 20 GiB on the
/// shared `ceph` storage of 20 TiB) on the first node, DHCP on `vmbr0` in
/// `10.<10 × (i + 1)>.0.100-250`, and pve-sim's default (realistic) task
/// durations.
///
/// # Errors
/// [`E2eError::Sim`] for 0 or more than [`MAX_DATACENTERS`] datacenters,
/// or 0 or more than [`MAX_NODES_PER_DATACENTER`] nodes.
pub fn sim_config(datacenters: usize, nodes: u32) -> Result<SimConfig> {
    if datacenters == 0 || datacenters > MAX_DATACENTERS {
        return Err(E2eError::Sim(format!(
            "the benchmark simulates 1 to {MAX_DATACENTERS} datacenters, not {datacenters}"
        )));
    }
    if nodes == 0 || nodes > MAX_NODES_PER_DATACENTER {
        return Err(E2eError::Sim(format!(
            "the benchmark simulates 1 to {MAX_NODES_PER_DATACENTER} nodes per datacenter, not {nodes}"
        )));
    }
    let mut cfg = SimConfig::builtin_default();
    let base = cfg
        .clusters
        .first()
        .cloned()
        .ok_or_else(|| E2eError::Sim("pve-sim's built-in default has no cluster".into()))?;
    cfg.clusters = (0..datacenters)
        .map(|i| {
            let mut c = base.clone();
            let l = letter(i);
            let n = net(i);
            c.name = datacenter(i);
            let template_node = format!("pve-{l}1");
            let proto = c.nodes.first().cloned();
            c.nodes = (1..=nodes)
                .filter_map(|k| {
                    let mut node = proto.clone()?;
                    node.name = format!("pve-{l}{k}");
                    node.cores = NODE_CORES;
                    node.memory_gib = NODE_MEMORY_GIB;
                    node.online = true;
                    node.ip = Some(Ipv4Addr::new(10, n, 0, 10 + u8::try_from(k).ok()?));
                    Some(node)
                })
                .collect();
            for b in &mut c.bridges {
                if let Some(d) = &mut b.dhcp {
                    d.start = Ipv4Addr::new(10, n, 0, 100);
                    d.end = Ipv4Addr::new(10, n, 0, 250);
                    d.gateway = Some(Ipv4Addr::new(10, n, 0, 1));
                }
            }
            for (k, t) in c.templates.iter_mut().enumerate() {
                t.vmid = 9000 + 100 * u32::try_from(i).unwrap_or(0) + u32::try_from(k).unwrap_or(0);
                t.node = template_node.clone();
            }
            c
        })
        .collect();
    Ok(cfg)
}

/// The workload cluster's name in every scenario.
pub const CLUSTER: &str = "bench";

/// The MachineDeployment of datacenter `dc` (one per datacenter, as the
/// multi-instance template has it).
pub fn machine_deployment(dc: &str) -> String {
    format!("{CLUSTER}-md-{dc}")
}

/// Name prefix of every worker machine (ProxmoxMachine, Machine and VM).
pub fn worker_prefix() -> String {
    format!("{CLUSTER}-md-")
}

/// The IP range of datacenter `i`'s node pool: `10.<net>.1.1-10.<net>.3.254`
/// in a /16 (762 addresses: room for 200 workers and more).
fn node_ip_range(i: usize) -> String {
    let n = net(i);
    format!("[10.{n}.1.1-10.{n}.3.254]")
}

/// The manifests of the benchmark's workload cluster: the repository's
/// `cluster-template-multi-instance.yaml` rendered with clusterctl's rules
/// for the first three datacenters (one control-plane machine, every
/// MachineDeployment at 0 replicas, the template's default machine sizes:
/// workers 4 cores, 8 GiB, a 60 GB boot disk, `skipCloudInitStatus: true`),
/// and — with more datacenters — one more instance, credentials Secret and
/// MachineDeployment per datacenter, copied from the third.
///
/// # Errors
/// [`E2eError::Render`] / [`E2eError::Yaml`] when the template does not
/// render; [`E2eError::Contract`] when it lacks the objects extended here.
pub fn manifests(env: &Env) -> Result<Vec<Value>> {
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "0".into());
    let clusters = env.pve.clusters();
    for i in 0..clusters.len().min(3) {
        let k = i + 1;
        vars.insert(format!("PROXMOX_{k}_NODE_IP_RANGES"), node_ip_range(i));
        vars.insert(format!("PROXMOX_{k}_IP_PREFIX"), "16".into());
        vars.insert(format!("PROXMOX_{k}_GATEWAY"), format!("10.{}.0.1", net(i)));
    }
    let text = clusterctl::render(env::MULTI_INSTANCE_TEMPLATE, &vars).map_err(|source| {
        E2eError::Render {
            template: "cluster-template-multi-instance.yaml".into(),
            source,
        }
    })?;
    let mut docs = scenario::parse_documents("cluster-template-multi-instance.yaml", &text)?;
    for (i, c) in clusters.iter().enumerate().skip(3) {
        extend(&mut docs, i, c)?;
    }
    Ok(docs)
}

fn kind_of(d: &Value) -> &str {
    d.get("kind").and_then(Value::as_str).unwrap_or_default()
}

fn name_of(d: &Value) -> &str {
    d.pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn set(v: &mut Value, pointer: &str, value: Value) -> Result<()> {
    let slot = v
        .pointer_mut(pointer)
        .ok_or_else(|| E2eError::Contract(format!("the template has no {pointer}")))?;
    *slot = value;
    Ok(())
}

/// Adds datacenter `i` (≥ 3) to the rendered manifests: an instance in the
/// ProxmoxCluster, its credentials Secret, its MachineDeployment.
fn extend(docs: &mut Vec<Value>, i: usize, c: &pve_sim::SimCluster) -> Result<()> {
    let dc = c.name().to_string();
    let third = datacenter(2);
    let n = net(i);
    let secret_name = format!("{CLUSTER}-{dc}-credentials");
    // The ProxmoxCluster's instance.
    let pc = docs
        .iter_mut()
        .find(|d| kind_of(d) == "ProxmoxCluster")
        .ok_or_else(|| E2eError::Contract("the template has no ProxmoxCluster".into()))?;
    let instances = pc
        .pointer_mut("/spec/settings/instances")
        .and_then(Value::as_array_mut)
        .ok_or_else(|| E2eError::Contract("the ProxmoxCluster has no instances".into()))?;
    let mut inst = instances
        .iter()
        .find(|x| x.get("name").and_then(Value::as_str) == Some(third.as_str()))
        .cloned()
        .ok_or_else(|| E2eError::Contract(format!("no instance {third} to copy")))?;
    set(&mut inst, "/name", Value::from(dc.clone()))?;
    set(
        &mut inst,
        "/credentialsRef/name",
        Value::from(secret_name.clone()),
    )?;
    set(
        &mut inst,
        "/vmIDRange",
        serde_json::json!({"start": 1000, "end": 1999}),
    )?;
    set(
        &mut inst,
        "/network/ipv4Config",
        serde_json::json!({
            "addresses": [node_ip_range(i).trim_matches(['[', ']']).to_string()],
            "prefix": 16,
            "gateway": format!("10.{n}.0.1"),
        }),
    )?;
    instances.push(inst);
    // The credentials Secret.
    let mut secret = docs
        .iter()
        .find(|d| kind_of(d) == "Secret" && name_of(d) == format!("{CLUSTER}-{third}-credentials"))
        .cloned()
        .ok_or_else(|| E2eError::Contract(format!("no credentials Secret of {third} to copy")))?;
    set(&mut secret, "/metadata/name", Value::from(secret_name))?;
    set(
        &mut secret,
        "/stringData",
        serde_json::json!({
            "url": c.url(),
            "token": c.token_id(),
            "secret": c.token_secret(),
            "insecure": "false",
        }),
    )?;
    set(
        &mut secret,
        "/data",
        serde_json::json!({"root_ca": env::base64(c.ca_pem().as_bytes())}),
    )?;
    docs.push(secret);
    // The MachineDeployment.
    let md_third = machine_deployment(&third);
    let md_name = machine_deployment(&dc);
    let mut md = docs
        .iter()
        .find(|d| kind_of(d) == "MachineDeployment" && name_of(d) == md_third)
        .cloned()
        .ok_or_else(|| E2eError::Contract(format!("no MachineDeployment {md_third} to copy")))?;
    set(&mut md, "/metadata/name", Value::from(md_name.clone()))?;
    let label = "cluster.x-k8s.io~1deployment-name";
    set(
        &mut md,
        &format!("/spec/selector/matchLabels/{label}"),
        Value::from(md_name.clone()),
    )?;
    set(
        &mut md,
        &format!("/spec/template/metadata/labels/{label}"),
        Value::from(md_name),
    )?;
    set(
        &mut md,
        "/spec/template/spec/failureDomain",
        Value::from(dc),
    )?;
    docs.push(md);
    Ok(())
}

/// Applies `docs` in order (server-side apply).
///
/// # Errors
/// As [`scenario::apply_value`].
pub async fn apply(env: &Env, docs: &[Value]) -> Result<()> {
    for d in docs {
        scenario::apply_value(&env.client, &env.namespace, d.clone()).await?;
    }
    Ok(())
}

/// The lower-bound request for the workers as placed: per datacenter, full
/// clones (the ProxmoxMachine default, `spec.full` unset) of its template to
/// the nodes the VMs are on, onto the template's storage; the chain after
/// the clone is what the controller's work needs from Proxmox — the ISO
/// upload (overlapping the clone in the model), one disk resize, the start
/// and the boot until the guest agent answers. The asynchronous config
/// task is left out: the controller's one config write is a synchronous
/// `PUT` (no disk is allocated), which costs no task time.
pub fn lower_bound_requests(
    env: &Env,
    placements: &BTreeMap<String, BTreeMap<String, u32>>,
) -> Vec<FleetRequest> {
    placements
        .iter()
        .filter_map(|(dc, nodes)| {
            let c = env.pve.cluster(dc)?;
            let template = c.config().templates.first()?.vmid;
            let placements: Vec<Placement> = nodes
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(node, count)| Placement {
                    node: node.clone(),
                    count: *count,
                })
                .collect();
            (!placements.is_empty()).then(|| FleetRequest {
                cluster: dc.clone(),
                template_vmid: template,
                placements,
                full: Some(true),
                storage: None,
                steps: FleetSteps {
                    upload_iso: true,
                    configure: false,
                    resize: true,
                    start: true,
                    wait_agent: true,
                },
            })
        })
        .collect()
}

/// Where the worker VMs are: datacenter → node → VMs (from the simulator).
pub fn placements(env: &Env) -> BTreeMap<String, BTreeMap<String, u32>> {
    let prefix = worker_prefix();
    placements_of(env, |n| n.starts_with(&prefix))
}

/// Where the VMs whose name `keep` accepts are: datacenter → node → VMs.
pub fn placements_of(
    env: &Env,
    keep: impl Fn(&str) -> bool,
) -> BTreeMap<String, BTreeMap<String, u32>> {
    env.pve
        .clusters()
        .iter()
        .map(|c| {
            let mut nodes = BTreeMap::new();
            for v in crate::observe::vms(c) {
                if v.name.as_deref().is_some_and(&keep) {
                    *nodes.entry(v.node.clone()).or_insert(0) += 1;
                }
            }
            (c.name().to_string(), nodes)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_datacenters_of_four_nodes() {
        let cfg = sim_config(5, 4).unwrap();
        cfg.validate().unwrap();
        let names: Vec<&str> = cfg.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["dc-a", "dc-b", "dc-c", "dc-d", "dc-e"]);
        let e = &cfg.clusters[4];
        let nodes: Vec<&str> = e.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(nodes, ["pve-e1", "pve-e2", "pve-e3", "pve-e4"]);
        assert!(e.nodes.iter().all(|n| n.memory_gib == 512 && n.cores == 64));
        assert_eq!(e.nodes[3].ip, Some(Ipv4Addr::new(10, 50, 0, 14)));
        assert_eq!(e.templates[0].vmid, 9400);
        assert_eq!(e.templates[0].node, "pve-e1");
        assert_eq!(e.templates[0].storage, "ceph");
        let dhcp = e.bridges[0].dhcp.as_ref().unwrap();
        assert_eq!(dhcp.start, Ipv4Addr::new(10, 50, 0, 100));
        assert_eq!(dhcp.gateway, Some(Ipv4Addr::new(10, 50, 0, 1)));
        // pve-sim's realistic durations are kept.
        assert_eq!(e.timings.clone_full, 60.0);
        assert_eq!(e.timings.boot, 100.0);
        assert!(sim_config(0, 4).is_err());
        assert!(sim_config(11, 4).is_err());
        assert!(sim_config(3, 0).is_err());
        assert!(sim_config(3, 9).is_err());
    }

    #[test]
    fn ten_datacenters_of_eight_nodes() {
        let cfg = sim_config(10, 8).unwrap();
        cfg.validate().unwrap();
        let j = &cfg.clusters[9];
        assert_eq!(j.name, "dc-j");
        let nodes: Vec<&str> = j.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(
            nodes,
            [
                "pve-j1", "pve-j2", "pve-j3", "pve-j4", "pve-j5", "pve-j6", "pve-j7", "pve-j8"
            ]
        );
        assert_eq!(j.nodes[7].ip, Some(Ipv4Addr::new(10, 100, 0, 18)));
        assert_eq!(j.templates[0].vmid, 9900);
        assert_eq!(
            j.bridges[0].dhcp.as_ref().unwrap().end,
            Ipv4Addr::new(10, 100, 0, 250)
        );
    }

    #[test]
    fn names_and_ranges() {
        assert_eq!(datacenter(0), "dc-a");
        assert_eq!(datacenter(3), "dc-d");
        assert_eq!(machine_deployment("dc-d"), "bench-md-dc-d");
        assert_eq!(node_ip_range(3), "[10.40.1.1-10.40.3.254]");
    }
}
