//! The decision core, case by case. Each test builds the facts a reconcile
//! would observe and asserts the one step an operator would expect.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pve_client::{ConflictKind, Missing, TaskFailureKind, VmLock};

use super::*;
use crate::api::machine::{DeviceAddresses, DiskSize as SpecDisk, Disks};
use crate::pve::HaState;
use crate::reasons::Reason;

use super::fixtures::*;

fn reason(s: &Step) -> &'static str {
    match s {
        Step::Wait(w) => w.reason.code(),
        other => panic!("expected a wait, got {other:?}"),
    }
}

fn until(s: &Step) -> Until {
    match s {
        Step::Wait(w) => w.until,
        other => panic!("expected a wait, got {other:?}"),
    }
}

fn gate(step: StepKind, class: &'static str, reason: Reason, remaining: Duration) -> Gate {
    Gate {
        step,
        class,
        reason,
        attempts: 2,
        remaining,
        due_at: Timestamp::from_second(1_800_000_000).unwrap(),
        fresh: false,
    }
}

#[test]
fn preconditions_come_first_and_make_no_proxmox_call() {
    let mut f = base();
    f.paused = true;
    assert_eq!(reason(&decide(&f)), "Paused");
    let mut f = base();
    f.owner = Owner::Missing;
    assert_eq!(reason(&decide(&f)), "WaitingForOwner");
    let mut f = base();
    f.cluster = ClusterFact::Missing;
    assert_eq!(reason(&decide(&f)), "WaitingForCluster");
    f.cluster = ClusterFact::NoInfraCluster;
    assert_eq!(reason(&decide(&f)), "WaitingForClusterInfrastructure");
    let mut f = base();
    f.has_finalizer = false;
    assert_eq!(decide(&f), Step::AddFinalizer);
    let mut f = base();
    f.spec_problems = Some("spec.memoryMiB: must be at least 16".into());
    let s = decide(&f);
    assert_eq!(reason(&s), "InvalidSpec");
    assert_eq!(until(&s), Until::Change);
    let mut f = base();
    f.cluster = ClusterFact::Present {
        infra_provisioned: false,
    };
    assert_eq!(reason(&decide(&f)), "WaitingForClusterInfrastructure");
    let mut f = base();
    f.owner = Owner::Present {
        bootstrap: BootstrapData::Missing("waiting for the bootstrap data Secret".into()),
    };
    assert_eq!(reason(&decide(&f)), "WaitingForBootstrapData");
    f.owner = Owner::Present {
        bootstrap: BootstrapData::Unsupported(crate::cloudinit::FormatError::Unknown(
            "yaml".into(),
        )),
    };
    let s = decide(&f);
    assert_eq!(reason(&s), "UnsupportedBootstrapFormat");
    assert_eq!(until(&s), Until::Change);
    f.owner = Owner::Present {
        bootstrap: BootstrapData::Invalid(
            "the bootstrap data Secret wl1/m1-bootstrap (format ignition) is not a usable Ignition config: not a JSON object".into(),
        ),
    };
    let s = decide(&f);
    assert_eq!(reason(&s), "InvalidBootstrapData");
    assert_eq!(until(&s), Until::Change);
}

#[test]
fn instance_then_client_then_claims_then_plan() {
    let mut f = base();
    f.instance = None;
    assert_eq!(decide(&f), Step::ChooseInstance);
    let mut f = base();
    f.client = None;
    assert_eq!(decide(&f), Step::Observe(Observe::Client));
    // A missing credentials Secret is not an unreachable instance.
    f.client = Some(ClientFact::Broken(Reason::CredentialsNotReady {
        instance: "dc-a".into(),
        detail: "Secret wl1/pve-a not found".into(),
    }));
    let s = decide(&f);
    assert_eq!(reason(&s), "CredentialsNotReady");
    assert_eq!(until(&s), Until::Change);
    f.client = Some(ClientFact::Broken(Reason::InstanceUnreachable {
        instance: "dc-a".into(),
        detail: "connection refused".into(),
    }));
    let s = decide(&f);
    assert_eq!(reason(&s), "InstanceUnreachable");
    assert_eq!(until(&s), Until::Backoff);
    let mut f = base();
    f.claims = None;
    assert_eq!(decide(&f), Step::Observe(Observe::Claims));
    f.claims = Some(ClaimsFact::Missing);
    assert_eq!(decide(&f), Step::EnsureClaims);
    f.claims = Some(ClaimsFact::NoPool("waiting for the pool".into()));
    assert_eq!(reason(&decide(&f)), "WaitingForIPAddresses");
    // Pending claims do not hold the clone back (the IPAM provider works meanwhile).
    f.claims = Some(ClaimsFact::Pending {
        pools: "InClusterIPPool wl1-dc-a-ipv4".into(),
        exhausted: false,
        message: String::new(),
    });
    assert_eq!(decide(&f), Step::Plan);
    f.plan = Some(plan());
    assert_eq!(decide(&f), Step::ReserveVmid);
}

