//! Every condition and event reason this provider writes, as one enum.
//!
//! A [`Reason`] carries what its message needs, so the message is made in
//! one place ([`Reason::message`]), the CamelCase word Kubernetes shows is
//! made in one place ([`Reason::code`]; no other file writes a reason
//! string — a test checks the sources), and whether the problem is
//! [terminal](Reason::terminal) is decided in one place: a terminal reason
//! needs a change of the objects (the spec, the Proxmox template, the
//! credentials) and is not retried on a timer; any other failure is retried
//! with a growing delay.
//!
//! Control flow never looks at the code string: code that needs to know
//! which problem it has matches the variant.

use std::fmt;

use crate::cloudinit::FormatError;
use crate::machine::plan::placement::PlacementError;
pub use crate::machine::plan::placement::Selected;
use crate::machine::plan::scheduler::ScheduleError;
use crate::machine::plan::template::TemplateError;
use crate::machine::plan::vmid::VmidError;
use crate::machine::vm::arch::ArchError;

/// A condition or event reason, with what its message says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    // ---- both kinds -------------------------------------------------------
    /// Reconciliation is paused (Cluster `spec.paused` or the
    /// `cluster.x-k8s.io/paused` annotation).
    Paused,
    /// Reconciliation is not paused.
    NotPaused,
    /// The spec is invalid; the problems (`path: what to write; …`).
    InvalidSpec(String),
    /// The object is being deleted; what the deletion waits for.
    Deleting(String),
    /// A deletion step failed; it is retried.
    DeletionFailed(String),

    // ---- ProxmoxMachine: preconditions ---------------------------------
    /// No owner Machine yet.
    WaitingForOwner,
    /// No Cluster named by the `cluster.x-k8s.io/cluster-name` label.
    WaitingForCluster,
    /// The Cluster has no ProxmoxCluster yet.
    WaitingForProxmoxCluster,
    /// `Cluster.status.initialization.infrastructureProvisioned` is not true yet.
    WaitingForClusterInfrastructure,
    /// The Machine's bootstrap data Secret is not there yet (or has no `value`).
    WaitingForBootstrapData(String),
    /// The bootstrap data's format cannot be delivered.
    UnsupportedBootstrapFormat(FormatError),
    /// The bootstrap data cannot be used in its format (an Ignition config
    /// that is not JSON or names no `ignition.version`): the message names
    /// the Secret and the problem.
    InvalidBootstrapData(String),

    // ---- instance -------------------------------------------------------
    /// The instance was chosen.
    InstanceSelected {
        /// The instance.
        instance: String,
        /// Why.
        why: Selected,
    },
    /// No instance can be chosen.
    InstanceNotSelected(PlacementError),
    /// The instance's credentials are unusable (Secret missing, key missing
    /// or malformed, 401, 403, TLS): a change is needed.
    CredentialsNotReady {
        /// The instance.
        instance: String,
        /// What is wrong (never a secret value).
        detail: String,
    },
    /// The instance cannot be reached.
    InstanceUnreachable {
        /// The instance.
        instance: String,
        /// What the call said.
        detail: String,
    },

    // ---- planning and the VMID ------------------------------------------
    /// The template cannot be resolved.
    Template(TemplateError),
    /// No node can take the VM.
    NoNode(ScheduleError),
    /// What the machine asks cannot be made on its VM's architecture
    /// (refused before the clone).
    ArchitectureUnfit(ArchError),
    /// A PCI device option the template cannot have (refused before the
    /// clone).
    PciDeviceUnfit(crate::machine::plan::pci::PciUnfit),
    /// No VMID can be reserved.
    Vmid(VmidError),
    /// The recorded VMID cannot be this machine's: out of range, a
    /// template, or a VM without this machine's marker.
    InvalidVmid {
        /// The VMID in `spec.virtualMachineID`.
        vmid: u32,
        /// What was found.
        found: String,
    },
    /// The reserved VMID was taken by a VM that is not ours before the
    /// clone; another one is reserved (event).
    VmidTaken {
        /// The VMID given up.
        vmid: u32,
        /// Who has it.
        owner: String,
    },
    /// In line for a clone slot of the template.
    WaitingForCloneSlot {
        /// Template VMID.
        template: u32,
        /// Instance.
        instance: String,
        /// Clones of the template running.
        running: usize,
        /// Machines ahead in line.
        ahead: usize,
    },

    // ---- provisioning progress ------------------------------------------
    /// A clone runs.
    Cloning(String),
    /// A clone failed.
    CloneFailed(String),
    /// A partial VM left by a failed clone is removed (event).
    RemovingPartialVm(String),
    /// Waiting for IP address claims.
    WaitingForIpAddresses(String),
    /// An IP pool reports exhaustion.
    IpAddressPoolExhausted(String),
    /// Every device uses DHCP (`IPAddressesClaimed=True`).
    NoStaticAddresses,
    /// Every claim has its address (`IPAddressesClaimed=True`).
    IpAddressesClaimed(String),
    /// IP address claims were created (event).
    IpAddressClaimsCreated(String),
    /// IP address claims were deleted after the VM was gone (event).
    IpAddressClaimsReleased(String),
    /// The bootstrap ISO is uploaded.
    UploadingBootstrapData(String),
    /// The upload failed.
    UploadFailed(String),
    /// No storage for the bootstrap ISO on the VM's node.
    NoIsoStorage(String),
    /// The storage named for the bootstrap ISO cannot hold it (no `iso`
    /// content): only a spec or storage change helps.
    IsoStorageUnfit(String),
    /// The config is written.
    Configuring(String),
    /// The config write is done (event).
    Configured(String),
    /// The config write failed.
    ConfigureFailed(String),
    /// A disk grows.
    Resizing(String),
    /// The resize failed.
    ResizeFailed(String),
    /// The VM starts.
    PoweringOn(String),
    /// The start failed.
    PowerOnFailed(String),
    /// Waiting for the guest agent to report the addresses.
    WaitingForAddresses(String),
    /// Waiting for the bootstrap to finish (sentinel file).
    WaitingForBootstrap(String),
    /// Another machine in the same network holds a claimed address.
    DuplicateIpAddress(String),
    /// The bootstrap ISO is ejected and deleted.
    CleaningUpBootstrapData(String),
    /// Deleting the bootstrap ISO failed; it is retried.
    MediaDeletionFailed(String),
    /// A Proxmox task ended with warnings (event).
    TaskWarnings(String),
    /// The VM is up: providerID, addresses, provisioned.
    Provisioned(String),
    /// The providerID our VM would get is recorded by another machine
    /// (docs/field-cases.md B36).
    ProviderIdInUse {
        /// Our VM.
        vmid: u32,
        /// The other machine, `namespace/name`.
        holder: String,
    },
    /// `spec.providerID` is recorded and differs from what the VM's
    /// SMBIOS UUID and the format give; it is kept (event).
    ProviderIdMismatch(String),

    // ---- the VM after provisioning, or found in an unexpected state ------
    /// The VM is gone; machines are not recreated (CAPI replaces them).
    VirtualMachineNotFound(String),
    /// The VM now carries another owner's marker.
    VirtualMachineNotOurs(String),
    /// The VM was stopped outside the provider after provisioning; it is
    /// not started again.
    VirtualMachineStopped(String),
    /// The VM is locked.
    VirtualMachineLocked(String),
    /// A VM the Go provider (CAPMOX) made for this machine was adopted:
    /// our marker was written onto it.
    Adopted(String),
    /// Writing our marker onto a CAPMOX-made VM failed; it is retried.
    AdoptionFailed(String),
    /// Looking up a VM that is not where it was (moved).
    WaitingForVirtualMachine(String),

    // ---- Proxmox HA and privileges (docs/field-cases.md B31, B33) ---------
    /// The VM was made an HA resource (event).
    HaRegistered(String),
    /// Making the VM an HA resource failed (retried).
    HaRegistrationFailed(String),
    /// The HA the spec asks for cannot be set up as written (a group on PVE
    /// 9, a rule on PVE 8, a rule that does not exist): a change is needed.
    HaConfigurationInvalid(String),
    /// An HA-managed VM was asked to stop; the HA manager has not stopped it yet.
    WaitingForHaStop(String),
    /// The instance's token lacks privileges an operation needs
    /// (`privilege on path`, …): a change of the token's ACLs is needed.
    MissingPrivileges(String),
    /// A resource pool named for the VMs (instance or machine `pool`) does
    /// not exist in Proxmox, or the token may not read it
    /// (docs/field-cases.md B34): no clone is made; looked at again.
    PoolNotFound(String),
    /// The cloned VM is not a member of its resource pool (B34).
    PoolMembershipMissing(String),
    /// Every instance's resource pool exists (`PoolsReady=True`).
    PoolsReady(String),
    /// The object is gone (finalizer removed): what was removed.
    Deleted(String),
    /// A reconcile failed with an error (Kubernetes API, Proxmox): its
    /// category and text.
    ReconcileFailed(String),

    // ---- ProxmoxCluster -------------------------------------------------
    /// Every instance works.
    ClusterReady(String),
    /// The ProxmoxCluster has no owner Cluster yet: what it waits for.
    ClusterWaitingForOwner(String),
    /// SingleInstance mode chose the instance of every machine (event).
    SingleInstanceSelected(String),
    /// Usable, but some instance is not.
    Degraded(String),
    /// Externally managed control plane without an endpoint yet.
    WaitingForControlPlaneEndpoint(String),
    /// The control-plane endpoint was copied from the Cluster (event).
    ControlPlaneEndpointSet(String),
    /// No usable instance.
    InstancesUnavailable(String),
    /// Every instance is ready (`InstancesReady=True`).
    InstancesReady(String),
    /// Some credentials are wrong.
    CredentialsInvalid(String),
    /// Every instance's credentials work (`CredentialsReady=True`).
    CredentialsValid(String),
    /// Some instance could not be reached, so its credentials are unverified.
    CredentialsUnverified(String),
    /// An instance became ready (event).
    InstanceReady(String),
    /// An instance became unavailable (event).
    InstanceUnavailable(String),
    /// The failure domains changed (event).
    FailureDomainsChanged(String),
    /// Deletion waits for the cluster's ProxmoxMachines.
    WaitingForMachines(String),
    /// A spec setting is ignored (warning condition or event).
    SpecWarning(String),
}

