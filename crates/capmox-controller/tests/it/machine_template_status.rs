//! `ProxmoxMachineTemplate.status.capacity` / `nodeInfo` written for the
//! cluster autoscaler's scale-from-zero, through kube-sim.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use capmox_controller::api::{
    ProxmoxMachineSpec, ProxmoxMachineTemplate, ProxmoxMachineTemplateResource,
    ProxmoxMachineTemplateSpec,
};
use capmox_controller::context::{ControllerOptions, Shared};
use capmox_controller::metrics::Metrics;
use kube::Api;
use kube::api::PostParams;
use kube::runtime::events::Reporter;
use kube_sim::{KubeSim, KubeSimOptions};

#[tokio::test]
async fn capacity_and_node_info_are_written_once() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let kube = KubeSim::start(KubeSimOptions::default()).await.unwrap();
    for crd in capmox_controller::api::crd::all() {
        kube.install_crd_yaml(&capmox_controller::api::crd::to_yaml(&crd).unwrap())
            .unwrap();
    }
    let client = kube.client().await.unwrap();
    let (shared, _stop) = Shared::new(
        client.clone(),
        ControllerOptions::default(),
        Arc::new(Metrics::new()),
        Reporter {
            controller: "capmox-controller".into(),
            instance: None,
        },
        None,
    );
    let shared = Arc::new(shared);
    let api: Api<ProxmoxMachineTemplate> = Api::namespaced(client, "default");
    let mut t = ProxmoxMachineTemplate::new(
        "md-0",
        ProxmoxMachineTemplateSpec {
            template: ProxmoxMachineTemplateResource {
                metadata: None,
                spec: ProxmoxMachineSpec {
                    num_sockets: Some(2),
                    num_cores: Some(2),
                    memory_mib: Some(6144),
                    ..ProxmoxMachineSpec::default()
                },
            },
        },
    );
    t.metadata.namespace = Some("default".into());
    let created = api.create(&PostParams::default(), &t).await.unwrap();
    capmox_controller::template_status::reconcile(Arc::new(created), shared.clone())
        .await
        .unwrap();
    let got = api.get("md-0").await.unwrap();
    assert_eq!(
        serde_json::to_value(got.status.as_ref().unwrap()).unwrap(),
        serde_json::json!({
            "capacity": {"cpu": "4", "memory": "6144Mi"},
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
        })
    );
    // A second reconcile writes nothing (the resourceVersion stays).
    let rv = got.metadata.resource_version.clone();
    capmox_controller::template_status::reconcile(Arc::new(got), shared)
        .await
        .unwrap();
    assert_eq!(api.get("md-0").await.unwrap().metadata.resource_version, rv);
}
