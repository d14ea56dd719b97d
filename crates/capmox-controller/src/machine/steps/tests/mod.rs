//! The steps' unit tests: each step runs against an in-memory Proxmox
//! ([`crate::pve::fake::FakeProxmox`]) and an in-process Kubernetes API
//! (kube-sim), and the test checks what it did there and what it reported.
//! One file per step, beside [`kit`], which builds the world.

pub(crate) mod kit;

mod adopt;
mod destroy;
mod disks;
mod finalizer;
mod media;
mod power;
mod task;
mod vmid;
