//! The kubeadm bootstrap provider (CABPK), for our objects.
//!
//! For each KubeadmConfig owned by a Machine: a Secret `<machine>-bootstrap`
//! with key `value` (the bootstrap data) and key `format` (`cloud-config` or
//! `ignition`, from `spec.format`), type `cluster.x-k8s.io/secret`, labelled
//! `cluster.x-k8s.io/cluster-name` and controller-owned by the KubeadmConfig
//! (which the Machine owns), then `status.dataSecretName` and
//! `status.initialization.dataSecretCreated`. Control-plane Machines get their
//! data at once; worker Machines only once the Cluster reports
//! `status.initialization.controlPlaneInitialized` (CABPK's behaviour: a join
//! needs a running control plane).
//!
//! Simpler than CABPK: no bootstrap tokens, certificates or kubeadm
//! configuration files — the data is a small cloud-config naming the Machine
//! (so a test can check it arrived intact in the VM's seed ISO), the
//! config's `users` and `files`, and which kubeadm phase would run. With
//! `format: ignition` it is, as CABPK writes it for Flatcar, an Ignition
//! spec 2.3.0 config: the same files (`filesystem: root`, `data:,` URLs),
//! the users, and an enabled `kubeadm.service` whose command would run the
//! phase and write the bootstrap sentinel (`ignition.containerLinuxConfig`
//! is not transpiled).

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use serde_json::{Value, json};

use super::meta::{self, CLUSTER_NAME_LABEL, CONTROL_PLANE_LABEL, is_deleting, owner_of};
use super::{Ctx, error_policy, ticker};
use crate::crds::bootstrap::{KubeadmConfig, KubeadmConfigInitialization, KubeadmConfigStatus};
use crate::crds::{BOOTSTRAP_GROUP, CLUSTER_GROUP, Cluster, Machine};
use crate::error::{E2eError, Result};

/// The Secret type CABPK uses.
pub const SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

/// Runs the controller until aborted.
pub(crate) async fn run(ctx: Arc<Ctx>) {
    let wc = watcher::Config::default();
    let controller = Controller::new(ctx.scoped::<KubeadmConfig>(), wc.clone());
    let store = controller.store();
    let seen_machines = ctx.clone();
    let seen_clusters = ctx.clone();
    controller
        .watches(ctx.scoped::<Machine>(), wc.clone(), move |m| {
            let ns = m.namespace();
            let r = m
                .spec
                .bootstrap
                .config_ref
                .as_ref()
                .filter(|r| r.api_group == BOOTSTRAP_GROUP && r.kind == "KubeadmConfig")
                .map(|r| {
                    let o = ObjectRef::<KubeadmConfig>::new(&r.name);
                    match ns {
                        Some(ns) => o.within(&ns),
                        None => o,
                    }
                });
            seen_machines.seen.machines.observe(m);
            r
        })
        .watches(ctx.scoped::<Cluster>(), wc, move |c| {
            let ns = c.namespace();
            let name = c.name_any();
            let refs = store
                .state()
                .into_iter()
                .filter(|k| {
                    k.namespace() == ns
                        && meta::label(&k.metadata, CLUSTER_NAME_LABEL) == Some(name.as_str())
                })
                .map(|k| ObjectRef::from_obj(&*k))
                .collect::<Vec<_>>();
            seen_clusters.seen.clusters.observe(c);
            refs
        })
        .reconcile_all_on(ticker(ctx.opts.resync))
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

/// The name of a Machine's bootstrap data Secret.
pub fn secret_name(machine: &str) -> String {
    format!("{machine}-bootstrap")
}

/// The bootstrap data for a Machine: a cloud-config (or an Ignition config
/// when `format` is `ignition`) naming the Machine, with the config's
/// `users` and `files`.
///
/// # Errors
/// [`E2eError::Yaml`] if the cloud-config cannot be serialised.
pub fn render(
    namespace: &str,
    machine: &str,
    cluster: &str,
    control_plane: bool,
    first: bool,
    spec: &serde_json::Map<String, Value>,
) -> Result<String> {
    let phase = match (control_plane, first) {
        (true, true) => "init",
        (true, false) => "join --control-plane",
        (false, _) => "join",
    };
    let marker = format!("{namespace}/{machine}");
    let mut files = vec![json!({
        "path": "/etc/capmox-e2e/machine",
        "content": format!("{marker}\n"),
        "permissions": "0644",
    })];
    for f in spec
        .get("files")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut entry = serde_json::Map::new();
        for key in ["path", "content", "owner", "permissions", "encoding"] {
            if let Some(v) = f.get(key) {
                entry.insert(key.into(), v.clone());
            }
        }
        files.push(Value::Object(entry));
    }
    let users: Vec<Value> = spec
        .get("users")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|u| {
            let mut out = serde_json::Map::new();
            if let Some(n) = u.get("name") {
                out.insert("name".into(), n.clone());
            }
            if let Some(s) = u.get("sudo") {
                out.insert("sudo".into(), s.clone());
            }
            if let Some(k) = u
                .get("sshAuthorizedKeys")
                .filter(|k| k.as_array().is_some_and(|a| !a.is_empty()))
            {
                out.insert("ssh_authorized_keys".into(), k.clone());
            }
            Value::Object(out)
        })
        .collect();
    let command = format!(
        "echo 'kubeadm {phase} of {marker} (cluster {cluster}) is simulated by the capmox-e2e stand-in'"
    );
    let format = spec
        .get("format")
        .and_then(Value::as_str)
        .unwrap_or("cloud-config");
    if format == "ignition" {
        let files: Vec<Value> = files
            .iter()
            .map(|f| {
                json!({
                    "filesystem": "root",
                    "path": f["path"],
                    "mode": 420,
                    "contents": {"source": format!("data:,{}", percent(f["content"].as_str().unwrap_or("")))}
                })
            })
            .collect();
        let users: Vec<Value> = users
            .iter()
            .map(|u| {
                let mut out = json!({"name": u["name"]});
                if let Some(k) = u.get("ssh_authorized_keys") {
                    out["sshAuthorizedKeys"] = k.clone();
                }
                out
            })
            .collect();
        let unit = format!(
            "[Unit]\nDescription=kubeadm\nAfter=network-online.target\n[Service]\nType=oneshot\nExecStart=/bin/sh -c \"{command} && mkdir -p /run/cluster-api && echo success > /run/cluster-api/bootstrap-success.complete\"\n[Install]\nWantedBy=multi-user.target\n"
        );
        let doc = json!({
            "ignition": {"version": "2.3.0"},
            "passwd": {"users": users},
            "storage": {"files": files},
            "systemd": {"units": [{"name": "kubeadm.service", "enabled": true, "contents": unit}]},
        });
        return Ok(serde_json::to_string(&doc)?);
    }
    let mut doc = serde_json::Map::new();
    doc.insert("hostname".into(), json!(machine));
    if !users.is_empty() {
        doc.insert("users".into(), json!(users));
    }
    doc.insert("write_files".into(), json!(files));
    doc.insert("runcmd".into(), json!([command]));
    let yaml = serde_saphyr::to_string(&Value::Object(doc)).map_err(|e| E2eError::Yaml {
        what: format!("bootstrap data of {marker}"),
        message: e.to_string(),
    })?;
    Ok(format!("#cloud-config\n{yaml}"))
}

