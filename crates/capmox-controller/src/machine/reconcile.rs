//! The executor: gathers the facts [`decide`] asks for, performs the step it
//! returns, records it, and answers with a requeue.
//!
//! Invariants (module header, STYLE.md 23):
//! - **Level-triggered.** Every reconcile reads the world again. Memory
//!   (the [`MachineRuntime`]) only saves calls; after a restart the same
//!   steps follow from spec, status and Proxmox.
//! - **At most one Proxmox task per reconcile.** A step that starts a task
//!   records its UPID in `status.taskRef` and requeues at the task's
//!   expected end; synchronous steps (claims, spec writes, a synchronous
//!   config write) are followed by the next decision in the same reconcile.
//! - **The VMID is in spec before the clone is issued**, and the clone sets
//!   the ownership marker, so no crash can produce a second VM.
//! - **Never touch a VM that is not ours** (marker), never a template.
//! - **Deletion never hangs silently**: an unreachable instance is a
//!   `DeletionFailed` condition and a backoff retry.
//! - Status is written once per reconcile, by server-side apply, only when
//!   it changed; spec fields (`instance`, `virtualMachineID`, `providerID`)
//!   and finalizers by JSON merge patches carrying the `resourceVersion`
//!   of the object this reconcile read: a concurrent change (another
//!   controller process during a leader hand-over, a user's edit) makes the
//!   write fail with 409 and the reconcile is retried from fresh state —
//!   nothing is overwritten.
//! - **Never decide from an object older than our own last write.** The
//!   informer cache lags: a reconcile may be handed the object from before
//!   the previous reconcile's status write (no `status.taskRef` for the
//!   clone just issued). Per machine UID the runtime keeps the object our
//!   last successful write returned; an incoming object that is not exactly
//!   that `resourceVersion` is read again with one GET before anything is
//!   decided (and, were even that answer one of our earlier versions, the
//!   remembered object is used). Versions are compared for equality only
//!   (they are opaque) — see [`super::freshness`].
//! - **A task this process issued wins over an absent `status.taskRef`**:
//!   the UPID remembered for the machine's VMID is observed, the step is
//!   never issued again.
//! - **A 409 on our own write is expected under watch lag**: the controller
//!   requeues promptly with a fresh read, logs one debug line, and counts
//!   it neither as a reconcile error nor as a Warning event.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::api::{ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use pve_client::{TaskFailureKind, VmLock, WaitOptions};
use tokio::time::Instant;
use tracing::{Instrument, debug, info, warn};

use super::claims::{self, ClaimState, DevicePlan, InstancePool, WantedClaim};
use super::decide::{
    self, AgentFact, BootstrapFact, ClaimsFact, ClusterFact, Facts, Owner, Step, TaskFact, Until,
    VmFact, VmView, Wait,
};
use super::freshness::{self, Freshness};
use super::marker::{Marker, Ownership};
use super::node_tasks::Answer;
use super::placement::{self, InstanceFacts};
use super::runtime::{BootstrapCheck, MachineRuntime, SlotGrant};
use super::scheduler::{self, Locality, Request};
use super::status::{self, FINALIZER};
use super::stores::{self, Stores};
use super::template::{self, Resolved, TemplateError};
use super::timing::{GRID, Operation, next_poll, observation, on_grid};
use super::{addresses, vmconfig, vmid};
use crate::api::machine::{DeviceAddresses, NetworkStatus};
use crate::api::validation::{summarize, validate_machine, validate_machine_for_cluster};
use crate::api::{Initialization, ProxmoxCluster, ProxmoxMachine, ProxmoxMachineStatus};
use crate::capi::ipam::PoolRef;
use crate::capi::{
    CLUSTER_NAME_LABEL, Cluster, Machine, is_control_plane, is_paused, owner_of_kind,
};
use crate::clients::Instance;
use crate::cloudinit::format::{SENTINEL, SENTINEL_SUCCESS, sentinel_says_success};
use crate::conditions::{self, Desired, Status};
use crate::context::Shared;
use crate::error::Error;
use crate::events::{self, EventKind};
use crate::instances::{self, EffectiveInstance, IpFamily, PoolSource};
use crate::pve::{
    CloneRequest, DeleteOptions, DiskSize, NodeName, PveError, ShutdownOptions, StartOptions,
    StopOptions, StorageId, Upid, VmConfig, VmId,
};

/// What the machine controller's reconciles share.
pub struct Context {
    /// The manager's shared state.
    pub shared: Arc<Shared>,
    /// The machine controller's memory.
    pub runtime: Arc<MachineRuntime>,
    /// The watched objects a reconcile reads; `None` (tests driving
    /// reconciles by hand): every read is a request.
    pub stores: Option<Stores>,
}

/// The controller name in metrics.
pub const CONTROLLER: &str = "proxmoxmachine";

/// Polls past a task's expected end after which its status is read
/// directly rather than from its node's task list.
const DIRECT_AFTER_LATE_POLLS: u32 = 3;

/// Steps per reconcile before requeueing (observations and synchronous
/// steps continue in the same reconcile).
const MAX_STEPS: usize = 32;

/// The bootstrap ISO file name: unique per (VMID, machine UID), so cleanup
/// never deletes another VM's ISO (field case B20).
pub fn iso_file(vmid: u32, uid: &str) -> String {
    format!("capmox-{vmid}-{}.iso", uid.to_ascii_lowercase())
}

/// Reconciles one ProxmoxMachine (see the module invariants).
///
/// # Errors
/// Kubernetes API failures; Proxmox failures become conditions and
/// backoff requeues instead.
pub async fn reconcile(machine: Arc<ProxmoxMachine>, ctx: Arc<Context>) -> Result<Action, Error> {
    match reconcile_once(machine.clone(), ctx.clone()).await {
        Ok(Some(d)) => Ok(Action::requeue(d)),
        Ok(None) => Ok(Action::await_change()),
        Err(e) if is_conflict(&e) => {
            // Someone (usually our own earlier write, seen late) changed the
            // object after the version this reconcile wrote against.
            if let Some(uid) = machine.uid() {
                ctx.runtime.must_refresh(&uid);
            }
            debug!(object = %key(&machine), "write conflict (409); retrying from a fresh read");
            Ok(Action::requeue(
                ctx.runtime.scaled(ctx.runtime.options.poll_floor),
            ))
        }
        Err(e) => Err(e),
    }
}

/// Whether `e` is a Kubernetes 409 Conflict (a write against an older
/// `resourceVersion`).
pub fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Kube(kube::Error::Api(s)) if s.code == 409)
}

/// [`reconcile`], answering the requeue delay itself (`None`: wait for a
/// change) — for tests and tools that drive reconciles by hand. A 409 is
/// returned as the error (the controller turns it into a prompt requeue).
///
/// # Errors
/// As [`reconcile`].
pub async fn reconcile_once(
    machine: Arc<ProxmoxMachine>,
    ctx: Arc<Context>,
) -> Result<Option<Duration>, Error> {
    let started = std::time::Instant::now();
    let span = tracing::info_span!(
        "reconcile",
        controller = CONTROLLER,
        object = %format!("{}/{}", machine.namespace().unwrap_or_default(), machine.name_any()),
        instance = machine.spec.instance.as_deref().unwrap_or(""),
        vmid = machine.spec.virtual_machine_id.unwrap_or(0),
    );
    let object_key = key(&machine);
    let result = async {
        let Some(machine) = fresh(machine, &ctx).await? else {
            return Ok(None);
        };
        Exec::run(&machine, &ctx).await
    }
    .instrument(span)
    .await;
    let outcome = match &result {
        Ok(_) => "ok",
        Err(e) if is_conflict(e) => "conflict",
        Err(_) => "error",
    };
    ctx.shared
        .metrics
        .reconcile(CONTROLLER, outcome, started.elapsed());
    if result.is_ok() {
        ctx.runtime.backoff.succeeded(&object_key);
    }
    result
}

/// The object to decide from: `machine` when it is the version of our last
/// write, else the API server's current version (one GET), else — should
/// even that be one of our earlier versions — what we wrote. `None` when
/// the object is gone.
///
/// # Errors
/// [`Error::Kube`] of the GET.
async fn fresh(
    machine: Arc<ProxmoxMachine>,
    ctx: &Context,
) -> Result<Option<Arc<ProxmoxMachine>>, Error> {
    let Some(uid) = machine.uid() else {
        return Ok(Some(machine));
    };
    let written = ctx.runtime.written(&uid);
    let rv = machine.resource_version();
    let seen = freshness::classify(rv.as_deref(), written.as_ref());
    if seen == Freshness::Current {
        return Ok(Some(machine));
    }
    let api: Api<ProxmoxMachine> = Api::namespaced(
        ctx.shared.kube.clone(),
        &machine.namespace().unwrap_or_default(),
    );
    let Some(got) = api.get_opt(&machine.name_any()).await? else {
        return Ok(None);
    };
    if got.uid().as_deref() != Some(uid.as_str()) {
        // Deleted and created again under the same name: a new machine.
        return Ok(None);
    }
    let now = freshness::classify(got.resource_version().as_deref(), written.as_ref());
    debug!(
        seen = ?seen,
        stale_version = rv.as_deref().unwrap_or(""),
        fresh_version = got.resource_version().as_deref().unwrap_or(""),
        "the object may predate our last write; read it again"
    );
    let got = match (now, &written) {
        (Freshness::Stale, Some(w)) => freshness::overlay(got, w),
        _ => {
            ctx.runtime.record_write(&uid, &got);
            got
        }
    };
    ctx.runtime.refreshed(&uid);
    Ok(Some(Arc::new(got)))
}

/// Requeue after a failed reconcile: per-object exponential backoff.
pub fn error_policy(machine: Arc<ProxmoxMachine>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.shared.metrics.error(CONTROLLER, error.category());
    let delay = ctx.runtime.backoff.failed(&key(&machine));
    warn!(
        object = %key(&machine),
        category = error.category(),
        error = %error,
        retry_in_ms = delay.as_millis() as u64,
        "reconcile failed"
    );
    Action::requeue(delay)
}

fn key(m: &ProxmoxMachine) -> String {
    format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any())
}

/// How a reconcile ends.
struct Outcome {
    reason: &'static str,
    message: String,
    until: Until,
    poll: Option<Duration>,
}

enum Flow {
    Continue,
    Stop(Outcome),
}

fn stop(reason: &'static str, message: impl Into<String>, until: Until) -> Flow {
    Flow::Stop(Outcome {
        reason,
        message: message.into(),
        until,
        poll: None,
    })
}

fn polled(reason: &'static str, message: impl Into<String>, poll: Duration) -> Flow {
    Flow::Stop(Outcome {
        reason,
        message: message.into(),
        until: Until::Poll,
        poll: Some(poll),
    })
}

/// Whether a Proxmox error means "cannot talk to the instance" (vs. a
/// refusal of the request).
fn unreachable(e: &PveError) -> bool {
    matches!(
        e,
        PveError::Transient { .. }
            | PveError::NodeUnreachable { .. }
            | PveError::Tls { .. }
            | PveError::Unauthorized { .. }
            | PveError::InvalidConfig { .. }
    )
}

struct Exec<'a> {
    ctx: &'a Context,
    rt: &'a MachineRuntime,
    machine: &'a ProxmoxMachine,
    api: Api<ProxmoxMachine>,
    uid: String,
    ns: String,
    name: String,
    owner: Option<Arc<Machine>>,
    cluster: Option<Arc<Cluster>>,
    pc: Option<Arc<ProxmoxCluster>>,
    effective: Option<EffectiveInstance>,
    client: Option<Result<Instance, String>>,
    facts: Facts,
    status: ProxmoxMachineStatus,
    instance_cond: Option<Desired>,
    bootstrap: Option<Vec<u8>>,
    claim_plan: Option<(Vec<WantedClaim>, Vec<DevicePlan>, Vec<ClaimState>)>,
    resource_version: Option<String>,
    finalizers: Vec<String>,
    /// When to look at the bootstrap check again (set by `observe_bootstrap`).
    bootstrap_poll: Option<Duration>,
}

impl<'a> Exec<'a> {
    async fn run(machine: &'a ProxmoxMachine, ctx: &'a Context) -> Result<Option<Duration>, Error> {
        let ns = machine.namespace().unwrap_or_default();
        let uid = machine.uid().unwrap_or_default();
        let name = machine.name_any();
        let marker = Marker::new(&ns, &name, &uid);
        let desired =
            vmconfig::desired(&machine.spec, &name, &marker, None).map_err(|e| e.to_string());
        let facts = Facts {
            deleting: machine.metadata.deletion_timestamp.is_some(),
            has_finalizer: machine.finalizers().iter().any(|f| f == FINALIZER),
            paused: false,
            spec_errors: None,
            owner: Owner::Missing,
            cluster: ClusterFact::Missing,
            instance: machine.spec.instance.clone(),
            vmid: machine.spec.virtual_machine_id,
            provisioned: machine
                .status
                .as_ref()
                .and_then(|s| s.initialization.as_ref())
                .and_then(|i| i.provisioned)
                .unwrap_or(false),
            task: None,
            vm: None,
            claims: None,
            claim_objects: None,
            agent: None,
            name: name.clone(),
            marker,
            desired,
            disks: machine.spec.disks.clone(),
            iso_file: machine.spec.virtual_machine_id.map(|v| iso_file(v, &uid)),
            iso_uploaded: false,
            skip_agent: machine
                .spec
                .checks
                .and_then(|c| c.skip_qemu_guest_agent)
                .unwrap_or(false),
            check_bootstrap: machine.spec.checks.is_none_or(|c| {
                !c.skip_qemu_guest_agent.unwrap_or(false)
                    && !c.skip_cloud_init_status.unwrap_or(false)
            }),
            bootstrap_format_error: None,
            bootstrap: None,
            last_success: None,
        };
        let mut exec = Exec {
            ctx,
            rt: &ctx.runtime,
            machine,
            api: Api::namespaced(ctx.shared.kube.clone(), &ns),
            uid,
            ns,
            name,
            owner: None,
            cluster: None,
            pc: None,
            effective: None,
            client: None,
            facts,
            status: machine.status.clone().unwrap_or_default(),
            instance_cond: None,
            bootstrap: None,
            claim_plan: None,
            resource_version: machine.resource_version(),
            finalizers: machine.finalizers().to_vec(),
            bootstrap_poll: None,
        };
        exec.gather().await?;
        let outcome = exec.drive().await?;
        exec.finish(outcome).await
    }

    // ---- facts -------------------------------------------------------------

