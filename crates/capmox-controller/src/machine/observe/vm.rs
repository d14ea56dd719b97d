//! The VM at the machine's VMID: is it ours (marker), where is it, is it
//! locked, does it run, what is its config.
//!
//! Where the VM is read:
//! - **Creating**, node known (`status.proxmoxNode` or our last view): its
//!   config on that node (authoritative; the steps need it anyway). A
//!   "does not exist" there means it moved or is gone: the listing decides.
//! - **Deleting, after our destroy task of the VMID ended OK**: gone, no
//!   call (Proxmox removes the config at the end of the destroy task).
//! - **Otherwise** (provisioned, deleting, node unknown): the instance's
//!   shared `/cluster/resources` listing — one call serves every machine of
//!   the instance for a short while (docs/proxmox-semantics.md §9). A VM
//!   whose tags do not show our marker is looked at once more in its
//!   config (the clone sets the marker in the description before the first
//!   config write adds the tag).
//!
//! Ownership (docs/field-cases.md B29): ours only with this machine's
//! marker; another machine's marker or none is foreign; a template is a
//! template; an unmarked VM locked by a clone or create is being made and
//! is waited for, never guessed at.

use std::sync::Arc;

use tokio::time::Instant;

use crate::machine::context::Run;
use crate::machine::decide::{Facts, Observed, Power, PowerSource, VmFact, VmView};
use crate::machine::runtime::memo::VmMemo;
use crate::machine::vm::marker::Ownership;
use crate::pve::{NodeName, PveError, VmConfig, VmId, VmLock};
use crate::reasons::Reason;

/// Reads the VM.
pub async fn observe(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let Some(vmid) = facts.vm_id() else {
        return Observed::Vm(VmFact::Absent);
    };
    let Ok(inst) = run.instance().cloned() else {
        return Observed::Vm(VmFact::Unreachable(unreachable(facts, "no client")));
    };
    let memo = run.rt().memo(&run.me.uid);
    // Our destroy of this VMID ended OK (no clone is issued while the
    // machine is deleted): gone, without a listing.
    if facts.deleting && memo.destroyed == Some(vmid.get()) {
        return Observed::Vm(VmFact::Absent);
    }
    let node = memo.vm_at(vmid.get()).map(|v| v.node.clone()).or_else(|| {
        run.status
            .proxmox_node
            .as_ref()
            .and_then(|n| NodeName::new(n.clone()).ok())
    });
    if !facts.deleting
        && !facts.provisioned
        && let Some(node) = node
    {
        match inst.api.vm_config(&node, vmid).await {
            Ok(cfg) => return Observed::Vm(classify(run, facts, node, cfg, Power::Unknown, None)),
            Err(PveError::NotFound { .. }) => {
                run.rt()
                    .update_memo(&run.me.uid, |m| m.forget_vm(Instant::now()));
            }
            Err(e) => return Observed::Vm(VmFact::Unreachable(unreachable(facts, &e.to_string()))),
        }
    }
    let fresh_after = run.rt().memo(&run.me.uid).fresh_after;
    let snap = match run
        .rt()
        .resources
        .get(&inst.identity, inst.api.as_ref(), fresh_after)
        .await
    {
        Ok(s) => s,
        Err(e) => return Observed::Vm(VmFact::Unreachable(unreachable(facts, &e.to_string()))),
    };
    let Some(r) = snap.vm(vmid.get()) else {
        return Observed::Vm(VmFact::Absent);
    };
    let Some(node) = r.node.clone() else {
        return Observed::Vm(VmFact::Foreign(format!(
            "VM {vmid} is listed without a node"
        )));
    };
    if r.template {
        return Observed::Vm(VmFact::Template(format!(
            "VM {vmid} is a template{}",
            named(r.name.as_deref())
        )));
    }
    let power = Power::from_run_state(r.run_state()).unwrap_or(Power::Unknown);
    let tags = r.tags().unwrap_or_default();
    if facts.marker.ownership(&tags, None) == Ownership::Ours {
        // While the machine is deleted, the power state our own shutdown or
        // stop left (its task ended OK) wins over the listing's, which lags
        // (docs/proxmox-semantics.md §9): no second shutdown of a VM that
        // already stopped.
        let own = facts
            .deleting
            .then(|| memo.vm_at(vmid.get()).filter(|v| v.node == node))
            .flatten()
            .and_then(|v| v.power);
        let (power, power_source, status) = match own {
            Some(p) => (p, PowerSource::Live, p.as_status().map(str::to_string)),
            None => (
                power,
                PowerSource::Listing,
                r.status.clone().filter(|s| s != "unknown"),
            ),
        };
        if let Some(s) = status {
            run.status.vm_status = Some(s);
        }
        run.status.proxmox_node = Some(node.as_str().to_string());
        return Observed::Vm(VmFact::Ours(VmView {
            node,
            power,
            power_source,
            lock: r.lock.clone(),
            config: None,
            ha: None,
        }));
    }
    // Not ours by tag: the description decides (set by our clone).
    match inst.api.vm_config(&node, vmid).await {
        Ok(cfg) => Observed::Vm(classify(
            run,
            facts,
            node,
            cfg,
            power,
            Some(PowerSource::Listing),
        )),
        Err(PveError::NotFound { .. }) => Observed::Vm(VmFact::Absent),
        Err(e) => Observed::Vm(VmFact::Unreachable(unreachable(facts, &e.to_string()))),
    }
}

