//! The benchmark's denominator: the least wall time the simulated
//! datacenters allow for a fleet of clones, under their own task durations
//! and lock rules. No client can be faster than this against the simulator.
//!
//! # Model
//!
//! For each machine of a [`FleetRequest`] the simulator's work is a chain:
//!
//! 1. **clone** of the template: storage allocations, then the copy time `D`
//!    (`clone_full + clone_full_per_gib × GiB` for full clones,
//!    `clone_linked` for linked ones; full is the default for ordinary VMs,
//!    linked for templates, as in Proxmox);
//! 2. **configure** (`config`), **resize** (`resize`), **start** (`start`) and
//!    **boot** until the agent answers (`boot`), each optional;
//! 3. the cloud-init ISO **upload** (`upload`) needs no VM, so it overlaps
//!    with the clone; the chain after the clone waits for both.
//!
//! Constraints between machines:
//!
//! * clones of a stopped template hold its flock *shared*, so they run in
//!   parallel; clones of a running VM hold it exclusively and serialize
//!   (docs/proxmox-semantics.md §6);
//! * a storage with an [`crate::config::AllocLock`] admits `max_parallel`
//!   allocations of `hold` seconds at a time (per node for local storages,
//!   cluster-wide for shared ones); all allocations of a queue need at least
//!   `ceil(jobs / max_parallel) × hold`, and the clone that allocates last
//!   still needs its copy time afterwards;
//! * everything else (VMIDs, config, start) is per VM and parallel.
//!
//! Clusters are independent; the fleet's bound is the largest cluster bound.
//! All durations are multiplied by the time scale.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{ClusterConfig, VmConfig};
use crate::error::SimError;

/// Clones of one template in one cluster, spread over nodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FleetRequest {
    /// Cluster name.
    pub cluster: String,
    /// Source template (or VM) VMID.
    pub template_vmid: u32,
    /// Target nodes and machine counts.
    pub placements: Vec<Placement>,
    /// Full clone; default: linked for templates, full for VMs.
    #[serde(default)]
    pub full: Option<bool>,
    /// Target storage of full clones; default: the template's storage.
    #[serde(default)]
    pub storage: Option<String>,
    /// Which per-machine steps the workload performs.
    #[serde(default)]
    pub steps: FleetSteps,
}

/// Machines on one target node.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Placement {
    /// Target node.
    pub node: String,
    /// Number of machines.
    pub count: u32,
}

/// Per-machine steps after the clone (all on by default).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields, default)]
pub struct FleetSteps {
    /// Upload a cloud-init ISO (overlaps with the clone).
    pub upload_iso: bool,
    /// One asynchronous config update.
    pub configure: bool,
    /// One disk resize.
    pub resize: bool,
    /// Start the VM.
    pub start: bool,
    /// Wait until the guest agent answers.
    pub wait_agent: bool,
}

impl Default for FleetSteps {
    fn default() -> Self {
        FleetSteps {
            upload_iso: true,
            configure: true,
            resize: true,
            start: true,
            wait_agent: true,
        }
    }
}

/// Serialises durations as seconds (a JSON number).
mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let f = f64::deserialize(d)?;
        Duration::try_from_secs_f64(f).map_err(serde::de::Error::custom)
    }
}

/// The bound and how it came about (durations already time-scaled; in JSON
/// as seconds).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct LowerBound {
    /// Least wall time for the whole fleet.
    #[serde(with = "secs")]
    pub total: Duration,
    /// Per cluster.
    pub clusters: BTreeMap<String, ClusterBound>,
}

/// The bound of one cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ClusterBound {
    /// Machines in this cluster.
    pub machines: u32,
    /// Least time until the last clone task ends.
    #[serde(with = "secs")]
    pub clone_phase: Duration,
    /// Per-machine time after the clone (config, resize, start, boot).
    #[serde(with = "secs")]
    pub after_clone: Duration,
    /// `max(clone_phase, upload) + after_clone`.
    #[serde(with = "secs")]
    pub total: Duration,
}

fn find_source(c: &ClusterConfig, vmid: u32) -> Option<(&VmConfig, bool)> {
    c.templates
        .iter()
        .find(|t| t.vmid == vmid)
        .map(|t| (t, true))
        .or_else(|| c.vms.iter().find(|v| v.vmid == vmid).map(|v| (v, false)))
}

