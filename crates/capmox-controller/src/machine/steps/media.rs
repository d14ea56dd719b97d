//! The bootstrap ISO (NoCloud seed, volume label `cidata`; for Ignition
//! bootstrap data the enriched config as `user-data`, docs/flatcar.md): recorded in
//! `status.bootstrapMedia` before it is uploaded, attached by the config
//! write, ejected once the machine is provisioned, and deleted by its
//! record — retried until the volume is gone, never dropped into an event
//! (docs/field-cases.md B20, B39).

use std::net::IpAddr;

use crate::api::machine::BootstrapMedia;
use crate::cloudinit::ignition::{self, Enrichment, IgnitionError};
use crate::cloudinit::{BootstrapFormat, Interface, SeedInput};
use crate::error::Error;
use crate::events::EventKind;
use crate::machine::context::Run;
use crate::machine::decide::{
    ClaimsFact, Facts, MediaVolume, Observed, Operation, StepKind, VmFact,
};
use crate::machine::observe;
use crate::machine::report::provider_id;
use crate::machine::runtime::NodeKey;
use crate::machine::vm::{media, vmconfig};
use crate::pve::{Missing, NodeName, PveError, StorageId, VmConfig};
use crate::reasons::Reason;
use crate::stores;

/// Records the ISO volume, renders the seed, builds the ISO and uploads it
/// (`POST /nodes/{node}/storage/{storage}/upload`).
///
/// # Errors
/// [`Error::Kube`] of the record write or of reading the bootstrap data.
pub async fn upload(run: &mut Run<'_>, facts: &Facts) -> Result<Observed, Error> {
    let fail = |run: &Run<'_>, class: &'static str, reason: Reason| {
        super::failed(run, StepKind::UploadMedia, class, reason)
    };
    let inst = run.instance()?.clone();
    let Some(VmFact::Ours(view)) = &facts.vm else {
        return Ok(fail(
            run,
            "precondition",
            Reason::UploadFailed("the VM is not known".into()),
        ));
    };
    let Some(config) = &view.config else {
        return Ok(fail(
            run,
            "precondition",
            Reason::UploadFailed("the VM's config is not known".into()),
        ));
    };
    let file = facts.iso_file.clone().unwrap_or_default();
    let key = NodeKey {
        identity: inst.identity.clone(),
        node: view.node.clone(),
    };
    let requested = facts
        .desired
        .as_ref()
        .ok()
        .and_then(|d| d.media_storage.clone());
    // The default choice is cached per node; a named storage is checked
    // against the listing every time it is chosen (once per machine).
    let cached = if requested.is_none() {
        run.rt().iso_storage(&key)
    } else {
        None
    };
    let storage = match cached {
        Some(s) => s,
        None => {
            let snap = match run
                .rt()
                .resources
                .get(&inst.identity, inst.api.as_ref(), None)
                .await
            {
                Ok(s) => s,
                Err(e) => {
                    return Ok(super::pve_failed(
                        run,
                        StepKind::UploadMedia,
                        &e,
                        Reason::InstanceUnreachable {
                            instance: inst.name.clone(),
                            detail: e.to_string(),
                        },
                    ));
                }
            };
            match media::iso_storage(&snap.storages(), view.node.as_str(), requested.as_deref()) {
                Ok(s) => {
                    if requested.is_none() {
                        run.rt().cache_iso_storage(key, s.clone());
                    }
                    s
                }
                Err(e) => {
                    let reason = if e.terminal() {
                        Reason::IsoStorageUnfit(e.to_string())
                    } else {
                        Reason::NoIsoStorage(e.to_string())
                    };
                    return Ok(fail(run, "no_iso_storage", reason));
                }
            }
        }
    };
    let Ok(sid) = StorageId::new(storage.storage.clone()) else {
        return Ok(fail(
            run,
            "no_iso_storage",
            Reason::NoIsoStorage(format!("invalid storage id {}", storage.storage)),
        ));
    };
    let secret = run
        .world
        .owner
        .as_ref()
        .and_then(|o| o.bootstrap_secret().map(str::to_string));
    let data = match &secret {
        Some(secret) => stores::bootstrap_value(&run.ctx.shared.kube, &run.me.ns, secret).await?,
        None => None,
    };
    let (Some(secret), Some(data)) = (secret, data) else {
        return Ok(fail(
            run,
            "precondition",
            Reason::WaitingForBootstrapData("the bootstrap data Secret has no key 'value'".into()),
        ));
    };
    let format = match BootstrapFormat::parse(data.format.as_deref()) {
        Ok(f) => f,
        Err(e) => {
            return Ok(fail(
                run,
                "invalid_spec",
                Reason::UnsupportedBootstrapFormat(e),
            ));
        }
    };
    let seed = match seed(run, facts, config, &view.node, format, data.value) {
        Ok(s) => s,
        Err(SeedError::Spec(reason)) => return Ok(fail(run, "invalid_spec", reason)),
        Err(SeedError::Ignition(e)) => {
            let message = observe::ignition::problem_message(&run.me.ns, &secret, &e);
            return Ok(fail(
                run,
                "invalid_spec",
                Reason::InvalidBootstrapData(message),
            ));
        }
    };
    let iso = match crate::cloudinit::render(&seed)
        .map_err(|e| e.to_string())
        .and_then(|s| crate::cloudinit::build(&s).map_err(|e| e.to_string()))
    {
        Ok(b) => b,
        Err(e) => return Ok(fail(run, "render", Reason::UploadFailed(e))),
    };
    // Record before create: the volume is in status before it exists.
    let volume = MediaVolume {
        node: view.node.clone(),
        volid: format!("{}:iso/{file}", storage.storage),
    };
    let record = BootstrapMedia {
        node: volume.node.as_str().to_string(),
        volume: volume.volid.clone(),
    };
    run.record_status(serde_json::json!({
        "status": { "bootstrapMedia": record, "bootstrapMediaDeleted": null }
    }))
    .await?;
    run.status.bootstrap_media = Some(record);
    run.status.bootstrap_media_deleted = None;
    run.media_recorded_here = Some(volume.volid.clone());
    let recorded = Observed::MediaRecorded(volume.clone());
    let vmid = facts.vmid.unwrap_or_default();
    Ok(
        match inst.api.upload_iso(&view.node, &sid, &file, iso).await {
            Ok(Some(upid)) => {
                let note = format!("uploading the bootstrap ISO {} for VM {vmid}", volume.volid);
                run.event(EventKind::Normal, Reason::UploadingBootstrapData(note));
                Observed::All(vec![
                    recorded,
                    super::task::started(
                        run,
                        &upid,
                        Operation::Upload,
                        facts.vmid,
                        None,
                        Some(volume.volid.clone()),
                    ),
                ])
            }
            Ok(None) => {
                run.rt()
                    .update_memo(&run.me.uid, |m| m.media_uploaded = facts.vmid);
                Observed::All(vec![recorded, Observed::MediaUploaded])
            }
            Err(e) => {
                let reason = Reason::UploadFailed(format!(
                    "upload of {} to node {}: {e}",
                    volume.volid, view.node
                ));
                Observed::All(vec![
                    recorded,
                    super::pve_failed(run, StepKind::UploadMedia, &e, reason),
                ])
            }
        },
    )
}

