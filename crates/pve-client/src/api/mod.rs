//! The API, by area. Each submodule adds methods to [`crate::PveClient`] and
//! defines the typed requests and responses of its endpoints.
//!
//! | module | endpoints |
//! |---|---|
//! | [`version`] | `GET /version` |
//! | [`access`] | `GET /access/permissions` |
//! | [`cluster`] | `GET /cluster/status`, `/cluster/resources`, `/cluster/nextid` |
//! | [`nodes`] | `GET /nodes`, `/nodes/{node}/status` |
//! | [`mapping`] | `GET /cluster/mapping/pci` |
//! | [`storage`] | storages, storage status, content list, ISO upload, volume delete |
//! | [`qemu`] | VM list, config GET/POST/PUT, pending, clone, resize, status, power, delete |
//! | [`agent`] | guest agent `ping`, `network-get-interfaces`, `exec`, `exec-status` |
//! | [`ha`] | HA resources, groups (PVE 8), rules (PVE 9) |
//! | [`pools`] | `GET /pools`, `POST /pools` |
//! | [`tasks`] | task status, log, stop; waiting is in [`crate::task`] |
//!
//! Response structs deserialise leniently (numbers as strings, `0/1`, `""`,
//! `null`; docs/proxmox-semantics.md §1) and carry only the fields the provider reads.

pub mod access;
pub mod agent;
pub mod cluster;
pub mod ha;
pub mod mapping;
pub mod nodes;
pub mod pools;
pub mod qemu;
pub mod storage;
pub mod tasks;
pub mod version;
