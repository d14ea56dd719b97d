//! [`crate::machine::steps::media`]: the bootstrap ISO is deleted by its
//! record, and a failed delete keeps the record (docs/field-cases.md B20);
//! the seed carries cloud-config verbatim and Ignition enriched
//! (docs/flatcar.md).

use super::kit::Kit;
use crate::api::machine::BootstrapMedia;
use crate::api::{ProxmoxMachine, ProxmoxMachineStatus};
use crate::machine::decide::fixtures::{ISO, at, configured, media, view};
use crate::machine::decide::{Observed, Operation, Power, StepKind, VmFact};
use crate::machine::steps::media::delete;
use crate::pve::fake::transient;
use crate::reasons::Reason;

/// The machine with its ISO recorded in `status.bootstrapMedia`, and the
/// ISO on `cephfs` when `on_storage`.
async fn recorded(kit: &Kit, on_storage: bool) -> ProxmoxMachine {
    let volid = media().volid;
    if on_storage {
        kit.pve.add_volume("cephfs", &volid);
    }
    kit.machine(Default::default()).await;
    let status = ProxmoxMachineStatus {
        bootstrap_media: Some(BootstrapMedia {
            node: "pve-a1".into(),
            volume: volid,
        }),
        ..Default::default()
    };
    kit.machines()
        .patch_status(
            "m1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({ "status": status })),
        )
        .await
        .unwrap()
}

#[tokio::test]
async fn the_iso_is_deleted_by_its_record_as_a_task() {
    let kit = Kit::new().await;
    let m = recorded(&kit, true).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    assert_eq!(out, Observed::TaskStarted(Operation::DeleteVolume));
    assert!(kit.pve.volumes("cephfs").is_empty());
    // The record stays until the task's end is seen.
    assert!(kit.stored().await.status.unwrap().bootstrap_media.is_some());
    let memo = kit.ctx.runtime.memo(&run.me.uid);
    assert_eq!(memo.task.clone().unwrap().volume, Some(media().volid));
    assert!(matches!(
        run.events[0].1,
        Reason::CleaningUpBootstrapData(_)
    ));
}

#[tokio::test]
async fn a_failed_delete_keeps_the_record_and_backs_off() {
    let kit = Kit::new().await;
    let m = recorded(&kit, true).await;
    kit.pve.fail_next("delete_volume", transient("/storage"));
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    let Observed::Failed(g) = out else {
        panic!("expected a failure, got {out:?}");
    };
    assert_eq!(g.step, StepKind::DeleteMedia);
    assert!(matches!(g.reason, Reason::MediaDeletionFailed(_)));
    assert!(!g.remaining.is_zero(), "a retry is due later, not dropped");
    assert_eq!(kit.pve.volumes("cephfs"), [media().volid]);
    assert_eq!(
        kit.stored()
            .await
            .status
            .unwrap()
            .bootstrap_media
            .unwrap()
            .volume,
        media().volid
    );
}

#[tokio::test]
async fn an_iso_already_gone_clears_the_record() {
    let kit = Kit::new().await;
    // Gone already: a crash after the delete, before the record was cleared.
    let m = recorded(&kit, false).await;
    let mut run = kit.run(&m);
    let facts = at(VmFact::Ours(view(Some(configured()), Power::Running)));
    let out = delete(&mut run, &facts, media()).await.unwrap();
    assert_eq!(out, Observed::MediaDeleted(media().volid));
    assert_eq!(kit.stored().await.status.unwrap().bootstrap_media, None);
    assert!(media().volid.ends_with(ISO));
}

fn who() -> crate::machine::steps::media::Identity {
    crate::machine::steps::media::Identity {
        instance_id: "0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6".into(),
        hostname: "m1".into(),
        provider_id: "proxmox://0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6".into(),
        zone: "dc-a".into(),
        node: "pve-a1".into(),
    }
}

fn device() -> crate::cloudinit::Interface {
    crate::cloudinit::Interface {
        index: 0,
        mac: pve_client::options::MacAddr::parse("BC:24:11:AA:BB:CC").unwrap(),
        addresses: vec![("10.10.0.20".parse().unwrap(), 24)],
        gateway4: Some("10.10.0.1".parse().unwrap()),
        gateway6: None,
        metric: None,
        dns: vec![],
        dhcp4: false,
        dhcp6: false,
    }
}

#[test]
fn cloud_config_goes_verbatim_and_ignition_enriched() {
    use crate::cloudinit::BootstrapFormat;
    use crate::machine::steps::media::seed_input;
    let cc = b"#cloud-config\nruncmd: []\n".to_vec();
    let s = seed_input(
        who(),
        false,
        BootstrapFormat::CloudConfig,
        cc.clone(),
        vec![],
    )
    .unwrap();
    assert_eq!(s.user_data, cc);
    assert_eq!(s.provider_id, None);

    let ign = br#"{"ignition":{"version":"3.4.0"}}"#.to_vec();
    let s = seed_input(who(), true, BootstrapFormat::Ignition, ign, vec![device()]).unwrap();
    assert_eq!(s.format, BootstrapFormat::Ignition);
    assert_eq!(
        s.provider_id.as_deref(),
        Some("proxmox://0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6")
    );
    let config: serde_json::Value = serde_json::from_slice(&s.user_data).unwrap();
    let paths: Vec<&str> = config["storage"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/etc/hostname",
            "/etc/proxmox-env",
            "/etc/systemd/network/00-eth0.network"
        ]
    );
    // The whole seed: v1 network-config and vendor-data for Ignition.
    let seed = crate::cloudinit::render(&s).unwrap();
    assert!(
        seed.network_config.starts_with("version: 1\n"),
        "{}",
        seed.network_config
    );
    assert_eq!(seed.vendor_data.as_deref(), Some("#cloud-config\n{}\n"));
}

#[test]
fn an_unusable_ignition_config_is_an_error() {
    use crate::cloudinit::BootstrapFormat;
    use crate::cloudinit::ignition::IgnitionError;
    use crate::machine::steps::media::seed_input;
    let e = seed_input(
        who(),
        false,
        BootstrapFormat::Ignition,
        b"{\"passwd\":{}}".to_vec(),
        vec![],
    )
    .unwrap_err();
    assert_eq!(e, IgnitionError::NoVersion);
}