#[test]
fn the_clone_needs_an_absent_vm_a_plan_and_a_slot() {
    let f = at(VmFact::Absent);
    assert_eq!(decide(&f), Step::Plan);
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    assert_eq!(decide(&f), Step::Clone);
    f.in_line = Some(InLine {
        template: 9000,
        running: 8,
        ahead: 3,
    });
    let s = decide(&f);
    assert_eq!(reason(&s), "WaitingForCloneSlot");
    assert_eq!(until(&s), Until::Slot);
    // Before the VM is observed, nothing is cloned.
    let mut f = base();
    f.vmid = Some(131);
    f.plan = Some(plan());
    assert_eq!(decide(&f), Step::Observe(Observe::Vm));
    // A VM being made at our VMID without an owner yet is waited for.
    let f = at(VmFact::Busy("lock clone".into()));
    assert_eq!(reason(&decide(&f)), "Cloning");
}

#[test]
fn a_recorded_vmid_that_cannot_be_ours_stops_the_machine() {
    // Outside Proxmox's range: not looked up, not "absent", never cloned.
    let mut f = base();
    f.vmid = Some(42);
    f.plan = Some(plan());
    let s = decide(&f);
    assert_eq!(reason(&s), "InvalidVMID");
    assert_eq!(until(&s), Until::Change);
    match &s {
        Step::Wait(w) => assert!(
            w.reason
                .message()
                .starts_with("spec.virtualMachineID 42 cannot be this machine's VM: it is outside Proxmox's VMID range 100-999999999"),
            "{}",
            w.reason.message()
        ),
        _ => unreachable!(),
    }
    // Outside the machine's range, and nothing there: not cloned.
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    f.vmid_range = (1000, 1999);
    assert_eq!(reason(&decide(&f)), "InvalidVMID");
    // A template.
    let f = at(VmFact::Template(
        "VM 131 is a template (name ubuntu)".into(),
    ));
    assert_eq!(reason(&decide(&f)), "InvalidVMID");
    // A VM without our marker.
    let f = at(VmFact::Foreign("VM 131 carries no capmox marker".into()));
    let s = decide(&f);
    assert_eq!(reason(&s), "InvalidVMID");
    assert_eq!(until(&s), Until::Change);
    // ...unless our own clone into it was refused because it exists: we
    // lost the race for the VMID, so another one is reserved.
    let mut f = at(VmFact::Foreign("VM 131 carries no capmox marker".into()));
    f.gates.push(gate(
        StepKind::Clone,
        "already_exists",
        Reason::CloneFailed("VM 131 already exists".into()),
        Duration::ZERO,
    ));
    assert_eq!(decide(&f), Step::ReplaceVmid);
    // ...or the controller reserved it (the annotation says so) and a VM
    // that is not ours took it before our clone: replaced, never touched.
    let mut f = at(VmFact::Foreign("VM 131 carries no capmox marker".into()));
    f.vmid_reserved = true;
    assert_eq!(decide(&f), Step::ReplaceVmid);
}

