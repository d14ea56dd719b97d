//! Simulator configuration: the YAML file of `pve-sim --config`, and the
//! built-in default of three clusters (`dc-a`, `dc-b`, `dc-c`).
//!
//! Every duration is in **seconds of simulated time** and is multiplied by
//! [`SimConfig::time_scale`] before the simulator waits for it. Sizes are in
//! GiB (storage capacity, disks) or MiB (VM memory) as the field names say.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::error::SimError;
use crate::faults::Fault;
use crate::secret::Secret;

/// The whole simulator: several independent clusters plus global knobs.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimConfig {
    /// Clusters to simulate; each gets its own listener, CA, tokens, VMID space.
    pub clusters: Vec<ClusterConfig>,
    /// Factor applied to every duration (task times, lock timeouts, boot time,
    /// `/cluster/resources` lag, the 401 delay). `0.001` runs a 60 s clone in 60 ms;
    /// `0` makes everything instant. Must be finite and `>= 0`.
    #[serde(default = "default_time_scale")]
    pub time_scale: f64,
    /// Seed for every random choice (MACs, UUIDs, token secrets, UPID pids,
    /// fault probabilities), so runs are reproducible.
    #[serde(default)]
    pub seed: u64,
    /// Serve HTTPS (default). `false` serves plain HTTP (for debugging only).
    #[serde(default = "default_true")]
    pub tls: bool,
    /// Path of the official schema `apidoc.json`; when set every request is
    /// validated against it. `None` disables schema validation.
    #[serde(default)]
    pub schema_path: Option<PathBuf>,
    /// Address to listen on (default `127.0.0.1`).
    #[serde(default = "default_bind")]
    pub bind_address: IpAddr,
}

/// One simulated Proxmox VE cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// Cluster name (`/cluster/status` → `name`), also the key of
    /// [`crate::Simulator::cluster`].
    pub name: String,
    /// TCP port; `0` (default) picks a free one.
    #[serde(default)]
    pub port: u16,
    /// Version reported by `GET /version` (`version`), e.g. `9.1.9`.
    #[serde(default = "default_pve_version")]
    pub pve_version: String,
    /// qemu-server version; `>= 9.1.19` switches config updates to "fork before
    /// locking" (docs/proxmox-semantics.md §6, §11): a fast `VM is locked` check before the flock,
    /// and `POST …/config` takes the flock inside its task.
    #[serde(default = "default_pve_version")]
    pub qemu_server_version: String,
    /// Datacenter option `next-id` (`lower`..`upper`, upper exclusive); absent
    /// means 100..1 000 000 (docs/proxmox-semantics.md §7).
    #[serde(default)]
    pub next_id: Option<NextIdRange>,
    /// Datacenter `mac_prefix` used for generated MACs (default `BC:24:11`).
    #[serde(default = "default_mac_prefix")]
    pub mac_prefix: String,
    /// Task durations, lock timeouts, boot time, listing lag.
    #[serde(default)]
    pub timings: Timings,
    /// Cluster nodes.
    pub nodes: Vec<NodeConfig>,
    /// Storages (`storage.cfg`).
    pub storages: Vec<StorageConfig>,
    /// Bridges present on every node, with an optional simulated DHCP range.
    #[serde(default)]
    pub bridges: Vec<BridgeConfig>,
    /// Templates (`template: 1`), typically tagged for the provider.
    #[serde(default)]
    pub templates: Vec<VmConfig>,
    /// Ordinary VMs present at start.
    #[serde(default)]
    pub vms: Vec<VmConfig>,
    /// Users (`user@realm`) with optional password (ticket login) and ACLs.
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// API tokens (`user@realm!tokenid`).
    #[serde(default)]
    pub tokens: Vec<TokenConfig>,
    /// Resource pools present at start.
    #[serde(default)]
    pub pools: Vec<PoolConfig>,
    /// PCI resource mappings (`GET /cluster/mapping/pci`).
    #[serde(default)]
    pub pci_mappings: Vec<PciMappingConfig>,
    /// HA groups present at start (PVE 8 only: PVE 9 migrated groups to rules).
    #[serde(default)]
    pub ha_groups: Vec<HaGroupConfig>,
    /// HA node-affinity rules present at start (PVE 9 only).
    #[serde(default)]
    pub ha_rules: Vec<HaRuleConfig>,
    /// Faults active from the start (see [`crate::faults`]).
    #[serde(default)]
    pub faults: Vec<Fault>,
}

/// Datacenter `next-id` range.
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct NextIdRange {
    /// Lowest VMID handed out (inclusive).
    pub lower: u32,
    /// Upper bound (exclusive).
    pub upper: u32,
}

