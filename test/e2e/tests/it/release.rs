//! `make release` writes a clusterctl local repository
//! (`infrastructure-proxmox/<version>/`); the test reads it as `clusterctl
//! init` and `clusterctl generate cluster` would: the components file with
//! its variables rendered, exactly one Namespace holding every namespaced
//! object, the four CRDs with the contract label `metadata.yaml` declares,
//! the RBAC and one manager Deployment whose container `manager` runs the
//! release's image, the provider label on every object, and every flavor of
//! `templates/`. `metadata.yaml` agrees with the CRD labels; the webhook pieces (Service,
//! cert-manager Issuer and Certificate, webhook configurations with the CA
//! injection annotation, the certificate volume and port) fit together.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use capmox_e2e::{clusterctl, setup};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `*.yaml` file under `config/`, any depth: what the release must carry.
fn config_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            config_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "yaml") {
            out.push(p);
        }
    }
}

#[test]
fn release_folder_is_a_clusterctl_repository() {
    let out = std::env::temp_dir().join(format!("capmox-release-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let repo = setup::build_release(&out).unwrap();
    let version = format!("v{}", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        repo,
        out.join("infrastructure-proxmox").join(&version),
        "clusterctl's layout: <type>-<name>/<version>/"
    );

    // The files clusterctl fetches, every flavor of templates/ and the
    // ClusterClasses they name (clusterctl fetches `clusterclass-<name>.yaml`).
    let mut want: BTreeSet<String> = ["infrastructure-components.yaml", "metadata.yaml"]
        .map(String::from)
        .into();
    for e in std::fs::read_dir(root().join("templates")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if (name.starts_with("cluster-template") || name.starts_with("clusterclass-"))
            && name.ends_with(".yaml")
        {
            want.insert(name);
        }
    }
    assert!(want.contains("cluster-template.yaml"));
    assert!(want.contains("clusterclass-capmox.yaml"));
    let got: BTreeSet<String> = std::fs::read_dir(&repo)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(got, want);
    for name in want
        .iter()
        .filter(|n| n.starts_with("cluster-template") || n.starts_with("clusterclass-"))
    {
        assert_eq!(
            std::fs::read(repo.join(name)).unwrap(),
            std::fs::read(root().join("templates").join(name)).unwrap(),
            "{name}"
        );
    }

    // The components' variables: each optional (a default), as clusterctl
    // lists them for `clusterctl init`.
    let text = std::fs::read_to_string(repo.join("infrastructure-components.yaml")).unwrap();
    let vars = clusterctl::variables(&text).unwrap();
    assert!(!vars.is_empty());
    for v in &vars {
        assert!(v.default.is_some(), "{} has no default", v.name);
    }
    let docs = setup::release_components(&repo, &BTreeMap::new()).unwrap();
    let of = |kind: &str| {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .collect::<Vec<_>>()
    };

    // Every object of config/ is released: as many documents as the files hold.
    let mut files = Vec::new();
    config_files(&root().join("config"), &mut files);
    let in_config: usize = files
        .iter()
        .map(|f| {
            serde_saphyr::from_multiple::<Value>(&std::fs::read_to_string(f).unwrap())
                .unwrap()
                .into_iter()
                .filter(|d| d.get("kind").is_some())
                .count()
        })
        .sum();
    assert_eq!(docs.len(), in_config, "objects of config/ vs the release");
    assert_eq!(docs[0]["kind"], "Namespace", "the namespace comes first");

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
    // The contract of metadata.yaml's release series for this version is
    // the label every CRD carries (clusterctl checks it on init).
    let meta: Value =
        serde_saphyr::from_str(&std::fs::read_to_string(repo.join("metadata.yaml")).unwrap())
            .unwrap();
    let mut parts = env!("CARGO_PKG_VERSION").split('.');
    let (major, minor): (u64, u64) = (
        parts.next().unwrap().parse().unwrap(),
        parts.next().unwrap().parse().unwrap(),
    );
    let series = meta["releaseSeries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["major"] == major && s["minor"] == minor)
        .unwrap_or_else(|| panic!("metadata.yaml has no release series for {version}"));
    let contract = series["contract"].as_str().unwrap();
    for c in &crds {
        let label = format!("cluster.x-k8s.io/{contract}");
        assert!(
            c["metadata"]["labels"][label.as_str()].is_string(),
            "{} lacks {label}",
            c["metadata"]["name"]
        );
    }
    // The manager: one Deployment, container `manager`, the release's image.
    let deploy = of("Deployment");
    assert_eq!(deploy.len(), 1);
    let containers = deploy[0]["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap();
    assert_eq!(containers.len(), 1);
    assert_eq!(containers[0]["name"], "manager");
    assert_eq!(
        containers[0]["image"],
        format!("ghcr.io/capmox-rs/capmox-controller:{version}")
    );
    assert_eq!(
        containers[0]["securityContext"]["readOnlyRootFilesystem"],
        true
    );
    let pod_security = &deploy[0]["spec"]["template"]["spec"]["securityContext"];
    assert_eq!(pod_security["runAsNonRoot"], true);
    assert_eq!(pod_security["runAsUser"], 65532, "the image's user");
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

/// clusterctl refuses a release whose version no release series of
/// `metadata.yaml` covers, so `make release` refuses it first and writes
/// nothing.
#[test]
fn release_of_a_version_outside_every_release_series_is_refused() {
    let out = std::env::temp_dir().join(format!("capmox-release-series-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let output = std::process::Command::new("bash")
        .arg(root().join("scripts/release.sh"))
        .env("OUT_DIR", &out)
        .env("VERSION", "v97.3.0")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "v97.3.0 was released: {stderr}");
    assert!(
        stderr.contains("97.3"),
        "the refusal names the missing series: {stderr}"
    );
    assert!(!out.exists(), "nothing is written for a refused release");
}