/// Why the seed cannot be made.
enum SeedError {
    /// The spec or the VM (the condition's reason).
    Spec(Reason),
    /// The Ignition config (the step names the Secret).
    Ignition(IgnitionError),
}

impl From<Reason> for SeedError {
    fn from(r: Reason) -> SeedError {
        SeedError::Spec(r)
    }
}

/// The seed: instance-id (the VM's SMBIOS UUID), host name, providerID
/// when asked, the bootstrap data (an Ignition config enriched with the
/// machine's identity and network, docs/flatcar.md), and each device's
/// MAC and addresses.
fn seed(
    run: &Run<'_>,
    facts: &Facts,
    config: &VmConfig,
    node: &NodeName,
    format: BootstrapFormat,
    user_data: Vec<u8>,
) -> Result<SeedInput, SeedError> {
    let Some(uuid) = config.smbios1.as_ref().and_then(|s| s.uuid) else {
        return Err(Reason::UploadFailed("the VM has no smbios1 uuid (instance-id)".into()).into());
    };
    let desired = facts
        .desired
        .as_ref()
        .map_err(|e| Reason::InvalidSpec(e.clone()))?;
    let macs = vmconfig::nic_macs(desired, config, &facts.marker)
        .map_err(|e| SeedError::Spec(Reason::InvalidSpec(e.to_string())))?;
    let plans = run
        .claims
        .as_ref()
        .map(|c| c.plans.clone())
        .unwrap_or_default();
    let bound = match &facts.claims {
        Some(ClaimsFact::Bound(b)) => b.clone(),
        _ => Vec::new(),
    };
    let mut interfaces = Vec::new();
    for p in &plans {
        let Some((_, mac)) = macs.iter().find(|(i, _)| *i == p.index) else {
            continue;
        };
        let net = format!("net{}", p.index);
        let mut iface = Interface {
            index: p.index,
            mac: *mac,
            addresses: Vec::new(),
            gateway4: None,
            gateway6: None,
            metric: None,
            dns: p.dns.iter().filter_map(|d| d.parse().ok()).collect(),
            dhcp4: p.dhcp4,
            dhcp6: p.dhcp6,
        };
        for a in bound.iter().filter(|a| a.net == net) {
            iface.addresses.push((a.address, a.prefix));
            if a.metric.is_some() {
                iface.metric = a.metric;
            }
            match a.gateway {
                Some(IpAddr::V4(g)) if a.address.is_ipv4() => iface.gateway4 = Some(g),
                Some(IpAddr::V6(g)) if a.address.is_ipv6() => iface.gateway6 = Some(g),
                _ => {}
            }
        }
        interfaces.push(iface);
    }
    let inject = run
        .machine
        .spec
        .metadata_settings
        .and_then(|m| m.provider_id_injection)
        .unwrap_or(false);
    let identity = Identity {
        instance_id: uuid.to_string(),
        hostname: crate::names::hostname(&run.me.name),
        provider_id: provider_id(facts, &uuid.to_string()),
        zone: facts.instance.clone().unwrap_or_default(),
        node: node.as_str().to_string(),
    };
    seed_input(identity, inject, format, user_data, interfaces).map_err(SeedError::Ignition)
}

