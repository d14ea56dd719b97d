//! [`crate::machine::steps::adopt`]: a VM CAPMOX made gets our marker and
//! nothing else.

use super::kit::{Kit, event_codes};
use crate::machine::decide::fixtures::{at, config, view};
use crate::machine::decide::{Observed, Power, StepKind, VmFact};
use crate::machine::steps::adopt::adopt;
use crate::machine::vm::marker::Ownership;
use crate::pve::VmConfig;
use crate::pve::fake::transient;
use pve_client::options::Tags;

fn capmox_vm(kit: &Kit) -> VmConfig {
    let pairs = [
        ("name", "m1"),
        ("description", "team-a worker"),
        ("tags", "ubuntu-24.04;ip_net0_10.10.0.20"),
        ("smbios1", "uuid=0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"),
        ("memory", "4096"),
        ("digest", "d1"),
    ];
    kit.pve.add_vm(131, "pve-a1", true, &pairs);
    config(&pairs)
}

#[tokio::test]
async fn adoption_adds_our_tag_and_line_and_keeps_the_rest() {
    let kit = Kit::new().await;
    let cfg = capmox_vm(&kit);
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Legacy(view(Some(cfg), Power::Running)));
    let out = adopt(&mut run, &facts).await;
    assert_eq!(out, Observed::Adopted);
    let vm = kit.pve.vm(131).unwrap();
    assert!(vm.running, "no power change");
    let tags: Tags = vm.config["tags"].as_str().unwrap().parse().unwrap();
    let description = vm.config["description"].as_str().unwrap().to_string();
    assert!(description.starts_with("team-a worker\n"), "{description}");
    assert_eq!(
        facts.marker.ownership(&tags, Some(&description)),
        Ownership::Ours
    );
    assert!(tags.contains("ubuntu-24.04") && tags.contains("ip_net0_10.10.0.20"));
    assert_eq!(vm.config["memory"], "4096");
    assert_eq!(kit.pve.calls(), ["update_vm_config_sync"]);
    assert_eq!(event_codes(&run), ["Adopted"]);
}

#[tokio::test]
async fn a_failed_write_is_the_steps_failure_and_changes_nothing() {
    let kit = Kit::new().await;
    let cfg = capmox_vm(&kit);
    kit.pve
        .fail_next("update_vm_config_sync", transient("/config"));
    let m = kit.machine(Default::default()).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Legacy(view(Some(cfg), Power::Running)));
    let out = adopt(&mut run, &facts).await;
    assert!(
        matches!(&out, Observed::Failed(g) if g.step == StepKind::Adopt),
        "{out:?}"
    );
    assert_eq!(
        kit.pve.vm(131).unwrap().config["description"],
        "team-a worker"
    );
}