#[test]
fn a_fresh_clone_gets_its_iso_then_its_config() {
    let mut f = at(VmFact::Ours(view(None, Power::Stopped)));
    assert_eq!(decide(&f), Step::Observe(Observe::Config));
    f.vm = Some(VmFact::Ours(view(Some(config(&[])), Power::Unknown)));
    assert_eq!(decide(&f), Step::Observe(Observe::Power));
    f.vm = Some(VmFact::Ours(view(Some(config(&[])), Power::Stopped)));
    assert_eq!(decide(&f), Step::Observe(Observe::Duplicates));
    f.duplicates = Some(Some("address 10.10.0.20 is held by wl1/m2".into()));
    assert_eq!(reason(&decide(&f)), "DuplicateIPAddress");
    f.duplicates = Some(None);
    assert_eq!(decide(&f), Step::UploadMedia);
    // Recorded but not uploaded by us (a crash mid-upload, or an older VM
    // at this VMID): deleted first, then uploaded fresh.
    f.media_recorded = Some(media());
    assert_eq!(decide(&f), Step::DeleteMedia(media()));
    f.media_uploaded = true;
    assert_eq!(decide(&f), Step::Configure);
    // Configured (ISO attached): start.
    f.vm = Some(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    assert_eq!(decide(&f), Step::Start);
    // Waiting for addresses before the config is written is not needed,
    // but before it is: pending claims hold the config write back.
    f.claims = Some(ClaimsFact::Pending {
        pools: "p".into(),
        exhausted: true,
        message: "PoolExhausted".into(),
    });
    assert_eq!(reason(&decide(&f)), "IPAddressPoolExhausted");
}

#[test]
fn disks_grow_before_the_start_and_a_shrink_is_refused() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    f.media_uploaded = true;
    f.disks = Some(Disks {
        boot_volume: Some(SpecDisk {
            disk: "scsi0".into(),
            size_gb: 40,
        }),
        additional_volumes: Vec::new(),
    });
    assert!(matches!(decide(&f), Step::Resize(r) if r.slot.to_string() == "scsi0"));
    f.disks = Some(Disks {
        boot_volume: Some(SpecDisk {
            disk: "scsi0".into(),
            size_gb: 10,
        }),
        additional_volumes: Vec::new(),
    });
    let s = decide(&f);
    assert_eq!(reason(&s), "ResizeFailed");
    assert_eq!(until(&s), Until::Change);
}

#[test]
fn a_running_vm_waits_for_addresses_and_the_bootstrap_then_is_provisioned() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    assert_eq!(decide(&f), Step::Observe(Observe::Agent));
    f.agent = Some(AgentFact::NotYet("QEMU guest agent is not running".into()));
    let s = decide(&f);
    assert_eq!(reason(&s), "WaitingForAddresses");
    assert_eq!(until(&s), Until::Boot);
    let devs = vec![crate::api::machine::DeviceAddresses {
        net: "net0".into(),
        ipv4: vec!["10.10.0.20".into()],
        ipv6: vec![],
    }];
    f.agent = Some(AgentFact::Addresses(devs.clone()));
    assert_eq!(decide(&f), Step::Observe(Observe::Bootstrap));
    f.bootstrap = Some(BootstrapFact::Pending(
        "not yet".into(),
        Duration::from_millis(30),
    ));
    let s = decide(&f);
    assert_eq!(reason(&s), "WaitingForBootstrap");
    assert_eq!(until(&s), Until::After(Duration::from_millis(30)));
    f.bootstrap = Some(BootstrapFact::Done);
    assert_eq!(decide(&f), Step::Provision(devs.clone()));
    // An address the claim holds but the agent does not report: wait.
    f.agent = Some(AgentFact::Addresses(Vec::new()));
    assert_eq!(reason(&decide(&f)), "WaitingForAddresses");
    // Without the agent, the claimed addresses are reported.
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    f.skip_agent = true;
    assert!(matches!(decide(&f), Step::Provision(d) if d[0].ipv4 == ["10.10.0.20"]));
}

#[test]
fn a_provider_id_another_machine_records_is_not_published_b36() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    f.skip_agent = true;
    f.provider_id_holder = None;
    assert_eq!(decide(&f), Step::Observe(Observe::ProviderIdHolder));
    f.apply(Observed::ProviderIdHolder(Some("default/other-m1".into())));
    let s = decide(&f);
    assert_eq!(reason(&s), "ProviderIDInUse");
    assert_eq!(until(&s), Until::Change);
    let Step::Wait(w) = &s else { panic!("{s:?}") };
    assert!(
        w.reason
            .message()
            .contains("recorded by ProxmoxMachine default/other-m1"),
        "{}",
        w.reason.message()
    );
    // A recorded providerID is kept without looking anyone up.
    f.provider_id = Some("proxmox://0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6".into());
    f.provider_id_holder = None;
    assert!(matches!(decide(&f), Step::Provision(_)));
    f.provider_id = None;
    f.apply(Observed::ProviderIdHolder(None));
    assert!(matches!(decide(&f), Step::Provision(_)));
}

