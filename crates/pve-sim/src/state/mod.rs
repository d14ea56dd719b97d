//! The state of one simulated cluster: nodes, VMs, storages, tasks, users,
//! DHCP leases, HA resources, pools. One `Mutex` per cluster, held only for
//! short synchronous sections (never across an `.await`).

pub(crate) mod storage;
pub(crate) mod tasks;
pub(crate) mod vm;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::auth::AuthState;
use crate::certs::ClusterCerts;
use crate::clock::{Clock, epoch_now};
use crate::config::{ClusterConfig, NodeConfig, StorageConfig, VmConfig, seeded_token_secret};
use crate::error::SimError;
use crate::faults::FaultSet;
use crate::locks::{FlockTable, StorageLocks};
use crate::props;
use crate::schema::Schema;
use crate::secret::Secret;
use storage::{StorageState, Volume};
use tasks::TaskTable;
use vm::{RunState, Vm};

/// Runtime data of a node.
#[derive(Clone, Debug)]
pub(crate) struct NodeState {
    pub cfg: NodeConfig,
    pub online: bool,
    pub next_pid: u32,
    pub boot_ticks: u32,
    pub booted: Instant,
}

/// An HA resource (`vm:<vmid>`).
#[derive(Clone, Debug)]
pub(crate) struct HaResource {
    pub state: String,
    pub comment: Option<String>,
    pub group: Option<String>,
    pub max_restart: u32,
    pub max_relocate: u32,
}

/// An HA group (PVE 8).
#[derive(Clone, Debug)]
pub(crate) struct HaGroup {
    /// `node[:priority],…`.
    pub nodes: String,
    pub restricted: bool,
}

/// An HA node-affinity rule (PVE 9).
#[derive(Clone, Debug)]
pub(crate) struct HaRule {
    /// Resource ids (`vm:<vmid>`), as written.
    pub resources: Vec<String>,
    /// `node[:priority],…`.
    pub nodes: String,
    pub strict: bool,
    pub disable: bool,
    pub comment: Option<String>,
}

/// A resource pool.
#[derive(Clone, Debug, Default)]
pub(crate) struct Pool {
    pub comment: Option<String>,
    pub vms: BTreeSet<u32>,
    pub storage: BTreeSet<String>,
}

/// A guest-agent `exec` in flight or finished.
#[derive(Clone, Debug)]
pub(crate) struct ExecState {
    pub started: Instant,
    pub command: Vec<String>,
}

/// Mutable state of one cluster.
#[derive(Debug)]
pub(crate) struct ClusterState {
    pub nodes: BTreeMap<String, NodeState>,
    pub vms: BTreeMap<u32, Vm>,
    pub storages: BTreeMap<String, StorageState>,
    pub tasks: TaskTable,
    pub auth: AuthState,
    /// bridge → address → MAC (lower-case).
    pub leases: BTreeMap<String, BTreeMap<Ipv4Addr, String>>,
    pub ha: BTreeMap<u32, HaResource>,
    pub ha_groups: BTreeMap<String, HaGroup>,
    pub ha_rules: BTreeMap<String, HaRule>,
    /// Bumped on every change of the HA resources, groups or rules (the
    /// configuration digests).
    pub ha_serial: u64,
    pub pools: BTreeMap<String, Pool>,
    pub exec: BTreeMap<(u32, u32), ExecState>,
    pub next_exec_pid: u32,
    pub rng: StdRng,
}

/// Call counts per endpoint (method + path template).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CallLog {
    /// All API calls (control API excluded).
    pub total: u64,
    /// Calls answered with a status >= 400 (or dropped).
    pub errors: u64,
    /// `"GET /nodes/{node}/qemu/{vmid}/config"` → count.
    pub by_endpoint: BTreeMap<String, u64>,
}

impl CallLog {
    /// Count of one endpoint, e.g. `calls.count("POST", "/nodes/{node}/qemu/{vmid}/clone")`.
    pub fn count(&self, method: &str, template: &str) -> u64 {
        self.by_endpoint
            .get(&format!("{method} {template}"))
            .copied()
            .unwrap_or(0)
    }
}

