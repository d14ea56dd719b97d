//! Which bootstrap data a machine can boot with, and how the bootstrap says
//! it finished.
//!
//! CAPI bootstrap contract (the bootstrap data Secret): the data
//! Secret carries the payload in key `value` and its format in key `format`,
//! `cloud-config` (kubeadm's) or `ignition` (Flatcar, Fedora CoreOS); no
//! `format` key means `cloud-config`. Both are delivered on the NoCloud
//! seed ISO (volume label `cidata`) as `user-data`: cloud-init reads a
//! cloud-config there, and Ignition's `proxmoxve` platform (Flatcar,
//! Fedora CoreOS on Proxmox VE) reads an Ignition JSON config there
//! (docs/flatcar.md). Ignition's other QEMU route, `fw_cfg`
//! `opt/com.coreos/config`, needs a host file and `args`, which only
//! root@pam may set, so it is not used.
//!
//! Success: the kubeadm bootstrap provider's cloud-config ends by writing
//! [`SENTINEL`] with the content [`SENTINEL_SUCCESS`] once `kubeadm
//! init`/`join` succeeded (CAPI bootstrap contract, "sentinel file").

/// The file the bootstrap writes when it succeeded.
pub const SENTINEL: &str = "/run/cluster-api/bootstrap-success.complete";

/// The content of [`SENTINEL`] after a successful bootstrap.
pub const SENTINEL_SUCCESS: &str = "success";

/// The formats this provider can deliver, as named in the Secret's `format`.
pub const SUPPORTED_FORMATS: &[&str] = &["cloud-config", "ignition"];

/// A deliverable bootstrap data format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BootstrapFormat {
    /// `cloud-config`: NoCloud user-data for cloud-init.
    CloudConfig,
    /// `ignition`: an Ignition JSON config as NoCloud user-data, enriched
    /// by [`crate::cloudinit::ignition::enrich`].
    Ignition,
}

/// Why bootstrap data cannot be delivered.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    /// Any value but `cloud-config` and `ignition`.
    #[error(
        "bootstrap data format {0:?} is unknown; supported formats: {supported}",
        supported = SUPPORTED_FORMATS.join(", ")
    )]
    Unknown(String),
}

impl BootstrapFormat {
    /// The format named by the Secret's `format` key (`None`: key absent).
    /// Surrounding whitespace is ignored; names are case-sensitive as in
    /// CAPI's `Format` type.
    ///
    /// # Errors
    /// [`FormatError`] for any unknown name.
    pub fn parse(format: Option<&str>) -> Result<BootstrapFormat, FormatError> {
        match format.map(str::trim) {
            None | Some("") | Some("cloud-config") => Ok(BootstrapFormat::CloudConfig),
            Some("ignition") => Ok(BootstrapFormat::Ignition),
            Some(other) => Err(FormatError::Unknown(other.to_string())),
        }
    }
}

/// Whether the output of `cat` [`SENTINEL`] says the bootstrap succeeded.
pub fn sentinel_says_success(out: &str) -> bool {
    out.trim() == SENTINEL_SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(
            BootstrapFormat::parse(None),
            Ok(BootstrapFormat::CloudConfig)
        );
        assert_eq!(
            BootstrapFormat::parse(Some("cloud-config")),
            Ok(BootstrapFormat::CloudConfig)
        );
        assert_eq!(
            BootstrapFormat::parse(Some(" cloud-config\n")),
            Ok(BootstrapFormat::CloudConfig)
        );
        assert_eq!(
            BootstrapFormat::parse(Some("ignition")),
            Ok(BootstrapFormat::Ignition)
        );
        assert_eq!(
            BootstrapFormat::parse(Some("Ignition"))
                .unwrap_err()
                .to_string(),
            "bootstrap data format \"Ignition\" is unknown; supported formats: cloud-config, ignition"
        );
    }

    #[test]
    fn sentinel_content() {
        assert!(sentinel_says_success("success"));
        assert!(sentinel_says_success("success\n"));
        assert!(!sentinel_says_success(""));
        assert!(!sentinel_says_success("failure"));
    }
}