/// Who the machine is, as the seed says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Identity {
    /// `instance-id`: the VM's smbios1 UUID.
    pub instance_id: String,
    /// The host name.
    pub hostname: String,
    /// The machine's providerID (in the ProxmoxCluster's format).
    pub provider_id: String,
    /// The failure domain (instance name).
    pub zone: String,
    /// The Proxmox node of the VM.
    pub node: String,
}

/// The seed input (pure): `user_data` verbatim for cloud-config; for
/// Ignition, enriched with `who` and `interfaces`
/// ([`ignition::enrich`], docs/flatcar.md). `meta-data`'s `provider-id`
/// only when `inject`.
///
/// # Errors
/// [`IgnitionError`] when Ignition data is not a usable config.
pub fn seed_input(
    who: Identity,
    inject: bool,
    format: BootstrapFormat,
    user_data: Vec<u8>,
    interfaces: Vec<Interface>,
) -> Result<SeedInput, IgnitionError> {
    let user_data = match format {
        BootstrapFormat::CloudConfig => user_data,
        BootstrapFormat::Ignition => ignition::enrich(
            &user_data,
            &Enrichment {
                hostname: &who.hostname,
                instance_id: &who.instance_id,
                provider_id: &who.provider_id,
                zone: &who.zone,
                node: &who.node,
                interfaces: &interfaces,
            },
        )?,
    };
    Ok(SeedInput {
        instance_id: who.instance_id,
        hostname: who.hostname,
        provider_id: inject.then_some(who.provider_id),
        user_data,
        format,
        interfaces,
    })
}

