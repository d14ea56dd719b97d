//! The facts a reconcile starts from: the ProxmoxMachine, the objects
//! around it (owner Machine, Cluster, ProxmoxCluster, bootstrap Secret,
//! from the stores), and what this process remembers (plan, gates, the
//! upload of its ISO).

use crate::api::ProxmoxMachine;
use crate::api::validation::{summarize, validate_machine, validate_machine_for_cluster};
use crate::capi::{is_control_plane, is_paused, owner_of_kind};
use crate::cloudinit::BootstrapFormat;
use crate::error::Error;
use crate::instances::{self, EffectiveInstance};
use crate::machine::context::{Run, World};
use crate::machine::decide::{
    BootstrapData, ClusterFact, Facts, MediaVolume, Owner, Power, PowerSource, VmFact, VmView,
};
use crate::machine::plan::placement::{self, InstanceFacts};
use crate::machine::plan::vmid;
use crate::machine::report::FINALIZER;
use crate::machine::runtime::memo::Memo;
use crate::machine::vm::marker::iso_file_name;
use crate::machine::vm::vmconfig;
use crate::pve::NodeName;
use crate::stores;

/// Reads the objects around the machine (stores first, one GET each for
/// what a store does not have yet) and builds the facts.
///
/// # Errors
/// [`Error::Kube`] of a read-through GET; [`Error::Precondition`] when the
/// stores' watches stopped (shutdown).
pub async fn facts(run: &mut Run<'_>) -> Result<Facts, Error> {
    let ctx = run.ctx;
    let m = run.machine;
    let kube = &ctx.shared.kube;
    let st = &ctx.stores;
    st.ready().await?;
    let ns = run.me.ns.clone();
    let mut world = World::default();
    if let Some(o) = owner_of_kind(&m.metadata, "cluster.x-k8s.io", "Machine") {
        world.owner =
            crate::spent::kubernetes(stores::read_through(&st.owners, kube, &ns, &o.name)).await?;
    }
    if let Some(name) = &run.me.cluster {
        world.cluster =
            crate::spent::kubernetes(stores::read_through(&st.clusters, kube, &ns, name)).await?;
    }
    if let Some(c) = &world.cluster {
        world.proxmox_cluster = st.proxmox_cluster_of(&ns, c);
    }
    let owner = match &world.owner {
        None => Owner::Missing,
        Some(owner) => Owner::Present {
            bootstrap: match owner.bootstrap_secret() {
                None => BootstrapData::Missing(
                    "waiting for the bootstrap data Secret (Machine spec.bootstrap.dataSecretName)"
                        .into(),
                ),
                Some(secret) => match crate::spent::kubernetes(stores::bootstrap_presence(
                    st, kube, &ns, secret,
                ))
                .await?
                {
                    None => BootstrapData::Missing(format!(
                        "waiting for the bootstrap data Secret {ns}/{secret}"
                    )),
                    Some(p) if !p.has_value => BootstrapData::Missing(format!(
                        "the bootstrap data Secret {ns}/{secret} has no key 'value' yet"
                    )),
                    Some(p) => match BootstrapFormat::parse(p.format.as_deref()) {
                        // Checked only while it can still be delivered: a
                        // provisioned or deleting machine needs no data.
                        Ok(BootstrapFormat::Ignition) if !settled(m) => {
                            super::ignition::checked(
                                &ctx.runtime,
                                kube,
                                &run.me.uid,
                                &ns,
                                secret,
                                &p,
                            )
                            .await?
                        }
                        Ok(_) => BootstrapData::Ready,
                        Err(e) => BootstrapData::Unsupported(e),
                    },
                },
            },
        },
    };
    let cluster = match (&world.cluster, &world.proxmox_cluster) {
        (None, _) => ClusterFact::Missing,
        (Some(_), None) => ClusterFact::NoInfraCluster,
        (Some(c), Some(_)) => ClusterFact::Present {
            infra_provisioned: c.infrastructure_provisioned(),
        },
    };
    let mut problems = validate_machine(&m.spec);
    if let Some(pc) = &world.proxmox_cluster {
        problems.extend(validate_machine_for_cluster(&m.spec, &pc.spec));
    }
    if let (Some(pc), Some(inst)) = (&world.proxmox_cluster, &m.spec.instance) {
        world.instance = instances::effective_instance(&pc.spec, inst);
    }
    let placement = placement_problem(m, &world);
    let memo = ctx.runtime.memo(&run.me.uid);
    let generation = m.metadata.generation;
    let facts = initial(
        m,
        &run.me.marker,
        &world,
        &memo,
        owner,
        cluster,
        problems,
        placement,
    );
    let mut facts = facts;
    facts.paused = is_paused(world.cluster.as_deref(), &m.metadata);
    facts.gates = ctx.runtime.retries.gates(&run.me.uid, generation);
    run.world = world;
    Ok(facts)
}

