//! The webhook server behind kube-sim, configured by
//! `config/webhook/manifests.yaml`: bad specs are refused at the API with the
//! field named (before any Proxmox call), defaults are written down, fields
//! that must not change are refused with a message, and CAPI's topology
//! dry-run may change a machine template.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::cluster as support;
use crate::support::webhook::Webhooks;

use capmox_controller::api::{
    ClusterMode, ProviderIdFormat, ProxmoxCluster, ProxmoxMachine, ProxmoxMachineTemplate,
};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::Status;
use serde_json::{Value, json};
use support::*;

fn status(e: kube::Error) -> Status {
    match e {
        kube::Error::Api(s) => *s,
        other => panic!("not an API error: {other}"),
    }
}

fn fields(s: &Status) -> Vec<String> {
    s.details
        .as_ref()
        .map(|d| d.causes.iter().map(|c| c.field.clone()).collect())
        .unwrap_or_default()
}

/// A refusal by our validating webhook for `kind`, naming `fields`.
fn assert_refused(e: kube::Error, kind: &str, want: &[&str]) -> Status {
    let s = status(e);
    assert_eq!(s.code, 422, "{s:?}");
    let by = format!(
        "admission webhook \"validation.{}.infrastructure.cluster.x-k8s.io\" denied the request: ",
        kind.to_lowercase()
    );
    assert!(s.message.starts_with(&by), "{}", s.message);
    let got = fields(&s);
    for f in want {
        assert!(
            got.iter().any(|g| g == f),
            "{f} not in {got:?}: {}",
            s.message
        );
        assert!(
            s.message.contains(f),
            "{f} not in the message {}",
            s.message
        );
    }
    s
}

fn machine(name: &str, cluster: &str, spec: Value) -> ProxmoxMachine {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": spec
    }))
    .unwrap()
}