    async fn gather(&mut self) -> Result<(), Error> {
        let kube = self.ctx.shared.kube.clone();
        let st = self.ctx.stores.as_ref();
        if let Some(st) = st {
            st.ready().await?;
        }
        if let Some(o) = owner_of_kind(&self.machine.metadata, "cluster.x-k8s.io", "Machine") {
            self.owner =
                stores::read_through(st.map(|s| &s.owners), &kube, &self.ns, &o.name).await?;
        }
        if let Some(cluster_name) = self.machine.labels().get(CLUSTER_NAME_LABEL) {
            self.cluster =
                stores::read_through(st.map(|s| &s.clusters), &kube, &self.ns, cluster_name)
                    .await?;
            self.pc = self.find_proxmox_cluster(cluster_name).await?;
        }
        self.facts.paused = is_paused(self.cluster.as_deref(), &self.machine.metadata);
        self.facts.cluster = match (&self.cluster, &self.pc) {
            (None, _) => ClusterFact::Missing,
            (Some(_), None) => ClusterFact::NoInfraCluster,
            (Some(c), Some(_)) => ClusterFact::Present {
                infra_provisioned: c.infrastructure_provisioned(),
            },
        };
        if let Some(owner) = &self.owner {
            let ready = match owner.bootstrap_secret() {
                None => false,
                Some(secret) => {
                    match stores::bootstrap_presence(st, &kube, &self.ns, secret).await? {
                        Some(p) => {
                            self.facts.bootstrap_format_error =
                                crate::cloudinit::BootstrapFormat::parse(p.format.as_deref()).err();
                            p.has_value
                        }
                        None => false,
                    }
                }
            };
            self.facts.owner = Owner::Present {
                bootstrap_ready: ready,
            };
        }
        let mut problems = validate_machine(&self.machine.spec);
        if let Some(pc) = &self.pc {
            problems.extend(validate_machine_for_cluster(&self.machine.spec, &pc.spec));
        }
        if !problems.is_empty() {
            self.facts.spec_errors = Some(summarize(&problems));
        }
        if let (Some(pc), Some(inst)) = (&self.pc, &self.facts.instance) {
            self.effective = instances::effective_instance(&pc.spec, inst);
            let bridge = self
                .effective
                .as_ref()
                .and_then(|e| e.network.bridge.clone());
            self.facts.desired = vmconfig::desired(
                &self.machine.spec,
                &self.name,
                &self.facts.marker,
                bridge.as_deref(),
            )
            .map_err(|e| e.to_string());
        }
        let memo = self.rt.memo(&self.uid);
        if let (Some(vmid), Some((v, op))) = (self.facts.vmid, memo.last_success)
            && vmid == v
        {
            self.facts.last_success = Some(op);
        }
        if let (Some(file), Some(volid)) = (&self.facts.iso_file, &memo.iso_uploaded) {
            self.facts.iso_uploaded = volid.ends_with(&format!(":iso/{file}"));
        }
        Ok(())
    }

    async fn find_proxmox_cluster(
        &self,
        cluster_name: &str,
    ) -> Result<Option<Arc<ProxmoxCluster>>, Error> {
        let st = self.ctx.stores.as_ref();
        let by_ref = self
            .cluster
            .as_ref()
            .and_then(|c| c.spec.infrastructure_ref.as_ref())
            .filter(|r| r.kind == "ProxmoxCluster")
            .map(|r| r.name.clone());
        if let Some(name) = by_ref
            && let Some(pc) = stores::read_through(
                st.map(|s| &s.proxmox_clusters),
                &self.ctx.shared.kube,
                &self.ns,
                &name,
            )
            .await?
        {
            return Ok(Some(pc));
        }
        self.labelled_proxmox_cluster(&self.ns, cluster_name).await
    }

