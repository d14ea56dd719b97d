//! VM shapes end to end (docs/vm-shapes.md, docs/flatcar.md): one
//! multi-instance cluster whose machines differ per datacenter.
//!
//! - `dc-a`: the x86 control plane (one machine) with a custom CPU model
//!   and a flag, and a GPU MachineDeployment of two machines asking for the
//!   PCI mapping `gpu`, which dc-a's instance renames to its own mapping
//!   `nvidia-a100`. That mapping has one device on each of two of dc-a's
//!   four nodes, so the two VMs must land on exactly those two nodes
//!   (pve-sim refuses a start without a free device).
//! - `dc-b`: a Proxmox cluster of aarch64 nodes whose template is a bare
//!   disk (no firmware, no EFI disk, no `arch`); the instance says `arch:
//!   aarch64`, and one arm64 worker gets OVMF, an EFI disk, the `virt`
//!   machine type and its bootstrap CD-ROM on SCSI (pve-sim starts nothing
//!   else on aarch64).
//! - `dc-c`: two Flatcar workers (the flatcar flavor's worker templates),
//!   cloned from the datacenter's Flatcar template, booted with Ignition
//!   from an ISO on the storage the instance names (`bootstrapMedia`).
//!
//! Every machine gets a Node (kubelet stand-in). A third GPU machine finds
//! no free device: it waits (`PciDevicesExhausted`) and nothing is cloned
//! for it. The machine templates report what the autoscaler reads (GPU
//! capacity, arm64). Then the Cluster is deleted and nothing is left: no
//! VM, ISO, claim, address or object, only the user's credentials Secrets.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use capmox_e2e::crds::Machine;
use capmox_e2e::env::{self, Env, EnvOptions};
use capmox_e2e::leaks;
use capmox_e2e::observe::{self, MachineRow};
use capmox_e2e::scenario::{self, Progress};
use capmox_e2e::standin::node::env_value;
use kube::ResourceExt;
use kube::api::Api;
use pve_sim::config::PciMappingConfig;
use pve_sim::{SimConfig, VmSnapshot};
use serde_json::{Value, json};

const CLUSTER: &str = "mix1";
/// The custom CPU model and flag of the control plane (`cpu` is written as
/// `<cputype>,flags=<flags>`, `/nodes/{node}/qemu/{vmid}/config`).
const CP_CPU_TYPE: &str = "custom-kube-cp";
const CP_CPU_FLAG: &str = "+aes";
/// The mapping name the GPU machines ask for, and its id in dc-a.
const GPU: &str = "gpu";
const GPU_MAPPING: &str = "nvidia-a100";
/// The dc-a nodes with one GPU each (dc-a has pve-a1..pve-a4).
const GPU_NODES: [&str; 2] = ["pve-a2", "pve-a4"];
/// The storage dc-c's instance puts bootstrap ISOs on (the built-in
/// datacenters' node-local `iso` storage; the default would be the shared
/// `cephfs`).
const FLATCAR_ISO_STORAGE: &str = "local";
const DATACENTERS: [&str; 3] = ["dc-a", "dc-b", "dc-c"];
const CLONE: &str = "/nodes/{node}/qemu/{vmid}/clone";

/// The built-in three datacenters, plus: in dc-a the PCI mapping
/// `nvidia-a100` with one device on each of [`GPU_NODES`]; dc-b's nodes
/// aarch64, its template a bare disk; in dc-c a Flatcar template (tags
/// `capmox;flatcar`, a serial console the Ubuntu one lacks) beside the
/// Ubuntu one.
fn datacenters() -> SimConfig {
    let mut sim = SimConfig::builtin_default();
    let a = sim.cluster_mut("dc-a").unwrap();
    a.pci_mappings.push(PciMappingConfig {
        id: GPU_MAPPING.into(),
        description: Some("one GPU on two of the four nodes".into()),
        map: GPU_NODES
            .iter()
            .map(|n| format!("node={n},path=0000:01:00.0,id=10de:20b0"))
            .collect(),
        mdev: false,
    });
    let b = sim.cluster_mut("dc-b").unwrap();
    for n in &mut b.nodes {
        n.arch = "aarch64".into();
    }
    for t in &mut b.templates {
        t.efidisk = false;
    }
    capmox_e2e::vm_templates::add_flatcar(sim.cluster_mut("dc-c").unwrap());
    sim
}

fn name_of(d: &Value) -> &str {
    d["metadata"]["name"].as_str().unwrap_or_default()
}

/// Renames a document.
fn rename(d: &mut Value, name: &str) {
    d["metadata"]["name"] = json!(name);
}