/// Computes the lower bound of `requests` against `clusters` at `time_scale`.
///
/// # Errors
/// [`SimError::LowerBound`] for an unknown cluster, source VMID, node or
/// storage, or a request without machines.
pub fn compute(
    clusters: &[ClusterConfig],
    time_scale: f64,
    requests: &[FleetRequest],
) -> Result<LowerBound, SimError> {
    let err = |m: String| SimError::LowerBound(m);
    let scale = |secs: f64| Duration::from_secs_f64((secs * time_scale).max(0.0));
    let mut per_cluster: BTreeMap<String, Vec<&FleetRequest>> = BTreeMap::new();
    for r in requests {
        per_cluster.entry(r.cluster.clone()).or_default().push(r);
    }
    let mut out = BTreeMap::new();
    for (name, reqs) in per_cluster {
        let c = clusters
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| err(format!("unknown cluster '{name}'")))?;
        let t = &c.timings;
        // queue key -> (jobs, max_parallel, hold, min copy time of its users)
        let mut queues: BTreeMap<String, (u64, u32, f64, f64)> = BTreeMap::new();
        let mut phase: f64 = 0.0;
        let mut after: f64 = 0.0;
        let mut upload: f64 = 0.0;
        let mut machines = 0u32;
        for r in reqs {
            let (src, is_template) = find_source(c, r.template_vmid).ok_or_else(|| {
                err(format!(
                    "cluster '{name}': no template or VM {}",
                    r.template_vmid
                ))
            })?;
            let count: u32 = r.placements.iter().map(|p| p.count).sum();
            if count == 0 {
                return Err(err(format!(
                    "cluster '{name}': request for {} has no machines",
                    r.template_vmid
                )));
            }
            for p in &r.placements {
                if !c.nodes.iter().any(|n| n.name == p.node) {
                    return Err(err(format!("cluster '{name}': unknown node '{}'", p.node)));
                }
            }
            machines += count;
            let full = r.full.unwrap_or(!is_template);
            let mut disk_gib = src.disk_gib as f64;
            let mut disks = 1u64;
            if src.efidisk {
                disks += 1;
                disk_gib += 528.0 / (1024.0 * 1024.0);
            }
            if src.tpm {
                disks += 1;
                disk_gib += 4.0 / 1024.0;
            }
            let copy = if full {
                t.clone_full + t.clone_full_per_gib * disk_gib
            } else {
                t.clone_linked
            };
            let storage = if full {
                r.storage.clone().unwrap_or_else(|| src.storage.clone())
            } else {
                src.storage.clone()
            };
            let sc = c
                .storages
                .iter()
                .find(|s| s.name == storage)
                .ok_or_else(|| err(format!("cluster '{name}': unknown storage '{storage}'")))?;
            let own_alloc = sc.alloc_lock.map(|l| l.hold * disks as f64).unwrap_or(0.0);
            if let Some(l) = sc.alloc_lock {
                let key = if sc.shared {
                    storage.clone()
                } else {
                    format!("{storage}@{}", src.node)
                };
                let e =
                    queues
                        .entry(key)
                        .or_insert((0, l.max_parallel.max(1), l.hold, f64::INFINITY));
                e.0 += disks * u64::from(count);
                e.3 = e.3.min(copy);
            }
            let single = own_alloc + copy;
            let exclusive_source = !is_template && src.running;
            phase = phase.max(if exclusive_source {
                single * f64::from(count)
            } else {
                single
            });
            let s = r.steps;
            let chain = if s.configure { t.config } else { 0.0 }
                + if s.resize { t.resize } else { 0.0 }
                + if s.start { t.start } else { 0.0 }
                + if s.wait_agent { t.boot } else { 0.0 };
            after = after.max(chain);
            if s.upload_iso {
                upload = upload.max(t.upload);
            }
        }
        for (jobs, parallel, hold, min_copy) in queues.values() {
            let rounds = jobs.div_ceil(u64::from(*parallel)) as f64;
            phase = phase.max(rounds * hold + min_copy);
        }
        let total = phase.max(upload) + after;
        out.insert(
            name,
            ClusterBound {
                machines,
                clone_phase: scale(phase),
                after_clone: scale(after),
                total: scale(total),
            },
        );
    }
    let total = out
        .values()
        .map(|b| b.total)
        .max()
        .unwrap_or(Duration::ZERO);
    Ok(LowerBound {
        total,
        clusters: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{AllocLock, SimConfig};

    fn req(cluster: &str, vmid: u32, n: u32) -> FleetRequest {
        FleetRequest {
            cluster: cluster.into(),
            template_vmid: vmid,
            placements: vec![Placement {
                node: format!("pve-{}1", &cluster[3..]),
                count: n,
            }],
            full: None,
            storage: None,
            steps: FleetSteps::default(),
        }
    }

    #[test]
    fn linked_clones_of_a_template_run_in_parallel() {
        let cfg = SimConfig::builtin_default();
        let lb = compute(&cfg.clusters, 1.0, &[req("dc-a", 9000, 50)]).unwrap();
        // linked 5 + config 1 + resize 2 + start 3 + boot 100 = 111 s, independent of 50 machines
        assert_eq!(lb.total, Duration::from_secs(111));
        assert_eq!(lb.clusters["dc-a"].clone_phase, Duration::from_secs(5));
    }

    #[test]
    fn full_clones_and_storage_slots() {
        let mut cfg = SimConfig::builtin_default();
        let a = cfg.cluster_mut("dc-a").unwrap();
        a.storages
            .iter_mut()
            .find(|s| s.name == "local-lvm")
            .unwrap()
            .alloc_lock = Some(AllocLock {
            max_parallel: 2,
            hold: 3.0,
        });
        let mut r = req("dc-a", 9000, 10);
        r.full = Some(true);
        r.storage = Some("local-lvm".into());
        r.steps = FleetSteps {
            upload_iso: false,
            configure: false,
            resize: false,
            start: false,
            wait_agent: false,
        };
        let lb = compute(&cfg.clusters, 0.5, &[r]).unwrap();
        // 10 clones × 2 disks (scsi0 + efidisk0) = 20 allocations, 2 at a time, 3 s each
        // = 30 s, then the last copy 60 s → 90 s; × 0.5 = 45 s
        assert_eq!(lb.total, Duration::from_secs(45));
    }

    #[test]
    fn clusters_are_independent_and_errors_are_named() {
        let cfg = SimConfig::builtin_default();
        let lb = compute(
            &cfg.clusters,
            1.0,
            &[req("dc-a", 9000, 3), req("dc-b", 9100, 3)],
        )
        .unwrap();
        assert_eq!(lb.clusters.len(), 2);
        assert_eq!(lb.total, Duration::from_secs(111));
        let e = compute(&cfg.clusters, 1.0, &[req("dc-b", 9000, 1)]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "cannot compute the lower bound: cluster 'dc-b': no template or VM 9000"
        );
    }
}
