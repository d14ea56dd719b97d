//! Handlers of the simulated Proxmox API, one module per area.

pub(crate) mod access;
pub(crate) mod agent;
pub(crate) mod clone;
pub(crate) mod cloudinit;
pub(crate) mod cluster;
pub(crate) mod config;
pub(crate) mod ha;
pub(crate) mod migrate;
pub(crate) mod nodes;
pub(crate) mod pools;
pub(crate) mod power;
pub(crate) mod qemu;
pub(crate) mod storage;
pub(crate) mod tasks;

use serde_json::{Value, json};

use crate::http::Ctx;
use crate::http::envelope::ApiError;
use crate::state::ClusterState;
use crate::state::vm::Vm;
use crate::worker::TaskSpec;

/// The VM `vmid` whose config lives on `node` (qemu-server `load_config`).
pub(crate) fn vm_on<'a>(st: &'a ClusterState, node: &str, vmid: u32) -> Result<&'a Vm, ApiError> {
    st.vms
        .get(&vmid)
        .filter(|v| v.node == node)
        .ok_or_else(|| ApiError::no_vm_config(node, vmid))
}

/// The same lookup as task error text.
pub(crate) fn vm_missing(node: &str, vmid: u32) -> String {
    format!("Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
}

/// A task spec for a call (owner = caller, fault of the call).
pub(crate) fn task_spec(
    ctx: &Ctx,
    node: &str,
    kind: &'static str,
    id: u32,
    nominal: f64,
) -> TaskSpec {
    TaskSpec {
        node: node.to_string(),
        kind,
        id: id.to_string(),
        owner: ctx.who.task_owner(),
        fault: ctx.task_fault.clone(),
        nominal,
        lock_vmid: id,
        lock_timeout: ctx.cluster.cfg.timings.lock_timeout_default,
    }
}

/// `skiplock` is root-only (400 otherwise).
pub(crate) fn check_skiplock(ctx: &Ctx) -> Result<bool, ApiError> {
    let skip = ctx.params.bool("skiplock")?.unwrap_or(false);
    if skip && !ctx.who.is_root() {
        return Err(ApiError::param(
            "skiplock",
            "Only root may use this option.",
        ));
    }
    Ok(skip)
}

/// JSON encoding of a config value as `GET …/config` returns it: integers
/// and booleans as numbers (qemu-server's config return schema), the rest as
/// strings.
pub(crate) fn typed_config_value(key: &str, value: &str) -> Value {
    const INTEGERS: &[&str] = &[
        "balloon",
        "cores",
        "cpuunits",
        "migrate_speed",
        "shares",
        "smp",
        "snaptime",
        "sockets",
        "vcpus",
    ];
    const NUMBERS: &[&str] = &["cpulimit", "migrate_downtime"];
    const BOOLEANS: &[&str] = &[
        "acpi",
        "allow-ksm",
        "autostart",
        "ciupgrade",
        "freeze",
        "keephugepages",
        "kvm",
        "localtime",
        "numa",
        "onboot",
        "protection",
        "reboot",
        "tablet",
        "tdf",
        "template",
    ];
    if (INTEGERS.contains(&key) || BOOLEANS.contains(&key))
        && let Ok(i) = value.parse::<i64>()
    {
        return json!(i);
    }
    if NUMBERS.contains(&key)
        && let Ok(f) = value.parse::<f64>()
    {
        return json!(f);
    }
    json!(value)
}

/// Seconds of uptime as Proxmox reports them (simulated seconds).
pub(crate) fn uptime(ctx: &Ctx, vm: &Vm) -> u64 {
    vm.run
        .as_ref()
        .map(|r| ctx.cluster.clock.simulated_since(r.since))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values() {
        assert_eq!(typed_config_value("cores", "2"), json!(2));
        assert_eq!(typed_config_value("template", "1"), json!(1));
        assert_eq!(typed_config_value("memory", "4096"), json!("4096"));
        assert_eq!(typed_config_value("cpulimit", "1.5"), json!(1.5));
        assert_eq!(typed_config_value("agent", "1"), json!("1"));
    }
}