/// Minimal percent-encoding for an Ignition `data:` URL.
fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~/".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

async fn reconcile(obj: Arc<KubeadmConfig>, ctx: Arc<Ctx>) -> Result<Action> {
    let ns = obj.namespace().unwrap_or_default();
    let api: Api<KubeadmConfig> = ctx.api(&ns);
    // The config as the API server holds it (the watch's copy lags when the
    // stand-in is busy: in objects-1000 configs already deleted were
    // reconciled for minutes, each pass creating a Secret and failing to
    // write their status); its Machine and Cluster as the watches last
    // delivered them (a newer version of either triggers another reconcile).
    let Some(fresh) = api.get_opt(&obj.name_any()).await? else {
        return Ok(Action::await_change());
    };
    let cfg: &KubeadmConfig = &fresh;
    if is_deleting(&cfg.metadata) {
        return Ok(Action::await_change());
    }
    let Some(owner) = owner_of(&cfg.metadata, CLUSTER_GROUP, "Machine") else {
        return Ok(ctx.poll());
    };
    let machine = match ctx.seen.machines.get_typed(&ns, &owner.name) {
        Some(m) => Some((*m).clone()),
        None => ctx.api::<Machine>(&ns).get_opt(&owner.name).await?,
    };
    let Some(machine) = machine else {
        return Ok(ctx.poll());
    };
    let cluster = match ctx.seen.clusters.get_typed(&ns, &machine.spec.cluster_name) {
        Some(c) => Some((*c).clone()),
        None => {
            ctx.api::<Cluster>(&ns)
                .get_opt(&machine.spec.cluster_name)
                .await?
        }
    };
    let Some(cluster) = cluster else {
        return Ok(ctx.poll());
    };
    if cluster.is_paused() || meta::has_paused_annotation(&cfg.metadata) {
        return Ok(ctx.idle());
    }
    let current = cfg.status.clone().unwrap_or_default();
    let secrets: Api<Secret> = ctx.api(&ns);
    let name = secret_name(&machine.name_any());
    if current.data_secret_name.as_deref() == Some(name.as_str())
        && secrets.get_opt(&name).await?.is_some()
    {
        return Ok(ctx.idle());
    }
    let control_plane = meta::label(&machine.metadata, CONTROL_PLANE_LABEL).is_some();
    let mut status = current.clone();
    if !control_plane && !cluster.control_plane_initialized() {
        meta::set_condition(
            &mut status.conditions,
            "DataSecretAvailable",
            false,
            "WaitingForControlPlaneInitialization",
            "worker bootstrap data waits until the control plane is initialized",
        );
        meta::set_condition(
            &mut status.conditions,
            "Ready",
            false,
            "WaitingForControlPlaneInitialization",
            "",
        );
        if status != current {
            meta::patch_status(&api, &cfg.name_any(), serde_json::to_value(&status)?).await?;
        }
        return Ok(ctx.poll());
    }
    let first = control_plane && !cluster.control_plane_initialized();
    let value = render(
        &ns,
        &machine.name_any(),
        &machine.spec.cluster_name,
        control_plane,
        first,
        &cfg.spec.fields,
    )?;
    let secret = Secret {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(ns.clone()),
            labels: Some(BTreeMap::from([(
                CLUSTER_NAME_LABEL.to_string(),
                machine.spec.cluster_name.clone(),
            )])),
            owner_references: Some(vec![meta::owner_ref(
                &KubeadmConfig::api_version(&()),
                "KubeadmConfig",
                &cfg.metadata,
                true,
                true,
            )]),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([
            ("value".to_string(), ByteString(value.into_bytes())),
            (
                "format".to_string(),
                ByteString(cfg.spec.format().as_bytes().to_vec()),
            ),
        ])),
        type_: Some(SECRET_TYPE.into()),
        ..Secret::default()
    };
    match secrets.create(&PostParams::default(), &secret).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let mut status = KubeadmConfigStatus {
        initialization: Some(KubeadmConfigInitialization {
            data_secret_created: Some(true),
        }),
        data_secret_name: Some(name),
        conditions: current.conditions.clone(),
        observed_generation: cfg.metadata.generation,
    };
    meta::set_condition(
        &mut status.conditions,
        "DataSecretAvailable",
        true,
        "Available",
        "",
    );
    meta::set_condition(&mut status.conditions, "Ready", true, "Ready", "");
    meta::patch_status(&api, &cfg.name_any(), serde_json::to_value(&status)?).await?;
    Ok(ctx.idle())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cloud_config_names_the_machine_and_carries_users_and_files() {
        let spec: serde_json::Map<String, Value> = serde_json::from_value(json!({
            "format": "cloud-config",
            "users": [{"name": "capmox", "sudo": "ALL=(ALL) NOPASSWD:ALL", "sshAuthorizedKeys": ["ssh-ed25519 AAAA x"]}],
            "files": [{"path": "/etc/kubernetes/manifests/kube-vip.yaml", "owner": "root:root", "permissions": "0644", "content": "kind: Pod\n"}]
        }))
        .unwrap();
        let text = render("ns", "wl1-cp-abcde", "wl1", true, true, &spec).unwrap();
        assert!(text.starts_with("#cloud-config\n"), "{text}");
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(doc["hostname"], "wl1-cp-abcde");
        assert_eq!(
            doc["users"],
            json!([{"name": "capmox", "sudo": "ALL=(ALL) NOPASSWD:ALL", "ssh_authorized_keys": ["ssh-ed25519 AAAA x"]}])
        );
        assert_eq!(doc["write_files"][0]["path"], "/etc/capmox-e2e/machine");
        assert_eq!(doc["write_files"][0]["content"], "ns/wl1-cp-abcde\n");
        assert_eq!(
            doc["write_files"][1]["path"],
            "/etc/kubernetes/manifests/kube-vip.yaml"
        );
        assert_eq!(
            doc["runcmd"][0],
            "echo 'kubeadm init of ns/wl1-cp-abcde (cluster wl1) is simulated by the capmox-e2e stand-in'"
        );
        let join = render(
            "ns",
            "wl1-md-x",
            "wl1",
            false,
            false,
            &serde_json::Map::new(),
        )
        .unwrap();
        let doc: Value = serde_saphyr::from_str(&join).unwrap();
        assert!(doc.get("users").is_none());
        assert!(
            doc["runcmd"][0]
                .as_str()
                .unwrap()
                .contains("kubeadm join of ns/wl1-md-x")
        );
    }

    #[test]
    fn ignition_format() {
        let spec: serde_json::Map<String, Value> =
            serde_json::from_value(json!({"format": "ignition"})).unwrap();
        let text = render("ns", "m", "c", false, false, &spec).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["ignition"]["version"], "2.3.0");
        assert_eq!(
            doc["storage"]["files"][0]["contents"]["source"],
            "data:,ns/m%0A"
        );
        assert_eq!(doc["storage"]["files"][0]["filesystem"], "root");
        assert_eq!(doc["systemd"]["units"][0]["name"], "kubeadm.service");
        assert!(
            doc["systemd"]["units"][0]["contents"]
                .as_str()
                .unwrap()
                .contains("kubeadm join of ns/m")
        );
    }

    #[test]
    fn secret_names() {
        assert_eq!(secret_name("wl1-md-dc-a-x"), "wl1-md-dc-a-x-bootstrap");
    }
}
