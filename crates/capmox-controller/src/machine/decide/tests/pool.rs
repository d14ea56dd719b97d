//! The machine's resource pool (docs/field-cases.md B34), case by case.

use super::fixtures::*;
use super::*;
use crate::api::MissingPrivilege;

fn waits(s: &Step) -> (&'static str, String, Until) {
    match s {
        Step::Wait(w) => (w.reason.code(), w.reason.message(), w.until),
        other => panic!("expected a wait, got {other:?}"),
    }
}

/// At the clone: VM absent, plan made, the pool `pool` named.
fn at_clone(pool: &str, instance_pool: Option<&str>) -> Facts {
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    f.pool = Some(pool.into());
    f.instance_pool = instance_pool.map(String::from);
    f
}

#[test]
fn the_pool_is_read_before_the_clone_and_a_missing_one_clones_nothing() {
    let mut f = at_clone("k8s", Some("k8s"));
    assert_eq!(decide(&f), Step::Observe(Observe::Pool));
    f.pool_members = Some(PoolFact::Members(vec![9000]));
    assert_eq!(decide(&f), Step::Clone);
    // Missing (or not readable): no clone; looked at again with backoff.
    f.pool_members = Some(PoolFact::Problem(
        "pool k8s of instance dc-a does not exist".into(),
    ));
    let (code, message, until) = waits(&decide(&f));
    assert_eq!(code, "PoolNotFound");
    assert!(message.contains("pool k8s of instance dc-a"), "{message}");
    assert_eq!(until, Until::Backoff);
    // The probe already found the instance's pool missing: no read either,
    // woken by the ProxmoxCluster's status change.
    let mut f = at_clone("k8s", Some("k8s"));
    f.pool_problem = Some("pool k8s of instance dc-a does not exist in Proxmox".into());
    let (code, message, until) = waits(&decide(&f));
    assert_eq!((code, until), ("PoolNotFound", Until::Change));
    assert!(message.contains("dc-a"), "{message}");
    // The probe's finding is about the instance's pool: a machine with
    // its own pool reads that one.
    let mut f = at_clone("team-a", Some("k8s"));
    f.pool_problem = Some("pool k8s of instance dc-a does not exist in Proxmox".into());
    assert_eq!(decide(&f), Step::Observe(Observe::Pool));
    // No pool at all: straight to the clone.
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    assert_eq!(decide(&f), Step::Clone);
}

#[test]
fn a_token_that_may_not_clone_without_its_pool_waits_naming_privilege_and_path() {
    let lacks = |privilege: &str, path: &str| MissingPrivilege {
        privilege: privilege.into(),
        path: path.into(),
        operation: "vmClone".into(),
    };
    // The instance names no pool; the token's rights are on a pool only.
    let mut f = at(VmFact::Absent);
    f.plan = Some(plan());
    f.missing_privileges = vec![
        lacks("VM.Allocate", "/vms/{vmid}"),
        lacks("Datastore.AllocateSpace", "/storage/{storage}"),
    ];
    let (code, message, until) = waits(&decide(&f));
    assert_eq!((code, until), ("MissingPrivileges", Until::Change));
    assert!(
        message.contains(
            "lacks VM.Allocate on /vms/{vmid}, Datastore.AllocateSpace on /storage/{storage}"
        ),
        "{message}"
    );
    assert!(message.contains("name the pool"), "{message}");
    // The probe checked the instance's pool only: a machine naming another
    // pool clones, and Proxmox's answer decides.
    f.pool = Some("team-a".into());
    f.pool_members = Some(PoolFact::Members(Vec::new()));
    assert_eq!(decide(&f), Step::Clone);
}

#[test]
fn membership_is_verified_after_the_clone_before_the_first_config_write() {
    let mut f = at(VmFact::Ours(view(Some(config(&[])), Power::Stopped)));
    f.pool = Some("k8s".into());
    assert_eq!(decide(&f), Step::Observe(Observe::Pool));
    f.pool_members = Some(PoolFact::Members(vec![131, 9000]));
    assert_eq!(decide(&f), Step::Observe(Observe::Duplicates));
    f.pool_members = Some(PoolFact::Members(vec![9000]));
    let (code, message, until) = waits(&decide(&f));
    assert_eq!((code, until), ("PoolMembershipMissing", Until::Backoff));
    assert!(
        message.contains("VM 131 is not a member of pool k8s"),
        "{message}"
    );
    // Once configured (ISO attached) or running, the pool is not read again.
    let mut f = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    f.pool = Some("k8s".into());
    f.media_uploaded = true;
    assert_eq!(decide(&f), Step::Start);
}

#[test]
fn the_chosen_instance_brings_its_pool_unless_the_machine_names_one() {
    let mut f = base();
    f.instance = None;
    f.apply(Observed::InstanceChosen {
        instance: "dc-a".into(),
        vmid_range: (100, 999),
        pool: Some("k8s".into()),
    });
    assert_eq!(f.pool.as_deref(), Some("k8s"));
    assert_eq!(f.instance_pool.as_deref(), Some("k8s"));
    let mut f = base();
    f.pool = Some("team-a".into());
    f.apply(Observed::InstanceChosen {
        instance: "dc-a".into(),
        vmid_range: (100, 999),
        pool: Some("k8s".into()),
    });
    assert_eq!(f.pool.as_deref(), Some("team-a"));
}
