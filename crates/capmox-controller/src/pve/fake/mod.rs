//! An in-memory Proxmox for the per-step unit tests: VMs with configs,
//! power states and locks, ISO volumes, tasks that end when they are
//! created, and errors queued per method. It answers with `pve-client`'s
//! own types and error variants, and records every call, so a test asserts
//! what a step asked of Proxmox and what it made of the answer.
//!
//! It is deliberately small: behaviour the steps do not rely on (schema
//! validation, locks over time, cluster-file-system lag) is `pve-sim`'s
//! job, which the integration and end-to-end tests use.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;
use pve_client::error::CallContext;
use pve_client::{ConflictKind, Missing};
use serde_json::{Value, json};

use super::*;

/// A VM of the fake.
#[derive(Clone, Debug)]
pub struct FakeVm {
    /// Its node.
    pub node: String,
    /// Its config as Proxmox stores it (key → option string).
    pub config: BTreeMap<String, Value>,
    /// Running.
    pub running: bool,
}

/// What the fake holds.
#[derive(Debug, Default)]
pub struct State {
    /// VMs by VMID.
    pub vms: BTreeMap<u32, FakeVm>,
    /// Volumes by storage: volume IDs (`storage:iso/file`).
    pub volumes: BTreeMap<String, Vec<String>>,
    /// Exit status of every task, by UPID.
    pub tasks: HashMap<String, String>,
    /// Errors to answer, per method name, first in first out.
    pub errors: HashMap<&'static str, VecDeque<PveError>>,
    /// Every call: method name and its main argument.
    pub calls: Vec<(&'static str, String)>,
    /// Exit status of the next task started (default `OK`).
    pub next_exit: VecDeque<String>,
    /// HA resources by VMID: requested state and group.
    pub ha: BTreeMap<u32, (String, Option<String>)>,
    /// HA rules: resources listed and the digest.
    pub ha_rules: BTreeMap<String, (Vec<String>, String)>,
    /// What `GET /access/permissions` answers (default: nothing held).
    pub permissions: Permissions,
    /// What `GET /version` answers (default `9.1.0`).
    pub version: Option<String>,
    /// Resource pools: their member VMIDs (a clone naming a pool adds it).
    pub pools: BTreeMap<String, std::collections::BTreeSet<u32>>,
    /// PCI resource mappings (`GET /cluster/mapping/pci`).
    pub pci_mappings: Vec<crate::pve::PciMapping>,
}

/// The in-memory Proxmox.
#[derive(Debug, Default)]
pub struct FakeProxmox {
    /// Its state (tests read and change it directly).
    pub state: Mutex<State>,
}

fn ctx(method: &'static str, path: String) -> Box<CallContext> {
    Box::new(CallContext {
        instance: "fake".into(),
        method,
        path,
    })
}

/// A `NotFound` of a VM, as Proxmox words it.
pub fn vm_missing(node: &str, vmid: u32) -> PveError {
    PveError::NotFound {
        ctx: ctx("GET", format!("/nodes/{node}/qemu/{vmid}/config")),
        missing: Missing::Vm,
        message: format!(
            "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
        ),
    }
}

/// A 500 that the client classifies as transient.
pub fn transient(path: &str) -> PveError {
    PveError::Transient {
        ctx: ctx("POST", path.to_string()),
        cause: pve_client::TransientCause::Status(500),
        message: "internal error".into(),
    }
}

/// A conflict of `kind`.
pub fn conflict(kind: ConflictKind, message: &str) -> PveError {
    PveError::Conflict {
        ctx: ctx("POST", "/".into()),
        kind,
        message: message.into(),
    }
}

impl FakeProxmox {
    /// An empty fake.
    pub fn new() -> FakeProxmox {
        FakeProxmox::default()
    }

    /// Adds a VM with a config given as `key=value` pairs.
    pub fn add_vm(&self, vmid: u32, node: &str, running: bool, config: &[(&str, &str)]) {
        let config = config
            .iter()
            .map(|(k, v)| ((*k).to_string(), Value::String((*v).to_string())))
            .collect();
        self.lock().vms.insert(
            vmid,
            FakeVm {
                node: node.into(),
                config,
                running,
            },
        );
    }