/// Provisioned or being deleted: the bootstrap data is not read again.
fn settled(m: &ProxmoxMachine) -> bool {
    m.metadata.deletion_timestamp.is_some()
        || m.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
}

/// The facts from the object, the world and the memo (pure).
#[allow(clippy::too_many_arguments)]
fn initial(
    m: &ProxmoxMachine,
    marker: &crate::machine::vm::marker::Marker,
    world: &World,
    memo: &Memo,
    owner: Owner,
    cluster: ClusterFact,
    problems: Vec<crate::api::validation::FieldError>,
    placement: Option<placement::PlacementError>,
) -> Facts {
    let vmid = m.spec.virtual_machine_id;
    let st = m.status.as_ref();
    let bridge = world
        .instance
        .as_ref()
        .and_then(|e| e.network.bridge.clone());
    let provisioned = st
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    let range = vmid::effective_range(
        m.spec.vm_id_range,
        world.instance.as_ref().and_then(|e| e.spec.vm_id_range),
    );
    let instance_pool = world.instance.as_ref().and_then(|e| e.spec.pool.clone());
    Facts {
        name: m.metadata.name.clone().unwrap_or_default(),
        marker: marker.clone(),
        deleting: m.metadata.deletion_timestamp.is_some(),
        deletion_age: m.metadata.deletion_timestamp.as_ref().map(|t| {
            k8s_openapi::jiff::Timestamp::now()
                .duration_since(t.0)
                .try_into()
                .unwrap_or_default()
        }),
        has_finalizer: m
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER),
        instance: m.spec.instance.clone(),
        vmid,
        vmid_reserved: vmid.is_some_and(|v| {
            m.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(vmid::RESERVED_ANNOTATION))
                == Some(&v.to_string())
        }),
        vmid_range: (range.start, range.end),
        provisioned,
        task_recorded: st.is_some_and(|s| s.task_ref.is_some())
            || memo
                .task
                .as_ref()
                .is_some_and(|t| t.vmid.is_some() && t.vmid == vmid),
        media_recorded: st.and_then(|s| s.bootstrap_media.as_ref()).and_then(|b| {
            Some(MediaVolume {
                node: NodeName::new(b.node.clone()).ok()?,
                volid: b.volume.clone(),
            })
        }),
        media_deleted: st.is_some_and(|s| {
            s.bootstrap_media.is_none() && s.bootstrap_media_deleted == Some(true)
        }),
        iso_file: vmid.map(|v| iso_file_name(v, marker.uid())),
        media_uploaded: vmid.is_some() && memo.media_uploaded == vmid,
        desired: vmconfig::desired(
            &m.spec,
            &crate::names::vm_name(&m.metadata.name.clone().unwrap_or_default()),
            marker,
            vmconfig::InstanceDefaults {
                bridge: bridge.as_deref(),
                cpu: world.instance.as_ref().and_then(|e| e.spec.cpu.as_ref()),
                media: world
                    .instance
                    .as_ref()
                    .and_then(|e| e.spec.bootstrap_media.as_ref()),
                arch: world
                    .instance
                    .as_ref()
                    .and_then(|e| e.spec.arch)
                    .map(|a| a.arch()),
                pci_mappings: world.instance.as_ref().map(|e| &e.spec.pci_mappings),
            },
        )
        .map_err(|e| e.to_string()),
        disks: m.spec.disks.clone(),
        skip_agent: m
            .spec
            .checks
            .and_then(|c| c.skip_qemu_guest_agent)
            .unwrap_or(false),
        check_bootstrap: m.spec.checks.is_none_or(|c| {
            !c.skip_qemu_guest_agent.unwrap_or(false) && !c.skip_cloud_init_status.unwrap_or(false)
        }),
        ha_wanted: m
            .spec
            .ha
            .as_ref()
            .or(world.instance.as_ref().and_then(|e| e.spec.ha.as_ref()))
            .filter(|h| h.wanted())
            .cloned(),
        ha_recorded: st.is_some_and(|s| s.ha_resource.is_some()),
        pool: m.spec.pool.clone().or_else(|| instance_pool.clone()),
        pool_problem: instance_status(world, m).and_then(|i| i.pool_problem.clone()),
        pool_query: instance_status(world, m)
            .and_then(|i| i.version.as_deref())
            .is_none_or(pool_query),
        instance_pool,
        provider_id: m.spec.provider_id.clone(),
        provider_id_format: world
            .proxmox_cluster
            .as_ref()
            .map(|p| p.spec.provider_id_format())
            .unwrap_or_default(),
        paused: false,
        spec_problems: (!problems.is_empty()).then(|| summarize(&problems)),
        owner,
        cluster,
        placement,
        pve_major: instance_status(world, m).and_then(|i| {
            i.version
                .as_deref()
                .and_then(|v| v.split('.').next())
                .and_then(|m| m.parse().ok())
        }),
        missing_privileges: instance_status(world, m)
            .map(|i| i.missing_privileges.clone())
            .unwrap_or_default(),
        client: None,
        task: None,
        // Creation reads the VM through our own last view of it; a
        // provisioned or deleting machine reads the shared listing.
        vm: if m.metadata.deletion_timestamp.is_some() || provisioned {
            None
        } else {
            remembered_vm(memo, vmid)
        },
        claims: None,
        claim_objects: None,
        agent: None,
        bootstrap: None,
        duplicates: None,
        media_found: None,
        ha: None,
        pool_members: None,
        provider_id_holder: None,
        plan: memo.plan.clone(),
        in_line: None,
        gates: Vec::new(),
    }
}