/// Ejects the bootstrap ISO (`PUT …/config`, synchronous).
pub async fn eject(run: &mut Run<'_>, facts: &Facts) -> Observed {
    let (Some(VmFact::Ours(view)), Some(vmid)) = (&facts.vm, facts.vm_id()) else {
        return Observed::VmMoved;
    };
    let Some(config) = &view.config else {
        return Observed::VmMoved;
    };
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return super::failed(
                run,
                StepKind::Eject,
                "precondition",
                Reason::MediaDeletionFailed(e.to_string()),
            );
        }
    };
    let file = facts.iso_file.clone().unwrap_or_default();
    let Some(d) = config
        .disks
        .values()
        .find(|d| d.is_cdrom() && d.file.ends_with(&format!(":iso/{file}")))
    else {
        return Observed::Ejected(config.clone());
    };
    let Some(update) = vmconfig::eject(config, &d.file) else {
        return Observed::Ejected(config.clone());
    };
    match inst
        .api
        .update_vm_config_sync(&view.node, vmid, &update)
        .await
    {
        Ok(()) => {
            let after = std::sync::Arc::new(vmconfig::apply_update(config, &update));
            super::super::observe::vm::remember(
                run,
                vmid,
                &view.node,
                Some(std::sync::Arc::clone(&after)),
                None,
            );
            Observed::Ejected(after)
        }
        Err(PveError::NotFound { .. }) => super::super::observe::vm::moved(run),
        Err(e) => {
            let reason =
                Reason::MediaDeletionFailed(format!("eject of {} from VM {vmid}: {e}", d.file));
            super::pve_failed(run, StepKind::Eject, &e, reason)
        }
    }
}

/// Deletes ISO volume `m` (`DELETE /nodes/{node}/storage/{storage}/content/{volume}`).
/// Gone already (the volume, its storage or its node) counts as deleted.
///
/// # Errors
/// None today; the signature matches the other steps.
pub async fn delete(run: &mut Run<'_>, facts: &Facts, m: MediaVolume) -> Result<Observed, Error> {
    let inst = match run.instance() {
        Ok(i) => i.clone(),
        Err(e) => {
            return Ok(super::failed(
                run,
                StepKind::DeleteMedia,
                "precondition",
                Reason::MediaDeletionFailed(e.to_string()),
            ));
        }
    };
    let storage = m.volid.split_once(':').map(|(s, _)| s).unwrap_or_default();
    let Ok(sid) = StorageId::new(storage.to_string()) else {
        // Not a volume ID Proxmox could hold: nothing to delete.
        return deleted(run, &m.volid).await;
    };
    Ok(
        match inst.api.delete_volume(&m.node, &sid, &m.volid).await {
            Ok(Some(upid)) => {
                let reason = if facts.deleting {
                    Reason::Deleting(format!("deleting the bootstrap ISO {}", m.volid))
                } else {
                    Reason::CleaningUpBootstrapData(format!(
                        "deleting the bootstrap ISO {}",
                        m.volid
                    ))
                };
                run.event(EventKind::Normal, reason);
                super::task::started(
                    run,
                    &upid,
                    Operation::DeleteVolume,
                    facts.vmid,
                    None,
                    Some(m.volid.clone()),
                )
            }
            Ok(None)
            | Err(PveError::NotFound {
                missing: Missing::Volume | Missing::Storage | Missing::Node,
                ..
            }) => deleted(run, &m.volid).await?,
            Err(e) => {
                let text = format!("deleting the bootstrap ISO {} on {}: {e}", m.volid, m.node);
                let reason = if facts.deleting {
                    Reason::DeletionFailed(text)
                } else {
                    Reason::MediaDeletionFailed(text)
                };
                super::pve_failed(run, StepKind::DeleteMedia, &e, reason)
            }
        },
    )
}

async fn deleted(run: &mut Run<'_>, volid: &str) -> Result<Observed, Error> {
    run.clear_media_record(volid).await?;
    Ok(Observed::MediaDeleted(volid.to_string()))
}