#[test]
fn a_vm_stopped_out_of_band_before_provisioning_is_started_again() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    // The agent says the VM is not running: the power state follows.
    f.apply(Observed::Agent(AgentFact::VmStopped));
    assert_eq!(decide(&f), Step::Start);
}

#[test]
fn tasks_are_awaited_and_their_end_decides() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    f.task_recorded = true;
    assert_eq!(decide(&f), Step::Observe(Observe::Task));
    f.task = Some(TaskFact::Running(Operation::Start));
    let s = decide(&f);
    assert_eq!(reason(&s), "PoweringOn");
    assert_eq!(until(&s), Until::Task(Operation::Start));
    f.task = Some(TaskFact::Succeeded(Operation::Start));
    assert_eq!(
        decide(&f),
        Step::ClearTask(TaskEnd::Succeeded(Operation::Start))
    );
    // A start of a VM that already runs did what it was for.
    f.task = Some(TaskFact::Failed {
        op: Operation::Start,
        kind: TaskFailureKind::Conflict(ConflictKind::AlreadyRunning),
        message: "VM 131 already running".into(),
    });
    assert_eq!(
        decide(&f),
        Step::ClearTask(TaskEnd::Succeeded(Operation::Start))
    );
    // Another failure is one, with the task's own message.
    f.task = Some(TaskFact::Failed {
        op: Operation::Configure,
        kind: TaskFailureKind::LockTimeout,
        message: "can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout".into(),
    });
    match decide(&f) {
        Step::ClearTask(TaskEnd::Failed { op, reason, .. }) => {
            assert_eq!(op, Operation::Configure);
            assert_eq!(reason.code(), "ConfigureFailed");
            assert_eq!(
                reason.message(),
                "configure task failed: can't lock file '/var/lock/qemu-server/lock-131.conf' - got timeout"
            );
        }
        other => panic!("{other:?}"),
    }
    f.task = Some(TaskFact::Lost(Operation::Start));
    assert_eq!(decide(&f), Step::ClearTask(TaskEnd::Lost(Operation::Start)));
    f.task = Some(TaskFact::Unreadable(Reason::InstanceUnreachable {
        instance: "dc-a".into(),
        detail: "timeout".into(),
    }));
    assert_eq!(until(&decide(&f)), Until::Backoff);
}

#[test]
fn a_failed_step_waits_for_its_retry_and_only_then_runs_again() {
    let failed = Reason::CloneFailed("clone task failed: got timeout".into());
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    f.gates.push(gate(
        StepKind::Clone,
        "lock_timeout",
        failed.clone(),
        Duration::from_secs(4),
    ));
    match decide(&f) {
        Step::Wait(w) => {
            assert_eq!(w.reason, failed);
            assert_eq!(w.until, Until::Retry(Duration::from_secs(4)));
            assert_eq!(w.retry.as_ref().map(|r| r.attempts), Some(2));
        }
        other => panic!("{other:?}"),
    }
    // Due: the step runs.
    f.gates[0].remaining = Duration::ZERO;
    assert_eq!(decide(&f), Step::Clone);
    // Failed in this reconcile: not again in it, however short the delay.
    f.gates[0].fresh = true;
    assert!(matches!(decide(&f), Step::Wait(_)));
    // A terminal failure waits for a change.
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    f.gates.push(gate(
        StepKind::Clone,
        "invalid_spec",
        Reason::InvalidSpec("spec.storage: invalid".into()),
        Duration::ZERO,
    ));
    assert_eq!(until(&decide(&f)), Until::Change);
    // A partial VM of ours left by a failed clone is removed first.
    let mut f = at(VmFact::Ours(view(Some(config(&[])), Power::Stopped)));
    f.gates
        .push(gate(StepKind::Clone, "other", failed, Duration::ZERO));
    assert_eq!(decide(&f), Step::RemovePartial);
}