    /// The ProxmoxCluster labelled with CAPI cluster `cluster` in `ns`:
    /// from the store, else one LIST.
    async fn labelled_proxmox_cluster(
        &self,
        ns: &str,
        cluster: &str,
    ) -> Result<Option<Arc<ProxmoxCluster>>, Error> {
        if let Some(st) = self.ctx.stores.as_ref() {
            let labelled = st.proxmox_clusters.state().into_iter().find(|pc| {
                pc.namespace().as_deref() == Some(ns)
                    && pc.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster)
            });
            if let Some(pc) = labelled {
                return Ok(Some(pc));
            }
        }
        let api: Api<ProxmoxCluster> = Api::namespaced(self.ctx.shared.kube.clone(), ns);
        let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}"));
        Ok(api.list(&lp).await?.items.into_iter().next().map(Arc::new))
    }

    async fn instance(&mut self) -> Result<Instance, String> {
        if let Some(c) = &self.client {
            return c.clone();
        }
        let r = match (&self.pc, &self.facts.instance) {
            (Some(pc), Some(inst)) => self
                .ctx
                .shared
                .clients
                .get(&self.ctx.shared.kube, pc, inst)
                .await
                .map_err(|e| e.to_string()),
            (None, _) => Err(
                "the ProxmoxCluster is not found, so instance credentials are unknown".to_string(),
            ),
            (_, None) => Err("no instance chosen".to_string()),
        };
        self.client = Some(r.clone());
        r
    }

    fn identity(&self) -> Option<String> {
        match &self.client {
            Some(Ok(i)) => Some(i.identity.clone()),
            _ => None,
        }
    }

    // ---- the loop ----------------------------------------------------------

    async fn drive(&mut self) -> Result<Outcome, Error> {
        if !self.facts.paused
            && !self.facts.deleting
            && self.facts.instance.is_some()
            && self.pc.is_some()
            && let Some(Flow::Stop(o)) = self.check_instance()
        {
            return Ok(o);
        }
        self.adopt_own_task();
        if !self.facts.paused
            && self.status.task_ref.is_some()
            && let Flow::Stop(o) = self.observe_task().await
        {
            return Ok(o);
        }
        for _ in 0..MAX_STEPS {
            let step = decide::decide(&self.facts);
            debug!(?step, "decided");
            let flow = match step {
                Step::Done => {
                    if self.facts.provisioned
                        && !self.facts.deleting
                        && let Some(o) = self.refresh_provisioned().await
                    {
                        return Ok(o);
                    }
                    return Ok(Outcome {
                        reason: "Provisioned",
                        message: String::new(),
                        until: Until::Change,
                        poll: Some(self.rt.scaled(self.rt.options.steady)),
                    });
                }
                Step::Wait(Wait {
                    reason,
                    message,
                    until,
                }) => {
                    let poll = self.poll_hint();
                    if until == Until::Backoff
                        && matches!(self.facts.task, Some(TaskFact::Failed { .. }))
                    {
                        self.clear_task();
                    }
                    return Ok(Outcome {
                        reason,
                        message,
                        until,
                        poll,
                    });
                }
                Step::ObserveVm => self.observe_vm().await,
                Step::ObserveConfig => self.observe_config().await,
                Step::ObserveClaims => self.observe_claims().await?,
                Step::ObserveAgent => self.observe_agent().await,
                Step::ObserveBootstrap => self.observe_bootstrap().await,
                Step::ClearTask => {
                    self.task_done();
                    Flow::Continue
                }
                Step::AddFinalizer => self.add_finalizer().await?,
                Step::ChooseInstance => self.choose_instance().await?,
                Step::EnsureClaims => self.ensure_claims().await?,
                Step::Clone => self.clone_vm().await?,
                Step::ReplaceVmid(owner) => self.replace_vmid(&owner).await,
                Step::RemovePartial => self.destroy(true).await,
                Step::UploadIso => self.upload_iso().await,
                Step::Configure => self.configure().await,
                Step::Resize(r) => self.resize(r).await,
                Step::Start => self.start().await,
                Step::Finish(devs) => self.finish_provisioning(devs).await?,
                Step::DeleteIso => self.delete_iso().await,
                Step::Shutdown => self.shutdown().await,
                Step::Stop => self.stop_vm().await,
                Step::Destroy => self.destroy(false).await,
                Step::ReleaseClaims => self.release_claims().await?,
                Step::RemoveFinalizer => return self.remove_finalizer().await,
            };
            if let Flow::Stop(o) = flow {
                return Ok(o);
            }
        }
        Ok(Outcome {
            reason: "Reconciling",
            message: "more steps follow".into(),
            until: Until::Poll,
            poll: Some(self.rt.scaled(self.rt.options.poll_floor)),
        })
    }

    /// A provisioned machine: keep `status.proxmoxNode` and `vmStatus`
    /// current from the shared listing (a VM may migrate), and say so when
    /// the VM vanished or is not ours any more. Machines are not recreated:
    /// CAPI replaces them (a MachineHealthCheck can act on `Ready=False`).
    async fn refresh_provisioned(&mut self) -> Option<Outcome> {
        let vmid = self.facts.vmid?;
        let inst = self.instance().await.ok()?;
        let snap = self
            .rt
            .resources
            .get(&inst.identity, inst.api.as_ref(), None)
            .await
            .ok()?;
        let Some(r) = snap.vm(vmid) else {
            return Some(Outcome {
                reason: "VirtualMachineNotFound",
                message: format!(
                    "VM {vmid} is gone from instance {}; machines are not recreated (CAPI replaces them)",
                    inst.name
                ),
                until: Until::Backoff,
                poll: None,
            });
        };
        let tags = r.tags().unwrap_or_default();
        if let Ownership::Foreign(owner) = self.classify(&tags, None) {
            return Some(Outcome {
                reason: "VirtualMachineNotOurs",
                message: format!(
                    "VM {vmid} now carries another owner's marker ({owner}); it is left alone"
                ),
                until: Until::Backoff,
                poll: None,
            });
        }
        if let Some(node) = r.node.as_ref() {
            self.status.proxmox_node = Some(node.as_str().to_string());
        }
        if let Some(st) = r.status.clone().filter(|s| s != "unknown") {
            self.status.vm_status = Some(st);
        }
        None
    }

    /// Requeue hint while a task runs or the guest boots.
    fn poll_hint(&self) -> Option<Duration> {
        if matches!(self.facts.bootstrap, Some(BootstrapFact::Pending(_))) {
            return self.bootstrap_poll;
        }
        let memo = self.rt.memo(&self.uid);
        let identity = self.identity().unwrap_or_default();
        let floor = self
            .rt
            .scaled(self.rt.options.poll_floor)
            .max(Duration::from_millis(5));
        if let Some(TaskFact::Running(op)) = &self.facts.task {
            let (elapsed, late) = memo
                .task
                .as_ref()
                .map(|(_, at, polls)| (at.elapsed(), *polls))
                .unwrap_or((Duration::ZERO, 0));
            let expected = self.rt.timer.expected(&identity, *op);
            let delay = next_poll(expected, elapsed, late, floor);
            return Some(on_grid(Instant::now(), delay, expected.mul_f64(GRID)));
        }
        if matches!(self.facts.agent, Some(AgentFact::NotYet(_))) {
            let elapsed = memo.started_at.map(|t| t.elapsed()).unwrap_or_default();
            let expected = self.rt.timer.expected(&identity, Operation::Boot);
            let late = u32::from(elapsed > expected)
                * ((elapsed.as_millis() / expected.as_millis().max(1)) as u32).min(8);
            return Some(next_poll(expected, elapsed, late, floor));
        }
        None
    }

    // ---- status and requeue ------------------------------------------------

    async fn finish(mut self, o: Outcome) -> Result<Option<Duration>, Error> {
        let generation = self.machine.metadata.generation;
        let provisioned = self.facts.provisioned;
        let mut desired = vec![Desired::new(
            conditions::PAUSED,
            Status::from_bool(self.facts.paused),
            if self.facts.paused {
                "Paused"
            } else {
                "NotPaused"
            },
            if self.facts.paused {
                o.message.clone()
            } else {
                String::new()
            },
        )];
        if let Some(c) = self.instance_cond.take() {
            desired.push(c);
        } else if let Some(i) = &self.facts.instance
            && !conditions::is_true(&self.status.conditions, conditions::INSTANCE_SELECTED)
        {
            desired.push(Desired::new(
                conditions::INSTANCE_SELECTED,
                Status::True,
                "InstanceSelected",
                format!("instance {i}"),
            ));
        }
        if let Some(c) = &self.facts.claims {
            desired.push(status::claims_condition(c));
        }
        let deleting = self.facts.deleting;
        let (vm_status, reason, message) = if self.facts.paused {
            None
        } else if deleting {
            Some((
                Status::False,
                if o.reason == "DeletionFailed" {
                    "DeletionFailed"
                } else {
                    "Deleting"
                },
                o.message.clone(),
            ))
        } else if provisioned
            && matches!(o.reason, "VirtualMachineNotFound" | "VirtualMachineNotOurs")
        {
            Some((Status::False, o.reason, o.message.clone()))
        } else if provisioned {
            Some((Status::True, "Provisioned", String::new()))
        } else {
            Some((Status::False, o.reason, o.message.clone()))
        }
        .map_or((None, "", String::new()), |(s, r, m)| (Some(s), r, m));
        if let Some(s) = vm_status {
            desired.push(Desired::new(
                conditions::VM_PROVISIONED,
                s,
                reason,
                message.clone(),
            ));
            desired.push(Desired::new(conditions::READY, s, reason, message.clone()));
        }
        if let Some(i) = &self.facts.instance {
            self.status.failure_domain = Some(i.clone());
        }
        self.status.observed_generation = generation;
        status::merge(&mut self.status, &desired, generation);
        let gone = deleting && !self.finalizers.iter().any(|f| f == FINALIZER);
        if !gone {
            match status::write(&self.api, self.machine, &self.status).await {
                Ok(Some(written)) => self.rt.record_write(&self.uid, &written),
                Ok(None) => {}
                Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(e),
            }
        }
        // A refusal is announced when first seen (not on every resync).
        let refused_first = o.until == Until::Refused
            && self
                .machine
                .status
                .as_ref()
                .and_then(|s| conditions::get(&s.conditions, conditions::VM_PROVISIONED))
                .is_none_or(|c| c.reason != o.reason);
        if (o.until == Until::Backoff || refused_first) && !self.facts.paused {
            events::publish(
                &self.ctx.shared,
                &self.machine.object_ref(&()),
                EventKind::Warning,
                o.reason,
                "Reconcile",
                &o.message,
            )
            .await;
        }
        let action = Some(match o.until {
            Until::Change | Until::Refused => o
                .poll
                .unwrap_or_else(|| self.rt.scaled(self.rt.options.resync)),
            Until::Poll => o
                .poll
                .unwrap_or_else(|| self.rt.scaled(Duration::from_secs(2))),
            Until::Backoff => self.rt.backoff.failed(&key(self.machine)),
        });
        if o.until != Until::Backoff {
            self.rt.backoff.succeeded(&key(self.machine));
        }
        // The requeue that will read the running task's end.
        let poll_at = match (&self.facts.task, o.until, action) {
            (Some(TaskFact::Running(_)), Until::Poll, Some(d)) => Some(Instant::now() + d),
            _ => None,
        };
        // kube-runtime keeps the earliest of several requeues of an object,
        // so an earlier due time still stands.
        let now = Instant::now();
        self.rt.update_memo(&self.uid, |m| {
            m.task_poll_at = match (m.task_poll_at.filter(|t| *t > now), poll_at) {
                (Some(old), Some(new)) => Some(old.min(new)),
                (_, new) => new,
            }
        });
        if gone {
            return Ok(None);
        }
        Ok(action)
    }

    fn event(
        &self,
        kind: EventKind,
        reason: &'static str,
        note: String,
    ) -> impl std::future::Future<Output = ()> + 'a {
        let shared = self.ctx.shared.clone();
        let obj = self.machine.object_ref(&());
        async move { events::publish(&shared, &obj, kind, reason, "Reconcile", &note).await }
    }

    // ---- kube steps --------------------------------------------------------

    /// A JSON merge patch of the main resource, always with the
    /// `resourceVersion` this reconcile knows as a precondition: finalizer
    /// lists are replaced as a whole, and spec fields (`instance`,
    /// `virtualMachineID`, `providerID`) must not overwrite what another
    /// writer (a second controller process during a leader hand-over)
    /// decided meanwhile. A concurrent change answers 409; the error ends
    /// the reconcile, which is retried from fresh state.
    ///
    /// # Errors
    /// [`Error::Kube`]: 409 on a concurrent change, 404 when the object is gone.
    async fn merge_patch(&mut self, body: serde_json::Value) -> Result<(), Error> {
        let body = with_resource_version(body, self.resource_version.as_deref());
        let updated = self
            .api
            .patch(&self.name, &PatchParams::default(), &Patch::Merge(body))
            .await?;
        self.resource_version = updated.resource_version();
        self.finalizers = updated.finalizers().to_vec();
        self.rt.record_write(&self.uid, &updated);
        Ok(())
    }

    async fn add_finalizer(&mut self) -> Result<Flow, Error> {
        let mut list = self.finalizers.clone();
        list.push(FINALIZER.to_string());
        self.merge_patch(serde_json::json!({ "metadata": { "finalizers": list } }))
            .await?;
        self.facts.has_finalizer = true;
        Ok(Flow::Continue)
    }

    async fn remove_finalizer(&mut self) -> Result<Outcome, Error> {
        let list: Vec<String> = self
            .finalizers
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        match self
            .merge_patch(serde_json::json!({ "metadata": { "finalizers": list } }))
            .await
        {
            Ok(()) => {}
            Err(Error::Kube(kube::Error::Api(s))) if s.code == 404 => {}
            Err(e) => return Err(e),
        }
        self.finalizers.retain(|f| f != FINALIZER);
        if let (Some(identity), Some(vmid)) = (self.identity(), self.facts.vmid) {
            self.rt.vmids.release(&identity, vmid, &self.uid);
        }
        self.rt.vmids.release_everywhere(&self.uid);
        self.rt.forget(&self.uid);
        info!("finalizer removed; the machine is gone");
        Ok(Outcome {
            reason: "Deleted",
            message: String::new(),
            until: Until::Change,
            poll: None,
        })
    }

    fn check_instance(&mut self) -> Option<Flow> {
        let input = self.placement_input(Default::default(), Default::default())?;
        match placement::choose(&input) {
            Ok(_) => None,
            Err(e) => {
                self.instance_cond = Some(Desired::new(
                    conditions::INSTANCE_SELECTED,
                    Status::False,
                    e.reason(),
                    e.to_string(),
                ));
                let until = if e.reason() == "InstanceNotReady" {
                    Until::Backoff
                } else {
                    Until::Change
                };
                Some(stop(e.reason(), e.to_string(), until))
            }
        }
    }

    fn placement_input(
        &self,
        counts: std::collections::BTreeMap<String, u32>,
        free: std::collections::BTreeMap<String, i128>,
    ) -> Option<placement::Input> {
        let pc = self.pc.as_ref()?;
        let st = pc.status.clone().unwrap_or_default();
        let instances = instances::effective_instances(&pc.spec)
            .into_iter()
            .map(|e| {
                let s = st.instances.iter().find(|i| i.name == e.spec.name);
                InstanceFacts {
                    name: e.spec.name.clone(),
                    ready: s.is_some_and(|s| s.ready),
                    message: s.and_then(|s| s.message.clone()),
                    control_plane: e.spec.is_control_plane(),
                    machines: counts.get(&e.spec.name).copied().unwrap_or(0),
                    free_memory: free.get(&e.spec.name).copied(),
                    selected: s.and_then(|s| s.selected).unwrap_or(false),
                }
            })
            .collect();
        Some(placement::Input {
            mode: pc.spec.mode(),
            instances,
            pinned: self.facts.instance.clone(),
            failure_domain: self
                .owner
                .as_ref()
                .and_then(|o| o.failure_domain())
                .map(str::to_string),
            control_plane: self
                .owner
                .as_ref()
                .is_some_and(|o| is_control_plane(&o.metadata)),
            has_vm: self.facts.vmid.is_some(),
        })
    }

    /// The other ProxmoxMachines of this machine's CAPI cluster: from the
    /// store, each overlaid with what this process last wrote for it (the
    /// store may not show a placement made a moment ago), else one LIST.
    async fn cluster_machines(&self) -> Result<Vec<Arc<ProxmoxMachine>>, Error> {
        let Some(cluster) = self.machine.labels().get(CLUSTER_NAME_LABEL) else {
            return Ok(Vec::new());
        };
        let all = match self.ctx.stores.as_ref() {
            Some(st) => st
                .cluster_machines(&self.ns, cluster)
                .into_iter()
                .map(|m| self.latest_known(m))
                .collect(),
            None => {
                let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}"));
                self.api
                    .list(&lp)
                    .await?
                    .items
                    .into_iter()
                    .map(Arc::new)
                    .collect::<Vec<_>>()
            }
        };
        Ok(all
            .into_iter()
            .filter(|m| m.uid().as_deref() != Some(self.uid.as_str()))
            .collect())
    }

    /// `m` as stored, unless this process wrote it since (the store lags
    /// our own writes): then the object that write returned.
    fn latest_known(&self, m: Arc<ProxmoxMachine>) -> Arc<ProxmoxMachine> {
        let written = m.uid().and_then(|uid| self.rt.written(&uid));
        match freshness::classify(m.resource_version().as_deref(), written.as_ref()) {
            Freshness::Stale => match written.and_then(|w| w.object) {
                Some(w) => Arc::new(w),
                None => m,
            },
            _ => m,
        }
    }

    async fn choose_instance(&mut self) -> Result<Flow, Error> {
        let Some(pc) = self.pc.clone() else {
            return Ok(stop(
                "WaitingForClusterInfrastructure",
                "waiting for the ProxmoxCluster",
                Until::Change,
            ));
        };
        let cluster_key = format!(
            "{}/{}",
            self.ns,
            self.machine
                .labels()
                .get(CLUSTER_NAME_LABEL)
                .cloned()
                .unwrap_or_default()
        );
        let lock = self.rt.placement_lock(&cluster_key);
        let _guard = lock.lock().await;
        let others = self.cluster_machines().await?;
        let mut counts = std::collections::BTreeMap::new();
        for m in &others {
            if let Some(i) = &m.spec.instance {
                *counts.entry(i.clone()).or_insert(0u32) += 1;
            }
        }
        let Some(mut input) = self.placement_input(counts, Default::default()) else {
            return Ok(stop(
                "WaitingForClusterInfrastructure",
                "waiting for the ProxmoxCluster",
                Until::Change,
            ));
        };
        // Free memory only breaks ties: read it only for tied instances.
        for name in placement::tied(&input) {
            if let Some(e) = instances::effective_instance(&pc.spec, &name)
                && let Some(f) = self.free_memory(&pc, &e).await
                && let Some(i) = input.instances.iter_mut().find(|i| i.name == name)
            {
                i.free_memory = Some(f);
            }
        }
        match placement::choose(&input) {
            Ok(choice) => {
                let reason = match choice.reason {
                    placement::Reason::Pinned => "Pinned",
                    placement::Reason::FailureDomain => "FailureDomain",
                    placement::Reason::Policy => "Policy",
                };
                self.merge_patch(serde_json::json!({ "spec": { "instance": choice.instance } }))
                    .await?;
                info!(instance = %choice.instance, reason, "instance chosen");
                self.instance_cond = Some(Desired::new(
                    conditions::INSTANCE_SELECTED,
                    Status::True,
                    reason,
                    format!("instance {}", choice.instance),
                ));
                self.facts.instance = Some(choice.instance.clone());
                self.effective = instances::effective_instance(&pc.spec, &choice.instance);
                let bridge = self
                    .effective
                    .as_ref()
                    .and_then(|e| e.network.bridge.clone());
                self.facts.desired = vmconfig::desired(
                    &self.machine.spec,
                    &self.name,
                    &self.facts.marker,
                    bridge.as_deref(),
                )
                .map_err(|e| e.to_string());
                self.event(
                    EventKind::Normal,
                    "InstanceSelected",
                    format!("placed in instance {} ({reason})", choice.instance),
                )
                .await;
                Ok(Flow::Continue)
            }
            Err(e) => {
                self.instance_cond = Some(Desired::new(
                    conditions::INSTANCE_SELECTED,
                    Status::False,
                    e.reason(),
                    e.to_string(),
                ));
                let until = match e {
                    placement::PlacementError::NotReady { .. }
                    | placement::PlacementError::NoneEligible(_) => Until::Backoff,
                    _ => Until::Change,
                };
                Ok(stop(e.reason(), e.to_string(), until))
            }
        }
    }

    /// Free memory over an instance's allowed online nodes (placement tie breaker).
    async fn free_memory(&self, pc: &ProxmoxCluster, e: &EffectiveInstance) -> Option<i128> {
        let inst = self
            .ctx
            .shared
            .clients
            .get(&self.ctx.shared.kube, pc, e.name())
            .await
            .ok()?;
        let snap = self
            .rt
            .resources
            .get(&inst.identity, inst.api.as_ref(), None)
            .await
            .ok()?;
        let adj = e.scheduler_hints.memory_adjustment.unwrap_or(100).max(1);
        let nodes: Vec<_> = snap
            .nodes()
            .into_iter()
            .filter(|n| n.online && (e.spec.nodes.is_empty() || e.spec.nodes.contains(&n.name)))
            .collect();
        let listed: std::collections::BTreeSet<u32> = snap
            .loads()
            .iter()
            .filter(|l| l.maxmem.is_some())
            .map(|l| l.vmid)
            .collect();
        let pending = self.rt.pending(&inst.identity, &listed);
        let m = scheduler::memory_by_node(&nodes, &snap.loads(), &pending, adj);
        Some(m.values().map(|n| n.free).sum())
    }

    fn claim_pools(&self) -> (InstancePool, InstancePool) {
        let (Some(pc), Some(inst), Some(eff)) = (&self.pc, &self.facts.instance, &self.effective)
        else {
            return (InstancePool::None, InstancePool::None);
        };
        let pool = |family: IpFamily| match eff.network.pool(family) {
            None => InstancePool::None,
            Some(src) => {
                let metric = match src {
                    PoolSource::Instance(c) | PoolSource::Cluster(c) => c.metric,
                };
                match instances::ip_pool_for(pc, inst, family) {
                    Some(p) => InstancePool::Recorded(
                        PoolRef {
                            api_group: p.api_group.clone(),
                            kind: p.kind.clone(),
                            name: p.name.clone(),
                        },
                        metric,
                    ),
                    None => InstancePool::NotRecorded,
                }
            }
        };
        (pool(IpFamily::V4), pool(IpFamily::V6))
    }

    async fn observe_claims(&mut self) -> Result<Flow, Error> {
        if self.facts.deleting {
            let owned = claims::owned(&self.ctx.shared.kube, self.machine).await?;
            let deleting = owned
                .iter()
                .filter(|c| c.metadata.deletion_timestamp.is_some())
                .count();
            self.facts.claim_objects = Some((owned.len(), deleting));
            return Ok(Flow::Continue);
        }
        let (v4, v6) = self.claim_pools();
        let dns = self
            .effective
            .as_ref()
            .map(|e| e.network.dns_servers.clone())
            .unwrap_or_default();
        let listed = self
            .machine
            .spec
            .network
            .as_ref()
            .map(|n| n.network_devices.clone())
            .unwrap_or_default();
        match claims::plan(&self.name, &listed, &v4, &v6, &dns) {
            Err(why) => {
                self.facts.claims = Some(ClaimsFact::NoPool(why));
                self.claim_plan = None;
            }
            Ok((wanted, plans)) => {
                let patience = self.rt.scaled(self.rt.options.claim_patience);
                let (fact, wanted, states) = claims::observe(
                    &self.ctx.shared.kube,
                    &self.ns,
                    &wanted,
                    Timestamp::now(),
                    patience,
                )
                .await?;
                self.facts.claims = Some(fact);
                self.claim_plan = Some((wanted, plans, states));
            }
        }
        Ok(Flow::Continue)
    }

    async fn ensure_claims(&mut self) -> Result<Flow, Error> {
        let Some((wanted, _, states)) = &self.claim_plan else {
            self.facts.claims = None;
            return Ok(Flow::Continue);
        };
        let cluster = self
            .machine
            .labels()
            .get(CLUSTER_NAME_LABEL)
            .cloned()
            .unwrap_or_default();
        let created = claims::ensure(
            &self.ctx.shared.kube,
            self.machine,
            &cluster,
            wanted,
            states,
        )
        .await?;
        if !created.is_empty() {
            self.event(
                EventKind::Normal,
                "IPAddressClaimsCreated",
                format!("created IP address claims {}", created.join(", ")),
            )
            .await;
        }
        self.facts.claims = None;
        Ok(Flow::Continue)
    }

    async fn release_claims(&mut self) -> Result<Flow, Error> {
        let owned = claims::owned(&self.ctx.shared.kube, self.machine).await?;
        let n = claims::release(&self.ctx.shared.kube, self.machine, &owned).await?;
        if n > 0 {
            self.event(
                EventKind::Normal,
                "IPAddressClaimsReleased",
                format!("released {n} IP address claim(s); the VM is gone"),
            )
            .await;
        }
        self.facts.claim_objects = None;
        Ok(Flow::Continue)
    }

    // ---- Proxmox observations ----------------------------------------------

    fn vm_node(&self) -> Option<String> {
        let memo = self.rt.memo(&self.uid);
        match (&memo.config, self.facts.vmid) {
            (Some((v, node, _)), Some(vmid)) if *v == vmid => Some(node.clone()),
            _ => self.status.proxmox_node.clone(),
        }
    }

    async fn observe_task(&mut self) -> Flow {
        let Some(text) = self.status.task_ref.clone() else {
            return Flow::Continue;
        };
        let Ok(upid) = Upid::parse(&text) else {
            self.status.task_ref = None;
            return Flow::Continue;
        };
        let op = Operation::from_worker(upid.worker_type()).unwrap_or(Operation::Configure);
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("InstanceUnreachable", msg, Until::Backoff),
        };
        let memo = self.rt.memo(&self.uid);
        // A node's task list already showed the task ended (another
        // machine's poll read it, and woke this one).
        let known_end = self.rt.node_tasks.ended(&inst.identity, &upid);
        // Woken before the poll this reconcile asked for (a watched object
        // changed): the task is not due, and asking Proxmox now would only
        // cost a call. Its end is read at the requeue.
        if let (Some((u, _, _)), Some(due)) = (&memo.task, memo.task_poll_at)
            && known_end.is_none()
            && *u == text
            && !self.facts.deleting
            && Instant::now() + self.rt.scaled(self.rt.options.poll_floor) < due
        {
            self.facts.task = Some(TaskFact::Running(op));
            return Flow::Continue;
        }
        if memo.task.as_ref().is_none_or(|(u, _, _)| *u != text) {
            // After a restart: count from now.
            self.rt.update_memo(&self.uid, |m| {
                m.task = Some((text.clone(), Instant::now(), 0));
                m.task_seen_running = None;
                m.task_poll_at = None;
                m.task_vmid = None;
            });
            if op == Operation::Clone
                && let Ok(source) = upid.id().parse::<u32>()
            {
                self.rt.clone_slots.adopt(&inst.identity, source, &self.uid);
                self.rt.update_memo(&self.uid, |m| {
                    m.clone_template = Some((inst.identity.clone(), source))
                });
            }
        }
        let memo = self.rt.memo(&self.uid);
        let fact = match self.task_result(&inst, &upid, &memo, known_end).await {
            Ok(outcome) => {
                if outcome.warnings > 0 {
                    self.event(
                        EventKind::Normal,
                        "TaskWarnings",
                        format!("{} task finished with {}", op.as_str(), outcome.exitstatus),
                    )
                    .await;
                }
                TaskFact::Succeeded(op)
            }
            Err(PveError::TaskPending { .. }) => {
                self.rt.update_memo(&self.uid, |m| {
                    if let Some((_, at, polls)) = &mut m.task {
                        let elapsed = at.elapsed();
                        m.task_seen_running = Some(elapsed);
                        if elapsed >= self.rt.timer.expected(&inst.identity, op) {
                            *polls += 1;
                        }
                    }
                });
                TaskFact::Running(op)
            }
            Err(PveError::TaskFailed {
                exitstatus, kind, ..
            }) => {
                if op == Operation::Start
                    && kind == TaskFailureKind::Conflict(pve_client::ConflictKind::AlreadyRunning)
                {
                    TaskFact::Succeeded(op)
                } else {
                    TaskFact::Failed {
                        op,
                        kind,
                        message: exitstatus,
                    }
                }
            }
            Err(PveError::NotFound { .. }) => TaskFact::Lost(op),
            Err(e) => {
                return stop(
                    "InstanceUnreachable",
                    format!("cannot read task {text} of instance {}: {e}", inst.name),
                    Until::Backoff,
                );
            }
        };
        if !matches!(fact, TaskFact::Running(_)) {
            self.rt.node_tasks.forget(&inst.identity, &upid);
            // Learn only from tasks whose start this process saw.
            let took = memo
                .task
                .as_ref()
                .filter(|(u, _, _)| *u == text)
                .map(|(_, at, _)| at.elapsed());
            if let (TaskFact::Succeeded(op), Some(took)) = (&fact, took) {
                let expected = self.rt.timer.expected(&inst.identity, *op);
                let seen = memo.task_seen_running;
                self.rt
                    .timer
                    .observe(&inst.identity, *op, observation(took, seen, expected));
            }
            if op == Operation::Clone {
                self.rt.clone_slots.release(&self.uid);
                if let Ok(source) = upid.id().parse::<u32>() {
                    self.clone_outcome(&inst.identity, source, &fact);
                }
            }
        }
        self.facts.task = Some(fact);
        Flow::Continue
    }

    /// How task `upid` stands: its end as a node's task list showed it
    /// (`known_end`, or one list read shared by every task of the node,
    /// see [`node_tasks`](super::node_tasks)), else its own status read —
    /// for a task the list does not show, when the list cannot be read, and
    /// once the task runs [`DIRECT_AFTER_LATE_POLLS`] polls past its
    /// expected end (the status is computed from the node's live process
    /// table; the list comes from a file a crashed worker may leave stale).
    ///
    /// # Errors
    /// As `wait_task` with a zero deadline: `TaskPending` while it runs,
    /// `TaskFailed`, `NotFound` (the node forgot it), transport errors.
    async fn task_result(
        &self,
        inst: &Instance,
        upid: &Upid,
        memo: &super::runtime::Memo,
        known_end: Option<String>,
    ) -> Result<pve_client::TaskOutcome, PveError> {
        let late = memo.task.as_ref().map_or(0, |(_, _, polls)| *polls);
        let exit = match known_end {
            Some(e) => Some(e),
            None if late >= DIRECT_AFTER_LATE_POLLS => None,
            None => {
                let due = memo.task_poll_at.unwrap_or_else(Instant::now);
                let me = ObjectRef::new(&self.name).within(&self.ns);
                match self
                    .rt
                    .node_tasks
                    .status(inst.api.as_ref(), &inst.identity, upid, due, me)
                    .await
                {
                    Ok(Answer::Ended(e)) => Some(e),
                    Ok(Answer::Running) => {
                        return Err(PveError::TaskPending {
                            instance: inst.api.instance().to_string(),
                            upid: upid.clone(),
                            waited: Duration::ZERO,
                        });
                    }
                    Ok(Answer::Unlisted) => None,
                    Err(e) => {
                        debug!(error = %e, node = upid.node().as_str(), "the node's task list cannot be read; reading the task's status");
                        None
                    }
                }
            }
        };
        match exit {
            Some(e) => inst.api.task_ended(upid, e).await,
            None => {
                let once = WaitOptions {
                    deadline: Duration::ZERO,
                    initial_interval: Duration::from_millis(1),
                    max_interval: Duration::from_millis(1),
                };
                inst.api.wait_task(upid, once).await
            }
        }
    }

    /// Adapts the clone window of `template` to how its clone ended:
    /// one more slot after a success, half after a lock timeout.
    fn clone_outcome(&self, identity: &str, template: u32, fact: &TaskFact) {
        match fact {
            TaskFact::Succeeded(_) => self.rt.clone_slots.succeeded(identity, template),
            TaskFact::Failed { kind, .. } if kind.is_retryable() => {
                let window = self.rt.clone_slots.congested(identity, template);
                debug!(
                    template,
                    window, "clone failed on a lock; clone window halved"
                );
            }
            _ => {}
        }
    }

    /// A task this process issued for the machine's VMID and has not
    /// accounted for yet wins over what the object says (absent or an
    /// older UPID): the object may predate the write that recorded it.
    fn adopt_own_task(&mut self) {
        let memo = self.rt.memo(&self.uid);
        let (Some((upid, _, _)), Some(vmid)) = (memo.task, memo.task_vmid) else {
            return;
        };
        if self.facts.vmid != Some(vmid) || self.status.task_ref.as_deref() == Some(upid.as_str()) {
            return;
        }
        debug!(
            %upid,
            recorded = self.status.task_ref.as_deref().unwrap_or(""),
            "the object does not show the task this process issued; observing ours"
        );
        self.status.task_ref = Some(upid);
    }

    /// The task ended and was accounted for: forget it, remember success.
    fn task_done(&mut self) {
        let fact = self.facts.task.take();
        self.clear_task();
        let vmid = self.facts.vmid.unwrap_or_default();
        let now = Instant::now();
        match fact {
            Some(TaskFact::Succeeded(op)) => {
                self.facts.last_success = Some(op);
                self.rt.update_memo(&self.uid, |m| {
                    m.last_success = Some((vmid, op));
                    match op {
                        Operation::Start => m.started_at = Some(now),
                        Operation::Upload => m.iso_uploaded = m.iso_pending.take(),
                        Operation::Configure
                        | Operation::Resize
                        | Operation::Shutdown
                        | Operation::Stop => {}
                        Operation::DeleteVolume => m.iso_uploaded = None,
                        _ => {
                            m.config = None;
                            m.fresh_after = Some(now);
                        }
                    }
                });
                if op == Operation::Upload {
                    self.facts.iso_uploaded = true;
                }
                if op == Operation::Start {
                    self.status.vm_status = Some("running".into());
                }
            }
            Some(TaskFact::Lost(_)) | Some(TaskFact::Failed { .. }) => {
                self.rt.update_memo(&self.uid, |m| {
                    m.config = None;
                    m.iso_pending = None;
                    m.fresh_after = Some(now);
                });
            }
            _ => {}
        }
        // Our view of the VM predates the task's end.
        self.facts.vm = None;
        self.facts.agent = None;
    }

    fn clear_task(&mut self) {
        self.status.task_ref = None;
        self.rt.update_memo(&self.uid, |m| {
            m.task = None;
            m.task_seen_running = None;
            m.task_poll_at = None;
            m.task_vmid = None;
        });
    }

    fn record_task(&mut self, upid: &Upid) {
        self.status.task_ref = Some(upid.as_str().to_string());
        let text = upid.as_str().to_string();
        let vmid = self.facts.vmid;
        self.rt.update_memo(&self.uid, |m| {
            m.task = Some((text, Instant::now(), 0));
            m.task_seen_running = None;
            m.task_poll_at = None;
            m.task_vmid = vmid;
        });
    }

    fn task_started(
        &mut self,
        upid: &Upid,
        op: Operation,
        reason: &'static str,
        note: String,
    ) -> Flow {
        self.record_task(upid);
        self.facts.task = Some(TaskFact::Running(op));
        let identity = self.identity().unwrap_or_default();
        let floor = self
            .rt
            .scaled(self.rt.options.poll_floor)
            .max(Duration::from_millis(5));
        let expected = self.rt.timer.expected(&identity, op);
        let poll = next_poll(expected, Duration::ZERO, 0, floor);
        let poll = on_grid(Instant::now(), poll, expected.mul_f64(GRID));
        info!(%upid, op = op.as_str(), "task started");
        polled(reason, note, poll)
    }

    fn classify(&self, tags: &pve_client::options::Tags, description: Option<&str>) -> Ownership {
        self.facts.marker.ownership(tags, description)
    }

    async fn observe_vm(&mut self) -> Flow {
        let Some(vmid) = self.facts.vmid else {
            self.facts.vm = Some(VmFact::Absent);
            return Flow::Continue;
        };
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => {
                self.facts.vm = Some(VmFact::Unreachable(msg));
                return Flow::Continue;
            }
        };
        let Ok(id) = VmId::new(vmid) else {
            self.facts.vm = Some(VmFact::Absent);
            return Flow::Continue;
        };
        let memo = self.rt.memo(&self.uid);
        // Started by us: remembered, or recorded in status (survives restarts).
        let started = matches!(memo.last_success, Some((v, Operation::Start)) if v == vmid)
            || self.status.vm_status.as_deref() == Some("running");
        // Creation: our own last view of the config stays valid while only
        // our steps change the VM (each write carries the digest).
        if !self.facts.deleting
            && let Some((v, node, cfg)) = memo.config.clone()
            && v == vmid
        {
            self.facts.vm = Some(self.view_from_config(node, cfg, started.then_some(true)));
            return Flow::Continue;
        }
        // Deletion right after our shutdown/stop: the VM is ours and stopped
        // where we left it; no listing needed.
        if self.facts.deleting
            && matches!(
                self.facts.last_success,
                Some(Operation::Shutdown | Operation::Stop)
            )
            && let Some(node) = self.status.proxmox_node.clone()
        {
            self.facts.vm = Some(VmFact::Ours(VmView {
                node,
                running: Some(false),
                lock: None,
                template: false,
                tags: pve_client::options::Tags::new(),
                config: None,
            }));
            return Flow::Continue;
        }
        // Creation: read the config on the node we know, no listing needed.
        if !self.facts.deleting
            && let Some(node) = self.vm_node()
            && let Ok(n) = NodeName::new(node.clone())
        {
            match inst.api.vm_config(&n, id).await {
                Ok(cfg) => {
                    self.facts.vm = Some(self.view_from_config(node, cfg, started.then_some(true)));
                    return Flow::Continue;
                }
                Err(PveError::NotFound { .. }) => {}
                Err(e) if unreachable(&e) => {
                    self.facts.vm =
                        Some(VmFact::Unreachable(format!("instance {}: {e}", inst.name)));
                    return Flow::Continue;
                }
                Err(e) => {
                    self.facts.vm =
                        Some(VmFact::Unreachable(format!("instance {}: {e}", inst.name)));
                    return Flow::Continue;
                }
            }
        }
        let snap = match self
            .rt
            .resources
            .get(&inst.identity, inst.api.as_ref(), memo.fresh_after)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                self.facts.vm = Some(VmFact::Unreachable(format!("instance {}: {e}", inst.name)));
                return Flow::Continue;
            }
        };
        let Some(r) = snap.vm(vmid) else {
            self.facts.vm = Some(VmFact::Absent);
            return Flow::Continue;
        };
        let node = r
            .node
            .as_ref()
            .map(|n| n.as_str().to_string())
            .unwrap_or_default();
        let tags = r.tags().unwrap_or_default();
        if self.classify(&tags, None) == Ownership::Ours {
            self.facts.vm = Some(VmFact::Ours(VmView {
                node,
                running: if started {
                    Some(true)
                } else {
                    match r.status.as_deref() {
                        Some("running") => Some(true),
                        Some("stopped") => Some(false),
                        _ => None,
                    }
                },
                lock: r.lock.clone(),
                template: r.template,
                tags,
                config: None,
            }));
            return Flow::Continue;
        }
        // Not ours by tag: the description decides (set by our clone).
        let Ok(n) = NodeName::new(node.clone()) else {
            self.facts.vm = Some(VmFact::Foreign(format!("VM {vmid} on an unnamed node")));
            return Flow::Continue;
        };
        match inst.api.vm_config(&n, id).await {
            Ok(cfg) => {
                let running = match r.status.as_deref() {
                    Some("running") => Some(true),
                    Some("stopped") => Some(false),
                    _ => None,
                };
                self.facts.vm = Some(self.view_from_config(
                    node,
                    cfg,
                    if started { Some(true) } else { running },
                ));
            }
            Err(PveError::NotFound { .. }) => self.facts.vm = Some(VmFact::Absent),
            Err(e) => {
                self.facts.vm = Some(VmFact::Unreachable(format!("instance {}: {e}", inst.name)))
            }
        }
        Flow::Continue
    }

    fn view_from_config(&self, node: String, cfg: VmConfig, running: Option<bool>) -> VmFact {
        match self.classify(&cfg.tags, cfg.description.as_deref()) {
            Ownership::Ours => {
                if let Some(vmid) = self.facts.vmid {
                    let c = cfg.clone();
                    let n = node.clone();
                    self.rt
                        .update_memo(&self.uid, |m| m.config = Some((vmid, n, c)));
                }
                VmFact::Ours(VmView {
                    node,
                    running,
                    lock: cfg.lock.clone(),
                    template: cfg.template,
                    tags: cfg.tags.clone(),
                    config: Some(cfg),
                })
            }
            Ownership::Foreign(o) => VmFact::Foreign(o),
            Ownership::Unmarked if matches!(cfg.lock, Some(VmLock::Clone | VmLock::Create)) => {
                VmFact::Busy(format!(
                    "VM {} is being created (lock {}) and shows no owner yet; waiting",
                    self.facts.vmid.unwrap_or_default(),
                    cfg.lock
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_default()
                ))
            }
            Ownership::Unmarked => VmFact::Foreign(format!(
                "VM {} carries no capmox marker{}",
                self.facts.vmid.unwrap_or_default(),
                cfg.name
                    .as_deref()
                    .map(|n| format!(" (name {n})"))
                    .unwrap_or_default()
            )),
        }
    }

    async fn observe_config(&mut self) -> Flow {
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let vmid = self.facts.vmid.unwrap_or_default();
        let memo = self.rt.memo(&self.uid);
        if let Some((v, node, cfg)) = memo.config
            && v == vmid
            && node == view.node
        {
            self.facts.vm = Some(VmFact::Ours(VmView {
                config: Some(cfg),
                ..view
            }));
            return Flow::Continue;
        }
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => {
                self.facts.vm = Some(VmFact::Unreachable(msg));
                return Flow::Continue;
            }
        };
        let (Ok(n), Ok(id)) = (NodeName::new(view.node.clone()), VmId::new(vmid)) else {
            self.facts.vm = Some(VmFact::Absent);
            return Flow::Continue;
        };
        match inst.api.vm_config(&n, id).await {
            Ok(cfg) => {
                self.facts.vm = Some(self.view_from_config(view.node.clone(), cfg, view.running))
            }
            Err(PveError::NotFound { .. }) => {
                // Moved or gone: look it up again in a fresh listing.
                self.rt
                    .update_memo(&self.uid, |m| m.fresh_after = Some(Instant::now()));
                self.status.proxmox_node = None;
                self.facts.vm = None;
                return stop(
                    "WaitingForVirtualMachine",
                    format!(
                        "VM {vmid} is not on node {} any more; looking it up",
                        view.node
                    ),
                    Until::Poll,
                );
            }
            Err(e) => {
                self.facts.vm = Some(VmFact::Unreachable(format!("instance {}: {e}", inst.name)))
            }
        }
        Flow::Continue
    }

    async fn observe_agent(&mut self) -> Flow {
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => {
                self.facts.vm = Some(VmFact::Unreachable(msg));
                return Flow::Continue;
            }
        };
        let memo = self.rt.memo(&self.uid);
        // The reconcile that reads the bootstrap check's result reuses the
        // addresses read right before the check was started.
        if let Some(c) = &memo.bootstrap
            && Some(c.vmid) == self.facts.vmid
            && c.exec.is_some()
            && let Some(devs) = &c.addresses
        {
            self.facts.agent = Some(AgentFact::Addresses(devs.clone()));
            return Flow::Continue;
        }
        let expected = self.rt.timer.expected(&inst.identity, Operation::Boot);
        if let Some(at) = memo.started_at
            && at.elapsed() < expected.mul_f64(0.9)
        {
            // Far too early: the first poll goes near the expected boot time.
            self.facts.agent = Some(AgentFact::NotYet("booting".into()));
            return Flow::Continue;
        }
        let vmid = self.facts.vmid.unwrap_or_default();
        let (Ok(n), Ok(id)) = (NodeName::new(view.node.clone()), VmId::new(vmid)) else {
            return Flow::Continue;
        };
        match inst.api.agent_network_interfaces(&n, id).await {
            Ok(ifaces) => {
                let nics = view
                    .config
                    .as_ref()
                    .map(|c| c.nets.clone())
                    .unwrap_or_default();
                let devs = addresses::from_agent(&ifaces, &nics);
                if let (Some(at), false) = (memo.started_at, devs.is_empty()) {
                    self.rt
                        .timer
                        .observe(&inst.identity, Operation::Boot, at.elapsed());
                }
                self.facts.agent = Some(AgentFact::Addresses(devs));
            }
            Err(e @ (PveError::AgentUnavailable { .. } | PveError::Conflict { .. })) => {
                self.facts.agent = Some(AgentFact::NotYet(match &e {
                    PveError::AgentUnavailable { message, .. }
                    | PveError::Conflict { message, .. } => message.clone(),
                    _ => e.to_string(),
                }));
            }
            Err(PveError::NotFound { .. }) => {
                self.facts.vm = None;
                self.status.proxmox_node = None;
                self.rt.update_memo(&self.uid, |m| m.config = None);
                return stop(
                    "WaitingForVirtualMachine",
                    format!("VM {vmid} moved; looking it up"),
                    Until::Poll,
                );
            }
            Err(e) => self.facts.agent = Some(AgentFact::NotYet(e.to_string())),
        }
        Flow::Continue
    }

    /// Whether the bootstrap finished: through the guest agent, `cat` of the
    /// sentinel file (`exec`), and one read of the result (`exec-status`)
    /// at the expected end of the `exec` — in the same reconcile when that
    /// is within `MachineOptions::agent_exec_inline_wait`, else on a
    /// requeue. QGA forgets a finished process after one read (SEMANTICS.md
    /// §17), so a finished result is read exactly once. The first check
    /// goes near the bootstrap's learned duration after the addresses
    /// appeared; after a check that does not say `success` the next one
    /// follows at the bounded cadence of [`super::timing::bootstrap_recheck`].
    /// After `MachineOptions::bootstrap_patience` the message says so; the
    /// machine is never failed for it (a MachineHealthCheck decides). The
    /// check in flight lives in memory: after a restart it is started again.
    async fn observe_bootstrap(&mut self) -> Flow {
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => {
                self.facts.vm = Some(VmFact::Unreachable(msg));
                return Flow::Continue;
            }
        };
        let vmid = self.facts.vmid.unwrap_or_default();
        let mut check = match self.rt.memo(&self.uid).bootstrap {
            Some(c) if c.vmid == vmid => c,
            _ => BootstrapCheck::new(vmid),
        };
        let flow = self
            .bootstrap_step(&inst, &view.node, vmid, &mut check)
            .await;
        self.rt
            .update_memo(&self.uid, |m| m.bootstrap = Some(check));
        flow
    }

    async fn bootstrap_step(
        &mut self,
        inst: &Instance,
        node: &str,
        vmid: u32,
        check: &mut BootstrapCheck,
    ) -> Flow {
        if check.done {
            self.facts.bootstrap = Some(BootstrapFact::Done);
            return Flow::Continue;
        }
        let (Ok(n), Ok(id)) = (NodeName::new(node.to_string()), VmId::new(vmid)) else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let exec_expected = self.rt.timer.expected(&inst.identity, Operation::AgentExec);
        let floor = self
            .rt
            .scaled(self.rt.options.poll_floor)
            .max(Duration::from_millis(5));
        let bounds = (
            self.rt.scaled(self.rt.options.bootstrap_recheck_min),
            self.rt.scaled(self.rt.options.bootstrap_recheck_max),
        );
        if check.exec.is_none() {
            if check.next_at.is_none() && check.failed == 0 {
                // The first check lands near the learned end of the bootstrap.
                let expected = self.rt.timer.expected(&inst.identity, Operation::Bootstrap);
                check.next_at =
                    Some(check.since + expected.saturating_sub(exec_expected).min(bounds.1));
            }
            let now = Instant::now();
            if let Some(next) = check.next_at
                && now < next
            {
                return self.bootstrap_pending(check, (next - now).max(floor));
            }
            match inst.api.agent_exec(&n, id, &["cat", SENTINEL]).await {
                Ok(pid) => {
                    check.exec = Some((pid, Instant::now()));
                    check.next_at = None;
                    check.addresses = match &self.facts.agent {
                        Some(AgentFact::Addresses(devs)) => Some(devs.clone()),
                        _ => None,
                    };
                    debug!(pid, "bootstrap sentinel check started");
                }
                Err(e) => return self.bootstrap_error(&inst.identity, check, e, bounds),
            }
            // `cat` ends at once: wait for it in line (bounded), so one
            // reconcile starts and reads a check and a restart in between
            // cannot lose its result; a slower guest is read on a requeue.
            let first = next_poll(exec_expected, Duration::ZERO, 0, floor);
            let inline = self.rt.scaled(self.rt.options.agent_exec_inline_wait);
            if first > inline {
                return self.bootstrap_pending(check, first);
            }
            tokio::time::sleep(first).await;
        }
        let Some((pid, at)) = check.exec else {
            return Flow::Continue;
        };
        let elapsed = at.elapsed();
        if elapsed < exec_expected.mul_f64(0.9) {
            return self.bootstrap_pending(check, next_poll(exec_expected, elapsed, 0, floor));
        }
        match inst.api.agent_exec_status(&n, id, pid).await {
            Ok(st) if !st.exited => {
                self.bootstrap_pending(check, next_poll(exec_expected, elapsed, 1, floor))
            }
            Ok(st) => {
                check.exec = None;
                check.addresses = None;
                let out = st.out_data.as_deref().unwrap_or_default();
                if st.exitcode == Some(0) && sentinel_says_success(out) {
                    check.done = true;
                    self.rt.timer.observe(
                        &inst.identity,
                        Operation::Bootstrap,
                        check.since.elapsed(),
                    );
                    info!(pid, "bootstrap finished (the sentinel says success)");
                    self.facts.bootstrap = Some(BootstrapFact::Done);
                    return Flow::Continue;
                }
                let found = describe_exec(&st);
                debug!(pid, %found, "bootstrap not finished yet");
                self.bootstrap_failed(
                    &inst.identity,
                    check,
                    format!("{SENTINEL} does not say {SENTINEL_SUCCESS} yet ({found})"),
                    bounds,
                )
            }
            Err(e) => self.bootstrap_error(&inst.identity, check, e, bounds),
        }
    }

    /// A check did not say `success`: remember what it found, schedule the next.
    fn bootstrap_failed(
        &mut self,
        identity: &str,
        check: &mut BootstrapCheck,
        found: String,
        (min, max): (Duration, Duration),
    ) -> Flow {
        check.failed = check.failed.saturating_add(1);
        check.last = Some(found);
        let elapsed = check.since.elapsed();
        let wait = super::timing::bootstrap_recheck(
            self.rt.timer.expected(identity, Operation::Bootstrap),
            elapsed,
            check.failed,
            min,
            max,
        );
        check.next_at = Some(Instant::now() + wait);
        self.bootstrap_pending(check, wait)
    }

    fn bootstrap_error(
        &mut self,
        identity: &str,
        check: &mut BootstrapCheck,
        e: PveError,
        bounds: (Duration, Duration),
    ) -> Flow {
        check.exec = None;
        check.addresses = None;
        match e {
            PveError::NotFound { .. } => {
                self.facts.vm = None;
                self.status.proxmox_node = None;
                self.rt.update_memo(&self.uid, |m| m.config = None);
                stop(
                    "WaitingForVirtualMachine",
                    format!(
                        "VM {} moved; looking it up",
                        self.facts.vmid.unwrap_or_default()
                    ),
                    Until::Poll,
                )
            }
            PveError::PermissionDenied { message, .. } => {
                self.facts.bootstrap = Some(BootstrapFact::Blocked(format!(
                    "cannot check whether the bootstrap finished: the guest agent's exec was refused ({message}); the token needs VM.GuestAgent.Unrestricted (PVE 9) or VM.Monitor (PVE 8) on the VM, or set checks.skipCloudInitStatus"
                )));
                Flow::Continue
            }
            PveError::AgentUnavailable { message, .. } | PveError::Conflict { message, .. } => self
                .bootstrap_failed(
                    identity,
                    check,
                    format!("the guest agent did not run the check: {message}"),
                    bounds,
                ),
            e => self.bootstrap_failed(identity, check, format!("the check failed: {e}"), bounds),
        }
    }

    /// Still waiting: the condition message (stable between checks) and
    /// when to look again.
    fn bootstrap_pending(&mut self, check: &BootstrapCheck, poll: Duration) -> Flow {
        let base = match &check.last {
            Some(found) => format!("waiting for the bootstrap to finish: {found}"),
            None => format!(
                "waiting for the bootstrap to finish (checking {SENTINEL} through the guest agent)"
            ),
        };
        let patience = self.rt.scaled(self.rt.options.bootstrap_patience);
        let message = if check.since.elapsed() >= patience {
            format!(
                "no bootstrap success after more than {}: {base}; look at cloud-init in the guest (/var/log/cloud-init-output.log). The machine is not marked failed: a MachineHealthCheck decides",
                human(patience)
            )
        } else {
            base
        };
        self.bootstrap_poll = Some(poll);
        self.facts.bootstrap = Some(BootstrapFact::Pending(message));
        Flow::Continue
    }

    // ---- Proxmox steps -----------------------------------------------------

    async fn clone_vm(&mut self) -> Result<Flow, Error> {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return Ok(stop("InstanceUnreachable", msg, Until::Backoff)),
        };
        let Some(eff) = self.effective.clone() else {
            return Ok(stop(
                "UnknownInstance",
                "the instance is not in the ProxmoxCluster",
                Until::Change,
            ));
        };
        let snap = match self
            .rt
            .resources
            .get(&inst.identity, inst.api.as_ref(), None)
            .await
        {
            Ok(s) => s,
            Err(e) => {
                return Ok(stop(
                    "InstanceUnreachable",
                    format!("instance {}: {e}", inst.name),
                    Until::Backoff,
                ));
            }
        };
        let request =
            match template::request_for(&self.machine.spec, &inst.name, eff.spec.template.as_ref())
            {
                Ok(r) => r,
                Err(e) => return Ok(stop("TemplateNotFound", e.to_string(), Until::Change)),
            };
        let resolved = match template::resolve(&request, &inst.name, &snap.template_candidates()) {
            Ok(r) => r,
            Err(e) => {
                let reason = match e {
                    TemplateError::Ambiguous { .. } => "TemplateAmbiguous",
                    _ => "TemplateNotFound",
                };
                return Ok(stop(reason, e.to_string(), Until::Backoff));
            }
        };
        // The template's config: disk storages (locality) and memory.
        let first = resolved.all()[0].clone();
        let tcfg = match self.rt.template_config(&inst.identity, first.vmid) {
            Some(c) => c,
            None => {
                let (Ok(n), Ok(id)) = (NodeName::new(first.node.clone()), VmId::new(first.vmid))
                else {
                    return Ok(stop(
                        "TemplateNotFound",
                        format!("template {} has an invalid node", first.vmid),
                        Until::Change,
                    ));
                };
                match inst.api.vm_config(&n, id).await {
                    Ok(c) => {
                        self.rt
                            .cache_template(&inst.identity, first.vmid, c.clone());
                        c
                    }
                    Err(e) => {
                        return Ok(stop(
                            "TemplateNotFound",
                            format!("cannot read template {}: {e}", first.vmid),
                            Until::Backoff,
                        ));
                    }
                }
            }
        };
        let locality = locality(
            &resolved,
            &tcfg,
            self.machine.spec.storage.as_deref(),
            &snap,
        );
        let memory_mib = self
            .machine
            .spec
            .memory_mib
            .map(u64::from)
            .or(tcfg.memory_mib)
            .unwrap_or(512);
        let others = self.cluster_machines().await?;
        let mut per_node = std::collections::BTreeMap::new();
        for m in others
            .iter()
            .filter(|m| m.spec.instance.as_deref() == Some(inst.name.as_str()))
        {
            if let Some(n) = m.status.as_ref().and_then(|s| s.proxmox_node.clone()) {
                *per_node.entry(n).or_insert(0u32) += 1;
            }
        }
        let sched = Request {
            memory: memory_mib << 20,
            instance_nodes: eff.spec.nodes.clone(),
            machine_nodes: self.machine.spec.allowed_nodes.clone(),
            target: self.machine.spec.target.clone(),
            memory_adjustment: eff.scheduler_hints.memory_adjustment.unwrap_or(100),
            cluster_machines: per_node,
            locality,
        };
        let loads = snap.loads();
        let listed: std::collections::BTreeSet<u32> = loads
            .iter()
            .filter(|l| l.maxmem.is_some())
            .map(|l| l.vmid)
            .collect();
        let pending = self.rt.pending(&inst.identity, &listed);
        let placement = match scheduler::choose_node(&sched, &snap.nodes(), &loads, &pending) {
            Ok(p) => p,
            Err(e) => {
                let reason = match e {
                    scheduler::ScheduleError::InsufficientMemory { .. } => "InsufficientMemory",
                    _ => "NoNodeAvailable",
                };
                return Ok(stop(reason, e.to_string(), Until::Backoff));
            }
        };
        let Some(source) = resolved.for_node(&placement.node).cloned() else {
            return Ok(stop(
                "TemplateNotFound",
                format!("no template replica on node {}", placement.node),
                Until::Backoff,
            ));
        };
        let me = ObjectRef::new(&self.name).within(&self.ns);
        if let SlotGrant::InLine { running, ahead } =
            self.rt
                .clone_slots
                .acquire(&inst.identity, source.vmid, &self.uid, &me)
        {
            return Ok(polled(
                "Cloning",
                format!(
                    "waiting for a clone slot of template {} on {}: {running} clones running, \
                     {ahead} machines ahead in line",
                    source.vmid, inst.name
                ),
                self.rt.scaled(self.rt.options.slot_recheck),
            ));
        }
        // VMID: reserved and written to spec before the clone is issued.
        // A VMID written earlier is held again (after a restart) — unless
        // another machine of this process holds it: then it is not ours to
        // use and a new one is reserved.
        let held = match self.facts.vmid {
            Some(v) => match self.rt.vmids.hold(&inst.identity, v, &self.uid) {
                Ok(()) => Some(v),
                Err(e) => {
                    warn!(error = %e, "VMID in spec is reserved by another machine; reserving another");
                    None
                }
            },
            None => None,
        };
        let vmid = match held {
            Some(v) => v,
            None => {
                // Live VMIDs, plus those of this cluster's machines in the same
                // Proxmox cluster (same identity) that may not have a VM yet.
                // VMIDs of other Proxmox clusters do not matter (B03).
                let mut taken = snap.live_vmids();
                let mut same: std::collections::BTreeMap<String, bool> =
                    std::collections::BTreeMap::new();
                for m in &others {
                    let (Some(v), Some(i)) = (m.spec.virtual_machine_id, m.spec.instance.clone())
                    else {
                        continue;
                    };
                    if !same.contains_key(&i) {
                        let shares = if i == inst.name {
                            true
                        } else if let Some(pc) = &self.pc {
                            self.ctx
                                .shared
                                .clients
                                .get(&self.ctx.shared.kube, pc, &i)
                                .await
                                .is_ok_and(|o| o.identity == inst.identity)
                        } else {
                            false
                        };
                        same.insert(i.clone(), shares);
                    }
                    if same.get(&i).copied().unwrap_or(false) {
                        taken.insert(v);
                    }
                }
                let range =
                    vmid::effective_range(self.machine.spec.vm_id_range, eff.spec.vm_id_range);
                let v = match self
                    .rt
                    .vmids
                    .reserve(&inst.identity, range, &taken, &self.uid)
                {
                    Ok(v) => v,
                    Err(e) => {
                        self.rt.clone_slots.release(&self.uid);
                        return Ok(stop("VMIDRangeExhausted", e.to_string(), Until::Backoff));
                    }
                };
                if let Err(e) = self
                    .merge_patch(serde_json::json!({ "spec": { "virtualMachineID": v } }))
                    .await
                {
                    self.rt.vmids.release(&inst.identity, v, &self.uid);
                    self.rt.clone_slots.release(&self.uid);
                    return Err(e);
                }
                self.facts.vmid = Some(v);
                self.facts.iso_file = Some(iso_file(v, &self.uid));
                v
            }
        };
        let (Ok(src_node), Ok(src_id), Ok(new_id)) = (
            NodeName::new(source.node.clone()),
            VmId::new(source.vmid),
            VmId::new(vmid),
        ) else {
            self.rt.clone_slots.release(&self.uid);
            return Ok(stop("CloneFailed", "invalid node or VMID", Until::Change));
        };
        let mut req = CloneRequest::new(new_id)
            .name(self.name.clone())
            .full(self.machine.spec.full.unwrap_or(true))
            .description(
                self.facts
                    .marker
                    .description(self.machine.spec.description.as_deref()),
            );
        if placement.node != source.node {
            match NodeName::new(placement.node.clone()) {
                Ok(t) => req = req.target(t),
                Err(e) => return Ok(stop("CloneFailed", e.to_string(), Until::Change)),
            }
        }
        if let Some(s) = &self.machine.spec.storage {
            match StorageId::new(s.clone()) {
                Ok(s) => req = req.storage(s),
                Err(e) => return Ok(stop("InvalidSpec", e.to_string(), Until::Change)),
            }
        }
        if let Some(f) = self.machine.spec.format {
            req = req.format(match f {
                crate::api::machine::DiskFormat::Raw => {
                    pve_client::api::qemu::clone::DiskFormat::Raw
                }
                crate::api::machine::DiskFormat::Qcow2 => {
                    pve_client::api::qemu::clone::DiskFormat::Qcow2
                }
                crate::api::machine::DiskFormat::Vmdk => {
                    pve_client::api::qemu::clone::DiskFormat::Vmdk
                }
            });
        }
        if let Some(p) = &self.machine.spec.pool {
            match pve_client::PoolId::new(p.clone()) {
                Ok(p) => req = req.pool(p),
                Err(e) => return Ok(stop("InvalidSpec", e.to_string(), Until::Change)),
            }
        }
        if let Some(s) = &self.machine.spec.snap_name {
            req = req.snapname(s.clone());
        }
        match inst.api.clone_vm(&src_node, src_id, &req).await {
            Ok(upid) => {
                self.rt.add_pending(
                    &inst.identity,
                    scheduler::PendingVm {
                        vmid,
                        node: placement.node.clone(),
                        memory: memory_mib << 20,
                    },
                );
                self.rt.update_memo(&self.uid, |m| {
                    m.clone_template = Some((inst.identity.clone(), source.vmid));
                    m.config = None;
                    m.iso_uploaded = None;
                    m.last_success = None;
                });
                self.status.proxmox_node = Some(placement.node.clone());
                let note = format!(
                    "cloning template {} on {} to VM {vmid} on {} in instance {}",
                    source.vmid, source.node, placement.node, inst.name
                );
                self.event(EventKind::Normal, "Cloning", note.clone()).await;
                Ok(self.task_started(&upid, Operation::Clone, "Cloning", note))
            }
            Err(e) => {
                self.rt.clone_slots.release(&self.uid);
                if matches!(e, PveError::LockTimeout { .. } | PveError::Locked { .. }) {
                    let window = self.rt.clone_slots.congested(&inst.identity, source.vmid);
                    debug!(
                        template = source.vmid,
                        window, "clone refused on a lock; clone window halved"
                    );
                }
                let msg = format!("clone of template {} to VM {vmid} failed: {e}", source.vmid);
                Ok(stop("CloneFailed", msg, Until::Backoff))
            }
        }
    }

    async fn replace_vmid(&mut self, owner: &str) -> Flow {
        let old = self.facts.vmid.unwrap_or_default();
        if let Ok(inst) = self.instance().await {
            self.rt.vmids.release(&inst.identity, old, &self.uid);
            self.rt.resources.invalidate(&inst.identity);
        }
        self.event(
            EventKind::Warning,
            "VMIDTaken",
            format!("VMID {old} is used by a VM that is not ours ({owner}); it is left alone and another VMID is reserved"),
        )
        .await;
        self.facts.vmid = None;
        self.facts.vm = None;
        self.facts.task = None;
        self.clear_task();
        self.status.proxmox_node = None;
        Flow::Continue
    }

    fn vm_target(&self) -> Option<(NodeName, VmId, String)> {
        let node = match &self.facts.vm {
            Some(VmFact::Ours(v)) => v.node.clone(),
            _ => self.vm_node()?,
        };
        Some((
            NodeName::new(node.clone()).ok()?,
            VmId::new(self.facts.vmid?).ok()?,
            node,
        ))
    }

    fn pve_failure(&self, reason: &'static str, what: &str, e: &PveError) -> Flow {
        stop(reason, format!("{what}: {e}"), Until::Backoff)
    }

    async fn upload_iso(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("InstanceUnreachable", msg, Until::Backoff),
        };
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            return Flow::Continue;
        };
        let Some(config) = view.config.clone() else {
            return Flow::Continue;
        };
        let Some((node, _, node_name)) = self.vm_target() else {
            return stop("UploadFailed", "the VM's node is unknown", Until::Backoff);
        };
        if self.bootstrap.is_none()
            && let Some(secret) = self.owner.as_ref().and_then(|o| o.bootstrap_secret())
        {
            match stores::bootstrap_value(&self.ctx.shared.kube, &self.ns, secret).await {
                Ok(v) => self.bootstrap = v,
                Err(e) => {
                    return stop(
                        "WaitingForBootstrapData",
                        format!(
                            "cannot read the bootstrap data Secret {}/{secret}: {e}",
                            self.ns
                        ),
                        Until::Backoff,
                    );
                }
            }
        }
        let seed = match self.seed_input(&config) {
            Ok(s) => s,
            Err(flow) => return flow,
        };
        if let Some(flow) = self.duplicate_addresses(&inst, &config).await {
            return flow;
        }
        let iso = match crate::cloudinit::render(&seed)
            .map_err(|e| e.to_string())
            .and_then(|s| crate::cloudinit::build(&s).map_err(|e| e.to_string()))
        {
            Ok(b) => b,
            Err(e) => return stop("UploadFailed", e, Until::Backoff),
        };
        let storage = match self.iso_storage(&inst, &node_name).await {
            Ok(s) => s,
            Err(e) => {
                return stop(
                    "InstanceUnreachable",
                    format!("instance {}: {e}", inst.name),
                    Until::Backoff,
                );
            }
        };
        let Some(storage) = storage else {
            return stop(
                "NoISOStorage",
                format!(
                    "no available storage with content 'iso' on node {node_name}; the bootstrap ISO cannot be attached"
                ),
                Until::Backoff,
            );
        };
        let Ok(sid) = StorageId::new(storage.storage.clone()) else {
            return stop(
                "NoISOStorage",
                format!("invalid storage id {}", storage.storage),
                Until::Backoff,
            );
        };
        let file = self.facts.iso_file.clone().unwrap_or_default();
        let volid = format!("{}:iso/{file}", storage.storage);
        match inst.api.upload_iso(&node, &sid, &file, iso).await {
            Ok(Some(upid)) => {
                let v = volid.clone();
                self.rt.update_memo(&self.uid, |m| {
                    m.iso_uploaded = None;
                    m.iso_pending = Some(v);
                });
                let note = format!(
                    "uploading the bootstrap ISO {volid} for VM {}",
                    self.facts.vmid.unwrap_or_default()
                );
                self.event(EventKind::Normal, "UploadingBootstrapData", note.clone())
                    .await;
                self.task_started(&upid, Operation::Upload, "UploadingBootstrapData", note)
            }
            Ok(None) => {
                self.rt
                    .update_memo(&self.uid, |m| m.iso_uploaded = Some(volid));
                self.facts.iso_uploaded = true;
                Flow::Continue
            }
            Err(e) => self.pve_failure(
                "UploadFailed",
                &format!("upload of {volid} to node {node_name}"),
                &e,
            ),
        }
    }

    /// Field case B16: before the network config is written, no other
    /// machine of this controller in the same layer-2 domain (Proxmox
    /// cluster, bridge, VLAN) may hold one of our claimed addresses. On a hit
    /// the VM is not started and a `DuplicateIPAddress` condition names both.
    async fn duplicate_addresses(&mut self, inst: &Instance, config: &VmConfig) -> Option<Flow> {
        let bound = match &self.facts.claims {
            Some(ClaimsFact::Bound(b)) if !b.is_empty() => b.clone(),
            _ => return None,
        };
        let desired = self.facts.desired.clone().ok()?;
        let l2 = |net: &str| -> Option<(String, Option<u16>)> {
            let index: u8 = net.trim_start_matches("net").parse().ok()?;
            let want = desired.nics.iter().find(|n| n.index == index)?;
            let dev =
                vmconfig::nic_device(want, config.nets.get(&index), &self.facts.marker).ok()?;
            Some((dev.bridge?, dev.tag))
        };
        let ours: Vec<claims::L2Address> = bound
            .iter()
            .filter_map(|c| l2(&c.net).map(|(b, v)| (c.address, b, v)))
            .collect();
        let list: Vec<Arc<ProxmoxMachine>> = match self.ctx.stores.as_ref() {
            Some(st) => st
                .machines
                .state()
                .into_iter()
                .map(|m| self.latest_known(m))
                .collect(),
            None => {
                let all: Api<ProxmoxMachine> = Api::all(self.ctx.shared.kube.clone());
                match all.list(&ListParams::default()).await {
                    Ok(l) => l.items.into_iter().map(Arc::new).collect(),
                    Err(e) => {
                        debug!(error = %e, "cannot list machines for the duplicate-address check");
                        return None;
                    }
                }
            }
        };
        let mut others = Vec::new();
        for m in list
            .iter()
            .filter(|m| m.uid().as_deref() != Some(self.uid.as_str()))
        {
            let Some(st) = &m.status else { continue };
            let mut addrs = Vec::new();
            for d in &st.ip_addresses {
                let Some(n) = st.network.iter().find(|n| n.name == d.net) else {
                    continue;
                };
                let Some(bridge) = n.bridge.clone() else {
                    continue;
                };
                for a in d
                    .ipv4
                    .iter()
                    .chain(d.ipv6.iter())
                    .filter_map(|a| a.parse().ok())
                {
                    addrs.push((a, bridge.clone(), n.vlan));
                }
            }
            if addrs.is_empty() {
                continue;
            }
            others.push((m, addrs));
        }
        let candidates: Vec<(String, Vec<claims::L2Address>)> = others
            .iter()
            .map(|(m, a)| {
                (
                    format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()),
                    a.clone(),
                )
            })
            .collect();
        let hits = claims::duplicates(&ours, &candidates);
        for (addr, who) in hits {
            // Same Proxmox cluster? Only then is it the same layer-2 domain.
            let Some((m, _)) = others.iter().find(|(m, _)| {
                format!("{}/{}", m.namespace().unwrap_or_default(), m.name_any()) == who
            }) else {
                continue;
            };
            let same = match (&m.spec.instance, m.labels().get(CLUSTER_NAME_LABEL)) {
                (Some(i), Some(cluster)) => {
                    let ns = m.namespace().unwrap_or_default();
                    match self
                        .labelled_proxmox_cluster(&ns, cluster)
                        .await
                        .ok()
                        .flatten()
                    {
                        Some(pc) => self
                            .ctx
                            .shared
                            .clients
                            .get(&self.ctx.shared.kube, &pc, i)
                            .await
                            .is_ok_and(|o| o.identity == inst.identity),
                        None => false,
                    }
                }
                _ => false,
            };
            if same {
                let (bridge, vlan) = ours
                    .iter()
                    .find(|(a, _, _)| *a == addr)
                    .map(|(_, b, v)| (b.clone(), *v))
                    .unwrap_or_default();
                let vlan = vlan.map_or_else(|| "no VLAN".to_string(), |v| format!("VLAN {v}"));
                let msg = format!(
                    "address {addr} claimed for {}/{} is already held by machine {who} in the same network (the Proxmox cluster of instance {}, bridge {bridge}, {vlan}); the VM is not started until this is resolved",
                    self.ns, self.name, inst.name
                );
                return Some(stop("DuplicateIPAddress", msg, Until::Backoff));
            }
        }
        None
    }

    /// The ISO storage for VMs on `node` (cached; else from a listing).
    async fn iso_storage(
        &self,
        inst: &Instance,
        node: &str,
    ) -> Result<Option<super::resources::StorageView>, PveError> {
        if let Some(s) = self.rt.iso_storage(&inst.identity, node) {
            return Ok(Some(s));
        }
        let snap = self
            .rt
            .resources
            .get(&inst.identity, inst.api.as_ref(), None)
            .await?;
        let s = snap.iso_storage(node);
        if let Some(s) = &s {
            self.rt.cache_iso_storage(&inst.identity, node, s.clone());
        }
        Ok(s)
    }

    fn seed_input(&self, config: &VmConfig) -> Result<crate::cloudinit::SeedInput, Flow> {
        let Some(uuid) = config.smbios1.as_ref().and_then(|s| s.uuid) else {
            return Err(stop(
                "UploadFailed",
                "the VM has no smbios1 uuid (instance-id)",
                Until::Backoff,
            ));
        };
        let Some(user_data) = self.bootstrap.clone() else {
            return Err(stop(
                "WaitingForBootstrapData",
                "the bootstrap data Secret has no key 'value'",
                Until::Change,
            ));
        };
        let desired = self
            .facts
            .desired
            .clone()
            .map_err(|e| stop("InvalidSpec", e, Until::Change))?;
        let macs = vmconfig::nic_macs(&desired, config, &self.facts.marker)
            .map_err(|e| stop("InvalidSpec", e.to_string(), Until::Change))?;
        let (wanted, plans) = match &self.claim_plan {
            Some((w, p, _)) => (w.clone(), p.clone()),
            None => (Vec::new(), Vec::new()),
        };
        let bound = match &self.facts.claims {
            Some(ClaimsFact::Bound(b)) => b.clone(),
            _ => Vec::new(),
        };
        let mut interfaces = Vec::new();
        for p in &plans {
            let Some((_, mac)) = macs.iter().find(|(i, _)| *i == p.index) else {
                continue;
            };
            let net = format!("net{}", p.index);
            let mut iface = crate::cloudinit::Interface {
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
            for (w, a) in wanted
                .iter()
                .zip(bound.iter())
                .filter(|(w, _)| w.net == net)
            {
                iface.addresses.push((a.address, a.prefix));
                if w.metric.is_some() {
                    iface.metric = w.metric;
                }
                match a.gateway {
                    Some(std::net::IpAddr::V4(g)) if a.address.is_ipv4() => {
                        iface.gateway4 = Some(g)
                    }
                    Some(std::net::IpAddr::V6(g)) if a.address.is_ipv6() => {
                        iface.gateway6 = Some(g)
                    }
                    _ => {}
                }
            }
            interfaces.push(iface);
        }
        let provider_id = self
            .machine
            .spec
            .metadata_settings
            .and_then(|m| m.provider_id_injection)
            .unwrap_or(false)
            .then(|| self.provider_id(&uuid.to_string()));
        Ok(crate::cloudinit::SeedInput {
            instance_id: uuid.to_string(),
            hostname: self.name.clone(),
            provider_id,
            user_data,
            interfaces,
        })
    }

    fn provider_id(&self, uuid: &str) -> String {
        let format = self
            .pc
            .as_ref()
            .map(|p| p.spec.provider_id_format())
            .unwrap_or_default();
        status::provider_id(
            format,
            self.facts.instance.as_deref().unwrap_or_default(),
            self.facts.vmid.unwrap_or_default(),
            uuid,
        )
    }

    fn uploaded_volid(&self) -> Option<String> {
        let memo = self.rt.memo(&self.uid);
        let file = self.facts.iso_file.clone()?;
        memo.iso_uploaded
            .or(memo.iso_pending)
            .filter(|v| v.ends_with(&format!(":iso/{file}")))
    }

    async fn configure(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("InstanceUnreachable", msg, Until::Backoff),
        };
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            return Flow::Continue;
        };
        let Some(config) = view.config.clone() else {
            return Flow::Continue;
        };
        let Ok(desired) = self.facts.desired.clone() else {
            return stop(
                "InvalidSpec",
                "the spec cannot be expressed as a VM config",
                Until::Change,
            );
        };
        let file = self.facts.iso_file.clone().unwrap_or_default();
        let mut volid = config
            .disks
            .values()
            .find(|d| d.file.ends_with(&format!(":iso/{file}")))
            .map(|d| d.file.clone())
            .or_else(|| self.uploaded_volid());
        if volid.is_none() && self.facts.iso_uploaded {
            // Uploaded before a restart: the storage choice is deterministic.
            volid = self
                .iso_storage(&inst, &view.node)
                .await
                .ok()
                .flatten()
                .map(|s| format!("{}:iso/{file}", s.storage));
        }
        let running =
            view.running == Some(true) || self.facts.last_success == Some(Operation::Start);
        let volid = match volid {
            Some(v) => v,
            // Already booted: the ISO is not needed any more.
            None if running => String::new(),
            None => {
                self.facts.iso_uploaded = false;
                return Flow::Continue;
            }
        };
        let slot = match vmconfig::iso_slot(&config, &volid) {
            Ok(s) => s,
            Err(e) => return stop("ConfigureFailed", e.to_string(), Until::Change),
        };
        let iso = (!running).then_some((slot, volid.as_str()));
        let update = match vmconfig::update(&desired, &config, &self.facts.marker, iso) {
            Ok(u) => u,
            Err(e) => return stop("InvalidSpec", e.to_string(), Until::Change),
        };
        let Some((node, id, _)) = self.vm_target() else {
            return stop(
                "ConfigureFailed",
                "the VM's node is unknown",
                Until::Backoff,
            );
        };
        let allocates = update.changes().iter().any(|(k, v)| {
            pve_client::options::DiskSlot::parse(k).is_ok()
                && v.split_once(':').is_some_and(|(_, r)| {
                    r.split(',')
                        .next()
                        .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                })
        });
        let keys: Vec<&str> = update
            .changes()
            .keys()
            .map(String::as_str)
            .filter(|k| *k != "digest")
            .collect();
        let note = format!("configuring VM {} ({})", id, keys.join(", "));
        let after = vmconfig::apply_update(&config, &update);
        let vmid = id.get();
        let node_name = view.node.clone();
        if allocates {
            match inst.api.update_vm_config_async(&node, id, &update).await {
                Ok(Some(upid)) => {
                    self.rt
                        .update_memo(&self.uid, |m| m.config = Some((vmid, node_name, after)));
                    self.status.bootstrap_data_provided = Some(true);
                    self.event(EventKind::Normal, "Configuring", note.clone())
                        .await;
                    self.task_started(&upid, Operation::Configure, "Configuring", note)
                }
                Ok(None) => self.configured(vmid, node_name, after, view, note).await,
                Err(e) => {
                    self.rt.update_memo(&self.uid, |m| m.config = None);
                    self.pve_failure("ConfigureFailed", &format!("config write of VM {vmid}"), &e)
                }
            }
        } else {
            match inst.api.update_vm_config_sync(&node, id, &update).await {
                Ok(()) => self.configured(vmid, node_name, after, view, note).await,
                Err(e) => {
                    self.rt.update_memo(&self.uid, |m| m.config = None);
                    self.pve_failure("ConfigureFailed", &format!("config write of VM {vmid}"), &e)
                }
            }
        }
    }

    async fn configured(
        &mut self,
        vmid: u32,
        node: String,
        after: VmConfig,
        view: VmView,
        note: String,
    ) -> Flow {
        self.rt
            .update_memo(&self.uid, |m| m.config = Some((vmid, node, after.clone())));
        self.status.bootstrap_data_provided = Some(true);
        self.event(EventKind::Normal, "Configured", note).await;
        self.facts.vm = Some(VmFact::Ours(VmView {
            config: Some(after),
            ..view
        }));
        Flow::Continue
    }

    async fn resize(&mut self, r: super::disks::Resize) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("InstanceUnreachable", msg, Until::Backoff),
        };
        let Some((node, id, node_name)) = self.vm_target() else {
            return stop("ResizeFailed", "the VM's node is unknown", Until::Backoff);
        };
        let note = format!("growing {} of VM {id} to {}", r.slot, r.size);
        let memo_after = |cfg: Option<VmConfig>| {
            cfg.map(|mut c| {
                if let Some(d) = c.disks.get_mut(&r.slot) {
                    d.size = Some(DiskSize::from_bytes(r.size.bytes()));
                }
                c
            })
        };
        let cfg = match &self.facts.vm {
            Some(VmFact::Ours(v)) => v.config.clone(),
            _ => None,
        };
        let after = memo_after(cfg);
        match inst.api.resize_disk(&node, id, r.slot, r.size).await {
            Ok(upid) => {
                if let Some(a) = after.clone() {
                    let vmid = id.get();
                    self.rt
                        .update_memo(&self.uid, |m| m.config = Some((vmid, node_name.clone(), a)));
                }
                self.event(EventKind::Normal, "Resizing", note.clone())
                    .await;
                match upid {
                    Some(u) => self.task_started(&u, Operation::Resize, "Resizing", note),
                    None => {
                        if let (Some(VmFact::Ours(v)), Some(a)) = (self.facts.vm.clone(), after) {
                            self.facts.vm = Some(VmFact::Ours(VmView {
                                config: Some(a),
                                ..v
                            }));
                        }
                        Flow::Continue
                    }
                }
            }
            Err(e) => self.pve_failure(
                "ResizeFailed",
                &format!("resize of {} of VM {id}", r.slot),
                &e,
            ),
        }
    }

    async fn start(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("InstanceUnreachable", msg, Until::Backoff),
        };
        let Some((node, id, node_name)) = self.vm_target() else {
            return stop("PowerOnFailed", "the VM's node is unknown", Until::Backoff);
        };
        match inst.api.start_vm(&node, id, StartOptions::default()).await {
            Ok(upid) => {
                let note = format!("starting VM {id} on {node_name}");
                self.event(EventKind::Normal, "PoweringOn", note.clone())
                    .await;
                self.task_started(&upid, Operation::Start, "PoweringOn", note)
            }
            Err(e) => self.pve_failure("PowerOnFailed", &format!("start of VM {id}"), &e),
        }
    }

    async fn finish_provisioning(&mut self, devs: Vec<DeviceAddresses>) -> Result<Flow, Error> {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return Ok(stop("InstanceUnreachable", msg, Until::Backoff)),
        };
        let Some(VmFact::Ours(view)) = self.facts.vm.clone() else {
            return Ok(Flow::Continue);
        };
        let Some(config) = view.config.clone() else {
            return Ok(Flow::Continue);
        };
        let Some((node, id, node_name)) = self.vm_target() else {
            return Ok(stop(
                "WaitingForAddresses",
                "the VM's node is unknown",
                Until::Backoff,
            ));
        };
        let Some(uuid) = config.smbios1.as_ref().and_then(|s| s.uuid) else {
            return Ok(stop(
                "WaitingForAddresses",
                "the VM has no smbios1 uuid",
                Until::Backoff,
            ));
        };
        // Eject and delete the bootstrap ISO (B20).
        let file = self.facts.iso_file.clone().unwrap_or_default();
        let mut iso_task = None;
        if let Some(d) = config
            .disks
            .values()
            .find(|d| d.file.ends_with(&format!(":iso/{file}")))
            .cloned()
        {
            if let Some(eject) = vmconfig::eject(&config, &d.file)
                && let Err(e) = inst.api.update_vm_config_sync(&node, id, &eject).await
            {
                return Ok(self.pve_failure(
                    "CleaningUpBootstrapData",
                    &format!("eject of {} from VM {id}", d.file),
                    &e,
                ));
            }
            if let (Some(storage), Ok(n2)) = (d.storage(), NodeName::new(node_name.clone()))
                && let Ok(sid) = StorageId::new(storage.to_string())
            {
                match inst.api.delete_volume(&n2, &sid, &d.file).await {
                    Ok(u) => iso_task = u,
                    Err(PveError::NotFound { .. }) => {}
                    Err(e) => {
                        self.event(
                            EventKind::Warning,
                            "CleanupFailed",
                            format!("could not delete the bootstrap ISO {}: {e}", d.file),
                        )
                        .await;
                    }
                }
            }
        }
        let provider_id = self.provider_id(&uuid.to_string());
        if self.machine.spec.provider_id.as_deref() != Some(provider_id.as_str()) {
            self.merge_patch(serde_json::json!({ "spec": { "providerID": provider_id } }))
                .await?;
        }
        self.status.addresses = addresses::machine_addresses(&self.name, &devs);
        self.status.ip_addresses = devs;
        self.status.network = config
            .nets
            .iter()
            .map(|(i, n)| NetworkStatus {
                name: format!("net{i}"),
                mac_address: n.macaddr.map(|m| m.to_string()),
                bridge: n.bridge.clone(),
                vlan: n.tag,
                mtu: n.mtu.map(u32::from),
            })
            .collect();
        self.status.proxmox_node = Some(node_name.clone());
        self.status.vm_status = Some("running".into());
        self.status.failure_domain = self.facts.instance.clone();
        self.status.initialization = Some(Initialization {
            provisioned: Some(true),
        });
        self.facts.provisioned = true;
        self.rt.update_memo(&self.uid, |m| m.iso_uploaded = None);
        self.event(
            EventKind::Normal,
            "Provisioned",
            format!(
                "VM {id} on {node_name} in instance {} is up: providerID {provider_id}",
                inst.name
            ),
        )
        .await;
        info!(%provider_id, "machine provisioned");
        match iso_task {
            Some(u) => {
                self.record_task(&u);
                self.facts.task = Some(TaskFact::Running(Operation::DeleteVolume));
                let identity = inst.identity.clone();
                let floor = self
                    .rt
                    .scaled(self.rt.options.poll_floor)
                    .max(Duration::from_millis(5));
                Ok(polled(
                    "Provisioned",
                    String::new(),
                    next_poll(
                        self.rt.timer.expected(&identity, Operation::DeleteVolume),
                        Duration::ZERO,
                        0,
                        floor,
                    ),
                ))
            }
            None => Ok(Flow::Continue),
        }
    }

    async fn delete_iso(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("DeletionFailed", msg, Until::Backoff),
        };
        let file = self.facts.iso_file.clone().unwrap_or_default();
        let node = self.vm_node();
        let volid = match self.uploaded_volid() {
            Some(v) => Some(v),
            None => match &node {
                Some(n) => self
                    .rt
                    .resources
                    .get(&inst.identity, inst.api.as_ref(), None)
                    .await
                    .ok()
                    .and_then(|s| s.iso_storage(n))
                    .map(|s| format!("{}:iso/{file}", s.storage)),
                None => None,
            },
        };
        let done = |this: &mut Self| {
            this.facts.last_success = Some(Operation::DeleteVolume);
            let vmid = this.facts.vmid.unwrap_or_default();
            this.rt.update_memo(&this.uid, |m| {
                m.iso_uploaded = None;
                m.last_success = Some((vmid, Operation::DeleteVolume));
            });
            Flow::Continue
        };
        let (Some(volid), Some(node)) = (volid, node) else {
            return done(self);
        };
        let storage = volid
            .split_once(':')
            .map(|(s, _)| s.to_string())
            .unwrap_or_default();
        let (Ok(n), Ok(sid)) = (NodeName::new(node), StorageId::new(storage)) else {
            return done(self);
        };
        match inst.api.delete_volume(&n, &sid, &volid).await {
            Ok(Some(upid)) => self.task_started(
                &upid,
                Operation::DeleteVolume,
                "Deleting",
                format!("deleting the bootstrap ISO {volid}"),
            ),
            Ok(None) | Err(PveError::NotFound { .. }) => done(self),
            Err(e) if unreachable(&e) => stop(
                "DeletionFailed",
                format!("cannot delete {volid}: {e}"),
                Until::Backoff,
            ),
            Err(e) => {
                warn!(error = %e, %volid, "bootstrap ISO not deleted");
                done(self)
            }
        }
    }

    async fn shutdown(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("DeletionFailed", msg, Until::Backoff),
        };
        let Some((node, id, node_name)) = self.vm_target() else {
            return stop("DeletionFailed", "the VM's node is unknown", Until::Backoff);
        };
        let opts = ShutdownOptions {
            timeout_secs: Some(self.rt.options.shutdown_timeout_secs),
            force_stop: true,
        };
        match inst.api.shutdown_vm(&node, id, opts).await {
            Ok(upid) => {
                let note = format!(
                    "shutting down VM {id} on {node_name} (forced after {}s)",
                    opts.timeout_secs.unwrap_or(0)
                );
                self.event(EventKind::Normal, "Deleting", note.clone())
                    .await;
                self.task_started(&upid, Operation::Shutdown, "Deleting", note)
            }
            Err(PveError::NotFound { .. }) => {
                self.vm_vanished();
                Flow::Continue
            }
            Err(e) => self.pve_failure("DeletionFailed", &format!("shutdown of VM {id}"), &e),
        }
    }

    /// Proxmox says the VM does not exist (any more): forget what we
    /// believed about it (a remembered shutdown would otherwise keep
    /// answering "ours, stopped" and the destroy would be repeated forever)
    /// and look it up in a listing fetched from now on.
    fn vm_vanished(&mut self) {
        self.facts.vm = None;
        self.facts.last_success = None;
        let now = Instant::now();
        self.rt.update_memo(&self.uid, |m| {
            m.fresh_after = Some(now);
            m.config = None;
            m.last_success = None;
        });
    }

    async fn stop_vm(&mut self) -> Flow {
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop("DeletionFailed", msg, Until::Backoff),
        };
        self.clear_task();
        self.facts.task = None;
        let Some((node, id, node_name)) = self.vm_target() else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let opts = StopOptions {
            timeout_secs: None,
            overrule_shutdown: true,
        };
        match inst.api.stop_vm(&node, id, opts).await {
            Ok(upid) => self.task_started(
                &upid,
                Operation::Stop,
                "Deleting",
                format!("stopping VM {id} on {node_name}"),
            ),
            Err(PveError::NotFound { .. }) => {
                self.vm_vanished();
                Flow::Continue
            }
            Err(e) => self.pve_failure("DeletionFailed", &format!("stop of VM {id}"), &e),
        }
    }

    async fn destroy(&mut self, partial: bool) -> Flow {
        let reason = if partial {
            "CloneFailed"
        } else {
            "DeletionFailed"
        };
        let inst = match self.instance().await {
            Ok(i) => i,
            Err(msg) => return stop(reason, msg, Until::Backoff),
        };
        if partial {
            self.clear_task();
            self.facts.task = None;
        }
        let Some((node, id, node_name)) = self.vm_target() else {
            self.facts.vm = None;
            return Flow::Continue;
        };
        let opts = DeleteOptions {
            purge: true,
            destroy_unreferenced_disks: true,
        };
        match inst.api.delete_vm(&node, id, opts).await {
            Ok(upid) => {
                let note = if partial {
                    format!("removing the partial VM {id} left by a failed clone")
                } else {
                    format!("destroying VM {id} on {node_name} (purge, unreferenced disks)")
                };
                self.event(
                    EventKind::Normal,
                    if partial {
                        "RemovingPartialVM"
                    } else {
                        "Deleting"
                    },
                    note.clone(),
                )
                .await;
                // The shutdown's success no longer describes the VM: from
                // now on only a listing (or the destroy task) says where it is.
                self.facts.last_success = None;
                self.rt.update_memo(&self.uid, |m| {
                    m.config = None;
                    m.last_success = None;
                });
                self.task_started(
                    &upid,
                    Operation::Destroy,
                    if partial { "CloneFailed" } else { "Deleting" },
                    note,
                )
            }
            Err(PveError::NotFound { .. }) => {
                self.vm_vanished();
                Flow::Continue
            }
            Err(PveError::Conflict {
                kind: pve_client::ConflictKind::VmRunning,
                ref message,
                ..
            }) if !partial => {
                // The listing lagged: it is still running. Stop it first (B21).
                self.facts.last_success = None;
                self.facts.vm = match self.facts.vm.take() {
                    Some(VmFact::Ours(v)) => Some(VmFact::Ours(VmView {
                        running: Some(true),
                        ..v
                    })),
                    other => other,
                };
                self.facts.task = Some(TaskFact::Failed {
                    op: Operation::Shutdown,
                    kind: TaskFailureKind::Conflict(pve_client::ConflictKind::VmRunning),
                    message: message.clone(),
                });
                Flow::Continue
            }
            Err(e) => self.pve_failure(reason, &format!("destroy of VM {id}"), &e),
        }
    }
}

