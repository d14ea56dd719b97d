//! `pve-sim`: several simulated Proxmox VE clusters over HTTPS.
//!
//! What `vcsim` is to vSphere providers, this crate is to the Proxmox CAPI
//! provider: each simulated cluster listens on its own port with its own CA,
//! tokens, nodes, storages, templates and VMID space, keeps state, enforces
//! the rules Proxmox enforces and fails the way Proxmox fails (shapes and
//! texts from qemu-server / pve-common / pve-http-server, see
//! `docs/proxmox-semantics.md`). When the official schema
//! (`apidoc.json`) is configured, every request is validated against it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), pve_sim::SimError> {
//! let sim = pve_sim::Simulator::start(pve_sim::SimConfig::builtin_default().with_time_scale(0.001)).await?;
//! let dc_a = sim.cluster("dc-a").expect("built-in cluster");
//! println!("{} token {} CA:\n{}", dc_a.url(), dc_a.token_id(), dc_a.ca_pem());
//! sim.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Module map: [`config`] (YAML + built-in default), [`faults`], [`iso`]
//! (NoCloud seed reader), [`lower_bound`] (benchmark denominator),
//! [`schema`] (apidoc.json validator), [`control`] (the `/_sim/` API),
//! and internal modules for HTTP (`http`), auth, property strings (`props`),
//! state, locks, tasks (`worker`), the API handlers (`api`) and the guest
//! network model (`guest`). The crate README lists every place the
//! simulator is knowingly simpler than Proxmox.

pub(crate) mod api;
pub mod auth;
pub mod boot;
pub(crate) mod certs;
pub(crate) mod clock;
pub mod config;
pub mod control;
pub(crate) mod cpu_conf;
pub mod error;
pub mod faults;
pub(crate) mod guest;
pub(crate) mod ha_manager;
pub(crate) mod hardware;
pub(crate) mod http;
pub mod iso;
pub(crate) mod locks;
pub mod lower_bound;
pub(crate) mod pci;
pub(crate) mod props;
pub mod schema;
pub mod secret;
pub(crate) mod simulator;
pub(crate) mod snapshot;
pub(crate) mod state;
pub(crate) mod worker;

/// The stored name of an upload (`POST /nodes/{node}/storage/{storage}/upload`).
pub use api::storage::upload_file_name;
pub use config::{
    AclEntry, AllocLock, BridgeConfig, ClusterConfig, DhcpRange, HaGroupConfig, HaRuleConfig,
    NextIdRange, NodeConfig, PoolConfig, SimConfig, StorageConfig, StorageType, Timings,
    TokenConfig, UserConfig, VmConfig,
};
pub use error::SimError;
pub use faults::{ActiveFault, Fault, FaultId, FaultKind};
pub use iso::{IsoError, NoCloudSeed};
pub use lower_bound::{FleetRequest, FleetSteps, LowerBound, Placement};
pub use secret::Secret;
pub use simulator::{SimCluster, Simulator};
pub use snapshot::{HaSnapshot, NodeSnapshot, TaskSnapshot, VmSnapshot, VolumeSnapshot};
pub use state::CallLog;
pub use state::vm::AgentState;

/// The routes the simulator serves under `/api2/json`: `(method, path template)`.
pub fn routes() -> Vec<(&'static str, &'static str)> {
    http::routes::ROUTES
        .iter()
        .map(|r| (r.method, r.template))
        .collect()
}

/// The permission check the simulator applies to a route, in the schema's
/// JSON form (`{"user":"all"}` or `{"check":[…]}`); `None` if not served.
pub fn route_permissions(method: &str, template: &str) -> Option<serde_json::Value> {
    http::routes::ROUTES
        .iter()
        .find(|r| r.method == method && r.template == template)
        .map(|r| r.check.to_schema_json())
}