#[test]
fn a_provisioned_machine_cleans_its_iso_then_is_watched() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    f.provisioned = true;
    f.media_recorded = Some(media());
    assert_eq!(decide(&f), Step::Eject);
    f.vm = Some(VmFact::Ours(view(Some(config(&[])), Power::Running)));
    assert_eq!(decide(&f), Step::DeleteMedia(media()));
    // The delete failed: retried at its time, never forgotten.
    f.gates.push(gate(
        StepKind::DeleteMedia,
        "pve_transient",
        Reason::MediaDeletionFailed("service unavailable".into()),
        Duration::from_secs(2),
    ));
    assert_eq!(until(&decide(&f)), Until::Retry(Duration::from_secs(2)));
    f.gates.clear();
    f.media_recorded = None;
    assert_eq!(decide(&f), Step::Done);
    // Stopped outside the provider after provisioning: reported, not restarted.
    f.vm = Some(VmFact::Ours(VmView {
        power_source: PowerSource::Listing,
        ..view(None, Power::Stopped)
    }));
    let s = decide(&f);
    assert_eq!(reason(&s), "VirtualMachineStopped");
    assert_eq!(until(&s), Until::Steady);
    f.vm = Some(VmFact::Absent);
    assert_eq!(reason(&decide(&f)), "VirtualMachineNotFound");
    f.vm = Some(VmFact::Foreign("wl2/m1 uid=…".into()));
    assert_eq!(reason(&decide(&f)), "VirtualMachineNotOurs");
    // Gone while its ISO is recorded: the ISO is deleted first.
    f.vm = Some(VmFact::Absent);
    f.media_recorded = Some(media());
    assert_eq!(decide(&f), Step::DeleteMedia(media()));
}

fn deleting(vm: VmFact) -> Facts {
    let mut f = at(vm);
    f.deleting = true;
    f.provisioned = true;
    f
}

#[test]
fn deletion_destroys_our_vm_then_its_iso_then_releases_claims() {
    let mut f = deleting(VmFact::Ours(VmView {
        power_source: PowerSource::Listing,
        ..view(None, Power::Running)
    }));
    assert_eq!(decide(&f), Step::Shutdown);
    // A graceful shutdown that failed is not repeated: stop hard.
    f.gates.push(gate(
        StepKind::Shutdown,
        "other",
        Reason::DeletionFailed("shutdown failed".into()),
        Duration::ZERO,
    ));
    assert_eq!(decide(&f), Step::Stop);
    f.vm = Some(VmFact::Ours(view(None, Power::Stopped)));
    assert_eq!(decide(&f), Step::Destroy);
    f.vm = Some(VmFact::Ours(VmView {
        lock: Some(pve_client::VmLock::Backup),
        ..view(None, Power::Stopped)
    }));
    assert_eq!(reason(&decide(&f)), "Deleting");
    // Gone: the recorded ISO, then the sweep, then the claims.
    f.vm = Some(VmFact::Absent);
    f.media_recorded = Some(media());
    assert_eq!(decide(&f), Step::DeleteMedia(media()));
    f.media_recorded = None;
    assert_eq!(decide(&f), Step::Observe(Observe::Media));
    let stray = MediaVolume {
        node: node("pve-a3"),
        volid: format!("local:iso/capmox-99-{UID}.iso"),
    };
    f.media_found = Some(vec![stray.clone()]);
    assert_eq!(decide(&f), Step::DeleteMedia(stray));
    f.media_found = Some(Vec::new());
    assert_eq!(decide(&f), Step::Observe(Observe::ClaimObjects));
    // The status proves every recorded ISO deleted: no sweep.
    f.media_found = None;
    f.media_deleted = true;
    assert_eq!(decide(&f), Step::Observe(Observe::ClaimObjects));
    // A record (a later upload) is deleted by the record all the same.
    f.media_recorded = Some(media());
    assert_eq!(decide(&f), Step::DeleteMedia(media()));
    f.media_recorded = None;
    f.media_deleted = false;
    f.media_found = Some(Vec::new());
    f.claim_objects = Some(ClaimObjects {
        total: 1,
        deleting: 0,
    });
    assert_eq!(decide(&f), Step::ReleaseClaims);
    f.claim_objects = Some(ClaimObjects {
        total: 1,
        deleting: 1,
    });
    assert_eq!(reason(&decide(&f)), "Deleting");
    f.claim_objects = Some(ClaimObjects {
        total: 0,
        deleting: 0,
    });
    assert_eq!(decide(&f), Step::RemoveFinalizer);
    f.has_finalizer = false;
    assert_eq!(decide(&f), Step::Done);
}

