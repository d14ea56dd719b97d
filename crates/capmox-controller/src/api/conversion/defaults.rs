//! The defaults of the Go provider's `v1alpha2` schema, applied as
//! kube-apiserver applies them to a `v1alpha2` object before the webhook
//! sees it: `externalManagedControlPlane: false`, `metric: 100` of every
//! address pool, `full: true`, `templateSelector.matchPolicy: exact`,
//! `model: virtio` of every network device (`name: net0` is filled in when
//! the device is read).

use crate::api::v1alpha2::cluster::{IpConfig, ProxmoxClusterSpec, ProxmoxClusterStatus};
use crate::api::v1alpha2::machine::{ProxmoxMachineSpec, ProxmoxMachineStatus};
use crate::api::v1alpha2::templates::{ProxmoxClusterTemplateSpec, ProxmoxMachineTemplateSpec};

use super::{Body, ConversionError, Kind, NoStatus, emit, parse};

/// A `v1alpha2` body of `kind` with the schema's defaults filled in.
///
/// # Errors
/// [`ConversionError`] when the body does not match the `v1alpha2` schema.
pub(super) fn apply(kind: Kind, body: &Body) -> Result<Body, ConversionError> {
    match kind {
        Kind::Cluster => {
            let (mut spec, status) = parse::<ProxmoxClusterSpec, ProxmoxClusterStatus>(body)?;
            cluster(&mut spec);
            emit(&spec, status.as_ref())
        }
        Kind::ClusterTemplate => {
            let (mut spec, _) = parse::<ProxmoxClusterTemplateSpec, NoStatus>(body)?;
            cluster(&mut spec.template.spec);
            emit::<_, NoStatus>(&spec, None)
        }
        Kind::Machine => {
            let (mut spec, status) = parse::<ProxmoxMachineSpec, ProxmoxMachineStatus>(body)?;
            machine(&mut spec);
            emit(&spec, status.as_ref())
        }
        Kind::MachineTemplate => {
            let (mut spec, _) = parse::<ProxmoxMachineTemplateSpec, NoStatus>(body)?;
            machine(&mut spec.template.spec);
            emit::<_, NoStatus>(&spec, None)
        }
    }
}

fn cluster(spec: &mut ProxmoxClusterSpec) {
    spec.external_managed_control_plane.get_or_insert(false);
    let zones = spec
        .zone_configs
        .iter_mut()
        .flat_map(|z| [z.ipv4_config.as_mut(), z.ipv6_config.as_mut()]);
    for pool in [spec.ipv4_config.as_mut(), spec.ipv6_config.as_mut()]
        .into_iter()
        .chain(zones)
        .flatten()
    {
        pool_metric(pool);
    }
}

fn pool_metric(pool: &mut IpConfig) {
    pool.metric.get_or_insert(100);
}

fn machine(spec: &mut ProxmoxMachineSpec) {
    spec.full.get_or_insert(true);
    if let Some(t) = spec.template_selector.as_mut() {
        t.match_policy.get_or_insert_with(|| "exact".to_string());
    }
    for d in spec
        .network
        .iter_mut()
        .flat_map(|n| n.network_devices.iter_mut())
    {
        d.model.get_or_insert_with(|| "virtio".to_string());
    }
}