    /// Puts volume `volid` (`storage:iso/file`) on `storage`.
    pub fn add_volume(&self, storage: &str, volid: &str) {
        self.lock()
            .volumes
            .entry(storage.to_string())
            .or_default()
            .push(volid.to_string());
    }

    /// The volume IDs on `storage`.
    pub fn volumes(&self, storage: &str) -> Vec<String> {
        self.lock()
            .volumes
            .get(storage)
            .cloned()
            .unwrap_or_default()
    }

    /// Queues an error for the next call of `method`.
    pub fn fail_next(&self, method: &'static str, e: PveError) {
        self.lock().errors.entry(method).or_default().push_back(e);
    }

    /// Makes the next task end with `exitstatus`.
    pub fn next_task_exit(&self, exitstatus: &str) {
        self.lock().next_exit.push_back(exitstatus.into());
    }

    /// The calls made so far, by method name.
    pub fn calls(&self) -> Vec<&'static str> {
        self.lock().calls.iter().map(|(m, _)| *m).collect()
    }

    /// A copy of a VM.
    pub fn vm(&self, vmid: u32) -> Option<FakeVm> {
        self.lock().vms.get(&vmid).cloned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn enter(&self, method: &'static str, arg: String) -> Result<(), PveError> {
        let mut s = self.lock();
        s.calls.push((method, arg));
        match s.errors.get_mut(method).and_then(VecDeque::pop_front) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    fn task(&self, node: &NodeName, worker: &str, id: &str) -> Upid {
        let mut s = self.lock();
        let n = s.tasks.len() as u32 + 1;
        let upid = Upid::new(
            node.clone(),
            n,
            1,
            1_700_000_000 + u64::from(n),
            worker,
            id,
            "capmox@pve!capi",
        )
        .unwrap_or_else(|_| unreachable_upid());
        let exit = s.next_exit.pop_front().unwrap_or_else(|| "OK".into());
        s.tasks.insert(upid.as_str().to_string(), exit);
        upid
    }

    fn with_vm<T>(
        &self,
        node: &NodeName,
        vmid: VmId,
        f: impl FnOnce(&mut FakeVm) -> Result<T, PveError>,
    ) -> Result<T, PveError> {
        let mut s = self.lock();
        match s.vms.get_mut(&vmid.get()) {
            Some(vm) if vm.node == node.as_str() => f(vm),
            _ => Err(vm_missing(node.as_str(), vmid.get())),
        }
    }
}

fn unreachable_upid() -> Upid {
    // The fields above are always valid; this only satisfies the type.
    match Upid::parse("UPID:fake:00000001:00000001:00000001:qmstart:100:root@pam:") {
        Ok(u) => u,
        Err(e) => panic!("fake UPID: {e}"),
    }
}

fn config_of(vm: &FakeVm) -> Result<VmConfig, PveError> {
    VmConfig::from_map(vm.config.clone()).map_err(|e| PveError::Decode {
        ctx: ctx("GET", "/config".into()),
        message: e.to_string(),
    })
}

fn apply(vm: &mut FakeVm, update: &ConfigUpdate) {
    for (k, v) in update.changes() {
        if k != "digest" {
            vm.config.insert(k.clone(), Value::String(v.clone()));
        }
    }
    for k in update.deletions() {
        vm.config.remove(k);
    }
}

fn ha_json(vmid: u32, state: &str, group: &Option<String>) -> HaResource {
    serde_json::from_value(json!({"sid": format!("vm:{vmid}"), "state": state, "group": group}))
        .expect("an HA resource decodes")
}

fn ended(upid: &Upid, exitstatus: String) -> Result<TaskOutcome, PveError> {
    match pve_client::task::success_warnings(&exitstatus) {
        Some(warnings) => Ok(TaskOutcome {
            upid: upid.clone(),
            exitstatus,
            warnings,
        }),
        None => Err(PveError::TaskFailed {
            instance: "fake".into(),
            upid: upid.clone(),
            kind: pve_client::error::task_failure_kind(&exitstatus),
            exitstatus,
            log_tail: Vec::new(),
        }),
    }
}

mod api;
