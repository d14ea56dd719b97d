//! Referenced kinds → API resources, as CAPI resolves them: the CRD named
//! `<lowercase plural of kind>.<group>` (no discovery), the version from its
//! contract label `cluster.x-k8s.io/v1beta2` (values joined with `_`; the
//! highest Kubernetes-ordered served one wins), else the storage version.
//! Source: CAPI `internal/contract/version.go`, `util/contract`.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;

use crate::error::{E2eError, Result};

/// The contract label CAPI reads on every referenced CRD.
pub const CONTRACT_LABEL: &str = "cluster.x-k8s.io/v1beta2";

/// flect's plural for the kinds CAPI meets (`Machine` → `machines`,
/// `ProxmoxMachineTemplate` → `proxmoxmachinetemplates`, `IPAddress` →
/// `ipaddresses`, `*y` → `*ies`), lowercased.
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s')
        || lower.ends_with('x')
        || lower.ends_with("ch")
        || lower.ends_with("sh")
        || lower.ends_with('z')
    {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y')
        && !stem.ends_with(['a', 'e', 'i', 'o', 'u'])
    {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Kubernetes' version priority (`v1` > `v1beta2` > `v1beta1` > `v1alpha3` >
/// anything else): a key that sorts higher for the preferred version.
pub fn version_priority(v: &str) -> (u8, u64, u64) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u64>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    for (prefix, rank) in [("beta", 2u8), ("alpha", 1u8)] {
        if let Some(n) = tail.strip_prefix(prefix)
            && let Ok(minor) = n.parse::<u64>()
        {
            return (rank, major, minor);
        }
    }
    (0, 0, 0)
}

/// The version CAPI would use for a CRD: the highest served version listed
/// in the contract label, else the storage version.
///
/// # Errors
/// [`E2eError::Contract`] when the CRD serves none of the candidates.
pub fn contract_version(crd: &CustomResourceDefinition) -> Result<String> {
    let served: Vec<&str> = crd
        .spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.as_str())
        .collect();
    let labelled = crd
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(CONTRACT_LABEL))
        .map(|v| v.split('_').map(str::to_string).collect::<Vec<_>>())
        .unwrap_or_default();
    let candidates: Vec<&str> = if labelled.is_empty() {
        crd.spec
            .versions
            .iter()
            .filter(|v| v.storage && v.served)
            .map(|v| v.name.as_str())
            .collect()
    } else {
        labelled
            .iter()
            .map(String::as_str)
            .filter(|v| served.contains(v))
            .collect()
    };
    candidates
        .into_iter()
        .max_by_key(|v| version_priority(v))
        .map(str::to_string)
        .ok_or_else(|| {
            E2eError::Contract(format!(
                "CRD {} serves no version of contract {CONTRACT_LABEL}",
                crd.metadata.name.as_deref().unwrap_or("?")
            ))
        })
}

/// A cache of resolved kinds, shared by every stand-in controller.
pub struct Kinds {
    client: kube::Client,
    cache: Mutex<HashMap<(String, String), ApiResource>>,
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kinds").finish_non_exhaustive()
    }
}

