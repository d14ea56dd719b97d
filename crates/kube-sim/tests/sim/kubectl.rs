//! Real `kubectl` against kube-sim: client-side and server-side `apply`, `get -o yaml`,
//! `get -w`, `delete`, and printer columns (`get widgets`, `get proxmoxmachines` with the
//! project's CRDs when `config/crd/bases` exists).
//!
//! `kubectl` is taken from `$KUBECTL` or `PATH`; without it each test fails
//! saying so (`make tools` installs it; `make test` runs `make tools` first).

use crate::common::*;
use kube_sim::KubeSim;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

fn find_kubectl() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KUBECTL").map(PathBuf::from)
        && p.is_file()
    {
        return Some(p);
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("kubectl"))
            .find(|p| p.is_file())
    })
}

struct Kubectl {
    bin: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn new(sim: &KubeSim) -> Kubectl {
        let bin = find_kubectl().unwrap_or_else(|| {
            panic!("kubectl not found in $KUBECTL or PATH (run `make tools`, which installs it)")
        });
        let dir = std::env::temp_dir().join(format!("kube-sim-kubectl-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        sim.write_kubeconfig(&dir.join("kubeconfig")).unwrap();
        Kubectl { bin, dir }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .args(args)
            .env("HOME", &self.dir)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> (bool, String, String) {
        let out = tokio::time::timeout(Duration::from_secs(60), self.command(args).output())
            .await
            .expect("kubectl finished within 60 s")
            .expect("kubectl runs");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    async fn ok(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.run(args).await;
        assert!(ok, "kubectl {args:?} failed:\nstdout: {out}\nstderr: {err}");
        out
    }

    fn write(&self, name: &str, text: &str) -> String {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn read_line(lines: &mut tokio::io::Lines<BufReader<tokio::process::ChildStdout>>) -> String {
    tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("kubectl printed a line")
        .unwrap()
        .unwrap()
}

/// Splits kubectl's table output (header + first row) into (column, cell) pairs by the
/// header's column offsets, so blank cells stay blank.
fn columns_of(out: &str) -> Vec<(String, String)> {
    let mut lines = out.lines();
    let header = lines.next().unwrap_or("");
    let row = lines.next().unwrap_or("");
    let mut starts = Vec::new();
    let bytes = header.as_bytes();
    for i in 0..bytes.len() {
        if bytes[i] != b' ' && (i == 0 || bytes[i - 1] == b' ') {
            starts.push(i);
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(n, &st)| {
            let end = starts.get(n + 1).copied();
            let name = header[st..end.unwrap_or(header.len())].trim().to_string();
            let cell = match end {
                Some(e) => row.get(st..e.min(row.len())).unwrap_or(""),
                None => row.get(st..).unwrap_or(""),
            };
            (name, cell.trim().to_string())
        })
        .collect()
}

const WIDGET_YAML: &str = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: default\nspec:\n  size: 3\n";

#[tokio::test]
async fn kubectl_apply_get_and_delete() {
    let (sim, c) = start().await;
    let k = Kubectl::new(&sim);
    let file = k.write("w1.yaml", WIDGET_YAML);

    // client-side apply: create, then configure
    assert_eq!(
        k.ok(&["apply", "-f", &file]).await.trim(),
        "widget.example.com/w1 created"
    );
    let file2 = k.write("w1.yaml", &WIDGET_YAML.replace("size: 3", "size: 4"));
    assert_eq!(
        k.ok(&["apply", "-f", &file2]).await.trim(),
        "widget.example.com/w1 configured"
    );
    let w = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/w1",
        None,
        None,
    )
    .await
    .body;
    assert_eq!(w["spec"], json!({"size": 4, "color": "red"}));
    assert!(
        w["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"]
            .is_string()
    );

    // get -o yaml
    let yaml = k.ok(&["get", "widget", "w1", "-o", "yaml"]).await;
    let got: Value = serde_saphyr::from_str(&yaml).unwrap();
    assert_eq!(got["kind"], "Widget");
    assert_eq!(got["spec"]["size"], 4);
    assert_eq!(got["metadata"]["uid"], w["metadata"]["uid"]);

    // server-side apply
    let file3 = k.write(
        "w2.yaml",
        &WIDGET_YAML
            .replace("w1", "w2")
            .replace("size: 3", "size: 7"),
    );
    assert_eq!(
        k.ok(&["apply", "--server-side", "-f", &file3]).await.trim(),
        "widget.example.com/w2 serverside-applied"
    );
    let w2 = call(
        &c,
        "GET",
        "/apis/example.com/v1/namespaces/default/widgets/w2",
        None,
        None,
    )
    .await
    .body;
    assert_eq!(w2["spec"]["size"], 7);
    let mf = &w2["metadata"]["managedFields"][0];
    assert_eq!(
        (mf["manager"].as_str(), mf["operation"].as_str()),
        (Some("kubectl"), Some("Apply"))
    );
    // a conflicting server-side apply from another manager fails, --force-conflicts wins
    let file4 = k.write(
        "w2b.yaml",
        &WIDGET_YAML
            .replace("w1", "w2")
            .replace("size: 3", "size: 8"),
    );
    let (ok, _, err) = k
        .run(&[
            "apply",
            "--server-side",
            "--field-manager",
            "other",
            "-f",
            &file4,
        ])
        .await;
    assert!(!ok);
    assert!(err.contains("conflict"), "{err}");
    k.ok(&[
        "apply",
        "--server-side",
        "--field-manager",
        "other",
        "--force-conflicts",
        "-f",
        &file4,
    ])
    .await;

    // invalid objects are refused with the server's message
    let bad = k.write(
        "bad.yaml",
        &WIDGET_YAML
            .replace("w1", "w3")
            .replace("size: 3", "size: 99"),
    );
    let (ok, _, err) = k.run(&["apply", "-f", &bad]).await;
    assert!(!ok);
    assert!(err.contains("should be less than or equal to 10"), "{err}");

    // core kinds go through kubectl's strategic merge patch
    let cm1 = k.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  finalizers: [example.com/keep]\ndata:\n  a: \"1\"\n  b: \"2\"\n");
    assert_eq!(
        k.ok(&["apply", "-f", &cm1]).await.trim(),
        "configmap/settings created"
    );
    let cm2 = k.write("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: default\n  finalizers: [example.com/keep]\ndata:\n  a: \"3\"\n");
    assert_eq!(
        k.ok(&["apply", "-f", &cm2]).await.trim(),
        "configmap/settings configured"
    );
    let cm = call(
        &c,
        "GET",
        "/api/v1/namespaces/default/configmaps/settings",
        None,
        None,
    )
    .await
    .body;
    assert_eq!(cm["data"], json!({"a": "3"}));
    assert_eq!(cm["metadata"]["finalizers"], json!(["example.com/keep"]));
    // re-applying the CRDs (kubectl's merge patch on a built-in API) changes nothing
    let crds = k.write("crds.yaml", WIDGETS);
    let out = k.ok(&["apply", "-f", &crds]).await;
    assert!(
        out.contains("customresourcedefinition.apiextensions.k8s.io/widgets.example.com"),
        "{out}"
    );
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/widgets/w1",
            None,
            None
        )
        .await
        .code,
        200
    );

    // delete
    // kubectl 1.32 prints `... deleted`, 1.37 `... deleted from default namespace`
    let out = k.ok(&["delete", "widget", "w1"]).await;
    assert!(
        out.starts_with("widget.example.com \"w1\" deleted"),
        "{out}"
    );
    assert_eq!(
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/widgets/w1",
            None,
            None
        )
        .await
        .code,
        404
    );
    let (ok, _, err) = k.run(&["get", "widget", "w1"]).await;
    assert!(!ok);
    assert!(err.contains("not found"), "{err}");
}

#[tokio::test]
async fn kubectl_get_shows_printer_columns_and_watches() {
    let (sim, c) = start().await;
    let k = Kubectl::new(&sim);
    create_widget(&c, "w1", 3).await;
    let out = k.ok(&["get", "widgets"]).await;
    let lines: Vec<&str> = out.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, vec!["NAME", "SIZE", "COLOR", "READY", "AGE"]);
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(&row[..3], &["w1", "3", "red"]);
    // short name and core kinds
    assert!(k.ok(&["get", "wd", "w1"]).await.contains("w1"));
    let ns = k.ok(&["get", "namespaces"]).await;
    assert!(ns.lines().next().unwrap().starts_with("NAME"));
    assert!(ns.contains("kube-system"));

    // get -w: the initial row, then a new object's row
    let mut child = k
        .command(&["get", "widgets", "-w"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert!(read_line(&mut lines).await.starts_with("NAME"));
    assert!(read_line(&mut lines).await.starts_with("w1"));
    create_widget(&c, "w2", 5).await;
    let row = read_line(&mut lines).await;
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[..3], &["w2", "5", "red"]);
    child.kill().await.unwrap();
}

#[tokio::test]
async fn kubectl_get_proxmoxmachines_uses_our_printer_columns() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/crd/bases");
    let (sim, c) = start().await;
    let k = Kubectl::new(&sim);
    assert!(sim.install_crds_from_dir(&dir).unwrap() >= 1);
    // the expected header, from the CRD itself: NAME + priority-0 printer columns
    let crd = call(
        &c,
        "GET",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/proxmoxmachines.infrastructure.cluster.x-k8s.io",
        None,
        None,
    )
    .await
    .body;
    let version = crd["spec"]["versions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["storage"] == true)
        .unwrap()
        .clone();
    let columns: Vec<Value> = version["additionalPrinterColumns"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let expected: Vec<String> = std::iter::once("NAME".to_string())
        .chain(
            columns
                .iter()
                .filter(|col| col["priority"].as_i64().unwrap_or(0) == 0)
                .map(|col| col["name"].as_str().unwrap().to_uppercase()),
        )
        .collect();
    let machine = json!({
        "apiVersion": format!("infrastructure.cluster.x-k8s.io/{}", version["name"].as_str().unwrap()),
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m1", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
        "spec": {"instance": "pve-a", "virtualMachineID": 100, "providerID": "proxmox://pve-a/100"}
    });
    let file = k.write("m1.json", &machine.to_string());
    let (created, _, err) = k.run(&["apply", "--server-side", "-f", &file]).await;
    assert!(created, "{err}");
    let out = k.ok(&["get", "proxmoxmachines"]).await;
    let table = columns_of(&out);
    let header: Vec<String> = table.iter().map(|(h, _)| h.clone()).collect();
    assert_eq!(header, expected);
    // cells: each printer column's JSONPath on the object (kubectl leaves absent ones blank)
    let cell = |name: &str| {
        table
            .iter()
            .find(|(h, _)| h == name)
            .map(|(_, v)| v.as_str())
    };
    assert_eq!(cell("NAME"), Some("m1"));
    for (col, want) in [
        ("CLUSTER", "c1"),
        ("INSTANCE", "pve-a"),
        ("VMID", "100"),
        ("PROVIDERID", "proxmox://pve-a/100"),
        ("NODE", ""),
        ("PROVISIONED", ""),
    ] {
        if header.iter().any(|h| h == col) {
            assert_eq!(cell(col), Some(want), "{col}");
        }
    }
    // wide output adds the priority-1 columns
    let wide = k.ok(&["get", "proxmoxmachines", "-o", "wide"]).await;
    let wide_header: Vec<&str> = wide.lines().next().unwrap().split_whitespace().collect();
    let extra = columns
        .iter()
        .filter(|col| col["priority"].as_i64().unwrap_or(0) > 0)
        .count();
    assert_eq!(wide_header.len(), expected.len() + extra);
}

#[tokio::test]
async fn kubectl_scale_uses_the_scale_subresource() {
    let (sim, c) = start().await;
    let k = Kubectl::new(&sim);
    sim.install_crd_yaml(include_str!("../fixtures/fleets.yaml"))
        .unwrap();
    let file = k.write(
        "f1.yaml",
        "apiVersion: example.com/v1\nkind: Fleet\nmetadata:\n  name: f1\n  namespace: default\nspec:\n  replicas: 1\n  template: t\n",
    );
    k.ok(&["apply", "--server-side", "-f", &file]).await;
    let fleet = |c: kube::Client| async move {
        call(
            &c,
            "GET",
            "/apis/example.com/v1/namespaces/default/fleets/f1",
            None,
            None,
        )
        .await
        .body
    };

    // merge patch of the Scale
    assert_eq!(
        k.ok(&["scale", "fleet", "f1", "--replicas", "3"])
            .await
            .trim(),
        "fleet.example.com/f1 scaled"
    );
    let f = fleet(c.clone()).await;
    assert_eq!(f["spec"], json!({"replicas": 3, "template": "t"}));
    let scaler = f["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["subresource"] == "scale")
        .cloned()
        .unwrap();
    assert_eq!(
        (
            &scaler["manager"],
            &scaler["operation"],
            &scaler["fieldsV1"]
        ),
        (
            &json!("kubectl"),
            &json!("Update"),
            &json!({"f:spec": {"f:replicas": {}}})
        )
    );

    // with a precondition: GET then PUT of the Scale
    assert_eq!(
        k.ok(&[
            "scale",
            "fleet",
            "f1",
            "--current-replicas",
            "3",
            "--replicas",
            "5"
        ])
        .await
        .trim(),
        "fleet.example.com/f1 scaled"
    );
    assert_eq!(fleet(c.clone()).await["spec"]["replicas"], 5);
    let (ok, _, err) = k
        .run(&[
            "scale",
            "fleet",
            "f1",
            "--current-replicas",
            "4",
            "--replicas",
            "6",
        ])
        .await;
    assert!(!ok);
    assert!(err.contains("Expected replicas to be 4, was 5"), "{err}");
    assert_eq!(fleet(c.clone()).await["spec"]["replicas"], 5);

    // Nodes print with kube-apiserver's node columns
    let node = k.write(
        "n1.yaml",
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    node-role.kubernetes.io/control-plane: \"\"\nspec:\n  providerID: proxmox://dc-a/1000\n",
    );
    assert_eq!(
        k.ok(&["apply", "-f", &node]).await.trim(),
        "node/n1 created"
    );
    let out = k.ok(&["get", "nodes"]).await;
    let table = columns_of(&out);
    assert_eq!(
        table
            .iter()
            .map(|(h, v)| (h.as_str(), v.as_str()))
            .filter(|(h, _)| *h != "AGE")
            .collect::<Vec<_>>(),
        vec![
            ("NAME", "n1"),
            ("STATUS", "Unknown"),
            ("ROLES", "control-plane"),
            ("VERSION", "")
        ]
    );
}

#[tokio::test]
async fn kubectl_create_raw_sends_bodies_as_written() {
    let (sim, _c) = start().await;
    let k = Kubectl::new(&sim);
    // A kind-less ConfigMap (the shape of the Python client's body) is filled in from
    // the URL; a kind-less Widget is refused as kube-apiserver refuses it.
    let cm = k.write("cm.json", r#"{"metadata":{"name":"raw"},"data":{"k":"v"}}"#);
    let out = k
        .ok(&[
            "create",
            "--raw",
            "/api/v1/namespaces/default/configmaps",
            "-f",
            &cm,
        ])
        .await;
    let created: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(created["kind"], "ConfigMap");
    assert_eq!(created["apiVersion"], "v1");
    assert_eq!(
        k.ok(&["get", "configmap", "raw", "-o", "jsonpath={.data.k}"])
            .await,
        "v"
    );
    let w = k.write("w.json", r#"{"metadata":{"name":"raw"},"spec":{"size":1}}"#);
    let (ok, _out, err) = k
        .run(&[
            "create",
            "--raw",
            "/apis/example.com/v1/namespaces/default/widgets",
            "-f",
            &w,
        ])
        .await;
    assert!(!ok);
    assert!(
        err.contains("Object 'Kind' is missing"),
        "kubectl stderr: {err}"
    );
}
