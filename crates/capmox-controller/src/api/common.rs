//! Types shared by the cluster and machine kinds: references, VMID ranges,
//! template sources, IP pool configuration, scheduler hints, conditions.
//!
//! Field names follow the existing Go provider's `v1alpha2` where the concept
//! is the same, so operators recognise them (`docs/templates.md` lists the
//! fields the templates set).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Smallest VMID Proxmox accepts (`pve-vmid` format: 3–9 digits, no leading zero).
pub const VMID_MIN: u32 = 100;
/// Largest VMID Proxmox accepts (`pve-vmid` format).
pub const VMID_MAX: u32 = 999_999_999;

/// A `metav1.Condition`, as CAPI contract v1beta2 expects in `status.conditions`.
pub type Condition = k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// Reference to a Secret holding Proxmox credentials.
///
/// The Secret carries the keys `url` (`https://host:8006`), `token`
/// (`user@realm!tokenid`), `secret` (the token secret), optional `root_ca`
/// (PEM, one or more certificates) and optional `insecure` (`"true"` /
/// `"false"`, default false). When `namespace` is absent the Secret is looked
/// up in the namespace of the object that references it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretRef {
    /// Name of the Secret.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the Secret; defaults to the referencing object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub namespace: Option<String>,
}

/// An inclusive range of VMIDs this provider may use, `start <= end`, both in
/// Proxmox's range 100..=999999999 (`pve-vmid`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.start <= self.end", "message": "vmIDRange.start must not be greater than vmIDRange.end"}
]))]
pub struct VmIdRange {
    /// First VMID of the range (inclusive).
    #[schemars(range(min = 100, max = 999_999_999))]
    pub start: u32,
    /// Last VMID of the range (inclusive).
    #[schemars(range(min = 100, max = 999_999_999))]
    pub end: u32,
}

impl VmIdRange {
    /// Number of VMIDs in the range (0 when inverted).
    pub fn len(&self) -> u64 {
        if self.end < self.start {
            0
        } else {
            u64::from(self.end - self.start) + 1
        }
    }

    /// Whether the range holds no VMID (only when inverted).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `vmid` lies in the range.
    pub fn contains(&self, vmid: u32) -> bool {
        (self.start..=self.end).contains(&vmid)
    }
}

/// How `templateSelector.matchTags` is compared with a template's tags.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum MatchPolicy {
    /// The template's tag set equals `matchTags` exactly (compared case-insensitively).
    #[default]
    Exact,
    /// `matchTags` is a subset of the template's tags and exactly one template matches.
    UniqueSubset,
    /// `matchTags` is a subset of the template's tags; among several matches the one
    /// with the fewest extra tags wins, and a tie is ambiguous.
    BestSubset,
}

/// Selects a template by its Proxmox tags, evaluated over VMs that are templates
/// in one instance. Tags travel between Proxmox clusters; VMIDs do not.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSelector {
    /// Tags the template must carry (Proxmox tag syntax `[a-z0-9_][a-z0-9_+.-]*`, case-insensitive).
    #[schemars(
        length(min = 1, max = 32),
        inner(pattern(r"^[a-zA-Z0-9_][a-zA-Z0-9_+.\-]*$"))
    )]
    pub match_tags: Vec<String>,
    /// Comparison policy; `exact` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_policy: Option<MatchPolicy>,
}

/// Where a VM is cloned from: `templateID` on `sourceNode`, or a tag selector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.templateID) && has(self.sourceNode) && !has(self.templateSelector)) || (has(self.templateSelector) && !has(self.templateID))",
     "message": "a template needs templateID with sourceNode, or templateSelector (not both)"}
]))]
pub struct TemplateSource {
    /// Node that holds the template (with `templateID`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 63))]
    pub source_node: Option<String>,
    /// VMID of the template in this Proxmox cluster.
    #[serde(
        default,
        rename = "templateID",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub template_id: Option<u32>,
    /// Select the template by tags instead of by VMID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,
}