#[test]
fn deletion_never_touches_a_vm_that_is_not_ours_and_says_when_it_cannot_ask() {
    let mut f = deleting(VmFact::Foreign("VM 131 carries no capmox marker".into()));
    f.media_found = Some(Vec::new());
    assert_eq!(decide(&f), Step::Observe(Observe::ClaimObjects));
    let mut f = deleting(VmFact::Template("VM 131 is a template".into()));
    f.media_found = Some(Vec::new());
    assert_eq!(decide(&f), Step::Observe(Observe::ClaimObjects));
    let f = deleting(VmFact::Unreachable(Reason::InstanceUnreachable {
        instance: "dc-a".into(),
        detail: "connection refused".into(),
    }));
    let s = decide(&f);
    assert_eq!(reason(&s), "DeletionFailed");
    assert_eq!(until(&s), Until::Backoff);
    // Never placed, never cloned: only the claims.
    let mut f = deleting(VmFact::Absent);
    f.instance = None;
    f.vmid = None;
    assert_eq!(decide(&f), Step::Observe(Observe::ClaimObjects));
    // A task running is awaited; a destroy of what is gone succeeded.
    let mut f = deleting(VmFact::Ours(view(None, Power::Stopped)));
    f.task_recorded = true;
    f.task = Some(TaskFact::Failed {
        op: Operation::Destroy,
        kind: TaskFailureKind::NotFound(Missing::Vm),
        message: "does not exist".into(),
    });
    assert_eq!(
        decide(&f),
        Step::ClearTask(TaskEnd::Succeeded(Operation::Destroy))
    );
    // A destroy that ended OK leaves the VM gone: the deletion goes on to
    // the ISO sweep without looking at the VM again.
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(
        Operation::Destroy,
    )));
    assert_eq!(f.vm, Some(VmFact::Absent));
    f.media_found = None;
    assert_eq!(decide(&f), Step::Observe(Observe::Media));
}

#[test]
fn facts_follow_what_steps_report() {
    let mut f = at(VmFact::Ours(view(Some(config(&[])), Power::Stopped)));
    f.apply(Observed::All(vec![
        Observed::MediaRecorded(media()),
        Observed::TaskStarted(Operation::Upload),
    ]));
    assert_eq!(f.media_recorded, Some(media()));
    assert_eq!(f.task, Some(TaskFact::Running(Operation::Upload)));
    f.apply(Observed::All(vec![
        Observed::TaskCleared(TaskEnd::Succeeded(Operation::Upload)),
        Observed::MediaUploaded,
    ]));
    assert!(f.media_uploaded && f.task.is_none() && !f.task_recorded);
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(Operation::Start)));
    assert!(matches!(&f.vm, Some(VmFact::Ours(v)) if v.power == Power::Running));
    f.apply(Observed::MediaDeleted(media().volid));
    assert_eq!(f.media_recorded, None);
    f.apply(Observed::VmidReplaced);
    assert_eq!((f.vmid, f.vm.clone(), f.plan.clone()), (None, None, None));
}

#[test]
fn a_vm_capmox_made_is_adopted_before_anything_else_in_every_phase() {
    let legacy = |lock: Option<VmLock>| {
        let mut v = view(
            Some(config(&[("description", "made by CAPMOX")])),
            Power::Running,
        );
        v.lock = lock;
        VmFact::Legacy(v)
    };
    // Being provisioned, provisioned, and being deleted: adopt first.
    let mut f = at(legacy(None));
    assert_eq!(decide(&f), Step::Adopt);
    f.provisioned = true;
    assert_eq!(decide(&f), Step::Adopt);
    f.deleting = true;
    assert_eq!(decide(&f), Step::Adopt);
    // A locked VM is never mutated: wait.
    let mut f = at(legacy(Some(VmLock::Backup)));
    f.provisioned = true;
    assert_eq!(reason(&decide(&f)), "VirtualMachineLocked");
    // Once adopted the VM is looked at again, and is ours.
    let mut f = at(legacy(None));
    f.apply(Observed::Adopted);
    assert_eq!(f.vm, None);
    assert_eq!(decide(&f), Step::Observe(Observe::Vm));
}