/// Durations in simulated seconds (multiplied by the time scale).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Timings {
    /// Full clone task (`qmclone`, `full=1`), fixed part. Default 60.
    pub clone_full: f64,
    /// Added to a full clone per GiB of copied disks. Default 0 (not proportional).
    pub clone_full_per_gib: f64,
    /// Linked clone task. Default 5.
    pub clone_linked: f64,
    /// VM creation task (`qmcreate`). Default 2.
    pub create: f64,
    /// Asynchronous config update task (`qmconfig`). Default 1.
    pub config: f64,
    /// Disk resize task. Default 2.
    pub resize: f64,
    /// Start task (`qmstart`). Default 3.
    pub start: f64,
    /// Stop task (`qmstop`). Default 2.
    pub stop: f64,
    /// Shutdown task (`qmshutdown`). Default 10.
    pub shutdown: f64,
    /// Reboot task (`qmreboot`). Default 13.
    pub reboot: f64,
    /// Reset, suspend and resume tasks. Default 1.
    pub reset: f64,
    /// Destroy task (`qmdestroy`). Default 3.
    pub destroy: f64,
    /// Upload task (`imgcopy`) and volume deletion. Default 1.
    pub upload: f64,
    /// Convert-to-template task. Default 2.
    pub template: f64,
    /// Time from the end of the start task until the guest agent answers. Default 100.
    pub boot: f64,
    /// How far `/cluster/resources` status data lags behind (pvestatd). Default 0.
    pub resources_lag: f64,
    /// Config flock timeout of clone (source and new VM). Default 1.
    pub lock_timeout_clone: f64,
    /// Config flock timeout of create. Default 5.
    pub lock_timeout_create: f64,
    /// Config flock timeout of everything else. Default 10.
    pub lock_timeout_default: f64,
    /// Storage lock acquire timeout (see [`AllocLock`]). Default 10.
    pub storage_lock_timeout: f64,
    /// Delay of every 401 answer (pveproxy waits 3 s). Default 3.
    pub auth_failure_delay: f64,
    /// Delay after which the HA manager applies a `hastart`/`hastop`. Default 2.
    pub ha_delay: f64,
    /// Time a guest-agent `exec` takes until `exec-status` reports it exited. Default 1.
    pub agent_exec: f64,
    /// A migration to another node (`qmigrate`, HA migrate and relocate,
    /// HA recovery of a failed node's VMs). Default 10.
    pub migrate: f64,
    /// Lifetime of a login ticket. Default 7200.
    pub ticket_lifetime: f64,
}

impl Default for Timings {
    fn default() -> Self {
        Timings {
            clone_full: 60.0,
            clone_full_per_gib: 0.0,
            clone_linked: 5.0,
            create: 2.0,
            config: 1.0,
            resize: 2.0,
            start: 3.0,
            stop: 2.0,
            shutdown: 10.0,
            reboot: 13.0,
            reset: 1.0,
            destroy: 3.0,
            upload: 1.0,
            template: 2.0,
            boot: 100.0,
            resources_lag: 0.0,
            lock_timeout_clone: 1.0,
            lock_timeout_create: 5.0,
            lock_timeout_default: 10.0,
            storage_lock_timeout: 10.0,
            auth_failure_delay: 3.0,
            ha_delay: 2.0,
            agent_exec: 1.0,
            migrate: 10.0,
            ticket_lifetime: 7200.0,
        }
    }
}

/// One node of a cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Node name (`pve-node` format).
    pub name: String,
    /// CPU cores (`maxcpu`). Default 32.
    #[serde(default = "default_cores")]
    pub cores: u32,
    /// Memory in GiB (`maxmem` in bytes in the API). Default 128.
    #[serde(default = "default_node_memory")]
    pub memory_gib: u64,
    /// Whether the node is up at start. Default true.
    #[serde(default = "default_true")]
    pub online: bool,
    /// Address reported in `/cluster/status`. Default `10.255.<cluster>.<n>`.
    #[serde(default)]
    pub ip: Option<Ipv4Addr>,
    /// Processor architecture (`current-kernel.machine` of
    /// `GET /nodes/{node}/status`): `x86_64` (default) or `aarch64`. A VM
    /// without `arch` runs as its node's architecture.
    #[serde(default = "default_arch")]
    pub arch: String,
}

fn default_arch() -> String {
    "x86_64".into()
}

/// Storage plugin types the simulator knows (docs/proxmox-semantics.md §8 decides which
/// support linked clones).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StorageType {
    /// Directory (file based, qcow2/raw).
    Dir,
    /// NFS share (file based).
    Nfs,
    /// CIFS share (file based).
    Cifs,
    /// CephFS (file based; usually ISO/templates only).
    Cephfs,
    /// LVM thin pool.
    Lvmthin,
    /// Plain (thick) LVM: no linked clones.
    Lvm,
    /// Ceph RBD.
    Rbd,
    /// ZFS pool.
    Zfspool,
    /// BTRFS (file based).
    Btrfs,
}

