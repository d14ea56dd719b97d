//! What the machine controller's reconciles share ([`Context`]), and what
//! one reconcile of one machine holds while it runs ([`Run`]).

use std::sync::Arc;

use kube::api::{Patch, PatchParams};
use kube::{Api, Resource, ResourceExt};

use super::claims::{ClaimState, DevicePlan, WantedClaim};
use super::runtime::MachineRuntime;
use super::vm::marker::Marker;
use crate::api::{ProxmoxCluster, ProxmoxMachine, ProxmoxMachineStatus};
use crate::capi::{CLUSTER_NAME_LABEL, Cluster, Machine};
use crate::clients::Instance;
use crate::context::Shared;
use crate::error::Error;
use crate::events::EventKind;
use crate::instances::EffectiveInstance;
use crate::reasons::Reason;
use crate::stores::Stores;

/// What the machine controller's reconciles share. Built by the manager
/// (or a test) and passed in: nothing here is process-global.
pub struct Context {
    /// The manager's shared state.
    pub shared: Arc<Shared>,
    /// The machine controller's memory.
    pub runtime: Arc<MachineRuntime>,
    /// The watched objects a reconcile reads.
    pub stores: Stores,
}

/// The machine a reconcile works on: its names and its marker.
#[derive(Clone, Debug)]
pub struct MachineRef {
    /// Namespace.
    pub ns: String,
    /// Name.
    pub name: String,
    /// UID (lower-case).
    pub uid: String,
    /// The CAPI cluster name (`cluster.x-k8s.io/cluster-name` label).
    pub cluster: Option<String>,
    /// The ownership marker.
    pub marker: Marker,
}

impl MachineRef {
    /// The reference of `m`.
    pub fn of(m: &ProxmoxMachine) -> MachineRef {
        let ns = m.namespace().unwrap_or_default();
        let name = m.name_any();
        let uid = m.uid().unwrap_or_default().to_ascii_lowercase();
        MachineRef {
            marker: Marker::new(&ns, &name, &uid),
            cluster: m.labels().get(CLUSTER_NAME_LABEL).cloned(),
            ns,
            name,
            uid,
        }
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.ns, self.name)
    }

    /// The CAPI cluster as `namespace/name` (placement and locks).
    pub fn cluster_key(&self) -> String {
        format!(
            "{}/{}",
            self.ns,
            self.cluster.as_deref().unwrap_or_default()
        )
    }
}

/// The objects around the machine, as the reconcile read them.
#[derive(Clone, Debug, Default)]
pub struct World {
    /// The owner CAPI Machine.
    pub owner: Option<Arc<Machine>>,
    /// The CAPI Cluster.
    pub cluster: Option<Arc<Cluster>>,
    /// The ProxmoxCluster.
    pub proxmox_cluster: Option<Arc<ProxmoxCluster>>,
    /// The machine's instance as the ProxmoxCluster configures it.
    pub instance: Option<EffectiveInstance>,
}

/// One reconcile of one machine: what observers and steps read and change.
/// Steps record what they did here (spec writes, the status draft, events);
/// the report writes the status and publishes the events at the end.
pub struct Run<'a> {
    /// Shared controller state.
    pub ctx: &'a Context,
    /// The object as the reconcile started from.
    pub machine: &'a ProxmoxMachine,
    /// Its names.
    pub me: MachineRef,
    /// The objects around it.
    pub world: World,
    /// The instance's client, once built.
    pub client: Option<Instance>,
    /// The status to write at the end.
    pub status: ProxmoxMachineStatus,
    /// Events to publish at the end.
    pub events: Vec<(EventKind, Reason)>,
    /// The `resourceVersion` the next write carries as its precondition.
    pub resource_version: Option<String>,
    /// The finalizers as last written.
    pub finalizers: Vec<String>,
    /// `metadata.generation` as last written: this reconcile's own spec
    /// writes (instance, VMID, providerID) move it, and a step's retry state
    /// is kept for this one — only a spec change by someone else starts the
    /// backoff over.
    pub generation: Option<i64>,
    /// The claims as last read: which are wanted, how each device is
    /// addressed, and each claim's state (the claim and ISO steps use them).
    pub claims: Option<ClaimsRead>,
    /// The ISO volume this reconcile recorded in status.
    pub media_recorded_here: Option<String>,
    /// The clone target node as last written
    /// ([`crate::machine::plan::scheduler::CLONE_TARGET_ANNOTATION`]), from
    /// the object the reconcile started from and then from the answer of
    /// each [`Run::merge_patch`]: the VMID reservation's patch writes it
    /// with the VMID, so the clone step writes it only when the plan changed
    /// since.
    pub clone_target: Option<String>,
}

/// The clone target annotation of `m`.
fn clone_target(m: &ProxmoxMachine) -> Option<String> {
    m.annotations()
        .get(crate::machine::plan::scheduler::CLONE_TARGET_ANNOTATION)
        .cloned()
}

/// The claims as an observation read them.
#[derive(Clone, Debug, Default)]
pub struct ClaimsRead {
    /// The claims the machine should have.
    pub wanted: Vec<WantedClaim>,
    /// How each device is addressed.
    pub plans: Vec<DevicePlan>,
    /// Each wanted claim's state.
    pub states: Vec<ClaimState>,
}