/// Everything about one simulated cluster, shared by its server and handles.
pub(crate) struct Cluster {
    pub index: usize,
    pub cfg: ClusterConfig,
    pub clock: Clock,
    pub schema: Option<Arc<Schema>>,
    pub certs: ClusterCerts,
    pub url: OnceLock<String>,
    pub default_token: Option<String>,
    pub state: Mutex<ClusterState>,
    pub flocks: FlockTable,
    pub storage_locks: StorageLocks,
    pub faults: Mutex<FaultSet>,
    pub calls: Mutex<CallLog>,
    /// Notified whenever a task stops.
    pub task_done: tokio::sync::Notify,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.cfg.name)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Locks the state (poisoning is ignored: the state stays usable).
    pub fn lock(&self) -> MutexGuard<'_, ClusterState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The `/cluster/resources` lag as a real duration.
    pub fn lag(&self) -> Duration {
        self.clock.real(self.cfg.timings.resources_lag)
    }

    pub fn name(&self) -> &str {
        &self.cfg.name
    }

    /// Builds the cluster from its configuration.
    pub fn build(
        index: usize,
        cfg: ClusterConfig,
        seed: u64,
        scale: f64,
        schema: Option<Arc<Schema>>,
    ) -> Result<Cluster, SimError> {
        let names: Vec<String> = cfg.nodes.iter().map(|n| n.name.clone()).collect();
        let certs = crate::certs::generate(&cfg.name, &names)?;
        let mut secrets = BTreeMap::new();
        for t in &cfg.tokens {
            let s = t
                .secret
                .clone()
                .unwrap_or_else(|| seeded_token_secret(seed, index, &t.id));
            secrets.insert(t.id.clone(), s);
        }
        let auth = AuthState::new(&cfg, &secrets)
            .map_err(|e| SimError::Config(format!("cluster '{}': {e}", cfg.name)))?;
        let mut rng = StdRng::seed_from_u64(
            seed.wrapping_add(index as u64)
                .wrapping_mul(0x2545_f491_4f6c_dd1d)
                ^ 0x5eed,
        );
        let nodes = cfg
            .nodes
            .iter()
            .map(|n| {
                let st = NodeState {
                    cfg: n.clone(),
                    online: n.online,
                    next_pid: rng.random_range(0x1000..0x8000),
                    boot_ticks: rng.random_range(0x10_0000..0x80_0000),
                    booted: Instant::now(),
                };
                (n.name.clone(), st)
            })
            .collect();
        let storages = cfg
            .storages
            .iter()
            .map(|s| (s.name.clone(), StorageState::new(s.clone())))
            .collect();
        let mut st = ClusterState {
            nodes,
            vms: BTreeMap::new(),
            storages,
            tasks: TaskTable::default(),
            auth,
            leases: BTreeMap::new(),
            ha: BTreeMap::new(),
            ha_groups: cfg
                .ha_groups
                .iter()
                .map(|g| {
                    (
                        g.group.clone(),
                        HaGroup {
                            nodes: g.nodes.join(","),
                            restricted: g.restricted,
                        },
                    )
                })
                .collect(),
            ha_rules: cfg
                .ha_rules
                .iter()
                .map(|r| {
                    (
                        r.rule.clone(),
                        HaRule {
                            resources: r.resources.iter().map(|v| format!("vm:{v}")).collect(),
                            nodes: r.nodes.join(","),
                            strict: r.strict,
                            disable: false,
                            comment: None,
                        },
                    )
                })
                .collect(),
            ha_serial: 1,
            pools: BTreeMap::new(),
            exec: BTreeMap::new(),
            next_exec_pid: 1000,
            rng,
        };
        let clock = Clock::new(scale);
        let lag = clock.real(cfg.timings.resources_lag);
        for t in &cfg.templates {
            st.add_configured_vm(t, true, lag, &cfg.mac_prefix)
                .map_err(|e| SimError::Config(format!("cluster '{}': {e}", cfg.name)))?;
        }
        for v in &cfg.vms {
            st.add_configured_vm(v, false, lag, &cfg.mac_prefix)
                .map_err(|e| SimError::Config(format!("cluster '{}': {e}", cfg.name)))?;
        }
        for p in &cfg.pools {
            st.pools.insert(
                p.poolid.clone(),
                Pool {
                    comment: p.comment.clone(),
                    vms: p.members.iter().copied().collect(),
                    storage: p.storage.iter().cloned().collect(),
                },
            );
        }
        st.sync_pool_acl();
        let default_token = cfg.tokens.first().map(|t| t.id.clone());
        let mut faults = FaultSet::default();
        for f in &cfg.faults {
            faults.add(f.clone());
        }
        Ok(Cluster {
            index,
            clock,
            schema,
            certs,
            url: OnceLock::new(),
            default_token,
            state: Mutex::new(st),
            flocks: FlockTable::default(),
            storage_locks: StorageLocks::default(),
            faults: Mutex::new(faults),
            calls: Mutex::new(CallLog::default()),
            task_done: tokio::sync::Notify::new(),
            cfg,
        })
    }
}