/// Reads the config of our VM (the view has none yet).
pub async fn config(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Ok(inst) = run.instance().cloned() else {
        return Observed::Vm(VmFact::Unreachable(unreachable(facts, "no client")));
    };
    match inst.api.vm_config(&view.node, vmid).await {
        Ok(cfg) => {
            let cfg = Arc::new(cfg);
            remember(run, vmid, &view.node, Some(Arc::clone(&cfg)), None);
            Observed::Config(cfg)
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => Observed::Vm(VmFact::Unreachable(unreachable(facts, &e.to_string()))),
    }
}

/// Reads the power state of our VM, live (`status/current`).
pub async fn power(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Ok(inst) = run.instance().cloned() else {
        return Observed::Vm(VmFact::Unreachable(unreachable(facts, "no client")));
    };
    match inst.api.vm_status(&view.node, vmid).await {
        Ok(s) => {
            let p = if s.is_running() {
                Power::Running
            } else {
                Power::Stopped
            };
            run.status.vm_status = p.as_status().map(str::to_string);
            remember(run, vmid, &view.node, view.config.clone(), Some(p));
            Observed::All(vec![Observed::Power(p), Observed::HaManaged(s.ha_state())])
        }
        Err(PveError::NotFound { .. }) => moved(run),
        Err(e) => Observed::Vm(VmFact::Unreachable(unreachable(facts, &e.to_string()))),
    }
}

/// The VM is not on the node it was looked for: forget what we knew, and
/// look it up in a listing fetched from now on.
pub fn moved(run: &mut Run<'_>) -> Observed {
    run.status.proxmox_node = None;
    run.rt()
        .update_memo(&run.me.uid, |m| m.forget_vm(Instant::now()));
    Observed::VmMoved
}

/// Remembers our view of the VM (config and power as far as known).
pub fn remember(
    run: &Run<'_>,
    vmid: VmId,
    node: &NodeName,
    config: Option<Arc<VmConfig>>,
    power: Option<Power>,
) {
    run.rt().update_memo(&run.me.uid, |m| {
        let keep_power = m
            .vm_at(vmid.get())
            .filter(|v| v.node == *node)
            .and_then(|v| v.power);
        m.vm = Some(VmMemo {
            vmid: vmid.get(),
            node: node.clone(),
            config,
            power: power.or(keep_power),
        });
    });
}

fn classify(
    run: &mut Run<'_>,
    facts: &Facts,
    node: NodeName,
    cfg: VmConfig,
    power: Power,
    source: Option<PowerSource>,
) -> VmFact {
    let vmid = facts.vmid.unwrap_or_default();
    if cfg.template {
        return VmFact::Template(format!(
            "VM {vmid} is a template{}",
            named(cfg.name.as_deref())
        ));
    }
    match facts
        .marker
        .ownership(&cfg.tags, cfg.description.as_deref())
    {
        Ownership::Ours => {
            run.status.proxmox_node = Some(node.as_str().to_string());
            let remembered = facts.vm_id().and_then(|v| {
                run.rt()
                    .memo(&run.me.uid)
                    .vm_at(v.get())
                    .and_then(|m| m.power)
            });
            let (power, source) = match (source, remembered) {
                (Some(s), _) => (power, s),
                (None, Some(p)) => (p, PowerSource::Live),
                (None, None) => (Power::Unknown, PowerSource::Live),
            };
            let cfg = Arc::new(cfg);
            if let Some(id) = facts.vm_id() {
                remember(
                    run,
                    id,
                    &node,
                    Some(Arc::clone(&cfg)),
                    (source == PowerSource::Live && power != Power::Unknown).then_some(power),
                );
            }
            VmFact::Ours(VmView {
                node,
                power,
                power_source: source,
                lock: cfg.lock.clone(),
                config: Some(cfg),
                ha: None,
            })
        }
        Ownership::Foreign(o) => VmFact::Foreign(o),
        Ownership::Unmarked if matches!(cfg.lock, Some(VmLock::Clone | VmLock::Create)) => {
            VmFact::Busy(format!(
                "VM {vmid} is being created (lock {}) and shows no owner yet; waiting",
                cfg.lock
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_default()
            ))
        }
        Ownership::Unmarked if made_by_capmox(facts, &cfg) => {
            run.status.proxmox_node = Some(node.as_str().to_string());
            VmFact::Legacy(VmView {
                node,
                power,
                power_source: source.unwrap_or(PowerSource::Live),
                lock: cfg.lock.clone(),
                config: Some(Arc::new(cfg)),
                ha: None,
            })
        }
        Ownership::Unmarked => VmFact::Foreign(format!(
            "VM {vmid} carries no capmox marker{}",
            named(cfg.name.as_deref())
        )),
    }
}

/// Whether unmarked `cfg` is the VM CAPMOX made for this machine: named
/// after it, and its SMBIOS UUID is the one `spec.providerID` names
/// (`proxmox://<uuid>`, what CAPMOX writes; docs/migrating-from-capmox.md).
fn made_by_capmox(facts: &Facts, cfg: &VmConfig) -> bool {
    let Some(uuid) = cfg.smbios1.as_ref().and_then(|s| s.uuid) else {
        return false;
    };
    let uuid = uuid.to_string();
    let named_so = cfg.name.as_deref() == Some(facts.name.as_str());
    let id_matches = facts
        .provider_id
        .as_deref()
        .and_then(|p| p.strip_prefix("proxmox://"))
        .is_some_and(|u| u.eq_ignore_ascii_case(&uuid));
    named_so && id_matches
}

fn named(name: Option<&str>) -> String {
    name.map(|n| format!(" (name {n})")).unwrap_or_default()
}

fn unreachable(facts: &Facts, detail: &str) -> Reason {
    Reason::InstanceUnreachable {
        instance: facts.instance.clone().unwrap_or_default(),
        detail: detail.to_string(),
    }
}
