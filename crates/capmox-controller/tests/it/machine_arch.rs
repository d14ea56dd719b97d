//! aarch64 VMs against pve-sim: an instance of aarch64 nodes whose
//! template does not name its `arch` gets VMs with OVMF, an EFI disk, the
//! `virt` machine type and the bootstrap CD-ROM on SCSI (pve-sim refuses
//! to start anything else there); a shape the architecture cannot have is
//! refused before the clone, the field named (docs/vm-shapes.md).

use crate::support::machine as support;

use capmox_controller::api::ProxmoxMachineSpec;
use capmox_controller::api::machine::{CpuSpec, VmArch};
use support::*;

/// The built-in simulation with every node of `dc-b` on aarch64 and its
/// template a bare disk (no `bios`, no `efidisk0`, no `arch`).
fn arm_world() -> WorldOptions {
    let mut opts = WorldOptions::default();
    let c = opts
        .sim
        .clusters
        .iter_mut()
        .find(|c| c.name == "dc-b")
        .expect("the built-in simulation has dc-b");
    for n in &mut c.nodes {
        n.arch = "aarch64".into();
    }
    for t in &mut c.templates {
        t.efidisk = false;
    }
    opts
}

fn arm_instance() -> capmox_controller::api::InstanceSpec {
    let mut i = instance("dc-b", 20);
    i.arch = Some(VmArch::Aarch64);
    i
}

#[tokio::test]
async fn an_aarch64_instance_gets_ovmf_virt_an_efi_disk_and_no_ide() {
    let w = world_with(arm_world()).await;
    w.cluster("wl1", multi(vec![arm_instance()])).await;
    w.machine("wl1", "m-arm", ProxmoxMachineSpec::default())
        .await;
    let m = w.provision("m-arm").await;
    let vm = w
        .pve("dc-b")
        .vm(m.spec.virtual_machine_id.unwrap())
        .unwrap();
    let c = &vm.config;
    assert_eq!(c.get("bios").map(String::as_str), Some("ovmf"), "{c:?}");
    assert_eq!(c.get("machine").map(String::as_str), Some("virt"));
    // The EFI disk beside the boot disk (the template's scsi0 on ceph).
    assert!(
        c.get("efidisk0").is_some_and(|d| d.starts_with("ceph:")),
        "{c:?}"
    );
    assert!(!c.keys().any(|k| k.starts_with("ide")), "{c:?}");
    // The ejected bootstrap CD-ROM stays on the first free SCSI slot.
    assert_eq!(
        c.get("scsi1").map(String::as_str),
        Some("none,media=cdrom"),
        "{c:?}"
    );
    assert!(c.get("arch").is_none(), "arch is never written");

    w.delete_and_drive("m-arm").await;
    assert!(w.vms("dc-b").is_empty());
    assert!(w.isos("dc-b").is_empty());
}

#[tokio::test]
async fn an_x86_only_cpu_model_on_aarch64_is_refused_before_the_clone() {
    let w = world_with(arm_world()).await;
    w.cluster("wl1", multi(vec![arm_instance()])).await;
    let spec = ProxmoxMachineSpec {
        cpu: Some(CpuSpec {
            type_: Some("x86-64-v3".into()),
            flags: vec![],
        }),
        ..ProxmoxMachineSpec::default()
    };
    w.machine("wl1", "m-v3", spec).await;
    let m = w
        .drive("m-v3", 200, |m| vm_reason(m) == "ArchitectureUnfit")
        .await
        .unwrap();
    let (_, _, message) = condition(&m, "VirtualMachineProvisioned").unwrap();
    assert!(
        message.starts_with("cpu.type: CPU model x86-64-v3"),
        "{message}"
    );
    assert_eq!(
        w.pve("dc-b")
            .calls()
            .count("POST", "/nodes/{node}/qemu/{vmid}/clone"),
        0
    );
    w.delete_and_drive("m-v3").await;
    assert!(w.vms("dc-b").is_empty());
}

#[tokio::test]
async fn a_template_pinned_to_an_aarch64_instance_reports_arm64_for_the_autoscaler() {
    use capmox_controller::api::{
        ProxmoxMachineTemplate, ProxmoxMachineTemplateResource, ProxmoxMachineTemplateSpec,
    };
    use kube::Api;
    use kube::api::PostParams;
    use std::sync::Arc;

    let w = world_with(arm_world()).await;
    w.cluster("wl1", multi(vec![arm_instance(), instance("dc-a", 10)]))
        .await;
    let api: Api<ProxmoxMachineTemplate> = Api::namespaced(w.client.clone(), NS);
    let mut want = Vec::new();
    for (name, pinned) in [("arm", Some("dc-b")), ("x86", Some("dc-a")), ("any", None)] {
        let mut t = ProxmoxMachineTemplate::new(
            name,
            ProxmoxMachineTemplateSpec {
                template: ProxmoxMachineTemplateResource {
                    metadata: None,
                    spec: ProxmoxMachineSpec {
                        instance: pinned.map(str::to_string),
                        ..ProxmoxMachineSpec::default()
                    },
                },
            },
        );
        t.metadata.namespace = Some(NS.into());
        t.metadata.labels = Some(
            [(
                "cluster.x-k8s.io/cluster-name".to_string(),
                "wl1".to_string(),
            )]
            .into(),
        );
        let created = api.create(&PostParams::default(), &t).await.unwrap();
        capmox_controller::template_status::reconcile(Arc::new(created), w.shared.clone())
            .await
            .unwrap();
        let got = api.get(name).await.unwrap();
        want.push((
            name,
            got.status
                .and_then(|s| s.node_info)
                .and_then(|n| n.architecture),
        ));
    }
    assert_eq!(
        want,
        [
            ("arm", Some("arm64".to_string())),
            ("x86", Some("amd64".to_string())),
            ("any", Some("amd64".to_string())),
        ]
    );
}