impl ClusterState {
    /// Hands the pools' members to the privilege computation (an ACL on
    /// `/pool/<pool>` is inherited by its members); called after every
    /// change of a pool's members.
    pub fn sync_pool_acl(&mut self) {
        let pools: Vec<(String, Vec<u32>, Vec<String>)> = self
            .pools
            .iter()
            .map(|(id, p)| {
                (
                    id.clone(),
                    p.vms.iter().copied().collect(),
                    p.storage.iter().cloned().collect(),
                )
            })
            .collect();
        self.auth.set_pool_members(
            pools
                .iter()
                .map(|(id, v, s)| (id.as_str(), v.clone(), s.clone())),
        );
    }

    /// A random UUID (seeded).
    pub fn uuid(&mut self) -> String {
        let bytes: [u8; 16] = self.rng.random();
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string()
    }

    /// A MAC with the datacenter prefix (seeded).
    pub fn mac(&mut self, prefix: &str) -> String {
        let bytes: [u8; 6] = self.rng.random();
        props::generate_mac(prefix, bytes)
    }

    /// A uniform number in [0, 1) for fault probabilities.
    pub fn draw(&mut self) -> f64 {
        self.rng.random::<f64>()
    }

    /// Next QEMU/worker pid on `node`.
    pub fn next_pid(&mut self, node: &str) -> (u32, u32) {
        match self.nodes.get_mut(node) {
            Some(n) => {
                n.next_pid = n.next_pid.wrapping_add(1 + (n.next_pid % 7));
                let ticks = n
                    .boot_ticks
                    .wrapping_add((n.booted.elapsed().as_millis() / 10) as u32);
                (n.next_pid, ticks)
            }
            None => (0, 0),
        }
    }

    /// Whether a node exists and is online.
    pub fn node_online(&self, node: &str) -> bool {
        self.nodes.get(node).is_some_and(|n| n.online)
    }

    /// Whether more than half of the nodes are online.
    pub fn quorate(&self) -> bool {
        let online = self.nodes.values().filter(|n| n.online).count();
        online * 2 > self.nodes.len()
    }

    /// Looks up a volume by volid (`storage:volname`) as seen from `node`.
    pub fn volume(&self, node: &str, volid: &str) -> Option<&Volume> {
        let (s, v) = storage::split_volid(volid)?;
        self.storages.get(s)?.get(node, v)
    }

    /// Frees a volume by volid as seen from `node`; true if it existed.
    pub fn free_volume(&mut self, node: &str, volid: &str) -> bool {
        let Some((s, v)) = storage::split_volid(volid) else {
            return false;
        };
        self.storages
            .get_mut(s)
            .and_then(|st| st.remove(node, v))
            .is_some()
    }

