//! The decision core, case by case. Each test builds the facts a reconcile
//! would observe and asserts the one step an operator would expect.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::api::machine::{DiskSize as SpecDisk, Disks, ProxmoxMachineSpec};

const UID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f";
const ISO: &str = "capmox-131-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso";

fn marker() -> Marker {
    Marker::new("wl1", "m1", UID)
}

fn config(extra: &[(&str, &str)]) -> VmConfig {
    let mut map: BTreeMap<String, Value> = [
        ("name", "m1"),
        (
            "description",
            "capmox: wl1/m1 uid=3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f",
        ),
        ("memory", "2048"),
        ("cores", "2"),
        ("agent", "1"),
        ("scsi0", "ceph:vm-131-disk-0,size=20G"),
        ("net0", "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0"),
        ("tags", "capmox;capmox-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f"),
        ("digest", "abc"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
    .collect();
    for (k, v) in extra {
        map.insert((*k).to_string(), Value::String((*v).to_string()));
    }
    VmConfig::from_map(map).unwrap()
}

/// The VM right after the config write: ISO attached, everything as desired.
fn configured() -> VmConfig {
    config(&[("ide0", &format!("cephfs:iso/{ISO},media=cdrom"))])
}

fn view(config: Option<VmConfig>, running: Option<bool>) -> VmView {
    VmView {
        node: "pve-a1".into(),
        running,
        lock: None,
        template: false,
        tags: Tags::parse("capmox").unwrap(),
        config,
    }
}

fn v4() -> ClaimedAddress {
    ClaimedAddress {
        net: "net0".into(),
        address: "10.10.0.20".parse().unwrap(),
        prefix: 24,
        gateway: Some("10.10.0.1".parse().unwrap()),
    }
}

fn spec() -> ProxmoxMachineSpec {
    ProxmoxMachineSpec::default()
}

/// A machine ready to be cloned: every precondition met, instance chosen,
/// claims bound, nothing observed about the VM yet.
fn base() -> Facts {
    let s = spec();
    Facts {
        deleting: false,
        has_finalizer: true,
        paused: false,
        spec_errors: None,
        owner: Owner::Present {
            bootstrap_ready: true,
        },
        cluster: ClusterFact::Present {
            infra_provisioned: true,
        },
        instance: Some("dc-a".into()),
        vmid: None,
        provisioned: false,
        task: None,
        vm: None,
        claims: Some(ClaimsFact::Bound(vec![v4()])),
        claim_objects: Some((1, 0)),
        agent: None,
        name: "m1".into(),
        marker: marker(),
        desired: vmconfig::desired(&s, "m1", &marker(), None).map_err(|e| e.to_string()),
        disks: s.disks.clone(),
        iso_file: Some(ISO.into()),
        iso_uploaded: false,
        skip_agent: false,
        check_bootstrap: false,
        bootstrap_format_error: None,
        bootstrap: None,
        last_success: None,
    }
}

fn with_vm(mut f: Facts, v: VmFact) -> Facts {
    f.vmid = Some(131);
    f.vm = Some(v);
    f
}

fn reason(step: &Step) -> &'static str {
    match step {
        Step::Wait(w) => w.reason,
        other => panic!("expected a wait, got {other:?}"),
    }
}

#[test]
fn preconditions_in_order() {
    let mut f = base();
    f.paused = true;
    assert_eq!(reason(&decide(&f)), "Paused");
    f.paused = false;
    f.owner = Owner::Missing;
    assert_eq!(reason(&decide(&f)), "WaitingForOwner");
    f.owner = Owner::Present {
        bootstrap_ready: true,
    };
    f.cluster = ClusterFact::Missing;
    assert_eq!(reason(&decide(&f)), "WaitingForCluster");
    f.cluster = ClusterFact::NoInfraCluster;
    assert_eq!(reason(&decide(&f)), "WaitingForClusterInfrastructure");
    f.cluster = ClusterFact::Present {
        infra_provisioned: true,
    };
    f.has_finalizer = false;
    assert_eq!(decide(&f), Step::AddFinalizer);
    f.has_finalizer = true;
    f.spec_errors =
        Some("spec.network.networkDevices[0].vlan: VLAN tag 0 is outside 1..4094".into());
    let s = decide(&f);
    assert_eq!(reason(&s), "InvalidSpec");
    assert!(matches!(&s, Step::Wait(w) if w.until == Until::Change && w.message.contains("vlan")));
    f.spec_errors = None;
    f.cluster = ClusterFact::Present {
        infra_provisioned: false,
    };
    assert_eq!(reason(&decide(&f)), "WaitingForClusterInfrastructure");
    f.cluster = ClusterFact::Present {
        infra_provisioned: true,
    };
    f.owner = Owner::Present {
        bootstrap_ready: false,
    };
    assert_eq!(reason(&decide(&f)), "WaitingForBootstrapData");
    f.owner = Owner::Present {
        bootstrap_ready: true,
    };
    f.instance = None;
    assert_eq!(decide(&f), Step::ChooseInstance);
}

#[test]
fn claims_come_before_the_clone() {
    let mut f = base();
    f.claims = None;
    assert_eq!(decide(&f), Step::ObserveClaims);
    f.claims = Some(ClaimsFact::Missing);
    assert_eq!(decide(&f), Step::EnsureClaims);
    f.claims = Some(ClaimsFact::NoPool(
        "the ProxmoxCluster has not recorded an ipv4 pool for instance dc-a".into(),
    ));
    assert_eq!(reason(&decide(&f)), "WaitingForIPAddresses");
    // Pending claims do not hold the clone back...
    f.claims = Some(ClaimsFact::Pending {
        pools: "wl1-dc-a-ipv4".into(),
        exhausted: false,
        message: String::new(),
    });
    assert_eq!(decide(&f), Step::Clone);
    // ...but nothing is uploaded or started without the addresses (B15).
    let mut g = with_vm(f, VmFact::Ours(view(Some(config(&[])), Some(false))));
    assert_eq!(reason(&decide(&g)), "WaitingForIPAddresses");
    g.claims = Some(ClaimsFact::Pending {
        pools: "wl1-dc-a-ipv4".into(),
        exhausted: true,
        message: "PoolExhausted".into(),
    });
    let s = decide(&g);
    assert_eq!(reason(&s), "IPAddressPoolExhausted");
    assert!(
        matches!(&s, Step::Wait(w) if w.message == "waiting for IP addresses from wl1-dc-a-ipv4: PoolExhausted")
    );
}

#[test]
fn happy_path_step_by_step() {
    let f = base();
    assert_eq!(decide(&f), Step::Clone);
    let mut f = with_vm(base(), VmFact::Absent);
    assert_eq!(decide(&f), Step::Clone, "VMID written, VM not there: clone");
    f.vm = None;
    assert_eq!(decide(&f), Step::ObserveVm);
    f.task = Some(TaskFact::Running(Operation::Clone));
    assert_eq!(reason(&decide(&f)), "Cloning");
    f.task = Some(TaskFact::Succeeded(Operation::Clone));
    assert_eq!(decide(&f), Step::ClearTask);
    f.task = None;
    f.vm = Some(VmFact::Ours(view(None, None)));
    assert_eq!(decide(&f), Step::ObserveConfig);
    f.vm = Some(VmFact::Ours(view(Some(config(&[])), Some(false))));
    assert_eq!(decide(&f), Step::UploadIso);
    f.iso_uploaded = true;
    assert_eq!(decide(&f), Step::Configure);
    f.vm = Some(VmFact::Ours(view(Some(configured()), Some(false))));
    assert_eq!(decide(&f), Step::Start);
    f.last_success = Some(Operation::Start);
    assert_eq!(
        decide(&f),
        Step::ObserveAgent,
        "the listing may still say stopped"
    );
    f.vm = Some(VmFact::Ours(view(Some(configured()), Some(true))));
    f.last_success = None;
    f.agent = Some(AgentFact::NotYet("QEMU guest agent is not running".into()));
    assert_eq!(reason(&decide(&f)), "WaitingForAddresses");
    let devs = vec![DeviceAddresses {
        net: "net0".into(),
        ipv4: vec!["10.10.0.20".into()],
        ipv6: vec![],
    }];
    f.agent = Some(AgentFact::Addresses(devs.clone()));
    assert_eq!(decide(&f), Step::Finish(devs));
    // A DHCP address instead of the claimed one: not done.
    f.agent = Some(AgentFact::Addresses(vec![DeviceAddresses {
        net: "net0".into(),
        ipv4: vec!["10.10.0.150".into()],
        ipv6: vec![],
    }]));
    assert_eq!(reason(&decide(&f)), "WaitingForAddresses");
    f.provisioned = true;
    assert_eq!(decide(&f), Step::Done);
}

#[test]
fn config_drift_and_disks() {
    let mut f = with_vm(base(), VmFact::Ours(view(Some(configured()), Some(false))));
    let mut s = spec();
    s.memory_mib = Some(4096);
    s.disks = Some(Disks {
        boot_volume: Some(SpecDisk {
            disk: "scsi0".into(),
            size_gb: 40,
        }),
        additional_volumes: vec![],
    });
    f.desired = vmconfig::desired(&s, "m1", &marker(), None).map_err(|e| e.to_string());
    f.disks = s.disks.clone();
    // ISO attached but memory differs: configure (no second upload needed).
    assert_eq!(decide(&f), Step::Configure);
    let done = config(&[
        ("ide0", &format!("cephfs:iso/{ISO},media=cdrom")),
        ("memory", "4096"),
    ]);
    f.vm = Some(VmFact::Ours(view(Some(done), Some(false))));
    match decide(&f) {
        Step::Resize(r) => {
            assert_eq!(r.slot.to_string(), "scsi0");
            assert_eq!(r.size.to_string(), "40G");
        }
        other => panic!("{other:?}"),
    }
    // Shrink: a condition, no call (B08).
    s.disks = Some(Disks {
        boot_volume: Some(SpecDisk {
            disk: "scsi0".into(),
            size_gb: 10,
        }),
        additional_volumes: vec![],
    });
    f.disks = s.disks.clone();
    let w = decide(&f);
    assert_eq!(reason(&w), "ResizeFailed");
    assert!(matches!(&w, Step::Wait(x) if x.message == "cannot shrink scsi0 from 20GiB to 10GiB"));
}

#[test]
fn bootstrap_is_confirmed_before_finishing() {
    let devs = vec![DeviceAddresses {
        net: "net0".into(),
        ipv4: vec!["10.10.0.20".into()],
        ipv6: vec![],
    }];
    let mut f = with_vm(base(), VmFact::Ours(view(Some(configured()), Some(true))));
    f.check_bootstrap = true;
    f.agent = Some(AgentFact::Addresses(devs.clone()));
    assert_eq!(decide(&f), Step::ObserveBootstrap);
    f.bootstrap = Some(BootstrapFact::Pending(
        "waiting for the bootstrap to finish: exit code 1".into(),
    ));
    assert_eq!(
        decide(&f),
        Step::Wait(Wait {
            reason: "WaitingForBootstrap",
            message: "waiting for the bootstrap to finish: exit code 1".into(),
            until: Until::Poll,
        })
    );
    f.bootstrap = Some(BootstrapFact::Blocked("exec refused".into()));
    assert_eq!(
        decide(&f),
        Step::Wait(Wait {
            reason: "WaitingForBootstrap",
            message: "exec refused".into(),
            until: Until::Backoff,
        })
    );
    f.bootstrap = Some(BootstrapFact::Done);
    assert_eq!(decide(&f), Step::Finish(devs.clone()));
    // Addresses first: no check while the agent has not reported them all.
    f.bootstrap = None;
    f.agent = Some(AgentFact::NotYet("QEMU guest agent is not running".into()));
    assert_eq!(reason(&decide(&f)), "WaitingForAddresses");
    // Without the agent there is nothing to ask.
    f.skip_agent = true;
    f.check_bootstrap = false;
    assert_eq!(decide(&f), Step::Finish(devs));
}

#[test]
fn undeliverable_bootstrap_formats_are_refused_before_proxmox() {
    use crate::cloudinit::FormatError;
    let mut f = base();
    f.instance = None;
    f.claims = None;
    f.bootstrap_format_error = Some(FormatError::IgnitionNotSupported);
    assert_eq!(
        decide(&f),
        Step::Wait(Wait {
            reason: "UnsupportedBootstrapFormat",
            message: "bootstrap data format \"ignition\" is not supported yet; supported formats: cloud-config".into(),
            until: Until::Refused,
        })
    );
    // Also once a VM exists (the format changed): nothing is uploaded.
    let mut f = with_vm(base(), VmFact::Ours(view(Some(config(&[])), Some(false))));
    f.bootstrap_format_error = Some(FormatError::Unknown("yaml".into()));
    assert_eq!(reason(&decide(&f)), "UnsupportedBootstrapFormat");
    // A provisioned machine is not affected.
    f.provisioned = true;
    assert_eq!(decide(&f), Step::Done);
    // Preconditions still come first.
    let mut f = base();
    f.bootstrap_format_error = Some(FormatError::IgnitionNotSupported);
    f.has_finalizer = false;
    assert_eq!(decide(&f), Step::AddFinalizer);
}

#[test]
fn skip_agent_uses_claimed_addresses() {
    let mut f = with_vm(base(), VmFact::Ours(view(Some(configured()), Some(true))));
    f.skip_agent = true;
    assert_eq!(
        decide(&f),
        Step::Finish(vec![DeviceAddresses {
            net: "net0".into(),
            ipv4: vec!["10.10.0.20".into()],
            ipv6: vec![]
        }])
    );
    f.claims = Some(ClaimsFact::NotNeeded);
    assert_eq!(reason(&decide(&f)), "WaitingForAddresses");
}

#[test]
fn foreign_vm_at_our_vmid() {
    // B01: the VMID was taken by another machine's clone: take another.
    let f = with_vm(base(), VmFact::Foreign("wl2/wl2-md-0-x uid=aaaa".into()));
    assert_eq!(
        decide(&f),
        Step::ReplaceVmid("wl2/wl2-md-0-x uid=aaaa".into())
    );
    // Provisioned machine whose VM now carries another marker: never touched.
    let mut g = f.clone();
    g.provisioned = true;
    assert_eq!(
        decide(&g),
        Step::Done,
        "provisioned machines are not re-examined"
    );
    g.provisioned = false;
    g.vm = Some(VmFact::Ours(VmView {
        template: true,
        ..view(Some(config(&[])), Some(false))
    }));
    assert_eq!(reason(&decide(&g)), "VirtualMachineIsTemplate");
}

#[test]
fn clone_failures() {
    let failed = |kind: TaskFailureKind, msg: &str| {
        Some(TaskFact::Failed {
            op: Operation::Clone,
            kind,
            message: msg.into(),
        })
    };
    let mut f = with_vm(base(), VmFact::Absent);
    // B04(a): storage lock timeout — retry with backoff.
    f.task = failed(
        TaskFailureKind::LockTimeout,
        "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout",
    );
    f.vm = None;
    assert_eq!(decide(&f), Step::ObserveVm);
    f.vm = Some(VmFact::Absent);
    let s = decide(&f);
    assert_eq!(reason(&s), "CloneFailed");
    assert!(
        matches!(&s, Step::Wait(w) if w.until == Until::Backoff && w.message.contains("got timeout"))
    );
    // A partial VM of ours is removed before the retry.
    f.vm = Some(VmFact::Ours(view(Some(config(&[])), Some(false))));
    assert_eq!(decide(&f), Step::RemovePartial);
    // B01: "already exists" — ours after all (adopt) or someone else's (new VMID).
    f.task = failed(
        TaskFailureKind::Conflict(pve_client::ConflictKind::AlreadyExists),
        "unable to create VM 131: config file already exists",
    );
    assert_eq!(decide(&f), Step::ClearTask);
    f.vm = Some(VmFact::Foreign("tag capmox-aaaa".into()));
    assert_eq!(decide(&f), Step::ReplaceVmid("tag capmox-aaaa".into()));
}

#[test]
fn other_failures_carry_the_exit_status() {
    let mut f = with_vm(base(), VmFact::Ours(view(Some(configured()), Some(false))));
    f.task = Some(TaskFact::Failed {
        op: Operation::Configure,
        kind: TaskFailureKind::LockTimeout,
        message: "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout".into(),
    });
    let s = decide(&f);
    assert_eq!(reason(&s), "ConfigureFailed");
    assert!(
        matches!(&s, Step::Wait(w) if w.message == "configure task failed: can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout")
    );
    // WARNINGS is success and never reaches here; "already running" is success too.
    f.task = Some(TaskFact::Failed {
        op: Operation::Start,
        kind: TaskFailureKind::Conflict(pve_client::ConflictKind::AlreadyRunning),
        message: "VM 131 already running".into(),
    });
    assert_eq!(decide(&f), Step::ClearTask);
    // A lost task (node restarted) means: look at the VM again.
    f.task = Some(TaskFact::Lost(Operation::Start));
    assert_eq!(decide(&f), Step::ClearTask);
}

#[test]
fn locked_vm_waits() {
    let mut v = view(Some(config(&[])), Some(false));
    v.lock = Some(VmLock::Clone);
    let f = with_vm(base(), VmFact::Ours(v));
    assert_eq!(reason(&decide(&f)), "Cloning");
    let mut v = view(Some(config(&[])), Some(false));
    v.lock = Some(VmLock::Backup);
    let f = with_vm(base(), VmFact::Ours(v));
    assert_eq!(reason(&decide(&f)), "VirtualMachineLocked");
}

#[test]
fn unreachable_instance_is_a_condition() {
    let f = with_vm(
        base(),
        VmFact::Unreachable("dc-b: connection refused".into()),
    );
    let s = decide(&f);
    assert_eq!(reason(&s), "InstanceUnreachable");
    assert!(matches!(&s, Step::Wait(w) if w.until == Until::Backoff));
}

#[test]
fn iso_cleanup_after_provisioning() {
    let mut f = with_vm(base(), VmFact::Ours(view(Some(configured()), Some(true))));
    f.provisioned = true;
    f.task = Some(TaskFact::Running(Operation::DeleteVolume));
    assert_eq!(reason(&decide(&f)), "CleaningUpBootstrapData");
    f.task = Some(TaskFact::Failed {
        op: Operation::DeleteVolume,
        kind: TaskFailureKind::Other,
        message: "x".into(),
    });
    assert_eq!(decide(&f), Step::DeleteIso);
    f.task = Some(TaskFact::Failed {
        op: Operation::DeleteVolume,
        kind: TaskFailureKind::NotFound(pve_client::Missing::Volume),
        message: "volume does not exist".into(),
    });
    assert_eq!(decide(&f), Step::ClearTask);
}

fn deleting(mut f: Facts) -> Facts {
    f.deleting = true;
    f
}

#[test]
fn deletion_sequence() {
    // B21: stop, wait, destroy, wait, confirm gone, then ISO, claims, finalizer.
    let mut f = deleting(with_vm(base(), VmFact::Ours(view(None, Some(true)))));
    assert_eq!(decide(&f), Step::Shutdown);
    f.task = Some(TaskFact::Running(Operation::Shutdown));
    assert_eq!(reason(&decide(&f)), "Deleting");
    f.task = Some(TaskFact::Failed {
        op: Operation::Shutdown,
        kind: TaskFailureKind::Other,
        message: "VM quit/powerdown failed - got timeout".into(),
    });
    assert_eq!(decide(&f), Step::Stop);
    f.task = Some(TaskFact::Succeeded(Operation::Stop));
    assert_eq!(decide(&f), Step::ClearTask);
    f.task = None;
    f.last_success = Some(Operation::Stop);
    assert_eq!(
        decide(&f),
        Step::Destroy,
        "the listing may still say running"
    );
    f.task = Some(TaskFact::Failed {
        op: Operation::Destroy,
        kind: TaskFailureKind::Conflict(pve_client::ConflictKind::VmRunning),
        message: "VM 131 is running - destroy failed".into(),
    });
    assert_eq!(decide(&f), Step::Stop);
    f.task = None;
    f.last_success = None;
    f.vm = Some(VmFact::Absent);
    assert_eq!(decide(&f), Step::DeleteIso);
    f.last_success = Some(Operation::DeleteVolume);
    assert_eq!(decide(&f), Step::ReleaseClaims);
    f.claim_objects = Some((1, 1));
    assert_eq!(reason(&decide(&f)), "Deleting");
    f.claim_objects = Some((0, 0));
    assert_eq!(decide(&f), Step::RemoveFinalizer);
}

#[test]
fn deletion_edge_cases() {
    // Stopped VM: destroy directly.
    let f = deleting(with_vm(base(), VmFact::Ours(view(None, Some(false)))));
    assert_eq!(decide(&f), Step::Destroy);
    // Never cloned: only claims and finalizer.
    let mut f = deleting(base());
    assert_eq!(decide(&f), Step::ReleaseClaims);
    f.claim_objects = None;
    assert_eq!(decide(&f), Step::ObserveClaims);
    // Foreign VM at our VMID: never touched; our cleanup goes on.
    let mut f = deleting(with_vm(base(), VmFact::Foreign("tag capmox-aaaa".into())));
    f.provisioned = true;
    assert_eq!(decide(&f), Step::ReleaseClaims);
    // Unreachable instance: condition and retry, never a silent hang.
    let f = deleting(with_vm(
        base(),
        VmFact::Unreachable("connection refused".into()),
    ));
    let s = decide(&f);
    assert_eq!(reason(&s), "DeletionFailed");
    assert!(
        matches!(&s, Step::Wait(w) if w.message == "cannot delete VM 131 in instance dc-a: connection refused" && w.until == Until::Backoff)
    );
    // Locked (backup): wait, never unlock (B21).
    let mut v = view(None, Some(true));
    v.lock = Some(VmLock::Backup);
    let f = deleting(with_vm(base(), VmFact::Ours(v)));
    assert!(
        matches!(decide(&f), Step::Wait(w) if w.message == "VM 131 is locked (backup); waiting before deleting it")
    );
    // Paused: nothing at all, even when deleting.
    let mut f = deleting(with_vm(base(), VmFact::Ours(view(None, Some(true)))));
    f.paused = true;
    assert_eq!(reason(&decide(&f)), "Paused");
    // Preconditions never block deletion.
    let mut f = deleting(with_vm(base(), VmFact::Absent));
    f.owner = Owner::Missing;
    f.cluster = ClusterFact::Missing;
    f.provisioned = true;
    assert_eq!(decide(&f), Step::ReleaseClaims);
    // Without our finalizer there is nothing to do.
    f.has_finalizer = false;
    assert_eq!(decide(&f), Step::Done);
}