impl Kinds {
    /// A resolver using `client`.
    pub fn new(client: kube::Client) -> Kinds {
        Kinds {
            client,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The API resource of `kind` in `group`.
    ///
    /// # Errors
    /// [`E2eError::Kube`] when the CRD cannot be read (404 when the kind is
    /// not installed), [`E2eError::Contract`] when it serves no usable version.
    pub async fn resolve(&self, group: &str, kind: &str) -> Result<ApiResource> {
        let key = (group.to_string(), kind.to_string());
        if let Some(ar) = self.lock().get(&key) {
            return Ok(ar.clone());
        }
        let plural = plural(kind);
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crd = crds.get(&format!("{plural}.{group}")).await?;
        let version = contract_version(&crd)?;
        let gvk = GroupVersionKind::gvk(group, &version, kind);
        let ar = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        self.lock().insert(key, ar.clone());
        Ok(ar)
    }

    /// A namespaced dynamic API for `kind` in `group`.
    ///
    /// # Errors
    /// As [`Kinds::resolve`].
    pub async fn api(
        &self,
        namespace: &str,
        group: &str,
        kind: &str,
    ) -> Result<Api<DynamicObject>> {
        let ar = self.resolve(group, kind).await?;
        Ok(Api::namespaced_with(self.client.clone(), namespace, &ar))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), ApiResource>> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// Turns an error into [`E2eError::Contract`] when it is a 404, naming the kind.
pub fn not_installed(group: &str, kind: &str, e: E2eError) -> E2eError {
    if e.is_not_found() {
        E2eError::Contract(format!("kind {kind}.{group} is not installed (no CRD)"))
    } else {
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
        CustomResourceDefinitionNames, CustomResourceDefinitionSpec,
        CustomResourceDefinitionVersion,
    };
    use kube::api::ObjectMeta;

    #[test]
    fn plurals_of_the_kinds_capi_references() {
        for (kind, want) in [
            ("Machine", "machines"),
            ("ProxmoxMachineTemplate", "proxmoxmachinetemplates"),
            ("IPAddress", "ipaddresses"),
            ("KubeadmControlPlane", "kubeadmcontrolplanes"),
            ("Policy", "policies"),
            ("Gateway", "gateways"),
            ("Box", "boxes"),
        ] {
            assert_eq!(plural(kind), want, "{kind}");
        }
    }

    #[test]
    fn version_order() {
        let mut v = vec![
            "v1alpha3",
            "v1",
            "v1beta1",
            "v2",
            "v1beta2",
            "v1alpha10",
            "x",
        ];
        v.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            v,
            [
                "v2",
                "v1",
                "v1beta2",
                "v1beta1",
                "v1alpha10",
                "v1alpha3",
                "x"
            ]
        );
    }

    fn crd(label: Option<&str>, versions: &[(&str, bool, bool)]) -> CustomResourceDefinition {
        CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some("proxmoxmachines.infrastructure.cluster.x-k8s.io".into()),
                labels: label.map(|l| [(CONTRACT_LABEL.to_string(), l.to_string())].into()),
                ..ObjectMeta::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: "infrastructure.cluster.x-k8s.io".into(),
                names: CustomResourceDefinitionNames {
                    kind: "ProxmoxMachine".into(),
                    plural: "proxmoxmachines".into(),
                    ..CustomResourceDefinitionNames::default()
                },
                scope: "Namespaced".into(),
                versions: versions
                    .iter()
                    .map(|(n, served, storage)| CustomResourceDefinitionVersion {
                        name: (*n).into(),
                        served: *served,
                        storage: *storage,
                        ..CustomResourceDefinitionVersion::default()
                    })
                    .collect(),
                ..CustomResourceDefinitionSpec::default()
            },
            status: None,
        }
    }

    #[test]
    fn contract_label_picks_highest_served_listed_version() {
        let c = crd(
            Some("v1alpha2_v1alpha3"),
            &[
                ("v1alpha2", true, false),
                ("v1alpha3", true, true),
                ("v1beta1", true, false),
            ],
        );
        assert_eq!(contract_version(&c).unwrap(), "v1alpha3");
        // A listed version that is not served does not count.
        let c = crd(
            Some("v1alpha3_v1beta1"),
            &[("v1alpha3", true, true), ("v1beta1", false, false)],
        );
        assert_eq!(contract_version(&c).unwrap(), "v1alpha3");
        // No label: the storage version.
        let c = crd(None, &[("v1beta1", true, false), ("v1beta2", true, true)]);
        assert_eq!(contract_version(&c).unwrap(), "v1beta2");
        // Nothing usable: a contract error naming the CRD.
        let c = crd(Some("v1"), &[("v1alpha3", true, true)]);
        assert_eq!(
            contract_version(&c).unwrap_err().to_string(),
            "CRD proxmoxmachines.infrastructure.cluster.x-k8s.io serves no version of contract cluster.x-k8s.io/v1beta2"
        );
    }
}