    /// Allocates a new image volume of `size` bytes for `vmid` on `storage`
    /// (as seen from `node`) and returns its volid.
    pub fn alloc_image(
        &mut self,
        storage: &str,
        node: &str,
        vmid: u32,
        size: u64,
        format: Option<&str>,
        parent: Option<&str>,
    ) -> Result<String, String> {
        let st = self
            .storages
            .get_mut(storage)
            .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
        st.check_active(node)?;
        if !st.supports("images") {
            return Err(format!("storage '{storage}' does not support vm images"));
        }
        st.check_space(node, size)?;
        let format = match (format, parent) {
            (_, Some(_)) if st.cfg.kind.is_file_based() => "qcow2",
            (Some(f), _) if st.cfg.kind.is_file_based() => f,
            _ => "raw",
        }
        .to_string();
        let volname = st.new_disk_name(node, vmid, &format, parent);
        st.insert(
            node,
            Volume {
                volname: volname.clone(),
                vmid: Some(vmid),
                size,
                format,
                content: "images".into(),
                parent: parent.map(String::from),
                ctime: epoch_now(),
                data: None,
            },
        );
        Ok(format!("{storage}:{volname}"))
    }

    /// Adds a cloud-init volume `vm-<vmid>-cloudinit` (4 MiB).
    pub fn alloc_cloudinit(
        &mut self,
        storage: &str,
        node: &str,
        vmid: u32,
    ) -> Result<String, String> {
        let st = self
            .storages
            .get_mut(storage)
            .ok_or_else(|| format!("storage '{storage}' does not exist"))?;
        st.check_active(node)?;
        let file_based = st.cfg.kind.is_file_based();
        let volname = if file_based {
            format!("{vmid}/vm-{vmid}-cloudinit.qcow2")
        } else {
            format!("vm-{vmid}-cloudinit")
        };
        st.check_space(node, 4 << 20)?;
        st.insert(
            node,
            Volume {
                volname: volname.clone(),
                vmid: Some(vmid),
                size: 4 << 20,
                format: if file_based { "qcow2" } else { "raw" }.into(),
                content: "images".into(),
                parent: None,
                ctime: epoch_now(),
                data: None,
            },
        );
        Ok(format!("{storage}:{volname}"))
    }

    /// All VMIDs present (including configs still under creation).
    pub fn vmid_taken(&self, vmid: u32) -> bool {
        self.vms.contains_key(&vmid)
    }