impl StorageType {
    /// `plugintype` as Proxmox prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageType::Dir => "dir",
            StorageType::Nfs => "nfs",
            StorageType::Cifs => "cifs",
            StorageType::Cephfs => "cephfs",
            StorageType::Lvmthin => "lvmthin",
            StorageType::Lvm => "lvm",
            StorageType::Rbd => "rbd",
            StorageType::Zfspool => "zfspool",
            StorageType::Btrfs => "btrfs",
        }
    }

    /// File-based storages name volumes `<vmid>/vm-<vmid>-disk-<n>.<fmt>`.
    pub fn is_file_based(self) -> bool {
        matches!(
            self,
            StorageType::Dir
                | StorageType::Nfs
                | StorageType::Cifs
                | StorageType::Cephfs
                | StorageType::Btrfs
        )
    }

    /// Whether linked clones from base volumes are possible (docs/proxmox-semantics.md §8:
    /// not plain LVM).
    pub fn supports_linked_clone(self) -> bool {
        !matches!(self, StorageType::Lvm)
    }
}

/// One storage definition.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// Storage ID.
    pub name: String,
    /// Plugin type.
    #[serde(rename = "type")]
    pub kind: StorageType,
    /// Shared storage (one volume namespace for all nodes).
    #[serde(default)]
    pub shared: bool,
    /// Content types (`images`, `iso`, `vztmpl`, `rootdir`, `snippets`, `import`, `backup`).
    pub content: Vec<String>,
    /// Capacity in GiB (per node for local storages). Default 1024.
    #[serde(default = "default_capacity")]
    pub capacity_gib: u64,
    /// Nodes where the storage is enabled; absent means all.
    #[serde(default)]
    pub nodes: Option<Vec<String>>,
    /// Disabled in the storage configuration (`disable` in `storage.cfg`):
    /// `/nodes/{node}/storage` lists it with `enabled: 0, active: 0`,
    /// `/cluster/resources` leaves it out, and nothing can use it
    /// (docs/field-cases.md B37).
    #[serde(default)]
    pub disabled: bool,
    /// Nodes where the storage is configured and enabled but cannot be
    /// activated (an unreachable NFS server, a missing volume group):
    /// `active: 0` there, `/cluster/resources` status `unknown`, and every
    /// allocation there fails (docs/field-cases.md B37).
    #[serde(default)]
    pub inactive_on: Vec<String>,
    /// Storage-level lock contention model; absent means no contention.
    #[serde(default)]
    pub alloc_lock: Option<AllocLock>,
}

/// Storage lock model (docs/proxmox-semantics.md §6, storage-level locks;
/// docs/field-cases.md B04(a)).
///
/// Every volume allocation on the storage (new disk, clone target) takes one of
/// `max_parallel` slots (per node for local storages, cluster-wide for shared
/// ones) and holds it for `hold` simulated seconds. A task that cannot get a
/// slot within `timings.storage_lock_timeout` fails with Proxmox's message:
/// `can't lock file '/var/lock/pve-manager/pve-storage-<id>' - got timeout`
/// (local) or `cfs-lock 'storage-<id>' error: got lock request timeout` (shared).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AllocLock {
    /// Number of allocations that may hold the lock at once (>= 1).
    pub max_parallel: u32,
    /// Seconds each allocation holds it.
    pub hold: f64,
}

/// A bridge (`vmbrN`) present on every node.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BridgeConfig {
    /// Bridge name.
    pub name: String,
    /// Simulated DHCP server for NICs on this bridge without static addresses.
    #[serde(default)]
    pub dhcp: Option<DhcpRange>,
}

/// A DHCP lease range; leases go to the lowest free address, keyed by MAC.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct DhcpRange {
    /// First address handed out.
    pub start: Ipv4Addr,
    /// Last address handed out (inclusive).
    pub end: Ipv4Addr,
    /// Prefix length of the subnet.
    pub prefix: u8,
    /// Default gateway (informational).
    #[serde(default)]
    pub gateway: Option<Ipv4Addr>,
}

/// A VM or template present at start.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VmConfig {
    /// VMID.
    pub vmid: u32,
    /// Name (`name`).
    pub name: String,
    /// Node the config lives on.
    pub node: String,
    /// `tags` as Proxmox stores them (`a;b`).
    #[serde(default)]
    pub tags: Option<String>,
    /// Memory in MiB. Default 2048.
    #[serde(default = "default_vm_memory")]
    pub memory_mib: u64,
    /// Cores. Default 2.
    #[serde(default = "default_vm_cores")]
    pub cores: u32,
    /// Storage of the boot disk (and EFI/TPM disks).
    pub storage: String,
    /// Boot disk size in GiB. Default 20.
    #[serde(default = "default_disk")]
    pub disk_gib: u64,
    /// Boot disk key. Default `scsi0`.
    #[serde(default = "default_disk_key")]
    pub disk_key: String,
    /// Add `efidisk0` (528K, `efitype=4m`) and `bios: ovmf`.
    #[serde(default)]
    pub efidisk: bool,
    /// Add `tpmstate0` (4M, v2.0).
    #[serde(default)]
    pub tpm: bool,
    /// `agent: 1`.
    #[serde(default = "default_true")]
    pub agent: bool,
    /// Bridge of `net0` (virtio).
    #[serde(default = "default_bridge")]
    pub bridge: String,
    /// VLAN tag of `net0`.
    #[serde(default)]
    pub vlan: Option<u16>,
    /// Storage of a Proxmox cloud-init drive on `ide2`, if any.
    #[serde(default)]
    pub cloudinit_storage: Option<String>,
    /// Running at start (ignored for templates).
    #[serde(default)]
    pub running: bool,
    /// Managed by HA.
    #[serde(default)]
    pub ha: bool,
    /// Further config keys, verbatim (`key: value`).
    #[serde(default)]
    pub extra: BTreeMap<String, String>,
}

