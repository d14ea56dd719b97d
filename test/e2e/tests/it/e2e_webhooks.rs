//! The controller binary's webhook server, called by the management cluster
//! over HTTPS as kube-apiserver calls it (the configurations of
//! `config/webhook/manifests.yaml`, the CA injected as cert-manager does):
//! bad specs of the four kinds, applied as `kubectl apply --server-side`
//! applies them, are refused with the field named before any Proxmox call;
//! `v1alpha2` objects (CAPMOX's) with a field this provider cannot carry out
//! are refused by the conversion webhook, naming the field; a valid
//! template is stored with its defaults written down and cannot be changed
//! afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use capmox_e2e::E2eError;
use capmox_e2e::env::{Env, EnvOptions};
use capmox_e2e::scenario;

const AV: &str = "infrastructure.cluster.x-k8s.io/v1alpha3";

fn ok<T>(r: capmox_e2e::Result<T>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

/// Applies `yaml` and expects our validating webhook for `kind` to refuse
/// it naming every path of `fields`.
async fn refused(env: &Env, kind: &str, yaml: &str, fields: &[&str]) {
    let err = scenario::apply_yaml(&env.client, &env.namespace, kind, yaml)
        .await
        .expect_err("a bad spec was accepted");
    let E2eError::Kube(kube::Error::Api(s)) = err else {
        panic!("{kind}: not refused by the API: {err}");
    };
    assert_eq!(s.code, 422, "{kind}: {s:?}");
    let by = format!(
        "admission webhook \"validation.{}.infrastructure.cluster.x-k8s.io\" denied the request",
        kind.to_lowercase()
    );
    assert!(s.message.starts_with(&by), "{kind}: {}", s.message);
    for f in fields {
        assert!(
            s.message.contains(f),
            "{kind}: {f} not named in {}",
            s.message
        );
    }
}

/// Applies `yaml` (a `v1alpha2` object) and expects the conversion
/// webhook to refuse it, naming `field`.
async fn unconvertible(env: &Env, kind: &str, yaml: &str, field: &str) {
    let err = scenario::apply_yaml(&env.client, &env.namespace, kind, yaml)
        .await
        .expect_err("an unconvertible v1alpha2 object was accepted");
    let E2eError::Kube(kube::Error::Api(s)) = err else {
        panic!("{kind}: not refused by the API: {err}");
    };
    assert_eq!(s.code, 500, "{kind}: {s:?}");
    let by = format!("conversion webhook for {AV}, Kind={kind} failed: ");
    assert!(s.message.starts_with(&by), "{kind}: {}", s.message);
    assert!(
        s.message
            .contains(&format!("{field}: has no v1alpha3 equivalent")),
        "{kind}: {field} not named in {}",
        s.message
    );
}

#[tokio::test]
async fn bad_specs_are_refused_by_the_controllers_webhooks_before_any_proxmox_call() {
    let env = ok(Env::start(EnvOptions::new("webhooks")).await);
    if env.is_real() {
        env.shutdown().await;
        panic!(
            "e2e_webhooks cannot run against a real cluster (E2E_REAL=1): there the controller runs on this machine, out of the API server's reach, with --disable-webhooks, so nothing would call its webhooks. Run it on the simulated backend (without E2E_REAL)."
        );
    }
    let pool = |from: u8, to: u8| {
        format!(
            r#"{{"addresses": ["10.10.0.{from}-10.10.0.{to}"], "prefix": 24, "gateway": "10.10.0.1"}}"#
        )
    };
    refused(
        &env,
        "ProxmoxCluster",
        &format!(
            r#"{{"apiVersion": "{AV}", "kind": "ProxmoxCluster", "metadata": {{"name": "bad"}},
               "spec": {{"controlPlaneEndpoint": {{"host": "10.10.0.5", "port": 6443}},
                        "dnsServers": ["dns.example"],
                        "settings": {{"mode": "MultiInstance", "instances": [
                          {{"name": "dc-a", "credentialsRef": {{"name": "a"}}, "network": {{"ipv4Config": {}}}}},
                          {{"name": "dc-b", "credentialsRef": {{"name": "b"}}, "network": {{"ipv4Config": {}}}}}]}}}}}}"#,
            pool(10, 60),
            pool(50, 70)
        ),
        &["spec.dnsServers[0]", "spec.settings.instances[1].network.ipv4Config"],
    )
    .await;
    refused(
        &env,
        "ProxmoxClusterTemplate",
        &format!(
            r#"{{"apiVersion": "{AV}", "kind": "ProxmoxClusterTemplate", "metadata": {{"name": "bad"}},
               "spec": {{"template": {{"spec": {{"controlPlaneEndpoint": {{"host": "10.10.0.5", "port": 6443}},
                                               "dnsServers": ["dns.example"]}}}}}}}}"#
        ),
        &["spec.template.spec.dnsServers[0]"],
    )
    .await;
    refused(
        &env,
        "ProxmoxMachine",
        &format!(
            r#"{{"apiVersion": "{AV}", "kind": "ProxmoxMachine", "metadata": {{"name": "bad"}},
               "spec": {{"target": "pve_1", "disks": {{"bootVolume": {{"disk": "scsi0", "sizeGb": 20}},
                        "additionalVolumes": [{{"disk": "scsi0", "sizeGb": 10}}]}}}}}}"#
        ),
        &["spec.target", "spec.disks.additionalVolumes[0].disk"],
    )
    .await;
    refused(
        &env,
        "ProxmoxMachineTemplate",
        &format!(
            r#"{{"apiVersion": "{AV}", "kind": "ProxmoxMachineTemplate", "metadata": {{"name": "bad"}},
               "spec": {{"template": {{"spec": {{"network": {{"networkDevices": [
                 {{"name": "net0", "bridge": "1bridge"}}]}}}}}}}}}}"#
        ),
        &["spec.template.spec.network.networkDevices[0].bridge"],
    )
    .await;
    // CAPMOX's `v1alpha2` with a field this provider cannot carry out: the
    // conversion webhook refuses it, kube-apiserver answers 500 with the
    // webhook's message naming the field.
    unconvertible(
        &env,
        "ProxmoxCluster",
        r#"{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxCluster", "metadata": {"name": "zoned"},
           "spec": {"controlPlaneEndpoint": {"host": "10.10.0.5", "port": 6443}, "dnsServers": ["10.10.0.1"],
                    "ipv4Config": {"addresses": ["10.10.0.10-10.10.0.60"], "prefix": 24, "gateway": "10.10.0.1"},
                    "zoneConfig": [{"zone": "z1", "dnsServers": ["10.10.0.1"]}]}}"#,
        "spec.zoneConfig",
    )
    .await;
    unconvertible(
        &env,
        "ProxmoxMachine",
        r#"{"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine", "metadata": {"name": "multiqueue"},
           "spec": {"sourceNode": "pve-a1", "templateID": 9000,
                    "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio", "queues": 4}]}}}"#,
        "spec.network.networkDevices[0].queues",
    )
    .await;
    for kind in [
        "ProxmoxCluster",
        "ProxmoxClusterTemplate",
        "ProxmoxMachine",
        "ProxmoxMachineTemplate",
    ] {
        let stored = ok(scenario::list(&env.client, &env.namespace, AV, kind).await);
        assert!(stored.is_empty(), "{kind} stored: {stored:?}");
    }

    // A valid template: stored with the defaulting webhook's `full: true`,
    // immutable afterwards.
    let good = format!(
        r#"{{"apiVersion": "{AV}", "kind": "ProxmoxMachineTemplate", "metadata": {{"name": "good"}},
           "spec": {{"template": {{"spec": {{"numCores": 2}}}}}}}}"#
    );
    let applied = ok(scenario::apply_yaml(&env.client, &env.namespace, "template", &good).await);
    assert_eq!(
        applied[0].data.pointer("/spec/template/spec/full"),
        Some(&serde_json::json!(true))
    );
    refused(
        &env,
        "ProxmoxMachineTemplate",
        &good.replace(r#""numCores": 2"#, r#""numCores": 4"#),
        &["spec.template.spec.numCores"],
    )
    .await;

    let calls: u64 = env.pve.clusters().iter().map(|c| c.calls().total).sum();
    assert_eq!(calls, 0, "no Proxmox call");
    env.shutdown().await;
}