/// `body` with `metadata.resourceVersion` set to `rv` (a precondition of
/// the write; nothing is added without a known version).
fn with_resource_version(mut body: serde_json::Value, rv: Option<&str>) -> serde_json::Value {
    if let (Some(rv), Some(obj)) = (rv, body.as_object_mut()) {
        let meta = obj
            .entry("metadata")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "resourceVersion".into(),
                serde_json::Value::String(rv.to_string()),
            );
        }
    }
    body
}

/// What a finished check found, for the condition: exit code or signal,
/// then the first line of stderr or what stdout said (at most 200
/// characters each).
fn describe_exec(st: &crate::pve::ExecStatus) -> String {
    let first = |s: &str| -> String {
        let line = s
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("");
        line.chars().take(200).collect()
    };
    let mut out = match (st.exitcode, st.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "no exit code".to_string(),
    };
    let err = first(st.err_data.as_deref().unwrap_or_default());
    let said = first(st.out_data.as_deref().unwrap_or_default());
    if !err.is_empty() {
        out.push_str(&format!(": {err}"));
    } else if !said.is_empty() {
        out.push_str(&format!(", it reads {said:?}"));
    }
    out
}

/// A duration for messages: `10m`, `1m30s`, `45s`, `250ms`.
fn human(d: Duration) -> String {
    let secs = d.as_secs();
    if secs == 0 {
        return format!("{}ms", d.as_millis());
    }
    let (m, s) = (secs / 60, secs % 60);
    match (m, s) {
        (0, s) => format!("{s}s"),
        (m, 0) => format!("{m}m"),
        (m, s) => format!("{m}m{s}s"),
    }
}