/// A user with ACL entries. Tickets (`POST /access/ticket`) need `password`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    /// `user@realm`.
    pub userid: String,
    /// Password for ticket login; absent means no ticket login.
    #[serde(default)]
    pub password: Option<Secret>,
    /// Account enabled. Default true.
    #[serde(default = "default_true")]
    pub enable: bool,
    /// Permissions of the user.
    #[serde(default)]
    pub acl: Vec<AclEntry>,
}

/// An API token.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    /// `user@realm!tokenid`; the user must be listed in `users`.
    pub id: String,
    /// Secret (a UUID in Proxmox); absent means one derived from the seed.
    #[serde(default)]
    pub secret: Option<Secret>,
    /// Privilege separation (default true): effective privileges are the
    /// intersection of the user's and the token's ACLs.
    #[serde(default = "default_true")]
    pub privsep: bool,
    /// Expiry as Unix epoch seconds; 0 = never.
    #[serde(default)]
    pub expire: u64,
    /// ACL entries granted to the token itself.
    #[serde(default)]
    pub acl: Vec<AclEntry>,
}

/// One ACL entry: roles and/or privileges on a path.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclEntry {
    /// ACL path (`/`, `/vms/100`, `/storage/local`, `/pool/x`, `/sdn/zones/localnetwork`).
    pub path: String,
    /// Built-in role names (see [`crate::auth::role_privileges`]).
    #[serde(default)]
    pub roles: Vec<String>,
    /// Individual privileges.
    #[serde(default)]
    pub privileges: Vec<String>,
    /// Propagate to sub-paths. Default true.
    #[serde(default = "default_true")]
    pub propagate: bool,
}

/// An HA group (PVE 8): where its resources may run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaGroupConfig {
    /// Group id (`pve-configid`).
    pub group: String,
    /// Member nodes, `node` or `node:priority` (higher runs first).
    pub nodes: Vec<String>,
    /// Resources may run only on the group's nodes. Default false.
    #[serde(default)]
    pub restricted: bool,
}

/// An HA node-affinity rule (PVE 9): where the resources it lists run.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HaRuleConfig {
    /// Rule id (`pve-configid`).
    pub rule: String,
    /// Nodes, `node` or `node:priority` (higher runs first).
    pub nodes: Vec<String>,
    /// Resources may run only on these nodes. Default false.
    #[serde(default)]
    pub strict: bool,
    /// VMIDs of the HA resources the rule lists (a rule lists at least one;
    /// the file may name VMs that are no HA resource any more).
    pub resources: Vec<u32>,
}

/// A PCI resource mapping (`GET /cluster/mapping/pci`).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PciMappingConfig {
    /// The mapping id (`pve-configid`).
    pub id: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// The per-node entries, property strings
    /// `node=<node>,path=<addr>[;<addr>…],id=<vendor:device>[,…]`.
    #[serde(default)]
    pub map: Vec<String>,
    /// Whether the devices provide mediated devices.
    #[serde(default)]
    pub mdev: bool,
}

/// A resource pool.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Pool ID.
    pub poolid: String,
    /// Comment.
    #[serde(default)]
    pub comment: Option<String>,
    /// Member VMIDs.
    #[serde(default)]
    pub members: Vec<u32>,
    /// Member storages (storage IDs).
    #[serde(default)]
    pub storage: Vec<String>,
}

fn default_time_scale() -> f64 {
    1.0
}
fn default_true() -> bool {
    true
}
fn default_bind() -> IpAddr {
    IpAddr::V4(Ipv4Addr::LOCALHOST)
}
fn default_pve_version() -> String {
    "9.1.9".to_string()
}
fn default_mac_prefix() -> String {
    "BC:24:11".to_string()
}
fn default_cores() -> u32 {
    32
}
fn default_node_memory() -> u64 {
    128
}
fn default_capacity() -> u64 {
    1024
}
fn default_vm_memory() -> u64 {
    2048
}
fn default_vm_cores() -> u32 {
    2
}
fn default_disk() -> u64 {
    20
}
fn default_disk_key() -> String {
    "scsi0".to_string()
}
fn default_bridge() -> String {
    "vmbr0".to_string()
}