/// The multi-instance flavor for the three datacenters, reshaped:
/// instances (dc-a's mapping rename; dc-b aarch64; dc-c's ISO storage;
/// only dc-a takes the control plane), the control plane's CPU, dc-a's
/// workers as the GPU pool (2), dc-b's as the arm64 pool (1, its template
/// pinned to dc-b), and dc-c's MachineDeployment with its templates taken
/// from the flatcar flavor (2 Flatcar workers).
fn documents(env: &Env) -> Vec<Value> {
    let mut vars = env.multi_instance_vars(CLUSTER);
    vars.insert("CONTROL_PLANE_MACHINE_COUNT".into(), "1".into());
    vars.insert("WORKER_MACHINE_COUNT".into(), "2".into());
    // The datacenters' default template stays the Ubuntu one; the Flatcar
    // machine template selects the Flatcar one.
    vars.insert("TEMPLATE_TAGS".into(), "[capmox, ubuntu-24.04]".into());
    let render = |what: &str, template: &str| {
        let text = capmox_e2e::clusterctl::render(template, &vars).unwrap();
        scenario::parse_documents(what, &text).unwrap()
    };
    let md = |dc: &str| format!("{CLUSTER}-md-{dc}");
    let (worker, gpu, arm, flatcar) = (
        format!("{CLUSTER}-worker"),
        format!("{CLUSTER}-gpu"),
        format!("{CLUSTER}-arm"),
        format!("{CLUSTER}-flatcar"),
    );

    let mut docs = render("multi-instance", env::MULTI_INSTANCE_TEMPLATE);
    docs.retain(|d| name_of(d) != md("dc-c"));
    let mut arm_template = None;
    for d in &mut docs {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        let name = name_of(d).to_string();
        match kind.as_str() {
            "ProxmoxCluster" => {
                for i in d["spec"]["settings"]["instances"].as_array_mut().unwrap() {
                    match i["name"].as_str().unwrap() {
                        "dc-a" => i["pciMappings"] = json!({GPU: GPU_MAPPING}),
                        "dc-b" => {
                            i["arch"] = json!("aarch64");
                            i["controlPlane"] = json!(false);
                        }
                        "dc-c" => {
                            i["bootstrapMedia"] = json!({"storage": FLATCAR_ISO_STORAGE});
                            i["controlPlane"] = json!(false);
                        }
                        other => panic!("the flavor has no instance {other}"),
                    }
                }
            }
            "ProxmoxMachineTemplate" if name == format!("{CLUSTER}-control-plane") => {
                d["spec"]["template"]["spec"]["cpu"] =
                    json!({"type": CP_CPU_TYPE, "flags": [CP_CPU_FLAG]});
            }
            "ProxmoxMachineTemplate" if name == worker => {
                let mut a = d.clone();
                rename(&mut a, &arm);
                a["spec"]["template"]["spec"]["instance"] = json!("dc-b");
                arm_template = Some(a);
                rename(d, &gpu);
                d["spec"]["template"]["spec"]["pciDevices"] =
                    json!([{"mapping": GPU, "primaryGpu": true}]);
            }
            "MachineDeployment" if name == md("dc-a") => {
                d["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!(gpu);
            }
            "MachineDeployment" if name == md("dc-b") => {
                d["spec"]["replicas"] = json!(1);
                d["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!(arm);
            }
            _ => {}
        }
    }
    docs.push(arm_template.unwrap());

    // dc-c: the flatcar flavor's worker templates and its dc-c
    // MachineDeployment, renamed beside the Ubuntu ones.
    for mut d in render("flatcar", env::FLATCAR_TEMPLATE) {
        let kind = d["kind"].as_str().unwrap_or_default().to_string();
        let name = name_of(&d).to_string();
        match kind.as_str() {
            "KubeadmConfigTemplate" | "ProxmoxMachineTemplate" if name == worker => {
                rename(&mut d, &flatcar);
                docs.push(d);
            }
            "MachineDeployment" if name == md("dc-c") => {
                let spec = &mut d["spec"]["template"]["spec"];
                spec["infrastructureRef"]["name"] = json!(flatcar);
                spec["bootstrap"]["configRef"]["name"] = json!(flatcar);
                docs.push(d);
            }
            _ => {}
        }
    }
    docs
}

/// What the scenario waits for: 1 control-plane machine and 5 workers, all
/// provisioned, running, with a Node when Nodes join.
fn all_up(rows: &[MachineRow], need_node: bool) -> bool {
    rows.iter().filter(|r| r.control_plane).count() == 1
        && rows.iter().filter(|r| !r.control_plane).count() == 5
        && rows
            .iter()
            .all(|r| r.up(need_node) && (!need_node || r.phase == "Running"))
}

/// The machine's VM in its datacenter.
fn vm_of(env: &Env, r: &MachineRow) -> VmSnapshot {
    let dc = r.instance.as_deref().unwrap();
    env.pve
        .cluster(dc)
        .unwrap()
        .vm(r.vmid.unwrap())
        .unwrap_or_else(|| panic!("{}: no VM {:?} in {dc}", r.name, r.vmid))
}

fn conf<'a>(vm: &'a VmSnapshot, key: &str) -> Option<&'a str> {
    vm.config.get(key).map(String::as_str)
}

