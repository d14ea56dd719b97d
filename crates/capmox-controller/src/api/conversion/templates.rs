//! ProxmoxClusterTemplate and ProxmoxMachineTemplate: `spec.template.metadata`
//! as it is, `spec.template.spec` as the ProxmoxCluster or ProxmoxMachine
//! spec. A `v1alpha3` ProxmoxMachineTemplate's status (`capacity`,
//! `nodeInfo`) has no place in `v1alpha2`, where templates have none.

use crate::api::v1alpha2::common::ObjectMeta;
use crate::api::v1alpha2::templates as v2;
use crate::api::{
    ObjectMetaTemplate, ProxmoxClusterTemplateResource, ProxmoxClusterTemplateSpec,
    ProxmoxMachineTemplateResource, ProxmoxMachineTemplateSpec, ProxmoxMachineTemplateStatus,
};

use super::{Body, ConversionError, NoStatus, cluster, emit, machine, parse};

/// `v1alpha2` → `v1alpha3` ProxmoxClusterTemplate body.
pub(super) fn cluster_up(body: &Body) -> Result<Body, ConversionError> {
    let (s, _) = parse::<v2::ProxmoxClusterTemplateSpec, NoStatus>(body)?;
    let spec = ProxmoxClusterTemplateSpec {
        template: ProxmoxClusterTemplateResource {
            metadata: s.template.metadata.as_ref().map(meta_up),
            spec: cluster::spec_up(&s.template.spec, "spec.template.spec")?,
        },
    };
    emit::<_, NoStatus>(&spec, None)
}

/// `v1alpha3` → `v1alpha2` ProxmoxClusterTemplate body.
pub(super) fn cluster_down(body: &Body) -> Result<Body, ConversionError> {
    let (s, _) = parse::<ProxmoxClusterTemplateSpec, NoStatus>(body)?;
    let spec = v2::ProxmoxClusterTemplateSpec {
        template: v2::ProxmoxClusterTemplateResource {
            metadata: s.template.metadata.as_ref().map(meta_down),
            spec: cluster::spec_down(&s.template.spec),
        },
    };
    emit::<_, NoStatus>(&spec, None)
}

/// `v1alpha2` → `v1alpha3` ProxmoxMachineTemplate body.
pub(super) fn machine_up(body: &Body) -> Result<Body, ConversionError> {
    let (s, _) = parse::<v2::ProxmoxMachineTemplateSpec, NoStatus>(body)?;
    let spec = ProxmoxMachineTemplateSpec {
        template: ProxmoxMachineTemplateResource {
            metadata: s.template.metadata.as_ref().map(meta_up),
            spec: machine::spec_up(&s.template.spec, "spec.template.spec")?,
        },
    };
    emit::<_, ProxmoxMachineTemplateStatus>(&spec, None)
}

/// `v1alpha3` → `v1alpha2` ProxmoxMachineTemplate body.
pub(super) fn machine_down(body: &Body) -> Result<Body, ConversionError> {
    let (s, _) = parse::<ProxmoxMachineTemplateSpec, ProxmoxMachineTemplateStatus>(body)?;
    let spec = v2::ProxmoxMachineTemplateSpec {
        template: v2::ProxmoxMachineTemplateResource {
            metadata: s.template.metadata.as_ref().map(meta_down),
            spec: machine::spec_down(&s.template.spec),
        },
    };
    emit::<_, NoStatus>(&spec, None)
}

fn meta_up(m: &ObjectMeta) -> ObjectMetaTemplate {
    ObjectMetaTemplate {
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
    }
}

fn meta_down(m: &ObjectMetaTemplate) -> ObjectMeta {
    ObjectMeta {
        annotations: m.annotations.clone(),
        labels: m.labels.clone(),
    }
}