/// Privileges the provider's token needs (docs/proxmox-semantics.md §21,
/// docs/getting-started.md) on PVE 8 and 9 together; the built-in default
/// grants on `/` those of them its version has ([`provider_privileges`]).
/// `Sys.Console` is for HA resources, `Mapping.Use` for PCI devices by
/// resource mapping.
pub const PROVIDER_PRIVILEGES: &[&str] = &[
    "VM.Allocate",
    "VM.Clone",
    "VM.Audit",
    "VM.Config.Disk",
    "VM.Config.CDROM",
    "VM.Config.CPU",
    "VM.Config.Memory",
    "VM.Config.Network",
    "VM.Config.HWType",
    "VM.Config.Options",
    "VM.Config.Cloudinit",
    "VM.PowerMgmt",
    "VM.Migrate",
    "VM.Monitor",
    "VM.GuestAgent.Audit",
    "VM.GuestAgent.Unrestricted",
    "Datastore.Allocate",
    "Datastore.AllocateSpace",
    "Datastore.AllocateTemplate",
    "Datastore.Audit",
    "SDN.Use",
    "SDN.Audit",
    "Sys.Audit",
    "Sys.Console",
    "Pool.Allocate",
    "Pool.Audit",
    "Mapping.Use",
];

/// [`PROVIDER_PRIVILEGES`] that PVE `major` has (`VM.Monitor` on 8,
/// `VM.GuestAgent.*` on 9).
pub fn provider_privileges(major: u32) -> Vec<&'static str> {
    PROVIDER_PRIVILEGES
        .iter()
        .copied()
        .filter(|p| crate::auth::privilege_exists(p, major))
        .collect()
}

impl SimConfig {
    /// The built-in default: clusters `dc-a`, `dc-b`, `dc-c` with 4, 3 and 3
    /// nodes (`pve-a1..4`, `pve-b1..3`, `pve-c1..3`; 32 cores, 128 GiB each),
    /// storages `local` (dir: iso, vztmpl, images; 100 GiB per node),
    /// `local-lvm` (lvmthin, 800 GiB per node),
    /// `ceph` (rbd, shared, 20 TiB) and `cephfs` (shared ISO store, 1 TiB), bridge `vmbr0`
    /// with DHCP `10.{10,20,30}.0.100-250/24`, one template per cluster
    /// (VMIDs 9000, 9100, 9200, `ubuntu-2404-kube`, tags `capmox;ubuntu-24.04`,
    /// on `ceph`, 20G `scsi0`, `efidisk0`, OVMF, agent), user `capmox@pve`
    /// with token `capmox@pve!capi` (seeded UUID secret, provider privileges
    /// on `/`), and `root@pam` with password `pve-sim`.
    ///
    /// No schema file: request validation against the official schema is
    /// on only when a path is given ([`SimConfig::with_schema_path`], the
    /// binary's `--schema` / `PVE_SIM_SCHEMA`).
    pub fn builtin_default() -> SimConfig {
        let clusters = [
            ("dc-a", 'a', 4u32, 10u8, 9000u32),
            ("dc-b", 'b', 3, 20, 9100),
            ("dc-c", 'c', 3, 30, 9200),
        ]
        .iter()
        .map(|&(name, letter, nodes, net, template)| {
            builtin_cluster(name, letter, nodes, net, template)
        })
        .collect();
        SimConfig {
            clusters,
            time_scale: 1.0,
            seed: 0,
            tls: true,
            schema_path: None,
            bind_address: default_bind(),
        }
    }