/// Whether Proxmox VE `version` (`8.4.1`) reads one pool with
/// `GET /pools?poolid=` (from 8.1 on; docs/proxmox-semantics.md §23).
fn pool_query(version: &str) -> bool {
    crate::pve::VersionInfo {
        version: version.to_string(),
        release: String::new(),
        repoid: String::new(),
    }
    .has_pool_query()
}

/// The ProxmoxCluster's status of the machine's instance.
fn instance_status<'a>(
    world: &'a World,
    m: &ProxmoxMachine,
) -> Option<&'a crate::api::InstanceStatus> {
    let name = m.spec.instance.as_deref()?;
    world
        .proxmox_cluster
        .as_ref()?
        .status
        .as_ref()?
        .instances
        .iter()
        .find(|i| i.name == name)
}

/// Our own last view of the VM, while only our steps changed it: it saves
/// a config read per step. A task's end, a move, or anything a read says
/// otherwise replaces it.
fn remembered_vm(memo: &Memo, vmid: Option<u32>) -> Option<VmFact> {
    let v = memo.vm_at(vmid?)?;
    let config = v.config.clone()?;
    Some(VmFact::Ours(VmView {
        node: v.node.clone(),
        power: v.power.unwrap_or(Power::Unknown),
        power_source: PowerSource::Live,
        lock: config.lock.clone(),
        config: Some(config),
        ha: None,
    }))
}

/// Whether the machine's pinned instance can be used, by the placement
/// rules against the ProxmoxCluster's status (no Proxmox call).
fn placement_problem(m: &ProxmoxMachine, world: &World) -> Option<placement::PlacementError> {
    m.spec.instance.as_ref()?;
    let input = placement_input(m, world, Default::default())?;
    placement::choose(&input).err()
}

/// The placement rules' input for this machine; `counts` are the machines
/// per instance (for the policy), empty when only a pin is checked.
pub fn placement_input(
    m: &ProxmoxMachine,
    world: &World,
    counts: std::collections::BTreeMap<String, u32>,
) -> Option<placement::Input> {
    let pc = world.proxmox_cluster.as_ref()?;
    // Borrowed: the status also holds every failure domain and count.
    let st = pc.status.as_ref();
    let list: Vec<EffectiveInstance> = instances::effective_instances(&pc.spec);
    let instances = list
        .into_iter()
        .map(|e| {
            let s = st.and_then(|st| st.instances.iter().find(|i| i.name == e.spec.name));
            InstanceFacts {
                name: e.spec.name.clone(),
                ready: s.is_some_and(|s| s.ready),
                message: s.and_then(|s| s.message.clone()),
                control_plane: e.spec.is_control_plane(),
                machines: counts.get(&e.spec.name).copied().unwrap_or(0),
                free_memory: None,
                selected: s.and_then(|s| s.selected).unwrap_or(false),
            }
        })
        .collect();
    Some(placement::Input {
        mode: pc.spec.mode(),
        instances,
        pinned: m.spec.instance.clone(),
        failure_domain: world
            .owner
            .as_ref()
            .and_then(|o| o.failure_domain())
            .map(str::to_string),
        control_plane: world
            .owner
            .as_ref()
            .is_some_and(|o| is_control_plane(&o.metadata)),
        has_vm: m.spec.virtual_machine_id.is_some(),
    })
}