/// Where a clone of `resolved` can go: anywhere when every template disk
/// (and the requested target storage) is shared, else only the template's
/// node (or, for replicas, each replica's own node) — field case B05.
fn locality(
    resolved: &Resolved,
    template: &VmConfig,
    target_storage: Option<&str>,
    snap: &super::resources::Snapshot,
) -> Option<Locality> {
    if let Resolved::Replicas(v) = resolved {
        return Some(Locality {
            nodes: v.iter().map(|t| t.node.clone()).collect(),
            why: "the template is replicated per node; each VM is cloned from the replica on its node".into(),
        });
    }
    let node = resolved.all().first().map(|t| t.node.clone())?;
    let vmid = resolved.all().first().map(|t| t.vmid)?;
    let mut disks: Vec<(String, String)> = template
        .disks
        .iter()
        .filter(|(_, d)| !d.is_cdrom())
        .filter_map(|(slot, d)| Some((slot.to_string(), d.storage()?.to_string())))
        .collect();
    for (key, d) in [
        ("efidisk0", &template.efidisk0),
        ("tpmstate0", &template.tpmstate0),
    ] {
        if let Some(s) = d.as_ref().and_then(|d| d.storage()) {
            disks.push((key.to_string(), s.to_string()));
        }
    }
    let local = disks
        .iter()
        .find(|(_, s)| snap.is_shared(s) != Some(true))
        .map(|(k, s)| format!("template {vmid} has {k} on {s}, which is not shared"));
    let target_local = target_storage
        .filter(|s| snap.is_shared(s) != Some(true))
        .map(|s| format!("the target storage {s} is not shared"));
    local.or(target_local).map(|why| Locality {
        nodes: [node].into(),
        why,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pve::ExecStatus;

    #[test]
    fn every_merge_patch_carries_the_resource_version() {
        let spec = with_resource_version(
            serde_json::json!({ "spec": { "providerID": "proxmox://abc" } }),
            Some("41"),
        );
        assert_eq!(
            spec,
            serde_json::json!({
                "spec": { "providerID": "proxmox://abc" },
                "metadata": { "resourceVersion": "41" }
            })
        );
        let fin = with_resource_version(
            serde_json::json!({ "metadata": { "finalizers": ["a"] } }),
            Some("7"),
        );
        assert_eq!(
            fin,
            serde_json::json!({ "metadata": { "finalizers": ["a"], "resourceVersion": "7" } })
        );
        let unknown = with_resource_version(serde_json::json!({ "spec": {} }), None);
        assert_eq!(unknown, serde_json::json!({ "spec": {} }));
    }

    #[test]
    fn exec_results_in_words() {
        let missing = ExecStatus {
            exited: true,
            exitcode: Some(1),
            err_data: Some(
                "cat: /run/cluster-api/bootstrap-success.complete: No such file or directory\n"
                    .into(),
            ),
            ..ExecStatus::default()
        };
        assert_eq!(
            describe_exec(&missing),
            "exit code 1: cat: /run/cluster-api/bootstrap-success.complete: No such file or directory"
        );
        let other = ExecStatus {
            exited: true,
            exitcode: Some(0),
            out_data: Some("failure\n".into()),
            ..ExecStatus::default()
        };
        assert_eq!(describe_exec(&other), "exit code 0, it reads \"failure\"");
        let killed = ExecStatus {
            exited: true,
            signal: Some(9),
            ..ExecStatus::default()
        };
        assert_eq!(describe_exec(&killed), "killed by signal 9");
    }

    #[test]
    fn durations_in_messages() {
        assert_eq!(human(Duration::from_secs(600)), "10m");
        assert_eq!(human(Duration::from_secs(90)), "1m30s");
        assert_eq!(human(Duration::from_secs(3)), "3s");
        assert_eq!(human(Duration::from_millis(250)), "250ms");
    }
}
