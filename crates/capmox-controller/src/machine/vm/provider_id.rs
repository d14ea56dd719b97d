//! `spec.providerID`: the two forms the Proxmox cloud controller managers
//! know, per ProxmoxCluster (`providerIDFormat`, immutable), and how a
//! recorded one is compared (docs/provider-id.md, docs/field-cases.md B36).
//!
//! CAPI matches the workload Node whose `spec.providerID` is byte for byte
//! equal (docs/capi-contract.md fact 9), and a Node's providerID can be set
//! only once, so the provider writes the form kubelet or the CCM writes:
//!
//! | `providerIDFormat` | providerID | who sets the Node's |
//! |---|---|---|
//! | `UUID` | `proxmox://<smbios1 uuid, lower case>` | kubelet `--provider-id` from cloud-init meta-data; the CCM in `capmox` mode finds the VM by node name or SystemUUID |
//! | `InstanceVMID` | `proxmox://<instance>/<vmid>` | the CCM in its default mode (region = instance name), or kubelet from meta-data |
//!
//! Proxmox writes SMBIOS UUIDs in lower case; some guests report them in
//! upper case, so UUIDs are compared case-insensitively and written in
//! lower case.

use crate::api::cluster::ProviderIdFormat;

/// The scheme of both forms (the CCM's provider name).
pub const SCHEME: &str = "proxmox://";

/// The providerID of the VM `vmid` in `instance` whose SMBIOS UUID is
/// `uuid`, in `format`.
pub fn provider_id(format: ProviderIdFormat, instance: &str, vmid: u32, uuid: &str) -> String {
    match format {
        ProviderIdFormat::Uuid => format!("{SCHEME}{}", uuid.to_ascii_lowercase()),
        ProviderIdFormat::InstanceVmid => format!("{SCHEME}{instance}/{vmid}"),
    }
}

/// Whether the providerIDs `a` and `b` name the same VM: equal, or both
/// the UUID form with UUIDs that differ only in case.
pub fn same(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.strip_prefix(SCHEME), b.strip_prefix(SCHEME)) {
        (Some(x), Some(y)) => !x.contains('/') && !y.contains('/') && x.eq_ignore_ascii_case(y),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const UUID_LOWER: &str = "77901403-1ecf-4703-9a6b-617d5a58ba70";
    const UUID_UPPER: &str = "77901403-1ECF-4703-9A6B-617D5A58BA70";

    /// The CCM's parser (sergelogvinov/proxmox-cloud-controller-manager,
    /// `pkg/provider`): `^proxmox://([^/]*)/([^/]+)$`, the second part a
    /// number; written out here with plain string operations.
    fn ccm_parse(id: &str) -> Option<(String, u32)> {
        let rest = id.strip_prefix("proxmox://")?;
        let (region, vmid) = rest.split_once('/')?;
        if vmid.is_empty() || vmid.contains('/') {
            return None;
        }
        Some((region.to_string(), vmid.parse().ok()?))
    }

    #[test]
    fn instance_vmid_is_what_the_ccm_writes_and_parses() {
        let id = provider_id(ProviderIdFormat::InstanceVmid, "dc-b", 131, UUID_LOWER);
        // The CCM's `GetProviderIDFromID(region, vmID)`: "%s://%s/%d".
        assert_eq!(id, format!("{}://{}/{}", "proxmox", "dc-b", 131));
        assert_eq!(ccm_parse(&id), Some(("dc-b".to_string(), 131)));
    }

    #[test]
    fn uuid_is_lower_case_and_not_a_region_vmid_pair() {
        let id = provider_id(ProviderIdFormat::Uuid, "dc-b", 131, UUID_UPPER);
        // The CCM in capmox mode: `GetProviderIDFromUUID(uuid)` with the
        // UUID of smbios1 (lower case, as Proxmox writes it).
        assert_eq!(id, format!("proxmox://{UUID_LOWER}"));
        assert_eq!(
            ccm_parse(&id),
            None,
            "the CCM then finds the VM by name or UUID"
        );
    }

    #[test]
    fn uuids_compare_case_insensitively_other_forms_exactly() {
        let lower = format!("proxmox://{UUID_LOWER}");
        let upper = format!("proxmox://{UUID_UPPER}");
        assert!(
            same(&lower, &upper),
            "B36 n1: an upper-case SystemUUID matches"
        );
        assert!(same("proxmox://dc-b/131", "proxmox://dc-b/131"));
        assert!(!same("proxmox://dc-b/131", "proxmox://DC-B/131"));
        assert!(
            !same(&lower, "proxmox://dc-b/131"),
            "B36 n2: another format"
        );
        assert!(!same(&lower, UUID_LOWER), "no scheme");
    }
}