#[tokio::test]
async fn bad_specs_are_refused_with_the_field_named_before_any_proxmox_call() {
    let env = Env::start().await;
    let hooks = Webhooks::start(&env).await;
    let pp = PostParams::default();

    // Two mistakes the CRD schema cannot see: a name server that is not an
    // address, and two instances handing out the same addresses.
    let pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "ProxmoxCluster",
        "metadata": {"name": "bad", "namespace": NS},
        "spec": {
            "controlPlaneEndpoint": {"host": "10.99.0.5", "port": 6443},
            "dnsServers": ["dns.example"],
            "settings": {"mode": "MultiInstance", "instances": [
                {"name": "dc-a", "credentialsRef": {"name": "a"},
                 "network": {"ipv4Config": {"addresses": ["10.10.0.10-10.10.0.60"], "prefix": 24, "gateway": "10.10.0.1"}}},
                {"name": "dc-b", "credentialsRef": {"name": "b"},
                 "network": {"ipv4Config": {"addresses": ["10.10.0.50-10.10.0.70"], "prefix": 24, "gateway": "10.10.0.1"}}}
            ]}
        }
    }))
    .unwrap();
    let e = env.pcs().create(&pp, &pc).await.unwrap_err();
    assert_refused(
        e,
        "ProxmoxCluster",
        &[
            "spec.dnsServers[0]",
            "spec.settings.instances[1].network.ipv4Config",
        ],
    );
    assert!(
        env.pcs().get_opt("bad").await.unwrap().is_none(),
        "nothing stored"
    );

    // A disk slot used twice and a node name Proxmox refuses.
    let m = machine(
        "m1",
        "wl",
        json!({"target": "pve_1",
               "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20},
                         "additionalVolumes": [{"disk": "scsi0", "sizeGb": 10}]}}),
    );
    let e = env.machines().create(&pp, &m).await.unwrap_err();
    assert_refused(
        e,
        "ProxmoxMachine",
        &["spec.target", "spec.disks.additionalVolumes[0].disk"],
    );

    // Pinned to an instance its cluster does not list.
    env.create_cluster(
        "wl",
        spec(ClusterMode::MultiInstance, vec![instance("dc-a")]),
    )
    .await;
    let e = env
        .machines()
        .create(&pp, &machine_of("wl", "m2", Some("dc-z")))
        .await
        .unwrap_err();
    let s = assert_refused(e, "ProxmoxMachine", &["spec.instance"]);
    assert!(
        s.message.contains("dc-z") && s.message.contains("dc-a"),
        "{}",
        s.message
    );
    assert!(env.machines().get_opt("m2").await.unwrap().is_none());

    assert_eq!(pve_calls(&env), 0, "no Proxmox call");
    let metrics = hooks.metrics.encode();
    assert!(
        metrics.contains(
            "capmox_webhook_requests_total{webhook=\"validate\",kind=\"ProxmoxMachine\",outcome=\"denied\"} 2"
        ),
        "{metrics}"
    );
    hooks.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn defaults_are_written_down_when_objects_are_created() {
    let env = Env::start().await;
    let hooks = Webhooks::start(&env).await;
    let pc = env
        .create_cluster(
            "wl",
            spec(ClusterMode::MultiInstance, vec![instance("dc-a")]),
        )
        .await;
    assert_eq!(pc.spec.provider_id_format, Some(ProviderIdFormat::Uuid));
    assert_eq!(
        pc.spec.mode(),
        ClusterMode::MultiInstance,
        "given values stay"
    );
    env.create_machine("wl", "m", Some("dc-a")).await;
    let m = env.machines().get("m").await.unwrap();
    assert_eq!(m.spec.full, Some(true));
    let metrics = hooks.metrics.encode();
    assert!(
        metrics.contains(
            "capmox_webhook_requests_total{webhook=\"mutate\",kind=\"ProxmoxMachine\",outcome=\"patched\"} 1"
        ),
        "{metrics}"
    );
    hooks.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn machines_keep_their_fields_once_the_vm_is_recorded() {
    let env = Env::start().await;
    let hooks = Webhooks::start(&env).await;
    env.create_cluster(
        "wl",
        spec(ClusterMode::MultiInstance, vec![instance("dc-a")]),
    )
    .await;
    env.create_machine("wl", "m", Some("dc-a")).await;
    let pp = PatchParams::default();
    let patch = |v: Value| Patch::Merge(json!({ "spec": v }));
    // What the controller records, and a change before the VM exists.
    env.machines()
        .patch("m", &pp, &patch(json!({"numCores": 2})))
        .await
        .unwrap();
    env.machines()
        .patch("m", &pp, &patch(json!({"virtualMachineID": 1000})))
        .await
        .unwrap();
    let e = env
        .machines()
        .patch("m", &pp, &patch(json!({"numCores": 8})))
        .await
        .unwrap_err();
    let s = assert_refused(e, "ProxmoxMachine", &["spec.numCores"]);
    assert_eq!(s.details.unwrap().causes[0].reason, "FieldValueForbidden");
    let e = env
        .machines()
        .patch("m", &pp, &patch(json!({"virtualMachineID": 1001})))
        .await
        .unwrap_err();
    assert_refused(e, "ProxmoxMachine", &["spec.virtualMachineID"]);
    // Readiness checks may still change.
    env.machines()
        .patch(
            "m",
            &pp,
            &patch(json!({"checks": {"skipCloudInitStatus": true}})),
        )
        .await
        .unwrap();
    hooks.stop().await;
    env.stop().await;
}

/// docs/field-cases.md B45: a template webhook that refused every spec
/// change also refused the topology controller's dry-run apply and wedged
/// ClusterClass upgrades; the dry-run annotation lets the change through.
#[tokio::test]
async fn machine_templates_are_immutable_except_in_the_topology_dry_run() {
    let env = Env::start().await;
    let hooks = Webhooks::start(&env).await;
    let api: Api<ProxmoxMachineTemplate> = Api::namespaced(env.kube.clone(), NS);
    let t: ProxmoxMachineTemplate = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha3", "kind": "ProxmoxMachineTemplate",
        "metadata": {"name": "t", "namespace": NS},
        "spec": {"template": {"spec": {"numCores": 2}}}
    }))
    .unwrap();
    api.create(&PostParams::default(), &t).await.unwrap();
    let change = |annotated: bool| {
        let mut p = json!({"spec": {"template": {"spec": {"numCores": 4}}}});
        if annotated {
            p["metadata"] = json!({"annotations": {"topology.cluster.x-k8s.io/dry-run": ""}});
        }
        Patch::Merge(p)
    };
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    // (1) CAPI's topology dry-run: allowed (and nothing stored).
    let seen = api.patch("t", &dry, &change(true)).await.unwrap();
    assert_eq!(seen.spec.template.spec.num_cores, Some(4));
    assert_eq!(
        api.get("t").await.unwrap().spec.template.spec.num_cores,
        Some(2)
    );
    // (2) `kubectl apply --dry-run=server`: refused as immutable.
    let e = api.patch("t", &dry, &change(false)).await.unwrap_err();
    assert_refused(
        e,
        "ProxmoxMachineTemplate",
        &["spec.template.spec.numCores"],
    );
    // (3) a real update, even annotated: refused with the field path.
    let e = api
        .patch("t", &PatchParams::default(), &change(true))
        .await
        .unwrap_err();
    let s = assert_refused(
        e,
        "ProxmoxMachineTemplate",
        &["spec.template.spec.numCores"],
    );
    assert!(
        s.message.contains("create a new ProxmoxMachineTemplate"),
        "{}",
        s.message
    );
    hooks.stop().await;
    env.stop().await;
}

#[tokio::test]
async fn objects_written_before_the_webhook_can_still_lose_their_finalizers() {
    let env = Env::start().await;
    // Written while no webhook ran: a node name Proxmox refuses.
    let m = machine("old", "wl", json!({"target": "pve_1"}));
    env.machines()
        .create(&PostParams::default(), &m)
        .await
        .unwrap();
    let hooks = Webhooks::start(&env).await;
    let pp = PatchParams::default();
    env.machines()
        .patch(
            "old",
            &pp,
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/keep"]}})),
        )
        .await
        .unwrap();
    env.machines()
        .patch(
            "old",
            &pp,
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    // A spec change is judged, the old mistake included.
    let e = env
        .machines()
        .patch("old", &pp, &Patch::Merge(json!({"spec": {"numCores": 2}})))
        .await
        .unwrap_err();
    assert_refused(e, "ProxmoxMachine", &["spec.target"]);
    hooks.stop().await;
    env.stop().await;
}