fn ha(group: Option<&str>, rule: Option<&str>) -> crate::api::HaSettings {
    crate::api::HaSettings {
        group: group.map(Into::into),
        rule: rule.map(Into::into),
        enabled: None,
    }
}

fn cid(s: &str) -> crate::pve::ConfigId {
    crate::pve::ConfigId::new(s).unwrap()
}

/// docs/field-cases.md B33: a provisioned, running VM of a machine asking
/// for HA becomes an HA resource in the group (PVE 8) or rule (PVE 9) the
/// spec names for the instance's version; without HA nothing is asked.
#[test]
fn a_provisioned_vm_is_registered_with_ha_by_version() {
    let mut f = at(VmFact::Ours(view(Some(config(&[])), Power::Running)));
    f.provisioned = true;
    assert_eq!(decide(&f), Step::Done);
    f.ha_wanted = Some(ha(Some("capmox-g"), Some("capmox-r")));
    f.pve_major = Some(8);
    assert_eq!(decide(&f), Step::Observe(Observe::Ha));
    f.ha = Some(HaFact::Absent);
    assert_eq!(
        decide(&f),
        Step::RegisterHa(HaTarget::Group(cid("capmox-g")))
    );
    f.pve_major = Some(9);
    assert_eq!(
        decide(&f),
        Step::RegisterHa(HaTarget::Rule(cid("capmox-r")))
    );
    // A resource the rule does not list yet is added to it.
    f.ha = Some(HaFact::Present {
        state: Some(HaState::Started),
        listed: false,
    });
    assert_eq!(
        decide(&f),
        Step::RegisterHa(HaTarget::Rule(cid("capmox-r")))
    );
    f.apply(Observed::HaRegistered);
    assert!(f.ha_recorded);
    assert_eq!(decide(&f), Step::Done);
    // A group on PVE 9 only: a change is needed, nothing is called.
    f.ha_wanted = Some(ha(Some("capmox-g"), None));
    f.ha = None;
    let s = decide(&f);
    assert_eq!(reason(&s), "HAConfigurationInvalid");
    assert_eq!(until(&s), Until::Change);
    // The version is not known yet: looked at again later.
    f.ha_wanted = Some(ha(None, Some("capmox-r")));
    f.pve_major = None;
    assert_eq!(until(&decide(&f)), Until::Backoff);
    // A VM stopped after provisioning is not registered (HA would start it).
    f.pve_major = Some(9);
    f.vm = Some(VmFact::Ours(view(None, Power::Stopped)));
    assert_eq!(reason(&decide(&f)), "VirtualMachineStopped");
}

/// docs/field-cases.md B31: a missing privilege blocks only what needs it.
#[test]
fn a_missing_privilege_blocks_only_its_operation() {
    let lacks = |operation: &str, privilege: &str, path: &str| crate::api::MissingPrivilege {
        privilege: privilege.into(),
        path: path.into(),
        operation: operation.into(),
    };
    let mut f = at(VmFact::Ours(view(Some(config(&[])), Power::Running)));
    f.provisioned = true;
    f.ha_wanted = Some(ha(None, Some("capmox-r")));
    f.ha = Some(HaFact::Absent);
    f.missing_privileges = vec![lacks("haWrite", "Sys.Console", "/")];
    let s = decide(&f);
    assert_eq!(reason(&s), "MissingPrivileges");
    assert!(
        match &s {
            Step::Wait(w) => w.reason.message().contains("Sys.Console on /"),
            _ => false,
        },
        "{s:?}"
    );
    assert_eq!(until(&s), Until::Change);
    // The agent read on PVE 9: not asked; the claimed static address
    // provisions the machine anyway.
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    f.media_uploaded = true;
    f.duplicates = Some(None);
    f.missing_privileges = vec![lacks(
        "agentRead",
        "VM.GuestAgent.Audit or VM.GuestAgent.Unrestricted",
        "/vms/{vmid}",
    )];
    let expected = DeviceAddresses {
        net: "net0".into(),
        ipv4: vec!["10.10.0.20".into()],
        ipv6: Vec::new(),
    };
    assert_eq!(decide(&f), Step::Provision(vec![expected]));
    // Without static addresses it waits for a change, never asks the agent.
    f.claims = Some(ClaimsFact::NotNeeded);
    let s = decide(&f);
    assert_eq!(reason(&s), "MissingPrivileges");
    assert_eq!(until(&s), Until::Change);
}

