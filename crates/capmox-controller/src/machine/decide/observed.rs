//! What a step or an observation did ([`Observed`]) and how it is folded
//! into the [`Facts`] ([`Facts::apply`], pure): the only way a fact changes
//! during a reconcile.

use std::sync::Arc;

use pve_client::TaskFailureKind;

use super::facts::*;
use super::operation::Operation;
use crate::machine::vm::marker::iso_file_name;
use crate::pve::VmConfig;
use crate::reasons::Reason;

/// What a step or observation did, folded into the facts by
/// [`Facts::apply`] (pure). The retry gates are not changed here: the
/// reconcile loop keeps them in the runtime and refreshes
/// [`Facts::gates`] after every step.
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// The instance client.
    Client(ClientFact),
    /// The task.
    Task(TaskFact),
    /// The VM.
    Vm(VmFact),
    /// The VM's config was read (the VM is ours).
    Config(Arc<VmConfig>),
    /// The VM's power state, read live.
    Power(Power),
    /// The requested HA state `status/current` showed (`None`: not HA-managed).
    HaManaged(Option<crate::pve::HaState>),
    /// The VM's HA resource.
    Ha(HaFact),
    /// The machine's resource pool.
    Pool(PoolFact),
    /// `status.haResource` was recorded and the VM is an HA resource (in
    /// the rule, when one applies).
    HaRegistered,
    /// The recorded HA resource is gone, and its record.
    HaUnregistered,
    /// The VM is not on the node it was looked for (moved): forget the view.
    VmMoved,
    /// The claims.
    Claims(ClaimsFact),
    /// The claim objects that still exist.
    ClaimObjects(ClaimObjects),
    /// The guest agent.
    Agent(AgentFact),
    /// The bootstrap check.
    Bootstrap(BootstrapFact),
    /// Another machine in the same network holds a claimed address (`Some`:
    /// the message), or none does.
    Duplicates(Option<String>),
    /// The bootstrap ISO volumes of this machine found on the instance's
    /// ISO storages.
    MediaFound(Vec<MediaVolume>),
    /// Another machine records the providerID our VM would get (`Some`:
    /// its `namespace/name`), or none does.
    ProviderIdHolder(Option<String>),
    /// The finalizer was added.
    FinalizerAdded,
    /// The finalizer was removed: the machine is gone.
    FinalizerRemoved,
    /// The instance was chosen and written to `spec.instance`; the VMIDs
    /// the machine may use there.
    InstanceChosen {
        /// The instance.
        instance: String,
        /// The machine's VMID range in it (its own ▸ the instance's ▸
        /// Proxmox's), inclusive.
        vmid_range: (u32, u32),
        /// The instance's resource pool (`pool`).
        pool: Option<String>,
    },
    /// Node and template were chosen.
    Planned(Plan),
    /// A VMID was reserved and written to `spec.virtualMachineID`.
    VmidReserved(u32),
    /// The VMID was given up (taken by someone else before our clone).
    VmidReplaced,
    /// Our marker was written onto the VM CAPMOX made: look at it again.
    Adopted,
    /// A clone slot was not granted.
    InLine(InLine),
    /// A task was started and recorded in `status.taskRef`.
    TaskStarted(Operation),
    /// The task in `status.taskRef` was accounted for and forgotten.
    TaskCleared(TaskEnd),
    /// Claims were created.
    ClaimsCreated,
    /// Claims were deleted.
    ClaimsReleased,
    /// The bootstrap ISO volume was recorded in `status.bootstrapMedia`
    /// (before its upload).
    MediaRecorded(MediaVolume),
    /// The bootstrap ISO was uploaded (the upload ended).
    MediaUploaded,
    /// The bootstrap ISO volume is gone (deleted, or proven absent).
    MediaDeleted(String),
    /// The config was written; the VM's config is now this.
    Configured(Arc<VmConfig>),
    /// The bootstrap ISO was ejected; the VM's config is now this.
    Ejected(Arc<VmConfig>),
    /// A disk was grown synchronously; the VM's config is now this.
    Resized(Arc<VmConfig>),
    /// providerID, addresses and `status.initialization.provisioned` are set.
    Provisioned,
    /// A step failed; the retry state of its step is now this.
    Failed(Gate),
    /// Several of the above, in order.
    All(Vec<Observed>),
}

/// How a task ended, as `decide` read it (the step that forgets the task
/// does the bookkeeping this calls for, and nothing else).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEnd {
    /// It did what it was for (`OK`, `WARNINGS: n`, a start of a VM that
    /// already runs, a deletion of something already gone).
    Succeeded(Operation),
    /// It failed: the failure, as a retry gate of the step it belongs to.
    Failed {
        /// The operation.
        op: Operation,
        /// How.
        kind: TaskFailureKind,
        /// The reason for the condition.
        reason: Reason,
    },
    /// The node forgot it: look at the VM again.
    Lost(Operation),
}

