//! Facts a reconcile would observe, shared by the decision core's unit
//! tests and the steps' unit tests: one machine `wl1/m1` in instance `dc-a`,
//! VMID 131 once recorded, its ISO on `cephfs`.

use std::collections::BTreeMap;

use serde_json::Value;

use super::*;
use crate::api::machine::ProxmoxMachineSpec;
use crate::machine::plan::template::TemplateVm;
use crate::machine::vm::marker::Marker;
use crate::machine::vm::vmconfig;
use crate::pve::{NodeName, VmConfig};

pub(crate) const UID: &str = "3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f";
pub(crate) const ISO: &str = "capmox-131-3f2a9c1e-7b4d-4e8a-9c2f-0a1b2c3d4e5f.iso";

pub(crate) fn marker() -> Marker {
    Marker::new("wl1", "m1", UID)
}

pub(crate) fn node(n: &str) -> NodeName {
    NodeName::new(n).unwrap()
}

pub(crate) fn config(extra: &[(&str, &str)]) -> VmConfig {
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
        ("smbios1", "uuid=0d3c1e4a-5b6c-4d7e-8f90-a1b2c3d4e5f6"),
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
pub(crate) fn configured() -> VmConfig {
    config(&[("ide0", &format!("cephfs:iso/{ISO},media=cdrom"))])
}

pub(crate) fn view(config: Option<VmConfig>, power: Power) -> VmView {
    VmView {
        node: node("pve-a1"),
        power,
        power_source: PowerSource::Live,
        lock: None,
        config: config.map(std::sync::Arc::new),
        ha: None,
    }
}

pub(crate) fn media() -> MediaVolume {
    MediaVolume {
        node: node("pve-a1"),
        volid: format!("cephfs:iso/{ISO}"),
    }
}

pub(crate) fn v4() -> ClaimedAddress {
    ClaimedAddress {
        net: "net0".into(),
        address: "10.10.0.20".parse().unwrap(),
        prefix: 24,
        gateway: Some("10.10.0.1".parse().unwrap()),
        metric: None,
    }
}

pub(crate) fn plan() -> Plan {
    Plan {
        node: node("pve-a1"),
        template: TemplateVm {
            vmid: 9000,
            node: "pve-a1".into(),
            name: None,
            tags: Default::default(),
            template: true,
        },
        memory: 2 << 30,
    }
}

/// A machine ready to be planned: every precondition met, instance chosen,
/// client ready, claims bound, nothing observed about the VM yet.
pub(crate) fn base() -> Facts {
    let spec = ProxmoxMachineSpec::default();
    Facts {
        name: "m1".into(),
        marker: marker(),
        deleting: false,
        deletion_age: None,
        has_finalizer: true,
        instance: Some("dc-a".into()),
        vmid: None,
        vmid_reserved: false,
        vmid_range: (100, 999_999_999),
        provider_id: None,
        provisioned: false,
        task_recorded: false,
        media_recorded: None,
        media_deleted: false,
        iso_file: None,
        media_uploaded: false,
        desired: vmconfig::desired(
            &spec,
            "m1",
            &marker(),
            vmconfig::InstanceDefaults {
                bridge: Some("vmbr0"),
                cpu: None,
                media: None,
                arch: None,
                pci_mappings: None,
            },
        )
        .map_err(|e| e.to_string()),
        disks: None,
        skip_agent: false,
        check_bootstrap: true,
        provider_id_format: Default::default(),
        ha_wanted: None,
        ha_recorded: false,
        pool: None,
        instance_pool: None,
        pool_problem: None,
        pool_query: true,
        pool_members: None,
        paused: false,
        spec_problems: None,
        owner: Owner::Present {
            bootstrap: BootstrapData::Ready,
        },
        cluster: ClusterFact::Present {
            infra_provisioned: true,
        },
        placement: None,
        pve_major: Some(9),
        missing_privileges: Vec::new(),
        client: Some(ClientFact::Ready),
        task: None,
        vm: None,
        claims: Some(ClaimsFact::Bound(vec![v4()])),
        claim_objects: None,
        agent: None,
        bootstrap: None,
        duplicates: None,
        media_found: None,
        ha: None,
        provider_id_holder: Some(None),
        plan: None,
        in_line: None,
        gates: Vec::new(),
    }
}

/// `base` with VMID 131 recorded and the VM observed as `vm`.
pub(crate) fn at(vm: VmFact) -> Facts {
    let mut f = base();
    f.vmid = Some(131);
    f.iso_file = Some(ISO.into());
    f.vm = Some(vm);
    f
}