impl Reason {
    /// Whether `code`, a reason code read back from an object's condition,
    /// names a failure: every failure variant's code ends in `Failed`
    /// (`CloneFailed`, `PowerOnFailed`, …), by the naming rule of this enum.
    pub fn is_failure_code(code: &str) -> bool {
        code.ends_with("Failed")
    }

    /// The CamelCase word Kubernetes shows (condition `reason`, event
    /// `reason`). Stable: dashboards and alerts match on it.
    pub fn code(&self) -> &'static str {
        match self {
            Reason::Paused => "Paused",
            Reason::NotPaused => "NotPaused",
            Reason::InvalidSpec(_) => "InvalidSpec",
            Reason::Deleting(_) => "Deleting",
            Reason::DeletionFailed(_) => "DeletionFailed",
            Reason::WaitingForOwner => "WaitingForOwner",
            Reason::WaitingForCluster => "WaitingForCluster",
            Reason::WaitingForProxmoxCluster | Reason::WaitingForClusterInfrastructure => {
                "WaitingForClusterInfrastructure"
            }
            Reason::WaitingForBootstrapData(_) => "WaitingForBootstrapData",
            Reason::UnsupportedBootstrapFormat(_) => "UnsupportedBootstrapFormat",
            Reason::InvalidBootstrapData(_) => "InvalidBootstrapData",
            Reason::InstanceSelected { why, .. } => match why {
                Selected::Pinned => "Pinned",
                Selected::FailureDomain => "FailureDomain",
                Selected::Policy => "Policy",
            },
            Reason::InstanceNotSelected(e) => match e {
                PlacementError::UnknownInstance { .. } => "UnknownInstance",
                PlacementError::FailureDomainMismatch { .. } => "FailureDomainMismatch",
                PlacementError::UnknownFailureDomain { .. } => "UnknownFailureDomain",
                PlacementError::NotInUse { .. } => "InstanceNotInUse",
                PlacementError::NotReady { .. } => "InstanceNotReady",
                PlacementError::NotForControlPlane { .. } => "InstanceNotForControlPlane",
                PlacementError::NoneEligible(_) => "NoEligibleInstance",
            },
            Reason::CredentialsNotReady { .. } => "CredentialsNotReady",
            Reason::InstanceUnreachable { .. } => "InstanceUnreachable",
            Reason::Template(e) => match e {
                TemplateError::Ambiguous { .. } => "TemplateAmbiguous",
                _ => "TemplateNotFound",
            },
            Reason::NoNode(e) => match e {
                ScheduleError::InsufficientMemory { .. } => "InsufficientMemory",
                ScheduleError::Storage { .. } => "StorageNotAvailable",
                ScheduleError::PciMappingNotFound { .. } => "PciMappingNotFound",
                ScheduleError::PciDevicesExhausted { .. } => "PciDevicesExhausted",
                _ => "NoNodeAvailable",
            },
            Reason::ArchitectureUnfit(_) => "ArchitectureUnfit",
            Reason::PciDeviceUnfit(_) => "PciDeviceUnfit",
            Reason::Vmid(e) => match e {
                VmidError::Exhausted { .. } => "VMIDRangeExhausted",
                VmidError::HeldByOther { .. } => "VMIDInUse",
            },
            Reason::InvalidVmid { .. } => "InvalidVMID",
            Reason::VmidTaken { .. } => "VMIDTaken",
            Reason::WaitingForCloneSlot { .. } => "WaitingForCloneSlot",
            Reason::Cloning(_) => "Cloning",
            Reason::CloneFailed(_) => "CloneFailed",
            Reason::RemovingPartialVm(_) => "RemovingPartialVM",
            Reason::WaitingForIpAddresses(_) => "WaitingForIPAddresses",
            Reason::IpAddressPoolExhausted(_) => "IPAddressPoolExhausted",
            Reason::NoStaticAddresses => "NoStaticAddresses",
            Reason::IpAddressesClaimed(_) => "Claimed",
            Reason::IpAddressClaimsCreated(_) => "IPAddressClaimsCreated",
            Reason::IpAddressClaimsReleased(_) => "IPAddressClaimsReleased",
            Reason::UploadingBootstrapData(_) => "UploadingBootstrapData",
            Reason::UploadFailed(_) => "UploadFailed",
            Reason::NoIsoStorage(_) => "NoISOStorage",
            Reason::IsoStorageUnfit(_) => "ISOStorageUnfit",
            Reason::Configuring(_) => "Configuring",
            Reason::Configured(_) => "Configured",
            Reason::ConfigureFailed(_) => "ConfigureFailed",
            Reason::Resizing(_) => "Resizing",
            Reason::Adopted(_) => "Adopted",
            Reason::AdoptionFailed(_) => "AdoptionFailed",
            Reason::ResizeFailed(_) => "ResizeFailed",
            Reason::PoweringOn(_) => "PoweringOn",
            Reason::PowerOnFailed(_) => "PowerOnFailed",
            Reason::WaitingForAddresses(_) => "WaitingForAddresses",
            Reason::WaitingForBootstrap(_) => "WaitingForBootstrap",
            Reason::DuplicateIpAddress(_) => "DuplicateIPAddress",
            Reason::CleaningUpBootstrapData(_) => "CleaningUpBootstrapData",
            Reason::MediaDeletionFailed(_) => "BootstrapMediaDeletionFailed",
            Reason::TaskWarnings(_) => "TaskWarnings",
            Reason::Provisioned(_) => "Provisioned",
            Reason::ProviderIdInUse { .. } => "ProviderIDInUse",
            Reason::ProviderIdMismatch(_) => "ProviderIDMismatch",
            Reason::VirtualMachineNotFound(_) => "VirtualMachineNotFound",
            Reason::VirtualMachineNotOurs(_) => "VirtualMachineNotOurs",
            Reason::VirtualMachineStopped(_) => "VirtualMachineStopped",
            Reason::VirtualMachineLocked(_) => "VirtualMachineLocked",
            Reason::WaitingForVirtualMachine(_) => "WaitingForVirtualMachine",
            Reason::HaRegistered(_) => "HARegistered",
            Reason::HaRegistrationFailed(_) => "HARegistrationFailed",
            Reason::HaConfigurationInvalid(_) => "HAConfigurationInvalid",
            Reason::WaitingForHaStop(_) => "WaitingForHAStop",
            Reason::MissingPrivileges(_) => "MissingPrivileges",
            Reason::PoolNotFound(_) => "PoolNotFound",
            Reason::PoolMembershipMissing(_) => "PoolMembershipMissing",
            Reason::PoolsReady(_) => "PoolsReady",
            Reason::Deleted(_) => "Deleted",
            Reason::ReconcileFailed(_) => "ReconcileFailed",
            Reason::ClusterReady(_) => "Ready",
            Reason::ClusterWaitingForOwner(_) => "WaitingForCluster",
            Reason::SingleInstanceSelected(_) => "InstanceSelected",
            Reason::Degraded(_) => "Degraded",
            Reason::WaitingForControlPlaneEndpoint(_) => "WaitingForControlPlaneEndpoint",
            Reason::ControlPlaneEndpointSet(_) => "ControlPlaneEndpointSet",
            Reason::InstancesUnavailable(_) => "InstancesUnavailable",
            Reason::InstancesReady(_) => "Ready",
            Reason::CredentialsInvalid(_) => "CredentialsInvalid",
            Reason::CredentialsValid(_) => "Ready",
            Reason::CredentialsUnverified(_) => "CredentialsUnverified",
            Reason::InstanceReady(_) => "InstanceReady",
            Reason::InstanceUnavailable(_) => "InstanceUnavailable",
            Reason::FailureDomainsChanged(_) => "FailureDomainsChanged",
            Reason::WaitingForMachines(_) => "WaitingForMachines",
            Reason::SpecWarning(_) => "SpecWarning",
        }
    }

    /// The human message (never a secret value).
    pub fn message(&self) -> String {
        match self {
            Reason::Paused => "reconciliation is paused (Cluster spec.paused or the cluster.x-k8s.io/paused annotation)".into(),
            Reason::NotPaused => String::new(),
            Reason::NoStaticAddresses => "every device uses DHCP".into(),
            Reason::WaitingForOwner => "waiting for the owner Machine (owner reference)".into(),
            Reason::WaitingForCluster => {
                "waiting for the Cluster named by the cluster.x-k8s.io/cluster-name label".into()
            }
            Reason::WaitingForProxmoxCluster => "waiting for the ProxmoxCluster".into(),
            Reason::WaitingForClusterInfrastructure => "waiting for the Cluster's infrastructure to be provisioned (Cluster status.initialization.infrastructureProvisioned)".into(),
            Reason::UnsupportedBootstrapFormat(e) => e.to_string(),
            Reason::InstanceSelected { instance, .. } => format!("instance {instance}"),
            Reason::ProviderIdInUse { vmid, holder } => format!(
                "the providerID of VM {vmid} is already recorded by ProxmoxMachine {holder} (a VM copied with its SMBIOS UUID?); it is not published twice, since CAPI would match both machines to one Node: give this VM a new SMBIOS UUID (smbios1) or delete one of the machines"
            ),
            Reason::InstanceNotSelected(e) => e.to_string(),
            Reason::CredentialsNotReady { instance, detail } => {
                format!("credentials of instance {instance}: {detail}")
            }
            Reason::InstanceUnreachable { instance, detail } => {
                format!("instance {instance} cannot be reached: {detail}")
            }
            Reason::Template(e) => e.to_string(),
            Reason::NoNode(e) => e.to_string(),
            Reason::ArchitectureUnfit(e) => e.to_string(),
            Reason::PciDeviceUnfit(e) => e.to_string(),
            Reason::Vmid(e) => e.to_string(),
            Reason::InvalidVmid { vmid, found } => format!(
                "spec.virtualMachineID {vmid} cannot be this machine's VM: {found}; it is left alone and no VM is cloned. Delete the machine (CAPI replaces it) or clear spec.virtualMachineID to let the provider reserve one"
            ),
            Reason::VmidTaken { vmid, owner } => format!(
                "VMID {vmid} is used by a VM that is not ours ({owner}); it is left alone and another VMID is reserved"
            ),
            Reason::WaitingForCloneSlot {
                template,
                instance,
                running,
                ahead,
            } => format!(
                "waiting for a clone slot of template {template} on {instance}: {running} clones running, {ahead} machines ahead in line"
            ),
            Reason::InvalidSpec(m)
            | Reason::Deleting(m)
            | Reason::DeletionFailed(m)
            | Reason::WaitingForBootstrapData(m)
            | Reason::InvalidBootstrapData(m)
            | Reason::Cloning(m)
            | Reason::CloneFailed(m)
            | Reason::RemovingPartialVm(m)
            | Reason::WaitingForIpAddresses(m)
            | Reason::IpAddressPoolExhausted(m)
            | Reason::IpAddressesClaimed(m)
            | Reason::IpAddressClaimsCreated(m)
            | Reason::IpAddressClaimsReleased(m)
            | Reason::UploadingBootstrapData(m)
            | Reason::UploadFailed(m)
            | Reason::NoIsoStorage(m)
            | Reason::IsoStorageUnfit(m)
            | Reason::Configuring(m)
            | Reason::Configured(m)
            | Reason::ConfigureFailed(m)
            | Reason::Resizing(m)
            | Reason::Adopted(m)
            | Reason::AdoptionFailed(m)
            | Reason::ResizeFailed(m)
            | Reason::PoweringOn(m)
            | Reason::PowerOnFailed(m)
            | Reason::WaitingForAddresses(m)
            | Reason::WaitingForBootstrap(m)
            | Reason::DuplicateIpAddress(m)
            | Reason::CleaningUpBootstrapData(m)
            | Reason::MediaDeletionFailed(m)
            | Reason::TaskWarnings(m)
            | Reason::Provisioned(m)
            | Reason::ProviderIdMismatch(m)
            | Reason::VirtualMachineNotFound(m)
            | Reason::VirtualMachineNotOurs(m)
            | Reason::VirtualMachineStopped(m)
            | Reason::VirtualMachineLocked(m)
            | Reason::WaitingForVirtualMachine(m)
            | Reason::HaRegistered(m)
            | Reason::HaRegistrationFailed(m)
            | Reason::HaConfigurationInvalid(m)
            | Reason::WaitingForHaStop(m)
            | Reason::MissingPrivileges(m)
            | Reason::PoolNotFound(m)
            | Reason::PoolMembershipMissing(m)
            | Reason::PoolsReady(m)
            | Reason::Deleted(m)
            | Reason::ReconcileFailed(m)
            | Reason::ClusterReady(m)
            | Reason::ClusterWaitingForOwner(m)
            | Reason::SingleInstanceSelected(m)
            | Reason::Degraded(m)
            | Reason::WaitingForControlPlaneEndpoint(m)
            | Reason::ControlPlaneEndpointSet(m)
            | Reason::InstancesUnavailable(m)
            | Reason::InstancesReady(m)
            | Reason::CredentialsInvalid(m)
            | Reason::CredentialsValid(m)
            | Reason::CredentialsUnverified(m)
            | Reason::InstanceReady(m)
            | Reason::InstanceUnavailable(m)
            | Reason::FailureDomainsChanged(m)
            | Reason::WaitingForMachines(m)
            | Reason::SpecWarning(m) => m.clone(),
        }
    }

    /// Whether only a change of the objects (spec, template, credentials,
    /// something an operator does) can resolve it: such a problem is
    /// reported once (Warning event) and not retried on a timer. Every
    /// other failure is retried with a growing delay.
    pub fn terminal(&self) -> bool {
        match self {
            Reason::InvalidSpec(_)
            | Reason::UnsupportedBootstrapFormat(_)
            | Reason::InvalidBootstrapData(_)
            | Reason::InvalidVmid { .. }
            | Reason::CredentialsNotReady { .. }
            | Reason::DuplicateIpAddress(_)
            | Reason::VirtualMachineNotFound(_)
            | Reason::VirtualMachineNotOurs(_)
            | Reason::VirtualMachineStopped(_)
            | Reason::HaConfigurationInvalid(_)
            | Reason::MissingPrivileges(_)
            | Reason::ProviderIdInUse { .. }
            | Reason::ArchitectureUnfit(_)
            | Reason::PciDeviceUnfit(_)
            | Reason::IsoStorageUnfit(_) => true,
            Reason::InstanceNotSelected(e) => !matches!(
                e,
                PlacementError::NotReady { .. } | PlacementError::NoneEligible(_)
            ),
            Reason::Template(e) => matches!(
                e,
                TemplateError::NotConfigured { .. } | TemplateError::Incomplete(_)
            ),
            Reason::Vmid(e) => matches!(e, VmidError::HeldByOther { .. }),
            _ => false,
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.message();
        if m.is_empty() {
            f.write_str(self.code())
        } else {
            write!(f, "{}: {m}", self.code())
        }
    }
}

#[cfg(test)]
mod tests;