/// docs/field-cases.md B33: deletion removes the recorded HA resource
/// first; a VM HA-managed by someone else is stopped through HA and waited
/// for until it really stopped — the request's task end proves nothing.
#[test]
fn deletion_removes_the_ha_resource_and_waits_for_an_ha_stop() {
    let mut f = deleting(VmFact::Ours(view(None, Power::Running)));
    f.ha_recorded = true;
    assert_eq!(decide(&f), Step::UnregisterHa);
    f.apply(Observed::HaUnregistered);
    assert_eq!(decide(&f), Step::Shutdown);

    let mut f = deleting(VmFact::Ours(VmView {
        ha: Some(HaState::Started),
        ..view(None, Power::Running)
    }));
    assert_eq!(decide(&f), Step::Shutdown);
    // The hastop task ended: the power state is read again, not assumed.
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(
        Operation::Shutdown,
    )));
    assert_eq!(decide(&f), Step::Observe(Observe::Power));
    f.apply(Observed::All(vec![
        Observed::Power(Power::Running),
        Observed::HaManaged(Some(HaState::Stopped)),
    ]));
    let s = decide(&f);
    assert_eq!(reason(&s), "WaitingForHAStop");
    assert_eq!(until(&s), Until::Soon);
    // Past the deadline: a failed deletion naming the HA resource and what
    // to do, looked at again with a growing delay; never destroyed.
    f.deletion_age = Some(ha::HA_STOP_DEADLINE + Duration::from_secs(20));
    let s = decide(&f);
    assert_eq!(reason(&s), "DeletionFailed");
    assert_eq!(until(&s), Until::Retry(Duration::from_secs(10)));
    let Step::Wait(w) = &s else { unreachable!() };
    let m = w.reason.message();
    assert!(
        m.contains("HA resource vm:131") && m.contains("ha-manager"),
        "{m}"
    );
    f.deletion_age = Some(ha::HA_STOP_DEADLINE + Duration::from_secs(3600));
    assert_eq!(until(&decide(&f)), Until::Retry(Duration::from_secs(300)));
    f.deletion_age = Some(ha::HA_STOP_DEADLINE + Duration::from_secs(120));
    assert_eq!(until(&decide(&f)), Until::Retry(Duration::from_secs(30)));
    f.apply(Observed::Power(Power::Stopped));
    assert_eq!(decide(&f), Step::Destroy);
    // Without HA the end of our stop task is the VM's state.
    let mut f = deleting(VmFact::Ours(view(None, Power::Running)));
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(Operation::Stop)));
    assert_eq!(decide(&f), Step::Destroy);
}

#[test]
fn a_resize_that_ended_ok_keeps_the_view_and_the_vm_is_started_without_a_read() {
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    f.media_uploaded = true;
    f.task_recorded = true;
    f.task = Some(TaskFact::Succeeded(Operation::Resize));
    assert_eq!(
        decide(&f),
        Step::ClearTask(TaskEnd::Succeeded(Operation::Resize))
    );
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(Operation::Resize)));
    assert!(
        matches!(&f.vm, Some(VmFact::Ours(v)) if v.config.is_some()),
        "the view the resize step left stays"
    );
    assert_eq!(decide(&f), Step::Start);
    // A clone's end is not one of ours to predict: the VM is read again.
    f.apply(Observed::TaskCleared(TaskEnd::Succeeded(Operation::Clone)));
    assert_eq!(f.vm, None);
}