    /// Parses the YAML configuration (shape: this struct, snake_case keys).
    ///
    /// # Errors
    /// [`SimError::Yaml`] on syntax or type errors, [`SimError::Config`] when the
    /// content is inconsistent (see [`SimConfig::validate`]).
    pub fn from_yaml(text: &str) -> Result<SimConfig, SimError> {
        let cfg: SimConfig =
            serde_saphyr::from_str(text).map_err(|e| SimError::Yaml(e.to_string()))?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// Multiplies every duration by `f` (see [`SimConfig::time_scale`]).
    pub fn with_time_scale(mut self, f: f64) -> Self {
        self.time_scale = f;
        self
    }

    /// Sets the seed of all random choices.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets (or clears) the schema file used for request validation.
    pub fn with_schema_path(mut self, path: Option<PathBuf>) -> Self {
        self.schema_path = path;
        self
    }

    /// Serves plain HTTP instead of HTTPS when `false`.
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Changes the timings of every cluster with `f`.
    pub fn with_timings(mut self, f: impl Fn(&mut Timings)) -> Self {
        for c in &mut self.clusters {
            f(&mut c.timings);
        }
        self
    }

    /// Sets the version of cluster `name` (see [`ClusterConfig::set_pve_version`]).
    pub fn with_pve_version(mut self, name: &str, version: &str) -> Self {
        if let Some(c) = self.cluster_mut(name) {
            c.set_pve_version(version);
        }
        self
    }

    /// Mutable access to one cluster's configuration by name.
    pub fn cluster_mut(&mut self, name: &str) -> Option<&mut ClusterConfig> {
        self.clusters.iter_mut().find(|c| c.name == name)
    }

    /// Checks the configuration for consistency.
    ///
    /// # Errors
    /// [`SimError::Config`] naming the first problem: bad time scale, duplicate
    /// cluster/node/storage names or VMIDs, a VM on an unknown node or storage,
    /// a token whose user is missing, a bad `next_id` range, a bad node name.
    pub fn validate(&self) -> Result<(), SimError> {
        if !self.time_scale.is_finite() || self.time_scale < 0.0 {
            return Err(SimError::Config(format!(
                "time_scale must be a finite number >= 0, got {}",
                self.time_scale
            )));
        }
        if self.clusters.is_empty() {
            return Err(SimError::Config("no clusters configured".into()));
        }
        let mut names = std::collections::BTreeSet::new();
        for c in &self.clusters {
            if !names.insert(c.name.as_str()) {
                return Err(SimError::Config(format!(
                    "duplicate cluster name '{}'",
                    c.name
                )));
            }
            c.validate()?;
        }
        Ok(())
    }
}

impl ClusterConfig {
    fn validate(&self) -> Result<(), SimError> {
        let err = |m: String| Err(SimError::Config(format!("cluster '{}': {m}", self.name)));
        if self.nodes.is_empty() {
            return err("no nodes".into());
        }
        let node_re = crate::props::node_name_ok;
        let mut nodes = std::collections::BTreeSet::new();
        for n in &self.nodes {
            if !node_re(&n.name) {
                return err(format!("invalid node name '{}'", n.name));
            }
            if !nodes.insert(n.name.as_str()) {
                return err(format!("duplicate node '{}'", n.name));
            }
        }
        let mut storages = std::collections::BTreeSet::new();
        for s in &self.storages {
            if !storages.insert(s.name.as_str()) {
                return err(format!("duplicate storage '{}'", s.name));
            }
            if let Some(l) = s.alloc_lock
                && (l.max_parallel == 0 || !l.hold.is_finite() || l.hold < 0.0)
            {
                return err(format!(
                    "storage '{}': alloc_lock needs max_parallel >= 1 and hold >= 0",
                    s.name
                ));
            }
            for n in s.nodes.iter().flatten().chain(&s.inactive_on) {
                if !nodes.contains(n.as_str()) {
                    return err(format!("storage '{}' names unknown node '{n}'", s.name));
                }
            }
        }
        if let Some(r) = self.next_id
            && (r.lower < 100 || r.upper <= r.lower)
        {
            return err(format!("next_id range {}..{} is invalid", r.lower, r.upper));
        }
        let mut vmids = std::collections::BTreeSet::new();
        for vm in self.templates.iter().chain(&self.vms) {
            if !(100..=999_999_999).contains(&vm.vmid) {
                return err(format!("VMID {} out of range", vm.vmid));
            }
            if !vmids.insert(vm.vmid) {
                return err(format!("duplicate VMID {}", vm.vmid));
            }
            if !nodes.contains(vm.node.as_str()) {
                return err(format!("VM {} on unknown node '{}'", vm.vmid, vm.node));
            }
            for s in std::iter::once(&vm.storage).chain(vm.cloudinit_storage.iter()) {
                if !storages.contains(s.as_str()) {
                    return err(format!("VM {} uses unknown storage '{s}'", vm.vmid));
                }
            }
        }
        let users: std::collections::BTreeSet<&str> =
            self.users.iter().map(|u| u.userid.as_str()).collect();
        for t in &self.tokens {
            let Some((user, tokenid)) = t.id.split_once('!') else {
                return err(format!("token id '{}' is not user@realm!tokenid", t.id));
            };
            if tokenid.is_empty() || !users.contains(user) {
                return err(format!("token '{}' belongs to unknown user '{user}'", t.id));
            }
        }
        for u in &self.users {
            if !u.userid.contains('@') {
                return err(format!("user id '{}' is not user@realm", u.userid));
            }
        }
        let major = crate::auth::major_of(&self.pve_version);
        if major >= 9 && !self.ha_groups.is_empty() {
            return err("ha_groups: PVE 9 migrated HA groups to rules; configure ha_rules".into());
        }
        if major < 9 && !self.ha_rules.is_empty() {
            return err("ha_rules: HA rules exist from PVE 9 on; configure ha_groups".into());
        }
        for g in &self.ha_groups {
            check_ha_nodes(&format!("HA group '{}'", g.group), &g.nodes, &nodes).or_else(&err)?;
        }
        for r in &self.ha_rules {
            check_ha_nodes(&format!("HA rule '{}'", r.rule), &r.nodes, &nodes).or_else(&err)?;
            if r.resources.is_empty() {
                return err(format!("HA rule '{}' lists no resources", r.rule));
            }
        }
        for p in &self.pools {
            for m in &p.members {
                if !vmids.contains(m) {
                    return err(format!("pool '{}' lists unknown VM {m}", p.poolid));
                }
            }
        }
        Ok(())
    }