/// What the ProxmoxMachineTemplates report for the autoscaler, by name:
/// `(capacity["nvidia.com/gpu"], nodeInfo.architecture)`.
type TemplateReport = BTreeMap<String, (Option<String>, Option<String>)>;

async fn template_reports(client: &kube::Client, ns: &str) -> capmox_e2e::Result<TemplateReport> {
    let templates = scenario::list(
        client,
        ns,
        "infrastructure.cluster.x-k8s.io/v1alpha3",
        "ProxmoxMachineTemplate",
    )
    .await?;
    Ok(templates
        .iter()
        .map(|t| {
            let s = |p: &str| t.data.pointer(p).and_then(Value::as_str).map(String::from);
            (
                t.name_any(),
                (
                    s("/status/capacity/nvidia.com~1gpu"),
                    s("/status/nodeInfo/architecture"),
                ),
            )
        })
        .collect())
}

#[tokio::test]
async fn mixed_cluster_of_cpu_gpu_arm64_and_flatcar_machines_then_nothing_left() {
    let mut opts = EnvOptions::new("shapes");
    opts.sim = Some(datacenters());
    let mut env = Env::start(opts).await.unwrap();
    let ns = env.namespace.clone();
    for doc in documents(&env) {
        scenario::apply_value(&env.client, &ns, doc).await.unwrap();
    }
    let need_node = env.nodes_join();
    let rows = env
        .wait_machines(
            "1 control-plane + 2 GPU + 1 arm64 + 2 Flatcar machines running",
            env.waits.sim(3.0 * 400.0),
            |r| all_up(r, need_node),
        )
        .await
        .unwrap();
    assert_eq!(
        observe::per_instance(&rows),
        BTreeMap::from([
            ("dc-a".to_string(), 3),
            ("dc-b".to_string(), 1),
            ("dc-c".to_string(), 2)
        ])
    );
    // The NoCloud seed each running guest booted with: (volume, files).
    let seed_of = |r: &MachineRow| {
        vm_of(&env, r)
            .boot_seed
            .unwrap_or_else(|| panic!("{} booted without a seed", r.name))
    };

    // The control plane: x86 (dc-a), the custom CPU model and flag.
    let cp = rows.iter().find(|r| r.control_plane).unwrap();
    assert_eq!(cp.instance.as_deref(), Some("dc-a"), "{cp:?}");
    let vm = vm_of(&env, cp);
    assert_eq!(
        conf(&vm, "cpu"),
        Some(format!("{CP_CPU_TYPE},flags={CP_CPU_FLAG}").as_str()),
        "{:?}",
        vm.config
    );
    assert_eq!(vm.guest_boot.as_deref(), Some("cloud-init"));

    // The GPU pool: one VM on each node with a device, each passed its
    // node's device through the renamed mapping, running.
    let gpu: Vec<&MachineRow> = rows
        .iter()
        .filter(|r| !r.control_plane && r.instance.as_deref() == Some("dc-a"))
        .collect();
    let mut gpu_nodes = BTreeSet::new();
    for r in &gpu {
        let vm = vm_of(&env, r);
        assert_eq!(
            conf(&vm, "hostpci0"),
            Some(format!("mapping={GPU_MAPPING},x-vga=1").as_str()),
            "{}: {:?}",
            r.name,
            vm.config
        );
        assert_eq!(vm.status, "running", "{}", r.name);
        assert_eq!(r.proxmox_node.as_deref(), Some(vm.node.as_str()));
        gpu_nodes.insert(vm.node);
    }
    assert_eq!(
        gpu_nodes,
        GPU_NODES.iter().map(|n| n.to_string()).collect(),
        "the two GPU machines on the two nodes with a device"
    );
    assert!(conf(&vm_of(&env, cp), "hostpci0").is_none());

    // The arm64 worker: made startable on aarch64 from a bare template.
    let arm = rows
        .iter()
        .find(|r| r.instance.as_deref() == Some("dc-b"))
        .unwrap();
    let vm = vm_of(&env, arm);
    assert_eq!(vm.status, "running");
    assert_eq!(conf(&vm, "bios"), Some("ovmf"), "{:?}", vm.config);
    assert_eq!(conf(&vm, "machine"), Some("virt"), "{:?}", vm.config);
    assert!(
        conf(&vm, "efidisk0").is_some_and(|d| d.starts_with("ceph:")),
        "the EFI disk beside the boot disk: {:?}",
        vm.config
    );
    assert!(conf(&vm, "arch").is_none(), "arch is never written");
    assert!(
        !vm.config.keys().any(|k| k.starts_with("ide")),
        "no IDE on aarch64: {:?}",
        vm.config
    );
    // The bootstrap CD-ROM went on SCSI (ejected after provisioning, the
    // drive stays).
    let cdroms: Vec<&String> = vm
        .config
        .iter()
        .filter(|(_, v)| v.contains("media=cdrom"))
        .map(|(k, _)| k)
        .collect();
    assert!(
        !cdroms.is_empty() && cdroms.iter().all(|k| k.starts_with("scsi")),
        "{:?}",
        vm.config
    );
    assert_eq!(vm.guest_boot.as_deref(), Some("cloud-init"));

    // The Flatcar workers: the Flatcar template, booted with Ignition from
    // an ISO on the instance's storage; their kubelets took the providerID
    // of the config's /etc/proxmox-env.
    let machines: Api<Machine> = Api::namespaced(env.client.clone(), &ns);
    let flatcar: Vec<&MachineRow> = rows
        .iter()
        .filter(|r| r.instance.as_deref() == Some("dc-c"))
        .collect();
    for r in &flatcar {
        let vm = vm_of(&env, r);
        assert_eq!(
            conf(&vm, "serial0"),
            Some("socket"),
            "{}: not cloned from the Flatcar template: {:?}",
            r.name,
            vm.config
        );
        assert_eq!(vm.guest_boot.as_deref(), Some("ignition 2.3.0"));
        let (volume, seed) = seed_of(r);
        assert!(
            volume.starts_with(&format!("{FLATCAR_ISO_STORAGE}:iso/")),
            "{}: {volume}",
            r.name
        );
        let env_file = pve_sim::boot::ignition_file(&seed.user_data, "/etc/proxmox-env").unwrap();
        let m = machines.get(&r.name).await.unwrap();
        assert_eq!(
            env_value(&env_file, "COREOS_CUSTOM_PROVIDER_ID"),
            m.spec.provider_id,
            "{}",
            r.name
        );
    }
    // The other machines' ISOs went to the default: the shared `iso`
    // storage.
    for r in rows
        .iter()
        .filter(|r| r.instance.as_deref() != Some("dc-c"))
    {
        let (volume, _) = seed_of(r);
        assert!(volume.starts_with("cephfs:iso/"), "{}: {volume}", r.name);
    }

    // A third GPU machine finds no free device: it waits, named why, and
    // nothing is cloned for it (it goes with the Cluster below).
    let dc_a = env.pve.cluster("dc-a").unwrap().clone();
    let clones = || dc_a.calls().count("POST", CLONE);
    let clones_before = clones();
    scenario::scale_machine_deployment(&env.client, &ns, &format!("{CLUSTER}-md-dc-a"), 3)
        .await
        .unwrap();
    env.wait_machines(
        "a third GPU machine waits for a free device",
        env.waits.sim(600.0),
        |rows| {
            rows.iter().any(|r| {
                !r.control_plane
                    && r.failure_domain.as_deref() == Some("dc-a")
                    && !r.provisioned
                    && r.reason.as_deref() == Some("PciDevicesExhausted")
            })
        },
    )
    .await
    .unwrap();
    assert_eq!(clones(), clones_before, "nothing cloned without a device");
    assert_eq!(observe::vms(&dc_a).len(), 3);

    // What the autoscaler reads from the machine templates.
    let want: TemplateReport = [
        ("control-plane", None, "amd64"),
        ("gpu", Some("1"), "amd64"),
        ("arm", None, "arm64"),
        ("flatcar", None, "amd64"),
    ]
    .into_iter()
    .map(|(n, gpus, arch)| {
        (
            format!("{CLUSTER}-{n}"),
            (gpus.map(String::from), Some(arch.to_string())),
        )
    })
    .collect();
    let ns_t = ns.clone();
    env.wait_for(
        "the machine templates report GPUs and architectures",
        env.waits.sim(600.0),
        |client| {
            let (ns, want) = (ns_t.clone(), want.clone());
            async move {
                let got = template_reports(&client, &ns).await?;
                Ok(if got == want {
                    Progress::Done(())
                } else {
                    Progress::Pending(format!("got {got:?}, want {want:?}"))
                })
            }
        },
    )
    .await
    .unwrap();

    // Delete the Cluster: every VM, ISO, claim, address and object goes.
    leaks::delete_cluster_and_wait(&mut env, CLUSTER)
        .await
        .unwrap();
    let (left, expected) = leaks::secrets_left(&env.client, &ns, CLUSTER, &DATACENTERS)
        .await
        .unwrap();
    assert_eq!(left, expected);
    if let Some(nodes) = env.nodes() {
        assert!(nodes.list().await.unwrap().is_empty());
    }
    env.shutdown().await;
}