    /// Adds a VM or template from the configuration file.
    pub(crate) fn add_configured_vm(
        &mut self,
        c: &VmConfig,
        template: bool,
        lag: Duration,
        mac_prefix: &str,
    ) -> Result<(), String> {
        let mut conf: BTreeMap<String, String> = BTreeMap::new();
        conf.insert("name".into(), c.name.clone());
        conf.insert("memory".into(), c.memory_mib.to_string());
        conf.insert("cores".into(), c.cores.to_string());
        conf.insert("sockets".into(), "1".into());
        conf.insert("ostype".into(), "l26".into());
        conf.insert("scsihw".into(), "virtio-scsi-single".into());
        if c.agent {
            conf.insert("agent".into(), "1".into());
        }
        if let Some(t) = &c.tags {
            conf.insert("tags".into(), props::normalize_tags(t));
        }
        let mac = self.mac(mac_prefix);
        let mut net = format!("virtio={mac},bridge={}", c.bridge);
        if let Some(v) = c.vlan {
            net.push_str(&format!(",tag={v}"));
        }
        conf.insert("net0".into(), net);
        let uuid = self.uuid();
        conf.insert("smbios1".into(), format!("uuid={uuid}"));
        let genid = self.uuid();
        conf.insert("vmgenid".into(), genid);
        let node = c.node.clone();
        let stem = if template { "base" } else { "vm" };
        let file_based = self
            .storages
            .get(&c.storage)
            .map(|s| s.cfg.kind.is_file_based())
            .ok_or_else(|| format!("unknown storage '{}'", c.storage))?;
        type DiskSpec<'a> = (String, u64, Vec<(&'a str, String)>);
        let mut disks: Vec<DiskSpec> = vec![(
            c.disk_key.clone(),
            c.disk_gib << 30,
            vec![("iothread", "1".into())],
        )];
        if c.efidisk {
            conf.insert("bios".into(), "ovmf".into());
            disks.push((
                "efidisk0".into(),
                528 << 10,
                vec![("efitype", "4m".into()), ("pre-enrolled-keys", "1".into())],
            ));
        }
        if c.tpm {
            disks.push((
                "tpmstate0".into(),
                4 << 20,
                vec![("version", "v2.0".into())],
            ));
        }
        for (i, (key, size, opts)) in disks.into_iter().enumerate() {
            let volname = if file_based {
                format!("{}/{stem}-{}-disk-{i}.raw", c.vmid, c.vmid)
            } else {
                format!("{stem}-{}-disk-{i}", c.vmid)
            };
            let st = self
                .storages
                .get_mut(&c.storage)
                .ok_or("storage vanished")?;
            st.check_space(&node, size)?;
            st.insert(
                &node,
                Volume {
                    volname: volname.clone(),
                    vmid: Some(c.vmid),
                    size,
                    format: "raw".into(),
                    content: "images".into(),
                    parent: None,
                    ctime: epoch_now(),
                    data: None,
                },
            );
            let mut d = props::Drive {
                file: format!("{}:{volname}", c.storage),
                opts: BTreeMap::new(),
            };
            for (k, v) in opts {
                d.opts.insert(k.to_string(), v);
            }
            d.opts.insert("size".into(), props::format_size(size));
            conf.insert(key, d.print());
        }
        if let Some(cs) = &c.cloudinit_storage {
            let volid = self.alloc_cloudinit(cs, &node, c.vmid)?;
            conf.insert("ide2".into(), format!("{volid},media=cdrom"));
        }
        if template {
            conf.insert("template".into(), "1".into());
        }
        for (k, v) in &c.extra {
            conf.insert(k.clone(), v.clone());
        }
        let mut vm = Vm::new(c.vmid, &node, conf);
        if c.running && !template {
            let (pid, _) = self.next_pid(&node);
            vm.run = Some(RunState {
                since: Instant::now(),
                paused: false,
                pid,
                ifaces: vec![],
                boot: crate::boot::GuestBoot::NoSeed,
                seed: None,
            });
        }
        vm.record_status(lag);
        // a VM that exists at start is visible immediately (its history starts "long ago")
        if let Some(first) = vm.history.front_mut() {
            first.0 = Instant::now().checked_sub(lag).unwrap_or(first.0);
        }
        if c.ha {
            self.ha.insert(
                c.vmid,
                HaResource {
                    state: "started".into(),
                    comment: None,
                    group: None,
                    max_restart: 1,
                    max_relocate: 1,
                },
            );
        }
        self.vms.insert(c.vmid, vm);
        Ok(())
    }

    /// The lowest free VMID in `[lower, upper)` (nothing is reserved).
    pub fn next_free_vmid(&self, lower: u32, upper: u32) -> Option<u32> {
        (lower..upper).find(|id| !self.vms.contains_key(id))
    }

    /// The secret of a token (introspection).
    pub fn token_secret(&self, tokenid: &str) -> Option<Secret> {
        self.auth.token_secret(tokenid)
    }

    /// Releases every DHCP lease of the given MACs.
    pub fn release_leases(&mut self, macs: &[String]) {
        for leases in self.leases.values_mut() {
            leases.retain(|_, m| !macs.iter().any(|x| x.eq_ignore_ascii_case(m)));
        }
    }

    /// The digest of the HA configuration (resources, groups, rules), as
    /// Proxmox's section-config digests: 40 hex digits that change with
    /// every write.
    pub fn ha_digest(&self) -> String {
        format!(
            "{:040x}",
            self.ha_serial.wrapping_mul(0x9e37_79b9_7f4a_7c15)
        )
    }

    /// Configured storage by name.
    pub fn storage_cfg(&self, name: &str) -> Option<&StorageConfig> {
        self.storages.get(name).map(|s| &s.cfg)
    }
}
