//! `make release-manifests` assembles a clusterctl components file with
//! exactly one Namespace, the four CRDs carrying the contract label, the RBAC,
//! the manager Deployment and the webhook pieces (Service, cert-manager
//! Issuer and Certificate, webhook configurations with the CA injection
//! annotation, the certificate volume and port); `metadata.yaml` agrees with
//! the CRD labels.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

use capmox_e2e::clusterctl;
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn assemble() -> (String, PathBuf) {
    let out = std::env::temp_dir().join(format!("capmox-release-{}", std::process::id()));
    let status = Command::new("sh")
        .arg(root().join("scripts/release-manifests.sh"))
        .env("OUT_DIR", &out)
        .env("VERSION", "v0.1.0")
        .status()
        .unwrap();
    assert!(status.success());
    let text = std::fs::read_to_string(out.join("infrastructure-components.yaml")).unwrap();
    (text, out)
}

#[test]
fn components_file_is_what_clusterctl_expects() {
    let (text, out) = assemble();
    // clusterctl renders the components with the same variable rules; the
    // default-credentials variables are optional.
    let rendered = clusterctl::render(&text, &BTreeMap::new()).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&rendered).unwrap();
    let of = |kind: &str| {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .collect::<Vec<_>>()
    };

    let ns = of("Namespace");
    assert_eq!(ns.len(), 1, "exactly one Namespace");
    let ns_name = ns[0]["metadata"]["name"].as_str().unwrap();
    assert_eq!(ns_name, "capmox-system");

    let crds = of("CustomResourceDefinition");
    let mut names: Vec<&str> = crds
        .iter()
        .map(|c| c["metadata"]["name"].as_str().unwrap())
        .collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "proxmoxclusters.infrastructure.cluster.x-k8s.io",
            "proxmoxclustertemplates.infrastructure.cluster.x-k8s.io",
            "proxmoxmachines.infrastructure.cluster.x-k8s.io",
            "proxmoxmachinetemplates.infrastructure.cluster.x-k8s.io",
        ]
    );
    for c in &crds {
        assert_eq!(
            c["metadata"]["labels"]["cluster.x-k8s.io/v1beta2"],
            "v1alpha2_v1alpha3"
        );
    }

    let deploy = of("Deployment");
    assert_eq!(deploy.len(), 1);
    let containers = deploy[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "manager");
    assert_eq!(
        containers[0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
    assert_eq!(
        deploy[0]["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"],
        true
    );
    assert!(
        containers[0]["livenessProbe"].is_object() && containers[0]["readinessProbe"].is_object()
    );

    assert_eq!(of("ClusterRole").len(), 1);
    assert_eq!(of("ClusterRoleBinding").len(), 1);
    assert_eq!(of("ServiceAccount").len(), 1);

    // Every namespaced object lives in the one namespace.
    for d in &docs {
        let kind = d["kind"].as_str().unwrap();
        if matches!(
            kind,
            "Namespace"
                | "CustomResourceDefinition"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "MutatingWebhookConfiguration"
                | "ValidatingWebhookConfiguration"
        ) {
            continue;
        }
        assert_eq!(
            d["metadata"]["namespace"], ns_name,
            "{kind} is outside {ns_name}"
        );
    }
    // Every object carries the provider label (parity with clusterctl).
    for d in &docs {
        if d["kind"] == "CustomResourceDefinition" {
            continue;
        }
        assert_eq!(
            d["metadata"]["labels"]["cluster.x-k8s.io/provider"], "infrastructure-proxmox",
            "{}",
            d["kind"]
        );
    }

    webhook_pieces_fit_together(&of);

    // The local clusterctl repository layout.
    let repo = out.join("infrastructure-proxmox/v0.1.0");
    for f in [
        "infrastructure-components.yaml",
        "metadata.yaml",
        "cluster-template.yaml",
        "cluster-template-multi-instance.yaml",
    ] {
        assert!(repo.join(f).is_file(), "{f} missing in {}", repo.display());
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// The webhook Service, the Certificate, the Deployment and the webhook
/// configurations name each other consistently, and every route the
/// controller serves is configured exactly once.
fn webhook_pieces_fit_together<'a>(of: &impl Fn(&str) -> Vec<&'a Value>) {
    use capmox_controller::webhook::Kind;
    let service = of("Service")
        .into_iter()
        .find(|s| s["metadata"]["name"] == "capmox-webhook-service")
        .expect("the webhook Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "webhook-server");
    let issuer = of("Issuer");
    assert_eq!(issuer.len(), 1);
    assert!(issuer[0]["spec"]["selfSigned"].is_object());
    let cert = of("Certificate");
    assert_eq!(cert.len(), 1);
    assert_eq!(
        cert[0]["spec"]["issuerRef"]["name"],
        issuer[0]["metadata"]["name"]
    );
    let dns: Vec<&str> = cert[0]["spec"]["dnsNames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap())
        .collect();
    assert!(
        dns.contains(&"capmox-webhook-service.capmox-system.svc"),
        "{dns:?}"
    );
    let secret = cert[0]["spec"]["secretName"].as_str().unwrap();
    let inject = format!(
        "capmox-system/{}",
        cert[0]["metadata"]["name"].as_str().unwrap()
    );

    let pod = &of("Deployment")[0]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(args.contains(&"--webhook-addr=0.0.0.0:9443"), "{args:?}");
    assert!(
        container["ports"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "webhook-server" && p["containerPort"] == 9443)
    );
    let mount = container["volumeMounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == "/tmp/k8s-webhook-server/serving-certs")
        .expect("the certificate mount");
    let volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .expect("the certificate volume");
    assert_eq!(volume["secret"]["secretName"], secret);

    let mut paths = Vec::new();
    for kind in [
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ] {
        let c = of(kind);
        assert_eq!(c.len(), 1, "{kind}");
        assert_eq!(
            c[0]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], inject,
            "{kind}"
        );
        for w in c[0]["webhooks"].as_array().unwrap() {
            let svc = &w["clientConfig"]["service"];
            assert_eq!(svc["name"], "capmox-webhook-service");
            assert_eq!(svc["namespace"], "capmox-system");
            assert_eq!(w["failurePolicy"], "Fail");
            assert_eq!(w["sideEffects"], "None");
            assert_eq!(w["admissionReviewVersions"], serde_json::json!(["v1"]));
            paths.push(svc["path"].as_str().unwrap().to_string());
        }
    }
    let mut served: Vec<String> = Kind::ALL
        .iter()
        .flat_map(|k| [k.mutate_path(), k.validate_path()])
        .collect();
    served.sort();
    paths.sort();
    assert_eq!(paths, served, "one webhook per route");
}

#[test]
fn rbac_is_least_privilege() {
    let role: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(root().join("config/rbac/role.yaml")).unwrap(),
    )
    .unwrap();
    for rule in role["rules"].as_array().unwrap() {
        for list in ["apiGroups", "resources", "verbs"] {
            for item in rule[list].as_array().unwrap() {
                assert_ne!(item, "*", "wildcard {list} in {rule}");
            }
        }
        let groups = rule["apiGroups"].as_array().unwrap();
        if groups.iter().any(|g| {
            g == "cluster.x-k8s.io"
                || g == "ipam.cluster.x-k8s.io" && rule["resources"][0] == "ipaddresses"
        }) {
            let verbs: Vec<&str> = rule["verbs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect();
            assert_eq!(verbs, ["get", "list", "watch"], "read-only for {rule}");
        }
    }
}

#[test]
fn metadata_declares_the_contract_of_the_crd_labels() {
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(root().join("metadata.yaml")).unwrap())
            .unwrap();
    assert_eq!(meta["apiVersion"], "clusterctl.cluster.x-k8s.io/v1alpha3");
    assert_eq!(meta["kind"], "Metadata");
    let series = meta["releaseSeries"].as_array().unwrap();
    assert!(!series.is_empty());
    assert!(series.iter().all(|s| s["contract"] == "v1beta2"));
    let version = env!("CARGO_PKG_VERSION");
    let mut parts = version.split('.');
    let (major, minor): (u64, u64) = (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    assert!(
        series
            .iter()
            .any(|s| s["major"] == major && s["minor"] == minor),
        "metadata.yaml has no release series for {version}"
    );
}
