//! The `v1` Node built-in: cluster-scoped, status kept on create (kubelet registers
//! with a status) and reset on main-resource updates, the status subresource, the
//! `spec.unschedulable` field selector, list-map merging of conditions, discovery.

use crate::common::*;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeSpec, NodeStatus};
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;

fn node(name: &str, provider_id: &str) -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some(name.into()),
            labels: Some([("kubernetes.io/hostname".to_string(), name.to_string())].into()),
            ..ObjectMeta::default()
        },
        spec: Some(NodeSpec {
            provider_id: Some(provider_id.into()),
            ..NodeSpec::default()
        }),
        status: Some(NodeStatus {
            // dual stack: two addresses of one type
            addresses: Some(vec![
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: "10.10.0.10".into(),
                },
                NodeAddress {
                    type_: "InternalIP".into(),
                    address: "2001:db8::10".into(),
                },
            ]),
            conditions: Some(vec![NodeCondition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: Some("KubeletReady".into()),
                ..NodeCondition::default()
            }]),
            ..NodeStatus::default()
        }),
    }
}

#[tokio::test]
async fn nodes_register_with_their_status() {
    let (_sim, c) = start().await;
    let nodes: Api<Node> = Api::all(c.clone());
    let created = nodes
        .create(&PostParams::default(), &node("n1", "proxmox://dc-a/1000"))
        .await
        .unwrap();
    assert_eq!(
        created.spec.as_ref().unwrap().provider_id.as_deref(),
        Some("proxmox://dc-a/1000")
    );
    let status = created.status.clone().unwrap();
    let addresses: Vec<String> = status
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| a.address)
        .collect();
    assert_eq!(addresses, vec!["10.10.0.10", "2001:db8::10"]);
    assert_eq!(status.conditions.unwrap()[0].type_, "Ready");
    assert!(created.metadata.namespace.is_none());
    // a second registration under the same name: 409
    match nodes
        .create(&PostParams::default(), &node("n1", "proxmox://other"))
        .await
    {
        Err(kube::Error::Api(e)) => assert_eq!(e.code, 409),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }

    // a main-resource update keeps the stored status; /status changes it
    let mut upd = created.clone();
    upd.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
    upd.spec.as_mut().unwrap().unschedulable = Some(true);
    let after = nodes
        .replace("n1", &PostParams::default(), &upd)
        .await
        .unwrap();
    assert_eq!(
        after.status.as_ref().unwrap().conditions.as_ref().unwrap()[0].status,
        "True"
    );
    assert_eq!(after.spec.as_ref().unwrap().unschedulable, Some(true));
    // conditions merge by type (strategic merge patch, as kubelet's status updates)
    let patched = nodes
        .patch_status(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"status": {"conditions": [{"type": "MemoryPressure", "status": "False"}]}}),
            ),
        )
        .await
        .unwrap();
    let types: Vec<String> = patched
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .map(|c| format!("{}={}", c.type_, c.status))
        .collect();
    assert_eq!(types, vec!["Ready=True", "MemoryPressure=False"]);

    // field selector and scope
    nodes
        .create(&PostParams::default(), &node("n2", "proxmox://dc-a/1001"))
        .await
        .unwrap();
    let cordoned = nodes
        .list(&ListParams::default().fields("spec.unschedulable=true"))
        .await
        .unwrap();
    assert_eq!(
        cordoned
            .items
            .iter()
            .map(|n| n.metadata.name.clone().unwrap())
            .collect::<Vec<_>>(),
        vec!["n1"]
    );
    assert_eq!(
        call(&c, "GET", "/api/v1/namespaces/default/nodes", None, None)
            .await
            .code,
        404
    );
    let d = call(&c, "GET", "/api/v1", None, None).await;
    let entry = d.body["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "nodes")
        .cloned()
        .unwrap();
    assert_eq!(
        (&entry["kind"], &entry["namespaced"], &entry["shortNames"]),
        (&json!("Node"), &json!(false), &json!(["no"]))
    );
}