    /// Sets the reported version (`version` and qemu-server) and keeps the
    /// ACLs valid for it: every ACL entry's privileges that the new major
    /// version does not have are dropped, and an entry that granted the
    /// other version's guest-agent privileges gets this version's
    /// (`VM.Monitor` on PVE 8; `VM.GuestAgent.Audit` and
    /// `VM.GuestAgent.Unrestricted` on PVE 9), so the built-in provider grant
    /// means the same on both.
    pub fn set_pve_version(&mut self, version: &str) {
        use crate::auth::privilege_exists;
        self.pve_version = version.to_string();
        self.qemu_server_version = version.to_string();
        let major = crate::auth::major_of(version);
        let translate = |privs: &mut Vec<String>| {
            let agent = privs
                .iter()
                .any(|p| p == "VM.Monitor" || p.starts_with("VM.GuestAgent."));
            privs.retain(|p| privilege_exists(p, major));
            if agent {
                let want: &[&str] = if major >= 9 {
                    &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"]
                } else {
                    &["VM.Monitor"]
                };
                for w in want {
                    if !privs.iter().any(|p| p == w) {
                        privs.push((*w).to_string());
                    }
                }
            }
        };
        for u in &mut self.users {
            for a in &mut u.acl {
                translate(&mut a.privileges);
            }
        }
        for t in &mut self.tokens {
            for a in &mut t.acl {
                translate(&mut a.privileges);
            }
        }
    }

    /// The effective `next-id` range.
    pub fn next_id_range(&self) -> NextIdRange {
        self.next_id.unwrap_or(NextIdRange {
            lower: 100,
            upper: 1_000_000,
        })
    }