/// Scheduling knobs for node selection.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerHints {
    /// Node memory multiplier in percent used when checking free memory:
    /// 100 = exact, above 100 = overcommit, 0 = ignore memory. Default 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(max = 10000))]
    pub memory_adjustment: Option<u32>,
}

/// A pool of node addresses of one IP family: entries are single addresses,
/// `a-b` ranges or CIDRs, all inside `prefix` around the gateway.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpConfig {
    /// Pool entries: `10.0.0.10`, `10.0.0.10-10.0.0.50`, `10.0.0.64/27`.
    #[schemars(length(min = 1, max = 64), inner(length(min = 2, max = 100)))]
    pub addresses: Vec<String>,
    /// Prefix length of the node subnet (0..=32 for IPv4, 0..=128 for IPv6).
    #[schemars(range(max = 128))]
    pub prefix: u8,
    /// Default gateway; never allocated. Required for IPv4 pools in practice, optional
    /// for IPv6 (router advertisements may provide the route).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 2, max = 39))]
    pub gateway: Option<String>,
    /// Route metric for the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metric: Option<u32>,
}

/// A typed reference to an IP pool of any IPAM provider
/// (`ipam.cluster.x-k8s.io` contract), e.g. `InClusterIPPool`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpPoolReference {
    /// API group of the pool kind, e.g. `ipam.cluster.x-k8s.io`.
    #[schemars(length(min = 1, max = 253))]
    pub api_group: String,
    /// Kind of the pool, e.g. `InClusterIPPool` or `GlobalInClusterIPPool`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the pool (in the machine's namespace for namespaced kinds).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The `status.initialization` block of CAPI contract v1beta2.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Initialization {
    /// True once the infrastructure is provisioned; never flips back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// Proxmox tag syntax (`pve-tag`): first character `[a-z0-9_]`, then
/// `[a-z0-9_+.-]`, compared case-insensitively (docs/proxmox-semantics.md
/// §15) — pve-client's [`pve_client::options::Tag`] decides.
pub fn is_valid_tag(tag: &str) -> bool {
    pve_client::options::Tag::new(tag).is_ok()
}

/// DNS-1123 label: lower-case alphanumerics and `-`, starting and ending with an
/// alphanumeric, at most 63 characters.
pub fn is_dns1123_label(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(|b| *b != b'-')
        && bytes.last().is_some_and(|b| *b != b'-')
}

/// Regular expression form of [`is_dns1123_label`], used in CRD schemas.
pub const DNS1123_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_follow_proxmox_syntax() {
        for ok in [
            "capi",
            "ubuntu-24.04",
            "Debian",
            "k8s_1.30",
            "a+b",
            "_x",
            "9",
        ] {
            assert!(is_valid_tag(ok), "{ok} should be valid");
        }
        for bad in [
            "-lead",
            ".lead",
            "has space",
            "semi;colon",
            "comma,tag",
            "",
            "tag\n",
        ] {
            assert!(!is_valid_tag(bad), "{bad:?} should be invalid");
        }
    }

    #[test]
    fn dns_labels() {
        assert!(is_dns1123_label("dc-a"));
        assert!(is_dns1123_label("a"));
        assert!(!is_dns1123_label("DC-A"));
        assert!(!is_dns1123_label("-a"));
        assert!(!is_dns1123_label("a-"));
        assert!(!is_dns1123_label(&"a".repeat(64)));
    }

    #[test]
    fn vmid_range_len() {
        assert_eq!(
            VmIdRange {
                start: 100,
                end: 199
            }
            .len(),
            100
        );
        assert_eq!(
            VmIdRange {
                start: 200,
                end: 100
            }
            .len(),
            0
        );
        assert!(
            VmIdRange {
                start: 100,
                end: 100
            }
            .contains(100)
        );
    }
}
