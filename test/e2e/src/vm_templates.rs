//! VM templates the scenarios add to pve-sim's built-in datacenters.

use pve_sim::{ClusterConfig, VmConfig};

/// The Flatcar template's tags (what the flatcar flavor's
/// `FLATCAR_TEMPLATE_TAGS` selects).
pub const FLATCAR_TAGS: &str = "capmox;flatcar";

/// Adds a Flatcar template beside the cluster's first (Ubuntu) template: the
/// next VMID, name `flatcar-stable`, tags [`FLATCAR_TAGS`], and a serial
/// console the Ubuntu one lacks; disks, storage and firmware as the Ubuntu
/// one.
///
/// # Panics
/// When the cluster has no template to copy.
pub fn add_flatcar(c: &mut ClusterConfig) {
    let ubuntu = c.templates[0].clone();
    let mut flatcar: VmConfig = ubuntu.clone();
    flatcar.vmid = ubuntu.vmid + 1;
    flatcar.name = "flatcar-stable".into();
    flatcar.tags = Some(FLATCAR_TAGS.into());
    flatcar.extra.insert("serial0".into(), "socket".into());
    c.templates.push(flatcar);
}
