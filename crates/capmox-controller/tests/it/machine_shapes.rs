//! VM shapes against pve-sim: the CPU model and flags (machine over
//! instance over template), the bootstrap ISO's storage and CD-ROM bus, and
//! a storage that cannot hold ISOs refused before any upload
//! (docs/vm-shapes.md, docs/field-cases.md B39).

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::machine::{BootstrapMediaSpec, CdromBus, CpuSpec};
use kube::ResourceExt;
use support::*;

/// Every ISO volume carrying `uid` on any node's `local` and `cephfs`.
fn isos_of(w: &World, pve: &str, uid: &str) -> Vec<String> {
    let c = w.pve(pve);
    let mut out = Vec::new();
    for n in c.nodes() {
        for s in ["local", "cephfs"] {
            out.extend(
                c.storage_content(&n.name, s)
                    .into_iter()
                    .map(|v| v.volid)
                    .filter(|v| v.contains(uid)),
            );
        }
    }
    out.sort();
    out.dedup();
    out
}

#[tokio::test]
async fn cpu_and_media_where_the_spec_says_then_nothing_left() {
    let w = world().await;
    let mut dc_a = instance("dc-a", 10);
    dc_a.cpu = Some(CpuSpec {
        type_: Some("host".into()),
        flags: vec!["+pcid".into()],
    });
    w.cluster("wl1", multi(vec![dc_a])).await;
    let spec = ProxmoxMachineSpec {
        cpu: Some(CpuSpec {
            type_: Some("x86-64-v2-AES".into()),
            flags: vec![],
        }),
        bootstrap_media: Some(BootstrapMediaSpec {
            storage: Some("local".into()),
            cdrom_bus: Some(CdromBus::Sata),
        }),
        ..ProxmoxMachineSpec::default()
    };
    let created = w.machine("wl1", "m-shape", spec).await;
    let uid = created.uid().unwrap();
    let m = w
        .drive("m-shape", 200, |m| {
            m.and_then(|m| m.status.as_ref())
                .and_then(|s| s.bootstrap_data_provided)
                == Some(true)
        })
        .await
        .unwrap();
    let vmid = m.spec.virtual_machine_id.unwrap();
    let vm = w.pve("dc-a").vm(vmid).unwrap();
    // The machine's model, the instance's flags.
    assert_eq!(
        vm.config.get("cpu").map(String::as_str),
        Some("x86-64-v2-AES,flags=+pcid")
    );
    let volid = format!("local:iso/capmox-{vmid}-{uid}.iso");
    assert_eq!(
        vm.config.get("sata0").map(String::as_str),
        Some(format!("{volid},media=cdrom").as_str()),
        "{:?}",
        vm.config
    );
    let recorded = m.status.as_ref().unwrap().bootstrap_media.clone().unwrap();
    assert_eq!(recorded.volume, volid);
    assert_eq!(recorded.node, vm.node);
    assert!(w.pve("dc-a").iso_bytes(&vm.node, &volid).is_some());
    assert!(w.isos("dc-a").is_empty(), "nothing on the default cephfs");

    w.provision("m-shape").await;
    w.delete_and_drive("m-shape").await;
    assert_eq!(isos_of(&w, "dc-a", &uid), Vec::<String>::new());
    assert!(w.vms("dc-a").is_empty());
}

#[tokio::test]
async fn template_cpu_stays_when_nothing_asks() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let before = w
        .pve("dc-a")
        .vms()
        .into_iter()
        .find(|v| v.template)
        .and_then(|t| t.config.get("cpu").cloned());
    w.machine("wl1", "m-plain", ProxmoxMachineSpec::default())
        .await;
    let m = w.provision("m-plain").await;
    let vm = w
        .pve("dc-a")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    assert_eq!(vm.config.get("cpu").cloned(), before);
    // The default bus on x86_64 is IDE: the ejected drive stays there.
    assert_eq!(
        vm.config.get("ide0").map(String::as_str),
        Some("none,media=cdrom")
    );
}

#[tokio::test]
async fn a_storage_without_iso_content_is_refused_before_any_upload() {
    let w = world().await;
    w.cluster("wl1", multi(vec![instance("dc-a", 10)])).await;
    let spec = ProxmoxMachineSpec {
        bootstrap_media: Some(BootstrapMediaSpec {
            storage: Some("local-lvm".into()),
            cdrom_bus: None,
        }),
        ..ProxmoxMachineSpec::default()
    };
    let created = w.machine("wl1", "m-lvm", spec).await;
    let uid = created.uid().unwrap();
    let m = w
        .drive("m-lvm", 200, |m| vm_reason(m) == "ISOStorageUnfit")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        message.starts_with("storage \"local-lvm\" (bootstrapMedia.storage) "),
        "{message}"
    );
    assert_eq!(
        w.pve("dc-a")
            .calls()
            .count("POST", "/nodes/{node}/storage/{storage}/upload"),
        0
    );
    assert!(
        m.status.unwrap().bootstrap_media.is_none(),
        "nothing recorded"
    );
    w.delete_and_drive("m-lvm").await;
    assert_eq!(isos_of(&w, "dc-a", &uid), Vec::<String>::new());
}