impl<'a> Run<'a> {
    /// A run for `machine`.
    pub fn new(ctx: &'a Context, machine: &'a ProxmoxMachine) -> Run<'a> {
        Run {
            ctx,
            me: MachineRef::of(machine),
            world: World::default(),
            client: None,
            status: machine.status.clone().unwrap_or_default(),
            events: Vec::new(),
            resource_version: machine.resource_version(),
            finalizers: machine.finalizers().to_vec(),
            generation: machine.metadata.generation,
            claims: None,
            media_recorded_here: None,
            clone_target: clone_target(machine),
            machine,
        }
    }

    /// The machine controller's memory.
    pub fn rt(&self) -> &'a MachineRuntime {
        &self.ctx.runtime
    }

    /// The instance client (observed before any Proxmox step; see
    /// `observe::client`).
    ///
    /// # Errors
    /// [`Error::Precondition`] when no client was observed: a step ran that
    /// `decide` never chooses before the client (a defect, reported loudly).
    pub fn instance(&self) -> Result<&Instance, Error> {
        self.client.as_ref().ok_or_else(|| {
            Error::Precondition("a Proxmox step ran before the instance client was read".into())
        })
    }

    /// Queues an event.
    pub fn event(&mut self, kind: EventKind, reason: Reason) {
        self.events.push((kind, reason));
    }

    /// A JSON merge patch of the main resource, always with the
    /// `resourceVersion` this reconcile knows as a precondition: finalizer
    /// lists are replaced as a whole, and spec fields (`instance`,
    /// `virtualMachineID`, `providerID`) must not overwrite what another
    /// writer (a second controller process during a leader hand-over)
    /// decided meanwhile.
    ///
    /// # Errors
    /// [`Error::Kube`]: 409 on a concurrent change, 404 when the object is
    /// gone. A 409 ends the reconcile, which is retried from fresh state.
    pub async fn merge_patch(&mut self, body: serde_json::Value) -> Result<(), Error> {
        let body = with_resource_version(body, self.resource_version.as_deref());
        let api: Api<ProxmoxMachine> = Api::namespaced(self.ctx.shared.kube.clone(), &self.me.ns);
        let updated = crate::spent::kubernetes(api.patch(
            &self.me.name,
            &PatchParams::default(),
            &Patch::Merge(body),
        ))
        .await?;
        self.resource_version = updated.resource_version();
        self.finalizers = updated.finalizers().to_vec();
        self.generation = updated.metadata.generation;
        self.clone_target = clone_target(&updated);
        self.ctx.runtime.record_write(&self.me.uid, &updated);
        Ok(())
    }

    /// A JSON merge patch of the status subresource with the
    /// `resourceVersion` precondition: records (the bootstrap ISO volume)
    /// written before the thing they record is made.
    ///
    /// # Errors
    /// As [`Run::merge_patch`].
    pub async fn record_status(&mut self, body: serde_json::Value) -> Result<(), Error> {
        let body = with_resource_version(body, self.resource_version.as_deref());
        let api: Api<ProxmoxMachine> = Api::namespaced(self.ctx.shared.kube.clone(), &self.me.ns);
        let updated = crate::spent::kubernetes(api.patch_status(
            &self.me.name,
            &PatchParams::default(),
            &Patch::Merge(body),
        ))
        .await?;
        self.resource_version = updated.resource_version();
        self.ctx.runtime.record_write(&self.me.uid, &updated);
        Ok(())
    }

    /// Forgets the bootstrap ISO record `volid` (the volume is gone): in
    /// the status draft, and in the object (a JSON merge patch setting it
    /// to null: the record was written by a merge patch, which the status
    /// write's server-side apply does not own). The same write sets
    /// `status.bootstrapMediaDeleted`: the recorded ISO is proven gone.
    ///
    /// # Errors
    /// As [`Run::merge_patch`].
    pub async fn clear_media_record(&mut self, volid: &str) -> Result<(), Error> {
        if self
            .status
            .bootstrap_media
            .as_ref()
            .is_some_and(|b| b.volume == volid)
        {
            self.status.bootstrap_media = None;
        }
        let recorded = self
            .machine
            .status
            .as_ref()
            .and_then(|s| s.bootstrap_media.as_ref())
            .is_some_and(|b| b.volume == volid);
        if recorded || self.media_recorded_here.as_deref() == Some(volid) {
            self.record_status(serde_json::json!({
                "status": { "bootstrapMedia": null, "bootstrapMediaDeleted": true }
            }))
            .await?;
            self.status.bootstrap_media_deleted = Some(true);
            self.media_recorded_here = None;
        }
        Ok(())
    }

    /// The object reference for events.
    pub fn object_ref(&self) -> k8s_openapi::api::core::v1::ObjectReference {
        self.machine.object_ref(&())
    }
}

/// `body` with `metadata.resourceVersion` set to `rv` (a precondition of
/// the write; nothing is added without a known version).
pub fn with_resource_version(mut body: serde_json::Value, rv: Option<&str>) -> serde_json::Value {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
