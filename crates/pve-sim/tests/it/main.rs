//! Integration tests of the Proxmox VE simulator.
//!
//! One test binary for all of the crate's integration tests: each module
//! below was its own binary, and every binary linked the whole dependency
//! tree again (about 100 MB and several seconds of linking each).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod binary;
mod clone;
mod config;
mod control;
mod core;
mod disk;
mod faults;
mod misc;
mod power;
mod storage;