impl Facts {
    /// Folds what a step or observation did into the facts.
    pub fn apply(&mut self, o: Observed) {
        match o {
            Observed::Client(c) => self.client = Some(c),
            Observed::Task(t) => self.task = Some(t),
            Observed::Vm(v) => self.vm = Some(v),
            Observed::Config(c) => self.set_config(c),
            Observed::Power(p) => {
                if let Some(VmFact::Ours(v)) = &mut self.vm {
                    v.power = p;
                    v.power_source = PowerSource::Live;
                }
            }
            Observed::HaManaged(h) => {
                if let Some(VmFact::Ours(v)) = &mut self.vm {
                    v.ha = h;
                }
            }
            Observed::Ha(h) => self.ha = Some(h),
            Observed::Pool(p) => self.pool_members = Some(p),
            Observed::HaRegistered => {
                self.ha_recorded = true;
                self.ha = Some(HaFact::Present {
                    state: Some(crate::pve::HaState::Started),
                    listed: true,
                });
            }
            Observed::HaUnregistered => {
                self.ha_recorded = false;
                self.ha = Some(HaFact::Absent);
                if let Some(VmFact::Ours(v)) = &mut self.vm {
                    v.ha = None;
                }
            }
            Observed::VmMoved => {
                self.vm = None;
                self.agent = None;
            }
            Observed::Claims(c) => self.claims = Some(c),
            Observed::ClaimObjects(c) => self.claim_objects = Some(c),
            Observed::Agent(a) => {
                if a == AgentFact::VmStopped
                    && let Some(VmFact::Ours(v)) = &mut self.vm
                {
                    v.power = Power::Stopped;
                    v.power_source = PowerSource::Live;
                }
                self.agent = Some(a);
            }
            Observed::Bootstrap(b) => self.bootstrap = Some(b),
            Observed::Duplicates(d) => self.duplicates = Some(d),
            Observed::MediaFound(v) => self.media_found = Some(v),
            Observed::ProviderIdHolder(h) => self.provider_id_holder = Some(h),
            Observed::FinalizerAdded => self.has_finalizer = true,
            Observed::FinalizerRemoved => self.has_finalizer = false,
            Observed::InstanceChosen {
                instance,
                vmid_range,
                pool,
            } => {
                self.instance = Some(instance);
                self.vmid_range = vmid_range;
                // The machine's own pool wins; without one, the instance's.
                if self.pool.is_none() {
                    self.pool = pool.clone();
                }
                self.instance_pool = pool;
            }
            Observed::Planned(p) => self.plan = Some(p),
            Observed::VmidReserved(v) => {
                self.vmid = Some(v);
                self.iso_file = Some(iso_file_name(v, self.marker.uid()));
                self.vm = None;
            }
            Observed::Adopted => self.vm = None,
            Observed::VmidReplaced => {
                self.vmid = None;
                self.iso_file = None;
                self.vm = None;
                self.plan = None;
            }
            Observed::InLine(l) => self.in_line = Some(l),
            Observed::TaskStarted(op) => {
                self.task = Some(TaskFact::Running(op));
                self.task_recorded = true;
                self.in_line = None;
                if op == Operation::Clone {
                    self.plan = None;
                }
            }
            Observed::TaskCleared(end) => {
                self.task = None;
                self.task_recorded = false;
                self.agent = None;
                // An HA request's task ends before the VM changes (docs/field-cases.md
                // B33): its power state is read live again.
                let ha_managed = matches!(&self.vm, Some(VmFact::Ours(v)) if v.ha.is_some());
                match end {
                    TaskEnd::Succeeded(
                        Operation::Start | Operation::Shutdown | Operation::Stop,
                    ) if ha_managed => self.set_power(Power::Unknown),
                    TaskEnd::Succeeded(Operation::Start) => self.set_power(Power::Running),
                    TaskEnd::Succeeded(Operation::Shutdown | Operation::Stop) => {
                        self.set_power(Power::Stopped)
                    }
                    // The resize step recorded the config it leaves (the
                    // disk at the size asked for): its end OK makes that
                    // view current, no config read needed.
                    TaskEnd::Succeeded(
                        Operation::Upload
                        | Operation::DeleteVolume
                        | Operation::Configure
                        | Operation::Resize,
                    ) => {}
                    // Proxmox removes the VM's config at the end of its
                    // destroy task (`DELETE /nodes/{node}/qemu/{vmid}`): a
                    // destroy that ended OK proves the VM gone, no listing
                    // needed to see it.
                    TaskEnd::Succeeded(Operation::Destroy) => self.vm = Some(VmFact::Absent),
                    TaskEnd::Succeeded(_) | TaskEnd::Lost(_) | TaskEnd::Failed { .. } => {
                        self.vm = None;
                    }
                }
            }
            Observed::ClaimsCreated => self.claims = None,
            Observed::ClaimsReleased => self.claim_objects = None,
            Observed::MediaRecorded(m) => self.media_recorded = Some(m),
            Observed::MediaUploaded => self.media_uploaded = true,
            Observed::MediaDeleted(volid) => {
                if self
                    .media_recorded
                    .as_ref()
                    .is_some_and(|m| m.volid == volid)
                {
                    self.media_recorded = None;
                    self.media_uploaded = false;
                }
                if let Some(found) = &mut self.media_found {
                    found.retain(|m| m.volid != volid);
                }
            }
            Observed::Configured(c) | Observed::Ejected(c) | Observed::Resized(c) => {
                self.set_config(c)
            }
            Observed::Provisioned => self.provisioned = true,
            Observed::Failed(mut g) => {
                g.fresh = true;
                self.gates.retain(|x| x.step != g.step);
                self.gates.push(g);
            }
            Observed::All(list) => {
                for o in list {
                    self.apply(o);
                }
            }
        }
    }

    fn set_config(&mut self, c: Arc<VmConfig>) {
        if let Some(VmFact::Ours(v)) = &mut self.vm {
            v.lock = c.lock.clone();
            v.config = Some(c);
        }
    }

    fn set_power(&mut self, p: Power) {
        if let Some(VmFact::Ours(v)) = &mut self.vm {
            v.power = p;
            v.power_source = PowerSource::Live;
        }
    }
}