    /// Whether this qemu-server version forks before locking on config updates
    /// (9.1.19 and later).
    pub fn config_forks_before_lock(&self) -> bool {
        version_at_least(&self.qemu_server_version, [9, 1, 19])
    }
}

/// Checks an HA node list (`node[:priority]`) against the cluster's nodes.
fn check_ha_nodes(
    what: &str,
    list: &[String],
    nodes: &std::collections::BTreeSet<&str>,
) -> Result<(), String> {
    if list.is_empty() {
        return Err(format!("{what} names no nodes"));
    }
    for n in list {
        let (name, prio) = n
            .split_once(':')
            .map_or((n.as_str(), None), |(a, b)| (a, Some(b)));
        if !nodes.contains(name) || prio.is_some_and(|p| p.parse::<u32>().is_err()) {
            return Err(format!(
                "{what}: '{n}' is not node[:priority] of a node of this cluster"
            ));
        }
    }
    Ok(())
}

/// Compares a dotted version (`9.1.18`) with a minimum.
pub(crate) fn version_at_least(v: &str, min: [u64; 3]) -> bool {
    let mut parts = v
        .split(['.', '-', '~'])
        .map(|p| p.parse::<u64>().unwrap_or(0));
    let got = [
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    ];
    got >= min
}

fn builtin_cluster(name: &str, letter: char, nodes: u32, net: u8, template: u32) -> ClusterConfig {
    let node_names: Vec<String> = (1..=nodes).map(|i| format!("pve-{letter}{i}")).collect();
    let node_cfgs = node_names
        .iter()
        .enumerate()
        .map(|(i, n)| NodeConfig {
            name: n.clone(),
            cores: 32,
            memory_gib: 128,
            online: true,
            ip: Some(Ipv4Addr::new(10, net, 0, 11 + i as u8)),
            arch: default_arch(),
        })
        .collect();
    let storage = |name: &str, kind, shared, content: &[&str], cap| StorageConfig {
        name: name.into(),
        kind,
        shared,
        content: content.iter().map(|c| c.to_string()).collect(),
        capacity_gib: cap,
        nodes: None,
        disabled: false,
        inactive_on: Vec::new(),
        alloc_lock: None,
    };
    let storages = vec![
        storage(
            "local",
            StorageType::Dir,
            false,
            &["iso", "vztmpl", "images", "snippets"],
            100,
        ),
        storage(
            "local-lvm",
            StorageType::Lvmthin,
            false,
            &["images", "rootdir"],
            800,
        ),
        storage(
            "ceph",
            StorageType::Rbd,
            true,
            &["images", "rootdir"],
            20 * 1024,
        ),
        storage(
            "cephfs",
            StorageType::Cephfs,
            true,
            &["iso", "vztmpl", "snippets"],
            1024,
        ),
    ];
    let bridges = vec![BridgeConfig {
        name: "vmbr0".into(),
        dhcp: Some(DhcpRange {
            start: Ipv4Addr::new(10, net, 0, 100),
            end: Ipv4Addr::new(10, net, 0, 250),
            prefix: 24,
            gateway: Some(Ipv4Addr::new(10, net, 0, 1)),
        }),
    }];
    let templates = vec![VmConfig {
        vmid: template,
        name: "ubuntu-2404-kube".into(),
        node: node_names[0].clone(),
        tags: Some("capmox;ubuntu-24.04".into()),
        memory_mib: 2048,
        cores: 2,
        storage: "ceph".into(),
        disk_gib: 20,
        disk_key: "scsi0".into(),
        efidisk: true,
        tpm: false,
        agent: true,
        bridge: "vmbr0".into(),
        vlan: None,
        cloudinit_storage: None,
        running: false,
        ha: false,
        extra: BTreeMap::from([
            ("ostype".to_string(), "l26".to_string()),
            ("scsihw".to_string(), "virtio-scsi-single".to_string()),
            ("boot".to_string(), "order=scsi0".to_string()),
        ]),
    }];
    let provider = AclEntry {
        path: "/".into(),
        roles: vec![],
        privileges: provider_privileges(crate::auth::major_of(&default_pve_version()))
            .iter()
            .map(|p| p.to_string())
            .collect(),
        propagate: true,
    };
    ClusterConfig {
        name: name.into(),
        port: 0,
        pve_version: default_pve_version(),
        qemu_server_version: default_pve_version(),
        next_id: None,
        mac_prefix: default_mac_prefix(),
        timings: Timings::default(),
        nodes: node_cfgs,
        storages,
        bridges,
        templates,
        vms: vec![],
        users: vec![
            UserConfig {
                userid: "root@pam".into(),
                password: Some(Secret::new("pve-sim")),
                enable: true,
                acl: vec![AclEntry {
                    path: "/".into(),
                    roles: vec!["Administrator".into()],
                    privileges: vec![],
                    propagate: true,
                }],
            },
            UserConfig {
                userid: "capmox@pve".into(),
                password: None,
                enable: true,
                acl: vec![provider.clone()],
            },
        ],
        tokens: vec![TokenConfig {
            id: "capmox@pve!capi".into(),
            secret: None,
            privsep: true,
            expire: 0,
            acl: vec![provider],
        }],
        pools: vec![],
        pci_mappings: vec![],
        ha_groups: vec![],
        ha_rules: vec![],
        faults: vec![],
    }
}

/// Derives the secret of a token without a configured one: a UUID v4 built
/// from the seed, the cluster index and the token id (stable across runs).
pub(crate) fn seeded_token_secret(seed: u64, cluster_index: usize, token_id: &str) -> Secret {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in token_id.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut rng = rand::rngs::StdRng::seed_from_u64(
        seed ^ h ^ (cluster_index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
    );
    let bytes: [u8; 16] = rng.random();
    Secret::new(
        uuid::Builder::from_random_bytes(bytes)
            .into_uuid()
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_default_is_valid_and_has_three_clusters() {
        let c = SimConfig::builtin_default();
        c.validate().unwrap();
        let names: Vec<_> = c.clusters.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["dc-a", "dc-b", "dc-c"]);
        assert_eq!(c.clusters[0].nodes.len(), 4);
        assert_eq!(c.clusters[1].templates[0].vmid, 9100);
        assert_eq!(c.clusters[2].nodes[2].name, "pve-c3");
    }

    #[test]
    fn version_switch() {
        assert!(!version_at_least("9.1.18", [9, 1, 19]));
        assert!(version_at_least("9.1.19", [9, 1, 19]));
        assert!(version_at_least("9.2.0", [9, 1, 19]));
        assert!(!version_at_least("8.4.1", [9, 1, 19]));
    }

    #[test]
    fn seeded_secret_is_stable_uuid() {
        let a = seeded_token_secret(7, 0, "capmox@pve!capi");
        let b = seeded_token_secret(7, 0, "capmox@pve!capi");
        let c = seeded_token_secret(7, 1, "capmox@pve!capi");
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(uuid::Uuid::parse_str(a.expose()).is_ok());
    }

    #[test]
    fn yaml_round_trip_and_errors() {
        let text = r#"
time_scale: 0.5
seed: 3
clusters:
  - name: lab
    nodes: [{name: n1}]
    storages:
      - {name: local, type: dir, content: [iso, images]}
    templates:
      - {vmid: 9000, name: tpl, node: n1, storage: local}
    users: [{userid: a@pve}]
    tokens: [{id: "a@pve!t", secret: "s3cret"}]
"#;
        let cfg = SimConfig::from_yaml(text).unwrap();
        assert_eq!(cfg.time_scale, 0.5);
        assert_eq!(cfg.clusters[0].timings.clone_full, 60.0);
        assert_eq!(
            cfg.clusters[0].tokens[0].secret.as_ref().unwrap().expose(),
            "s3cret"
        );

        let bad = text.replace("node: n1, storage", "node: n9, storage");
        let e = SimConfig::from_yaml(&bad).unwrap_err();
        assert_eq!(e.category(), "config");
        assert!(
            e.to_string().contains("VM 9000 on unknown node 'n9'"),
            "{e}"
        );

        let e = SimConfig::from_yaml("clusters: [{name: x, nodes: [], storages: [], bogus: 1}]")
            .unwrap_err();
        assert_eq!(e.category(), "yaml");
    }
}
