//! [`crate::machine::steps::disks`]: grow a disk to an absolute size.

use super::kit::{Kit, event_codes};
use crate::machine::decide::fixtures::{at, configured, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, VmFact};
use crate::machine::steps::disks::resize;
use crate::machine::vm::disks::Resize;
use crate::pve::fake::transient;
use crate::pve::{DiskSize, DiskSlot};

fn grow() -> Resize {
    Resize {
        slot: "scsi0".parse::<DiskSlot>().unwrap(),
        size: DiskSize::from_gib(40),
    }
}

#[tokio::test]
async fn the_disk_grows_to_the_absolute_size_and_the_view_follows() {
    let kit = Kit::new().await;
    kit.pve.add_vm(
        131,
        "pve-a1",
        false,
        &[("scsi0", "ceph:vm-131-disk-0,size=20G")],
    );
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let out = resize(&mut run, &facts, grow()).await;
    let Observed::All(parts) = out else {
        panic!("expected the new config and a task, got {out:?}");
    };
    let Observed::Resized(after) = &parts[0] else {
        panic!("{parts:?}");
    };
    let slot = "scsi0".parse::<DiskSlot>().unwrap();
    assert_eq!(after.disks[&slot].size, Some(DiskSize::from_gib(40)));
    assert_eq!(parts[1], Observed::TaskStarted(Operation::Resize));
    assert_eq!(
        kit.pve.vm(131).unwrap().config["scsi0"],
        "ceph:vm-131-disk-0,size=40G"
    );
    assert_eq!(event_codes(&run), ["Resizing"]);
}

#[tokio::test]
async fn a_failed_resize_is_the_steps_failure() {
    let kit = Kit::new().await;
    kit.pve.add_vm(
        131,
        "pve-a1",
        false,
        &[("scsi0", "ceph:vm-131-disk-0,size=20G")],
    );
    kit.pve.fail_next("resize_disk", transient("/resize"));
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Stopped)));
    let out = resize(&mut run, &facts, grow()).await;
    assert!(
        matches!(&out, Observed::Failed(g) if g.step == StepKind::Resize),
        "{out:?}"
    );
    assert_eq!(
        kit.pve.vm(131).unwrap().config["scsi0"],
        "ceph:vm-131-disk-0,size=20G"
    );
}
