//! One machine `wl1/m1` stored in kube-sim, its instance `dc-a` served by a
//! [`FakeProxmox`], and a [`Run`] of it whose instance client is the fake.

use std::sync::Arc;

use kube::api::{Api, PostParams};
use kube_sim::{KubeSim, KubeSimOptions};

use crate::api::{ProxmoxMachine, ProxmoxMachineSpec};
use crate::clients::{Identity, Instance};
use crate::context::{ControllerOptions, Shared, ShutdownHandle};
use crate::machine::context::{Context, Run};
use crate::machine::runtime::{MachineOptions, MachineRuntime};
use crate::metrics::Metrics;
use crate::pve::fake::FakeProxmox;
use crate::stores::Stores;

/// The namespace of every test machine.
pub const NS: &str = "wl1";

/// The world of one step test.
pub struct Kit {
    /// The Kubernetes API, served while the test runs.
    _kube: KubeSim,
    /// The machine controller's context.
    pub ctx: Context,
    /// The instance's Proxmox.
    pub pve: Arc<FakeProxmox>,
    _shutdown: ShutdownHandle,
}

impl Kit {
    /// kube-sim with our CRDs, an empty fake Proxmox, fresh runtime.
    pub async fn new() -> Kit {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let kube = KubeSim::start(KubeSimOptions::default()).await.unwrap();
        // Only the ProxmoxMachine CRD: the steps write nothing else.
        for crd in crate::api::crd::all()
            .into_iter()
            .filter(|c| c.spec.names.kind == "ProxmoxMachine")
        {
            kube.install_crd_yaml(&crate::api::crd::to_yaml(&crd).unwrap())
                .unwrap();
        }
        let client = kube.client().await.unwrap();
        let ns = k8s_openapi::api::core::v1::Namespace {
            metadata: kube::api::ObjectMeta {
                name: Some(NS.into()),
                ..Default::default()
            },
            ..Default::default()
        };
        Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let (shared, shutdown) = Shared::new(
            client,
            ControllerOptions::default(),
            Arc::new(Metrics::new()),
            kube::runtime::events::Reporter {
                controller: "capmox-controller".into(),
                instance: None,
            },
            None,
        );
        let runtime = Arc::new(MachineRuntime::new(
            &shared.options,
            MachineOptions::default(),
        ));
        let (stores, _writers) = Stores::new();
        Kit {
            _kube: kube,
            ctx: Context {
                shared: Arc::new(shared),
                runtime,
                stores,
            },
            pve: Arc::new(FakeProxmox::new()),
            _shutdown: shutdown,
        }
    }

    /// The ProxmoxMachine API of [`NS`].
    pub fn machines(&self) -> Api<ProxmoxMachine> {
        Api::namespaced(self.ctx.shared.kube.clone(), NS)
    }

    /// Creates machine `m1` with `spec` (instance `dc-a`) and returns it as
    /// stored (with its UID and resourceVersion).
    pub async fn machine(&self, spec: ProxmoxMachineSpec) -> ProxmoxMachine {
        let mut m = ProxmoxMachine::new(
            "m1",
            ProxmoxMachineSpec {
                instance: Some("dc-a".into()),
                ..spec
            },
        );
        m.metadata.namespace = Some(NS.into());
        self.machines()
            .create(&PostParams::default(), &m)
            .await
            .unwrap()
    }

    /// The machine as stored now.
    pub async fn stored(&self) -> ProxmoxMachine {
        self.machines().get("m1").await.unwrap()
    }

    /// A run of `m` whose instance client is the fake.
    pub fn run<'a>(&'a self, m: &'a ProxmoxMachine) -> Run<'a> {
        let mut run = Run::new(&self.ctx, m);
        run.client = Some(Instance {
            name: "dc-a".into(),
            api: self.pve.clone(),
            identity: Identity::new("dc-a"),
        });
        run
    }
}

/// The reason codes of the events `run` queued, in order.
pub fn event_codes(run: &Run<'_>) -> Vec<&'static str> {
    run.events.iter().map(|(_, r)| r.code()).collect()
}
